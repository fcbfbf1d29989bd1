//! Reads of history from the store, bounded: userFills first frames and `candleSnapshot` take a turn among
//! `server.history_reads`, waiting in a queue of at most `server.history_queue` for at most
//! `server.history_wait_ms`; and a userFills read is shared by every subscriber of the same user that comes while
//! it runs or while its result still fits the feed.
//!
//! A client that resubscribes in a loop, or follows one busy user on hundreds of connections, must not turn into
//! as many reads: the first subscriber's read is everyone's, and a later subscriber goes live from the block the
//! shared read ends at (the feed still holds the blocks since, and they hold every event of a user followed all
//! along). A read nobody waits for any more stops.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use rustc_hash::FxHashMap;

use super::frame::{Audit, Frame};
use super::misc_history;
use crate::node::Address;
use crate::state::Shared;

/// Most fills a userFills snapshot carries: the official `userFills` answers the user's 2000 most recent.
pub const SNAPSHOT_FILLS: usize = 2000;

/// A userFills snapshot, as written and with `aggregateByTime`; of a TWAP read, the userTwapSliceFills snapshot
/// (both fields).
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub plain: Arc<Frame>,
    pub aggregated: Arc<Frame>,
    /// What the snapshot lacks, for an hlbookNotice before it (a store keeping followed users' fills only).
    pub note: Option<String>,
}

impl Snapshot {
    pub fn frame(&self, aggregate_by_time: bool) -> &Arc<Frame> {
        if aggregate_by_time { &self.aggregated } else { &self.plain }
    }
}

/// Finished userFills reads kept for later subscribers hold at most this many bytes in all.
const KEPT_BYTES: usize = 64 << 20;

/// The global turns for history reads, usable from blocking threads.
#[derive(Debug)]
pub struct Turns {
    state: Mutex<(usize, usize)>,
    freed: Condvar,
    max: usize,
    max_waiting: usize,
    wait: Duration,
}

/// A turn, given back when dropped.
#[derive(Debug)]
pub struct Turn<'a>(&'a Turns);

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.0.state.lock().0 -= 1;
        self.0.freed.notify_one();
    }
}

impl Turns {
    pub fn new(max: usize, max_waiting: usize, wait: Duration) -> Turns {
        Turns { state: Mutex::new((0, 0)), freed: Condvar::new(), max: max.max(1), max_waiting, wait }
    }

    /// Blocks for a turn; Err (the reason, for the client) when the queue is full or the wait runs out.
    pub fn take(&self) -> Result<Turn<'_>, String> {
        let deadline = Instant::now() + self.wait;
        let mut s = self.state.lock();
        if s.0 < self.max {
            s.0 += 1;
            return Ok(Turn(self));
        }
        if s.1 >= self.max_waiting {
            return Err(format!(
                "{} history reads are running and {} wait (server.history_reads, server.history_queue): try again \
                 later",
                self.max, s.1
            ));
        }
        s.1 += 1;
        while s.0 >= self.max {
            if self.freed.wait_until(&mut s, deadline).timed_out() && s.0 >= self.max {
                s.1 -= 1;
                let ms = self.wait.as_millis();
                return Err(format!("waited {ms} ms for a turn among the history reads (server.history_wait_ms)"));
            }
        }
        s.1 -= 1;
        s.0 += 1;
        Ok(Turn(self))
    }

    /// Reads running now.
    pub fn running(&self) -> usize {
        self.state.lock().0
    }
}

/// What a snapshot read reads of the user.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ReadOf {
    Fills,
    /// userTwapSliceFills' read: the user's newest slices, not fills.
    TwapSlices,
    /// userFundings' and userNonFundingLedgerUpdates' reads: the store's entries of misc_events blocks up to
    /// `before - 1` (misc_events heights). Never shared: each subscription's split between snapshot and live
    /// frames is its own (`Hub::misc_pushed`).
    Fundings,
    Ledger,
}

/// One userFills read: the user's fills of blocks below `before`, for subscribers that go live after feed tick
/// `after_seq`.
#[derive(Debug)]
pub struct FillsRead {
    pub(super) user: Address,
    pub of: ReadOf,
    pub before: u64,
    pub after_seq: u64,
    waiters: AtomicUsize,
    pub(super) result: std::sync::OnceLock<Result<Snapshot, String>>,
}

/// A subscriber's wait on a read; dropping it (the subscriber left) may stop the read.
#[derive(Debug)]
pub struct Waiter(Arc<FillsRead>);

