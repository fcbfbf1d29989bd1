//! Every wanted depth of one coin's L2 aggregation from one serialization.
//!
//! A client may ask for any `nLevels` from 1 to 100 of each aggregation, so one coin can have 700 shapes, and a
//! hostile client can ask for all of them. The levels of an aggregation are built once, at its deepest wanted depth
//! (`pass::build`), and here written to JSON once, recording where each level ends (`LevelMarks`). A shallower
//! depth's levels are a prefix of each side, so its frame is four slices of that one buffer: everything up to its
//! last bid, the bytes between the sides, its asks, and the closing bytes. A frame per depth then costs a copy of
//! its bytes, not the number formatting of its levels, and is byte for byte what `json::l2_book` writes for that
//! depth (the tests hold the two equal for every depth).

use std::sync::LazyLock;

use memchr::memmem::Finder;

use crate::book::l2::{LevelAgg, LevelMarks, write_l2_book_marked};

/// Where an l2Book frame's levels begin; built once (building a finder per search cost more than the search).
static LEVELS_KEY: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"levels\":"));

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

    /// Whether `old`, an l2Book frame, carries the same levels as this depth's frame would (its time may differ),
    /// compared in place: a publisher pass over many shapes copies only the depths that changed.
    pub fn same_levels_as(&self, n_levels: usize, old: &[u8]) -> bool {
        let Some(at) = LEVELS_KEY.find(old) else { return false };
        // `"levels":` then `[[`, and the bids' first level starts just inside the second bracket.
        let Some(start) = self.marks.open[0].checked_sub(2) else { return false };
        let mut old = &old[at + LEVELS_KEY.needle().len()..];
        for part in self.parts(n_levels, start) {
            match old.split_at_checked(part.len()) {
                Some((head, rest)) if head == part => old = rest,
                _ => return false,
            }
        }
        old.is_empty()
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
    fn a_depth_is_the_same_as_a_frame_exactly_when_its_levels_are() {
        let (bids, asks) = (side(30, 90_000, -1), side(30, 90_001, 1));
        let all = L2Json::new("BTC", 5, &bids, &asks);
        let mut moved = asks.clone();
        moved[9].sz = FixedSum(1);
        let other = L2Json::new("BTC", 6, &bids, &moved);
        for n in [1, 9, 10, 11, 30, 100] {
            assert!(all.same_levels_as(n, &all.depth(n)), "depth {n} against itself");
            assert!(all.same_levels_as(n, &other.depth(n)) == (n < 10), "depth {n}: the tenth ask differs");
            assert!(!all.same_levels_as(n, &all.depth(n + 1)) || n >= 30, "depth {n} against a deeper frame");
        }
        assert!(!all.same_levels_as(3, br#"{"channel":"l2Book","data":{"coin":"BTC"}}"#));
    }

    #[test]
    fn a_coin_name_that_needs_escaping_is_cut_the_same() {
        let (bids, asks) = (side(3, 10, -1), side(3, 11, 1));
        let all = L2Json::new("@1\"x", 5, &bids, &asks);
        assert_eq!(all.depth(2), json::l2_book("@1\"x", 5, &bids[..2], &asks[..2]));
    }
}
