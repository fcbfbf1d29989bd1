use super::*;
use crate::node::decimal::Fixed;
use crate::node::event::Side;

const HEAD: &str = r#""local_time":"2026-05-05T17:39:13.394386432","block_time":"2026-05-05T17:39:13.024084407","block_number":985148182"#;

fn line(events: &str) -> String {
    format!("{{{HEAD},\"events\":[{events}]}}")
}

const OPEN: &str = r#"{"time":"2026-05-05T17:39:13.024084407","user":"0x0fd468a73084daa6ea77a9261e40fdec3e67e0c7","hash":"0x473d1a580b918d5648b6043ab82b16010b00323da694ac28eb05c5aaca956740","builder":null,"status":"open","order":{"coin":"BTC","side":"A","limitPx":"81311.0","sz":"0.61488","oid":412036451270,"timestamp":1778002753024,"triggerCondition":"N/A","isTrigger":false,"triggerPx":"0.0","children":[],"isPositionTpsl":false,"reduceOnly":false,"orderType":"Limit","origSz":"0.61488","tif":"Alo","cloid":"0x000000000000000018ab2cd67dbb0c60"}}"#;
const REJECTED: &str = r#"{"time":"2026-05-05T17:39:13.024084407","user":"0x4f235c15474f984504b0f188755021ae45c2fa65","hash":null,"builder":null,"status":"badAloPxRejected","order":{"coin":"BTC","side":"A","limitPx":"65045.0","sz":"0.0003","oid":412036451268,"timestamp":1778002753024,"triggerCondition":"N/A","isTrigger":false,"triggerPx":"0.0","children":[],"isPositionTpsl":false,"reduceOnly":false,"orderType":"Limit","origSz":"0.0003","tif":"Alo","cloid":null}}"#;

#[test]
fn parses_the_three_diff_kinds() {
    let l = line(concat!(
        r#"{"user":"0x5eaac7c475b1fad85701f02c4e9e796a53f94bd5","oid":412036231803,"coin":"BTC","side":"A","px":"81308.0","raw_book_diff":{"update":{"origSz":"0.1804","newSz":"0.18007"}}},"#,
        r#"{"user":"0x0fd468a73084daa6ea77a9261e40fdec3e67e0c7","oid":412036451270,"coin":"BTC","side":"A","px":"81311.0","raw_book_diff":{"new":{"sz":"0.61488"}}},"#,
        r#"{"user":"0xd071d6d6ea52f5aa34b79e47f908ee48c8215837","oid":412036441463,"coin":"@107","side":"B","px":"81233.0","raw_book_diff":"remove"},"#,
        r#"{"user":"0xd071d6d6ea52f5aa34b79e47f908ee48c8215837","oid":7,"coin":"dex:ABC","side":"B","px":"1.5","raw_book_diff":{"new":{"sz":"2.0","insertBefore":6}}}"#
    ));
    let parsed = NodeParser::new().parse(Stream::Diffs, &l).unwrap();
    assert_eq!(parsed.meta.height, 985148182);
    assert_eq!(parsed.meta.block_time, 1_778_002_753_024_084_407);
    assert_eq!(parsed.meta.local_time, 1_778_002_753_394_386_432);
    let Events::Diffs(d) = parsed.events else { panic!("not diffs") };
    assert_eq!(d.len(), 4);
    assert_eq!(
        d[0].kind,
        DiffKind::Update { orig_sz: Fixed::parse("0.1804").unwrap(), new_sz: Fixed::parse("0.18007").unwrap() }
    );
    assert_eq!(d[1].kind, DiffKind::New { sz: Fixed::parse("0.61488").unwrap(), insert_before: None });
    assert_eq!(d[1].side, Side::Ask);
    assert_eq!(d[2].kind, DiffKind::Remove);
    assert_eq!(&*d[2].coin, "@107");
    assert_eq!(d[3].kind, DiffKind::New { sz: Fixed::parse("2.0").unwrap(), insert_before: Some(6) });
    assert_eq!(d[1].px.to_string(), "81311.0");
}

