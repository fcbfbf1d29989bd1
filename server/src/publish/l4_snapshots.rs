//! l4Book snapshot requests: held until the books are complete, then served at most once per coin and block.
//!
//! A snapshot is the coin's book taken under the books' read lock and serialized on the rayon pool with no lock.
//! The take is O(1): each coin's book is copy-on-write (`Books::shared_coin`), so the lock ingest's writer waits
//! on is held for a reference count per coin, never a deep clone. The writer copies a coin only if the next block
//! changes it while its snapshot is still being serialized (`book_copies` in ingest's counters). Subscribe/
//! unsubscribe churn over every coin used to copy each coin again on every pass and queue a job per pass on
//! rayon's unbounded queue. Now:
//! - a frame made at a complete height is kept for that height (and that load of the books): every later request
//!   for the coin until the next complete block, a repair or a reload gets the same frame, with no copy and no
//!   lock. Between two complete blocks no l4Book update of the coin can be published, so the frame's `after_seq`
//!   still holds;
//! - at most one job runs: requests that come meanwhile wait here (a sender each, no copy) and are served from
//!   what it made or by the next job, so copies alive at once are one job's, never one per pass;
//! - a request whose subscriber left is dropped before any take, and again before serializing, and the job lets
//!   each book go as soon as its frame is made, so the writer rarely finds one still held.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use parking_lot::Mutex;
use rustc_hash::FxHashMap;

use super::frame::{Audit, Frame};
use super::hub::{Hub, L4Snapshot};
use super::json;
use crate::book::{Books, CoinBook};
use crate::node::Coin;
use crate::node::time::now_nanos;

/// A pending l4Book snapshot request.
pub(super) type SnapshotRequest = (Coin, tokio::sync::oneshot::Sender<L4Snapshot>);

/// Which books a frame shows: the complete height and the number of snapshot installs.
type At = (u64, u64);

#[derive(Debug, Default)]
pub(super) struct Snapshots {
    held: Vec<SnapshotRequest>,
    at: At,
    made: FxHashMap<Coin, L4Snapshot>,
    /// What the running job made, for `made` once its books are still the current ones.
    done: Arc<Mutex<Vec<(At, Coin, L4Snapshot)>>>,
    running: Arc<AtomicBool>,
}

/// Books taken (shared, O(1) each) under the read lock for one job.
#[derive(Debug, Default)]
pub(super) struct Copies {
    books: Vec<(Coin, Option<Arc<CoinBook>>)>,
    requests: Vec<SnapshotRequest>,
    at: At,
}

impl Snapshots {
    /// Takes the hub's new requests and drops those whose subscriber left.
    pub(super) fn gather(&mut self, hub: &Hub) {
        self.held.extend(hub.take_requests());
        let before = self.held.len();
        self.held.retain(|(_, tx)| !tx.is_closed());
        hub.counters().l4_snapshots_abandoned.add((before - self.held.len()) as u64);
    }

    pub(super) fn waiting(&self) -> bool {
        !self.held.is_empty()
    }

    /// Under the read lock, books complete at `at`: answers every request a frame of these books was made for,
    /// and takes the coins of the rest (shared, no copy) unless a job is still running (they wait for it).
    /// `fresh`: some coin was repaired, so no frame made before is kept.
    pub(super) fn take_copies(&mut self, books: &Books, at: At, fresh: bool, hub: &Hub) -> Copies {
        if at != self.at || fresh {
            self.made.clear();
            self.at = at;
        }
        for (made_at, coin, snap) in std::mem::take(&mut *self.done.lock()) {
            if made_at == at && !fresh {
                self.made.insert(coin, snap);
            }
        }
        // A send is a few field writes: answered here rather than carried past the lock.
        for (coin, tx) in std::mem::take(&mut self.held) {
            match self.made.get(&coin) {
                Some(snap) => {
                    hub.counters().l4_snapshots_shared.inc();
                    let _ = tx.send(snap.clone());
                }
                None => self.held.push((coin, tx)),
            }
        }
        let mut copies = Copies { at, ..Copies::default() };
        if self.running.load(Relaxed) {
            return copies;
        }
        copies.requests = std::mem::take(&mut self.held);
        let mut seen = rustc_hash::FxHashSet::default();
        for (coin, _) in &copies.requests {
            if seen.insert(coin.clone()) {
                copies.books.push((coin.clone(), books.shared_coin(coin)));
            }
        }
        hub.counters().l4_snapshot_copies.add(copies.books.len() as u64);
        copies
    }

    /// Serializes `copies` on the rayon pool, so a big book never delays the next pass; `after_seq`: the feed tick
    /// the snapshots are current after.
    pub(super) fn serve(&self, copies: Copies, after_seq: u64, audit: Audit, hub: &Arc<Hub>) {
        if copies.requests.is_empty() {
            return;
        }
        self.running.store(true, Relaxed);
        let (hub, done, running) = (hub.clone(), self.done.clone(), self.running.clone());
        // A panic on the rayon pool would abort the process without a word; supervised, it fails the service
        // with the reason on /health and in the log.
        rayon::spawn(move || {
            hub.shared().health().supervised("l4Book snapshot job", || {
                #[cfg(feature = "test-hooks")]
                assert!(
                    !crate::state::test_panic("l4_snapshots"),
                    "HLBOOK_TEST_PANIC asked an l4Book snapshot job to panic"
                );
                let made = serialize(copies.books, copies.requests, after_seq, audit, &hub);
                done.lock().extend(made.into_iter().map(|(c, s)| (copies.at, c, s)));
                running.store(false, Relaxed);
                // The pass announced before these were ready: wake the waiting connections now, not at the next
                // block (which may be seconds away on a quiet or stalled node), and the publisher for the requests
                // held while this ran.
                hub.poke();
                hub.shared().signal_change();
            });
        });
    }
}

/// One frame per coin, sent to every request of it still open; returns the frames made.
fn serialize(
    books: Vec<(Coin, Option<Arc<CoinBook>>)>,
    requests: Vec<SnapshotRequest>,
    after_seq: u64,
    audit: Audit,
    hub: &Hub,
) -> Vec<(Coin, L4Snapshot)> {
    let mut by_coin: FxHashMap<Coin, Vec<_>> = FxHashMap::default();
    for (c, tx) in requests {
        by_coin.entry(c).or_default().push(tx);
    }
    let mut made = Vec::new();
    for (coin, book) in books {
        let mut waiting = by_coin.remove(&coin).unwrap_or_default();
        waiting.retain(|tx| !tx.is_closed());
        if waiting.is_empty() {
            hub.counters().l4_snapshots_abandoned.inc();
            continue;
        }
        let book = book.unwrap_or_else(|| Arc::new(CoinBook::new(coin.clone())));
        // The snapshot is the books at `audit.height`: that block's stage times are its own.
        let json = json::l4_snapshot(&book, audit.height(), audit.block_time());
        // Let the book go before sending: the writer copies a coin only while a snapshot still holds it.
        drop(book);
        let frame = Arc::new(Frame::new(after_seq, json, Audit { published: now_nanos(), ..audit }));
        hub.counters().l4_snapshots.inc();
        let snap = L4Snapshot { after_seq, frame };
        for tx in waiting {
            let _ = tx.send(snap.clone());
        }
        made.push((coin, snap));
    }
    made
}
