//! Running bucket totals for the coarse L2 shapes (`nSigFigs`, `mantissa`) that some connection wants.
//!
//! Aggregating a book to 2 or 3 significant figures walks every level, since a hundred $1,000 buckets of BTC
//! span the whole book. Instead, each wanted shape of a coin keeps its buckets (bucket price → size, count) up to
//! date as levels change, so a frame reads only the buckets it returns. A shape is created, from one walk of the
//! book, by the first build that wants it, and dropped by the first build that no longer does; a book without
//! wanted shapes pays one empty check per level change.
//!
//! Grouping levels by `l2::bucket` gives exactly `l2::aggregate`'s result: the bucket price is monotonic in the
//! level price and a bucket's own price falls in the same bucket, so the levels `aggregate` merges as it walks are
//! precisely the levels with equal bucket prices. The proptest in `buckets_tests.rs` holds the two to that.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use parking_lot::Mutex;

use super::CoinBook;
use super::l2::{L2Params, LevelAgg, bucket};
use crate::node::{Fixed, FixedSum, Side};

/// The maintained shapes of one coin's book. The book changes them under its owner's write lock (`&mut`, no
/// locking); the publisher creates, reads and drops them under the read lock, one coin per thread.
#[derive(Debug, Default)]
pub struct Buckets {
    shapes: Mutex<Vec<Shape>>,
    /// Some shape exists: lets sweeps over many books skip the lock.
    any: AtomicBool,
}

/// A copied book starts with no shapes: the next build that wants one makes it from the copy's own levels.
impl Clone for Buckets {
    fn clone(&self) -> Buckets {
        Buckets::default()
    }
}

#[derive(Debug)]
struct Shape {
    sig: u8,
    mantissa: u64,
    /// Per side, bucket price → totals of the levels in it.
    sides: [BTreeMap<Fixed, Totals>; 2],
}

#[derive(Copy, Clone, Debug)]
struct Totals {
    sz: FixedSum,
    n: u32,
}

impl Buckets {
    /// An order of `sz` joined the level at `px`.
    pub(super) fn add(&mut self, side: Side, px: Fixed, sz: Fixed) {
        for s in self.shapes.get_mut() {
            let t = s.sides[side.index()].entry(s.bucket(side, px)).or_insert(Totals { sz: FixedSum::ZERO, n: 0 });
            t.sz.add(sz);
            t.n += 1;
        }
    }

    /// An order of `sz` left the level at `px`.
    pub(super) fn sub(&mut self, side: Side, px: Fixed, sz: Fixed) {
        for s in self.shapes.get_mut() {
            let key = s.bucket(side, px);
            let map = &mut s.sides[side.index()];
            if let Some(t) = map.get_mut(&key) {
                t.sz.sub(sz);
                t.n -= 1;
                if t.n == 0 {
                    map.remove(&key);
                }
            }
        }
    }

    /// An order at `px` changed size from `old` to `new`.
    pub(super) fn resize(&mut self, side: Side, px: Fixed, old: Fixed, new: Fixed) {
        for s in self.shapes.get_mut() {
            if let Some(t) = s.sides[side.index()].get_mut(&s.bucket(side, px)) {
                t.sz.sub(old);
                t.sz.add(new);
            }
        }
    }

    /// Drops every shape not in `keep` (`(nSigFigs, mantissa)` pairs; full precision needs no shape).
    pub fn keep(&self, keep: &[(u8, Option<u8>)]) {
        if !self.any.load(Relaxed) {
            return;
        }
        let mut shapes = self.shapes.lock();
        shapes.retain(|s| keep.iter().any(|&(sig, m)| s.is(sig, m)));
        self.any.store(!shapes.is_empty(), Relaxed);
    }

    /// Shapes maintained now.
    pub fn len(&self) -> usize {
        self.shapes.lock().len()
    }

    /// No shape is maintained: a check without the lock, for sweeps over every book.
    pub fn is_empty(&self) -> bool {
        !self.any.load(Relaxed)
    }
}

impl Shape {
    fn new(book: &CoinBook, sig: u8, mantissa: u64) -> Shape {
        let mut s = Shape { sig, mantissa, sides: [BTreeMap::new(), BTreeMap::new()] };
        for side in [Side::Bid, Side::Ask] {
            for (px, level) in book.levels(side) {
                let t = s.sides[side.index()].entry(s.bucket(side, px)).or_insert(Totals { sz: FixedSum::ZERO, n: 0 });
                t.sz.0 += level.sz.0;
                t.n += level.n;
            }
        }
        s
    }

    fn is(&self, sig: u8, mantissa: Option<u8>) -> bool {
        self.sig == sig && self.mantissa == u64::from(mantissa.unwrap_or(1))
    }

    fn bucket(&self, side: Side, px: Fixed) -> Fixed {
        bucket(side, px, self.sig, self.mantissa, None)
    }

    /// The best `n` buckets of a side.
    fn top(&self, side: Side, n: usize, out: &mut Vec<LevelAgg>) {
        let map = &self.sides[side.index()];
        let agg = |(px, t): (&Fixed, &Totals)| LevelAgg { px: *px, sz: t.sz, n: t.n };
        match side {
            Side::Bid => out.extend(map.iter().rev().take(n).map(agg)),
            Side::Ask => out.extend(map.iter().take(n).map(agg)),
        }
    }
}

/// Both sides of `book` in the shape `params` asks for, best first, the same as `l2::aggregate` over its levels
/// without a tick: full precision straight from the levels, coarse shapes from their maintained buckets (made now
/// if no build wanted them before). Costs O(levels returned) once the shape exists.
pub fn l2_levels(book: &CoinBook, params: &L2Params, out: &mut [Vec<LevelAgg>; 2]) {
    for side in &mut *out {
        side.clear();
    }
    let Some(sig) = params.n_sig_figs else {
        for side in [Side::Bid, Side::Ask] {
            let levels = book.levels(side).take(params.n_levels).map(|(px, l)| LevelAgg { px, sz: l.sz, n: l.n });
            out[side.index()].extend(levels);
        }
        return;
    };
    let buckets = book.buckets();
    let mut shapes = buckets.shapes.lock();
    let at = if let Some(at) = shapes.iter().position(|s| s.is(sig, params.mantissa)) {
        at
    } else {
        shapes.push(Shape::new(book, sig, u64::from(params.mantissa.unwrap_or(1))));
        buckets.any.store(true, Relaxed);
        shapes.len() - 1
    };
    for side in [Side::Bid, Side::Ask] {
        shapes[at].top(side, params.n_levels, &mut out[side.index()]);
    }
}

#[cfg(test)]
#[path = "buckets_tests.rs"]
mod tests;
