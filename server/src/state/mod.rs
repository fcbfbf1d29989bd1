//! The server's state: what ingest hands to the publisher and the socket side, behind methods named for what
//! callers want.
//!
//! Ingest is the only writer: it applies blocks to the books (under their `RwLock`), records each line's stage
//! times, queues the steps the publisher turns into frames, and keeps the last blocks for validation and exports.
//! Everyone else reads, through short locks taken inside these methods, so no caller holds two of the small
//! locks at once or learns how they are laid out. The publisher sleeps on one wake signal (`wait_for_change`)
//! that counts every change it must look at: a line step, a snapshot install, a repair or a subscription change.

pub mod counter;
pub mod health;
mod kept_steps;
pub mod misc_stream;
pub mod sources;
pub mod supervise;

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use rustc_hash::FxHashSet;

use self::health::Health;
pub use self::kept_steps::{KEPT_STEPS, LineTimes, Step, StepData, StepsSince};
use crate::book::Books;
use crate::node::{Block, Coin, Stream, Watched};

/// Blocks kept for validation, which brings a snapshot forward to our height with them.
pub const RECENT_BLOCKS: usize = 512;
/// How many lines' timestamps are kept (three per block).
pub const TIMELINE: usize = 3 * 4096;

/// Test-only fault: `HLBOOK_TEST_PANIC=WHAT` makes the background worker named `what` panic when it starts a job,
/// so the tests can check that every worker is supervised (`Health::supervised`). Only in `test-hooks` builds.
#[cfg(feature = "test-hooks")]
pub fn test_panic(what: &str) -> bool {
    std::env::var("HLBOOK_TEST_PANIC").is_ok_and(|w| w == what)
}

/// What ingest shares with the rest of the server.
#[derive(Debug)]
pub struct Shared {
    books: RwLock<Books>,
    health: Health,
    /// Changes the publisher must look at; bumped with `signal_change`.
    changes: Mutex<u64>,
    changed: Condvar,
    /// The last completed blocks, oldest first.
    recent: Mutex<VecDeque<Arc<Block>>>,
    /// Stage timestamps of the last applied lines (three per block), oldest first.
    timeline: Mutex<VecDeque<LineTimes>>,
    /// Fills and diffs steps for the publisher, oldest first: trades and L2 before their block is complete.
    steps: Mutex<VecDeque<Arc<Step>>>,
    /// Coins replaced by a repair since the publisher last looked: their subscribers need a fresh snapshot.
    repaired: Mutex<Vec<Coin>>,
    /// Users some client follows: the parser keeps their rejections and fills (orderUpdates, userFills).
    watched: Arc<Watched>,
    /// Coins whose l2Book or bbo some client wants: ingest applies their diffs first (`book::first`).
    first_coins: ArcSwap<FxHashSet<Coin>>,
    /// The height of the last first part the publisher has taken up, under the books' read lock.
    first_taken: Mutex<u64>,
    first_taken_cv: Condvar,
    /// Called with the books each time a block completes (tests compare every block end).
    on_complete: std::sync::OnceLock<CompleteHook>,
    /// Readers waiting for complete books (`complete_books`, the publisher's held l4Book snapshots). Streaming at
    /// line speed, the next block's first part follows a block's end within a read batch, so ingest holds that
    /// part back while anyone waits (`wants_complete`), or they might never find the books complete.
    complete_wanted: std::sync::atomic::AtomicU32,
    publisher_wants_complete: std::sync::atomic::AtomicBool,
    /// Streaming: every fills line of blocks up to this height has been handed over as a step (a block can be
    /// whole by its diffs and statuses before its fills lines are read). `u64::MAX` when whole means with fills.
    fills_through: std::sync::atomic::AtomicU64,
}

/// A function shown the books at each block end, under the write lock that completed the block.
pub struct CompleteHook(Box<dyn Fn(&Books) + Send + Sync>);

impl std::fmt::Debug for CompleteHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CompleteHook")
    }
}

impl Shared {
    pub fn new(books: Books, stale_after: Duration) -> Shared {
        Shared {
            books: RwLock::new(books),
            health: Health::new(stale_after),
            changes: Mutex::new(0),
            changed: Condvar::new(),
            recent: Mutex::new(VecDeque::with_capacity(RECENT_BLOCKS)),
            timeline: Mutex::new(VecDeque::with_capacity(TIMELINE)),
            steps: Mutex::new(VecDeque::with_capacity(KEPT_STEPS)),
            repaired: Mutex::new(Vec::new()),
            watched: Arc::default(),
            first_coins: ArcSwap::default(),
            first_taken: Mutex::new(0),
            first_taken_cv: Condvar::new(),
            on_complete: std::sync::OnceLock::new(),
            complete_wanted: std::sync::atomic::AtomicU32::new(0),
            publisher_wants_complete: std::sync::atomic::AtomicBool::new(false),
            fills_through: std::sync::atomic::AtomicU64::new(u64::MAX),
        }
    }

