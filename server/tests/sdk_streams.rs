//! The real client libraries on candles, trades and per-user streams, with only the URL changed: ccxt pro's
//! `watch_ohlcv` and `watch_trades`, the official Python SDK's `subscribe` of `userFills` and `candle`, and
//! @nktkas/hyperliquid's `userFills`, `orderUpdates` and `candle`, against `hlbook serve` fed by `hlsim` (whose
//! block clock runs 60 times the wall clock, so candles move on). What a library delivers must be what the
//! simulator wrote (fills verbatim, order statuses, trades by tid) or, for candles, a frame our own client got from
//! the same server. Installed and found as in sdk_clients.rs (`make clients`, `HLBOOK_CLIENTS`).

mod livefeed;
mod procs;
mod sdkrig;
mod wsclient;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use livefeed::LiveRig;
use sdkrig::{Run, busy_user, clients_dir, clients_dir_with, has_python_package, node_binary, run_beside};
use serde_json::{Value, json};

/// Results of each kind a library must hand over.
const WANT: usize = 3;
const LIMIT: Duration = Duration::from_secs(60);

fn feed() -> LiveRig {
    LiveRig::start_with(&[("--users", "5"), ("--block-ms", "50"), ("--time-scale", "60")], "")
}

fn candle_sub() -> Value {
    json!({"type": "candle", "coin": "BTC", "interval": "1m"})
}

/// Our client's candle frames' data.
fn our_candles(frames: &[Value]) -> Vec<&Value> {
    frames.iter().filter(|f| f["channel"] == "candle").map(|f| &f["data"]).collect()
}

fn harness(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients").join(name)
}

#[test]
fn ccxt_watches_ohlcv_and_trades() {
    let Some(dir) = clients_dir_with("ccxt", |d| has_python_package(d, "ccxt")) else { return };
    let feed = feed();
    let (printed, ours) = run_beside(&feed, &[candle_sub()], LIMIT, || {
        let py = dir.join("py/bin/python");
        Run::start(
            Command::new(py).arg(harness("ccxt_market_harness.py")).arg(&feed.addr).arg(WANT.to_string()).arg("60"),
        )
    });
    let ours = our_candles(&ours);
    let num = |v: &Value| v.as_str().unwrap().parse::<f64>().unwrap();
    let ohlcv: Vec<&Value> = printed.iter().filter(|p| p["kind"] == "ohlcv").collect();
    assert_eq!(ohlcv.len(), WANT, "{printed:?}");
    for r in ohlcv {
        let rows = r["rows"].as_array().unwrap();
        assert!(!rows.is_empty(), "{r}");
        // ccxt's row [t, o, h, l, c, v] in numbers: one of our frames of the same bucket.
        for row in rows {
            let same = |d: &&&Value| {
                let want = [num(&d["o"]), num(&d["h"]), num(&d["l"]), num(&d["c"]), num(&d["v"])];
                d["t"] == row[0] && (1..6).all(|k| row[k].as_f64() == Some(want[k - 1]))
            };
            assert!(ours.iter().any(|d| same(&d)), "ccxt row {row} is no candle frame of ours");
        }
    }
    let trades = btc_trades_when_done(&feed);
    let results: Vec<&Value> = printed.iter().filter(|p| p["kind"] == "trades").collect();
    assert_eq!(results.len(), WANT, "{printed:?}");
    for r in results {
        let items = r["items"].as_array().unwrap();
        assert!(!items.is_empty(), "a trades result with no trades: {r}");
        for t in items {
            let tid: u64 = t["id"].as_str().unwrap().parse().unwrap();
            let (px, sz) = trades.get(&tid).unwrap_or_else(|| panic!("trade {tid} is not in the files: {t}"));
            assert_eq!((t["price"].as_f64(), t["amount"].as_f64()), (px.parse().ok(), sz.parse().ok()), "{t}");
            assert_eq!(t["symbol"], "BTC/USDC:USDC");
        }
    }
}

/// BTC's trades in the files (read after the library is done, so every trade it was sent is on disk).
fn btc_trades_when_done(feed: &LiveRig) -> std::collections::HashMap<u64, (String, String)> {
    sdkrig::btc_trades(&feed.dir.path().join("data"))
}