impl Drop for Waiter {
    fn drop(&mut self) {
        self.0.waiters.fetch_sub(1, Relaxed);
    }
}

impl Waiter {
    pub fn read(&self) -> &FillsRead {
        &self.0
    }

    /// The snapshot frames, or why there are none; `None` while the read runs.
    pub fn result(&self) -> Option<&Result<Snapshot, String>> {
        self.0.result.get()
    }
}

crate::state::counter::counters! {
    /// Counters of history reads, exported with the publisher's.
    pub struct HistoryCounters {
        /// userFills reads of the store started.
        fills_reads,
        /// userFills subscriptions served by a read another subscriber started.
        fills_reads_shared,
        /// History reads stopped because everyone waiting for them had left.
        reads_abandoned as "history_reads_abandoned",
        /// History reads refused: the queue was full or the wait ran out.
        reads_refused as "history_reads_refused",
    }
}

/// What a userFills read needs of the hub that holds the `History`. The hub names this module, so this module
/// reaches the hub only through the trait (no file circle between them).
pub trait FillsHub: Send + Sync + 'static {
    fn history(&self) -> &History;
    fn shared(&self) -> &Shared;
    /// The history store, once opened.
    fn history_store(&self) -> Option<Arc<crate::store::Store>>;
    /// Whether the feed still holds every tick after `seq`.
    fn feed_holds_after(&self, seq: u64) -> bool;
    /// Wakes the publisher: a read finished.
    fn poke(&self);
}

/// History reads: the turns, the userFills reads by user, and the resume pages in flight by client IP.
#[derive(Debug)]
pub struct History {
    pub turns: Turns,
    /// By user, and what they read.
    fills: Mutex<FxHashMap<(Address, ReadOf), Arc<FillsRead>>>,
    pages: PagesByIp,
    pub counters: HistoryCounters,
}

/// Resume pages in flight per client IP.
type PagesByIp = Arc<Mutex<FxHashMap<std::net::IpAddr, usize>>>;

/// A client IP's place among the resume pages in flight, given back when dropped.
#[derive(Debug)]
pub struct PagePlace(Option<(PagesByIp, std::net::IpAddr)>);

impl Drop for PagePlace {
    fn drop(&mut self) {
        let Some((pages, ip)) = self.0.take() else { return };
        let mut pages = pages.lock();
        if let Some(n) = pages.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                pages.remove(&ip);
            }
        }
    }
}

impl History {
    pub fn new(turns: Turns) -> History {
        let pages = Arc::default();
        History { turns, fills: Mutex::new(FxHashMap::default()), pages, counters: HistoryCounters::default() }
    }

    /// A place for one more resume page of client IP `ip` (`None`: uncounted), if it has fewer in flight than
    /// there are turns: one IP's connections then never hold more of the queue than the turns, so every other
    /// IP's reads find room in it (docs/api.md "Resume"). `None`: the IP has its share; its connection tries again
    /// when a page ends.
    pub fn page_place(&self, ip: Option<std::net::IpAddr>) -> Option<PagePlace> {
        let Some(ip) = ip else { return Some(PagePlace(None)) };
        let mut pages = self.pages.lock();
        let n = pages.entry(ip).or_default();
        if *n >= self.turns.max {
            return None;
        }
        *n += 1;
        Some(PagePlace(Some((self.pages.clone(), ip))))
    }

    /// A wait on the user's fills below `before` for a subscriber at feed tick `after_seq`: the running or kept
    /// read of the user if the feed still holds every tick after its start, else a new read on a blocking thread.
    /// `twap`: the user's TWAP slices (userTwapSliceFills), not their fills.
    pub fn user_fills<H: FillsHub>(
        &self,
        hub: &Arc<H>,
        (user, of): (Address, ReadOf),
        before: u64,
        after_seq: u64,
    ) -> Waiter {
        let mut reads = self.fills.lock();
        if let Some(r) = reads.get(&(user, of))
            && !matches!(of, ReadOf::Fundings | ReadOf::Ledger)
            && r.before <= before
            && hub.feed_holds_after(r.after_seq)
            && !matches!(r.result.get(), Some(Err(_)))
        {
            r.waiters.fetch_add(1, Relaxed);
            self.counters.fills_reads_shared.inc();
            return Waiter(r.clone());
        }
        let read = Arc::new(FillsRead {
            user,
            of,
            before,
            after_seq,
            waiters: AtomicUsize::new(1),
            result: std::sync::OnceLock::new(),
        });
        reads.insert((user, of), read.clone());
        Self::trim(&mut reads);
        drop(reads);
        self.counters.fills_reads.inc();
        let (hub, r) = (hub.clone(), read.clone());
        tokio::task::spawn_blocking(move || {
            let health = hub.shared().health();
            health.supervised("userFills snapshot task", || run_fills_read(&*hub, &r));
        });
        Waiter(read)
    }

