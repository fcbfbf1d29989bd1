//! The info answers about live markets that clients ask for at start-up beside `meta` (ccxt's `load_markets`):
//! `metaAndAssetCtxs`, `spotMetaAndAssetCtxs` and `perpDexs`, in the exchange's shapes.
//!
//! Asset contexts are read from the sim's current books. What the sim does not model gets a fixed stand-in: the
//! coin's starting mid is its oracle and previous-day price, open interest is the size resting in its book (there
//! are no positions), day volumes are zero, and funding is the exchange's base rate (its value at zero premium).
//! Prices are integer ticks and sizes integer lots, written as the node's decimal strings.

use serde_json::{Value, json};

use super::SimShared;
use super::coins::{self, CoinSpec, Kind};
use super::fmt::{decimal_string, signed_decimal};
use crate::node::Side;

/// Hourly funding at zero premium: the 0.01% per 8 hours interest rate.
pub const BASE_FUNDING: &str = "0.0000125";
/// Every spot token's supply (whole tokens).
const SUPPLY: &str = "1000000000.0";
/// Premium decimals, as the exchange writes them.
const PREMIUM_DEC: u32 = 8;

/// What the contexts need of one coin's book: best prices in ticks and the size resting on both sides in lots.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Top {
    pub bid: Option<u64>,
    pub ask: Option<u64>,
    pub resting: u64,
}

/// Every coin's `Top`, in `SimShared::coins` order, read under the producer's lock (a sum over the coin's orders).
pub fn tops(shared: &SimShared) -> Vec<Top> {
    let st = shared.state.lock();
    st.market
        .books
        .iter()
        .map(|b| Top {
            bid: b.best(Side::Bid),
            ask: b.best(Side::Ask),
            resting: b.orders(Side::Bid).chain(b.orders(Side::Ask)).map(|o| o.sz).sum(),
        })
        .collect()
}

/// Prices derived from a top and the coin's oracle, all in ticks except `mid2`.
struct Prices {
    oracle: u64,
    /// The oracle clamped into the spread: the median of best bid, best ask and oracle, as the exchange's mark is
    /// a median with the book's prices.
    mark: u64,
    /// Twice the mid (bid + ask), so a half tick stays an integer; None unless both sides rest.
    mid2: Option<u64>,
    /// (bid, ask) when both sides rest.
    spread: Option<(u64, u64)>,
}

fn prices(c: &CoinSpec, t: &Top) -> Prices {
    let spread = t.bid.zip(t.ask);
    Prices { oracle: c.mid, mark: mark(c, t.bid, t.ask), mid2: spread.map(|(b, a)| b + a), spread }
}

/// The coin's mark price in ticks from its best prices; the account answers value positions at it, so they agree
/// with the contexts' `markPx`.
pub fn mark(c: &CoinSpec, bid: Option<u64>, ask: Option<u64>) -> u64 {
    bid.zip(ask).map_or(c.mid, |(b, a)| c.mid.clamp(b.min(a), a.max(b)))
}

/// The coin's mid as `allMids` writes it (None unless both sides rest).
pub fn mid_px(c: &CoinSpec, bid: Option<u64>, ask: Option<u64>) -> Option<String> {
    bid.zip(ask).map(|(b, a)| decimal_string((b + a) * 5, c.px_dec + 1))
}

fn px(c: &CoinSpec, ticks: u64) -> Value {
    Value::String(decimal_string(ticks, c.px_dec))
}

/// A mid price: `mid2 / 2` ticks, one decimal finer than a tick so half a tick is exact.
fn mid(c: &CoinSpec, mid2: Option<u64>) -> Value {
    mid2.map_or(Value::Null, |m| Value::String(decimal_string(m * 5, c.px_dec + 1)))
}

/// The exchange's premium from impact prices (here the best prices): how far the book sits outside the oracle,
/// as a fraction of it, truncated to 8 decimals.
fn premium(p: &Prices) -> Value {
    let Some((bid, ask)) = p.spread else { return Value::Null };
    let above = i128::from(bid.saturating_sub(p.oracle));
    let below = i128::from(p.oracle.saturating_sub(ask));
    let units = (above - below) * 10i128.pow(PREMIUM_DEC) / i128::from(p.oracle.max(1));
    let mut out = Vec::new();
    signed_decimal(&mut out, i64::try_from(units).unwrap_or(0), PREMIUM_DEC);
    Value::String(String::from_utf8(out).unwrap_or_default())
}

