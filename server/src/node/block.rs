//! A whole block: the events of all three streams for one height, as the book applies them.

use super::event::{Diff, Fill, OrderStatus};
use super::line::{Events, Line, Stream};
use super::time::UnixNanos;
use super::user_events::UserEvents;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Block {
    pub height: u64,
    /// Consensus time: the exchange timestamp.
    pub block_time: UnixNanos,
    /// `local_time` of each stream's last line of this block (indexed by `Stream::index`), if it wrote one.
    pub node_written: [Option<UnixNanos>; 3],
    pub diffs: Vec<Diff>,
    /// Book-relevant (non-rejected) statuses, in stream order.
    pub statuses: Vec<OrderStatus>,
    pub fills: Vec<Fill>,
    pub rejected_statuses: u32,
    /// Watched users' rejections and verbatim fills.
    pub users: UserEvents,
    /// When we had read all of this block and handed it out whole (Unix ns; 0 when not recorded).
    pub read_at: UnixNanos,
    /// Streaming at line speed: its statuses went to the publisher in parts as their lines were read, and the
    /// followed users' orderUpdates with them, so the complete block carries none.
    pub orders_stepped: bool,
}

impl Block {
    pub fn new(height: u64, block_time: UnixNanos) -> Block {
        Block { height, block_time, ..Block::default() }
    }

    /// Adds one parsed line of `stream` (which must be of this block).
    pub fn push(&mut self, stream: Stream, line: Line) {
        debug_assert_eq!(line.meta.height, self.height);
        let w = &mut self.node_written[stream.index()];
        *w = Some(w.map_or(line.meta.local_time, |t| t.max(line.meta.local_time)));
        self.users.absorb(line.users, self.statuses.len() as u32);
        match line.events {
            Events::Diffs(d) => self.diffs.extend(d),
            Events::Statuses { kept, rejected } => {
                self.statuses.extend(kept);
                self.rejected_statuses += rejected;
            }
            Events::Fills(f) => self.fills.extend(f),
        }
    }
}
