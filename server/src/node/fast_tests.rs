use super::*;
use crate::node::{Events, NodeParser, Stream};

const HEAD: &str = r#"{"local_time":"2026-05-05T17:39:13.394386432","block_time":"2026-05-05T17:39:13.024084407","block_number":985148182"#;

/// The node's three kinds, `insertBefore`, and coins of every family (perp, spot, builder dex).
const EVENTS: [&str; 4] = [
    r#"{"user":"0x5eaac7c475b1fad85701f02c4e9e796a53f94bd5","oid":412036231803,"coin":"BTC","side":"A","px":"81308.0","raw_book_diff":{"update":{"origSz":"0.1804","newSz":"0.18007"}}}"#,
    r#"{"user":"0x0fd468a73084daa6ea77a9261e40fdec3e67e0c7","oid":412036451270,"coin":"@107","side":"A","px":"81311.0","raw_book_diff":{"new":{"sz":"0.61488"}}}"#,
    r#"{"user":"0xd071d6d6ea52f5aa34b79e47f908ee48c8215837","oid":0,"coin":"BTC","side":"B","px":"81233.0","raw_book_diff":"remove"}"#,
    r#"{"user":"0xd071d6d6ea52f5aa34b79e47f908ee48c8215837","oid":7,"coin":"dex:ABC","side":"B","px":"1.5","raw_book_diff":{"new":{"sz":"2.0","insertBefore":6}}}"#,
];

fn line(events: &[&str]) -> String {
    format!("{HEAD},\"events\":[{}]}}", events.join(","))
}

fn is_fast(l: &str) -> bool {
    diffs(l.as_bytes(), |_| ()).is_some()
}

/// What the parser answers (fast where it can) against serde alone.
fn check_same(l: &str) {
    let mut p = NodeParser::new();
    assert_eq!(p.parse(Stream::Diffs, l), p.parse_in_full(Stream::Diffs, l), "{l}");
}

#[test]
fn the_node_layout_is_read_fast_and_as_serde_reads_it() {
    for l in [line(&EVENTS), line(&[]), line(&EVENTS[2..3]), format!("{}\n", line(&EVENTS))] {
        assert!(is_fast(&l), "{l}");
        let mut p = NodeParser::new();
        let fast = p.parse(Stream::Diffs, &l).unwrap();
        assert_eq!(p.off_layout(Stream::Diffs), 0);
        assert_eq!(Ok(&fast), p.parse_in_full(Stream::Diffs, &l).as_ref());
    }
    let Events::Diffs(d) = NodeParser::new().parse(Stream::Diffs, &line(&EVENTS)).unwrap().events else {
        panic!("not diffs")
    };
    assert_eq!(d.len(), 4);
    assert_eq!((&*d[1].coin, d[2].oid), ("@107", 0));
}

