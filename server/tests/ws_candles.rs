//! candle subscriptions and candleSnapshot against hlsim's own fills files, with the real binaries. hlsim runs its
//! block clock 60 times faster than the wall clock (`--time-scale`), so a 1m candle closes every second and a 5m
//! one every five. One `?audit=1` connection follows BTC 1m, 5m and 1M and the spot `@107` 1m; afterwards the test
//! computes every candle itself from the simulator's fills files (one trade per tid) and requires:
//! - every frame, the first one included, to be the candle of its bucket over the blocks up to the frame's height;
//! - a frame for every block in which the coin traded after the first one, and none for other blocks;
//! - every closed candle (its last frame) to be the whole bucket's;
//! - an `hlbookNotice` after a first frame exactly when the history store (backfilled from those files) begins
//!   inside its bucket (always so for 1M);
//! - `candleSnapshot` (HTTP and the socket's `post`) to answer every bucket the files hold, the first one counted
//!   from where they begin.

mod procs;
mod wsclient;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use hlbook::node::time::parse_node_time;
use procs::{start_serve, start_sim, wait_health};
use serde_json::{Value, json};
use wsclient::raw::{audit_height, channel};

const BLOCKS: u64 = 500;
const FIRST_HEIGHT: u64 = 1_000_000_000;
const MINUTE: i64 = 60_000;

/// One trade of the files: block height, time, price as written, size in 10^-8 units.
#[derive(Clone, Debug)]
struct Trade {
    height: u64,
    time: i64,
    px: String,
    sz: u128,
}

/// A decimal string in 10^-8 units (the test's own parser).
fn units(s: &str) -> u128 {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    assert!(frac.len() <= 8, "{s}");
    format!("{int}{frac:0<8}").parse().unwrap()
}

/// Every fills line, oldest first, and the block time (ms) of the first.
fn fills_lines(data: &Path) -> (Vec<Value>, i64) {
    let lines = procs::node_json_lines(&data.join("node_fills_by_block"));
    let first = parse_node_time(lines[0]["block_time"].as_str().unwrap()).unwrap() / 1_000_000;
    (lines, first)
}

/// A coin's trades, one per tid of each block, in file order.
fn trades_of(lines: &[Value], coin: &str) -> Vec<Trade> {
    let mut out = Vec::new();
    for l in lines {
        let mut tids = std::collections::HashSet::new();
        for ev in l["events"].as_array().unwrap() {
            let f = &ev[1];
            if f["coin"] == coin && tids.insert(f["tid"].as_u64().unwrap()) {
                out.push(Trade {
                    height: l["block_number"].as_u64().unwrap(),
                    time: f["time"].as_i64().unwrap(),
                    px: f["px"].as_str().unwrap().to_string(),
                    sz: units(f["sz"].as_str().unwrap()),
                });
            }
        }
    }
    out
}

fn len_of(interval: &str) -> i64 {
    match interval {
        "1m" => MINUTE,
        "5m" => 5 * MINUTE,
        _ => panic!("{interval}"),
    }
}

/// The candle of the bucket opening at `t` over `trades`, as the official object (v compared in units).
fn candle(coin: &str, interval: &str, t: i64, close: i64, trades: &[&Trade]) -> Value {
    let px = |tr: &&&Trade| units(&tr.px);
    let (hi, lo) = (trades.iter().max_by_key(px).unwrap(), trades.iter().min_by_key(px).unwrap());
    json!({"t": t, "T": close, "s": coin, "i": interval, "o": trades[0].px, "c": trades.last().unwrap().px,
        "h": hi.px, "l": lo.px, "v": trades.iter().map(|t| t.sz).sum::<u128>().to_string(), "n": trades.len()})
}

/// A received candle with `v` in units, to compare with `candle`.
fn normalized(data: &Value) -> Value {
    let mut d = data.clone();
    d["v"] = units(data["v"].as_str().unwrap()).to_string().into();
    d
}

/// Everything the connection received until `stop`.
async fn collect(addr: String, subs: Vec<Value>, mut stop: tokio::sync::watch::Receiver<bool>) -> Vec<Value> {
    let mut ws = wsclient::raw::connect(&addr, "audit=1", None).await;
    for s in subs {
        wsclient::raw::subscribe(&mut ws, s).await;
    }
    wsclient::raw::collect_until(&mut ws, &mut stop, "candles").await
}

