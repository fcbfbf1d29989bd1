//! A block's diffs in two parts: the coins someone watches first, every other coin after.
//!
//! A whole-market diffs line holds every coin's diffs, and applying them is cache misses (about 0.7 µs a diff,
//! docs/benchmarks.md). A trader watching BTC should not wait for the other coins', so ingest may apply the
//! watched coins' diffs, let the publisher send their L2 frames, then apply the rest. In between, the first part's
//! coins are one block ahead of `diffs_height` and every other coin is not; `first_part` says which coins at which
//! height, so every reader can label what it reads, and nothing that needs whole orders sees it (`is_complete`
//! is false until the rest is applied and the statuses follow).

use std::sync::Arc;

use rustc_hash::FxHashSet;

use super::{Books, Outcome};
use crate::node::{Coin, Diff, UnixNanos};

/// The applied first part of a diffs step.
#[derive(Clone, Debug)]
pub(super) struct FirstPart {
    height: u64,
    block_time: UnixNanos,
    /// The coins whose diffs this part applied (the selection, not only those that changed).
    coins: Arc<FxHashSet<Coin>>,
    /// The coins it changed.
    changed: Vec<Coin>,
}

/// What a reader sees of a first part: the height its coins are at, that block's time, the coins it changed.
#[derive(Clone, Copy, Debug)]
pub struct FirstView<'a> {
    pub height: u64,
    pub block_time: UnixNanos,
    pub changed: &'a [Coin],
}

impl Books {
    /// Applies the diffs of block `height` whose coin is in `first`, and no other: the rest must follow with
    /// `apply_rest_diffs` before anything else is applied.
    pub fn apply_first_diffs(
        &mut self,
        height: u64,
        block_time: UnixNanos,
        diffs: &[Diff],
        first: Arc<FxHashSet<Coin>>,
    ) -> Outcome {
        if let Some(refused) = self.refuse_diffs(height) {
            return refused;
        }
        let out = self.apply_some(height, block_time, select(diffs, &first, true));
        self.first = Some(FirstPart { height, block_time, coins: first, changed: out.changed.clone() });
        Outcome::Applied(out)
    }

    /// Applies the rest of block `height`'s diffs after `apply_first_diffs`: every diff it left.
    pub fn apply_rest_diffs(&mut self, height: u64, diffs: &[Diff]) -> Outcome {
        let Some(first) = self.first.take_if(|f| f.height == height) else {
            self.counters.gaps += 1;
            return Outcome::Gap {
                expected: self.first.as_ref().map_or(self.diffs_height + 1, |f| f.height),
                got: height,
            };
        };
        let out = self.apply_some(height, first.block_time, select(diffs, &first.coins, false));
        self.diffs_height = height;
        self.diffs_block_time = first.block_time;
        Outcome::Applied(out)
    }

    /// The first part applied so far, while the rest of its block's diffs are not.
    pub fn first_part(&self) -> Option<FirstView<'_>> {
        self.first.as_ref().map(|f| FirstView { height: f.height, block_time: f.block_time, changed: &f.changed })
    }

    /// Block time of the L2 levels `coin` shows now: a first part's block for the coins it changed, else that of
    /// `diffs_height`.
    pub fn l2_block_time_of(&self, coin: &str) -> UnixNanos {
        match &self.first {
            Some(f) if f.changed.iter().any(|c| &**c == coin) => f.block_time,
            _ => self.diffs_block_time(),
        }
    }
}

/// The diffs whose coin is (`inside`) or is not in `set`. A line's diffs come in runs of one coin, and every diff of
/// a line shares its coin's interned name, so a run costs one lookup.
pub fn select<'d>(diffs: &'d [Diff], set: &'d FxHashSet<Coin>, inside: bool) -> impl Iterator<Item = &'d Diff> {
    let mut last: Option<(&Coin, bool)> = None;
    diffs.iter().filter(move |d| {
        let hit = match last {
            Some((coin, hit)) if Arc::ptr_eq(coin, &d.coin) => hit,
            _ => {
                let hit = set.contains(&d.coin);
                last = Some((&d.coin, hit));
                hit
            }
        };
        hit == inside
    })
}

/// Whether splitting `diffs` by `first` leaves both parts non-empty (else one whole step does the same work).
pub fn splits(diffs: &[Diff], first: &FxHashSet<Coin>) -> bool {
    select(diffs, first, true).next().is_some() && select(diffs, first, false).next().is_some()
}

#[cfg(test)]
#[path = "first_tests.rs"]
mod tests;
