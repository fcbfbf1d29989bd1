//! The store's one writer: live blocks from the publisher, and the blocks it missed read back from the node's files.
//!
//! The publisher hands over each fills step (`StoreMsg::Step`), the height up to which blocks are whole
//! (`StoreMsg::Complete`) and any break in what it hands over (`StoreMsg::Gap`: books reloaded, steps lost, or this
//! channel full). Steps wait until their block is whole, then each whole block goes into one transaction with the
//! height it brings the store to. Streaming, a block is whole by its diffs and statuses, and a fills line of it
//! read after that would find it written: it also waits until ingest has handed over every fills line up to its
//! height (`StoreMsg::FillsThrough`), at most `FILLS_WAIT`; one later still is counted (`late_fills`), not stored.
//! After a break, and on start, the first height the publisher hands over is not trusted (its earlier parts may be
//! gone): everything from the last commit up to the first trusted height is read back from the node's files
//! (`files`), in batches, which on a first start is every file still on disk. Blocks the files no longer hold
//! (pruned, or a NATS source with no files here) become a gap in the store's coverage.
//!
//! Commits use redb's `Eventual` durability: each commit is atomic and written before the next, so a killed process
//! loses nothing written (the kernel has it); a power cut may lose the last commits, never the file's consistency,
//! and the next start reads those blocks back. The publisher never waits: a full channel drops and says so.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::Duration;

use redb::{Durability, ReadableTable, WriteTransaction};
use rustc_hash::{FxHashMap, FxHashSet};

use super::candle::{Candle, DAY, Interval, Trade, one_per_tid, push};
use super::files::{BlockFills, FillsDir, read_blocks};
use super::fills_tables::{Pruner, write_block};
use super::follow::{self, Job};
use super::schema::{self, CANDLES, GAPS, META, day_of, interval_byte};
use super::{Store, StoreState};
use crate::node::{Coin, Mode};
use crate::state::{Step, StepData};

pub use super::inbox::{StoreMsg, StoreSender, channel};

/// Blocks read back from files per commit.
const BATCH_BLOCKS: usize = 2000;

/// How long a whole block waits for fills lines that may still come (`StoreMsg::FillsThrough`). Ingest reads them
/// within a pass of the files; a source that never proves it (racing sources, or a NATS source in a quiet market,
/// whose fills stream says nothing for blocks without trades) costs the store this much delay.
pub const FILLS_WAIT: Duration = Duration::from_secs(2);

/// The writer thread's state.
pub struct Writer {
    store: Arc<Store>,
    files: Option<FillsDir>,
    retention_days: u32,
    committed: u64,
    last_ms: i64,
    first_ms: i64,
    /// Live steps are taken from this height on (`None`: after a break, until the next step).
    live_from: Option<u64>,
    complete: u64,
    /// `StoreMsg::FillsThrough` (`u64::MAX` until told: by-block blocks are whole with their fills).
    fills_through: u64,
    /// Whole heights above `fills_through`, each with when it became whole, oldest first.
    waiting: std::collections::VecDeque<(u64, std::time::Instant)>,
    pending: BTreeMap<u64, BlockFills>,
    /// The newest candle of each (coin, interval) the writer has touched.
    cache: FxHashMap<(Coin, Interval), Option<Candle>>,
    /// A hole opened after this block time; the next block written closes it.
    gap_after: Option<i64>,
    pruner: Pruner,
    /// Followed mode: the users whose fills are written (`None`: every user's).
    keep: Option<FxHashSet<[u8; 20]>>,
    /// Users newly followed (then read back) or dropped, and last-wanted times: written with the next commit.
    follow_changes: follow::Changes,
    read_back: Option<Sender<Job>>,
    /// Candles kept per coin and interval, the newest (0: every one).
    candles_kept: u32,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").field("committed", &self.committed).finish_non_exhaustive()
    }
}

/// CPU time of the calling thread, ns.
fn thread_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    (t.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(t.tv_nsec as u64)
}

