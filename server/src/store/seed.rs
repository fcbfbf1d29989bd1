//! Optional seeding of the candles older than the store's first block from an info server (`store.seed_url`; in
//! production the official API), once per store.
//!
//! For each coin (`store.seed_coins`, or every coin of the books) and interval it asks the official request,
//! `{"type":"candleSnapshot","req":{"coin","interval","startTime":0,"endTime":first - 1}}`, one request at a time
//! with `store.seed_pause_ms` between them, and keeps the candles that close before the store's first block (the
//! bucket the store began inside stays the store's own, flagged partial). It never overwrites a candle the store
//! counted. When every request is done, `seeded_to_ms` records that candles before the first block are whole.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use redb::ReadableTable;

use super::Store;
use super::candle::{Candle, Interval};
use super::schema::{self, CANDLES, META, interval_byte};
use crate::node::{Fixed, FixedSum};
use crate::state::Shared;

/// One candle of an info server's answer.
fn candle_of(v: &serde_json::Value) -> Option<Candle> {
    let px = |k: &str| Fixed::parse(v.get(k)?.as_str()?).ok();
    let volume = Fixed::parse(v.get("v")?.as_str()?).ok()?;
    Some(Candle {
        t: v.get("t")?.as_i64()?,
        close_time: v.get("T")?.as_i64()?,
        o: px("o")?,
        c: px("c")?,
        h: px("h")?,
        l: px("l")?,
        v: FixedSum::from(volume),
        n: v.get("n")?.as_u64()?,
    })
}

/// What to seed from where (`[store]` seed settings).
#[derive(Clone, Debug)]
pub struct Seed {
    pub url: String,
    /// Empty: every coin of the books.
    pub coins: Vec<String>,
    pub pause: Duration,
}

/// Seeds on a thread of its own once the store has its first block, unless this store was seeded already.
pub fn spawn(store: Arc<Store>, shared: Arc<Shared>, seed: Seed) {
    let run = move || {
        let first = loop {
            let cov = store.coverage();
            if cov.first_ms != i64::MAX && !shared.books().coin_names().is_empty() {
                break cov;
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        if first.seeded_to_ms > 0 {
            return;
        }
        let coins: Vec<String> = if seed.coins.is_empty() {
            shared.books().coin_names().iter().map(std::string::ToString::to_string).collect()
        } else {
            seed.coins.clone()
        };
        match seed_all(&store, &seed, &coins, first.first_ms) {
            Ok(n) => tracing::info!(candles = n, coins = coins.len(), "history store: seeded from {}", seed.url),
            Err(e) => tracing::warn!("history store: seeding from {} stopped: {e}", seed.url),
        }
    };
    if let Err(e) = std::thread::Builder::new().name("hlbook-seed".into()).spawn(run) {
        tracing::error!("cannot start the seeding thread: {e}");
    }
}

/// Asks for every (coin, interval) in turn; the number of candles kept.
fn seed_all(store: &Store, seed: &Seed, coins: &[String], first_ms: i64) -> Result<u64, String> {
    let client =
        reqwest::blocking::Client::builder().timeout(Duration::from_secs(30)).build().map_err(|e| e.to_string())?;
    let mut kept = 0;
    for coin in coins {
        for i in Interval::ALL {
            let body = serde_json::json!({"type": "candleSnapshot",
                "req": {"coin": coin, "interval": i.as_str(), "startTime": 0, "endTime": first_ms - 1}});
            let answer =
                client.post(&seed.url).json(&body).send().and_then(reqwest::blocking::Response::error_for_status);
            let list: Vec<serde_json::Value> = answer
                .and_then(reqwest::blocking::Response::json)
                .map_err(|e| format!("{coin} {}: {e}", i.as_str()))?;
            let candles: Vec<Candle> = list.iter().filter_map(candle_of).filter(|c| c.close_time < first_ms).collect();
            kept += keep(store, coin, i, &candles).map_err(|e| e.to_string())?;
            std::thread::sleep(seed.pause);
        }
    }
    let w = store.db.begin_write().map_err(|e| e.to_string())?;
    {
        let mut m = w.open_table(META).map_err(|e| e.to_string())?;
        m.insert("seeded_to_ms", first_ms as u64).map_err(|e| e.to_string())?;
    }
    w.commit().map_err(|e| e.to_string())?;
    Ok(kept)
}

/// Inserts the candles the store has no candle for.
fn keep(store: &Store, coin: &str, i: Interval, candles: &[Candle]) -> Result<u64, redb::Error> {
    let w = store.db.begin_write()?;
    let mut kept = 0;
    {
        let mut t = w.open_table(CANDLES)?;
        for c in candles {
            let key = (coin, interval_byte(i), c.t);
            if t.get(key)?.is_none() {
                t.insert(key, schema::encode_candle(c).as_slice())?;
                kept += 1;
            }
        }
    }
    w.commit()?;
    store.status.seeded_candles.fetch_add(kept, Relaxed);
    Ok(kept)
}