#[test]
fn invalid_utf8_is_an_error_where_the_book_reads_it_and_ignored_in_a_rejection() {
    let bad = |event: &str| line(&format!("{REJECTED},{event}")).replacen("0x0fd4", "0x0f\u{FFFD}", 1).into_bytes();
    // Turn the replacement character into a lone continuation byte: not UTF-8.
    let break_utf8 = |mut b: Vec<u8>| {
        let at = b.windows(3).position(|w| w == "\u{FFFD}".as_bytes()).unwrap();
        b.splice(at..at + 3, [0x80]);
        b
    };
    let e = NodeParser::new().parse_bytes(Stream::Statuses, &break_utf8(bad(OPEN))).unwrap_err();
    assert!(e.message.contains("utf-8"), "{e}");
    let rejected_twice = REJECTED.replacen("0x4f23", "0x0fd4", 1);
    let parsed = NodeParser::new().parse_bytes(Stream::Statuses, &break_utf8(bad(&rejected_twice))).unwrap();
    assert_eq!(parsed.events, Events::Statuses { kept: vec![], rejected: 2 });
    let e = NodeParser::new().parse_bytes(Stream::Diffs, b"{\"x\":\"\x80\"}").unwrap_err();
    assert!(e.message.contains("utf-8"), "{e}");
}

#[test]
fn skips_rejections_and_keeps_opening_statuses() {
    let l = line(&format!("{REJECTED},{OPEN},{REJECTED}"));
    let parsed = NodeParser::new().parse(Stream::Statuses, &l).unwrap();
    let Events::Statuses { kept, rejected } = parsed.events else { panic!("not statuses") };
    assert_eq!(rejected, 2);
    assert_eq!(kept.len(), 1);
    let s = &kept[0];
    assert!(s.is_opening());
    assert_eq!(&*s.status, "open");
    assert_eq!(s.order.oid, 412036451270);
    assert_eq!(s.order.flavor.tif.as_deref(), Some("Alo"));
    assert_eq!(s.order.children, None);
    assert_eq!(s.builder, None);
    assert_eq!(s.order.cloid.unwrap().to_string(), "0x000000000000000018ab2cd67dbb0c60");
}

