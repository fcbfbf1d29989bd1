//! Every wanted depth of one coin's L2 aggregation from one serialization.
//!
//! A client may ask for any `nLevels` from 1 to 100 of each aggregation, so one coin can have 700 shapes, and a
//! hostile client can ask for all of them. The levels of an aggregation are built once, at its deepest wanted depth
//! (`pass::build`), and here written to JSON once, recording where each level ends (`LevelMarks`). A shallower
//! depth's levels are a prefix of each side, so its frame is four slices of that one buffer: everything up to its
//! last bid, the bytes between the sides, its asks, and the closing bytes. A frame per depth then costs a copy of
//! its bytes, not the number formatting of its levels, and is byte for byte what `json::l2_book` writes for that
//! depth (the tests hold the two equal for every depth).
//!
//! Even that copy is not the publisher's: an aggregation's depths are published together, once a pass, as one
//! `L2Set` in the group's `L2Cell`. A depth whose levels did not change keeps its frame; a changed one gets a new
//! number and is cut from the new serialization by the first connection that sends it, so a flood of shapes costs
//! the publisher one store and a comparison per depth, and the cutting falls on the connections that asked.

use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwapOption;

use super::frame::{Audit, Frame};
use crate::book::l2::{LevelAgg, LevelMarks, write_l2_book_marked};

/// An l2Book frame of some depth, written once, with the offsets that cut every shallower depth out of it.
#[derive(Debug, Default)]
pub struct L2Json {
    json: Vec<u8>,
    marks: LevelMarks,
}

impl L2Json {
    /// `{"channel":"l2Book","data":{…}}` of `bids` and `asks` (the deepest levels wanted).
    pub fn new(coin: &str, time_ms: i64, bids: &[LevelAgg], asks: &[LevelAgg]) -> L2Json {
        let mut out = L2Json::default();
        out.json.reserve(64 + 48 * (bids.len() + asks.len()));
        out.json.extend_from_slice(b"{\"channel\":\"l2Book\",\"data\":");
        write_l2_book_marked(&mut out.json, coin, time_ms, bids, asks, &mut out.marks);
        out.json.push(b'}');
        out
    }

    /// The frame of at most `n_levels` a side: the same bytes `json::l2_book` writes for those levels.
    pub fn depth(&self, n_levels: usize) -> Vec<u8> {
        let parts = self.parts(n_levels, 0);
        let mut out = Vec::with_capacity(parts.iter().map(|p| p.len()).sum());
        for p in parts {
            out.extend_from_slice(p);
        }
        out
    }

    /// Whether this depth's levels equal `other`'s at its depth `other_n` (the frames' times may differ): compared
    /// in place, with no frame made.
    pub fn same_levels(&self, n_levels: usize, other: &L2Json, other_n: usize) -> bool {
        concat_eq(&self.parts(n_levels, self.levels_start()), &other.parts(other_n, other.levels_start()))
    }

    /// Where the levels array begins: `[[` just before the bids' first level.
    fn levels_start(&self) -> usize {
        self.marks.open[0].saturating_sub(2)
    }

    /// This depth's frame as four slices from byte `from` of the frame (0: all of it).
    fn parts(&self, n_levels: usize, from: usize) -> [&[u8]; 4] {
        let [bids, asks] = [0, 1].map(|i| self.cut(i, n_levels));
        let [bids_all, asks_all] = [0, 1].map(|i| self.cut(i, usize::MAX));
        [
            &self.json[from..bids],
            &self.json[bids_all..self.marks.open[1]],
            &self.json[self.marks.open[1]..asks],
            &self.json[asks_all..],
        ]
    }

    /// Where side `i`'s first `n` levels end (just inside its `[` when it has none).
    fn cut(&self, i: usize, n: usize) -> usize {
        let ends = &self.marks.ends[i];
        match n.min(ends.len()) {
            0 => self.marks.open[i],
            k => ends[k - 1],
        }
    }
}

/// Whether two lists of slices hold the same bytes end to end, without joining them.
fn concat_eq(mut a: &[&[u8]], mut b: &[&[u8]]) -> bool {
    let (mut x, mut y): (&[u8], &[u8]) = (&[], &[]);
    loop {
        while x.is_empty()
            && let Some((head, rest)) = a.split_first()
        {
            (x, a) = (head, rest);
        }
        while y.is_empty()
            && let Some((head, rest)) = b.split_first()
        {
            (y, b) = (head, rest);
        }
        if x.is_empty() || y.is_empty() {
            return x.is_empty() && y.is_empty();
        }
        let n = x.len().min(y.len());
        if x[..n] != y[..n] {
            return false;
        }
        (x, y) = (&x[n..], &y[n..]);
    }
}

/// One aggregation's newest frames, every wanted depth at once (each depth's `Slot` reads its own from here).
#[derive(Debug, Default)]
pub struct L2Cell {
    now: ArcSwapOption<L2Set>,
}

/// The depths of one aggregation as of one publisher pass, shallowest first.
#[derive(Debug, Default)]
pub struct L2Set {
    depths: Vec<L2Depth>,
}

/// One depth's newest frame: made on first read from the serialization it was published with.
#[derive(Clone, Debug)]
struct L2Depth {
    n_levels: usize,
    /// Its number in this depth's stream of frames (the conflation count a connection reports).
    seq: u64,
    source: Arc<L2Json>,
    audit: Audit,
    frame: Arc<OnceLock<Arc<Frame>>>,
}

impl L2Cell {
    /// The newest frame of depth `n_levels`, cut now if nobody has yet.
    pub fn frame(&self, n_levels: usize) -> Option<Arc<Frame>> {
        let set = self.now.load();
        let d = set.as_ref()?.get(n_levels)?;
        Some(d.frame.get_or_init(|| Arc::new(Frame::new(d.seq, d.source.depth(d.n_levels), d.audit))).clone())
    }

