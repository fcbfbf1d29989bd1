//! Streaming at line speed, the ingest side: what the lines read since the last batch hand on before their block
//! is whole (docs/architecture.md, "Streaming at line speed").
//!
//! A batch is a run of one stream's lines in a read, or what a read brought: the fills lines go to the publisher (a
//! step per height, a trade's two sides together), the open block's new status lines go for orderUpdates, and its
//! new diffs are applied to the books as one part. Readers that need complete books get them by rolling the open
//! block's parts back (`book::undo`).

use super::{Ingest, Phase, steps};
use crate::node::matches::pair_by_tid;
use crate::node::time::now_nanos;
use crate::node::{Block, Events, Fill, Line, Stream, UnixNanos};

impl Ingest {
    /// Streaming lines: hands on the fills lines read since the last flush (a step per height) and the open
    /// block's new status lines (orderUpdates), and applies its new diffs as one part. Called when a run of one
    /// stream's lines ends and after each read.
    pub(super) fn flush_lines(&mut self) {
        if !self.lines() {
            return;
        }
        let read = now_nanos();
        self.hand_fills(0, read);
        if !matches!(self.phase, Phase::Live) {
            (self.diffs_due, self.statuses_due) = (false, false);
            return;
        }
        let h = self.assembler.emitted() + 1;
        let Some(block) = self.assembler.pending(h) else { return };
        let mut open = self.open.filter(|o| o.height == h).unwrap_or(Open { height: h, ..Open::default() });
        if std::mem::take(&mut self.statuses_due) {
            steps::hand_statuses_part(&self.shared, block, open.statuses, open.rejected, read);
            // Counts never go down: after a source's `Restart` the block's lines come again from its start, and
            // what went on before must not go twice while the re-read catches up.
            open.statuses = open.statuses.max(block.statuses.len());
            open.rejected = open.rejected.max(block.users.rejected.len());
        }
        let mut outcome = None;
        // The books are complete before a block's first part: someone who waits for that gets its turn first (the
        // part goes with the next batch, or the whole block with its end).
        if self.diffs_due && (open.diffs > 0 || !self.shared.wants_complete()) {
            self.diffs_due = false;
            outcome = steps::apply_diffs_part(&self.shared, block, open.diffs, read);
            open.diffs = open.diffs.max(block.diffs.len());
        }
        self.open = Some(open);
        if let Some(o) = outcome {
            self.after(&o);
        }
    }

    /// Streaming lines: hands on the fills lines read, a step per height. A trade's two sides are two lines, and
    /// a batch may end between them: the newest height's lines from the first whose trade still misses a side wait
    /// for the other side (a trade is one frame with both users), unless the stream moved on to a later height or
    /// the block at `ended` or below is whole.
    pub(super) fn hand_fills(&mut self, ended: u64, read: UnixNanos) {
        let newest = self.fills_due.last().map_or(0, |l| l.meta.height);
        let keep = if newest <= ended { self.fills_due.len() } else { unpaired_from(&self.fills_due, newest) };
        let held = self.fills_due.split_off(keep);
        let mut fills = std::mem::replace(&mut self.fills_due, held).into_iter().peekable();
        while let Some(first) = fills.next() {
            let mut b = Block::new(first.meta.height, first.meta.block_time);
            b.push(Stream::Fills, first);
            while let Some(line) = fills.next_if(|l| l.meta.height == b.height) {
                b.push(Stream::Fills, line);
            }
            steps::hand_fills_of(&self.shared, &b, read);
        }
    }

    /// After handing fills over: the height through which they all are, for the history store, which must not
    /// write a block before its last fills line (lines still held for a trade's other side included).
    pub(super) fn publish_fills_through(&mut self) {
        let read = self.assembler.fills_through();
        let held = self.fills_due.first().map_or(u64::MAX, |l| l.meta.height.saturating_sub(1));
        self.shared.set_fills_through(read.min(held));
    }

    /// Streaming lines: someone waits for complete books while the open block has parts applied (the node may
    /// have paused or stopped, and no later line will end the block soon): take the parts back, so the books are
    /// the last complete block's, and apply them again once nobody waits (`book::undo`).
    pub(super) fn roll_back_for_readers(&mut self) {
        if !self.lines() || self.open.is_none_or(|o| o.diffs == 0) || !self.shared.wants_complete() {
            return;
        }
        if !self.shared.books_mut().roll_back() {
            return;
        }
        if let Some(o) = &mut self.open {
            o.diffs = 0;
        }
        self.diffs_due = true;
        self.shared.health().counters().roll_backs.inc();
        self.shared.signal_change();
    }
}

/// Where the lines of height `newest` at the end of `lines` start to hold a fill whose trade (tid) has only that
/// one side among them; `lines.len()` when every trade there is whole.
fn unpaired_from(lines: &[Line], newest: u64) -> usize {
    fn fills_of(l: &Line) -> &[Fill] {
        if let Events::Fills(f) = &l.events { f } else { &[] }
    }
    let start = lines.iter().rposition(|l| l.meta.height != newest).map_or(0, |i| i + 1);
    let matches = pair_by_tid(lines[start..].iter().flat_map(fills_of), |f| f.tid);
    let lone: rustc_hash::FxHashSet<u64> = matches.iter().filter(|m| m.second.is_none()).map(|m| m.tid).collect();
    (start..lines.len()).find(|&i| fills_of(&lines[i]).iter().any(|f| lone.contains(&f.tid))).unwrap_or(lines.len())
}

/// Streaming lines: how much of the open block went on before it was whole (counts of its diffs, book statuses
/// and followed users' rejections).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Open {
    pub(super) height: u64,
    pub(super) diffs: usize,
    pub(super) statuses: usize,
    pub(super) rejected: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::NodeParser;

    /// A streaming fills line of block `h`: one side of trade `tid`.
    fn fill(h: u64, tid: u64, side: &str) -> Line {
        let text = format!(
            "{{\"local_time\":\"2026-05-05T17:39:15.992790807\",\"block_time\":\"2026-05-05T17:39:13.024084407\",\
             \"block_number\":{h},\"events\":[[\"0x1624a8af8b91cc781586b4d7a33b8e693dc11015\",{{\"coin\":\"BTC\",\
             \"px\":\"81308.0\",\"sz\":\"0.00033\",\"side\":\"{side}\",\"time\":1778002753024,\
             \"startPosition\":\"0.20486\",\"dir\":\"Open Long\",\"closedPnl\":\"0.0\",\"hash\":\
             \"0x0000000000000000000000000000000000000000000000000000000000000000\",\"oid\":412036451245,\
             \"crossed\":true,\"fee\":\"0.010866\",\"tid\":{tid},\"feeToken\":\"USDC\",\"twapId\":null}}]]}}"
        );
        NodeParser::default().parse(Stream::Fills, &text).expect("a fills line")
    }

    #[test]
    fn a_trade_missing_its_other_side_waits_with_every_line_after_it() {
        let lines = [fill(5, 1, "B"), fill(5, 1, "A"), fill(6, 2, "B"), fill(6, 3, "B"), fill(6, 2, "A")];
        // Block 5 is behind: all of it goes. In 6, trade 3 has one side, so it and the line after it wait.
        assert_eq!(unpaired_from(&lines, 6), 3);
        assert_eq!(unpaired_from(&lines[..2], 5), 2, "every trade whole");
        assert_eq!(unpaired_from(&lines[..3], 6), 2, "the newest height's only line waits");
    }
}
