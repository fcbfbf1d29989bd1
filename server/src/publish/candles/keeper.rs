//! Live candles of the (coin, interval)s someone subscribes to, kept by the publisher and updated from each
//! block's fills step, where trades are published.
//!
//! A key's state exists only while it is wanted, and is one candle (the current bucket): O(1) per key. A new key
//! starts from the history store (on the `hlbook-candles` thread): the coin's newest candle there, read together
//! with the height the store holds every block up to. Meanwhile the key keeps each later step's trades with their
//! height; when the store's candle arrives, the trades of heights above the store's are added to it, so its first
//! frame counts every trade of its bucket exactly once, whatever the store and the publisher were doing. The
//! store is never behind the first step the key saw (the thread waits for it). After that one frame per block in
//! which the coin traded goes in the block's feed tick, and the newest frame of each key is kept (`CandleFrames`)
//! for new subscribers, with where the store's coverage of its bucket begins when it does not reach back to the
//! bucket's start. With no key wanted, a fills step costs one emptiness check.
//!
//! Backfills wait in a bounded queue (`BACKFILL_QUEUE` requests; a key that finds it full stays new and is tried
//! again at the next pass), and the thread skips any key nobody wants any more before reading a file, so clients
//! that subscribe and unsubscribe in a loop cannot grow the queue or make the server re-read the files for them.

use std::sync::Arc;
use std::sync::mpsc;

use parking_lot::Mutex;
use rustc_hash::{FxHashMap, FxHashSet};

use super::candle_frame;
use crate::node::{Coin, Fill};
use crate::publish::frame::{Audit, Frame};
use crate::state::Shared;
use crate::store::Coverage;
use crate::store::candle::{Candle, Interval, Trade, block_trades, push};

/// Backfill requests (one per coin and pass) waiting for the backfill thread at most.
const BACKFILL_QUEUE: usize = 64;

/// One candle subscription key.
pub type CandleKey = (Coin, Interval);

/// A key's newest frame: the feed tick it belongs to is `frame.seq`.
#[derive(Clone, Debug)]
pub struct Latest {
    pub frame: Arc<Frame>,
    /// `None`: its candle counts every trade of its bucket; else the time (ms) from which it counts them (the
    /// store began, or a hole in it ended, inside the bucket).
    pub partial_from: Option<i64>,
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

    pub(crate) fn has_inbox(&self) -> bool {
        !self.inbox.lock().is_empty()
    }
}

/// A key's candle from the store.
#[derive(Clone, Debug)]
pub struct Backfill {
    /// The coin's newest candle in the store, `None` if it has none.
    pub candle: Option<Candle>,
    /// The store held every block up to this height.
    pub height: u64,
    pub coverage: Coverage,
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
}

#[derive(Debug)]
enum Phase {
    /// Wanted since this pass: the backfill starts at the end of the pass, below the next fills step.
    New,
    /// The store's candle (of blocks below `before` at least) is being read; the trades of the steps since are
    /// kept with their heights.
    Backfilling {
        before: u64,
        trades: Vec<(u64, Trade)>,
    },
    Live,
}

/// One interval of one coin that the keeper keeps: its current candle, how far it has come (`Phase`) and what the
/// store covers of it.
#[derive(Debug)]
struct KeptCandle {
    interval: Interval,
    phase: Phase,
    candle: Option<Candle>,
    coverage: Coverage,
}

impl KeptCandle {
    fn latest(&self, frame: Arc<Frame>, c: &Candle) -> Latest {
        Latest { frame, partial_from: self.coverage.partial_from(c) }
    }
}

/// What the keeper needs of the hub that holds its frames. The hub names the keeper's types, so the keeper reaches
/// the hub only through this (no file circle between them).
pub trait CandleHub: Send + Sync + 'static {
    /// The newest frame of each key, and the backfills in flight.
    fn candle_frames(&self) -> &CandleFrames;
    fn shared(&self) -> &Shared;
    /// The history store, once opened.
    fn history_store(&self) -> Option<Arc<crate::store::Store>>;
    /// A new key's backfill found the queue full (it is tried again at the next pass).
    fn backfill_deferred(&self);
    /// A backfill request was dropped: nobody wants its keys any more.
    fn backfill_skipped(&self);
}

