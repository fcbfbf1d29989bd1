//! What one applied line leaves for the publisher: its step (the trades of a fills line, the coins a diffs line
//! changed) and its stage times, which audit stamps on every frame built from it.

use std::sync::Arc;

use crate::node::{Address, Block, Coin, Fill, Stream, UnixNanos};

/// What one step handed to the publisher, in the order they happened.
#[derive(Debug)]
pub struct Step {
    /// Its place in the order ingest pushed steps (set by `Shared::push_step`). Streaming mode hands many steps of
    /// one height (a step per read batch of lines), so the publisher keeps its place by this, not by height.
    pub seq: u64,
    pub height: u64,
    pub block_time: UnixNanos,
    pub data: StepData,
}

#[derive(Debug)]
pub enum StepData {
    /// The block's fills: its trades, and the fill objects of followed users (verbatim, in stream order) with the
    /// watch generation their line was parsed under, so userFills go out with the trades.
    /// `liquidations`: every user's fills carrying a `liquidation` object (the market-wide channel).
    Fills {
        fills: Vec<Fill>,
        users: Vec<(Address, Arc<str>)>,
        generation: Option<u64>,
        liquidations: Vec<(Address, Arc<str>)>,
    },
    /// The block's diffs were applied, changing these coins' books.
    Diffs(Vec<Coin>),
    /// Streaming at line speed: the statuses lines of a block read in one batch (book statuses and followed users'
    /// rejections, as a block of its own), for the followed users' orderUpdates.
    Statuses(Arc<Block>),
}

/// Steps a publisher pass has not seen yet, oldest first.
#[derive(Debug, Default)]
pub struct StepsSince {
    pub diffs: Vec<Arc<Step>>,
    pub fills: Vec<Arc<Step>>,
    /// Statuses steps (`StepData::Statuses`), taken with the fills floor.
    pub statuses: Vec<Arc<Step>>,
    /// The floors to ask from next time: the newest `seq` taken of each kind (or the floor asked with).
    pub diffs_seq: u64,
    pub fills_seq: u64,
    /// Steps above a floor were dropped from the queue before the publisher took them: it must rebuild.
    pub lost: bool,
}

/// How many steps are kept for the publisher (it normally takes them within a block).
pub const KEPT_STEPS: usize = 2 * super::RECENT_BLOCKS;

/// Stage timestamps of one line of an applied block (Unix ns), for latency auditing: frames are stamped with the
/// times of the line they were built from (L2 the diffs, trades the fills, l4Book the statuses that complete it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LineTimes {
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