/// One perp's asset context.
pub fn perp_ctx(c: &CoinSpec, t: &Top) -> Value {
    let p = prices(c, t);
    json!({
        "funding": BASE_FUNDING,
        "openInterest": decimal_string(t.resting, c.sz_dec),
        "prevDayPx": px(c, p.oracle),
        "dayNtlVlm": "0.0",
        "premium": premium(&p),
        "oraclePx": px(c, p.oracle),
        "markPx": px(c, p.mark),
        "midPx": mid(c, p.mid2),
        "impactPxs": p.spread.map_or(Value::Null, |(b, a)| json!([px(c, b), px(c, a)])),
        "dayBaseVlm": "0.0",
    })
}

/// One spot pair's asset context.
pub fn spot_ctx(c: &CoinSpec, t: &Top) -> Value {
    let p = prices(c, t);
    json!({
        "prevDayPx": px(c, p.oracle),
        "dayNtlVlm": "0.0",
        "markPx": px(c, p.mark),
        "midPx": mid(c, p.mid2),
        "circulatingSupply": SUPPLY,
        "coin": c.name,
        "totalSupply": SUPPLY,
        "dayBaseVlm": "0.0",
    })
}

/// `{"type":"metaAndAssetCtxs"}` (optionally with `dex`): `[meta, contexts in meta's universe order]`.
pub fn meta_and_asset_ctxs(coins: &[CoinSpec], tops: &[Top], dex: Option<&str>) -> Value {
    let ctxs: Vec<Value> =
        coins.iter().zip(tops).filter(|(c, _)| coins::on_perp_dex(c, dex)).map(|(c, t)| perp_ctx(c, t)).collect();
    json!([coins::meta(coins, dex), ctxs])
}

/// `{"type":"spotMetaAndAssetCtxs"}`: `[spotMeta, contexts in its universe order]`.
pub fn spot_meta_and_asset_ctxs(coins: &[CoinSpec], tops: &[Top]) -> Value {
    let ctxs: Vec<Value> = coins
        .iter()
        .zip(tops)
        .filter(|(c, _)| matches!(c.kind, Kind::Spot { .. }))
        .map(|(c, t)| spot_ctx(c, t))
        .collect();
    json!([coins::spot_meta(coins), ctxs])
}

/// A fixed address per dex and role, so answers are the same on every run.
fn address(dex: &str, role: u8) -> String {
    // FNV-1a over the name and role, widened to 20 bytes.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in dex.bytes().chain([role]) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("0x{h:016x}{:016x}{:08x}", h.rotate_left(21) ^ 0x5bd1_e995, h >> 32)
}

