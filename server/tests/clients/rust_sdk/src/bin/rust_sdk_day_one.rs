//! A day-one bot of hyperliquid_rust_sdk: `InfoClient` at `BaseUrl::Localhost` (the only address the SDK takes
//! besides the exchange's; server/tests/day_one.rs has hlbook listen there) calls every read method the SDK offers
//! once, for one user, one of that user's resting orders and BTC, and prints one JSON line per call, as
//! server/tests/clients/day_one_common.py describes: `{"call","types","ok"}` with the answer, `{"call","types",
//! "error","message"}` for one of the SDK's own `Error`s, or `"crash": true` when the SDK panicked (each call runs
//! in a task of its own, so a panic is caught and named). The SDK's response types only deserialize, so answers
//! the test compares (mids, fills, open orders, the user's state, the book) are turned back into the wire shape
//! here; the rest are printed as their Debug text.
//!
//!     rust_sdk_day_one USER OID SECONDS   exit 0 when every call was made, 3 if they took longer than SECONDS

use std::collections::HashMap;
use std::future::Future;
use std::process::exit;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hyperliquid_rust_sdk::{BaseUrl, Error, InfoClient};
use serde_json::{Value, json};

/// One call's limit: the SDK's HTTP client has none of its own.
const CALL_LIMIT: Duration = Duration::from_secs(10);

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [user, oid, seconds] = &args[..] else {
        eprintln!("usage: rust_sdk_day_one USER OID SECONDS");
        exit(64);
    };
    let oid: u64 = oid.parse().expect("OID");
    let seconds: u64 = seconds.parse().expect("SECONDS");
    match tokio::time::timeout(Duration::from_secs(seconds), sweep(user.to_lowercase(), oid)).await {
        Ok(()) => exit(0),
        Err(_) => {
            println!("{}", json!({"timeout": seconds}));
            exit(3)
        }
    }
}

/// Prints one call's line: its answer turned into JSON by the caller, or the SDK's error, or the panic.
async fn call<F>(name: &str, types: &[&str], work: F)
where
    F: Future<Output = Result<Value, Error>> + Send + 'static,
{
    let mut line = json!({"call": name, "types": types});
    match tokio::time::timeout(CALL_LIMIT, tokio::spawn(work)).await {
        Ok(Ok(Ok(v))) => line["ok"] = v,
        Ok(Ok(Err(e))) => {
            let debug = format!("{e:?}");
            let variant = debug.split(['(', '{', ' ']).next().unwrap_or_default().to_string();
            line["error"] = json!(variant);
            line["message"] = json!(e.to_string());
        }
        Ok(Err(join)) => {
            line["error"] = json!("panic");
            line["message"] = json!(join.to_string());
            line["crash"] = json!(true);
        }
        Err(_) => {
            line["error"] = json!("timeout");
            line["message"] = json!(format!("no answer within {CALL_LIMIT:?}"));
        }
    }
    println!("{line}");
}

fn debug(v: &impl std::fmt::Debug) -> Value {
    json!(format!("{v:?}"))
}

