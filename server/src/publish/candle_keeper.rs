//! Live candles of the (coin, interval)s someone subscribes to, kept by the publisher and updated from each
//! block's fills step, where trades are published.
//!
//! A key's state exists only while it is wanted, and is one candle (the current bucket): O(1) per key. A new key
//! starts with a backfill from the node's fills files (`candle_history`, on the `hlbook-candles` thread) of every
//! block below the first fills step it has not seen, and meanwhile counts the later steps' trades itself; the two
//! are joined when the backfill arrives, so its first frame is whole. After that one frame per block in which the
//! coin traded goes in the block's feed tick, and the newest frame of each key is kept (`CandleFrames`) for new
//! subscribers, with whether the files reached back to its bucket's start. With no key wanted, a fills step costs
//! one emptiness check.
//!
//! Backfills wait in a bounded queue (`BACKFILL_QUEUE` requests; a key that finds it full stays new and is tried
//! again at the next pass), and the thread skips any key nobody wants any more before reading a file, so clients
//! that subscribe and unsubscribe in a loop cannot grow the queue or make the server re-read the files for them.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc;

use parking_lot::Mutex;
use rustc_hash::{FxHashMap, FxHashSet};

use super::candle_history::{Backfill, latest};
use super::candles::{Candle, Interval, Trade, block_trades, candle_frame, push};
use super::frame::{Audit, Frame};
use super::hub::Hub;
use crate::node::{Coin, Fill};

/// Backfill requests (one per coin and pass) waiting for the backfill thread at most.
const BACKFILL_QUEUE: usize = 64;

/// One candle subscription key.
pub type CandleKey = (Coin, Interval);

/// A key's newest frame: the feed tick it belongs to is `frame.seq`.
#[derive(Clone, Debug)]
pub struct Latest {
    pub frame: Arc<Frame>,
    /// The fills files reached back to the start of its bucket (or the bucket began after they do).
    pub complete: bool,
    /// Where the files read for its key begin (ms).
    pub covered_from_ms: i64,
}

/// What the publisher hands connections, and what the backfill thread hands the publisher.
#[derive(Debug, Default)]
pub struct CandleFrames {
    latest: Mutex<FxHashMap<CandleKey, Latest>>,
    inbox: Mutex<Vec<Done>>,
    /// The keys whose backfill (below the height given) is still wanted: the thread reads only for these.
    backfilling: Mutex<FxHashSet<(CandleKey, u64)>>,
}

impl CandleFrames {
    /// The key's newest frame, if it has had one.
    pub fn latest(&self, key: &CandleKey) -> Option<Latest> {
        self.latest.lock().get(key).cloned()
    }

    fn set(&self, key: CandleKey, l: Latest) {
        self.latest.lock().insert(key, l);
    }

    pub(super) fn has_inbox(&self) -> bool {
        !self.inbox.lock().is_empty()
    }
}

/// A finished backfill of one coin's keys.
#[derive(Debug)]
struct Done {
    coin: Coin,
    before: u64,
    results: Vec<(Interval, Backfill)>,
}

struct Request {
    coin: Coin,
    intervals: Vec<Interval>,
    before: u64,
    /// The trades of block `before - 1` already counted (`candle_history::latest`).
    partial: Arc<FxHashSet<u64>>,
}

#[derive(Debug)]
enum Phase {
    /// Wanted since this pass: the backfill starts at the end of the pass, below the next fills step.
    New,
    /// The backfill reads blocks below `before`; trades from `before` on are counted meanwhile.
    Backfilling {
        before: u64,
    },
    Live,
}

#[derive(Debug)]
struct State {
    interval: Interval,
    phase: Phase,
    candle: Option<Candle>,
    covered_from_ms: i64,
}

impl State {
    fn latest(&self, frame: Arc<Frame>, c: &Candle) -> Latest {
        Latest { frame, complete: self.covered_from_ms < c.t, covered_from_ms: self.covered_from_ms }
    }
}

