//! The service state operators and clients see, and the counters behind it. It lives in `state` because ingest
//! writes it while audit, publish and ws read it.
//!
//! Written by the ingest thread with relaxed atomics (no lock on the hot path), read by anyone. `stale` is not
//! stored: it is derived from how long ago the last block was applied, so silence is reported even when the
//! ingest thread itself is idle waiting for the node (hl-visor peer swaps go quiet for 5–15 s; never exit on it).

use std::sync::atomic::{AtomicI64, AtomicU8, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use super::sources::SourceBoard;
use crate::node::time::{UnixNanos, now_nanos};

#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HealthState {
    /// No block applied yet.
    Starting,
    /// Applying a backlog: the last block the node wrote is well behind the wall clock.
    CatchingUp,
    Live,
    /// No block for longer than the stale threshold.
    Stale,
    /// The books lost the stream (a gap, a lost or malformed line) and wait for a snapshot.
    Resyncing,
    /// A thread the service needs (ingest, publisher, validation) died: the process is exiting so its supervisor
    /// restarts it; the books it shows are frozen.
    Failed,
}

impl HealthState {
    /// The name `/health` and the metrics use.
    pub fn as_str(self) -> &'static str {
        match self {
            HealthState::Starting => "starting",
            HealthState::CatchingUp => "catching_up",
            HealthState::Live => "live",
            HealthState::Stale => "stale",
            HealthState::Resyncing => "resyncing",
            HealthState::Failed => "failed",
        }
    }

    /// Books are being served: `/health` answers 200 and systemd hears READY=1.
    pub fn serving(self) -> bool {
        matches!(self, HealthState::Live | HealthState::CatchingUp)
    }

    fn from_u8(v: u8) -> HealthState {
        match v {
            0 => HealthState::Starting,
            1 => HealthState::CatchingUp,
            2 => HealthState::Live,
            3 => HealthState::Stale,
            4 => HealthState::Resyncing,
            _ => HealthState::Failed,
        }
    }
}

impl std::fmt::Display for HealthState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

crate::state::counter::counters! {
    /// Counters of everything ingest does, over the process's life (across resyncs, unlike a `Books`' own
    /// `BookCounters`); all monotonic. Exported as `hlbook_ingest_<name>` and under `counters` in the admin `/health`.
    pub struct IngestCounters {
        /// Lines read from the sources.
        lines,
        /// Bytes of lines read from the sources.
        bytes,
        /// Lines that did not parse (each is a lost line).
        malformed_lines,
        /// Lines not in the node's exact layout, so read by the slower serde parse instead of a fast path (a node
        /// version that changed how it writes a stream shows here).
        lines_off_layout,
        /// Blocks applied to the books.
        blocks_applied,
        /// Blocks dropped because the books already held them.
        blocks_already_applied,
        /// Blocks missing from the stream (lost input: each leads to a resync).
        gaps,
        /// Blocks that could not be assembled whole (lost input: each leads to a resync).
        broken_blocks,
        /// Diffs that did not fit our book: the coin is untrusted until validation repairs it.
        inconsistencies,
        /// Hourly file changes.
        rollovers,
        /// Partial lines dropped (lost input: each leads to a resync).
        partial_lines_dropped,
        /// Files reopened because they were replaced under their name.
        files_reopened,
        /// Whole books installed from a snapshot: the first load, then every resync (so a fresh server shows 1).
        books_loaded,
        /// Read errors.
        io_errors,
        /// Snapshots asked of the node's info server.
        snapshots_requested,
        /// Failed snapshot attempts (retried with back-off).
        snapshot_failures,
        /// Snapshots over NATS refused for being over `nats.max_snapshot_bytes` (downloaded or inflated).
        snapshots_too_large,
        /// Connections made to relays.
        source_connects,
        /// Connections to relays lost.
        source_disconnects,
        /// Messages in a NATS stream that were not node lines of ours (no height, a bad part header), skipped.
        foreign_messages,
        /// NATS lines taken straight from their subject (the live path) rather than from the stream.
        nats_live_lines,
        /// Subscriptions and publishes NATS refused (permissions; each also a WARN).
        nats_permission_denied,
        /// Comparisons with a node snapshot (periodic, and at once for untrusted coins).
        validations,
        /// Comparisons that found a coin differing from the node's snapshot.
        validation_mismatches,
        /// Comparisons with a node snapshot that were skipped.
        validations_skipped,
        /// Mismatching coins replaced from a node snapshot.
        repairs,
        /// Lines of blocks already applied (a restarted node re-emitting recent blocks), dropped.
        stale_lines,
        /// Racing sources: a later copy of a line whose events differ from the applied one's.
        disagreements,
        /// Lines longer than `ingest.max_line_bytes`, refused (each is a lost line).
        lines_too_long,
        /// Lines of a block further past the last one handed out than `ingest.max_height_jump`, refused.
        lines_too_far_ahead,
        /// Racing: blocks given up because `ingest.race_max_parked_blocks` later blocks waited for them.
        parked_blocks_full,
        /// Lines of blocks not whole yet reached `ingest.max_pending_bytes`: the source counted as broken (resync).
        pending_bytes_full,
        /// Diffs lines applied in two steps, the watched coins first (`book::first`).
        split_diff_steps,
        /// Split diffs steps whose rest went ahead before the publisher had taken up the first part (1 ms).
        first_waits_timed_out,
        /// Streaming: parts of a block's diffs applied as their lines were read, before the block was whole.
        diff_parts,
        /// Streaming: an open block's parts taken back for a reader of complete books (`book::undo`).
        roll_backs,
        /// Coin books copied before a change because a reader still held them (copy-on-write): an l4Book snapshot
        /// (or an `/l4snapshot` export) being serialized when the next block changed its coin. Each is one copy of
        /// that coin's whole book.
        book_copies,
    }
}