/// The status and the answer: JSON, or a refusal's plain text as a string.
fn post_info(base: &str, body: &Value) -> (u16, Value) {
    let r = reqwest::blocking::Client::new().post(format!("{base}/info")).json(body).send().unwrap();
    let status = r.status().as_u16();
    let text = r.text().unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// The frames of one subscription and whether a notice names it.
fn frames_of<'a>(got: &'a [Value], coin: &str, interval: &str) -> (Vec<&'a Value>, bool) {
    let frames = got.iter().filter(|f| channel(f) == "candle" && f["data"]["s"] == coin && f["data"]["i"] == interval);
    let needle = format!(r#""coin":"{coin}","interval":"{interval}""#);
    let noticed = got.iter().any(|f| channel(f) == "hlbookNotice" && f["data"].as_str().unwrap().contains(&needle));
    (frames.collect(), noticed)
}

/// Every frame of a 1m/5m subscription against the files; returns how many closed candles were compared.
fn check_stream(
    coin: &str,
    interval: &str,
    frames: &[&Value],
    noticed: bool,
    trades: &[Trade],
    first_ms: i64,
) -> usize {
    let len = len_of(interval);
    let bucket = |ms: i64| ms - ms.rem_euclid(len);
    let first_h = audit_height(frames[0]).unwrap();
    let mut last_h = 0;
    for f in frames {
        let h = audit_height(f).unwrap_or_else(|| panic!("{coin} {interval}: no audit height: {f}"));
        assert!(h > last_h || (h == last_h && h == first_h), "{coin} {interval}: heights {last_h} then {h}");
        last_h = h;
        let t = f["data"]["t"].as_i64().unwrap();
        let upto: Vec<&Trade> = trades.iter().filter(|tr| tr.height <= h && bucket(tr.time) == t).collect();
        assert!(!upto.is_empty(), "{coin} {interval}: a candle without trades in the files at {h}: {f}");
        assert_eq!(normalized(&f["data"]), candle(coin, interval, t, t + len - 1, &upto), "{coin} {interval} at {h}");
    }
    // The first frame: noticed exactly when the files begin inside its bucket.
    let t0 = frames[0]["data"]["t"].as_i64().unwrap();
    assert_eq!(noticed, first_ms >= t0, "{coin} {interval}: notice for a bucket at {t0}, files from {first_ms}");
    // A frame for every later block with trades, and for no other.
    let traded: std::collections::BTreeSet<u64> =
        trades.iter().map(|t| t.height).filter(|h| *h > first_h && *h <= last_h).collect();
    let sent: std::collections::BTreeSet<u64> = frames[1..].iter().map(|f| audit_height(f).unwrap()).collect();
    assert_eq!(sent, traded, "{coin} {interval}: frames exactly for the blocks with trades");
    // Each closed candle's last frame is the whole bucket.
    let mut last_of: BTreeMap<i64, &Value> = BTreeMap::new();
    for f in frames {
        last_of.insert(f["data"]["t"].as_i64().unwrap(), &f["data"]);
    }
    let open = *last_of.keys().last().unwrap();
    let mut closed = 0;
    for (t, d) in last_of.iter().filter(|(t, _)| **t != open) {
        let all: Vec<&Trade> = trades.iter().filter(|tr| bucket(tr.time) == *t).collect();
        assert_eq!(normalized(d), candle(coin, interval, *t, t + len - 1, &all), "{coin} {interval}: closed at {t}");
        closed += 1;
    }
    eprintln!("{coin} {interval}: {} frames equal the files, {closed} closed candles", frames.len());
    closed
}

/// Every bucket of the files, ascending (the first counted from where they begin).
fn file_candles(coin: &str, interval: &str, trades: &[Trade]) -> Vec<Value> {
    let len = len_of(interval);
    let mut by: BTreeMap<i64, Vec<&Trade>> = BTreeMap::new();
    for tr in trades {
        by.entry(tr.time - tr.time.rem_euclid(len)).or_default().push(tr);
    }
    by.iter().map(|(t, list)| candle(coin, interval, *t, t + len - 1, list)).collect()
}

fn normalized_all(v: &Value) -> Vec<Value> {
    v.as_array().unwrap_or_else(|| panic!("not an array: {v}")).iter().map(normalized).collect()
}

#[test]
fn candles_equal_what_the_simulators_fills_say() {
    let out = tempfile::tempdir().unwrap();
    let data = out.path().join("data");
    let n = BLOCKS.to_string();
    #[rustfmt::skip]
    let sim_args = [
        "--coins", "3", "--btc-orders", "1000", "--orders-per-coin", "200",
        "--block-ms", "50", "--rate", "0.1", "--reject-ratio", "1", "--users", "25", "--blocks", &n,
        "--time-scale", "60",
    ];
    let (mut sim, info_url) = start_sim(&data, &sim_args, &out.path().join("sim.log"));
    let mut server = start_serve(&data, &info_url, &out.path().join("snaps"), &[], &out.path().join("serve.log"));
    let addr = server.wait_line("hlbook listening on", Duration::from_secs(30));
    let base = format!("http://{addr}");
    wait_health(&base, Duration::from_secs(60), |h| h["state"] == "live");

    let subs = vec![
        json!({"type": "candle", "coin": "BTC", "interval": "1m"}),
        json!({"type": "candle", "coin": "BTC", "interval": "5m"}),
        json!({"type": "candle", "coin": "BTC", "interval": "1M"}),
        json!({"type": "candle", "coin": "@107", "interval": "1m"}),
    ];
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let task = rt.spawn(collect(addr.clone(), subs, stop_rx));
    let last = FIRST_HEIGHT + BLOCKS - 1;
    wait_health(&base, Duration::from_secs(120), |h| h["height"].as_u64() >= Some(last));
    // No grace period for frames still on their way: a subscription's frames arrive in height order, and every check
    // below stops at the last height received (a bucket is closed only once a later one's frame came).
    stop_tx.send(true).unwrap();
    let got = rt.block_on(task).expect("the collecting task");

    let (lines, first_ms) = fills_lines(&data);
    assert_eq!(lines.last().unwrap()["block_number"], last, "the simulator wrote every block");
    for f in &got {
        assert!(matches!(channel(f), "subscriptionResponse" | "candle" | "hlbookNotice"), "unexpected frame {f}");
    }
    let btc = trades_of(&lines, "BTC");
    let (frames, noticed) = frames_of(&got, "BTC", "1m");
    assert!(check_stream("BTC", "1m", &frames, noticed, &btc, first_ms) >= 10);
    let (frames, noticed) = frames_of(&got, "BTC", "5m");
    assert!(check_stream("BTC", "5m", &frames, noticed, &btc, first_ms) >= 2);
    let spot = trades_of(&lines, "@107");
    let (frames, noticed) = frames_of(&got, "@107", "1m");
    assert!(check_stream("@107", "1m", &frames, noticed, &spot, first_ms) >= 3);
    // The month began before the simulator: its first candle says where the files begin.
    let (frames, noticed) = frames_of(&got, "BTC", "1M");
    assert!(noticed && !frames.is_empty(), "1M: a first frame and a notice");
    assert_eq!(frames[0]["data"]["i"], "1M");

    // candleSnapshot over HTTP: ccxt's startTime 0 gets every bucket, a range gets its own.
    let want = file_candles("BTC", "1m", &btc);
    let req = |coin: &str, i: &str, start: i64, end: Value| json!({"type": "candleSnapshot", "req": {"coin": coin, "interval": i, "startTime": start, "endTime": end}});
    let (status, all) = post_info(&base, &req("BTC", "1m", 0, Value::Null));
    assert_eq!(status, 200, "{all}");
    assert_eq!(normalized_all(&all), want);
    assert!(want.len() >= 10, "{} candles", want.len());
    let (t1, t2) = (want[2]["t"].as_i64().unwrap(), want[5]["t"].as_i64().unwrap());
    let (_, some) = post_info(&base, &req("BTC", "1m", t1 + 30_000, json!(t2 + 10)));
    let range: Vec<Value> = want.iter().filter(|c| (t1..=t2).contains(&c["t"].as_i64().unwrap())).cloned().collect();
    assert_eq!(normalized_all(&some), range);
    for bad in [req("BTC", "2m", 0, Value::Null), req("NOPE", "1m", 0, Value::Null)] {
        let (status, text) = post_info(&base, &bad);
        assert_eq!(status, 422, "{bad}: {text}");
    }
    // The same over the socket's post, for 5m.
    let want5 = file_candles("BTC", "5m", &btc);
    let answer = rt.block_on(async {
        let mut ws = wsclient::raw::connect(&addr, "", None).await;
        let payload = req("BTC", "5m", 0, Value::Null);
        wsclient::raw::send(
            &mut ws,
            &json!({"method": "post", "id": 5, "request": {"type": "info", "payload": payload}}),
        )
        .await;
        wsclient::raw::expect_json(&mut ws, Duration::from_secs(10)).await
    });
    assert_eq!(answer["data"]["response"]["payload"]["type"], "candleSnapshot", "{answer}");
    assert_eq!(normalized_all(&answer["data"]["response"]["payload"]["data"]), want5);
    assert!(server.running(), "the server is still up");
    sim.stop();
    server.stop();
}