/// The publisher's candle states, per coin.
#[derive(Debug, Default)]
pub struct Keeper {
    coins: FxHashMap<Coin, Vec<State>>,
    worker: Option<mpsc::SyncSender<Request>>,
}

impl Keeper {
    /// Keeps exactly the wanted keys: new ones start as `New`, unwanted ones (and their newest frames) go.
    pub fn sync(&mut self, hub: &Hub, wanted: &FxHashMap<Coin, Vec<Interval>>) {
        self.coins.retain(|c, states| {
            let Some(want) = wanted.get(c) else { return false };
            states.retain(|s| want.contains(&s.interval));
            !states.is_empty()
        });
        for (coin, intervals) in wanted {
            let states = self.coins.entry(coin.clone()).or_default();
            for &interval in intervals {
                if !states.iter().any(|s| s.interval == interval) {
                    let s = State { interval, phase: Phase::New, candle: None, covered_from_ms: i64::MAX };
                    states.push(s);
                }
            }
        }
        let coins = &self.coins;
        hub.candles.latest.lock().retain(|(c, i), _| coins.get(c).is_some_and(|s| s.iter().any(|s| s.interval == *i)));
        hub.candles.backfilling.lock().retain(|((c, i), b)| {
            let of_key =
                |s: &State| s.interval == *i && matches!(s.phase, Phase::Backfilling { before } if before == *b);
            coins.get(c).is_some_and(|s| s.iter().any(of_key))
        });
    }

    pub fn is_empty(&self) -> bool {
        self.coins.is_empty()
    }

    /// Starts the backfill of every `New` key, of the blocks below `before` (the first fills step not yet seen);
    /// a coin whose request finds the queue full stays `New` until a later pass.
    pub fn start_backfills(&mut self, hub: &Arc<Hub>, before: u64, partial: &Arc<FxHashSet<u64>>) {
        for (coin, states) in &mut self.coins {
            let intervals: Vec<Interval> =
                states.iter().filter(|s| matches!(s.phase, Phase::New)).map(|s| s.interval).collect();
            if intervals.is_empty() {
                continue;
            }
            let worker = self.worker.get_or_insert_with(|| spawn_worker(hub.clone()));
            // Held across the send, so the thread cannot look the keys up before they are marked wanted.
            let mut backfilling = hub.candles.backfilling.lock();
            let request =
                Request { coin: coin.clone(), intervals: intervals.clone(), before, partial: partial.clone() };
            if worker.try_send(request).is_err() {
                hub.counters.candle_backfills_deferred.fetch_add(1, Relaxed);
                continue;
            }
            backfilling.extend(intervals.into_iter().map(|i| ((coin.clone(), i), before)));
            for s in states.iter_mut().filter(|s| matches!(s.phase, Phase::New)) {
                s.phase = Phase::Backfilling { before };
            }
        }
    }

    /// Joins finished backfills with the trades counted meanwhile and publishes each key's first frame, current
    /// after feed tick `seq` (the fills steps up to the last one published).
    pub fn finish_backfills(&mut self, hub: &Hub, seq: u64, audit: Audit) {
        let done = std::mem::take(&mut *hub.candles.inbox.lock());
        for d in done {
            let Some(states) = self.coins.get_mut(&d.coin) else { continue };
            for (interval, b) in d.results {
                let Some(s) = states.iter_mut().find(|s| s.interval == interval) else { continue };
                // A key dropped and wanted again meanwhile waits for its own backfill.
                if !matches!(s.phase, Phase::Backfilling { before } if before == d.before) {
                    continue;
                }
                s.candle = match (b.candle, s.candle) {
                    (Some(old), Some(live)) if old.t == live.t => Some(old.merged(live)),
                    (old, live) => live.or(old),
                };
                (s.phase, s.covered_from_ms) = (Phase::Live, b.covered_from_ms);
                hub.candles.backfilling.lock().remove(&((d.coin.clone(), interval), d.before));
                if let Some(c) = s.candle {
                    let frame = Arc::new(Frame::new(seq, candle_frame(&d.coin, interval, &c), audit));
                    hub.candles.set((d.coin.clone(), interval), s.latest(frame, &c));
                }
            }
        }
    }

