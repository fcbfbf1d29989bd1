//! Property tests: random order streams through `CoinBook` against a naive model that keeps raw orders in a list.
//! The book's running level totals must give the same L4 priority and the same L2 (every variant) as
//! recomputing from the raw orders.

use std::sync::Arc;

use hlbook::book::l2::{L2Params, LevelAgg, VARIANTS, aggregate};
use hlbook::book::{CoinBook, RestingOrder};
use hlbook::node::event::HexBytes;
use hlbook::node::{Fixed, FixedSum, OrderFlavor, Side};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    New { side: bool, px: u64, sz: u64, before: Option<usize> },
    Update { pick: usize, sz: u64 },
    Remove { pick: usize },
}

fn op() -> impl Strategy<Value = Op> {
    // Prices span powers of ten (units of 10^-8: 0.0009… to 1.2) so aggregation crosses digit boundaries.
    let px = prop_oneof![90_000u64..=110_000, 9_990_000u64..=10_010_000, 99_990_000u64..=120_000_000];
    prop_oneof![
        4 => (any::<bool>(), px, 1u64..5_000_000, proptest::option::of(0usize..64))
            .prop_map(|(side, px, sz, before)| Op::New { side, px, sz, before }),
        2 => (0usize..64, 0u64..5_000_000).prop_map(|(pick, sz)| Op::Update { pick, sz }),
        2 => (0usize..64).prop_map(|pick| Op::Remove { pick }),
    ]
}

fn order(oid: u64, side: Side, px: u64, sz: u64) -> RestingOrder {
    RestingOrder {
        oid,
        user: HexBytes([1; 20]),
        side,
        px: Fixed(px),
        sz: Fixed(sz),
        orig_sz: Fixed(sz),
        limit_px: Fixed(px),
        trigger_px: Fixed::ZERO,
        timestamp: 0,
        cloid: None,
        flavor: Arc::new(OrderFlavor::system_default()),
    }
}

/// The model: raw orders in time priority within a level is their position in this list.
#[derive(Default)]
struct Model {
    orders: Vec<(u64, Side, u64, u64)>,
}

impl Model {
    fn sorted(&self, side: Side) -> Vec<(u64, Side, u64, u64)> {
        let mut v: Vec<_> = self.orders.iter().copied().filter(|o| o.1 == side).collect();
        // Stable sort keeps list order within a price.
        match side {
            Side::Bid => v.sort_by_key(|o| std::cmp::Reverse(o.2)),
            Side::Ask => v.sort_by_key(|o| o.2),
        }
        v
    }

    fn levels(&self, side: Side) -> Vec<LevelAgg> {
        let mut out: Vec<LevelAgg> = Vec::new();
        for (_, _, px, sz) in self.sorted(side) {
            match out.last_mut() {
                Some(l) if l.px == Fixed(px) => {
                    l.sz.add(Fixed(sz));
                    l.n += 1;
                }
                _ => out.push(LevelAgg { px: Fixed(px), sz: FixedSum::from(Fixed(sz)), n: 1 }),
            }
        }
        out
    }
}

fn run(ops: &[Op]) -> (CoinBook, Model) {
    let mut book = CoinBook::new("T".into());
    let mut model = Model::default();
    for (i, op) in ops.iter().enumerate() {
        match *op {
            Op::New { side, px, sz, before } => {
                let side = if side { Side::Bid } else { Side::Ask };
                let oid = i as u64 + 1;
                let anchor = before.and_then(|b| model.orders.get(b % model.orders.len().max(1)).copied());
                book.insert(order(oid, side, px, sz), None, anchor.map(|a| a.0));
                let entry = (oid, side, px, sz);
                match anchor.filter(|a| a.1 == side && a.2 == px) {
                    Some(a) => {
                        let at = model.orders.iter().position(|o| o.0 == a.0).unwrap();
                        model.orders.insert(at, entry);
                    }
                    None => model.orders.push(entry),
                }
            }
            Op::Update { pick, sz } if !model.orders.is_empty() => {
                let at = pick % model.orders.len();
                let (oid, side, px, old) = model.orders[at];
                book.update(oid, side, Fixed(px), Fixed(old), Fixed(sz)).unwrap();
                model.orders[at].3 = sz;
            }
            Op::Remove { pick } if !model.orders.is_empty() => {
                let (oid, side, px, _) = model.orders.remove(pick % model.orders.len());
                book.remove(oid, side, Fixed(px)).unwrap();
            }
            _ => {}
        }
    }
    (book, model)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn l4_priority_matches_the_model(ops in proptest::collection::vec(op(), 1..200)) {
        let (book, model) = run(&ops);
        for side in [Side::Bid, Side::Ask] {
            let got: Vec<_> = book.orders(side).map(|o| (o.oid, o.side, o.px.0, o.sz.0)).collect();
            prop_assert_eq!(got, model.sorted(side));
        }
        prop_assert_eq!(book.len(), model.orders.len());
    }

    #[test]
    fn l2_from_running_totals_equals_l2_from_raw_orders(ops in proptest::collection::vec(op(), 1..200), n_levels in 1usize..=100) {
        let (book, model) = run(&ops);
        for (sig, mantissa) in VARIANTS {
            let params = L2Params::new(sig, mantissa, n_levels).unwrap();
            for side in [Side::Bid, Side::Ask] {
                let (mut fast, mut slow) = (Vec::new(), Vec::new());
                let running = book.levels(side).map(|(px, l)| LevelAgg { px, sz: l.sz, n: l.n });
                aggregate(side, running, &params, None, &mut fast);
                aggregate(side, model.levels(side).into_iter(), &params, None, &mut slow);
                prop_assert_eq!(fast, slow);
            }
        }
    }
}
