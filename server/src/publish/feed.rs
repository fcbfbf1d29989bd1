//! The ordered streams' backlog: per-block ticks (trades, l4Book, candles, followed users' frames) that every
//! connection reads with its own cursor.
//!
//! Bounded by ticks and by bytes, so one slow reader never holds memory for everyone; a reader that falls further
//! behind than the feed holds learns exactly what it lost (`ticks_after` returns the oldest tick kept).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use parking_lot::RwLock;
use rustc_hash::FxHashMap;

use super::candles::keeper::CandleKey;
use super::frame::Frame;
use super::users::UserFrames;
use crate::node::{Address, Coin};

/// One block's (or one reset's) frames of the ordered streams.
#[derive(Debug, Default)]
pub struct Tick {
    pub seq: u64,
    pub height: u64,
    pub trades: FxHashMap<Coin, Arc<Frame>>,
    pub l4: FxHashMap<Coin, Arc<Frame>>,
    /// The block's candle frames of wanted (coin, interval)s whose coin traded in it.
    pub candles: FxHashMap<CandleKey, Arc<Frame>>,
    /// Coins whose l4Book subscribers need a fresh snapshot (repaired, or the books were reloaded: `all`).
    pub l4_reset: Vec<Coin>,
    pub all_reset: bool,
    /// Followed users' frames of this tick's line: userFills and userEvents on a fills tick, orderUpdates on a
    /// complete block's (`publish::users`).
    pub users: FxHashMap<Address, UserFrames>,
    /// The watch generation its lines were parsed under: its user frames are complete for users followed since.
    pub users_generation: Option<u64>,
    /// A misc_events block's tick (`publish::misc_feed`): only user frames, at that block's height, which may be
    /// behind the books'. Per-user subscriptions waiting to go live pass over it.
    pub misc: bool,
    bytes: usize,
}

impl Tick {
    pub fn new(seq: u64, height: u64) -> Tick {
        Tick { seq, height, ..Tick::default() }
    }

    pub fn is_empty(&self) -> bool {
        self.trades.is_empty()
            && self.l4.is_empty()
            && self.candles.is_empty()
            && self.l4_reset.is_empty()
            && !self.all_reset
    }

    fn measure(&mut self) {
        let frames = self.trades.values().chain(self.l4.values()).chain(self.candles.values());
        self.bytes = frames.map(|f| f.json.len()).sum::<usize>() + 64;
        self.bytes += self.users.values().map(UserFrames::bytes).sum::<usize>();
    }

    /// Whether this block holds every event of a user followed since watch generation `generation`.
    pub fn users_complete_since(&self, generation: u64) -> bool {
        self.users_generation.is_none_or(|g| g >= generation)
    }
}

/// The bounded backlog of ticks.
#[derive(Debug)]
pub struct Feed {
    ticks: RwLock<VecDeque<Arc<Tick>>>,
    /// Keeps at most this many ticks...
    max_ticks: usize,
    /// ...and drops the oldest while it holds more bytes than this (always keeping the newest).
    max_bytes: usize,
    bytes: AtomicU64,
}

impl Feed {
    pub fn new(max_ticks: usize, max_bytes: usize) -> Feed {
        Feed { ticks: RwLock::default(), max_ticks: max_ticks.max(1), max_bytes, bytes: AtomicU64::new(0) }
    }

    /// Appends ticks, dropping the oldest past the limits.
    pub fn push(&self, ticks: Vec<Tick>) {
        if ticks.is_empty() {
            return;
        }
        let mut feed = self.ticks.write();
        let mut bytes = self.bytes.load(Relaxed) as usize;
        for mut t in ticks {
            t.measure();
            bytes += t.bytes;
            feed.push_back(Arc::new(t));
        }
        while feed.len() > self.max_ticks || (bytes > self.max_bytes && feed.len() > 1) {
            if let Some(old) = feed.pop_front() {
                bytes -= old.bytes;
            }
        }
        self.bytes.store(bytes as u64, Relaxed);
    }

    /// The newest tick's sequence (0 before the first).
    pub fn head(&self) -> u64 {
        self.ticks.read().back().map_or(0, |t| t.seq)
    }

    /// Appends the ticks after `seq`, oldest first; returns the oldest sequence the feed still holds.
    pub fn ticks_after(&self, seq: u64, out: &mut Vec<Arc<Tick>>) -> u64 {
        let feed = self.ticks.read();
        let Some(first) = feed.front() else { return seq + 1 };
        let skip = (seq + 1).saturating_sub(first.seq) as usize;
        out.extend(feed.iter().skip(skip).cloned());
        first.seq
    }

    /// Whether the feed still holds every tick after `seq`.
    pub fn holds_after(&self, seq: u64) -> bool {
        self.ticks.read().front().is_none_or(|t| t.seq <= seq + 1)
    }

    /// The block height of tick `seq`, while the feed holds it.
    pub fn height_of(&self, seq: u64) -> Option<u64> {
        let feed = self.ticks.read();
        let first = feed.front()?.seq;
        feed.get(seq.checked_sub(first)? as usize).map(|t| t.height)
    }

    pub fn bytes(&self) -> u64 {
        self.bytes.load(Relaxed)
    }
}