impl IngestCounters {
    /// Every counter's value by name, for `/health`.
    pub fn to_map(&self) -> std::collections::BTreeMap<&'static str, u64> {
        self.to_list().into_iter().map(|c| (c.name, c.value)).collect()
    }
}

#[derive(Debug)]
pub struct Health {
    state: AtomicU8,
    /// The state last logged (`report`).
    reported: AtomicU8,
    height: AtomicU64,
    /// Wall-clock time the last block was applied.
    applied_at: AtomicI64,
    /// The last applied block's consensus time and node write time.
    block_time: AtomicI64,
    node_written: AtomicI64,
    stale_after: Duration,
    catching_up_after: Duration,
    /// Why the service failed (a thread died), once it has.
    failure: parking_lot::Mutex<Option<String>>,
    /// Wakes whoever stops the service (`failed`) when it fails.
    failed_signal: tokio::sync::Notify,
    counters: IngestCounters,
    /// Each source's state, and the race between them.
    sources: std::sync::Arc<SourceBoard>,
    /// The optional misc_events stream: read or not, and its reader's counters.
    misc: super::misc_stream::MiscStream,
    /// The optional node_twap_statuses stream, the same way.
    twaps: super::misc_stream::MiscStream,
}

impl Health {
    pub fn new(stale_after: Duration) -> Health {
        Health {
            state: AtomicU8::new(HealthState::Starting as u8),
            reported: AtomicU8::new(HealthState::Starting as u8),
            height: AtomicU64::new(0),
            applied_at: AtomicI64::new(0),
            block_time: AtomicI64::new(0),
            node_written: AtomicI64::new(0),
            stale_after,
            catching_up_after: Duration::from_secs(2),
            failure: parking_lot::Mutex::new(None),
            failed_signal: tokio::sync::Notify::new(),
            counters: IngestCounters::default(),
            sources: Default::default(),
            misc: Default::default(),
            twaps: Default::default(),
        }
    }

    /// Everything ingest counts.
    pub fn counters(&self) -> &IngestCounters {
        &self.counters
    }

    /// Each source's state, and the race between them.
    pub fn sources(&self) -> &std::sync::Arc<SourceBoard> {
        &self.sources
    }

    /// The misc_events stream's standing.
    pub fn misc(&self) -> &super::misc_stream::MiscStream {
        &self.misc
    }

    /// The node_twap_statuses stream's standing.
    pub fn twaps(&self) -> &super::misc_stream::MiscStream {
        &self.twaps
    }

    /// Records an applied block.
    pub fn applied(&self, height: u64, block_time: UnixNanos, node_written: Option<UnixNanos>) {
        let now = now_nanos();
        self.height.store(height, Relaxed);
        self.applied_at.store(now, Relaxed);
        self.block_time.store(block_time, Relaxed);
        let written = node_written.unwrap_or(now);
        self.node_written.store(written, Relaxed);
        self.counters.blocks_applied.inc();
        let behind = Duration::from_nanos(now.saturating_sub(written).max(0) as u64);
        if self.stored() != HealthState::Resyncing {
            let s = if behind > self.catching_up_after { HealthState::CatchingUp } else { HealthState::Live };
            self.state.store(s as u8, Relaxed);
        }
        self.report();
    }

    /// The books lost the stream. Before the first snapshot there are no books to resync, so a failed bootstrap
    /// stays `starting` (operators look for the node's info server there, not for a gap).
    pub fn set_resyncing(&self) {
        let starting = HealthState::Starting as u8;
        let _ = self.state.fetch_update(Relaxed, Relaxed, |s| (s != starting).then_some(HealthState::Resyncing as u8));
        self.report();
    }

    /// After a successful resync the next applied block decides between live and catching up. (The install
    /// itself is counted by `state::Shared::install`, under the books' lock.)
    pub fn resynced(&self, height: u64) {
        self.height.store(height, Relaxed);
        self.state.store(HealthState::CatchingUp as u8, Relaxed);
        self.report();
    }

