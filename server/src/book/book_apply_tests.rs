use super::*;
use crate::node::event::{Address, HexBytes, OrderInfo, Side};
use crate::node::{Fixed, OrderFlavor};

const T: UnixNanos = 1_778_002_753_024_084_407;

fn fx(s: &str) -> Fixed {
    Fixed::parse(s).unwrap()
}

fn user(n: u8) -> Address {
    HexBytes([n; 20])
}

fn diff(coin: &str, oid: u64, side: Side, px: &str, kind: DiffKind) -> Diff {
    Diff { coin: coin.into(), user: user(1), oid, side, px: fx(px), kind }
}

fn new(coin: &str, oid: u64, side: Side, px: &str, sz: &str) -> Diff {
    diff(coin, oid, side, px, DiffKind::New { sz: fx(sz), insert_before: None })
}

fn status(coin: &str, oid: u64, status: &str, tif: &str, limit_px: &str, is_trigger: bool) -> OrderStatus {
    let flavor = OrderFlavor { tif: Some(tif.into()), is_trigger, ..OrderFlavor::system_default() };
    OrderStatus {
        coin: coin.into(),
        user: user(1),
        time: T,
        status: status.into(),
        hash: None,
        builder: None,
        order: OrderInfo {
            side: Side::Bid,
            limit_px: fx(limit_px),
            sz: fx("9.0"),
            orig_sz: fx("9.0"),
            oid,
            timestamp: 1234,
            trigger_px: Fixed::ZERO,
            cloid: None,
            flavor: Arc::new(flavor),
            children: None,
        },
    }
}

fn block(height: u64, diffs: Vec<Diff>, statuses: Vec<OrderStatus>) -> Block {
    Block { height, block_time: T, diffs, statuses, ..Block::default() }
}

fn applied(o: Outcome) -> Applied {
    match o {
        Outcome::Applied(a) => a,
        other => panic!("not applied: {other:?}"),
    }
}

fn books() -> Books {
    Books::new(10, [CoinBook::new("BTC".into())])
}

#[test]
fn new_takes_fields_from_its_opening_status_and_px_from_the_diff() {
    let mut b = books();
    // A triggered stop rests at the diff's px, not at its limitPx.
    let a = applied(b.apply(&block(
        11,
        vec![new("BTC", 7, Side::Bid, "100.0", "0.5")],
        vec![status("BTC", 7, "triggered", "Gtc", "95.0", false)],
    )));
    assert!(a.inconsistencies.is_empty());
    let o = b.coin("BTC").unwrap().order(7).unwrap();
    assert_eq!((o.px, o.limit_px, o.sz, o.timestamp), (fx("100.0"), fx("95.0"), fx("0.5"), 1234));
    assert_eq!(b.height(), 11);
}

#[test]
fn ioc_open_with_a_new_diff_rests_as_gtc() {
    let mut b = books();
    let a = applied(b.apply(&block(
        11,
        vec![new("BTC", 7, Side::Bid, "100.0", "0.5")],
        vec![status("BTC", 7, "open", "Ioc", "100.0", false)],
    )));
    assert!(a.inconsistencies.is_empty());
    assert_eq!(b.coin("BTC").unwrap().order(7).unwrap().flavor.tif.as_deref(), Some("Gtc"));
}

#[test]
fn only_opening_statuses_explain_a_new() {
    let mut b = books();
    // A trigger order's `open` (placed, not resting) and a `canceled` do not explain a `new`.
    let a = applied(b.apply(&block(
        11,
        vec![new("BTC", 7, Side::Bid, "100.0", "0.5"), new("BTC", 8, Side::Bid, "100.0", "0.5")],
        vec![status("BTC", 7, "open", "Gtc", "100.0", true), status("BTC", 8, "canceled", "Gtc", "100.0", false)],
    )));
    let kinds: Vec<_> = a.inconsistencies.iter().map(|i| (i.oid, i.kind)).collect();
    assert_eq!(kinds, vec![(7, InconsistencyKind::NewWithoutStatus), (8, InconsistencyKind::NewWithoutStatus)]);
    assert!(!b.is_trusted("BTC"));
    // Best effort: the orders rest anyway, flagged.
    assert_eq!(b.coin("BTC").unwrap().len(), 2);
}

#[test]
fn statusless_system_and_spot_orders_get_default_fields() {
    let mut b = books();
    let mut sys = new("BTC", 1, Side::Ask, "100.0", "1.0");
    sys.user = HexBytes([0xff; 20]);
    let mut sys2 = new("BTC", 2, Side::Ask, "100.0", "1.0");
    sys2.user = HexBytes([0xfe; 20]);
    let spot = new("@107", 3, Side::Bid, "0.0001234", "100.0");
    let a = applied(b.apply(&block(11, vec![sys, sys2, spot], vec![])));
    assert!(a.inconsistencies.is_empty(), "{:?}", a.inconsistencies);
    assert_eq!(a.statusless_system, 3);
    let o = b.coin("@107").unwrap().order(3).unwrap();
    assert_eq!(o.flavor.tif.as_deref(), Some("Gtc"));
    assert_eq!(o.timestamp, 1_778_002_753_024);
    assert!(b.is_trusted("BTC") && b.is_trusted("@107"));
}

