//! The exchange stand-in (`--exchange-listen`): the public API's info answers over the same simulated market, for
//! tests of what hlbook asks the official API (`server.upstream_info_url`, `store.seed_url`). It answers every node
//! type but `fileSnapshot`, plus what only the exchange has: asset contexts, books, mids, and history from before
//! the simulator began (synthetic candles, funding at the base rate).

use serde_json::{Value, json};

use super::{Reply, node};
use crate::node::Side;
use crate::sim::SimShared;
use crate::sim::coins::{self, CoinSpec, Kind};
use crate::sim::ctxs;
use crate::sim::fmt::decimal_string;

/// The types only the exchange server answers (beside the node's).
pub const EXTRA_TYPES: &[&str] =
    &["metaAndAssetCtxs", "spotMetaAndAssetCtxs", "candleSnapshot", "fundingHistory", "l2Book", "allMids"];

/// Candles a `candleSnapshot` answers at most: the newest of the range.
const PAST_CANDLES: i64 = 100;
/// Levels per side of an `l2Book` answer, as the exchange's.
const L2_DEPTH: usize = 20;
/// Funding entries a `fundingHistory` answers at most, as the exchange's page.
const FUNDING_PAGE: i64 = 500;
const HOUR_MS: i64 = 3_600_000;

/// The answer to `kind` (node type or one of `EXTRA_TYPES`).
pub fn answer(shared: &SimShared, v: &Value, kind: &str) -> Reply {
    let dex = v.get("dex").and_then(Value::as_str);
    match kind {
        // gitbook, Perpetuals, "Retrieve perpetuals asset contexts (includes mark price, current funding, open
        // interest, etc.)"; Spot, "Retrieve spot asset contexts".
        "metaAndAssetCtxs" => Ok(ctxs::meta_and_asset_ctxs(&shared.coins, &ctxs::tops(shared), dex)),
        "spotMetaAndAssetCtxs" => Ok(ctxs::spot_meta_and_asset_ctxs(&shared.coins, &ctxs::tops(shared))),
        "candleSnapshot" => candle_snapshot(v),
        "fundingHistory" => funding_history(shared, v),
        "l2Book" => l2_book(shared, v),
        "allMids" => Ok(all_mids(shared, dex)),
        "webData2" => {
            // The public API's webData2 carries the asset contexts a node leaves out.
            let mut w = node::answer(shared, v, kind)?;
            let tops = ctxs::tops(shared);
            let perp = ctxs::meta_and_asset_ctxs(&shared.coins, &tops, None);
            let spot = ctxs::spot_meta_and_asset_ctxs(&shared.coins, &tops);
            w["assetCtxs"] = perp[1].clone();
            w["spotAssetCtxs"] = spot[1].clone();
            Ok(w)
        }
        _ => node::answer(shared, v, kind),
    }
}

fn coin<'a>(shared: &'a SimShared, v: &Value) -> Result<(usize, &'a CoinSpec), String> {
    let name = v.get("coin").and_then(Value::as_str).ok_or("missing field `coin`")?;
    shared.coins.iter().enumerate().find(|(_, c)| c.name == name).ok_or_else(|| format!("coin: unknown {name:?}"))
}

/// `l2Book` (gitbook "L2 book snapshot"): the top 20 levels a side at full precision (`nSigFigs` is not
/// aggregated here), bids best first then asks.
fn l2_book(shared: &SimShared, v: &Value) -> Reply {
    let (i, c) = coin(shared, v)?;
    let st = shared.state.lock();
    let book = &st.market.books[i];
    let side = |s: Side| {
        let mut levels: Vec<(u64, u64, u32)> = Vec::new();
        for o in book.orders(s) {
            if let Some(l) = levels.last_mut().filter(|l| l.0 == o.px) {
                l.1 += o.sz;
                l.2 += 1;
            } else if levels.len() == L2_DEPTH {
                break;
            } else {
                levels.push((o.px, o.sz, 1));
            }
        }
        let out: Vec<Value> = levels
            .into_iter()
            .map(|(px, sz, n)| json!({"px": decimal_string(px, c.px_dec), "sz": decimal_string(sz, c.sz_dec), "n": n}))
            .collect();
        out
    };
    Ok(json!({"coin": c.name, "time": st.market.time_ms(), "levels": [side(Side::Bid), side(Side::Ask)]}))
}