/// One live step as the store takes it.
fn part_of(step: &Step) -> Option<BlockFills> {
    let StepData::Fills { fills, users, .. } = &step.data else { return None };
    Some(BlockFills {
        height: step.height,
        time_ms: step.block_time.div_euclid(1_000_000),
        trades: fills.iter().map(|f| (f.coin.clone(), f.tid, Trade { time: f.time, px: f.px, sz: f.sz })).collect(),
        users: users.clone(),
    })
}

impl Writer {
    /// A writer for `store`, reading missed blocks back from `files` (`None`: the node's files are not here).
    pub fn new(store: Arc<Store>, files: Option<FillsDir>, retention_days: u32) -> Writer {
        let committed = store.height();
        store.status.retention_days.store(retention_days, std::sync::atomic::Ordering::Relaxed);
        let meta = |k| store.meta(k);
        let (last_ms, first_ms) =
            (meta("last_ms").unwrap_or(0) as i64, meta("first_ms").map_or(i64::MAX, |v| v as i64));
        Writer {
            files,
            retention_days,
            committed,
            last_ms,
            first_ms,
            live_from: None,
            complete: 0,
            fills_through: u64::MAX,
            waiting: std::collections::VecDeque::new(),
            pending: BTreeMap::new(),
            cache: FxHashMap::default(),
            gap_after: None,
            pruner: Pruner::default(),
            keep: store.follow.only().then(|| store.follow.users()),
            follow_changes: follow::Changes::default(),
            read_back: None,
            candles_kept: 0,
            store,
        }
    }

    /// Keeps only each coin's newest `n` candles of each fixed interval (`store.candles_kept`; 0: every one).
    #[must_use]
    pub fn keep_candles(mut self, n: u32) -> Writer {
        self.candles_kept = n;
        self
    }

    /// Runs until `stop` is set; in followed mode with a thread reading newly followed users back from the files.
    pub fn run(mut self, rx: &Receiver<StoreMsg>, stop: &AtomicBool) {
        if self.keep.is_none() {
            return self.run_writes(rx, stop);
        }
        let (tx, jobs) = follow::channel();
        self.read_back = Some(tx);
        let (store, files, days) = (self.store.clone(), self.files.clone(), self.retention_days);
        std::thread::scope(|s| {
            let reader = std::thread::Builder::new().name("hlbook-follow".into());
            let spawned =
                reader.spawn_scoped(s, move || follow::run_read_back(&store, files.as_ref(), days, &jobs, stop));
            if let Err(e) = spawned {
                tracing::error!("history store: no thread to read followed users back: {e}");
            }
            // Dropping the writer closes the jobs channel: the reader's loop ends.
            self.run_writes(rx, stop);
        });
    }

    fn run_writes(mut self, rx: &Receiver<StoreMsg>, stop: &AtomicBool) {
        let live = if self.committed == 0 { StoreState::Backfilling } else { StoreState::CatchingUp };
        self.store.status.set_state(live);
        while !stop.load(Relaxed) {
            match rx.recv_timeout(Duration::from_millis(250)) {
                Ok(m) => self.take(m),
                Err(RecvTimeoutError::Timeout) => {}
                // The publisher is gone (the service is stopping, or failing for its own reason: that one is
                // reported, not this thread's end).
                Err(RecvTimeoutError::Disconnected) => std::thread::sleep(Duration::from_millis(250)),
            }
            while let Ok(m) = rx.try_recv() {
                self.take(m);
            }
            if let Err(e) = self.settle(stop) {
                tracing::error!("history store: {e}; retrying");
                self.store.status.set_state(StoreState::Failed);
                *self.store.status.error.lock() = Some(e);
                std::thread::sleep(Duration::from_secs(1));
            }
        }
    }

