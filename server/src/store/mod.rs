//! The history store: every coin's candles at every interval and every user's fills, kept across restarts in an
//! embedded database in hlbook's state directory, so `candle` first frames, `candleSnapshot` and userFills
//! snapshots reach back as far as the exchange serves them, not only as far as the node's files still do.
//!
//! Why redb: a pure-Rust embedded key-value store (no C library to build or audit), ACID transactions with
//! copy-on-write pages and checksummed commits, so a process killed at any moment reopens at its last commit,
//! never half-written; MVCC readers never wait for the writer; one file, maintained and 1.0+ stable format.
//!
//! Whose fills are kept is `follow`'s (every user's, or followed users' only). One writer thread (`writer`) owns
//! every write but the merges of a newly followed user's older fills, which `follow` reads back on its own thread: the publisher hands it each fills step over a bounded channel
//! and never waits (a full channel drops messages and says so: the writer reads the blocks it missed back from the
//! node's files). Each commit holds whole blocks and the last height, so a restart continues after that height
//! from the node's files (`files`). Readers (`Store`) open read transactions from any thread.

// redb's error is 160 bytes; these results come once per transaction, not per item.
#![allow(clippy::result_large_err)]

mod blocks;
pub mod candle;
mod compact;
pub mod files;
pub mod fills;
mod fills_tables;
pub mod follow;
mod inbox;
pub mod misc_writer;
mod replay;
mod schema;
pub mod seed;
pub mod trades;
pub mod user_events;
pub mod writer;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU8, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use redb::{Database, ReadableTable, ReadableTableMetadata, TableHandle};

use self::candle::{Candle, Interval};
use self::schema::{CANDLES, GAPS, META, interval_byte};
use crate::node::Address;

pub use self::writer::{StoreMsg, Writer};

/// What the store holds: from which block time it has every block, and the holes it could not fill.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Block time (ms) of the first block stored (`i64::MAX`: none yet).
    pub first_ms: i64,
    /// (after, before): block times between which blocks are missing.
    pub gaps: Vec<(i64, i64)>,
    /// Candles closing before this time were seeded whole from an info server (0: none were).
    pub seeded_to_ms: i64,
}

impl Coverage {
    /// `None` when every trade of the candle's bucket is in the store; else the time from which its trades are
    /// counted (the store began, or a hole ended, inside the bucket).
    pub fn partial_from(&self, c: &Candle) -> Option<i64> {
        if c.close_time < self.seeded_to_ms {
            return None;
        }
        if self.first_ms >= c.t {
            return Some(self.first_ms);
        }
        let hole = self.gaps.iter().filter(|(after, before)| *after < c.close_time && *before > c.t);
        hole.map(|(_, before)| *before).max()
    }
}

/// A consistent read of a coin's newest candles: the store held every block up to `height`.
#[derive(Clone, Debug)]
pub struct Newest {
    pub height: u64,
    pub candles: Vec<Option<Candle>>,
    pub coverage: Coverage,
}

/// The store's state, for logs, `/status` and `/metrics`.
#[derive(Debug, Default)]
pub struct Status {
    /// `StoreState` as a number.
    state: AtomicU8,
    pub height: AtomicU64,
    pub first_ms: AtomicI64,
    /// `store.fills_retention_days`, set by the writer (0 before): fills older than this are pruned.
    pub retention_days: std::sync::atomic::AtomicU32,
    /// Backfill and catch-up progress: hour files read of those listed.
    pub files_done: AtomicU64,
    pub files_total: AtomicU64,
    pub blocks_written: AtomicU64,
    pub fills_written: AtomicU64,
    /// User entries (fundings, ledger updates) written (`user_events`).
    pub entries_written: AtomicU64,
    pub candles_written: AtomicU64,
    pub commits: AtomicU64,
    /// CPU time of the writer thread spent applying and committing live blocks, ns.
    pub write_cpu_ns: AtomicU64,
    /// Live blocks those commits held.
    pub live_blocks: AtomicU64,
    /// Wall time spent in redb's commit (writing the pages out), every commit, ns.
    pub commit_ns: AtomicU64,
    /// Messages the publisher could not hand over (the channel was full): read back from the files instead.
    pub dropped: AtomicU64,
    /// Fills lines of a block that came after the block was written (waited for `writer::FILLS_WAIT` and
    /// longer): not in the store.
    pub late_fills: AtomicU64,
    /// Fills lines of the node's files over `ingest.max_line_bytes`, skipped by the backfill, catch-up or read-back.
    pub lines_too_long: AtomicU64,
    pub gaps: AtomicU64,
    pub seeded_candles: AtomicU64,
    pub error: Mutex<Option<String>>,
}

