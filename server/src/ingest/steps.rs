//! Applying one block in line steps: its fills line (handed to the publisher for trades), its diffs line (applied
//! to the books: L2 is final for the block) and its statuses line (completing the block).
//!
//! The node writes a block's lines fills → diffs → statuses, and the status line is by far the longest, so by-block
//! ingest applies each line as soon as it is parsed instead of waiting for the whole block: trades and L2 frames go
//! out before the status line is even written. Each step records its own line's times (`LineTimes::line`), so
//! audit stamps every frame with the line it was built from. A whole block (streaming mode, a cached block after a
//! sync, or all three lines read at once) goes through the same steps in one go.

use std::sync::Arc;

use crate::book::{self, Applied, Outcome};
use crate::node::time::now_nanos;
use crate::node::{Block, Stream, UnixNanos};
use crate::state::{LineTimes, Shared, Step, StepData};

/// How long ingest holds back the rest of a split diffs step for the publisher to take up its first part. The rest
/// holds only coins nobody watches the books of (allMids, and the block's statuses, wait for it), and the
/// publisher normally takes the first part within a few tens of µs.
const FIRST_WAIT: std::time::Duration = std::time::Duration::from_millis(1);

/// A diffs line read later than this after the node wrote it is being caught up on, and is applied whole: a trader
/// gains nothing from its first part, and the wait would slow catching up.
const FRESH_NANOS: UnixNanos = 250_000_000;

/// Hands block `b`'s fills to the publisher, once per height: `handed` is the highest height handed so far (a
/// resync to an older snapshot re-applies blocks whose trades were already published).
pub fn hand_fills(shared: &Shared, handed: &mut u64, b: &Block, read: UnixNanos) {
    if b.height <= *handed {
        return;
    }
    *handed = b.height;
    hand_fills_of(shared, b, read);
}

/// Hands the fills `b` holds to the publisher: a whole block's, or (streaming) the fills lines of one height read
/// in one batch, each handed once by the assembler.
pub fn hand_fills_of(shared: &Shared, b: &Block, read: UnixNanos) {
    shared.record(times(b, Stream::Fills, read));
    let data = StepData::Fills {
        fills: b.fills.clone(),
        users: b.users.fills.clone(),
        generation: b.users.generation,
        liquidations: b.users.liquidations.clone(),
    };
    shared.push_step(Step { seq: 0, height: b.height, block_time: b.block_time, data });
    shared.signal_change();
}

/// Streaming: hands the publisher the statuses of the open block `b` read since the last part (book statuses from
/// index `from`, followed users' rejections from index `from_rejected`), for orderUpdates. Nothing when nobody is
/// followed or nothing is new.
pub fn hand_statuses_part(shared: &Shared, b: &Block, from: usize, from_rejected: usize, read: UnixNanos) {
    let (kept, rejected) =
        (b.statuses.get(from..).unwrap_or(&[]), b.users.rejected.get(from_rejected..).unwrap_or(&[]));
    if shared.watched().is_empty() || (kept.is_empty() && rejected.is_empty()) {
        return;
    }
    let mut part = Block::new(b.height, b.block_time);
    part.node_written[Stream::Statuses.index()] = b.node_written[Stream::Statuses.index()];
    part.statuses = kept.to_vec();
    part.users.generation = b.users.generation;
    part.users.rejected = rejected.iter().map(|(at, s)| (at.saturating_sub(from as u32), s.clone())).collect();
    shared.record(times(b, Stream::Statuses, read));
    let data = StepData::Statuses(Arc::new(part));
    shared.push_step(Step { seq: 0, height: b.height, block_time: b.block_time, data });
    shared.signal_change();
}

/// Streaming: applies the diffs of the open block `b` from index `from` on (the lines read since the last part),
/// opening the block with its first part. `None` when there was nothing new.
pub fn apply_diffs_part(shared: &Shared, b: &Block, from: usize, read: UnixNanos) -> Option<Outcome> {
    let diffs = b.diffs.get(from..).filter(|d| !d.is_empty())?;
    let outcome = {
        let mut books = shared.books_mut();
        let outcome = books.apply_diffs_part(b.height, b.block_time, diffs);
        if let Outcome::Applied(a) = &outcome {
            shared.record(times(b, Stream::Diffs, read));
            shared.push_step(diffs_step(b, a));
        }
        outcome
    };
    if let Outcome::Applied(a) = &outcome {
        report(shared, a);
        shared.health().counters().diff_parts.inc();
        shared.signal_change();
    }
    Some(outcome)
}

/// Applies block `b`'s diffs under the write lock, unless they already are. `None` when there was nothing to do.
///
/// With `split` (a line just read live), when some client watches the books of a few coins and the line also
/// has other coins' diffs, the watched coins' diffs go first, in a step of their own, and the lock is let go
/// until the publisher has taken them up; the rest are applied while it sends their frames (`book::first`).
/// Whole blocks (streaming mode, cached blocks) and lines read long after their write (catching up) are not split.
pub fn apply_diffs(shared: &Shared, b: &Block, read: UnixNanos, split: bool) -> Option<Outcome> {
    let fresh = b.node_written[Stream::Diffs.index()].is_some_and(|w| read.saturating_sub(w) < FRESH_NANOS);
    let first = (split && fresh).then(|| shared.first_coins()).filter(|first| book::splits(&b.diffs, first));
    let outcome = {
        let mut books = shared.books_mut();
        if books.diffs_height() >= b.height && books.height() < b.height {
            return None; // Handed out as a line before: only the statuses are missing.
        }
        let outcome = match &first {
            Some(first) => books.apply_first_diffs(b.height, b.block_time, &b.diffs, first.clone()),
            None => books.apply_diffs(b.height, b.block_time, &b.diffs),
        };
        if let Outcome::Applied(a) = &outcome {
            // Recorded under the write lock, so a reader of the books at this height also finds its times.
            shared.record(times(b, Stream::Diffs, read));
            shared.push_step(diffs_step(b, a));
        }
        outcome
    };
    let Outcome::Applied(a) = &outcome else { return Some(outcome) };
    report(shared, a);
    shared.signal_change();
    if first.is_none() {
        return Some(outcome);
    }
    if !shared.wait_first_taken(b.height, FIRST_WAIT) {
        shared.health().counters().first_waits_timed_out.inc();
    }
    let rest = {
        let mut books = shared.books_mut();
        let rest = books.apply_rest_diffs(b.height, &b.diffs);
        if let Outcome::Applied(a) = &rest {
            shared.push_step(diffs_step(b, a));
        }
        rest
    };
    if let Outcome::Applied(a) = &rest {
        shared.health().counters().split_diff_steps.inc();
        report(shared, a);
        shared.signal_change();
    }
    Some(rest)
}