    pub fn take(&mut self, m: StoreMsg) {
        match m {
            StoreMsg::Gap => {
                self.pending.clear();
                self.live_from = None;
            }
            StoreMsg::Complete(h) => {
                if h > self.complete {
                    self.complete = h;
                    self.waiting.push_back((h, std::time::Instant::now()));
                }
            }
            StoreMsg::FillsThrough(h) => self.fills_through = h,
            StoreMsg::Step(step) => {
                let Some(part) = part_of(&step) else { return };
                // The first height after a break may have lost parts: it is read back from the files.
                let from = *self.live_from.get_or_insert(part.height + 1);
                if part.height < from || part.height <= self.committed {
                    if part.height >= from {
                        // Live, and its block already written without it.
                        self.store.status.late_fills.fetch_add(1, Relaxed);
                    }
                    return;
                }
                let b = self.pending.entry(part.height).or_insert_with(|| BlockFills {
                    height: part.height,
                    time_ms: part.time_ms,
                    ..BlockFills::default()
                });
                b.trades.extend(part.trades);
                b.users.extend(part.users);
            }
        }
    }

    /// Writes every whole block it can: first those it must read back, then the live ones.
    pub fn settle(&mut self, stop: &AtomicBool) -> Result<(), String> {
        let target = self.writable();
        if target <= self.committed {
            self.pending.retain(|h, _| *h > target);
            return Ok(());
        }
        let live_from = self.live_from.unwrap_or(target + 1);
        let files_to = target.min(live_from.saturating_sub(1));
        if files_to > self.committed {
            self.catch_up(files_to, stop)?;
        }
        let rest = self.pending.split_off(&(target + 1));
        let ready = std::mem::replace(&mut self.pending, rest);
        let ready: Vec<BlockFills> = ready.into_values().filter(|b| b.height > self.committed).collect();
        if !ready.is_empty() {
            let cpu = thread_cpu_ns();
            let n = ready.len() as u64;
            self.commit(ready, target)?;
            let s = &self.store.status;
            s.write_cpu_ns.fetch_add(thread_cpu_ns().saturating_sub(cpu), Relaxed);
            s.live_blocks.fetch_add(n, Relaxed);
        } else if self.committed < target {
            self.commit(Vec::new(), target)?;
        }
        if !stop.load(Relaxed) && self.store.status.state() != StoreState::Live {
            tracing::info!(height = self.committed, "history store: live");
            self.store.status.set_state(StoreState::Live);
            *self.store.status.error.lock() = None;
        }
        Ok(())
    }

    /// The height up to which blocks are whole with all their fills: whole, and through `fills_through` or
    /// whole for `FILLS_WAIT` already.
    fn writable(&mut self) -> u64 {
        let mut to = self.complete.min(self.fills_through);
        while let Some(&(h, at)) = self.waiting.front() {
            if h > to && at.elapsed() < FILLS_WAIT {
                break;
            }
            to = to.max(h);
            self.waiting.pop_front();
        }
        to
    }

    /// Reads blocks `committed + 1 ..= to` back from the node's files and writes them in batches.
    fn catch_up(&mut self, to: u64, stop: &AtomicBool) -> Result<(), String> {
        let from = if self.committed == 0 { 0 } else { self.committed + 1 };
        let Some(dir) = self.files.clone() else {
            // Nothing to read them from here: the store misses them.
            self.hole();
            return self.commit(Vec::new(), to);
        };
        let state = if self.committed == 0 { StoreState::Backfilling } else { StoreState::CatchingUp };
        self.store.status.set_state(state);
        tracing::info!(from, to, "history store: {} from the node's fills files", state.as_str());
        let (mut batch, err) = (Vec::new(), std::cell::RefCell::new(None));
        let store = self.store.clone();
        let mut progress = |done: usize, total: usize| {
            let status = &store.status;
            status.files_done.store(done as u64, Relaxed);
            status.files_total.store(total as u64, Relaxed);
            tracing::info!(done, total, "history store: {} the node's fills files", state.as_str());
        };
        let by_block = dir.mode == Mode::ByBlock;
        let (mut first, mut expect, mut prev_ms) = (true, self.committed + 1, self.last_ms);
        let outcome = {
            let this = &mut *self;
            read_blocks(&dir, (from, to), &|| stop.load(Relaxed) || err.borrow().is_some(), &mut progress, &mut |b| {
                // A block missing between two read (by-block writes a line for every block) or before the first.
                let skipped = b.height > expect && (by_block || first) && this.committed > 0;
                if skipped && this.gap_after.is_none() {
                    this.gap_after = Some(prev_ms);
                }
                (first, expect, prev_ms) = (false, b.height + 1, b.time_ms);
                batch.push(b);
                if batch.len() >= BATCH_BLOCKS {
                    let h = batch.last().map_or(0, |b: &BlockFills| b.height);
                    if let Err(e) = this.commit(std::mem::take(&mut batch), h) {
                        *err.borrow_mut() = Some(e);
                    }
                }
            })
        };
        self.store.status.lines_too_long.fetch_add(outcome.too_long, Relaxed);
        if let Some(e) = err.into_inner() {
            return Err(e);
        }
        if stop.load(Relaxed) {
            return Ok(());
        }
        if outcome.last < to && by_block {
            self.hole();
        }
        self.commit(batch, to)
    }