/// What the store's writer is doing (`Status::state`): named apart from `state::health::HealthState`, the
/// service's.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum StoreState {
    Opening = 0,
    /// First start: reading every fills file still on disk.
    Backfilling = 1,
    /// Reading back blocks it missed (down, or behind).
    CatchingUp = 2,
    Live = 3,
    Failed = 4,
}

impl StoreState {
    pub fn as_str(self) -> &'static str {
        match self {
            StoreState::Opening => "opening",
            StoreState::Backfilling => "backfilling",
            StoreState::CatchingUp => "catching_up",
            StoreState::Live => "live",
            StoreState::Failed => "failed",
        }
    }
}

impl Status {
    pub fn state(&self) -> StoreState {
        match self.state.load(Relaxed) {
            1 => StoreState::Backfilling,
            2 => StoreState::CatchingUp,
            3 => StoreState::Live,
            4 => StoreState::Failed,
            _ => StoreState::Opening,
        }
    }

    pub fn set_state(&self, s: StoreState) {
        self.state.store(s as u8, Relaxed);
    }
}

/// The store, for readers; the writer thread holds one too.
#[derive(Debug)]
pub struct Store {
    db: Database,
    path: PathBuf,
    pub status: Status,
    /// The last height committed, for readers that wait for a block.
    committed: Mutex<u64>,
    advanced: Condvar,
    /// Whose fills are kept (`store.fills_users`).
    pub follow: follow::Followed,
}

/// The store's file in its folder.
const FILE: &str = "history.redb";

/// redb's page cache.
const CACHE_BYTES: usize = 64 << 20;

/// A user's fills a TWAP slice read looks through at most (docs/api.md, `userTwapSliceFills`).
pub const TWAP_SCAN_FILLS: usize = 100_000;

