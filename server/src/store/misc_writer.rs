//! The store's writer of `misc_events`: each user's funding payments and non-funding ledger updates, kept as
//! `user_events` entries (`EntryKind::Funding`, `EntryKind::Ledger`) so that `userFunding`,
//! `userNonFundingLedgerUpdates` and the channels' snapshots are answered with history.
//!
//! The same writer keeps `node_twap_statuses` (`EntryKind::TwapHistory`, stream `twap`, for `userTwapHistory` and
//! `twapHistory`): `run` is generic over the side stream and is given the stream's name and its entries.
//!
//! It follows the node's misc_events files itself, from the stream's last committed height (`misc_height`; 0 on a
//! first start: every file still on disk), with the live reader's own `ingest::side::SideReader`. So the blocks it
//! stores are exactly the ones subscribers get, under the same rules (by-block gaps counted, a restarted node's
//! repeated blocks dropped, streaming blocks whole when a later one appears), a restart continues where the last
//! commit ended whatever the publisher did meanwhile, and the backfill is the same loop. (The publisher's misc
//! thread starts at the books' height and hands blocks to subscribers only; reading the small misc files twice
//! costs less than a second hand-over path with its own catch-up.)
//!
//! Each commit holds whole blocks and the stream's height. A by-block hole (blocks missing from the files) is
//! recorded (`user_event_gaps`): ranges over it are not answered from the store. Entries of days past
//! `store.fills_retention_days` are not written (`fills_tables::Pruner` drops the expired days). In followed mode
//! only followed users' entries are written, each user's from the commit that first kept it (`user_event_since`):
//! a newly followed user's older entries are not read back, so its history here starts when it was followed.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

use rustc_hash::FxHashSet;

use super::Store;
use super::candle::DAY;
use super::schema::day_of;
use super::user_events::{Commit, EntryBlock, EntryKind, NewEntry};
use crate::ingest::side::{SideReader, SideStream, present};
use crate::node::Mode;
use crate::node::misc::{EventBlock, MiscBlock};
use crate::node::time::nanos_to_millis;
use crate::publish::misc_frames::{by_user, funding_entry, ledger_entry};

/// The stream's name in the store's meta keys and tables.
pub const STREAM: &str = "misc";

/// Blocks per commit at most (a backfill reads many hour files at once).
const BATCH_BLOCKS: usize = 2000;

/// Where the writer reads from.
#[derive(Clone, Debug)]
pub struct MiscFiles {
    pub node_dir: PathBuf,
    pub mode: Mode,
    pub poll: Duration,
}

/// The block's entries, user by user, each user's in the block's order.
pub fn entries_of(b: &MiscBlock) -> EntryBlock {
    let mut entries = Vec::new();
    for (user, m) in by_user(b) {
        for (ev, f) in &m.fundings {
            let bytes = funding_entry(ev, f);
            entries.push(NewEntry { user: user.0, kind: EntryKind::Funding, time_ms: nanos_to_millis(ev.time), bytes });
        }
        for (ev, u) in &m.ledger {
            let bytes = ledger_entry(ev, u);
            entries.push(NewEntry { user: user.0, kind: EntryKind::Ledger, time_ms: nanos_to_millis(ev.time), bytes });
        }
    }
    EntryBlock { height: b.height, time_ms: nanos_to_millis(b.block_time), entries }
}

/// The writer's state between commits.
#[derive(Debug)]
pub struct MiscWriter<'a> {
    store: &'a Store,
    /// The stream's name in the store (`STREAM` for misc_events).
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

    /// The writer of stream `stream`.
    pub fn of(store: &'a Store, stream: &'static str, mode: Mode, days: u32) -> Result<MiscWriter<'a>, String> {
        let kept = store.user_entries_since_users(stream)?.into_iter().collect();
        let (last, last_ms) = (store.stream_height(stream), store.stream_last_ms(stream));
        Ok(MiscWriter { store, stream, mode, retention_days: days, last, last_ms, kept })
    }

    /// The height the node's files are read after.
    pub fn height(&self) -> u64 {
        self.last
    }

    /// Commits misc_events `blocks` (ascending, each after the last committed), a batch at a time; the entries
    /// written.
    pub fn write(&mut self, blocks: &[MiscBlock]) -> Result<u64, String> {
        self.write_entries(&blocks.iter().map(entries_of).collect::<Vec<_>>())
    }

    /// Commits blocks' entries (ascending, each after the last committed), a batch at a time; the entries written.
    pub fn write_entries(&mut self, blocks: &[EntryBlock]) -> Result<u64, String> {
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
        // Ascending: the blocks after the last committed are a tail.
        let blocks = &chunk[chunk.partition_point(|b| b.height <= self.last)..];
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
            blocks,
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
            tracing::warn!(
                stream = self.stream,
                after = self.last,
                "history store: blocks missing from the node's files"
            );
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

/// How a side stream's block becomes the store's entries.
pub type EntriesOf<E> = fn(&EventBlock<E>) -> EntryBlock;

/// Follows the node's files of side stream `S` into the store as stream `stream` until `stop`, each block's
/// entries made by `entries`; waits for the folder while the node writes none. A failed commit is retried from the
/// last committed height.
pub fn run<S: SideStream>(
    store: &Store,
    files: &MiscFiles,
    retention_days: u32,
    stop: &AtomicBool,
    (stream, entries): (&'static str, EntriesOf<S::Event>),
) {
    let mut reader: Option<(SideReader<S>, MiscWriter<'_>)> = None;
    let mut said_absent = false;
    while !stop.load(Relaxed) {
        match &mut reader {
            None if !present::<S>(&files.node_dir, files.mode) => {
                if !said_absent {
                    tracing::info!("history store: no {} folder; not kept yet", S::NAME);
                    said_absent = true;
                }
            }
            None => match MiscWriter::of(store, stream, files.mode, retention_days) {
                Ok(w) => {
                    tracing::info!(after = w.height(), "history store: reading {}", S::NAME);
                    reader = Some((SideReader::new(&files.node_dir, files.mode, w.height()), w));
                    continue;
                }
                Err(e) => tracing::error!("history store: {}: {e}", S::NAME),
            },
            Some((r, w)) => {
                let mut blocks = Vec::new();
                if let Err(e) = r.poll(&mut |b| blocks.push(entries(&b))) {
                    tracing::warn!(error = %e, "history store: {} read failed; retried", S::NAME);
                }
                if let Err(e) = w.write_entries(&blocks) {
                    tracing::error!("history store: {e}; reading {} again from the last commit", S::NAME);
                    reader = None;
                }
            }
        }
        std::thread::sleep(files.poll);
    }
}

#[cfg(test)]
#[path = "misc_writer_tests.rs"]
mod tests;
