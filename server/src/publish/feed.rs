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
use super::users::{UserChannel, UserFrames};
use crate::node::{Address, Coin};

/// Which stream a tick comes from: the books' blocks, or one of the node's side streams, whose block heights run
/// on their own, behind the books' (`ingest::side`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum TickKind {
    #[default]
    Blocks,
    /// misc_events (`publish::misc_feed`).
    Misc,
    /// node_twap_statuses (`publish::twap_feed`).
    Twaps,
}

impl TickKind {
    /// The kind of tick a per-user channel's frames ride: a side stream's or the books'.
    pub fn of(ch: UserChannel) -> TickKind {
        match ch {
            UserChannel::Fundings | UserChannel::Ledger => TickKind::Misc,
            UserChannel::TwapHistory => TickKind::Twaps,
            _ => TickKind::Blocks,
        }
    }

    /// Not the books': only user frames, at its own stream's height.
    pub fn is_side(self) -> bool {
        self != TickKind::Blocks
    }
}

/// One block's (or one reset's) frames of the ordered streams.
#[derive(Debug, Default)]
pub struct Tick {
    pub seq: u64,
    pub height: u64,
    pub trades: FxHashMap<Coin, Arc<Frame>>,
    pub l4: FxHashMap<Coin, Arc<Frame>>,
    /// The block's candle frames of wanted (coin, interval)s whose coin traded in it.
    pub candles: FxHashMap<CandleKey, Arc<Frame>>,
    /// The block's (or fills line's) liquidation fills (`publish::liquidations`), built whether wanted or not.
    pub liquidations: Option<Arc<Frame>>,
    /// Coins whose l4Book subscribers need a fresh snapshot (repaired, or the books were reloaded: `all`).
    pub l4_reset: Vec<Coin>,
    pub all_reset: bool,
    /// Followed users' frames of this tick's line: userFills and userEvents on a fills tick, orderUpdates on a
    /// complete block's (`publish::users`).
    pub users: FxHashMap<Address, UserFrames>,
    /// The watch generation its lines were parsed under: its user frames are complete for users followed since.
    pub users_generation: Option<u64>,
    /// A side stream block's tick (misc_events, node_twap_statuses): only user frames, at that block's height,
    /// which may be behind the books'. Per-user subscriptions waiting to go live pass over it.
    pub kind: TickKind,
    /// The version of `Wanted` it was built under: it holds the frames of every stream wanted since that version
    /// (a resumed subscription's stream must have been wanted through the whole replay).
    pub wanted_version: u64,
    bytes: usize,
}

impl Tick {
    pub fn new(seq: u64, height: u64) -> Tick {
        Tick { seq, height, ..Tick::default() }
    }

    pub fn is_empty(&self) -> bool {
        self.trades.is_empty()
            && self.liquidations.is_none()
            && self.l4.is_empty()
            && self.candles.is_empty()
            && self.l4_reset.is_empty()
            && !self.all_reset
    }

    fn measure(&mut self) {
        let frames =
            self.trades.values().chain(self.l4.values()).chain(self.candles.values()).chain(self.liquidations.iter());
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
    ticks: RwLock<Ticks>,
    /// Keeps at most this many ticks...
    max_ticks: usize,
    /// ...and drops the oldest while it holds more bytes than this (always keeping the newest).
    max_bytes: usize,
    bytes: AtomicU64,
}

/// The ticks held, and the height after which they are every tick there was.
#[derive(Debug, Default)]
struct Ticks {
    held: VecDeque<Arc<Tick>>,
    /// Per kind (`TickKind`), every tick of a greater height is held: the highest height dropped,
    /// or the first tick's (the server may have started inside that block). `None` before the first tick.
    floor: [Option<u64>; 3],
}

impl std::ops::Deref for Ticks {
    type Target = VecDeque<Arc<Tick>>;
    fn deref(&self) -> &Self::Target {
        &self.held
    }
}

/// Where a resumed subscription starts on the feed: after `cursor`, replaying the ticks up to `to` (the newest
/// when it resumed), minus their frames of heights up to `since`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResumeAt {
    pub cursor: u64,
    pub to: u64,
}

/// Why a subscription cannot resume from a height: the feed no longer holds the ticks after it (`oldest`: the
/// lowest height it can resume from), the height is ahead of the newest tick's, or nobody wanted the stream for
/// part of the time since (its frames were never built).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoResume {
    TooOld { oldest: u64 },
    Ahead { newest: u64 },
    NotKept,
}