#[test]
fn anything_off_the_layout_is_left_to_serde() {
    let ev = EVENTS[0];
    let off = [
        // Whitespace, another key order, an unknown key.
        line(&EVENTS).replace(",{", ", {"),
        line(&[&ev.replace(r#""oid":412036231803,"coin":"BTC""#, r#""coin":"BTC","oid":412036231803"#)]),
        line(&[&ev.replace(r#""side":"A""#, r#""side":"A","extra":1"#)]),
        // An escape serde decodes (the same coin), and ones it refuses or reads differently.
        line(&[&ev.replace(r#""BTC""#, r#""B\u0054C""#)]),
        line(&[&ev.replace(r#""0.1804""#, r#""0.18\u0030""#)]),
        line(&[&ev.replace("BTC", "B\tC")]),
        // Numbers serde refuses for a u64, or reads as another type.
        line(&[&ev.replace("412036231803", "0412036231803")]),
        line(&[&ev.replace("412036231803", "4.1e11")]),
        line(&[&ev.replace("412036231803", "-1")]),
        line(&[&ev.replace("412036231803", "18446744073709551616")]),
        // A side, decimal or address serde refuses; trailing bytes; a line cut short.
        line(&[&ev.replace(r#""A""#, r#""a""#)]),
        line(&[&ev.replace("0.1804", "0.1804.")]),
        line(&[&ev.replace("0x5eaa", "0x5eaaff")]),
        // An address a digit short, so its closing quote comes where a fixed-length one has its last digit.
        line(&[&ev.replace("0x5eaa", "0x5ea")]),
        format!("{} x", line(&EVENTS)),
        line(&EVENTS)[..200].to_string(),
    ];
    for l in &off {
        assert!(!is_fast(l), "{l}");
        check_same(l);
    }
    // Serde reads the first five (its errors are the ones the parser reports).
    assert!(off[..5].iter().all(|l| NodeParser::new().parse_in_full(Stream::Diffs, l).is_ok()));
    let mut p = NodeParser::new();
    let _ = p.parse(Stream::Diffs, &off[0]);
    assert_eq!(p.off_layout(Stream::Diffs), 1);
}

/// `line` with each edit applied in turn: (place, 0 replace / 1 delete / 2 insert, byte).
fn edited(line: String, edits: &[(usize, usize, u8)]) -> Vec<u8> {
    let mut bytes = line.into_bytes();
    for &(at, op, b) in edits {
        let at = at % (bytes.len() + 1);
        match op {
            0 if at < bytes.len() => bytes[at] = b,
            1 if at < bytes.len() => {
                bytes.remove(at);
            }
            _ => bytes.insert(at, b),
        }
    }
    bytes
}

proptest::proptest! {
    /// Wherever the fast path answers for a changed line, serde answers the same.
    #[test]
    fn a_changed_line_is_read_as_serde_reads_it_or_left_to_it(
        edits in proptest::collection::vec((0usize..2000, 0usize..3, proptest::sample::select(
            b"\"\\{}[],:. 0129aAbBe-x\t\x80".to_vec())), 1..4),
    ) {
        let bytes = edited(line(&EVENTS), &edits);
        let mut p = NodeParser::new();
        let answered = p.parse_bytes(Stream::Diffs, &bytes);
        if diffs(&bytes, |_| ()).is_some() {
            let text = std::str::from_utf8(&bytes).expect("the fast path read only UTF-8");
            proptest::prop_assert_eq!(answered, p.parse_in_full(Stream::Diffs, text));
        }
    }
}

const A: &str = "0x1624a8af8b91cc781586b4d7a33b8e693dc11015";

/// Fills as the node writes them: with and without a cloid, a TWAP id or null, and the optional fields a
/// liquidation or a builder adds after `tid` (an object among them).
const FILLS: [&str; 4] = [
    r#"["0x1624a8af8b91cc781586b4d7a33b8e693dc11015",{"coin":"BTC","px":"81308.0","sz":"0.00033","side":"B","time":1778002753024,"startPosition":"0.20486","dir":"Open Long","closedPnl":"0.0","hash":"0x0000000000000000000000000000000000000000000000000000000000000000","oid":412036451245,"crossed":true,"fee":"0.010866","tid":316059956208702,"feeToken":"USDC","twapId":1790552}]"#,
    r#"["0x5eaac7c475b1fad85701f02c4e9e796a53f94bd5",{"coin":"BTC","px":"81308.0","sz":"0.00033","side":"A","time":1778002753024,"startPosition":"-0.29602","dir":"Open Short","closedPnl":"0.0","hash":"0x0000000000000000000000000000000000000000000000000000000000000000","oid":412036231803,"crossed":false,"fee":"-0.000804","tid":316059956208702,"cloid":"0x00000000052e29a900002af647791c39","feeToken":"USDC","twapId":null}]"#,
    r#"["0x1624a8af8b91cc781586b4d7a33b8e693dc11015",{"coin":"@107","px":"40.1","sz":"2.0","side":"A","time":1778002753024,"startPosition":"5.0","dir":"Sell","closedPnl":"-1.5","hash":"0x473d1a580b918d5648b6043ab82b16010b00323da694ac28eb05c5aaca956740","oid":7,"crossed":true,"fee":"0.01","tid":0,"feeToken":"USDC","builderFee":"0.001","twapId":null,"liquidation":{"liquidatedUser":"0x5eaac7c475b1fad85701f02c4e9e796a53f94bd5","markPx":"40.0","method":"market","ids":[1,-2,[]],"ok":false}}]"#,
    r#"["0x5eaac7c475b1fad85701f02c4e9e796a53f94bd5",{"coin":"dex:ABC","px":"1.5","sz":"3.0","side":"B","time":0,"startPosition":"0.0","dir":"Open Long","closedPnl":"0.0","hash":"0x473d1a580b918d5648b6043ab82b16010b00323da694ac28eb05c5aaca956740","oid":8,"crossed":false,"fee":"0.0","tid":9,"feeToken":"USDC","twapId":null}]"#,
];

fn fills_fast(l: &str) -> bool {
    fills(l.as_bytes(), |_, _, _| ()).is_some()
}

/// A parser following user A, and the serde reference for A's verbatim fills.
fn watching_a() -> (NodeParser, crate::node::user_watch::WatchView) {
    let watched = std::sync::Arc::new(crate::node::Watched::new());
    watched.add(crate::node::Address::parse(A).unwrap());
    let view = watched.view();
    (NodeParser::with_watched(watched), view)
}

#[test]
fn the_node_fills_layout_is_read_fast_and_a_watched_users_fills_kept_verbatim() {
    for l in [line(&FILLS), line(&[]), line(&FILLS[1..2]), format!("{}\n", line(&FILLS))] {
        assert!(fills_fast(&l), "{l}");
        let (mut p, view) = watching_a();
        let fast = p.parse(Stream::Fills, &l).unwrap();
        assert_eq!(p.off_layout(Stream::Fills), 0);
        let full = p.parse_in_full(Stream::Fills, &l).unwrap();
        assert_eq!((&fast.meta, &fast.events), (&full.meta, &full.events));
        assert_eq!(fast.users.fills, crate::node::user_events::watched_fills(&l, &view), "{l}");
    }
    let (mut p, _) = watching_a();
    let parsed = p.parse(Stream::Fills, &line(&FILLS)).unwrap();
    let Events::Fills(f) = &parsed.events else { panic!("not fills") };
    assert_eq!((f.len(), &*f[2].coin, f[3].tid), (4, "@107", 9));
    // A's two fills, each exactly as written.
    let verbatim: Vec<&str> = parsed.users.fills.iter().map(|(_, raw)| &**raw).collect();
    let object = |f: &'static str| &f[f.find('{').unwrap()..f.len() - 1];
    assert_eq!(verbatim, [object(FILLS[0]), object(FILLS[2])]);
}

#[test]
fn fills_off_the_layout_are_left_to_serde() {
    let f = FILLS[1];
    let off = [
        // Serde reads these: whitespace, another key order, an escape, a fraction in a skipped number.
        line(&FILLS).replace("],[", "], ["),
        line(&[&f.replace(r#""px":"81308.0","sz":"0.00033""#, r#""sz":"0.00033","px":"81308.0""#)]),
        line(&[&f.replace("Open Short", r"Open\u0020Short")]),
        line(&[&f.replace(r#""twapId":null"#, r#""twapId":1.5"#)]),
        // Serde refuses these: a field it reads given twice, a time past i64, a third array item, bad booleans.
        line(&[&f.replace(r#""twapId":null"#, r#""twapId":null,"oid":3"#)]),
        line(&[&f.replace("1778002753024", "9223372036854775808")]),
        line(&[&f.replace("}]", "},1]")]),
        line(&[&f.replace("false", "fals")]),
        line(&[&f.replace("false", "0")]),
    ];
    for l in &off {
        assert!(!fills_fast(l), "{l}");
        let mut p = NodeParser::new();
        assert_eq!(p.parse(Stream::Fills, l), p.parse_in_full(Stream::Fills, l), "{l}");
    }
    assert!(off[..4].iter().all(|l| NodeParser::new().parse_in_full(Stream::Fills, l).is_ok()));
    let mut p = NodeParser::new();
    let _ = p.parse(Stream::Fills, &off[0]);
    assert_eq!(p.off_layout(Stream::Fills), 1);
}

proptest::proptest! {
    /// Wherever the fills fast path answers for a changed line, serde answers the same, users' fills included.
    #[test]
    fn a_changed_fills_line_is_read_as_serde_reads_it_or_left_to_it(
        edits in proptest::collection::vec((0usize..3000, 0usize..3, proptest::sample::select(
            b"\"\\{}[],:. 0129aAbBe-xnult\t\x80".to_vec())), 1..4),
    ) {
        let bytes = edited(line(&FILLS), &edits);
        let (mut p, view) = watching_a();
        let answered = p.parse_bytes(Stream::Fills, &bytes);
        if fills(&bytes, |_, _, _| ()).is_some() {
            let text = std::str::from_utf8(&bytes).expect("the fast path read only UTF-8");
            let full = p.parse_in_full(Stream::Fills, text).expect("serde reads what the fast path read");
            let answered = answered.expect("the fast path's answer");
            proptest::prop_assert_eq!((&answered.meta, &answered.events), (&full.meta, &full.events));
            proptest::prop_assert_eq!(answered.users.fills, crate::node::user_events::watched_fills(text, &view));
        }
    }
}