#[allow(clippy::too_many_lines)]
async fn sweep(user_hex: String, oid: u64) {
    let info = match InfoClient::new(None, Some(BaseUrl::Localhost)).await {
        Ok(i) => Arc::new(i),
        Err(e) => {
            println!("{}", json!({"call": "InfoClient::new", "error": "Error", "message": e.to_string()}));
            return;
        }
    };
    // The SDK takes addresses as ethers' H160, which it does not re-export: parsed through serde instead.
    let user = serde_json::from_value(json!(user_hex)).expect("USER is an address");
    let now = u64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis()).unwrap();
    let day = 86_400_000;

    macro_rules! read {
        ($name:expr, [$($t:expr),*], |$c:ident| $body:expr) => {{
            let $c = Arc::clone(&info);
            call($name, &[$($t),*], async move { $body }).await;
        }};
    }

    read!("user_state", ["clearinghouseState"], |c| c.user_state(user).await.map(|s| {
        let summary = |m: &hyperliquid_rust_sdk::MarginSummary| {
            json!({"accountValue": m.account_value, "totalMarginUsed": m.total_margin_used,
                   "totalNtlPos": m.total_ntl_pos, "totalRawUsd": m.total_raw_usd})
        };
        let positions: Vec<Value> = s
            .asset_positions
            .iter()
            .map(|p| json!({"type": p.type_string, "position": {"coin": p.position.coin, "szi": p.position.szi}}))
            .collect();
        json!({"assetPositions": positions, "marginSummary": summary(&s.margin_summary),
               "crossMarginSummary": summary(&s.cross_margin_summary), "withdrawable": s.withdrawable})
    }));
    read!("user_states", ["batchClearinghouseStates"], |c| c.user_states(vec![user]).await.map(|v| debug(&v)));
    read!("user_token_balances", ["spotClearinghouseState"], |c| c
        .user_token_balances(user)
        .await
        .map(|v| debug(&v)));
    read!("user_fees", ["userFees"], |c| c.user_fees(user).await.map(|v| debug(&v)));
    read!("open_orders", ["openOrders"], |c| c.open_orders(user).await.map(|v| {
        let orders = v.iter().map(|o| {
            json!({"coin": o.coin, "limitPx": o.limit_px, "oid": o.oid, "side": o.side, "sz": o.sz,
                   "timestamp": o.timestamp})
        });
        Value::Array(orders.collect())
    }));
    read!("meta", ["meta"], |c| c.meta().await.map(|v| debug(&v)));
    read!("spot_meta", ["spotMeta"], |c| c.spot_meta().await.map(|v| debug(&v)));
    read!("spot_meta_and_asset_contexts", ["spotMetaAndAssetCtxs"], |c| c
        .spot_meta_and_asset_contexts()
        .await
        .map(|v| debug(&v)));
    read!("all_mids", ["allMids"], |c| c.all_mids().await.map(|m: HashMap<String, String>| json!(m)));
    read!("user_fills", ["userFills"], |c| c.user_fills(user).await.map(|v| {
        let fills = v.iter().map(|f| {
            json!({"coin": f.coin, "px": f.px, "sz": f.sz, "side": f.side, "time": f.time, "oid": f.oid,
                   "startPosition": f.start_position, "dir": f.dir, "closedPnl": f.closed_pnl, "hash": f.hash,
                   "crossed": f.crossed, "fee": f.fee})
        });
        Value::Array(fills.collect())
    }));
    read!("funding_history", ["fundingHistory"], |c| c
        .funding_history("BTC".into(), now - day, None)
        .await
        .map(|v| debug(&v)));
    read!("user_funding_history", ["userFunding"], |c| c
        .user_funding_history(user, now - day, None)
        .await
        .map(|v| debug(&v)));
    read!("recent_trades", ["recentTrades"], |c| c.recent_trades("BTC".into()).await.map(|v| debug(&v)));
    read!("l2_snapshot", ["l2Book"], |c| c.l2_snapshot("BTC".into()).await.map(|b| {
        let side = |s: &Vec<hyperliquid_rust_sdk::Level>| {
            Value::Array(s.iter().map(|l| json!({"px": l.px, "sz": l.sz, "n": l.n})).collect())
        };
        json!({"coin": b.coin, "time": b.time, "levels": b.levels.iter().map(side).collect::<Vec<_>>()})
    }));
    read!("candles_snapshot", ["candleSnapshot"], |c| c
        .candles_snapshot("BTC".into(), "1m".into(), now - day, now + day)
        .await
        .map(|v| debug(&v)));
    read!("query_order_by_oid", ["orderStatus"], |c| c.query_order_by_oid(user, oid).await.map(|v| debug(&v)));
    read!("query_referral_state", ["referral"], |c| c.query_referral_state(user).await.map(|v| debug(&v)));
    read!("historical_orders", ["historicalOrders"], |c| c.historical_orders(user).await.map(|v| debug(&v)));
    println!("{}", json!({"version": "0.6.0"}));
    println!("{}", json!({"done": true, "uncovered": []}));
}
