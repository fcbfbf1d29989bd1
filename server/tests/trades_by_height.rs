//! `tradesByHeight` (our extension) against hlsim's own files, with the real binaries:
//! - a height range, a range to the newest block and a time range answer, block by block, the trades the node's
//!   fills files hold for the coin (paired by tid here, with this file's own parsing), by block and streaming;
//! - by block, each block's trades equal the live `trades` frame of that height (`?audit=1` names it);
//! - a range with more than 5000 trades gets the newest whole blocks that fit;
//! - refusals are 422 with plain text saying why, over HTTP and the socket's `post`;
//! - the node's info server never sees the type, even when `server.info_types` names it.

mod procs;
mod wsclient;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use procs::{admin_base, get_json, start_serve, start_sim, wait_health};
use serde_json::{Value, json};
use wsclient::raw::{audit_height, channel};

const FIRST_HEIGHT: u64 = 1_000_000_000;
const BLOCKS: u64 = 600;
/// The server's caps (`ws::trades_info`).
const MAX_TRADES: usize = 5000;
const MAX_BLOCKS: u64 = 6_000;
const ZERO: &str = "0x0000000000000000000000000000000000000000";

/// A decimal string in 10^-8 units (the test's own parser), so "1" and "1.0" compare equal and exactly.
fn units(s: &str) -> u128 {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    assert!(frac.len() <= 8, "{s}");
    format!("{int}{frac:0<8}").parse().unwrap()
}

/// A trade with its price and size in units.
fn exact(t: &Value) -> Value {
    let mut t = t.clone();
    for k in ["px", "sz"] {
        t[k] = units(t[k].as_str().unwrap()).to_string().into();
    }
    t
}

/// Per height, the coin's trades of the node's fills files, as the official trades objects: one per tid in the
/// order of its first fill, the taker's side, [buyer, seller]. Streaming writes one block on several lines.
fn file_trades(lines: &[Value], coin: &str) -> BTreeMap<u64, Vec<Value>> {
    let mut fills: BTreeMap<u64, Vec<(String, Value)>> = BTreeMap::new();
    for l in lines {
        let list = fills.entry(l["block_number"].as_u64().unwrap()).or_default();
        for ev in l["events"].as_array().unwrap() {
            if ev[1]["coin"] == coin {
                list.push((ev[0].as_str().unwrap().to_string(), ev[1].clone()));
            }
        }
    }
    let mut out = BTreeMap::new();
    for (height, list) in fills {
        let mut order: Vec<u64> = Vec::new();
        let mut by_tid: HashMap<u64, Vec<&(String, Value)>> = HashMap::new();
        for f in &list {
            let tid = f.1["tid"].as_u64().unwrap();
            if !by_tid.contains_key(&tid) {
                order.push(tid);
            }
            by_tid.entry(tid).or_default().push(f);
        }
        let trades: Vec<Value> = order
            .iter()
            .map(|tid| {
                let sides = &by_tid[tid];
                let user = |s: &str| sides.iter().find(|f| f.1["side"] == s).map_or(ZERO.to_string(), |f| f.0.clone());
                let first = &sides[0].1;
                let taker = sides.iter().find(|f| f.1["crossed"] == true).map(|f| f.1["side"].as_str().unwrap());
                let side = taker.unwrap_or(if first["side"] == "B" { "A" } else { "B" });
                exact(&json!({"coin": coin, "side": side, "px": first["px"], "sz": first["sz"], "time": first["time"],
                    "hash": first["hash"], "tid": tid, "users": [user("B"), user("A")]}))
            })
            .collect();
        if !trades.is_empty() {
            out.insert(height, trades);
        }
    }
    out
}

/// Per height, the block's time: its fills' `time` (every block here has fills).
fn block_times(lines: &[Value]) -> BTreeMap<u64, i64> {
    let mut out = BTreeMap::new();
    for l in lines {
        if let Some(f) = l["events"].as_array().unwrap().first() {
            out.insert(l["block_number"].as_u64().unwrap(), f[1]["time"].as_i64().unwrap());
        }
    }
    out
}

