use super::*;
use crate::node::{Fixed, OrderFlavor};

fn px(s: &str) -> Fixed {
    Fixed::parse(s).unwrap()
}

fn order(oid: u64, side: Side, p: &str, sz: &str) -> RestingOrder {
    RestingOrder {
        oid,
        user: Address::parse(&format!("0x{oid:040x}")).unwrap(),
        side,
        px: px(p),
        sz: px(sz),
        orig_sz: px(sz),
        limit_px: px(p),
        trigger_px: Fixed::ZERO,
        timestamp: oid,
        cloid: None,
        flavor: Arc::new(OrderFlavor::system_default()),
    }
}

fn level_oids(b: &CoinBook, side: Side, p: &str) -> Vec<u64> {
    let (_, level) = b.levels(side).find(|(x, _)| *x == px(p)).unwrap();
    b.level_orders(level).map(|o| o.oid).collect()
}

fn book() -> CoinBook {
    CoinBook::new("BTC".into())
}

#[test]
fn levels_keep_running_totals_and_time_priority() {
    let mut b = book();
    b.insert(order(1, Side::Bid, "100.0", "1.5"), None, None);
    b.insert(order(2, Side::Bid, "100.0", "0.25"), None, None);
    b.insert(order(3, Side::Bid, "101.0", "2.0"), None, None);
    b.insert(order(4, Side::Ask, "102.0", "3.0"), None, None);
    let (best, level) = b.best(Side::Bid).unwrap();
    assert_eq!(best, px("101.0"));
    assert_eq!((level.sz.to_string(), level.n), ("2.0".into(), 1));
    let bids: Vec<_> = b.levels(Side::Bid).map(|(p, l)| (p.to_string(), l.sz.to_string(), l.n)).collect();
    assert_eq!(bids, vec![("101.0".into(), "2.0".into(), 1), ("100.0".into(), "1.75".into(), 2)]);
    assert_eq!(level_oids(&b, Side::Bid, "100.0"), vec![1, 2]);
    assert_eq!(b.best(Side::Ask).unwrap().0, px("102.0"));
    assert_eq!(b.orders(Side::Bid).map(|o| o.oid).collect::<Vec<_>>(), vec![3, 1, 2]);
}

#[test]
fn insert_before_places_ahead_of_the_anchor() {
    let mut b = book();
    for oid in 1..=3 {
        b.insert(order(oid, Side::Ask, "5.0", "1.0"), None, None);
    }
    assert_eq!(b.insert(order(9, Side::Ask, "5.0", "1.0"), None, Some(2)).0, Placement::BeforeAnchor);
    assert_eq!(level_oids(&b, Side::Ask, "5.0"), vec![1, 9, 2, 3]);
    assert_eq!(b.insert(order(10, Side::Ask, "5.0", "1.0"), None, Some(1)).0, Placement::BeforeAnchor);
    assert_eq!(level_oids(&b, Side::Ask, "5.0"), vec![10, 1, 9, 2, 3]);
    b.remove(9, Side::Ask, px("5.0")).unwrap();
    b.remove(10, Side::Ask, px("5.0")).unwrap();
    assert_eq!(level_oids(&b, Side::Ask, "5.0"), vec![1, 2, 3]);
}

#[test]
fn missing_or_foreign_anchor_goes_to_the_back() {
    let mut b = book();
    b.insert(order(1, Side::Ask, "5.0", "1.0"), None, None);
    b.insert(order(2, Side::Ask, "6.0", "1.0"), None, None);
    assert_eq!(b.insert(order(3, Side::Ask, "5.0", "1.0"), None, Some(77)).0, Placement::AnchorMissing);
    // An anchor resting at another price is not in this level.
    assert_eq!(b.insert(order(4, Side::Ask, "5.0", "1.0"), None, Some(2)).0, Placement::AnchorMissing);
    assert_eq!(level_oids(&b, Side::Ask, "5.0"), vec![1, 3, 4]);
}