    /// A user nobody follows any more: a later subscriber's feed may lack its events, so its read is not reused.
    pub fn forget(&self, user: Address) {
        let mut reads = self.fills.lock();
        for of in [ReadOf::Fills, ReadOf::TwapSlices, ReadOf::Fundings, ReadOf::Ledger] {
            reads.remove(&(user, of));
        }
    }

    /// Drops finished reads nobody waits for while they hold more than `KEPT_BYTES`.
    fn trim(reads: &mut FxHashMap<(Address, ReadOf), Arc<FillsRead>>) {
        let size = |r: &FillsRead| match r.result.get() {
            Some(Ok(f)) => f.plain.json.len() + f.aggregated.json.len(),
            _ => 0,
        };
        let mut total: usize = reads.values().map(|r| size(r)).sum();
        if total <= KEPT_BYTES {
            return;
        }
        let idle: Vec<(Address, ReadOf)> =
            reads.values().filter(|r| r.waiters.load(Relaxed) == 0).map(|r| (r.user, r.of)).collect();
        for u in idle {
            if total <= KEPT_BYTES {
                break;
            }
            if let Some(r) = reads.remove(&u) {
                total -= size(&r);
            }
        }
    }
}

/// The notice a userFills snapshot gets when the store keeps followed users' fills only and did not keep this
/// user's all along.
fn follow_note(user: &Address, f: &crate::store::follow::Follow) -> Option<String> {
    use crate::store::follow::Follow;
    match f {
        Follow::Kept => None,
        Follow::New => Some(format!(
            "hlbook: the history store keeps followed users' fills only (store.fills_users) and now follows {user}: \
             its fills from before are read back from the node's fills files, as far back as they still go"
        )),
        Follow::Refused { max } => Some(format!(
            "hlbook: the history store follows at most {max} users (store.fills_follow_max) and cannot follow \
             {user}: its fills are not stored, this snapshot holds only what was stored before; live fills follow"
        )),
    }
}

/// Waits for the store to hold the blocks below the read's, takes a turn, reads, and keeps the frames (or the
/// reason there are none) for the read's subscribers.
fn run_fills_read(hub: &impl FillsHub, read: &Arc<FillsRead>) {
    #[cfg(feature = "test-hooks")]
    assert!(!crate::state::test_panic("user_fills"), "HLBOOK_TEST_PANIC asked the userFills snapshot task to panic");
    let history = hub.history();
    let gone = || read.waiters.load(Relaxed) == 0;
    if matches!(read.of, ReadOf::Fundings | ReadOf::Ledger) {
        return run_misc_read(hub, read, &gone);
    }
    let fills = || -> Result<(Vec<Box<str>>, Option<String>), String> {
        let Some(store) = hub.history_store() else { return Ok((Vec::new(), None)) };
        let note = follow_note(&read.user, &store.follow.follow(&read.user.0));
        while !store.wait_for(read.before.saturating_sub(1), Duration::from_millis(500)) {
            if gone() {
                return Err("every subscriber waiting for it left".into());
            }
        }
        // A newly followed user's older fills are being read back from the node's files.
        while !store.follow.wait_read_back(&read.user.0, Duration::from_millis(500)) {
            // A failed writer takes no new users: the read takes what the store has.
            if store.status.state() == crate::store::StoreState::Failed {
                break;
            }
            if gone() {
                return Err("every subscriber waiting for it left".into());
            }
        }
        let _turn = history.turns.take()?;
        let fills = if read.of == ReadOf::TwapSlices {
            store.user_twap_slices(&read.user, read.before, SNAPSHOT_FILLS)?
        } else {
            store.user_fills(&read.user, read.before, SNAPSHOT_FILLS)?
        };
        Ok((fills, note))
    };
    let result = fills().map(|(fills, note)| {
        let refs: Vec<&str> = fills.iter().map(|f| &**f).collect();
        if read.of == ReadOf::TwapSlices {
            let slices = super::users::twap_slice_fills(&read.user, &refs, true).unwrap_or_default();
            let frame = Arc::new(Frame::new(0, slices, Audit::default()));
            return Snapshot { plain: frame.clone(), aggregated: frame, note };
        }
        let merged = crate::store::fills::aggregate(&refs);
        let merged: Vec<&str> = merged.iter().map(|f| &**f).collect();
        let frame =
            |list: &[&str]| Arc::new(Frame::new(0, super::users::user_fills(&read.user, list, true), Audit::default()));
        Snapshot { plain: frame(&refs), aggregated: frame(&merged), note }
    });
    if let Err(e) = &result {
        let abandoned = gone();
        let c = if abandoned { &history.counters.reads_abandoned } else { &history.counters.reads_refused };
        c.inc();
        tracing::debug!(user = %read.user, "userFills history read ended without a snapshot: {e}");
    }
    let _ = read.result.set(result);
    hub.poke();
}

