//! The one place a block's fills are paired into matches (trades): by `tid`, never by position.
//!
//! The node writes a fill per side of a match, both with its `tid`; their order in a block varies (taker or
//! maker first), and in streaming mode they come on two lines (docs: hl-node-data.md). The trades channel, the
//! recent trades a subscriber starts with, and the candles of the publisher and the store all count a match once,
//! and streaming ingest holds back a fill until its other side is read: they all pair here.

use std::collections::hash_map::Entry;

use rustc_hash::FxHashMap;

/// One match: the fills sharing its `tid`, in the order they came.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TidMatch<F> {
    pub tid: u64,
    pub first: F,
    /// The other side (`None`: only one side was seen, say a user's own fills).
    pub second: Option<F>,
}

impl<F> TidMatch<F> {
    /// The match's fills, first to last.
    pub fn fills(&self) -> impl Iterator<Item = &F> {
        std::iter::once(&self.first).chain(self.second.as_ref())
    }
}

/// Pairs `fills` (of one coin, over one or more blocks) into matches by the `tid` each has, in order of each
/// match's first fill. A third fill of one `tid` is not a side of it: it is left out.
pub fn pair_by_tid<F>(fills: impl IntoIterator<Item = F>, tid: impl Fn(&F) -> u64) -> Vec<TidMatch<F>> {
    let fills = fills.into_iter();
    let mut out: Vec<TidMatch<F>> = Vec::with_capacity(fills.size_hint().0 / 2 + 1);
    // Indexed, not searched: a hostile block of many unpaired fills stays linear.
    let mut at: FxHashMap<u64, usize> = FxHashMap::default();
    for f in fills {
        let t = tid(&f);
        match at.entry(t) {
            Entry::Occupied(e) => {
                let m = &mut out[*e.get()];
                if m.second.is_none() {
                    m.second = Some(f);
                }
            }
            Entry::Vacant(e) => {
                e.insert(out.len());
                out.push(TidMatch { tid: t, first: f, second: None });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (tid, label) pairs, paired by tid.
    fn paired(fills: &[(u64, &'static str)]) -> Vec<(u64, &'static str, Option<&'static str>)> {
        pair_by_tid(fills.iter().copied(), |f| f.0)
            .into_iter()
            .map(|m| (m.tid, m.first.1, m.second.map(|s| s.1)))
            .collect()
    }

    #[test]
    fn sides_pair_by_tid_wherever_they_are_in_order_of_first_appearance() {
        // Adjacent, apart (streaming: two lines), alone, and a tid of 0.
        let got = paired(&[(7, "a"), (7, "b"), (9, "c"), (0, "d"), (9, "e"), (5, "f"), (0, "g")]);
        assert_eq!(got, [(7, "a", Some("b")), (9, "c", Some("e")), (0, "d", Some("g")), (5, "f", None)]);
    }

    #[test]
    fn a_third_fill_of_a_tid_is_left_out_and_nothing_is_an_empty_list() {
        assert_eq!(paired(&[(1, "a"), (1, "b"), (1, "c")]), [(1, "a", Some("b"))]);
        assert!(paired(&[]).is_empty());
        let m = TidMatch { tid: 1, first: "a", second: Some("b") };
        assert_eq!(m.fills().copied().collect::<Vec<_>>(), ["a", "b"]);
    }
}