    /// Ingest, after handing over fills steps: every fills line of blocks up to `h` has been handed over.
    pub(crate) fn set_fills_through(&self, h: u64) {
        self.fills_through.store(h, Relaxed);
    }

    /// The height through which every fills step is out (`u64::MAX`: through every whole block). Read it before
    /// taking the steps: those it covers are among them.
    pub fn fills_through(&self) -> u64 {
        self.fills_through.load(Relaxed)
    }

    /// Whether a reader waits for complete books: ingest then opens no new block with a part of its diffs.
    pub(crate) fn wants_complete(&self) -> bool {
        self.complete_wanted.load(Relaxed) > 0 || self.publisher_wants_complete.load(Relaxed)
    }

    /// The publisher holds l4Book snapshot requests that wait for complete books.
    pub fn set_publisher_wants_complete(&self, wants: bool) {
        self.publisher_wants_complete.store(wants, Relaxed);
    }

    /// Shows `f` the books at every block end from now on (once per state; for tests that check each block).
    pub fn on_complete(&self, f: impl Fn(&Books) + Send + Sync + 'static) {
        let _ = self.on_complete.set(CompleteHook(Box::new(f)));
    }

    /// Ingest completed a block: `books` is under its write lock.
    pub(crate) fn completed(&self, books: &Books) {
        if let Some(CompleteHook(f)) = self.on_complete.get() {
            f(books);
        }
    }