impl Feed {
    pub fn new(max_ticks: usize, max_bytes: usize) -> Feed {
        Feed { ticks: RwLock::default(), max_ticks: max_ticks.max(1), max_bytes, bytes: AtomicU64::new(0) }
    }

    /// Where a subscription that processed every frame of its own up to height `since` resumes: before the first
    /// tick above it (side streams' ticks carry their own block's height, behind the books': `kind` says which
    /// kind anchors the search; the replay skips frames of heights up to `since`).
    /// A reader may be at most `max_behind` ticks behind the newest (`backlog_blocks`), so the resume point must
    /// be too.
    pub fn resume_at(&self, since: u64, of: TickKind, max_behind: u64) -> Result<ResumeAt, NoResume> {
        let feed = self.ticks.read();
        let (Some(floor), Some(newest)) = (feed.floor[of as usize], feed.back()) else {
            return Err(NoResume::NotKept);
        };
        let kind = || feed.iter().filter(|t| t.kind == of);
        if since < floor {
            return Err(NoResume::TooOld { oldest: floor });
        }
        let top = kind().map(|t| t.height).max().unwrap_or(floor);
        if since > top {
            return Err(NoResume::Ahead { newest: top });
        }
        // Before the first tick above `since`: heights rise along the feed per stream, not across streams (streaming,
        // a block's complete-block tick comes after the next block's first fills), so a later tick may still be of
        // `since` or below, and the replay skips its frames (the subscription had them).
        let first_above = kind().find(|t| t.height > since);
        let mut cursor = first_above.map_or(newest.seq, |t| t.seq - 1);
        // A books resume also replays the side ticks right before that one: they came after the books' frames of
        // `since`, with lower heights (userEvents carries both kinds; a side tick holds no other books frame).
        if of == TickKind::Blocks {
            let first = feed.front().map_or(0, |t| t.seq);
            while cursor > first && feed.get((cursor - first) as usize).is_some_and(|t| t.kind.is_side()) {
                cursor -= 1;
            }
        }
        // The oldest tick a reader may stand on: resuming from its height replays only ticks after it.
        let lowest = newest.seq.saturating_sub(max_behind);
        if cursor < lowest {
            let oldest = kind().find(|t| t.seq >= lowest).map_or(top, |t| t.height);
            return Err(NoResume::TooOld { oldest });
        }
        Ok(ResumeAt { cursor, to: newest.seq })
    }

    /// Whether every tick after `cursor` was built with `version` or a later `Wanted` (see `Tick::wanted_version`).
    pub fn wanted_through(&self, cursor: u64, version: u64) -> bool {
        let feed = self.ticks.read();
        let Some(first) = feed.front() else { return true };
        feed.get((cursor + 1).saturating_sub(first.seq) as usize).is_none_or(|t| t.wanted_version >= version)
    }

