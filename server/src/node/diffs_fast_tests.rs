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
    parse(l.as_bytes(), |_| ()).is_some()
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
        assert_eq!(p.diffs_off_layout(), 0);
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
    assert_eq!(p.diffs_off_layout(), 1);
}

proptest::proptest! {
    /// Wherever the fast path answers for a changed line, serde answers the same.
    #[test]
    fn a_changed_line_is_read_as_serde_reads_it_or_left_to_it(
        edits in proptest::collection::vec((0usize..2000, 0usize..3, proptest::sample::select(
            b"\"\\{}[],:. 0129aAbBe-x\t\x80".to_vec())), 1..4),
    ) {
        let mut bytes = line(&EVENTS).into_bytes();
        for (at, op, b) in edits {
            let at = at % (bytes.len() + 1);
            match op {
                0 if at < bytes.len() => bytes[at] = b,
                1 if at < bytes.len() => { bytes.remove(at); }
                _ => bytes.insert(at, b),
            }
        }
        let mut p = NodeParser::new();
        let answered = p.parse_bytes(Stream::Diffs, &bytes);
        if parse(&bytes, |_| ()).is_some() {
            let text = std::str::from_utf8(&bytes).expect("the fast path read only UTF-8");
            proptest::prop_assert_eq!(answered, p.parse_in_full(Stream::Diffs, text));
        }
    }
}