impl Store {
    /// Opens (or creates) the store in `dir`. A store left by a killed process is repaired here, back to its last
    /// commit.
    pub fn open(dir: &Path) -> Result<Arc<Store>, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create the store folder {}: {e}", dir.display()))?;
        let path = dir.join(FILE);
        // redb's page cache defaults to 1 GiB; the store's reads are few (first frames, snapshots), so a small one.
        let db = Database::builder()
            .set_cache_size(CACHE_BYTES)
            .create(&path)
            .map_err(|e| format!("cannot open the store {}: {e}", path.display()))?;
        Self::check_layout(&db).map_err(|e| format!("store {}: {e}", path.display()))?;
        let store = Store {
            db,
            path,
            status: Status::default(),
            committed: Mutex::new(0),
            advanced: Condvar::new(),
            follow: follow::Followed::default(),
        };
        let (height, first_ms) = (store.meta("height").unwrap_or(0), store.meta("first_ms"));
        *store.committed.lock() = height;
        store.status.height.store(height, Relaxed);
        store.status.first_ms.store(first_ms.map_or(i64::MAX, |v| v as i64), Relaxed);
        Ok(Arc::new(store))
    }

    /// Creates the tables, and refuses a store whose fills are in a layout this version does not read.
    fn check_layout(db: &Database) -> Result<(), String> {
        let w = db.begin_write().map_err(|e| e.to_string())?;
        let old = w.list_tables().map_err(|e| e.to_string())?.any(|t| schema::old_fills_table(t.name()));
        {
            let mut meta = w.open_table(META).map_err(|e| e.to_string())?;
            let found = meta.get("schema").map_err(|e| e.to_string())?.map(|v| v.value());
            match found {
                Some(schema::SCHEMA) => {}
                None if !old => drop(meta.insert("schema", schema::SCHEMA).map_err(|e| e.to_string())?),
                found => {
                    return Err(format!(
                        "its fills are in the layout of another hlbook version (schema {}; this one reads {}): stop \
                         hlbook, move the store's folder away (or delete it) and start again; the store is rebuilt \
                         from the node's files still on disk (older candles: store.seed_url)",
                        found.unwrap_or(1),
                        schema::SCHEMA
                    ));
                }
            }
        }
        for t in [w.open_table(CANDLES).map(drop), w.open_table(GAPS).map(drop)] {
            t.map_err(|e| e.to_string())?;
        }
        w.commit().map_err(|e| e.to_string())
    }

    /// Keeps only followed users' fills from now on (`store.fills_users = "followed"`), at most `max` of them,
    /// starting from those the store followed before.
    pub fn follow_only(&self, max: usize) -> Result<(), String> {
        let stored = follow::stored(self).map_err(|e| format!("store read: {e}"))?;
        self.follow.set_mode(max, stored);
        Ok(())
    }

    fn meta(&self, key: &str) -> Option<u64> {
        let r = self.db.begin_read().ok()?;
        let t = r.open_table(META).ok()?;
        t.get(key).ok()?.map(|v| v.value())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes the store's file takes on disk.
    pub fn file_bytes(&self) -> u64 {
        std::fs::metadata(&self.path).map_or(0, |m| m.len())
    }

    /// The last height committed: every block up to it is in the store.
    pub fn height(&self) -> u64 {
        *self.committed.lock()
    }

    pub(crate) fn committed(&self, height: u64) {
        *self.committed.lock() = height;
        self.status.height.store(height, Relaxed);
        self.advanced.notify_all();
    }

    /// Waits until the store holds every block up to `height`, at most `timeout`; whether it does. A failed store
    /// (its writer cannot write) is not waited for: readers take what it has.
    pub fn wait_for(&self, height: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut h = self.committed.lock();
        while *h < height && self.status.state() != StoreState::Failed {
            if self.advanced.wait_until(&mut h, deadline).timed_out() {
                return *h >= height;
            }
        }
        true
    }

    fn coverage_in(r: &redb::ReadTransaction) -> Result<Coverage, redb::Error> {
        let meta = r.open_table(META)?;
        let first_ms = meta.get("first_ms")?.map_or(i64::MAX, |v| v.value() as i64);
        let seeded_to_ms = meta.get("seeded_to_ms")?.map_or(0, |v| v.value() as i64);
        let gaps = r.open_table(GAPS)?;
        let gaps = gaps.iter()?.filter_map(Result::ok).map(|(a, b)| (a.value(), b.value())).collect();
        Ok(Coverage { first_ms, gaps, seeded_to_ms })
    }

    pub fn coverage(&self) -> Coverage {
        let r = self.db.begin_read().ok();
        r.and_then(|r| Self::coverage_in(&r).ok()).unwrap_or(Coverage { first_ms: i64::MAX, ..Coverage::default() })
    }

    /// The coin's newest candle of each interval, read in one transaction with the height they are current at.
    pub fn newest(&self, coin: &str, intervals: &[Interval]) -> Result<Newest, String> {
        let read = || -> Result<Newest, redb::Error> {
            let r = self.db.begin_read()?;
            let height = r.open_table(META)?.get("height")?.map_or(0, |v| v.value());
            let t = r.open_table(CANDLES)?;
            let mut candles = Vec::with_capacity(intervals.len());
            for &i in intervals {
                let b = interval_byte(i);
                let last = t.range((coin, b, i64::MIN)..=(coin, b, i64::MAX))?.next_back().transpose()?;
                candles.push(last.and_then(|(k, v)| schema::decode_candle(i, k.value().2, v.value())));
            }
            Ok(Newest { height, candles, coverage: Self::coverage_in(&r)? })
        };
        read().map_err(|e| format!("store read: {e}"))
    }

    /// The coin's candles opening in `lo..=hi`, ascending, the newest `max` of them.
    pub fn candles(
        &self,
        coin: &str,
        interval: Interval,
        (lo, hi): (i64, i64),
        max: usize,
    ) -> Result<Vec<Candle>, String> {
        let read = || -> Result<Vec<Candle>, redb::Error> {
            let r = self.db.begin_read()?;
            let t = r.open_table(CANDLES)?;
            let b = interval_byte(interval);
            let mut out = Vec::new();
            for e in t.range((coin, b, lo)..=(coin, b, hi))?.rev().take(max) {
                let (k, v) = e?;
                out.extend(schema::decode_candle(interval, k.value().2, v.value()));
            }
            out.reverse();
            Ok(out)
        };
        read().map_err(|e| format!("store read: {e}"))
    }

    /// From when (ms) the store holds every fill of the users it keeps: its first block, or the retention's cut,
    /// whichever is later (the cut counted from `now_ms`, a day early, so it is never later than the prune's).
    pub fn fills_kept_from_ms(&self, now_ms: i64) -> i64 {
        let days = i64::from(self.status.retention_days.load(Relaxed));
        let cut = if days == 0 { i64::MAX } else { now_ms - days * 86_400_000 };
        self.status.first_ms.load(Relaxed).max(cut)
    }

    /// The user's newest `max` fills of blocks below `before`, oldest first, as the node wrote them.
    pub fn user_fills(&self, user: &Address, before: u64, max: usize) -> Result<Vec<Box<str>>, String> {
        let read = || fills_tables::user_fills(&self.db.begin_read()?, &user.0, before, (max, usize::MAX), |_| true);
        read().map_err(|e: redb::Error| format!("store read: {e}"))
    }

    /// The user's newest `max` TWAP slice fills (those with a `twapId`) of blocks below `before`, oldest first,
    /// among their newest `TWAP_SCAN_FILLS` fills: a user with many fills and few slices costs a bounded read.
    pub fn user_twap_slices(&self, user: &Address, before: u64, max: usize) -> Result<Vec<Box<str>>, String> {
        let slice = |f: &str| fills::twap_id(f).is_some();
        let read = || fills_tables::user_fills(&self.db.begin_read()?, &user.0, before, (max, TWAP_SCAN_FILLS), slice);
        read().map_err(|e: redb::Error| format!("store read: {e}"))
    }

    /// Bytes each kind of table takes: (candles, fills of every day, pages holding them and their metadata), for
    /// `/status?store_tables=1` (it walks every table: not for polling).
    pub fn table_bytes(&self) -> Result<serde_json::Value, String> {
        let read = || -> Result<serde_json::Value, redb::Error> {
            let r = self.db.begin_read()?;
            let size = |st: redb::TableStats| (st.stored_bytes(), st.metadata_bytes() + st.fragmented_bytes());
            let (candles, candles_overhead) = size(r.open_table(CANDLES)?.stats()?);
            let entries = r.open_table(CANDLES)?.len()?;
            Ok(
                serde_json::json!({"candles": {"entries": entries, "stored_bytes": candles, "overhead_bytes": candles_overhead},
                "fills": fills_tables::table_bytes(&r)?,
                "file_bytes": self.file_bytes()}),
            )
        };
        let mut out = read().map_err(|e| format!("store read: {e}"))?;
        out["user_entries"] = self.user_entries_table_bytes()?;
        Ok(out)
    }

    /// `/metrics`' store series: (name, help, is a counter, value); exported as `hlbook_store_<name>`.
    pub fn metrics(&self) -> Vec<(&'static str, &'static str, bool, u64)> {
        let s = &self.status;
        let c = |a: &AtomicU64| a.load(Relaxed);
        vec![
            ("blocks_written", "Blocks written to the history store", true, c(&s.blocks_written)),
            ("fills_written", "Fill objects written to the history store", true, c(&s.fills_written)),
            ("candles_written", "Candle values written to the history store", true, c(&s.candles_written)),
            (
                "entries_written",
                "User entries (fundings, ledger updates) written to the history store",
                true,
                c(&s.entries_written),
            ),
            ("commits", "History store transactions committed", true, c(&s.commits)),
            ("commit_nanoseconds", "Wall time in the history store's commits", true, c(&s.commit_ns)),
            ("live_blocks", "Live blocks written (the blocks write_cpu_nanoseconds is for)", true, c(&s.live_blocks)),
            (
                "write_cpu_nanoseconds",
                "Writer thread CPU applying and committing live blocks",
                true,
                c(&s.write_cpu_ns),
            ),
            (
                "dropped",
                "Messages the publisher could not hand to the store's writer (read back from files)",
                true,
                c(&s.dropped),
            ),
            ("gaps", "Holes in the store's coverage (blocks neither live nor in the node's files)", true, c(&s.gaps)),
            (
                "late_fills",
                "Fills steps that came after their block was written (streaming, past the wait): not stored",
                true,
                c(&s.late_fills),
            ),
            (
                "lines_too_long",
                "Node fills lines over ingest.max_line_bytes, skipped by the backfill, catch-up or read-back",
                true,
                c(&s.lines_too_long),
            ),
            ("height", "Last height committed to the history store", false, c(&s.height)),
            ("followed_users", "Users whose fills the store keeps (store.fills_users = followed)", false, {
                self.follow.len() as u64
            }),
            (
                "follow_refused",
                "userFills subscriptions whose user the store could not follow (store.fills_follow_max)",
                true,
                c(&self.follow.refused),
            ),
            (
                "follow_dropped",
                "Followed users dropped to make room for another, the least recently subscribed first",
                true,
                c(&self.follow.dropped),
            ),
            ("file_bytes", "Size of the history store's file", false, self.file_bytes()),
            ("backfill_files_read", "Node fills files read by the backfill or catch-up", false, c(&s.files_done)),
            ("backfill_files_listed", "Node fills files the backfill or catch-up reads", false, c(&s.files_total)),
            ("live", "1 when the history store's writer is live", false, u64::from(s.state() == StoreState::Live)),
        ]
    }

    /// `/status`'s `store` object.
    pub fn status_json(&self) -> serde_json::Value {
        let s = &self.status;
        let cpu = s.write_cpu_ns.load(Relaxed);
        let live = s.live_blocks.load(Relaxed);
        let first = s.first_ms.load(Relaxed);
        serde_json::json!({
            "state": s.state().as_str(),
            "height": s.height.load(Relaxed),
            "first_block_ms": (first != i64::MAX).then_some(first),
            "files_read": s.files_done.load(Relaxed),
            "files_total": s.files_total.load(Relaxed),
            "blocks_written": s.blocks_written.load(Relaxed),
            "fills_written": s.fills_written.load(Relaxed),
            "candles_written": s.candles_written.load(Relaxed),
            "entries_written": s.entries_written.load(Relaxed),
            "misc_height": self.stream_height(misc_writer::STREAM),
            "commits": s.commits.load(Relaxed),
            "write_cpu_us_per_block": cpu.checked_div(live).unwrap_or(0) / 1000,
            "dropped": s.dropped.load(Relaxed),
            "gaps": s.gaps.load(Relaxed),
            "late_fills": s.late_fills.load(Relaxed),
            "lines_too_long": s.lines_too_long.load(Relaxed),
            "seeded_candles": s.seeded_candles.load(Relaxed),
            "fills_users": if self.follow.only() { "followed" } else { "all" },
            "followed_users": self.follow.len(),
            "follow_dropped": self.follow.dropped.load(Relaxed),
            "bytes": self.file_bytes(),
            "error": s.error.lock().clone(),
        })
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
