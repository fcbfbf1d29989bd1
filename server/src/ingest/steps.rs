//! Applying one block in line steps: its fills line (handed to the publisher for trades), its diffs line (applied
//! to the books: L2 is final for the block) and its statuses line (completing the block).
//!
//! The node writes a block's lines fills → diffs → statuses, and the status line is by far the longest, so by-block
//! ingest applies each line as soon as it is parsed instead of waiting for the whole block: trades and L2 frames go
//! out before the status line is even written. Each step records its own line's times (`BlockTimes::line`), so
//! audit stamps every frame with the line it was built from. A whole block (streaming mode, a cached block after a
//! sync, or all three lines read at once) goes through the same steps in one go.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::live::Shared;
use crate::book::{Applied, Books, Outcome};
use crate::node::time::now_nanos;
use crate::node::{Block, Coin, Fill, Stream, UnixNanos};

/// What one step handed to the publisher, in the order they happened.
#[derive(Debug)]
pub struct Step {
    pub height: u64,
    pub block_time: UnixNanos,
    pub data: StepData,
}

#[derive(Debug)]
pub enum StepData {
    /// The block's fills: its trades.
    Fills(Vec<Fill>),
    /// The block's diffs were applied, changing these coins' books.
    Diffs(Vec<Coin>),
}

/// How many steps are kept for the publisher (it normally takes them within a block).
pub const KEPT_STEPS: usize = 2 * super::live::RECENT_BLOCKS;

/// Stage timestamps of one line of an applied block (Unix ns), for latency auditing: frames are stamped with the
/// times of the line they were built from (L2 the diffs, trades the fills, l4Book the statuses that complete it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockTimes {
    pub height: u64,
    pub line: Stream,
    /// Consensus time (the exchange timestamp).
    pub block_time: i64,
    /// The node's `local_time` of this line (the last of its stream in the block; 0 if it wrote none).
    pub node_written: i64,
    /// We had read the line (parsed it).
    pub read: i64,
    /// Its step was applied (the books changed, or the fills were handed on).
    pub applied: i64,
}

impl Shared {
    /// Waits up to `timeout` for books with no half-applied block (whole orders at one height); `None` if they
    /// are still half-applied then (a block whose status line was lost stays so until the resync installs books).
    pub fn complete_books(&self, timeout: Duration) -> Option<parking_lot::RwLockReadGuard<'_, Books>> {
        let until = Instant::now() + timeout;
        loop {
            let seen = self.applied_seq();
            let books = self.books.read();
            if books.is_complete() {
                return Some(books);
            }
            drop(books);
            let left = until.checked_duration_since(Instant::now())?;
            self.wait_applied(seen, left);
        }
    }

    pub(super) fn push_step(&self, step: Step) {
        let mut s = self.steps.lock();
        if s.len() == KEPT_STEPS {
            s.pop_front();
        }
        s.push_back(Arc::new(step));
    }
}

/// Hands block `b`'s fills to the publisher, once per height: `handed` is the highest height handed so far (a
/// resync to an older snapshot re-applies blocks whose trades were already published).
pub fn hand_fills(shared: &Shared, handed: &mut u64, b: &Block, read: UnixNanos) {
    if b.height <= *handed {
        return;
    }
    *handed = b.height;
    shared.record(times(b, Stream::Fills, read));
    shared.push_step(Step { height: b.height, block_time: b.block_time, data: StepData::Fills(b.fills.clone()) });
    shared.bump();
}

/// Applies block `b`'s diffs under the write lock, unless they already are. `None` when there was nothing to do.
pub fn apply_diffs(shared: &Shared, b: &Block, read: UnixNanos) -> Option<Outcome> {
    let outcome = {
        let mut books = shared.books.write();
        if books.diffs_height() >= b.height && books.height() < b.height {
            return None; // Handed out as a line before: only the statuses are missing.
        }
        let outcome = books.apply_diffs(b.height, b.block_time, &b.diffs);
        if let Outcome::Applied(a) = &outcome {
            // Recorded under the write lock, so a reader of the books at this height also finds its times.
            shared.record(times(b, Stream::Diffs, read));
            shared.push_step(Step {
                height: b.height,
                block_time: b.block_time,
                data: StepData::Diffs(a.changed.clone()),
            });
        }
        outcome
    };
    if let Outcome::Applied(a) = &outcome {
        report(shared, a);
        shared.bump();
    }
    Some(outcome)
}

/// Applies block `b`'s statuses (its diffs must be applied), completing it.
pub fn complete(shared: &Shared, b: Arc<Block>, read: UnixNanos) -> Outcome {
    let outcome = {
        let mut books = shared.books.write();
        let outcome = books.apply_statuses(b.height, &b.statuses);
        if let Outcome::Applied(_) = outcome {
            shared.record(times(&b, Stream::Statuses, read));
            shared.remember(b.clone());
        }
        outcome
    };
    if let Outcome::Applied(a) = &outcome {
        report(shared, a);
        let written = b.node_written.iter().flatten().max().copied();
        shared.health.applied(b.height, b.block_time, written);
        shared.bump();
    }
    outcome
}

fn times(b: &Block, line: Stream, read: UnixNanos) -> BlockTimes {
    BlockTimes {
        height: b.height,
        line,
        block_time: b.block_time,
        node_written: b.node_written[line.index()].unwrap_or(0),
        read,
        applied: now_nanos(),
    }
}

/// Counts and logs a step's inconsistencies.
fn report(shared: &Shared, a: &Applied) {
    if a.inconsistencies.is_empty() {
        return;
    }
    let c = &shared.health.counters;
    c.inconsistencies.fetch_add(a.inconsistencies.len() as u64, std::sync::atomic::Ordering::Relaxed);
    for i in &a.inconsistencies {
        tracing::warn!(coin = %i.coin, oid = i.oid, height = a.height, "inconsistency: {:?}", i.kind);
    }
}