#[test]
fn update_to_zero_then_remove_is_normal() {
    let mut b = book();
    b.insert(order(1, Side::Bid, "10.0", "0.5"), None, None);
    b.insert(order(2, Side::Bid, "10.0", "0.25"), None, None);
    assert_eq!(b.update(1, Side::Bid, px("10.0"), px("0.5"), Fixed::ZERO), Ok(()));
    let (_, l) = b.best(Side::Bid).unwrap();
    assert_eq!((l.sz.to_string(), l.n), ("0.25".into(), 2));
    assert!(b.remove(1, Side::Bid, px("10.0")).is_ok());
    let (_, l) = b.best(Side::Bid).unwrap();
    assert_eq!((l.sz.to_string(), l.n), ("0.25".into(), 1));
    assert!(b.remove(2, Side::Bid, px("10.0")).is_ok());
    assert!(b.best(Side::Bid).is_none());
    assert!(b.is_empty());
}

#[test]
fn misfits_are_reported_not_panics() {
    let mut b = book();
    assert_eq!(b.remove(1, Side::Bid, px("1.0")), Err(Misfit::UnknownOid));
    assert_eq!(b.update(1, Side::Bid, px("1.0"), px("1.0"), px("0.5")), Err(Misfit::UnknownOid));
    b.insert(order(1, Side::Bid, "1.0", "1.0"), None, None);
    assert_eq!(b.remove(1, Side::Ask, px("1.0")), Err(Misfit::WrongPlace));
    assert_eq!(b.remove(1, Side::Bid, px("2.0")), Err(Misfit::WrongPlace));
    assert_eq!(b.update(1, Side::Bid, px("1.0"), px("0.7"), px("0.5")), Err(Misfit::SizeMismatch));
    assert_eq!(b.order(1).unwrap().sz, px("0.5"));
    let (_, m) = b.insert(order(1, Side::Bid, "3.0", "2.0"), None, None);
    assert_eq!(m, Some(Misfit::DuplicateOid));
    assert_eq!(b.len(), 1);
    assert_eq!(b.levels(Side::Bid).count(), 1);
    assert_eq!(b.best(Side::Bid).unwrap().0, px("3.0"));
}

#[test]
fn crossing_orders_both_rest() {
    // Diffs are the venue's post-match state: nothing is matched locally.
    let mut b = book();
    b.insert(order(1, Side::Ask, "100.0", "1.0"), None, None);
    b.insert(order(2, Side::Bid, "101.0", "1.0"), None, None);
    assert_eq!(b.len(), 2);
    assert_eq!(b.best(Side::Bid).unwrap().0, px("101.0"));
    assert_eq!(b.best(Side::Ask).unwrap().0, px("100.0"));
}

#[test]
fn children_follow_their_order() {
    let mut b = book();
    b.insert(order(1, Side::Bid, "1.0", "1.0"), Some("[{\"oid\":2}]".into()), None);
    assert_eq!(b.children(1), Some("[{\"oid\":2}]"));
    b.remove(1, Side::Bid, px("1.0")).unwrap();
    assert_eq!(b.children(1), None);
}

#[test]
fn a_book_is_sane_unless_crossed_or_holding_an_order_of_size_zero() {
    let mut b = book();
    b.insert(order(1, Side::Bid, "100.0", "1.0"), None, None);
    b.insert(order(2, Side::Ask, "101.0", "1.0"), None, None);
    assert!(b.is_sane());
    // An update to 0 keeps the order until its remove.
    b.update(1, Side::Bid, px("100.0"), px("1.0"), Fixed::ZERO).unwrap();
    assert!(!b.is_sane());
    b.remove(1, Side::Bid, px("100.0")).unwrap();
    assert!(b.is_sane());
    b.insert(order(3, Side::Bid, "101.0", "1.0"), None, None);
    assert!(!b.is_sane(), "crossed: best bid at the best ask");
    b.remove(3, Side::Bid, px("101.0")).unwrap();
    assert!(b.is_sane());
}