    /// The books as they are now (possibly with a block half-applied: L2 is final, L4 metadata may be pending).
    pub fn books(&self) -> RwLockReadGuard<'_, Books> {
        self.books.read()
    }

    /// The books for changing them: ingest applies blocks, validation repairs coins.
    pub(crate) fn books_mut(&self) -> RwLockWriteGuard<'_, Books> {
        self.books.write()
    }

    /// Waits up to `timeout` for books with no half-applied block (whole orders at one height); `None` if they
    /// are still half-applied then (a block whose status line was lost stays so until the resync installs books).
    pub fn complete_books(&self, timeout: Duration) -> Option<RwLockReadGuard<'_, Books>> {
        struct Waiting<'a>(&'a std::sync::atomic::AtomicU32);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Relaxed);
            }
        }
        self.complete_wanted.fetch_add(1, Relaxed);
        let _waiting = Waiting(&self.complete_wanted);
        let until = Instant::now() + timeout;
        loop {
            let seen = self.change_seq();
            let books = self.books.read();
            if books.is_complete() {
                return Some(books);
            }
            drop(books);
            let left = until.checked_duration_since(Instant::now())?;
            self.wait_for_change(seen, left);
        }
    }

    /// Replaces every book with a loaded snapshot (counted in `books_loaded`); the blocks kept for validation no
    /// longer follow on.
    pub(crate) fn install(&self, books: Books) {
        let height = books.height();
        {
            let mut guard = self.books.write();
            *guard = books;
            self.recent.lock().clear();
            self.health.counters().books_loaded.inc();
        }
        self.health.resynced(height);
        self.signal_change();
    }

    /// Times whole books were replaced by a snapshot (the `books_loaded` counter); read under the books' lock, it
    /// tells a reader that the books it saw before are gone.
    pub fn installs(&self) -> u64 {
        self.health.counters().books_loaded.get()
    }

    pub fn health(&self) -> &Health {
        &self.health
    }

    /// Users some client follows (the publisher adds and drops them, the parser reads them).
    pub fn watched(&self) -> &Arc<Watched> {
        &self.watched
    }

    /// Coins whose books some client watches (the hub sets them as subscriptions change).
    pub fn first_coins(&self) -> Arc<FxHashSet<Coin>> {
        self.first_coins.load_full()
    }

    pub fn set_first_coins(&self, coins: FxHashSet<Coin>) {
        self.first_coins.store(Arc::new(coins));
    }

    /// The publisher, holding the books' read lock, has seen the first part of block `height`.
    pub fn first_taken(&self, height: u64) {
        let mut taken = self.first_taken.lock();
        if *taken != height {
            *taken = height;
            self.first_taken_cv.notify_all();
        }
    }

    /// Waits up to `timeout` for the publisher to take up the first part of block `height`. Ingest takes the
    /// write lock again straight after a first part, well before the publisher has woken, so without this wait
    /// the publisher would find the whole step applied and nothing would go out early.
    pub(crate) fn wait_first_taken(&self, height: u64, timeout: Duration) -> bool {
        let mut taken = self.first_taken.lock();
        let until = Instant::now() + timeout;
        while *taken != height {
            if self.first_taken_cv.wait_until(&mut taken, until).timed_out() {
                return *taken == height;
            }
        }
        true
    }

    /// How many changes the publisher has been told of.
    pub fn change_seq(&self) -> u64 {
        *self.changes.lock()
    }

    /// Blocks until a change after `seen` or until `timeout` passes; returns the current count.
    pub fn wait_for_change(&self, seen: u64, timeout: Duration) -> u64 {
        let mut seq = self.changes.lock();
        if *seq <= seen {
            self.changed.wait_for(&mut seq, timeout);
        }
        *seq
    }

    /// Wakes the publisher (and anyone waiting for complete books): something it serves changed.
    pub fn signal_change(&self) {
        *self.changes.lock() += 1;
        self.changed.notify_all();
    }

    /// Records a repaired coin and wakes the publisher.
    pub fn repaired(&self, coin: Coin) {
        self.repaired.lock().push(coin);
        self.signal_change();
    }

    /// Coins repaired since the last call.
    pub fn take_repaired(&self) -> Vec<Coin> {
        std::mem::take(&mut *self.repaired.lock())
    }

    /// Records a line's stage times. Ingest records a diffs step under the books' write lock, so a reader of the
    /// books at a height also finds that height's L2 times.
    pub(crate) fn record(&self, times: LineTimes) {
        let mut t = self.timeline.lock();
        if t.len() == TIMELINE {
            t.pop_front();
        }
        t.push_back(times);
    }

    /// The recorded times of block `height`'s `line`, if still kept.
    pub fn times_of(&self, height: u64, line: Stream) -> Option<LineTimes> {
        self.timeline.lock().iter().rev().find(|t| t.height == height && t.line == line).copied()
    }

    /// Every kept line time of the blocks in `heights`, oldest first.
    pub fn times_in(&self, heights: std::ops::RangeInclusive<u64>) -> Vec<LineTimes> {
        self.timeline.lock().iter().filter(|t| heights.contains(&t.height)).copied().collect()
    }

    /// Keeps a completed block for validation and exports.
    pub(crate) fn remember(&self, block: Arc<Block>) {
        let mut r = self.recent.lock();
        if r.len() == RECENT_BLOCKS {
            r.pop_front();
        }
        r.push_back(block);
    }

    /// The kept completed blocks above `after` and at most `up_to`, oldest first. The first one's height tells
    /// whether the ring still reaches back to `after + 1`.
    pub fn blocks_after(&self, after: u64, up_to: u64) -> Vec<Arc<Block>> {
        let recent = self.recent.lock();
        // Kept in height order (an install clears them): walk back from the newest and stop at `after`, so a pass
        // reads the few blocks it publishes, not every kept block's allocation.
        let mut out: Vec<_> =
            recent.iter().rev().skip_while(|b| b.height > up_to).take_while(|b| b.height > after).cloned().collect();
        out.reverse();
        out
    }

    /// Queues a step for the publisher, numbering it after the last one.
    pub(crate) fn push_step(&self, mut step: Step) {
        let mut s = self.steps.lock();
        step.seq = s.back().map_or(1, |last| last.seq + 1);
        if s.len() == KEPT_STEPS {
            s.pop_front();
        }
        s.push_back(Arc::new(step));
    }

    /// Diffs steps after `diffs_seq` whose height is at most `diffs_up_to`, and fills and statuses steps after
    /// `fills_seq`, oldest first.
    ///
    /// A diffs step above `diffs_up_to` (a first part whose rest is not applied yet, `book::first`) is the newest
    /// diffs step, so it and everything after it wait for a later pass. Walks back from the newest step and stops
    /// at both floors, so a pass reads the steps of the last block or two, not all `KEPT_STEPS` allocations under
    /// the lock ingest pushes to.
    pub fn steps_after(&self, diffs_seq: u64, diffs_up_to: u64, fills_seq: u64) -> StepsSince {
        let mut out = StepsSince { diffs_seq, fills_seq, ..StepsSince::default() };
        let steps = self.steps.lock();
        let floor = diffs_seq.min(fills_seq);
        out.lost = steps.front().is_some_and(|first| first.seq > floor + 1);
        let newest = steps.back().map_or(floor, |s| s.seq);
        // Every step of a kind above its floor is taken, so the next floor is the newest step, except for diffs
        // held back: they stay above it.
        let mut held: Option<u64> = None;
        for s in steps.iter().rev().take_while(|s| s.seq > floor) {
            match s.data {
                // Walking back: a step above `diffs_up_to` holds back itself and every newer one taken so far.
                StepData::Diffs(_) if s.seq > diffs_seq && s.height > diffs_up_to => {
                    out.diffs.clear();
                    held = Some(s.seq);
                }
                StepData::Diffs(_) if s.seq > diffs_seq => out.diffs.push(s.clone()),
                StepData::Fills { .. } if s.seq > fills_seq => out.fills.push(s.clone()),
                StepData::Statuses(_) if s.seq > fills_seq => out.statuses.push(s.clone()),
                _ => {}
            }
        }
        out.diffs.reverse();
        out.fills.reverse();
        out.statuses.reverse();
        out.diffs_seq = held.map_or(newest.max(diffs_seq), |h| h - 1);
        out.fills_seq = newest.max(fills_seq);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared() -> Shared {
        Shared::new(Books::default(), Duration::from_secs(5))
    }

    fn fills(h: u64) -> Step {
        Step {
            seq: 0,
            height: h,
            block_time: 0,
            data: StepData::Fills { fills: Vec::new(), users: Vec::new(), generation: None, liquidations: Vec::new() },
        }
    }

    fn diffs(h: u64) -> Step {
        Step { seq: 0, height: h, block_time: 0, data: StepData::Diffs(Vec::new()) }
    }

    fn heights(steps: &[Arc<Step>]) -> Vec<u64> {
        steps.iter().map(|s| s.height).collect()
    }

    /// State with the fills and diffs steps of blocks 1 to `n`, as ingest pushes them (seqs 1 to 2n).
    fn with_blocks(n: u64) -> Shared {
        let s = shared();
        for h in 1..=n {
            s.push_step(fills(h));
            s.push_step(diffs(h));
        }
        s
    }

    #[test]
    fn steps_after_returns_each_kind_above_its_floor_oldest_first() {
        let s = with_blocks(6);
        s.push_step(fills(7));
        // Diffs of block 3 is seq 6, fills of block 4 is seq 7.
        let got = s.steps_after(6, 5, 7);
        assert_eq!(heights(&got.diffs), [4, 5]);
        assert_eq!(heights(&got.fills), [5, 6, 7]);
        // Block 6's diffs step (seq 12) is above the books' diffs height: the diffs floor stays below it.
        assert_eq!((got.diffs_seq, got.fills_seq, got.lost), (11, 13, false));
        let got = s.steps_after(11, 6, 13);
        assert_eq!((heights(&got.diffs), got.fills.len()), (vec![6], 0));
        let got = s.steps_after(13, 6, 13);
        assert!(got.diffs.is_empty() && got.fills.is_empty());
        assert_eq!((got.diffs_seq, got.fills_seq), (13, 13));
        let got = s.steps_after(0, 6, 0);
        assert_eq!((heights(&got.diffs), heights(&got.fills)), ((1..=6).collect(), (1..=7).collect()));
    }

    #[test]
    fn many_steps_of_one_height_are_each_taken_once() {
        let s = shared();
        for _ in 0..3 {
            s.push_step(diffs(5));
            s.push_step(fills(5));
        }
        let got = s.steps_after(0, 5, 0);
        assert_eq!((heights(&got.diffs), heights(&got.fills)), (vec![5, 5, 5], vec![5, 5, 5]));
        s.push_step(diffs(5));
        let again = s.steps_after(got.diffs_seq, 5, got.fills_seq);
        assert_eq!((heights(&again.diffs), again.fills.len()), (vec![5], 0));
    }

    #[test]
    fn a_diffs_step_above_the_books_height_waits_with_every_newer_one() {
        let s = with_blocks(2);
        s.push_step(diffs(3)); // a first part: the books' diffs height is still 2
        s.push_step(fills(3));
        let got = s.steps_after(0, 2, 0);
        assert_eq!((heights(&got.diffs), heights(&got.fills)), (vec![1, 2], vec![1, 2, 3]));
        s.push_step(diffs(3)); // its rest
        let got = s.steps_after(got.diffs_seq, 3, got.fills_seq);
        assert_eq!(heights(&got.diffs), [3, 3]);
    }

    #[test]
    fn blocks_after_returns_the_kept_blocks_in_the_range_oldest_first() {
        let s = shared();
        for h in 1..=10 {
            s.remember(Arc::new(Block { height: h, ..Block::default() }));
        }
        let got: Vec<u64> = s.blocks_after(3, 7).iter().map(|b| b.height).collect();
        assert_eq!(got, [4, 5, 6, 7]);
        assert!(s.blocks_after(10, 12).is_empty());
        assert_eq!(s.blocks_after(0, 1).len(), 1);
    }

    #[test]
    fn only_the_newest_kept_steps_remain_and_a_floor_behind_them_is_lost() {
        let s = shared();
        for h in 1..=KEPT_STEPS as u64 + 10 {
            s.push_step(diffs(h));
        }
        let got = s.steps_after(0, u64::MAX, 0);
        assert_eq!(got.diffs.len(), KEPT_STEPS);
        assert_eq!(got.diffs.first().map(|s| s.height), Some(11));
        assert!(got.lost);
        assert!(!s.steps_after(10, u64::MAX, 10).lost);
    }
}
