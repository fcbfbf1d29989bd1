use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::book::Books;
use crate::node::{Fixed, Side};
use crate::publish::hub::Hub;

fn hub() -> Arc<Hub> {
    Arc::new(Hub::new(Arc::new(Shared::new(Books::default(), Duration::from_secs(10))), 16, 1 << 20))
}

fn fill(coin: &str, tid: u64, time: i64, px: u64) -> Fill {
    Fill {
        coin: coin.into(),
        user: Default::default(),
        px: Fixed(px),
        sz: Fixed(1),
        side: Side::Bid,
        time,
        hash: Default::default(),
        oid: tid,
        crossed: true,
        tid,
    }
}

fn wants(list: &[(&str, Interval)]) -> FxHashMap<Coin, Vec<Interval>> {
    let mut m: FxHashMap<Coin, Vec<Interval>> = FxHashMap::default();
    for (c, i) in list {
        m.entry(Coin::from(*c)).or_default().push(*i);
    }
    m
}

fn data(f: &Frame) -> serde_json::Value {
    serde_json::from_slice::<serde_json::Value>(&f.json).unwrap()["data"].clone()
}

#[test]
fn trades_during_the_backfill_count_and_the_state_goes_with_the_last_subscriber() {
    let hub = hub();
    let mut k = Keeper::default();
    let key: CandleKey = ("BTC".into(), Interval::M1);
    k.sync(&*hub, &wants(&[("BTC", Interval::M1)]));
    let t0 = 1_778_000_040_000;
    // Not started yet: a step's trades are below the backfill's height and left to it.
    assert!(k.on_fills(&*hub, 11, &[fill("BTC", 1, t0, 5)], 1, Audit::default()).is_empty());
    k.start_backfills(&hub, 11);
    // Counted meanwhile, but no frame before the first one.
    assert!(
        k.on_fills(&*hub, 11, &[fill("BTC", 2, t0 + 1, 7), fill("BTC", 2, t0 + 1, 7)], 2, Audit::default()).is_empty()
    );
    let until = Instant::now() + Duration::from_secs(10);
    while !hub.candle_frames().has_inbox() {
        assert!(Instant::now() < until, "the backfill never finished");
        std::thread::sleep(Duration::from_millis(5));
    }
    k.finish_backfills(&*hub, 2, Audit::default());
    let first = hub.candle_frames().latest(&key).unwrap();
    // No store: the candle is what was counted live, and it says it is partial.
    assert_eq!((first.frame.seq, first.partial_from.is_some()), (2, true));
    assert_eq!(data(&first.frame)["n"], 1);
    let frames = k.on_fills(&*hub, 11, &[fill("BTC", 3, t0 + 2, 9), fill("ETH", 4, t0 + 2, 1)], 3, Audit::default());
    assert_eq!(frames.len(), 1);
    let d = data(&frames[&key]);
    assert_eq!((d["o"].as_str(), d["c"].as_str(), d["n"].as_u64()), (Some("0.00000007"), Some("0.00000009"), Some(2)));
    assert!(Arc::ptr_eq(&hub.candle_frames().latest(&key).unwrap().frame, &frames[&key]), "the newest frame is kept");
    k.sync(&*hub, &wants(&[]));
    assert!(k.is_empty() && hub.candle_frames().latest(&key).is_none(), "nothing is kept for a key nobody wants");
}

