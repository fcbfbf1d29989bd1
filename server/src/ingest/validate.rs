//! Periodic validation against the node's own snapshot (from its info server, or on an edge from the publisher's
//! NATS object store), and in-place repair of any coin that disagrees.
//!
//! It never stalls ingest or publication: the snapshot is loaded on this thread, then brought forward to our
//! height by applying the blocks ingest keeps in `Shared::blocks_after` (the same engine, so both sides saw the same
//! blocks), and compared in short pieces of at most ~1,000 orders, each under a brief read lock and only when both
//! are at the same height (the copy catches up between pieces when ingest moves on). A coin that differs, or that
//! ingest marked untrusted, is replaced by the copy's book (untriggered trigger orders included, which are
//! compared too) under the write lock: an O(1) swap, no restart, no
//! client dropped. The copy is thrown away after each cycle: no whole-state clone is ever made of the live books.
//!
//! An untrusted coin (two racing sources wrote one of its lines differently) is a repair, not a wait: a cycle starts
//! as soon as the last snapshot request is `repair_min_interval` old (`ingest.resync_min_interval_secs`, so no source
//! can make the node write snapshots in a loop), whether periodic validation is on or not.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant};

use super::info_client::{self as info, SnapshotFrom};
use crate::book::{Books, CoinBook, Outcome};
use crate::node::{Coin, Fixed, Side};
use crate::state::Shared;
use crate::state::health::HealthState;

/// Orders compared per read-lock hold.
const PIECE: usize = 1024;

#[derive(Clone, Debug)]
pub struct ValidateConfig {
    /// The node's info server, or (an edge) the NATS object store of its publisher.
    pub from: SnapshotFrom,
    /// Periodic validation; `None`: only untrusted coins start a cycle.
    pub interval: Option<Duration>,
    /// At most one snapshot request per this long for untrusted coins.
    pub repair_min_interval: Duration,
}

/// What one cycle found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub height: u64,
    pub coins: usize,
    pub mismatched: Vec<Coin>,
    pub repaired: Vec<Coin>,
}

#[derive(Debug, thiserror::Error)]
pub enum Skip {
    #[error("{0}")]
    Info(#[from] info::InfoError),
    #[error("books are not live ({0:?})")]
    NotLive(HealthState),
    #[error("snapshot at {snapshot} is older than the blocks kept (from {oldest})")]
    TooOld { snapshot: u64, oldest: u64 },
    #[error("our books did not reach the snapshot's height {0} in time")]
    Behind(u64),
}

/// Runs a cycle every `interval`, and as soon as the rate limit allows when a coin is untrusted, until `stop` is set.
pub fn run(cfg: ValidateConfig, shared: Arc<Shared>, stop: &AtomicBool) {
    // The periodic clock starts now; the repair clock at the last snapshot request (none yet).
    let (mut last, mut requested) = (Instant::now(), None::<Instant>);
    while !stop.load(Relaxed) {
        std::thread::sleep(Duration::from_millis(200));
        let untrusted = shared.books().untrusted().next().is_some();
        let periodic = cfg.interval.is_some_and(|i| last.elapsed() >= i);
        let repair = untrusted && requested.is_none_or(|r| r.elapsed() >= cfg.repair_min_interval);
        if !(periodic || repair) || !matches!(shared.health().state(), HealthState::Live | HealthState::CatchingUp) {
            continue;
        }
        last = Instant::now();
        requested = Some(last);
        if repair {
            let coins: Vec<String> = shared.books().untrusted().map(std::string::ToString::to_string).collect();
            tracing::info!(?coins, "untrusted coins: repairing them from a node snapshot now");
        }
        #[cfg(feature = "test-hooks")]
        assert!(!crate::state::test_panic("validation"), "HLBOOK_TEST_PANIC asked the validation thread to panic");
        // A repair needs a snapshot newer than what made the coin untrusted; a periodic check takes a stored one the
        // kept blocks can bring forward (with room for the fetch's time), so edges share their publisher's snapshots.
        let height = shared.health().height();
        let min_height = if repair { height } else { height.saturating_sub(crate::state::RECENT_BLOCKS as u64 / 2) };
        match cycle(&cfg.from, min_height, &shared, stop) {
            Ok(r) if r.mismatched.is_empty() => tracing::debug!(height = r.height, coins = r.coins, "books validated"),
            Ok(r) => tracing::warn!(
                height = r.height,
                "validation: {:?} differed from the node; repaired {:?}",
                r.mismatched,
                r.repaired
            ),
            Err(e) => {
                if matches!(e, Skip::Info(info::InfoError::TooLarge(_))) {
                    shared.health().counters().snapshots_too_large.inc();
                }
                shared.health().counters().validations_skipped.inc();
                tracing::warn!("validation skipped: {e}");
            }
        }
    }
}

/// One validation: a snapshot at or above `min_height` (when its source can choose), brought forward, compared,
/// repaired.
pub fn cycle(from: &SnapshotFrom, min_height: u64, shared: &Shared, stop: &AtomicBool) -> Result<Report, Skip> {
    let (path, ours) = from.fetch(min_height)?;
    let mut copy = info::load(&path, ours)?;
    wait_for_height(shared, copy.height(), stop)?;
    catch_up(shared, &mut copy)?;
    let c = &shared.health().counters();
    c.validations.inc();
    let mut coins: Vec<Coin> = shared.books().coin_names();
    coins.extend(copy.coin_names());
    coins.sort();
    coins.dedup();
    let mut report = Report { height: copy.height(), coins: coins.len(), ..Report::default() };
    for coin in &coins {
        if !same_coin(shared, &mut copy, coin)? {
            c.validation_mismatches.inc();
            report.mismatched.push(coin.clone());
            repair(shared, &mut copy, coin)?;
            report.repaired.push(coin.clone());
        }
    }
    Ok(report)
}

/// How long a comparison waits for a half-applied block's statuses before giving up the cycle.
const COMPLETE_WAIT: Duration = Duration::from_secs(2);

/// The node's snapshot can be ahead of the blocks we have read: wait (bounded) until our books reach it.
fn wait_for_height(shared: &Shared, height: u64, stop: &AtomicBool) -> Result<(), Skip> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while shared.health().height() < height {
        if Instant::now() > deadline || stop.load(Relaxed) {
            return Err(Skip::Behind(height));
        }
        shared.wait_for_change(shared.change_seq(), Duration::from_millis(50));
    }
    Ok(())
}

