//! Applying one block in line steps: its fills line (handed to the publisher for trades), its diffs line (applied
//! to the books: L2 is final for the block) and its statuses line (completing the block).
//!
//! The node writes a block's lines fills → diffs → statuses, and the status line is by far the longest, so by-block
//! ingest applies each line as soon as it is parsed instead of waiting for the whole block: trades and L2 frames go
//! out before the status line is even written. Each step records its own line's times (`BlockTimes::line`), so
//! audit stamps every frame with the line it was built from. A whole block (streaming mode, a cached block after a
//! sync, or all three lines read at once) goes through the same steps in one go.

use std::sync::Arc;

use crate::book::{Applied, Outcome};
use crate::node::time::now_nanos;
use crate::node::{Block, Stream, UnixNanos};
use crate::state::{BlockTimes, Shared, Step, StepData};

/// Hands block `b`'s fills to the publisher, once per height: `handed` is the highest height handed so far (a
/// resync to an older snapshot re-applies blocks whose trades were already published).
pub fn hand_fills(shared: &Shared, handed: &mut u64, b: &Block, read: UnixNanos) {
    if b.height <= *handed {
        return;
    }
    *handed = b.height;
    shared.record(times(b, Stream::Fills, read));
    let data = StepData::Fills { fills: b.fills.clone(), users: b.users.fills.clone(), generation: b.users.generation };
    shared.push_step(Step { height: b.height, block_time: b.block_time, data });
    shared.signal_change();
}

/// Applies block `b`'s diffs under the write lock, unless they already are. `None` when there was nothing to do.
pub fn apply_diffs(shared: &Shared, b: &Block, read: UnixNanos) -> Option<Outcome> {
    let outcome = {
        let mut books = shared.books_mut();
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
        shared.signal_change();
    }
    Some(outcome)
}

/// Applies block `b`'s statuses (its diffs must be applied), completing it.
pub fn complete(shared: &Shared, b: Arc<Block>, read: UnixNanos) -> Outcome {
    let outcome = {
        let mut books = shared.books_mut();
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
        shared.health().applied(b.height, b.block_time, written);
        shared.signal_change();
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
    let c = &shared.health().counters;
    c.inconsistencies.fetch_add(a.inconsistencies.len() as u64, std::sync::atomic::Ordering::Relaxed);
    for i in &a.inconsistencies {
        tracing::warn!(coin = %i.coin, oid = i.oid, height = a.height, "inconsistency: {:?}", i.kind);
    }
}
