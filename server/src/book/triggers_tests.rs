use std::sync::Arc;

use super::*;
use crate::book::{Books, CoinBook, Outcome};
use crate::node::event::HexBytes;
use crate::node::{Block, Diff, DiffKind, Fixed, OrderFlavor, UnixNanos};

const T: UnixNanos = 1_778_002_753_024_084_407;

fn fx(s: &str) -> Fixed {
    Fixed::parse(s).unwrap()
}

/// A status of a trigger order as the node writes it: waiting (`isTrigger`, no tif) or triggered.
fn status(coin: &str, oid: u64, status: &str, waiting: bool) -> OrderStatus {
    let flavor = OrderFlavor {
        tif: (!waiting).then(|| "Gtc".into()),
        order_type: "Stop Limit".into(),
        trigger_condition: if waiting { "Price below 95".into() } else { "Triggered".into() },
        is_trigger: waiting,
        reduce_only: true,
        is_position_tpsl: false,
    };
    OrderStatus {
        coin: coin.into(),
        user: HexBytes([3; 20]),
        time: T,
        status: status.into(),
        hash: None,
        builder: None,
        order: OrderInfo {
            side: Side::Ask,
            limit_px: fx("94.0"),
            sz: fx("2.0"),
            orig_sz: fx("2.0"),
            oid,
            timestamp: 77,
            trigger_px: fx("95.0"),
            cloid: None,
            flavor: Arc::new(flavor),
            children: None,
        },
    }
}

/// The `new` diff that rests triggered order `oid` at 96.0.
fn new_at_96(oid: u64) -> Diff {
    Diff {
        coin: "BTC".into(),
        user: HexBytes([3; 20]),
        oid,
        side: Side::Ask,
        px: fx("96.0"),
        kind: DiffKind::New { sz: fx("2.0"), insert_before: None },
    }
}

fn block(height: u64, diffs: Vec<Diff>, statuses: Vec<OrderStatus>) -> Block {
    Block { height, block_time: T, diffs, statuses, ..Block::default() }
}

fn applied(b: &mut Books, block: &Block) {
    match b.apply(block) {
        Outcome::Applied(a) => assert!(a.inconsistencies.is_empty(), "{a:?}"),
        other => panic!("not applied: {other:?}"),
    }
}

#[test]
fn placed_triggered_and_canceled_by_the_status_stream() {
    let mut b = Books::new(10, [CoinBook::new("BTC".into())]);
    // Placed: held beside the book, no level.
    applied(&mut b, &block(11, vec![], vec![status("BTC", 7, "open", true), status("ETH", 8, "open", true)]));
    let btc = b.coin("BTC").unwrap();
    assert_eq!((btc.len(), btc.triggers().len()), (0, 1));
    assert!(btc.levels_after(Side::Ask, None).next().is_none());
    assert_eq!(b.coin("ETH").unwrap().triggers().get(8).unwrap().order.trigger_px, fx("95.0"), "a new coin's book");
    assert_eq!(b.trigger_count(), 2);

    // Triggered: no longer waiting; its `new` diff rests it at the diff's px, not its limitPx.
    applied(&mut b, &block(12, vec![new_at_96(7)], vec![status("BTC", 7, "triggered", false)]));
    let btc = b.coin("BTC").unwrap();
    assert!(btc.triggers().is_empty());
    let o = btc.order(7).unwrap();
    assert_eq!((o.px, o.limit_px, &*o.flavor.trigger_condition), (fx("96.0"), fx("94.0"), "Triggered"));

    // Canceled while waiting; a status of an oid not held changes nothing and builds no book.
    applied(&mut b, &block(13, vec![], vec![status("ETH", 8, "canceled", true), status("SOL", 9, "canceled", true)]));
    assert_eq!(b.trigger_count(), 0);
    assert!(b.coin("SOL").is_none());
}

#[test]
fn placed_and_ended_in_one_block() {
    let mut b = Books::new(10, []);
    let statuses = vec![status("BTC", 7, "open", true), status("BTC", 7, "siblingFilledCanceled", true)];
    applied(&mut b, &block(11, vec![], statuses));
    assert_eq!(b.trigger_count(), 0);
}

#[test]
fn the_same_set_is_what_validation_accepts() {
    let (mut a, mut b) = (Triggers::default(), Triggers::default());
    let s = status("BTC", 7, "open", true);
    a.place(s.user, s.order.clone());
    assert!(!a.same_as(&b));
    b.place(s.user, s.order.clone());
    assert!(a.same_as(&b));
    let mut moved = s.order.clone();
    moved.trigger_px = fx("96.0");
    b.place(s.user, moved);
    assert!(!a.same_as(&b), "a trigger price that differs");
    let resting = a.get(7).unwrap().as_resting();
    assert_eq!((resting.px, resting.sz, resting.user), (fx("94.0"), fx("2.0"), s.user));
}

#[test]
fn a_triggered_order_is_written_as_resting_whatever_its_status_says() {
    let mut b = Books::new(10, [CoinBook::new("BTC".into())]);
    // Should a `triggered` status still say `isTrigger`, the order rests, and the export must not mark it waiting.
    applied(&mut b, &block(11, vec![new_at_96(7)], vec![status("BTC", 7, "triggered", true)]));
    let mut out = Vec::new();
    crate::book::export::write_snapshot(&b, None, &mut out).unwrap();
    let mut coins = Vec::new();
    crate::node::snapshot::read_snapshot_slice(&out, |c| coins.push(crate::book::snapshot::coin_book(c))).unwrap();
    assert_eq!((coins[0].len(), coins[0].triggers().len()), (1, 0));
    assert_eq!(coins[0].order(7).unwrap().px, fx("96.0"));
}