/// `{"type":"perpDexs"}`: null for the main dex, then each builder dex the sim's coins use, in order of first use.
pub fn perp_dexs(coins: &[CoinSpec]) -> Value {
    let mut dexes: Vec<&str> = Vec::new();
    for c in coins {
        if let Kind::Builder(d) = c.kind
            && !dexes.contains(&d)
        {
            dexes.push(d);
        }
    }
    let mut out = vec![Value::Null];
    for d in dexes {
        let listed: Vec<&str> = coins.iter().filter(|c| c.kind == Kind::Builder(d)).map(|c| c.name).collect();
        out.push(json!({
            "name": d,
            "fullName": format!("{} (simulated)", d.to_uppercase()),
            "deployer": address(d, 0),
            "oracleUpdater": address(d, 1),
            "feeRecipient": address(d, 2),
            "assetToStreamingOiCap": listed.iter().map(|n| json!([n, "100000000.0"])).collect::<Vec<_>>(),
            "subDeployers": [],
            "deployerFeeScale": "1.0",
            "lastDeployerFeeScaleChangeTime": "1970-01-01T00:00:00",
            "assetToFundingMultiplier": listed.iter().map(|n| json!([n, "1.0"])).collect::<Vec<_>>(),
        }));
    }
    Value::Array(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn coin(name: &str) -> CoinSpec {
        coins::universe(coins::named_coins()).into_iter().find(|c| c.name == name).unwrap()
    }

    #[test]
    fn perp_context_from_the_book() {
        // BTC: whole-dollar ticks, 5 size decimals, oracle 81308.
        let btc = coin("BTC");
        let ctx = perp_ctx(&btc, &Top { bid: Some(81_300), ask: Some(81_303), resting: 123_456 });
        assert_eq!(ctx["midPx"], "81301.5");
        assert_eq!(ctx["markPx"], "81303.0", "the oracle clamped into the spread");
        assert_eq!(ctx["oraclePx"], "81308.0");
        assert_eq!(ctx["prevDayPx"], "81308.0");
        assert_eq!(ctx["impactPxs"], json!(["81300.0", "81303.0"]));
        // (0 - (81308 - 81303)) / 81308 = -0.0000614946…, truncated.
        assert_eq!(ctx["premium"], "-0.00006149");
        assert_eq!(ctx["openInterest"], "1.23456");
        assert_eq!(ctx["funding"], BASE_FUNDING);
        let above = perp_ctx(&btc, &Top { bid: Some(81_310), ask: Some(81_312), resting: 0 });
        assert_eq!((above["markPx"].as_str(), above["premium"].as_str()), (Some("81310.0"), Some("0.00002459")));
        let inside = perp_ctx(&btc, &Top { bid: Some(81_307), ask: Some(81_309), resting: 0 });
        assert_eq!((inside["markPx"].as_str(), inside["premium"].as_str()), (Some("81308.0"), Some("0.0")));
    }

    #[test]
    fn one_sided_book_has_no_mid_or_impact() {
        let eth = coin("ETH");
        let ctx = perp_ctx(&eth, &Top { bid: Some(30_100), ask: None, resting: 5 });
        assert_eq!((&ctx["midPx"], &ctx["impactPxs"], &ctx["premium"]), (&Value::Null, &Value::Null, &Value::Null));
        assert_eq!(ctx["markPx"], "3012.5");
        assert_eq!(ctx["openInterest"], "0.0005");
    }

    #[test]
    fn contexts_follow_each_universe() {
        let all = coins::universe(coins::named_coins());
        let tops: Vec<Top> =
            all.iter().map(|c| Top { bid: Some(c.mid - 1), ask: Some(c.mid + 1), resting: 1 }).collect();
        for dex in [None, Some(""), Some("xyz")] {
            let v = meta_and_asset_ctxs(&all, &tops, dex);
            let universe = v[0]["universe"].as_array().unwrap();
            assert_eq!(universe.len(), v[1].as_array().unwrap().len(), "{dex:?}");
            for (u, ctx) in universe.iter().zip(v[1].as_array().unwrap()) {
                let c = coin(u["name"].as_str().unwrap());
                assert_eq!(ctx["oraclePx"], px(&c, c.mid), "{}", c.name);
            }
            assert_eq!(v[0]["collateralToken"], 0);
        }
        assert_eq!(meta_and_asset_ctxs(&all, &tops, Some("xyz"))[0]["universe"][1]["name"], "xyz:SILVER");
        let spot = spot_meta_and_asset_ctxs(&all, &tops);
        let names: Vec<&str> =
            spot[0]["universe"].as_array().unwrap().iter().map(|u| u["name"].as_str().unwrap()).collect();
        let coins: Vec<&str> = spot[1].as_array().unwrap().iter().map(|c| c["coin"].as_str().unwrap()).collect();
        assert_eq!((names.as_slice(), coins.as_slice()), (["@107", "@1"].as_slice(), ["@107", "@1"].as_slice()));
        assert_eq!(spot[1][1]["midPx"], "0.12345");
    }

    #[test]
    fn perp_dexs_lists_the_builder_dex_after_the_main_one() {
        let v = perp_dexs(&coins::universe(coins::named_coins()));
        let list = v.as_array().unwrap();
        assert_eq!(list.len(), 2);
        assert!(list[0].is_null());
        assert_eq!(list[1]["name"], "xyz");
        assert_eq!(
            list[1]["assetToStreamingOiCap"],
            json!([["xyz:GOLD", "100000000.0"], ["xyz:SILVER", "100000000.0"]])
        );
        for role in ["deployer", "oracleUpdater", "feeRecipient"] {
            let a = list[1][role].as_str().unwrap();
            assert!(a.len() == 42 && a.starts_with("0x") && a[2..].bytes().all(|b| b.is_ascii_hexdigit()), "{a}");
        }
        assert_ne!(list[1]["deployer"], list[1]["oracleUpdater"]);
        assert_eq!(perp_dexs(&coins::universe(3)).as_array().unwrap().len(), 2);
    }
}