    /// Whether every tick after `cursor` holds all events of a user watched since `generation`.
    pub fn users_complete_through(&self, cursor: u64, generation: u64) -> bool {
        let feed = self.ticks.read();
        let Some(first) = feed.front() else { return true };
        let skip = (cursor + 1).saturating_sub(first.seq) as usize;
        feed.iter().skip(skip).all(|t| t.users_complete_since(generation))
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
            feed.floor[t.kind as usize].get_or_insert(t.height);
            feed.held.push_back(Arc::new(t));
        }
        while feed.len() > self.max_ticks || (bytes > self.max_bytes && feed.len() > 1) {
            if let Some(old) = feed.held.pop_front() {
                bytes -= old.bytes;
                let floor = &mut feed.floor[old.kind as usize];
                *floor = (*floor).max(Some(old.height));
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

#[cfg(test)]
mod tests {
    use super::*;

    const B: TickKind = TickKind::Blocks;

    /// A feed of `heights` (one tick each, numbered from 1), keeping at most `max` ticks.
    fn feed(heights: &[u64], max: usize) -> Feed {
        let f = Feed::new(max, usize::MAX);
        f.push(heights.iter().enumerate().map(|(i, h)| Tick::new(i as u64 + 1, *h)).collect());
        f
    }

    #[test]
    fn resuming_replays_every_tick_after_the_height_had() {
        // Streaming: heights 10, 11, 11, 12; seqs 1..=4.
        let f = feed(&[10, 11, 11, 12], 100);
        assert_eq!(f.resume_at(11, B, 100), Ok(ResumeAt { cursor: 3, to: 4 }));
        assert_eq!(f.resume_at(10, B, 100), Ok(ResumeAt { cursor: 1, to: 4 }), "both ticks of 11 again");
        assert_eq!(f.resume_at(12, B, 100), Ok(ResumeAt { cursor: 4, to: 4 }), "nothing to replay");
        assert_eq!(f.resume_at(13, B, 100), Err(NoResume::Ahead { newest: 12 }));
        assert_eq!(f.resume_at(9, B, 100), Err(NoResume::TooOld { oldest: 10 }), "the server began at 10");
    }

    #[test]
    fn ticks_dropped_or_past_the_backlog_cannot_be_resumed_from() {
        let f = feed(&[10, 11, 12, 13, 14], 3);
        // 10 and 11 were dropped: every tick after 11 is held.
        assert_eq!(f.resume_at(10, B, 100), Err(NoResume::TooOld { oldest: 11 }));
        assert_eq!(f.resume_at(11, B, 100), Ok(ResumeAt { cursor: 2, to: 5 }));
        assert_eq!(f.resume_at(12, B, 100), Ok(ResumeAt { cursor: 3, to: 5 }));
        // A reader may stand at most 1 tick behind the newest (seq 4, height 13).
        assert_eq!(f.resume_at(12, B, 1), Err(NoResume::TooOld { oldest: 13 }));
        assert_eq!(f.resume_at(13, B, 1), Ok(ResumeAt { cursor: 4, to: 5 }));
    }

    #[test]
    fn a_tick_of_a_lower_height_after_a_higher_one_is_replayed_from_the_first_tick_above_since() {
        // Streaming: block 11's complete-block tick (seq 4) comes after block 12's first fills (seq 3).
        let f = feed(&[10, 11, 12, 11, 12], 100);
        assert_eq!(f.resume_at(11, B, 100), Ok(ResumeAt { cursor: 2, to: 5 }), "from 12's first tick on");
        assert_eq!(f.resume_at(10, B, 100), Ok(ResumeAt { cursor: 1, to: 5 }));
    }

    #[test]
    fn side_ticks_anchor_their_own_resumes_only() {
        let f = Feed::new(100, usize::MAX);
        let mut misc = Tick::new(3, 8);
        misc.kind = TickKind::Misc;
        let mut twaps = Tick::new(5, 9);
        twaps.kind = TickKind::Twaps;
        f.push(vec![Tick::new(1, 10), Tick::new(2, 11), misc, Tick::new(4, 12), twaps]);
        // The misc tick of 8 came after 11's books frames: a books resume from 11 replays it (userEvents' fundings).
        assert_eq!(f.resume_at(11, B, 100), Ok(ResumeAt { cursor: 2, to: 5 }), "from the misc tick on");
        assert_eq!(f.resume_at(12, B, 100), Ok(ResumeAt { cursor: 4, to: 5 }), "nothing of the books after 12");
        assert_eq!(f.resume_at(10, B, 100), Ok(ResumeAt { cursor: 1, to: 5 }), "from 11 on");
        let misc = |since| f.resume_at(since, TickKind::Misc, 100);
        assert_eq!(misc(8), Ok(ResumeAt { cursor: 5, to: 5 }), "the misc tick of 8 was had");
        assert_eq!(misc(7), Err(NoResume::TooOld { oldest: 8 }), "before the server began");
        // The TWAP statuses' heights are their own: 9 is ahead of misc's 8, and the misc tick is not theirs.
        let twaps = |since| f.resume_at(since, TickKind::Twaps, 100);
        assert_eq!(twaps(8), Err(NoResume::TooOld { oldest: 9 }));
        assert_eq!(twaps(9), Ok(ResumeAt { cursor: 5, to: 5 }));
        assert_eq!(misc(9), Err(NoResume::Ahead { newest: 8 }));
    }

    #[test]
    fn a_stream_is_kept_through_a_resume_only_if_every_tick_since_was_built_wanting_it() {
        let f = Feed::new(100, usize::MAX);
        let tick = |seq, version| Tick { wanted_version: version, ..Tick::new(seq, seq + 10) };
        f.push(vec![tick(1, 3), tick(2, 4), tick(3, 4)]);
        assert!(f.wanted_through(1, 4));
        assert!(!f.wanted_through(0, 4), "tick 1 was built before version 4");
    }
}