#[test]
fn order_before_status_still_parses() {
    let reordered = r#"{"order":{"coin":"BTC","side":"B","limitPx":"1.0","sz":"1.0","oid":1,"timestamp":1,"children":[{"coin":"BTC"}],"tif":null,"cloid":null},"status":"triggered","user":"0x0fd468a73084daa6ea77a9261e40fdec3e67e0c7","time":"2026-05-05T17:39:13.1","builder":{"b":"0x0fd468a73084daa6ea77a9261e40fdec3e67e0c7","f":5},"hash":null}"#;
    let parsed = NodeParser::new().parse(Stream::Statuses, &line(reordered)).unwrap();
    let Events::Statuses { kept, .. } = parsed.events else { panic!("not statuses") };
    assert!(kept[0].is_opening());
    assert_eq!(kept[0].order.children.as_deref(), Some(r#"[{"coin":"BTC"}]"#));
    assert_eq!(kept[0].builder.as_deref(), Some(r#"{"b":"0x0fd468a73084daa6ea77a9261e40fdec3e67e0c7","f":5}"#));
    assert_eq!(kept[0].order.flavor.tif, None);
}

#[test]
fn trigger_open_is_not_opening() {
    let trig = OPEN.replace(r#""isTrigger":false"#, r#""isTrigger":true"#);
    let parsed = NodeParser::new().parse(Stream::Statuses, &line(&trig)).unwrap();
    let Events::Statuses { kept, .. } = parsed.events else { panic!("not statuses") };
    assert!(!kept[0].is_opening());
}

#[test]
fn parses_fills() {
    let f = r#"["0x1624a8af8b91cc781586b4d7a33b8e693dc11015",{"coin":"BTC","px":"81308.0","sz":"0.00033","side":"B","time":1778002753024,"startPosition":"0.20486","dir":"Open Long","closedPnl":"0.0","hash":"0x0000000000000000000000000000000000000000000000000000000000000000","oid":412036451245,"crossed":true,"fee":"0.010866","tid":316059956208702,"feeToken":"USDC","twapId":1790552,"liquidation":{"liquidatedUser":"0x1","markPx":"1.0","method":"market"}}]"#;
    let parsed = NodeParser::new().parse(Stream::Fills, &line(f)).unwrap();
    let Events::Fills(fills) = parsed.events else { panic!("not fills") };
    assert_eq!(fills[0].tid, 316059956208702);
    assert!(fills[0].crossed);
    assert_eq!(fills[0].sz.to_string(), "0.00033");
}

#[test]
fn empty_events() {
    let parsed = NodeParser::new().parse(Stream::Fills, &line("")).unwrap();
    assert_eq!(parsed.events, Events::Fills(vec![]));
}

#[test]
fn malformed_lines_name_the_stream() {
    let mut p = NodeParser::new();
    let bad_px = line(
        r#"{"user":"0x5eaac7c475b1fad85701f02c4e9e796a53f94bd5","oid":1,"coin":"BTC","side":"A","px":"-1","raw_book_diff":"remove"}"#,
    );
    let e = p.parse(Stream::Diffs, &bad_px).unwrap_err();
    assert_eq!(e.stream, Stream::Diffs);
    assert!(e.to_string().contains("malformed raw_book_diffs line"), "{e}");
    assert!(e.message.contains("invalid character '-'"), "{e}");
    let truncated = &line(OPEN)[..200];
    assert!(p.parse(Stream::Statuses, truncated).is_err());
    assert!(p.parse(Stream::Statuses, "").is_err());
    let bad_side = line(
        r#"{"user":"0x5eaac7c475b1fad85701f02c4e9e796a53f94bd5","oid":1,"coin":"BTC","side":"X","px":"1.0","raw_book_diff":"remove"}"#,
    );
    assert!(p.parse(Stream::Diffs, &bad_side).unwrap_err().message.contains("side"));
}

proptest::proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..400)) {
        let s = String::from_utf8_lossy(&bytes);
        let mut p = NodeParser::new();
        for stream in Stream::ALL {
            let _ = p.parse(stream, &s);
        }
    }

    #[test]
    fn every_truncation_is_refused_not_panicking(cut in 0usize..1500) {
        let full = line(&format!("{OPEN},{REJECTED}"));
        let cut = cut.min(full.len() - 1);
        let mut p = NodeParser::new();
        proptest::prop_assert!(p.parse(Stream::Statuses, &full[..cut]).is_err());
    }
}

/// Events in the node's layout and around it: kept and rejected, children that look like events, strings holding
/// the patterns the fast path searches for, whitespace and key orders the node does not write.
fn status_event(kind: u8, status: &str, noise: &str) -> String {
    let builder = serde_json::to_string(&format!(r#"{noise}"status":"open"}},{{"time":"{{["#)).unwrap();
    match kind % 4 {
        0 => OPEN.replace(r#""status":"open""#, &format!(r#""status":"{status}""#)),
        1 => OPEN
            .replace(r#""builder":null"#, &format!(r#""builder":{builder}"#))
            .replace(r#""status":"open""#, &format!(r#""status":"{status}""#)),
        2 => OPEN
            .replace(r#""children":[]"#, r#""children":[{"time":"t","status":"open"},{"time":"u"}]"#)
            .replace(r#""status":"open""#, &format!(r#""status":"{status}""#)),
        _ => OPEN.replace(r#""status":"open","#, "").replacen('{', &format!(r#"{{"status":"{status}","#), 1),
    }
}

proptest::proptest! {
    #[test]
    fn status_fast_path_equals_the_full_parse(
        events in proptest::collection::vec((0u8..8, 0usize..6), 0..12),
        sep in proptest::sample::select(vec![",", ", ", ",\n"]),
        noise in "[ -~]{0,12}",
    ) {
        let statuses = ["open", "badAloPxRejected", "filled", "canceled", "minTradeNtlRejected", "triggered"];
        let body: Vec<String> = events.iter().map(|&(k, s)| status_event(k, statuses[s], &noise)).collect();
        let l = line(&body.join(sep));
        let mut p = NodeParser::new();
        let full = p.parse_in_full(Stream::Statuses, &l);
        proptest::prop_assert!(full.is_ok(), "{l}");
        if sep == "," && events.iter().all(|&(k, _)| k % 4 < 2) {
            let split = p.statuses.split(l.as_bytes(), None);
            proptest::prop_assert!(split.and_then(|s| p.split_statuses(s)).is_some(), "node layout not fast: {l}");
        }
        proptest::prop_assert_eq!(p.parse(Stream::Statuses, &l), full);
    }
}
