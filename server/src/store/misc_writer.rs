//! The store's writer of `misc_events`: each user's funding payments and non-funding ledger updates, kept as
//! `user_events` entries (`EntryKind::Funding`, `EntryKind::Ledger`) so that `userFunding`,
//! `userNonFundingLedgerUpdates` and the channels' snapshots are answered with history.
//!
//! Its blocks come from the node's misc_events files, read by the live reader's own code (ingest's `MiscReader`,
//! driven by `cli::store_misc` on a thread of its own) from the stream's last committed height (`misc_height`; 0
//! on a first start: every file still on disk). So the blocks it stores are exactly the ones subscribers get,
//! under the same rules (by-block gaps counted, a restarted node's repeated blocks dropped, streaming blocks whole
//! when a later one appears), a restart continues where the last commit ended whatever the publisher did
//! meanwhile, and the backfill is the same loop. (The publisher's misc thread starts at the books' height and
//! hands blocks to subscribers only; reading the small misc files twice costs less than a second hand-over path
//! with its own catch-up.)
//!
//! Each commit holds whole blocks and the stream's height. A by-block hole (blocks missing from the files) is
//! recorded (`user_event_gaps`): ranges over it are not answered from the store. Entries of days past
//! `store.fills_retention_days` are not written (`fills_tables::Pruner` drops the expired days). In followed mode
//! only followed users' entries are written, each user's from the commit that first kept it (`user_event_since`):
//! a newly followed user's older entries are not read back, so its history here starts when it was followed.

use std::sync::atomic::Ordering::Relaxed;

use rustc_hash::FxHashSet;

use super::Store;
use super::candle::DAY;
use super::schema::day_of;
use super::user_events::{Commit, EntryBlock};
use crate::node::Mode;

/// The stream's name in the store's meta keys and tables.
pub const STREAM: &str = "misc";

/// Blocks per commit at most (a backfill reads many hour files at once).
const BATCH_BLOCKS: usize = 2000;

/// The writer's state between commits.
#[derive(Debug)]
pub struct MiscWriter<'a> {
    store: &'a Store,
    /// The stream's name in the store (`STREAM`; node_twap_statuses' is `publish::twap_frames::STREAM`).
    stream: &'static str,
    mode: Mode,
    retention_days: u32,
    last: u64,
    last_ms: i64,
    /// Followed mode: the users the store keeps entries of, as last committed.
    kept: FxHashSet<[u8; 20]>,
}

impl<'a> MiscWriter<'a> {
    pub fn new(store: &'a Store, mode: Mode, retention_days: u32) -> Result<MiscWriter<'a>, String> {
        MiscWriter::of(store, STREAM, mode, retention_days)
    }

    /// The writer of stream `stream` (the same rules for every side stream kept as entries).
    pub fn of(store: &'a Store, stream: &'static str, mode: Mode, days: u32) -> Result<MiscWriter<'a>, String> {
        let kept = store.user_entries_since_users(stream)?.into_iter().collect();
        let (last, last_ms) = (store.stream_height(stream), store.stream_last_ms(stream));
        Ok(MiscWriter { store, stream, mode, retention_days: days, last, last_ms, kept })
    }

    /// The height the node's files are read after.
    pub fn height(&self) -> u64 {
        self.last
    }

    /// Commits `blocks` (ascending, each after the last committed), a batch at a time; the entries written.
    pub fn write(&mut self, blocks: &[EntryBlock]) -> Result<u64, String> {
        let mut written = 0;
        // By-block, a hole splits the blocks: each commit says the one before its first block.
        let by_block = self.mode == Mode::ByBlock;
        for run in blocks.chunk_by(|a, b| !by_block || b.height == a.height + 1) {
            for chunk in run.chunks(BATCH_BLOCKS) {
                written += self.commit(chunk)?;
            }
        }
        Ok(written)
    }

    fn commit(&mut self, chunk: &[EntryBlock]) -> Result<u64, String> {
        let Some(end) = chunk.last() else { return Ok(0) };
        let blocks: Vec<EntryBlock> = chunk.iter().filter(|b| b.height > self.last).cloned().collect();
        // By-block, the node writes a line for every block: a height skipped is a hole (not before the first).
        let gap = match blocks.first() {
            Some(b) if self.mode == Mode::ByBlock && self.last > 0 && b.height > self.last + 1 => {
                Some((self.last_ms, b.time_ms))
            }
            _ => None,
        };
        let newest = blocks.last().map_or(self.last_ms, |b| b.time_ms).max(self.store.stream_last_ms(self.stream));
        let cutoff_day = day_of(newest - i64::from(self.retention_days) * DAY);
        let (keep, new_users, dropped) = self.followed();
        let c = Commit {
            stream: self.stream,
            height: end.height.max(self.last),
            blocks: &blocks,
            gap,
            keep: keep.as_ref(),
            new_users: &new_users,
            // Every block after the last committed one is written for them.
            since_ms: self.last_ms.saturating_add(1),
            dropped_users: &dropped,
            cutoff_day,
        };
        let (n, height) = (self.store.commit_user_entries(&c)?, c.height);
        if let Some(k) = keep {
            self.kept = k;
        }
        if gap.is_some() {
            tracing::warn!(after = self.last, "history store: misc_events blocks missing from the node's files");
        }
        self.last = height;
        self.last_ms = blocks.last().map_or(self.last_ms, |b| b.time_ms);
        self.store.status.entries_written.fetch_add(n, Relaxed);
        Ok(n)
    }

    /// Followed mode: (the users kept, those newly kept, those no longer kept).
    #[allow(clippy::type_complexity)]
    fn followed(&self) -> (Option<FxHashSet<[u8; 20]>>, Vec<[u8; 20]>, Vec<[u8; 20]>) {
        if !self.store.follow.only() {
            return (None, Vec::new(), Vec::new());
        }
        let now = self.store.follow.users();
        let added = now.difference(&self.kept).copied().collect();
        let dropped = self.kept.difference(&now).copied().collect();
        (Some(now), added, dropped)
    }
}