/// The answer as height → its trades (exact), checking its shape: ascending heights, each with trades.
fn by_height(answer: &Value) -> BTreeMap<u64, Vec<Value>> {
    let list = answer.as_array().unwrap_or_else(|| panic!("not a list: {answer}"));
    let heights: Vec<u64> = list.iter().map(|b| b["height"].as_u64().unwrap()).collect();
    assert!(heights.windows(2).all(|w| w[0] < w[1]), "ascending heights: {heights:?}");
    list.iter()
        .map(|b| {
            let trades = b["trades"].as_array().unwrap();
            assert!(!trades.is_empty(), "a block without trades: {b}");
            assert_eq!(b.as_object().unwrap().keys().collect::<Vec<_>>(), ["height", "trades"]);
            (b["height"].as_u64().unwrap(), trades.iter().map(exact).collect())
        })
        .collect()
}

fn post_info(base: &str, body: &Value) -> (u16, Value) {
    let r = reqwest::blocking::Client::new().post(format!("{base}/info")).json(body).send().unwrap();
    let status = r.status().as_u16();
    let text = r.text().unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

fn ask(base: &str, body: Value) -> BTreeMap<u64, Vec<Value>> {
    let (status, answer) = post_info(base, &body);
    assert_eq!(status, 200, "{body}: {answer}");
    by_height(&answer)
}

fn wait_store(admin: &str, height: u64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    loop {
        let s = get_json(&format!("{admin}/status")).map_or(Value::Null, |s| s["store"].clone());
        if s["height"].as_u64() >= Some(height) && s["state"] == "live" {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "the store never reached {height}: {s}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn range(all: &BTreeMap<u64, Vec<Value>>, from: u64, to: u64) -> BTreeMap<u64, Vec<Value>> {
    all.range(from..=to).map(|(h, t)| (*h, t.clone())).collect()
}

#[test]
fn by_block_trades_by_height_are_the_files_trades_and_the_live_frames() {
    run("by-block");
}

#[test]
fn streaming_trades_by_height_are_the_files_trades() {
    run("streaming");
}

fn run(mode: &str) {
    let out = tempfile::tempdir().unwrap();
    let data = out.path().join("data");
    // Mainnet's activity (rate 1): about 40 BTC trades a block, so the whole run holds several times the cap.
    #[rustfmt::skip]
    let sim_args = ["--mode", mode, "--coins", "3", "--btc-orders", "1000", "--orders-per-coin", "200",
        "--block-ms", "40", "--rate", "1", "--reject-ratio", "1", "--users", "50", "--blocks", "600"];
    let (mut sim, info) = start_sim(&data, &sim_args, &out.path().join("sim.log"));
    // The node's info server is allowed tradesByHeight: hlbook must answer it itself all the same.
    #[rustfmt::skip]
    let extra = ["--mode", mode, "--set", "server.info_types=[\"meta\",\"tradesByHeight\"]",
        "--set", "server.info_weight_per_minute=0"];
    let mut server = start_serve(&data, &info, &out.path().join("snaps"), &extra, &out.path().join("serve.log"));
    let base = format!("http://{}", server.wait_line("hlbook listening on", Duration::from_secs(30)));
    let admin = admin_base(&server);
    wait_health(&base, Duration::from_secs(60), |h| h["state"] == "live");

    let rt = tokio::runtime::Runtime::new().unwrap();
    let addr = base.trim_start_matches("http://").to_string();
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let live = rt.spawn({
        let addr = addr.clone();
        async move {
            let mut ws = wsclient::raw::connect(&addr, "audit=1", None).await;
            wsclient::raw::subscribe(&mut ws, json!({"type": "trades", "coin": "BTC"})).await;
            wsclient::raw::collect_until(&mut ws, &mut stop_rx, "trades").await
        }
    });
    // Streaming: the simulator's last block never completes (no later line).
    let last = FIRST_HEIGHT + BLOCKS - 1 - u64::from(mode == "streaming");
    wait_store(&admin, last);
    stop_tx.send(true).unwrap();
    let frames = rt.block_on(live).unwrap();

    let folder = if mode == "streaming" { "streaming" } else { "by_block" };
    let lines: Vec<Value> = procs::node_json_lines(&data.join(format!("node_fills_{folder}")))
        .into_iter()
        .filter(|l| l["block_number"].as_u64() <= Some(last))
        .collect();
    let btc = file_trades(&lines, "BTC");
    let total: usize = btc.values().map(Vec::len).sum();
    assert!(total > 2 * MAX_TRADES, "{total} BTC trades in the files");

    // A height range: every block of it with trades, exactly.
    let (a, b) = (FIRST_HEIGHT + 100, FIRST_HEIGHT + 140);
    let want = range(&btc, a, b);
    assert!(want.len() > 20, "{} blocks with BTC trades", want.len());
    assert_eq!(ask(&base, json!({"type": "tradesByHeight", "coin": "BTC", "fromHeight": a, "toHeight": b})), want);
    let spot = range(&file_trades(&lines, "@107"), a, b);
    assert!(!spot.is_empty());
    assert_eq!(ask(&base, json!({"type": "tradesByHeight", "coin": "@107", "fromHeight": a, "toHeight": b})), spot);

    // A time range: the blocks whose time is in it.
    let times = block_times(&lines);
    let (start, end) = (times[&(FIRST_HEIGHT + 200)], times[&(FIRST_HEIGHT + 230)]);
    let in_time: Vec<u64> = times.iter().filter(|(_, t)| (start..=end).contains(*t)).map(|(h, _)| *h).collect();
    assert_eq!((in_time[0], *in_time.last().unwrap()), (FIRST_HEIGHT + 200, FIRST_HEIGHT + 230));
    let want = range(&btc, FIRST_HEIGHT + 200, FIRST_HEIGHT + 230);
    assert_eq!(ask(&base, json!({"type": "tradesByHeight", "coin": "BTC", "startTime": start, "endTime": end})), want);
    let after = range(&btc, FIRST_HEIGHT + 201, FIRST_HEIGHT + 230);
    let body = json!({"type": "tradesByHeight", "coin": "BTC", "startTime": start + 1, "endTime": end});
    assert_eq!(ask(&base, body), after, "a time just after a block's leaves it out");

    // To the newest block: over the cap, the newest whole blocks that fit in it.
    let capped = ask(&base, json!({"type": "tradesByHeight", "coin": "BTC", "fromHeight": FIRST_HEIGHT + 10}));
    let mut fit = BTreeMap::new();
    let mut n = 0;
    for (h, t) in btc.range(FIRST_HEIGHT + 10..).rev() {
        if n + t.len() > MAX_TRADES {
            break;
        }
        n += t.len();
        fit.insert(*h, t.clone());
    }
    assert!(fit.len() < btc.range(FIRST_HEIGHT + 10..).count(), "the cap cut the answer");
    assert_eq!(capped, fit, "the newest {n} trades, in whole blocks");
    assert_eq!(capped.keys().last(), btc.keys().last(), "up to the newest block with trades");

    // By block, each block's trades are the live frame of its height.
    if mode == "by-block" {
        let live: BTreeMap<u64, Vec<Value>> = frames
            .iter()
            .filter(|f| channel(f) == "trades")
            .map(|f| (audit_height(f).unwrap(), f["data"].as_array().unwrap().iter().map(exact).collect()))
            .collect();
        let (lo, hi) = (*live.keys().next().unwrap(), *live.keys().last().unwrap());
        // In windows of 60 heights, each under the cap.
        let mut every = BTreeMap::new();
        for from in (lo..=hi).step_by(60) {
            let to = (from + 59).min(hi);
            every.extend(ask(
                &base,
                json!({"type": "tradesByHeight", "coin": "BTC", "fromHeight": from, "toHeight": to}),
            ));
        }
        assert!(live.len() > 50, "{} live frames", live.len());
        assert_eq!(every.len(), live.len(), "a live frame for each block of the answer");
        assert_eq!(every, live, "each block's trades are its live frame's");
    }

    // Refusals: 422 with plain text saying why.
    let oldest_ms = get_json(&format!("{admin}/status")).unwrap()["store"]["first_block_ms"].as_i64().unwrap();
    for (body, says) in [
        (json!({"coin": "NOPE", "fromHeight": a}), "no coin \"NOPE\""),
        (json!({"coin": "BTC"}), "needs fromHeight or startTime"),
        (json!({"coin": "BTC", "fromHeight": a, "startTime": start}), "not both"),
        (json!({"coin": "BTC", "fromHeight": b, "toHeight": a}), "above toHeight"),
        (json!({"coin": "BTC", "fromHeight": a, "toHeight": a + MAX_BLOCKS}), "at most 6000 a request"),
        (json!({"coin": "BTC", "fromHeight": last - 5, "toHeight": last + 5}), "holds blocks up to height"),
        (json!({"coin": "BTC", "fromHeight": FIRST_HEIGHT - 10, "toHeight": a}), "oldest block is height"),
        (json!({"coin": "BTC", "startTime": oldest_ms - 1}), "holds trades from"),
        (json!({"coin": "BTC", "startTime": end, "endTime": start}), "is after endTime"),
    ] {
        let mut body = body;
        body["type"] = "tradesByHeight".into();
        let (status, text) = post_info(&base, &body);
        assert_eq!(status, 422, "{body}: {text}");
        let text = text.as_str().unwrap_or_else(|| panic!("{body}: not plain text: {text}"));
        assert!(text.contains(says), "{body}: {text}");
    }

    // The socket's post: the same answer, and the same refusal as an error.
    let small = json!({"type": "tradesByHeight", "coin": "BTC", "fromHeight": a, "toHeight": b});
    let (posted, refused) = rt.block_on(async {
        let mut ws = wsclient::raw::connect(&addr, "", None).await;
        let ok = post_ws(&mut ws, 7, &small).await;
        let bad = post_ws(&mut ws, 8, &json!({"type": "tradesByHeight", "coin": "NOPE", "fromHeight": a})).await;
        (ok, bad)
    });
    assert_eq!(posted["data"]["id"], 7, "{posted}");
    assert_eq!(posted["data"]["response"]["payload"]["type"], "tradesByHeight", "{posted}");
    assert_eq!(by_height(&posted["data"]["response"]["payload"]["data"]), range(&btc, a, b));
    assert_eq!(refused["data"]["response"]["type"], "error", "{refused}");
    assert!(refused["data"]["response"]["payload"].as_str().unwrap().contains("no coin"), "{refused}");

    // The node's info server saw none of it.
    let stats = get_json(&format!("{}/sim/info-stats", info.trim_end_matches("/info"))).expect("hlsim info stats");
    assert!(stats["by_type"]["fileSnapshot"].as_u64() >= Some(1), "it counts what hlbook asks it: {stats}");
    assert!(stats["by_type"].get("tradesByHeight").is_none(), "{stats}");
    assert!(server.running(), "the server is still up");
    server.stop();
    sim.stop();
}

/// One `post` of an info request on the socket, and its answer.
async fn post_ws(ws: &mut wsclient::raw::Ws, id: u64, payload: &Value) -> Value {
    let msg = json!({"method": "post", "id": id, "request": {"type": "info", "payload": payload}});
    wsclient::raw::send(ws, &msg).await;
    wsclient::raw::expect_json(ws, Duration::from_secs(30)).await
}
