use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::book::coin::RestingOrder;
use crate::book::l2::{MAX_LEVELS, VARIANTS, aggregate};
use crate::node::{Address, OrderFlavor};

fn order(oid: u64, side: Side, px: u64, sz: u64) -> RestingOrder {
    RestingOrder {
        oid,
        user: Address::parse(&format!("0x{oid:040x}")).unwrap(),
        side,
        px: Fixed(px),
        sz: Fixed(sz),
        orig_sz: Fixed(sz),
        limit_px: Fixed(px),
        trigger_px: Fixed::ZERO,
        timestamp: oid,
        cloid: None,
        flavor: Arc::new(OrderFlavor::system_default()),
    }
}

/// What a fresh aggregation over the book's levels gives.
fn fresh(book: &CoinBook, params: &L2Params) -> [Vec<LevelAgg>; 2] {
    let mut out = [Vec::new(), Vec::new()];
    for side in [Side::Bid, Side::Ask] {
        let levels = book.levels(side).map(|(px, l)| LevelAgg { px, sz: l.sz, n: l.n });
        aggregate(side, levels, params, None, &mut out[side.index()]);
    }
    out
}

fn maintained(book: &CoinBook, params: &L2Params) -> [Vec<LevelAgg>; 2] {
    let mut out = [Vec::new(), Vec::new()];
    l2_levels(book, params, &mut out);
    out
}

fn params(variant: usize, n_levels: usize) -> L2Params {
    let (s, m) = VARIANTS[variant];
    L2Params::new(s, m, n_levels).unwrap()
}

#[derive(Clone, Debug)]
enum Op {
    Insert {
        oid: u64,
        ask: bool,
        px: u64,
        sz: u64,
    },
    Resize {
        oid: u64,
        sz: u64,
    },
    Remove {
        oid: u64,
    },
    /// A build wants this variant: its shape is made from the book as it is now.
    Want(usize),
    /// Builds want only these variants from now on.
    Keep(Vec<usize>),
}

/// Prices that cross powers of ten, where the bucket width changes: around 100,000, around 10, and tiny ones.
fn price() -> impl Strategy<Value = u64> {
    prop_oneof![
        (-3000i64..3000).prop_map(|k| (10_000_000_000_000 + k * 10_000_000) as u64),
        (-3000i64..3000).prop_map(|k| (1_000_000_000 + k * 100_000) as u64),
        (-500i64..500).prop_map(|k| (100_000 + k * 7) as u64),
        1u64..2_000,
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u64..80, any::<bool>(), price(), 0u64..5_000_000_000).prop_map(|(oid, ask, px, sz)| Op::Insert { oid, ask, px, sz }),
        2 => (0u64..80, 0u64..5_000_000_000).prop_map(|(oid, sz)| Op::Resize { oid, sz }),
        3 => (0u64..80).prop_map(|oid| Op::Remove { oid }),
        1 => (0usize..7).prop_map(Op::Want),
        1 => proptest::collection::vec(0usize..7, 0..4).prop_map(Op::Keep),
    ]
}

fn apply(book: &mut CoinBook, op: &Op) {
    match *op {
        Op::Insert { oid, ask, px, sz } => {
            let side = if ask { Side::Ask } else { Side::Bid };
            book.insert(order(oid, side, px, sz), None, None);
        }
        Op::Resize { oid, sz } => {
            if let Some(o) = book.order(oid).cloned() {
                let _ = book.update(oid, o.side, o.px, o.sz, Fixed(sz));
            }
        }
        Op::Remove { oid } => {
            if let Some(o) = book.order(oid).cloned() {
                book.remove(oid, o.side, o.px).unwrap();
            }
        }
        Op::Want(v) => {
            maintained(book, &params(v, MAX_LEVELS));
        }
        Op::Keep(ref vs) => {
            let keep: Vec<(u8, Option<u8>)> =
                vs.iter().filter_map(|&v| VARIANTS[v].0.map(|s| (s, VARIANTS[v].1))).collect();
            book.buckets().keep(&keep);
        }
    }
}

proptest! {
    #[test]
    fn maintained_buckets_equal_a_fresh_aggregation(
        ops in proptest::collection::vec(op(), 0..400),
        n_levels in 1usize..=MAX_LEVELS,
    ) {
        let mut book = CoinBook::new("BTC".into());
        // Every shape exists from the start, so each one is maintained through the whole sequence, not made late.
        for v in 0..VARIANTS.len() {
            maintained(&book, &params(v, MAX_LEVELS));
        }
        for op in &ops {
            apply(&mut book, op);
        }
        for (v, variant) in VARIANTS.iter().enumerate() {
            let p = params(v, n_levels);
            prop_assert_eq!(maintained(&book, &p), fresh(&book, &p), "variant {:?}", variant);
        }
    }
}

#[test]
fn shapes_are_made_when_wanted_and_dropped_when_not() {
    let mut book = CoinBook::new("BTC".into());
    book.insert(order(1, Side::Bid, 9_995_000_000_000, 100_000_000), None, None);
    maintained(&book, &params(0, 10));
    assert!(book.buckets().is_empty(), "full precision reads the levels directly");
    let two = params(4, 10);
    maintained(&book, &two);
    maintained(&book, &params(5, 10));
    assert_eq!(book.buckets().len(), 2);
    book.buckets().keep(&[(2, None)]);
    assert_eq!(book.buckets().len(), 1);
    // A bid at 100,000 with two figures is its own bucket; 99,950 falls in 99,000.
    book.insert(order(2, Side::Bid, 10_000_000_000_000, 300_000_000), None, None);
    let [bids, _] = maintained(&book, &two);
    let got: Vec<(u64, u128, u32)> = bids.iter().map(|l| (l.px.0, l.sz.0, l.n)).collect();
    assert_eq!(got, vec![(10_000_000_000_000, 300_000_000, 1), (9_900_000_000_000, 100_000_000, 1)]);
    let copy = book.clone();
    assert!(copy.buckets().is_empty(), "a copy makes its own shapes when asked");
    assert_eq!(maintained(&copy, &two), fresh(&book, &two));
    book.buckets().keep(&[]);
    assert!(book.buckets().is_empty());
}