    /// A thread the service needs died: `failed` from now on, whatever ingest does.
    pub fn fail(&self, why: String) {
        tracing::error!("{why}; hlbook exits so that its supervisor restarts it");
        self.failure.lock().get_or_insert(why);
        self.state.store(HealthState::Failed as u8, Relaxed);
        self.report();
        self.failed_signal.notify_one();
    }

    /// Returns once the service has failed (at once if it already has).
    pub async fn failed(&self) {
        self.failed_signal.notified().await;
    }

    /// Why the service failed, if it did.
    pub fn failure(&self) -> Option<String> {
        self.failure.lock().clone()
    }

    fn stored(&self) -> HealthState {
        if self.failure.lock().is_some() {
            return HealthState::Failed;
        }
        HealthState::from_u8(self.state.load(Relaxed))
    }

    /// Logs the state when it differs from the one last logged: one line per change, never one per block.
    /// Ingest calls it after every block and every idle poll, so `stale` (derived from silence) is logged too.
    /// Returns the change, if any.
    pub fn report(&self) -> Option<(HealthState, HealthState)> {
        self.report_at(now_nanos())
    }

    /// `report` as of Unix time `at`.
    fn report_at(&self, at: UnixNanos) -> Option<(HealthState, HealthState)> {
        let now = self.state_at(at);
        let before = HealthState::from_u8(self.reported.swap(now as u8, Relaxed));
        if before == now {
            return None;
        }
        let height = self.height();
        match now {
            HealthState::Stale | HealthState::Resyncing | HealthState::Failed => {
                tracing::warn!(from = %before, to = %now, height, "health state changed");
            }
            _ => tracing::info!(from = %before, to = %now, height, "health state changed"),
        }
        Some((before, now))
    }

    /// The state now, with staleness derived from the time since the last applied block.
    pub fn state(&self) -> HealthState {
        self.state_at(now_nanos())
    }

    /// The state as of Unix time `now` (tests ask about a later moment instead of sleeping until it).
    fn state_at(&self, now: UnixNanos) -> HealthState {
        let s = self.stored();
        let at = self.applied_at.load(Relaxed);
        let silent = Duration::from_nanos(now.saturating_sub(at).max(0) as u64);
        match s {
            HealthState::Live | HealthState::CatchingUp if at > 0 && silent > self.stale_after => HealthState::Stale,
            s => s,
        }
    }

    pub fn height(&self) -> u64 {
        self.height.load(Relaxed)
    }

    /// now − block time and now − node write time of the last applied block, in nanoseconds.
    pub fn lag(&self) -> (i64, i64) {
        let now = now_nanos();
        (now - self.block_time.load(Relaxed), now - self.node_written.load(Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Staleness in the tests: an hour, so a busy machine never makes a state stale before the test asks about a
    /// moment past it.
    const STALE: Duration = Duration::from_secs(3_600);
    const LATER: i64 = 2 * 3_600 * 1_000_000_000;

    #[test]
    fn states_follow_blocks_and_silence() {
        let h = Health::new(STALE);
        assert_eq!(h.state(), HealthState::Starting);
        h.set_resyncing();
        assert_eq!(h.state(), HealthState::Starting, "a failed bootstrap is still starting");
        let now = now_nanos();
        h.applied(5, now, Some(now));
        assert_eq!(h.state(), HealthState::Live);
        h.applied(6, now, Some(now - 10_000_000_000));
        assert_eq!(h.state(), HealthState::CatchingUp);
        assert_eq!(h.state_at(now_nanos() + LATER), HealthState::Stale);
        h.applied(7, now_nanos(), None);
        assert_eq!(h.state(), HealthState::Live);
        h.set_resyncing();
        h.applied(8, now_nanos(), None);
        assert_eq!(h.state(), HealthState::Resyncing, "only a resync leaves resyncing");
        h.resynced(100);
        assert_eq!((h.state(), h.height()), (HealthState::CatchingUp, 100));
    }

    #[test]
    fn report_names_each_change_once() {
        let h = Health::new(STALE);
        assert_eq!(h.report(), None);
        let now = now_nanos();
        h.applied(5, now, Some(now - 10_000_000_000)); // reports starting -> catching_up itself
        assert_eq!(h.report(), None);
        h.applied(6, now_nanos(), None);
        h.applied(7, now_nanos(), None);
        assert_eq!(h.report(), None, "already reported by applied");
        let later = now_nanos() + LATER;
        assert_eq!(h.report_at(later), Some((HealthState::Live, HealthState::Stale)));
        assert_eq!(h.report_at(later), None);
        h.set_resyncing();
        assert_eq!(h.report(), None);
        h.resynced(9);
        h.applied(10, now_nanos(), None);
        assert_eq!((h.report(), h.state()), (None, HealthState::Live));
    }
}
