//! The mainnet capture with trigger orders on: its snapshot, given two waiting trigger orders as the node lists
//! them when asked `includeTriggerOrders` (`"isTrigger": true` among the bids), replays in both modes to exactly
//! the same L4 books block by block as without them, holds them beside the book (never in a level), keeps the one
//! no status touches, and ends the one a status of its oid ends.

mod common;

use hlbook::book::Books;
use hlbook::book::export::write_snapshot;
use hlbook::book::snapshot::load_books;
use hlbook::ingest::replay::replay;
use hlbook::node::Mode;

/// The waiting take-profit the capture's own statuses carry as a child (block 985148209), as a listed order.
const KEPT: &str = r#"["0xee8b2cef08904068634176f5cbedf7a894ed0e97",{"coin":"BTC","side":"B","limitPx":"64800.0","sz":"0.0122","oid":389852753671,"timestamp":1776712523717,"triggerCondition":"Price below 60000","isTrigger":true,"triggerPx":"60000.0","children":[],"isPositionTpsl":false,"reduceOnly":true,"orderType":"Take Profit Market","origSz":"0.0122","tif":null,"cloid":null}]"#;

/// A waiting stop under the oid of an order the capture reports `filled` at block 985148191 (user 0xc5f4…).
const ENDED: &str = r#"["0xc5f495382b73b04ca60d3b729534171724e3e856",{"coin":"BTC","side":"B","limitPx":"81400.0","sz":"0.0001","oid":412036470893,"timestamp":1778002750000,"triggerCondition":"Price above 81350","isTrigger":true,"triggerPx":"81350.0","children":[],"isPositionTpsl":false,"reduceOnly":false,"orderType":"Stop Limit","origSz":"0.0001","tif":null,"cloid":null}]"#;

fn run(books: &mut Books, cap: &common::Capture, mode: Mode) -> Vec<(u64, u64)> {
    let mut digests = Vec::new();
    replay(books, &cap.node_dir, mode, |step| digests.push((step.block.height, common::l4_digest(step.books))))
        .unwrap_or_else(|e| panic!("{mode:?} replay failed: {e}"));
    digests
}

#[test]
fn the_capture_stays_exact_with_trigger_orders_on() {
    let Some(cap) = common::unpack() else { return };
    let text =
        std::io::read_to_string(flate2::read::GzDecoder::new(std::fs::File::open(&cap.snapshot).unwrap())).unwrap();
    let head = r#"[985148181,[["BTC",[["#;
    assert!(text.starts_with(head), "the snapshot starts with BTC's bids");
    let with = format!("{head}{KEPT},{ENDED},{}", &text[head.len()..]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("with_triggers.json");
    std::fs::write(&path, &with).unwrap();

    for mode in [Mode::ByBlock, Mode::Streaming] {
        let mut plain = load_books(&cap.snapshot).unwrap();
        let mut books = load_books(&path).unwrap();
        assert_eq!((books.order_count(), books.trigger_count()), (plain.order_count(), 2), "held beside the book");
        assert_eq!(common::l4_digest(&books), common::l4_digest(&plain), "{mode:?}: the same levels at the start");
        let want = run(&mut plain, &cap, mode);
        assert_eq!(run(&mut books, &cap, mode), want, "{mode:?}: the books differ after some block");
        assert_eq!(want.len(), 51);
        let c = books.counters();
        assert_eq!((c.inconsistencies, c.gaps), (0, 0), "{mode:?}: {c:?}");

        let btc = books.coin("BTC").unwrap();
        let kept: Vec<u64> = btc.triggers().iter().map(|t| t.order.oid).collect();
        assert_eq!(kept, [389852753671], "{mode:?}: the `filled` status ended the other");
        // Written back as the node lists it: after BTC's resting bids, the very object it was read from.
        let mut out = Vec::new();
        write_snapshot(&books, None, &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(out.contains(&format!("{KEPT}],[")), "{mode:?}: the waiting order closes BTC's bids");
        assert!(!out.contains("412036470893"));
    }
}