fn diffs_step(b: &Block, a: &Applied) -> Step {
    Step { seq: 0, height: b.height, block_time: b.block_time, data: StepData::Diffs(a.changed.clone()) }
}

/// Applies block `b`'s statuses (its diffs must be applied), completing it.
pub fn complete(shared: &Shared, b: Arc<Block>, read: UnixNanos) -> Outcome {
    let outcome = {
        let mut books = shared.books_mut();
        let outcome = books.apply_statuses(b.height, &b.statuses);
        if let Outcome::Applied(_) = outcome {
            shared.record(times(&b, Stream::Statuses, read));
            shared.remember(b.clone());
            shared.completed(&books);
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

fn times(b: &Block, line: Stream, read: UnixNanos) -> LineTimes {
    LineTimes {
        height: b.height,
        line,
        block_time: b.block_time,
        node_written: b.node_written[line.index()].unwrap_or(0),
        read,
        applied: now_nanos(),
    }
}

/// Counts a step's copy-on-write copies, and counts and logs its inconsistencies.
fn report(shared: &Shared, a: &Applied) {
    let c = &shared.health().counters();
    if a.copies > 0 {
        c.book_copies.add(u64::from(a.copies));
    }
    if a.inconsistencies.is_empty() {
        return;
    }
    c.inconsistencies.add(a.inconsistencies.len() as u64);
    for i in &a.inconsistencies {
        tracing::warn!(coin = %i.coin, oid = i.oid, height = a.height, "inconsistency: {:?}", i.kind);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::book::Books;
    use crate::node::event::{HexBytes, Side};
    use crate::node::{Coin, Diff, DiffKind, Fixed};

    const WRITTEN: UnixNanos = 1_778_002_753_100_000_000;

    /// Block 11: a new order on BTC, one on ETH, one more on BTC.
    fn block() -> Block {
        let new = |coin: &Coin, oid| Diff {
            coin: coin.clone(),
            user: HexBytes([1; 20]),
            oid,
            side: Side::Bid,
            px: Fixed::parse("10.0").unwrap(),
            kind: DiffKind::New { sz: Fixed::parse("1.0").unwrap(), insert_before: None },
        };
        let (btc, eth): (Coin, Coin) = ("BTC".into(), "ETH".into());
        let mut b = Block { height: 11, block_time: WRITTEN, ..Block::default() };
        b.diffs = vec![new(&btc, 1), new(&eth, 2), new(&btc, 3)];
        b.node_written[Stream::Diffs.index()] = Some(WRITTEN);
        b
    }

    /// Books at 10 with a client watching BTC's book.
    fn shared() -> Shared {
        let shared = Shared::new(Books::new(10, []), Duration::from_secs(10));
        shared.set_first_coins(std::iter::once(Coin::from("BTC")).collect());
        shared
    }

    /// The diffs steps queued for block 11, as the coins each one changed.
    fn steps(shared: &Shared) -> Vec<Vec<String>> {
        let steps = shared.steps_after(0, 11, u64::MAX).diffs;
        let coins = |s: &Arc<Step>| match &s.data {
            StepData::Diffs(c) => c.iter().map(ToString::to_string).collect(),
            StepData::Fills { .. } | StepData::Statuses(_) => Vec::new(),
        };
        steps.iter().map(coins).collect()
    }

    #[test]
    fn a_fresh_line_applies_the_watched_coins_first_then_the_rest() {
        let shared = shared();
        let outcome = apply_diffs(&shared, &block(), WRITTEN + 300_000, true);
        assert!(matches!(outcome, Some(Outcome::Applied(_))), "{outcome:?}");
        assert_eq!(steps(&shared), [vec!["BTC"], vec!["ETH"]]);
        let books = shared.books();
        assert_eq!((books.diffs_height(), books.first_part().is_none()), (11, true));
        assert_eq!(books.coin("BTC").map(crate::book::CoinBook::len), Some(2));
        let c = &shared.health().counters();
        assert_eq!(c.split_diff_steps.get(), 1);
        // No publisher runs here, so nobody took the first part up: the rest went ahead after the wait.
        assert_eq!(c.first_waits_timed_out.get(), 1);
    }

    #[test]
    fn a_line_read_long_after_its_write_or_a_whole_block_is_applied_in_one_step() {
        for (read, split) in [(WRITTEN + FRESH_NANOS, true), (WRITTEN + 300_000, false)] {
            let shared = shared();
            apply_diffs(&shared, &block(), read, split);
            assert_eq!(steps(&shared), [vec!["BTC", "ETH"]], "read {read}, split {split}");
            assert_eq!(shared.health().counters().split_diff_steps.get(), 0);
            assert_eq!(shared.books().diffs_height(), 11);
        }
    }
}