/// `allMids` (gitbook "Retrieve mids for all coins"): every coin of the dex with both sides resting (the main dex:
/// its perps and the spot pairs, by their `@index` names).
fn all_mids(shared: &SimShared, dex: Option<&str>) -> Value {
    let st = shared.state.lock();
    let mut mids = serde_json::Map::new();
    for (c, book) in shared.coins.iter().zip(&st.market.books) {
        let listed =
            coins::on_perp_dex(c, dex) || (matches!(c.kind, Kind::Spot { .. }) && dex.unwrap_or("").is_empty());
        if let Some(mid) = ctxs::mid_px(c, book.best(Side::Bid), book.best(Side::Ask)).filter(|_| listed) {
            mids.insert(c.name.into(), Value::String(mid));
        }
    }
    Value::Object(mids)
}

/// `fundingHistory` (gitbook, Perpetuals, "Retrieve historical funding rates"): one entry an hour from
/// `startTime` to `endTime` (or now), at the base rate and no premium, the oldest 500.
fn funding_history(shared: &SimShared, v: &Value) -> Reply {
    let (_, c) = coin(shared, v)?;
    if matches!(c.kind, Kind::Spot { .. }) {
        return Ok(json!([]));
    }
    let start = v.get("startTime").and_then(Value::as_i64).ok_or("missing field `startTime`")?;
    let now = shared.state.lock().market.time_ms() as i64;
    let end = v.get("endTime").and_then(Value::as_i64).unwrap_or(now).min(now);
    let first = (start.max(0) + HOUR_MS - 1) / HOUR_MS * HOUR_MS;
    let hours = (0..FUNDING_PAGE).map(|k| first + k * HOUR_MS).take_while(|t| *t <= end);
    Ok(Value::Array(
        hours
            .map(|t| json!({"coin": c.name, "fundingRate": ctxs::BASE_FUNDING, "premium": "0.0", "time": t}))
            .collect(),
    ))
}

/// `candleSnapshot` (gitbook "Candle snapshot"): the newest `PAST_CANDLES` buckets of the range that closed by
/// `endTime`, each one trade at 100.0 (1M: none): what the official API would answer for a market older than the
/// simulator, for tests of hlbook's history seeding.
fn candle_snapshot(v: &Value) -> Reply {
    let req = v.get("req");
    let field = |k: &str| req.and_then(|r| r.get(k));
    let coin = field("coin").and_then(Value::as_str).ok_or("req: missing field `coin`")?;
    let interval = field("interval").and_then(Value::as_str).ok_or("req: missing field `interval`")?;
    let start = field("startTime").and_then(Value::as_i64).ok_or("req: missing field `startTime`")?;
    let end = field("endTime").and_then(Value::as_i64).unwrap_or(i64::MAX / 2);
    let minutes = match interval {
        "1m" => 1,
        "3m" => 3,
        "5m" => 5,
        "15m" => 15,
        "30m" => 30,
        "1h" => 60,
        "2h" => 120,
        "4h" => 240,
        "8h" => 480,
        "12h" => 720,
        "1d" => 1440,
        "3d" => 4320,
        "1w" => 10_080,
        _ => return Ok(json!([])),
    };
    let len = minutes * 60_000;
    let last = (end + 1).div_euclid(len) * len - len;
    let first = (start.div_euclid(len) * len).max(last - (PAST_CANDLES - 1) * len).max(0);
    let candles = (0..).map(|k| first + k * len).take_while(|t| *t <= last).map(|t| {
        json!({"t": t, "T": t + len - 1, "s": coin, "i": interval, "o": "100.0", "c": "100.0",
            "h": "100.0", "l": "100.0", "v": "1.0", "n": 1})
    });
    Ok(Value::Array(candles.collect()))
}