/// A userFundings or userNonFundingLedgerUpdates snapshot (`misc_history`): once the store has written the
/// read's last misc_events block, in a turn.
fn run_misc_read(hub: &impl FillsHub, read: &Arc<FillsRead>, gone: &dyn Fn() -> bool) {
    use crate::store::user_events::EntryKind;
    let history = hub.history();
    let (upto, kind) = (
        read.before.saturating_sub(1),
        if read.of == ReadOf::Fundings { EntryKind::Funding } else { EntryKind::Ledger },
    );
    let json = || -> Result<(Vec<u8>, Option<String>), String> {
        let Some(store) = hub.history_store() else {
            return Ok((misc_history::snapshot_json_empty(&read.user, kind), None));
        };
        let note = misc_history::follow_note(&read.user, &store.follow.follow(&read.user.0));
        misc_history::wait_for_store(&store, upto, gone)?;
        let _turn = history.turns.take()?;
        Ok((misc_history::snapshot_json(&store, &read.user, kind, upto)?, note))
    };
    let result = json().map(|(json, note)| {
        let frame = Arc::new(Frame::new(0, json, Audit::default()));
        Snapshot { plain: frame.clone(), aggregated: frame, note }
    });
    if let Err(e) = &result {
        let c = if gone() { &history.counters.reads_abandoned } else { &history.counters.reads_refused };
        c.inc();
        tracing::debug!(user = %read.user, "misc_events history read ended without a snapshot: {e}");
    }
    let _ = read.result.set(result);
    hub.poke();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_client_ip_holds_at_most_as_many_resume_pages_as_there_are_turns() {
        let history = History::new(Turns::new(2, 64, Duration::from_secs(1)));
        let (a, b): (std::net::IpAddr, std::net::IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let a1 = history.page_place(Some(a)).expect("a's first");
        let _a2 = history.page_place(Some(a)).expect("a's second");
        assert!(history.page_place(Some(a)).is_none(), "a has its share");
        let _b1 = history.page_place(Some(b)).expect("b is not held back by a");
        assert!(history.page_place(None).is_some(), "in-process readers are not counted");
        drop(a1);
        assert!(history.page_place(Some(a)).is_some(), "a page ended: a reads again");
    }

    #[test]
    fn turns_queue_then_refuse_and_time_out() {
        let turns = Arc::new(Turns::new(1, 1, Duration::from_millis(50)));
        let held = turns.take().unwrap();
        let t2 = turns.clone();
        let waiter = std::thread::spawn(move || t2.take().map(|_| ()));
        while turns.state.lock().1 == 0 {
            std::thread::yield_now();
        }
        assert!(turns.take().unwrap_err().contains("server.history_queue"), "the queue holds one");
        assert!(waiter.join().unwrap().unwrap_err().contains("server.history_wait_ms"));
        drop(held);
        assert_eq!(turns.running(), 0);
        let again = turns.take().unwrap();
        assert_eq!(turns.running(), 1);
        drop(again);
    }

    #[test]
    fn a_freed_turn_goes_to_the_waiting_read() {
        let turns = Arc::new(Turns::new(1, 4, Duration::from_secs(60)));
        let held = turns.take().unwrap();
        let t2 = turns.clone();
        let waiter = std::thread::spawn(move || t2.take().map(|_| ()));
        while turns.state.lock().1 == 0 {
            std::thread::yield_now();
        }
        drop(held);
        assert!(waiter.join().unwrap().is_ok());
    }
}