/// The publisher's candle states, per coin.
#[derive(Debug, Default)]
pub struct Keeper {
    coins: FxHashMap<Coin, Vec<KeptCandle>>,
    worker: Option<mpsc::SyncSender<Request>>,
}

impl Keeper {
    /// Keeps exactly the wanted keys: new ones start as `New`, unwanted ones (and their newest frames) go.
    pub fn sync(&mut self, hub: &impl CandleHub, wanted: &FxHashMap<Coin, Vec<Interval>>) {
        self.coins.retain(|c, states| {
            let Some(want) = wanted.get(c) else { return false };
            states.retain(|s| want.contains(&s.interval));
            !states.is_empty()
        });
        for (coin, intervals) in wanted {
            let states = self.coins.entry(coin.clone()).or_default();
            for &interval in intervals {
                if !states.iter().any(|s| s.interval == interval) {
                    let s = KeptCandle { interval, phase: Phase::New, candle: None, coverage: Coverage::default() };
                    states.push(s);
                }
            }
        }
        let coins = &self.coins;
        hub.candle_frames()
            .latest
            .lock()
            .retain(|(c, i), _| coins.get(c).is_some_and(|s| s.iter().any(|s| s.interval == *i)));
        hub.candle_frames().backfilling.lock().retain(|((c, i), b)| {
            let of_key = |s: &KeptCandle| {
                s.interval == *i && matches!(s.phase, Phase::Backfilling { before, .. } if before == *b)
            };
            coins.get(c).is_some_and(|s| s.iter().any(of_key))
        });
    }

    pub fn is_empty(&self) -> bool {
        self.coins.is_empty()
    }

    /// Starts the backfill of every `New` key: its candle from the store once it holds the blocks below `before`
    /// (the height after the last fills step published); a coin whose request finds the queue full stays `New`
    /// until a later pass.
    pub fn start_backfills<H: CandleHub>(&mut self, hub: &Arc<H>, before: u64) {
        for (coin, states) in &mut self.coins {
            let intervals: Vec<Interval> =
                states.iter().filter(|s| matches!(s.phase, Phase::New)).map(|s| s.interval).collect();
            if intervals.is_empty() {
                continue;
            }
            let worker = self.worker.get_or_insert_with(|| spawn_worker(hub.clone()));
            // Held across the send, so the thread cannot look the keys up before they are marked wanted.
            let mut backfilling = hub.candle_frames().backfilling.lock();
            let request = Request { coin: coin.clone(), intervals: intervals.clone(), before };
            if worker.try_send(request).is_err() {
                hub.backfill_deferred();
                continue;
            }
            backfilling.extend(intervals.into_iter().map(|i| ((coin.clone(), i), before)));
            for s in states.iter_mut().filter(|s| matches!(s.phase, Phase::New)) {
                s.phase = Phase::Backfilling { before, trades: Vec::new() };
            }
        }
    }

    /// Joins finished backfills with the trades counted meanwhile and publishes each key's first frame, current
    /// after feed tick `seq` (the fills steps up to the last one published).
    pub fn finish_backfills(&mut self, hub: &impl CandleHub, seq: u64, audit: Audit) {
        let done = std::mem::take(&mut *hub.candle_frames().inbox.lock());
        for d in done {
            let Some(states) = self.coins.get_mut(&d.coin) else { continue };
            for (interval, b) in d.results {
                let Some(s) = states.iter_mut().find(|s| s.interval == interval) else { continue };
                // A key dropped and wanted again meanwhile waits for its own backfill.
                let Phase::Backfilling { before, trades } = &mut s.phase else { continue };
                if *before != d.before {
                    continue;
                }
                // The store holds every block up to its height: only later steps' trades are added.
                let mut candle = b.candle;
                for (_, tr) in trades.iter().filter(|(h, _)| *h > b.height) {
                    push(&mut candle, interval, *tr);
                }
                (s.candle, s.phase, s.coverage) = (candle, Phase::Live, b.coverage);
                hub.candle_frames().backfilling.lock().remove(&((d.coin.clone(), interval), d.before));
                if let Some(c) = s.candle {
                    let frame = Arc::new(Frame::new(seq, candle_frame(&d.coin, interval, &c), audit));
                    hub.candle_frames().set((d.coin.clone(), interval), s.latest(frame, &c));
                }
            }
        }
    }