#[test]
fn spot_dex_and_late_coins_are_books_like_any_other() {
    let mut b = books();
    let coins = ["PURR/USDC", "dex:ABC", "ETH"];
    let diffs: Vec<_> = coins.iter().enumerate().map(|(i, c)| new(c, i as u64, Side::Bid, "2.5", "1.0")).collect();
    let statuses = coins.iter().enumerate().map(|(i, c)| status(c, i as u64, "open", "Alo", "2.5", false)).collect();
    let a = applied(b.apply(&block(11, diffs, statuses)));
    assert!(a.inconsistencies.is_empty());
    assert_eq!(a.changed.iter().map(std::string::ToString::to_string).collect::<Vec<_>>(), coins);
    assert_eq!(b.coin_names().len(), 4);
    for c in coins {
        assert_eq!(b.coin(c).unwrap().best(Side::Bid).unwrap().0, fx("2.5"));
    }
}

#[test]
fn duplicate_and_gap_blocks_apply_nothing() {
    let mut b = books();
    assert_eq!(b.apply(&block(10, vec![], vec![])), Outcome::AlreadyApplied { height: 10, current: 10 });
    assert_eq!(b.apply(&block(12, vec![], vec![])), Outcome::Gap { expected: 11, got: 12 });
    assert_eq!(b.height(), 10);
    applied(b.apply(&block(11, vec![], vec![])));
    assert_eq!(b.apply(&block(11, vec![], vec![])), Outcome::AlreadyApplied { height: 11, current: 11 });
    let c = b.counters();
    assert_eq!((c.blocks_applied, c.already_applied, c.gaps), (1, 2, 1));
}

#[test]
fn unknown_oids_mark_only_their_coin_untrusted() {
    let mut b = books();
    let a = applied(b.apply(&block(
        11,
        vec![
            diff("BTC", 5, Side::Bid, "1.0", DiffKind::Remove),
            diff("BTC", 6, Side::Bid, "1.0", DiffKind::Update { orig_sz: fx("1.0"), new_sz: fx("0.5") }),
            new("ETH", 7, Side::Bid, "3.0", "1.0"),
        ],
        vec![status("ETH", 7, "open", "Gtc", "3.0", false)],
    )));
    let kinds: Vec<_> = a.inconsistencies.iter().map(|i| i.kind).collect();
    assert_eq!(kinds, vec![InconsistencyKind::Book(Misfit::UnknownOid); 2]);
    assert!(!b.is_trusted("BTC"));
    assert!(b.is_trusted("ETH"));
    assert_eq!(b.coin("ETH").unwrap().len(), 1);
    assert_eq!(b.counters().inconsistencies, 2);
    // A repair trusts the coin again.
    b.replace_coin(CoinBook::new("BTC".into()));
    assert!(b.is_trusted("BTC"));
}

#[test]
fn size_zero_update_then_remove_in_one_block() {
    let mut b = books();
    applied(b.apply(&block(
        11,
        vec![new("BTC", 1, Side::Ask, "5.0", "1.0")],
        vec![status("BTC", 1, "open", "Gtc", "5.0", false)],
    )));
    let a = applied(b.apply(&block(
        12,
        vec![
            diff("BTC", 1, Side::Ask, "5.0", DiffKind::Update { orig_sz: fx("1.0"), new_sz: Fixed::ZERO }),
            diff("BTC", 1, Side::Ask, "5.0", DiffKind::Remove),
        ],
        vec![],
    )));
    assert!(a.inconsistencies.is_empty());
    assert!(b.coin("BTC").unwrap().is_empty());
}

#[test]
fn insert_before_in_a_block_and_missing_anchor_counted() {
    let mut b = books();
    let nb = |oid, anchor| diff("BTC", oid, Side::Bid, "1.0", DiffKind::New { sz: fx("1.0"), insert_before: anchor });
    let st = |oid| status("BTC", oid, "open", "Gtc", "1.0", false);
    let a = applied(b.apply(&block(11, vec![nb(1, None), nb(2, Some(1)), nb(3, Some(99))], vec![st(1), st(2), st(3)])));
    assert_eq!(a.anchors_missing, 1);
    assert!(a.inconsistencies.is_empty());
    let book = b.coin("BTC").unwrap();
    assert_eq!(book.orders(Side::Bid).map(|o| o.oid).collect::<Vec<_>>(), vec![2, 1, 3]);
    assert_eq!(b.counters().anchors_missing, 1);
}