#[test]
fn the_backfill_queue_is_bounded_and_keys_dropped_meanwhile_are_not_read() {
    let hub = hub();
    let mut k = Keeper::default();
    // The test plays the backfill thread itself, after the churn, so what waits in the queue is exact.
    let (tx, rx) = mpsc::sync_channel(BACKFILL_QUEUE);
    k.worker = Some(tx);
    let coins: Vec<String> = (0..BACKFILL_QUEUE + 36).map(|n| format!("C{n}")).collect();
    let all: Vec<(&str, Interval)> = coins.iter().map(|c| (c.as_str(), Interval::M1)).collect();
    k.sync(&*hub, &wants(&all));
    k.start_backfills(&hub, 7);
    assert_eq!(hub.counters().candle_backfills_deferred.get(), 36, "a full queue puts requests off");
    // Everyone but the first coin's subscriber leaves before the thread gets to the queue.
    k.sync(&*hub, &wants(&all[..1]));
    k.worker = None;
    serve_backfills(&*hub, &rx);
    assert_eq!(hub.counters().candle_backfills_skipped.get(), BACKFILL_QUEUE as u64 - 1, "unwanted keys are not read");
    assert_eq!(hub.candle_frames().inbox.lock().len(), 1);
    k.finish_backfills(&*hub, 1, Audit::default());
    assert!(hub.candle_frames().backfilling.lock().is_empty(), "nothing is remembered once the key is live");

    // A put-off key starts at a later pass, once there is room.
    let (tx, rx) = mpsc::sync_channel(BACKFILL_QUEUE);
    k.worker = Some(tx);
    k.sync(&*hub, &wants(&all[all.len() - 1..]));
    k.start_backfills(&hub, 9);
    k.worker = None;
    serve_backfills(&*hub, &rx);
    let done = hub.candle_frames().inbox.lock();
    assert_eq!((done.len(), done[0].coin.to_string(), done[0].before), (1, coins.last().unwrap().clone(), 9));
}

#[test]
fn the_first_frame_is_the_stores_candle_and_the_trades_of_heights_above_it() {
    use crate::state::{Step, StepData};
    use crate::store::{Store, StoreMsg, Writer};
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let t0 = 1_778_000_040_000;
    let step = |h: u64, fills: Vec<Fill>| {
        let data = StepData::Fills { fills, users: Vec::new(), generation: None, liquidations: Vec::new() };
        StoreMsg::Step(Arc::new(Step { seq: h, height: h, block_time: t0 * 1_000_000, data }))
    };
    // The store holds blocks 11 and 12 (10 came first after its start, so it is not trusted): two trades.
    let mut w = Writer::new(store.clone(), None, 30);
    for m in [step(10, vec![]), step(11, vec![fill("BTC", 1, t0, 5)]), step(12, vec![fill("BTC", 2, t0 + 1, 8)])] {
        w.take(m);
    }
    w.take(StoreMsg::Complete(12));
    w.settle(&std::sync::atomic::AtomicBool::new(false)).unwrap();
    assert_eq!(store.height(), 12);
    let hub = hub();
    hub.set_store(store.clone(), crate::store::writer::channel(&store).0);
    let mut k = Keeper::default();
    let key: CandleKey = ("BTC".into(), Interval::M1);
    k.sync(&*hub, &wants(&[("BTC", Interval::M1)]));
    // The publisher had published up to 11 when the key came; the store is already past it.
    k.start_backfills(&hub, 12);
    assert!(k.on_fills(&*hub, 12, &[fill("BTC", 2, t0 + 1, 8)], 2, Audit::default()).is_empty());
    assert!(k.on_fills(&*hub, 13, &[fill("BTC", 3, t0 + 2, 6)], 3, Audit::default()).is_empty());
    let until = Instant::now() + Duration::from_secs(10);
    while !hub.candle_frames().has_inbox() {
        assert!(Instant::now() < until, "the backfill never finished");
        std::thread::sleep(Duration::from_millis(5));
    }
    k.finish_backfills(&*hub, 3, Audit::default());
    let first = hub.candle_frames().latest(&key).unwrap();
    let d = data(&first.frame);
    // Trades 1 and 2 from the store, 3 live: trade 2 counted once.
    assert_eq!(
        (d["n"].as_u64(), d["o"].as_str(), d["h"].as_str(), d["c"].as_str()),
        (Some(3), Some("0.00000005"), Some("0.00000008"), Some("0.00000006"))
    );
    assert_eq!(first.partial_from, Some(t0), "the store began inside the minute");
}