    /// Blocks after the last one written are missing: the next block written closes the hole.
    fn hole(&mut self) {
        if self.committed > 0 && self.gap_after.is_none() {
            self.gap_after = Some(self.last_ms);
        }
    }

    /// Writes `blocks` (ascending) and moves the store to `height` in one transaction.
    fn commit(&mut self, blocks: Vec<BlockFills>, height: u64) -> Result<(), String> {
        let mut txn = self.store.db.begin_write().map_err(|e| e.to_string())?;
        txn.set_durability(Durability::Eventual);
        let n = blocks.len() as u64;
        // Users followed from this commit on: its blocks are written with them, earlier ones are read back.
        if let Some(keep) = &mut self.keep {
            let c = self.store.follow.take_changes();
            for u in &c.dropped {
                keep.remove(u);
            }
            keep.extend(c.added.iter().copied());
            // Held until a commit takes them: a failed one leaves them for the next. (Drops are written before
            // additions, so a user dropped and followed again ends up followed.)
            let p = &mut self.follow_changes;
            p.added.extend(c.added);
            p.dropped.extend(c.dropped);
            p.seen.extend(c.seen);
            follow::write_changes(&txn, p).map_err(|e| format!("writing the store: {e}"))?;
        }
        let before = self.committed;
        self.write(&txn, &blocks, height).map_err(|e| format!("writing the store: {e}"))?;
        let t = std::time::Instant::now();
        txn.commit().map_err(|e| format!("committing the store: {e}"))?;
        let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.store.status.commit_ns.fetch_add(ns, Relaxed);
        self.committed = height.max(self.committed);
        let new = std::mem::take(&mut self.follow_changes).added;
        if !new.is_empty() {
            match &self.read_back {
                Some(tx) => {
                    if let Err(e) = tx.send((new, before)) {
                        // The reader is gone: they are not read back, and nobody should wait for it.
                        self.store.follow.read_back_done(&e.0.0);
                    }
                }
                // No reader (a writer driven by hand, in tests): nothing to wait for.
                None => self.store.follow.read_back_done(&new),
            }
        }
        let s = &self.store.status;
        s.blocks_written.fetch_add(n, Relaxed);
        s.commits.fetch_add(1, Relaxed);
        s.first_ms.store(self.first_ms, Relaxed);
        self.store.committed(self.committed);
        Ok(())
    }