    /// The stamp of depth `n_levels`'s newest frame, without making it.
    pub fn audit(&self, n_levels: usize) -> Option<Audit> {
        self.now.load().as_ref()?.get(n_levels).map(|d| d.audit)
    }

    /// Publishes `json` for the wanted `depths` (shallowest first): a depth whose levels are unchanged keeps its
    /// frame, and one with no frame yet is published only when `exists` (no frame for a coin that has no book).
    /// Returns how many depths got a new frame; nothing is stored when none did and none went.
    pub fn publish(&self, json: Arc<L2Json>, depths: impl Iterator<Item = usize>, exists: bool, audit: Audit) -> u64 {
        let old = self.now.load_full();
        let (mut set, mut changed) = (L2Set::default(), 0);
        for n in depths {
            let prev = old.as_ref().and_then(|s| s.get(n));
            match prev {
                Some(p) if json.same_levels(n, &p.source, p.n_levels) => set.depths.push(p.clone()),
                None if !exists => {}
                _ => {
                    let seq = prev.map_or(1, |p| p.seq + 1);
                    let source = json.clone();
                    set.depths.push(L2Depth { n_levels: n, seq, source, audit, frame: Arc::default() });
                    changed += 1;
                }
            }
        }
        if changed > 0 || old.as_ref().map_or(0, |s| s.depths.len()) != set.depths.len() {
            self.now.store(Some(Arc::new(set)));
        }
        changed
    }
}

impl L2Set {
    fn get(&self, n_levels: usize) -> Option<&L2Depth> {
        let i = self.depths.binary_search_by_key(&n_levels, |d| d.n_levels).ok()?;
        self.depths.get(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::{Fixed, FixedSum};
    use crate::publish::json;

    fn side(n: usize, from: u64, step: i64) -> Vec<LevelAgg> {
        (0..n)
            .map(|i| LevelAgg {
                px: Fixed((from as i64 + step * i as i64) as u64 * 1_000_000),
                sz: FixedSum(u128::from(i as u32 % 7 + 1) * 12_345_678),
                n: i as u32 % 5 + 1,
            })
            .collect()
    }

    #[test]
    fn every_depth_is_the_frame_written_for_it() {
        for (nb, na) in [(0, 0), (0, 3), (4, 0), (1, 1), (100, 100), (37, 100), (100, 2)] {
            let (bids, asks) = (side(nb, 90_000, -1), side(na, 90_001, 1));
            let all = L2Json::new("BTC", 1_778_002_753_024, &bids, &asks);
            for n in 1..=101 {
                let want = json::l2_book("BTC", 1_778_002_753_024, &bids[..nb.min(n)], &asks[..na.min(n)]);
                assert_eq!(all.depth(n), want, "bids {nb} asks {na} depth {n}");
            }
        }
    }

    #[test]
    fn depths_are_the_same_exactly_when_their_levels_are() {
        let (bids, asks) = (side(30, 90_000, -1), side(30, 90_001, 1));
        let all = L2Json::new("BTC", 5, &bids, &asks);
        let mut moved = asks.clone();
        moved[9].sz = FixedSum(1);
        let other = L2Json::new("BTC", 6, &bids, &moved);
        for n in [1, 9, 10, 11, 30, 100] {
            assert!(all.same_levels(n, &all, n), "depth {n} against itself");
            assert_eq!(all.same_levels(n, &other, n), n < 10, "depth {n}: the tenth ask differs");
            assert_eq!(all.same_levels(n, &all, n + 1), n >= 30, "depth {n} against one level deeper");
        }
    }

    #[test]
    fn a_cell_keeps_unchanged_depths_and_renumbers_changed_ones() {
        let (bids, asks) = (side(30, 90_000, -1), side(30, 90_001, 1));
        let cell = L2Cell::default();
        let first = Arc::new(L2Json::new("BTC", 5, &bids, &asks));
        assert_eq!(cell.publish(first, [5, 20].into_iter(), true, Audit::default()), 2);
        let five = cell.frame(5).unwrap();
        assert_eq!(five.json, json::l2_book("BTC", 5, &bids[..5], &asks[..5]));
        let mut moved = asks.clone();
        moved[9].sz = FixedSum(1);
        let second = Arc::new(L2Json::new("BTC", 6, &bids, &moved));
        assert_eq!(cell.publish(second, [5, 20].into_iter(), true, Audit::default()), 1, "only depth 20 changed");
        assert!(Arc::ptr_eq(&cell.frame(5).unwrap(), &five), "depth 5 keeps its frame");
        let twenty = cell.frame(20).unwrap();
        assert_eq!((twenty.seq, five.seq), (2, 1));
        assert_eq!(twenty.json, json::l2_book("BTC", 6, &bids[..20], &moved[..20]));
        assert!(cell.frame(7).is_none(), "a depth nobody wants has no frame");
        let gone = Arc::new(L2Json::new("BTC", 7, &[], &[]));
        assert_eq!(cell.publish(gone, [5].into_iter(), false, Audit::default()), 1, "a coin gone empties its frames");
        assert!(cell.frame(20).is_none());
    }

    #[test]
    fn a_coin_name_that_needs_escaping_is_cut_the_same() {
        let (bids, asks) = (side(3, 10, -1), side(3, 11, 1));
        let all = L2Json::new("@1\"x", 5, &bids, &asks);
        assert_eq!(all.depth(2), json::l2_book("@1\"x", 5, &bids[..2], &asks[..2]));
    }
}