    /// Counts one fills step's trades; returns the frame of every live key whose coin traded, current after feed
    /// tick `seq` (also kept as the key's newest).
    pub fn on_fills(&mut self, hub: &Hub, fills: &[Fill], seq: u64, audit: Audit) -> FxHashMap<CandleKey, Arc<Frame>> {
        let mut out = FxHashMap::default();
        if self.coins.is_empty() {
            return out;
        }
        let mut by_coin: FxHashMap<&Coin, Vec<&Fill>> = FxHashMap::default();
        for f in fills.iter().filter(|f| self.coins.contains_key(&f.coin)) {
            by_coin.entry(&f.coin).or_default().push(f);
        }
        for (coin, list) in by_coin {
            let trades: Vec<Trade> = block_trades(list.into_iter());
            let Some(states) = self.coins.get_mut(coin) else { continue };
            for s in states.iter_mut().filter(|s| !matches!(s.phase, Phase::New)) {
                let mut counted = false;
                for tr in &trades {
                    counted |= push(&mut s.candle, s.interval, *tr);
                }
                let (Phase::Live, true, Some(c)) = (&s.phase, counted, s.candle) else { continue };
                let frame = Arc::new(Frame::new(seq, candle_frame(coin, s.interval, &c), audit));
                let key = (coin.clone(), s.interval);
                hub.candles.set(key.clone(), s.latest(frame.clone(), &c));
                out.insert(key, frame);
            }
        }
        out
    }
}

/// The thread that reads backfills from the node's files; it ends with the publisher.
fn spawn_worker(hub: Arc<Hub>) -> mpsc::SyncSender<Request> {
    let (tx, rx) = mpsc::sync_channel::<Request>(BACKFILL_QUEUE);
    let spawned = std::thread::Builder::new()
        .name("hlbook-candles".into())
        .spawn(move || hub.shared.health().supervised("candle backfill thread", || serve_backfills(&hub, &rx)));
    if let Err(e) = spawned {
        tracing::error!("cannot start the candle backfill thread: {e}");
    }
    tx
}

/// Reads one request (a coin's new keys) at a time, each only for the keys still wanted, until the sender goes.
fn serve_backfills(hub: &Hub, rx: &mpsc::Receiver<Request>) {
    for mut r in rx {
        assert!(!crate::state::test_panic("candles"), "HLBOOK_TEST_PANIC asked the candle thread to panic");
        let wanted = |i: &Interval| hub.candles.backfilling.lock().contains(&((r.coin.clone(), *i), r.before));
        r.intervals.retain(wanted);
        if r.intervals.is_empty() {
            hub.counters.candle_backfills_skipped.fetch_add(1, Relaxed);
            continue;
        }
        let results = match hub.fills_dir.get() {
            Some(dir) => {
                // One thread reads backfills one at a time; it still takes a turn, so with candleSnapshot and
                // userFills it never reads more than `server.history_reads` at once. Waiting its turn it does not
                // give up: a backfill is owed to its subscribers.
                let _turn = loop {
                    match hub.history.turns.take() {
                        Ok(t) => break t,
                        Err(_) => std::thread::sleep(std::time::Duration::from_millis(50)),
                    }
                };
                latest(dir, &r.coin, &r.intervals, r.before, Some(&r.partial))
            }
            None => r.intervals.iter().map(|_| Backfill { candle: None, covered_from_ms: i64::MAX }).collect(),
        };
        let results = r.intervals.into_iter().zip(results).collect();
        hub.candles.inbox.lock().push(Done { coin: r.coin, before: r.before, results });
        hub.shared.signal_change();
    }
}

#[cfg(test)]
#[path = "candle_keeper_tests.rs"]
mod tests;