    fn write(&mut self, txn: &WriteTransaction, blocks: &[BlockFills], height: u64) -> Result<(), redb::Error> {
        {
            let mut candles = txn.open_table(CANDLES)?;
            let mut meta = txn.open_table(META)?;
            let mut gaps = txn.open_table(GAPS)?;
            let mut dirty: FxHashSet<(Coin, Interval)> = FxHashSet::default();
            let mut fills_written = 0;
            for b in blocks {
                if let Some(after) = self.gap_after.take() {
                    gaps.insert(after, b.time_ms)?;
                    self.store.status.gaps.fetch_add(1, Relaxed);
                }
                if self.first_ms == i64::MAX {
                    self.first_ms = b.time_ms;
                    meta.insert("first_ms", b.time_ms as u64)?;
                    meta.insert("first_height", b.height)?;
                }
                self.candles(&mut candles, b, &mut dirty)?;
                fills_written += write_block(txn, b, self.keep.as_ref())?;
                self.last_ms = b.time_ms;
            }
            for key in &dirty {
                if let Some(Some(c)) = self.cache.get(key) {
                    candles.insert((&*key.0, interval_byte(key.1), c.t), schema::encode_candle(c).as_slice())?;
                }
            }
            let s = &self.store.status;
            s.candles_written.fetch_add(dirty.len() as u64, Relaxed);
            s.fills_written.fetch_add(fills_written, Relaxed);
            meta.insert("height", height.max(self.committed))?;
            meta.insert("last_ms", self.last_ms.max(0) as u64)?;
        }
        self.prune(txn)
    }

    /// One block's trades (one per tid) into every interval's candle of their coin.
    fn candles(
        &mut self,
        table: &mut redb::Table<'_, (&'static str, u8, i64), &'static [u8]>,
        b: &BlockFills,
        dirty: &mut FxHashSet<(Coin, Interval)>,
    ) -> Result<(), redb::Error> {
        let mut by_coin: FxHashMap<&Coin, Vec<(u64, Trade)>> = FxHashMap::default();
        for (coin, tid, tr) in &b.trades {
            by_coin.entry(coin).or_default().push((*tid, *tr));
        }
        for (coin, list) in by_coin {
            let trades = one_per_tid(list.into_iter());
            for i in Interval::ALL {
                let key = (coin.clone(), i);
                if !self.cache.contains_key(&key) {
                    let byte = interval_byte(i);
                    let last = table.range((&**coin, byte, i64::MIN)..=(&**coin, byte, i64::MAX))?.next_back();
                    let last = last.transpose()?.and_then(|(k, v)| schema::decode_candle(i, k.value().2, v.value()));
                    self.cache.insert(key.clone(), last);
                }
                let kept = self.candles_kept;
                let c = self.cache.get_mut(&key).expect("just inserted");
                for tr in &trades {
                    // A trade opening a later bucket: the finished candle is written before it is replaced.
                    if let Some(old) = *c
                        && i.bucket(tr.time).0 > old.t
                    {
                        table.insert((&**coin, interval_byte(i), old.t), schema::encode_candle(&old).as_slice())?;
                        drop_old_candles(table, coin, i, old.t, kept)?;
                    }
                    push(c, i, *tr);
                }
                dirty.insert(key);
            }
        }
        Ok(())
    }

    /// Empties the fills tables of days older than the retention, a bounded amount per commit.
    fn prune(&mut self, txn: &WriteTransaction) -> Result<(), redb::Error> {
        if self.last_ms <= 0 {
            return Ok(());
        }
        let cutoff = day_of(self.last_ms - i64::from(self.retention_days) * DAY);
        self.pruner.prune(txn, day_of(self.last_ms), cutoff)
    }
}

/// Deletes the coin's candles of `i` older than the newest `candles_kept` (counting from the one opening at
/// `t`): the exchange serves the newest 5000, so older ones only grow the store. 1M (not a fixed length) is
/// never deleted: 5000 months is four centuries.
fn drop_old_candles(
    table: &mut redb::Table<'_, (&'static str, u8, i64), &'static [u8]>,
    coin: &Coin,
    i: Interval,
    t: i64,
    kept: u32,
) -> Result<(), redb::Error> {
    let (Some(len), kept @ 1..) = (i.fixed_ms(), kept) else { return Ok(()) };
    // The finished candle at `t` and the open one after it count among the kept.
    let cutoff = t.saturating_sub(len.saturating_mul(i64::from(kept - 1)));
    let b = interval_byte(i);
    Ok(table.retain_in((&**coin, b, i64::MIN)..=(&**coin, b, cutoff), |_, _| false)?)
}

#[cfg(test)]
#[path = "writer_tests.rs"]
mod tests;