/// Every fill of a userFills frame is one the simulator wrote for the user, verbatim, and `user` is lower-case.
fn check_user_fills(data: &Value, user: &str, files: &[Value]) {
    assert_eq!(data["user"], user, "{data}");
    for f in data["fills"].as_array().unwrap() {
        assert!(files.contains(f), "{user}: a fill not in the files: {f}");
    }
}

#[test]
fn python_sdk_subscribes_user_fills_and_candles() {
    let Some(dir) = clients_dir("the Python SDK", "py/bin/python") else { return };
    let feed = feed();
    let data = feed.dir.path().join("data");
    let user = busy_user(&data);
    let (printed, ours) = run_beside(&feed, &[candle_sub()], LIMIT, || {
        let mut cmd = Command::new(dir.join("py/bin/python"));
        cmd.arg(harness("python_streams_harness.py")).arg(&feed.addr).arg(&user).arg(WANT.to_string()).arg("60");
        Run::start(&mut cmd)
    });
    let files = sdkrig::user_fills(&data, &user);
    let fills: Vec<&Value> = printed.iter().filter(|m| m["channel"] == "userFills").collect();
    assert!(fills.len() >= WANT, "{printed:?}");
    assert_eq!(fills[0]["data"]["isSnapshot"], true, "{}", fills[0]);
    for m in &fills {
        check_user_fills(&m["data"], &user, &files);
    }
    assert!(fills.iter().any(|m| !m["data"]["fills"].as_array().unwrap().is_empty()), "no fill at all");
    let ours = our_candles(&ours);
    let candles: Vec<&Value> = printed.iter().filter(|m| m["channel"] == "candle").collect();
    assert!(candles.len() >= WANT, "{printed:?}");
    for m in candles {
        assert!(ours.contains(&&m["data"]), "the SDK's candle is no frame of ours: {m}");
    }
}

#[test]
fn nktkas_subscribes_user_fills_order_updates_and_candles() {
    let Some(dir) = clients_dir("@nktkas/hyperliquid", "node/node_modules/@nktkas/hyperliquid") else { return };
    let feed = feed();
    let data = feed.dir.path().join("data");
    let user = busy_user(&data);
    // The program sits in the test's own folder; the installed packages are reached through a link to them.
    std::os::unix::fs::symlink(dir.join("node/node_modules"), feed.dir.path().join("node_modules")).unwrap();
    let script = feed.dir.path().join("streams.mjs");
    let program = format!(
        r#"import {{ SubscriptionClient, WebSocketTransport }} from "@nktkas/hyperliquid";
const client = new SubscriptionClient({{ transport: new WebSocketTransport({{ url: "ws://{addr}/ws" }}) }});
const n = {{ userFills: 0, orderUpdates: 0, candle: 0 }};
const out = (kind, data) => {{
  process.stdout.write(JSON.stringify({{ kind, data }}) + "\n");
  n[kind]++;
  if (Object.values(n).every((x) => x >= {WANT})) process.exit(0);
}};
setTimeout(() => process.exit(3), {limit});
await client.userFills({{ user: "{user}" }}, (d) => out("userFills", d));
await client.orderUpdates({{ user: "{user}" }}, (d) => out("orderUpdates", d));
await client.candle({{ coin: "BTC", interval: "1m" }}, (d) => out("candle", d));
"#,
        addr = feed.addr,
        limit = LIMIT.as_millis()
    );
    std::fs::write(&script, program).unwrap();
    let node = node_binary(&dir);
    let (printed, ours) = run_beside(&feed, &[candle_sub()], LIMIT, || Run::start(Command::new(&node).arg(&script)));
    let of = |kind: &str| -> Vec<&Value> { printed.iter().filter(|p| p["kind"] == kind).map(|p| &p["data"]).collect() };
    let files = sdkrig::user_fills(&data, &user);
    for d in of("userFills") {
        check_user_fills(d, &user, &files);
    }
    let statuses = sdkrig::user_statuses(&data, &user);
    for d in of("orderUpdates") {
        for o in d.as_array().unwrap() {
            let key = (o["order"]["oid"].as_u64().unwrap(), o["status"].as_str().unwrap().to_string());
            assert!(statuses.contains(&key), "{user}: an order status not in the files: {o}");
        }
    }
    let ours = our_candles(&ours);
    for d in of("candle") {
        assert!(ours.contains(&d), "nktkas's candle is no frame of ours: {d}");
    }
    for kind in ["userFills", "orderUpdates", "candle"] {
        assert!(of(kind).len() >= WANT, "{kind}: {printed:?}");
    }
}