#[test]
fn diffs_step_places_orders_and_statuses_step_completes_them() {
    let mut whole = books();
    let (diffs, statuses) = (
        vec![new("BTC", 7, Side::Bid, "100.0", "0.5"), new("BTC", 8, Side::Ask, "101.0", "0.25")],
        vec![status("BTC", 7, "open", "Ioc", "100.0", false), status("BTC", 8, "open", "Alo", "101.0", false)],
    );
    applied(whole.apply(&block(11, diffs.clone(), statuses.clone())));

    let mut b = books();
    let a = applied(b.apply_diffs(11, T, &diffs));
    assert_eq!(a.changed.len(), 1);
    assert!(!b.is_complete());
    assert_eq!((b.height(), b.diffs_height(), b.diffs_block_time()), (10, 11, T));
    // L2 is final after the diffs alone.
    let btc = b.coin("BTC").unwrap();
    assert_eq!(btc.best(Side::Bid).map(|(px, l)| (px, l.sz, l.n)), Some((fx("100.0"), fx("0.5").into(), 1)));
    assert_eq!(btc.best(Side::Ask).unwrap().0, fx("101.0"));
    // The next block's diffs cannot come before this block's statuses.
    assert_eq!(b.apply_diffs(12, T, &[]), Outcome::Gap { expected: 11, got: 12 });

    let a = applied(b.apply_statuses(11, &statuses));
    assert!(a.inconsistencies.is_empty());
    assert!(b.is_complete());
    assert_eq!((b.height(), b.block_time()), (11, T));
    for oid in [7, 8] {
        assert_eq!(b.coin("BTC").unwrap().order(oid), whole.coin("BTC").unwrap().order(oid), "oid {oid}");
    }
    assert_eq!(b.coin("BTC").unwrap().order(7).unwrap().flavor.tif.as_deref(), Some("Gtc"));
    assert_eq!(b.counters(), &BookCounters { gaps: 1, ..whole.counters().clone() });
}

#[test]
fn a_new_without_status_is_found_at_the_statuses_step() {
    let mut b = books();
    let a = applied(b.apply_diffs(11, T, &[new("BTC", 7, Side::Bid, "100.0", "0.5")]));
    assert!(a.inconsistencies.is_empty());
    assert!(b.is_trusted("BTC"));
    let a = applied(b.apply_statuses(11, &[status("BTC", 9, "open", "Gtc", "100.0", false)]));
    let kinds: Vec<_> = a.inconsistencies.iter().map(|i| (i.oid, i.kind)).collect();
    assert_eq!(kinds, vec![(7, InconsistencyKind::NewWithoutStatus)]);
    assert!(!b.is_trusted("BTC"));
    assert_eq!(b.apply_statuses(11, &[]), Outcome::AlreadyApplied { height: 11, current: 11 });
    assert_eq!(b.apply_statuses(12, &[]), Outcome::Gap { expected: 11, got: 12 });
}

#[test]
fn a_shared_book_is_copied_once_when_changed_and_its_holder_keeps_its_version() {
    let mut b = books();
    applied(b.apply(&block(11, vec![new("BTC", 1, Side::Bid, "100.0", "1.0")], vec![])));
    assert_eq!(b.counters().book_copies, 0, "nobody held BTC: changed in place");
    let held = b.shared_coin("BTC").unwrap();
    // Block 12 changes BTC in both steps while a reader holds it: one copy, on the first change.
    let a = applied(b.apply(&block(
        12,
        vec![new("BTC", 2, Side::Ask, "101.0", "2.0")],
        vec![status("BTC", 2, "open", "Gtc", "101.0", false)],
    )));
    assert_eq!((a.copies, b.counters().book_copies), (1, 1));
    assert!(held.order(2).is_none() && held.order(1).is_some(), "the holder keeps the book it took");
    assert_eq!(b.coin("BTC").unwrap().order(2).unwrap().limit_px, fx("101.0"));
    drop(held);
    let a = applied(b.apply(&block(13, vec![new("BTC", 3, Side::Bid, "99.0", "1.0")], vec![])));
    assert_eq!((a.copies, b.counters().book_copies), (0, 1), "let go: no copy");
}

#[test]
fn books_from_shared_coins_are_a_copy_at_one_height() {
    let mut b = books();
    applied(b.apply(&block(11, vec![new("BTC", 1, Side::Bid, "100.0", "1.0")], vec![])));
    let copy = Books::from_shared(b.height(), b.shared_coin("BTC"));
    applied(b.apply(&block(12, vec![diff("BTC", 1, Side::Bid, "100.0", DiffKind::Remove)], vec![])));
    assert_eq!((copy.height(), copy.coin("BTC").unwrap().len()), (11, 1));
    assert_eq!(b.coin("BTC").unwrap().len(), 0);
}