    /// Counts one fills step's trades (of block `height`); returns the frame of every live key whose coin traded,
    /// current after feed tick `seq` (also kept as the key's newest).
    pub fn on_fills(
        &mut self,
        hub: &impl CandleHub,
        height: u64,
        fills: &[Fill],
        seq: u64,
        audit: Audit,
    ) -> FxHashMap<CandleKey, Arc<Frame>> {
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
                if let Phase::Backfilling { trades: kept, .. } = &mut s.phase {
                    kept.extend(trades.iter().map(|t| (height, *t)));
                    continue;
                }
                let mut counted = false;
                for tr in &trades {
                    counted |= push(&mut s.candle, s.interval, *tr);
                }
                let (Phase::Live, true, Some(c)) = (&s.phase, counted, s.candle) else { continue };
                let frame = Arc::new(Frame::new(seq, candle_frame(coin, s.interval, &c), audit));
                let key = (coin.clone(), s.interval);
                hub.candle_frames().set(key.clone(), s.latest(frame.clone(), &c));
                out.insert(key, frame);
            }
        }
        out
    }
}

/// The thread that reads backfills from the node's files; it ends with the publisher.
fn spawn_worker<H: CandleHub>(hub: Arc<H>) -> mpsc::SyncSender<Request> {
    let (tx, rx) = mpsc::sync_channel::<Request>(BACKFILL_QUEUE);
    let spawned = std::thread::Builder::new().name("hlbook-candles".into()).spawn(move || {
        hub.shared().health().supervised("candle backfill thread", || serve_backfills(&*hub, &rx));
    });
    if let Err(e) = spawned {
        tracing::error!("cannot start the candle backfill thread: {e}");
    }
    tx
}

/// Reads one request (a coin's new keys) at a time, each only for the keys still wanted, until the sender goes.
fn serve_backfills(hub: &impl CandleHub, rx: &mpsc::Receiver<Request>) {
    for mut r in rx {
        #[cfg(feature = "test-hooks")]
        assert!(!crate::state::test_panic("candles"), "HLBOOK_TEST_PANIC asked the candle thread to panic");
        let wanted = |i: &Interval| hub.candle_frames().backfilling.lock().contains(&((r.coin.clone(), *i), r.before));
        r.intervals.retain(wanted);
        if r.intervals.is_empty() {
            hub.backfill_skipped();
            continue;
        }
        let results = match hub.history_store() {
            Some(store) => {
                // The store writes a block soon after the publisher published it; while it catches up (a first
                // start reads every file on disk) the key waits, as long as someone wants it.
                let mut gone = false;
                while !store.wait_for(r.before.saturating_sub(1), std::time::Duration::from_millis(500)) {
                    if !r.intervals.iter().any(wanted) {
                        gone = true;
                        break;
                    }
                }
                if gone {
                    hub.backfill_skipped();
                    continue;
                }
                match store.newest(&r.coin, &r.intervals) {
                    Ok(n) => n
                        .candles
                        .into_iter()
                        .map(|candle| Backfill { candle, height: n.height, coverage: n.coverage.clone() })
                        .collect(),
                    Err(e) => {
                        tracing::warn!("candle first frame without history: {e}");
                        no_history(&r.intervals)
                    }
                }
            }
            None => no_history(&r.intervals),
        };
        let results = r.intervals.into_iter().zip(results).collect();
        hub.candle_frames().inbox.lock().push(Done { coin: r.coin, before: r.before, results });
        hub.shared().signal_change();
    }
}

/// Without a store: the candle is what the key counts live (and says so).
fn no_history(intervals: &[Interval]) -> Vec<Backfill> {
    let coverage = Coverage { first_ms: i64::MAX - 1, ..Coverage::default() };
    intervals.iter().map(|_| Backfill { candle: None, height: 0, coverage: coverage.clone() }).collect()
}

#[cfg(test)]
#[path = "keeper_tests.rs"]
mod tests;
