//! Acceptance on the real mainnet capture: both modes replay every block exactly and agree order by order.

mod common;
mod plain_book;

use hlbook::book::Books;
use hlbook::book::snapshot::load_books;
use hlbook::ingest::replay::replay;
use hlbook::node::{Fixed, Mode, Side};

fn full_l4(books: &Books) -> Vec<(u64, Side, Fixed, Fixed, String)> {
    let book = books.coin("BTC").unwrap();
    [Side::Bid, Side::Ask]
        .into_iter()
        .flat_map(|s| book.orders(s).map(|o| (o.oid, o.side, o.px, o.sz, o.user.to_string())))
        .collect()
}

fn run(cap: &common::Capture, mode: Mode) -> (Vec<(u64, u64)>, Books) {
    let mut books = load_books(&cap.snapshot).expect("snapshot loads");
    // The snapshot's file name and its README ("51,351 orders") say these.
    assert_eq!(books.height(), 985148181);
    assert_eq!(books.order_count(), 51_351);
    let mut digests = Vec::new();
    replay(&mut books, &cap.node_dir, mode, |step| {
        digests.push((step.block.height, common::l4_digest(step.books)));
    })
    .unwrap_or_else(|e| panic!("{mode:?} replay failed: {e}"));
    (digests, books)
}

#[test]
fn both_modes_replay_the_capture_exactly() {
    let Some(cap) = common::unpack() else { return };
    let (by_block, bb) = run(&cap, Mode::ByBlock);
    let (streaming, sb) = run(&cap, Mode::Streaming);

    for (mode, books) in [("by-block", &bb), ("streaming", &sb)] {
        let c = books.counters();
        assert_eq!(c.inconsistencies, 0, "{mode}: {c:?}");
        assert_eq!(c.gaps, 0, "{mode}");
        assert_eq!(c.blocks_applied, 51, "{mode}");
        assert_eq!(books.untrusted().count(), 0, "{mode}");
        assert_eq!(books.height(), 985148232, "{mode}");
    }
    let heights: Vec<u64> = by_block.iter().map(|(h, _)| *h).collect();
    assert_eq!(heights, (985148182..=985148232).collect::<Vec<_>>());
    assert_eq!(by_block, streaming, "L4 books differ between modes after some block");
    assert_eq!(full_l4(&bb), full_l4(&sb));

    // The end state against the test's own rebuild of the book from the files (plain_book.rs), which agrees with
    // the capture's README: 51,336 resting orders, best bid 81307.0 of 2.80623 over 9 orders.
    let plain = plain_book::PlainBook::at_end(&cap.snapshot, &cap.node_dir);
    assert_eq!(plain.len(), 51_336, "the capture's README");
    assert_eq!(plain.best_bid(), ("81307.0".into(), "2.80623".into(), 9), "the capture's README");
    let btc = bb.coin("BTC").unwrap();
    assert_eq!(btc.len(), plain.len());
    let (px, level) = btc.best(Side::Bid).unwrap();
    assert_eq!((px.to_string(), level.sz.to_string(), level.n as usize), plain.best_bid());
}

#[test]
fn every_number_in_the_capture_formats_back_losslessly() {
    let Some(cap) = common::unpack() else { return };
    let mut checked = 0;
    for (dir, max_lines) in [
        ("node_raw_book_diffs_by_block", usize::MAX),
        ("node_fills_by_block", usize::MAX),
        ("node_order_statuses_by_block", 3),
    ] {
        let text = std::fs::read_to_string(cap.node_dir.join(dir).join("hourly/20260505/17")).unwrap();
        for line in text.lines().take(max_lines) {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            checked += check_numbers(&v);
        }
    }
    assert!(checked > 2_000, "only {checked} numbers checked");
}

fn check_numbers(v: &serde_json::Value) -> usize {
    match v {
        serde_json::Value::Object(m) => m
            .iter()
            .map(|(k, v)| match (k.as_str(), v) {
                ("px" | "sz" | "limitPx" | "origSz" | "newSz" | "triggerPx", serde_json::Value::String(s)) => {
                    assert_eq!(Fixed::parse(s).unwrap().to_string(), *s);
                    1
                }
                _ => check_numbers(v),
            })
            .sum(),
        serde_json::Value::Array(a) => a.iter().map(check_numbers).sum(),
        _ => 0,
    }
}

#[test]
fn fast_paths_parse_every_capture_line_as_the_full_parse_does() {
    use hlbook::node::Stream;
    let Some(cap) = common::unpack() else { return };
    let mut parser = hlbook::node::NodeParser::new();
    for mode in [Mode::ByBlock, Mode::Streaming] {
        let lines = common::lines_in_write_order(&cap.node_dir, mode);
        for want in Stream::ALL {
            let of_stream: Vec<_> = lines.iter().filter(|(s, _, _)| *s == want).collect();
            assert!(!of_stream.is_empty());
            for (stream, height, line) in of_stream {
                let full = parser.parse_in_full(*stream, line).expect("capture line parses");
                assert_eq!(parser.parse(*stream, line).unwrap(), full, "{mode:?} {stream} block {height}");
            }
        }
    }
    // Every line of the capture is in the layout the fast paths read.
    for stream in Stream::ALL {
        assert_eq!(parser.off_layout(stream), 0, "{stream}");
    }
}