/// Applies the kept blocks after the copy's height, up to the live height.
fn catch_up(shared: &Shared, copy: &mut Books) -> Result<(), Skip> {
    let state = shared.health().state();
    if !matches!(state, HealthState::Live | HealthState::CatchingUp | HealthState::Stale) {
        return Err(Skip::NotLive(state));
    }
    let blocks = shared.blocks_after(copy.height(), u64::MAX);
    if let Some(first) = blocks.first()
        && first.height != copy.height() + 1
    {
        return Err(Skip::TooOld { snapshot: copy.height(), oldest: first.height });
    }
    for b in blocks {
        // The copy's own inconsistencies are the node snapshot's business: the comparison reports them.
        if let Outcome::Gap { .. } = copy.apply(&b) {
            return Err(Skip::TooOld { snapshot: copy.height(), oldest: b.height });
        }
    }
    Ok(())
}

/// Compares one coin piece by piece, each piece at equal heights under a short read lock.
fn same_coin(shared: &Shared, copy: &mut Books, coin: &Coin) -> Result<bool, Skip> {
    for side in [Side::Bid, Side::Ask] {
        let mut cursor: Option<Fixed> = None;
        loop {
            let live = live_at(shared, copy)?;
            if !live.is_trusted(coin) {
                return Ok(false);
            }
            match compare_piece(live.coin(coin), copy.coin(coin), side, cursor) {
                Piece::Differs => return Ok(false),
                Piece::Same(None) => break,
                Piece::Same(next) => cursor = next,
            }
        }
    }
    same_triggers(shared, copy, coin)
}

/// Compares one coin's untriggered trigger orders (few: one piece) at equal heights.
fn same_triggers(shared: &Shared, copy: &mut Books, coin: &Coin) -> Result<bool, Skip> {
    let live = live_at(shared, copy)?;
    let none = crate::book::Triggers::default();
    let (a, b) = (live.coin(coin).map_or(&none, CoinBook::triggers), copy.coin(coin).map_or(&none, CoinBook::triggers));
    Ok(a.same_as(b))
}

/// The live books, complete and at the copy's height: the copy is caught up while they are ahead. Only complete
/// books have whole orders at one height (a half-applied block's statuses are near).
fn live_at<'a>(shared: &'a Shared, copy: &mut Books) -> Result<parking_lot::RwLockReadGuard<'a, Books>, Skip> {
    loop {
        let live = shared.complete_books(COMPLETE_WAIT).ok_or(Skip::Behind(copy.height() + 1))?;
        if live.height() == copy.height() {
            return Ok(live);
        }
        drop(live);
        catch_up(shared, copy)?;
    }
}

enum Piece {
    Differs,
    /// Equal so far; `Some(px)` to continue after that level.
    Same(Option<Fixed>),
}

/// Compares up to `PIECE` orders of `side` after `cursor`: the same levels, each with the same orders in the
/// same time priority (oid, user, price, size), and the same running size and count.
fn compare_piece(live: Option<&CoinBook>, copy: Option<&CoinBook>, side: Side, cursor: Option<Fixed>) -> Piece {
    let empty = CoinBook::new(Coin::from(""));
    let (a, b) = (live.unwrap_or(&empty), copy.unwrap_or(&empty));
    let (mut la, mut lb) = (a.levels_after(side, cursor), b.levels_after(side, cursor));
    let mut orders = 0;
    loop {
        let (x, y) = (la.next(), lb.next());
        let ((pa, va), (pb, vb)) = match (x, y) {
            (None, None) => return Piece::Same(None),
            (Some(x), Some(y)) => (x, y),
            _ => return Piece::Differs,
        };
        if pa != pb || va.n != vb.n || va.sz != vb.sz {
            return Piece::Differs;
        }
        let key = |o: &crate::book::RestingOrder| (o.oid, o.user, o.px, o.sz, o.side);
        if !a.level_orders(va).map(key).eq(b.level_orders(vb).map(key)) {
            return Piece::Differs;
        }
        orders += va.n as usize;
        if orders >= PIECE {
            return Piece::Same(Some(pa));
        }
    }
}

/// Replaces our book of `coin` with the copy's, at equal heights.
fn repair(shared: &Shared, copy: &mut Books, coin: &Coin) -> Result<(), Skip> {
    loop {
        catch_up(shared, copy)?;
        drop(shared.complete_books(COMPLETE_WAIT).ok_or(Skip::Behind(copy.height() + 1))?);
        let mut live = shared.books_mut();
        if live.height() == copy.height() && live.is_complete() {
            live.set_coin(coin, copy.take_coin(coin));
            drop(live);
            shared.repaired(coin.clone());
            shared.health().counters().repairs.inc();
            return Ok(());
        }
    }
}
