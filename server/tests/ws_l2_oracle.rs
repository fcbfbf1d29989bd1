//! l2Book frames against the replay oracle, with the real binaries: `hlsim` writes a small market, `hlbook serve`
//! follows it, one `?audit=1` connection per L2 variant subscribes a few coins, and afterwards `hlbook replay`
//! rebuilds the same books from a simulator snapshot taken before the server started. Every frame must carry
//! exactly the replay's book (coin, time, levels) at the frame's audit height, including the frames sent between
//! the two parts of a split diffs step (the watched coins' diffs first, `book::first`).
//!
//! One connection per variant, because an l2Book frame names its coin but not its aggregation: two variants of one
//! coin on one connection could not be told apart (the official API has the same property).
//!
//! The replay runs hlbook's own book engine and aggregation, so it cannot catch a mistake the two share. By-block,
//! the last BTC frames of the full and the 3-significant-figure variants are also checked against an independent
//! oracle: the simulator's own books at its last block, aggregated by the plain code below, written for this test
//! from the protocol's rules (../shared/docs/hl-ws-api.md) and nothing of hlbook's.

mod procs;
mod wsclient;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use hlbook::node::Mode;
use procs::{counter, start_serve, start_sim, wait_health};
use serde_json::{Value, json};
use wsclient::raw::{audit_height, channel};

/// BTC, a spot pair, and a perp with a decimal tick; `--coins 4` also makes `xyz:GOLD`, which nobody subscribes.
const COINS: [&str; 3] = ["BTC", "@107", "ETH"];
/// Frames each (variant, coin) must have compared.
const MIN_FRAMES: usize = 10;

/// One L2 shape: the subscription's extra keys and the same shape as `hlbook replay` flags.
struct Variant {
    name: &'static str,
    sub: Value,
    replay: &'static [&'static str],
}

fn variants() -> Vec<Variant> {
    let v = |name, sub, replay| Variant { name, sub, replay };
    vec![
        v("full", json!({}), &[]),
        v("nSigFigs 5", json!({"nSigFigs": 5}), &["--n-sig-figs", "5"]),
        v("nSigFigs 4", json!({"nSigFigs": 4}), &["--n-sig-figs", "4"]),
        v("nSigFigs 3", json!({"nSigFigs": 3}), &["--n-sig-figs", "3"]),
        v("nSigFigs 2", json!({"nSigFigs": 2}), &["--n-sig-figs", "2"]),
        v("nSigFigs 5 mantissa 2", json!({"nSigFigs": 5, "mantissa": 2}), &["--n-sig-figs", "5", "--mantissa", "2"]),
        v("nSigFigs 5 mantissa 5", json!({"nSigFigs": 5, "mantissa": 5}), &["--n-sig-figs", "5", "--mantissa", "5"]),
        v("nLevels 50", json!({"nLevels": 50}), &["--n-levels", "50"]),
        v("fast", json!({"fast": true}), &["--n-levels", "5"]),
    ]
}

/// Asks the simulator's info server for its books, written at `path`; returns the snapshot's height.
fn sim_snapshot(info_url: &str, path: &Path) -> u64 {
    let body = json!({
        "type": "fileSnapshot",
        "request": {"type": "l4Snapshots", "includeUsers": true, "includeTriggerOrders": false},
        "outPath": path, "includeHeightInOutput": true,
    });
    let resp = reqwest::blocking::Client::new().post(info_url).json(&body).send().unwrap();
    assert!(resp.status().is_success(), "fileSnapshot: {}", resp.status());
    let head = std::fs::read(path).unwrap();
    let digits: String = head[1..].iter().take_while(|b| b.is_ascii_digit()).map(|&b| b as char).collect();
    digits.parse().expect("a snapshot that starts with its height")
}

/// `hlbook replay --print l2` for one coin and shape: the `l2Book` object at every applied height.
fn replay_l2(snapshot: &Path, node_dir: &Path, mode: Mode, coin: &str, shape: &[&str]) -> HashMap<u64, Value> {
    let mut args = vec![
        "replay",
        "--snapshot",
        snapshot.to_str().unwrap(),
        "--node-dir",
        node_dir.to_str().unwrap(),
        "--mode",
        mode.as_str(),
        "--print",
        "l2",
        "--coin",
        coin,
    ];
    args.extend_from_slice(shape);
    let out = procs::hlbook(&args);
    assert!(out.status.success(), "replay {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    let mut by_height = HashMap::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let mut v: Value = serde_json::from_str(line).unwrap();
        let h = v["height"].as_u64().expect("height");
        assert!(by_height.insert(h, v["l2Book"].take()).is_none(), "two replay lines at {h} for {coin}");
    }
    by_height
}

/// Per coin, the height of the newest frame a connection must receive: the last block that changed its levels.
type Newest = HashMap<&'static str, u64>;

/// Whether `frames` reach every coin's newest height.
fn complete(frames: &[Value], newest: &Newest) -> bool {
    newest.iter().all(|(coin, h)| {
        frames.iter().any(|f| channel(f) == "l2Book" && f["data"]["coin"] == *coin && audit_height(f) >= Some(*h))
    })
}

/// Everything one connection received after subscribing `sub` (plus `coin`) for every coin, until `done` says
/// which frames are the last and they came.
async fn collect(addr: String, sub: Value, mut done: tokio::sync::watch::Receiver<Option<Newest>>) -> Vec<Value> {
    let mut ws = wsclient::raw::connect(&addr, "audit=1", None).await;
    for coin in COINS {
        let mut s = sub.clone();
        s["type"] = "l2Book".into();
        s["coin"] = coin.into();
        wsclient::raw::subscribe(&mut ws, s).await;
    }
    wsclient::raw::collect_until_complete(&mut ws, &mut done, complete, &sub.to_string()).await
}

/// Runs the simulator for `blocks` blocks in `mode`, the server beside it and one connection per variant, then
/// checks every frame against the replay.
fn oracle(mode: Mode, blocks: u64, variants: &[Variant]) {
    let out = tempfile::tempdir().unwrap();
    let data = out.path().join("data");
    let n = blocks.to_string();
    #[rustfmt::skip]
    let sim_args = [
        "--mode", mode.as_str(), "--coins", "4", "--btc-orders", "4000",
        "--orders-per-coin", "300", "--block-ms", "40", "--reject-ratio", "2", "--blocks", &n,
    ];
    let (mut sim, info_url) = start_sim(&data, &sim_args, &out.path().join("sim.log"));
    // Taken before the server starts, so the replay starts at or below every height the server publishes.
    let start = out.path().join("start.json");
    let start_height = sim_snapshot(&info_url, &start);

    let snaps = out.path().join("snapshots");
    // The replay prints whole blocks, so streaming mode publishes whole blocks here (`ingest.stream_lines = false`);
    // the books between a block's lines are checked on the capture (tests/stream_lines.rs).
    let serve_args = ["--mode", mode.as_str(), "--set", "ingest.stream_lines=false"];
    let mut server = start_serve(&data, &info_url, &snaps, &serve_args, &out.path().join("serve.log"));
    let addr = server.wait_line("hlbook listening on", Duration::from_secs(30));
    let admin = procs::admin_base(&server);
    wait_health(&admin, Duration::from_secs(60), |h| h["state"] == "live");

    let rt = tokio::runtime::Runtime::new().unwrap();
    let (done, tasks): (Vec<_>, Vec<_>) = variants
        .iter()
        .map(|v| {
            let (tx, rx) = tokio::sync::watch::channel(None);
            (tx, rt.spawn(collect(addr.clone(), v.sub.clone(), rx)))
        })
        .unzip();
    // The simulator's last block: in streaming mode the server never completes it (no later block appears).
    let last = 1_000_000_000 + blocks - 1;
    let target = if mode == Mode::Streaming { last - 1 } else { last };
    let health = wait_health(&admin, Duration::from_secs(120), |h| h["height"].as_u64() >= Some(target));
    // Nobody watches xyz:GOLD, so by-block, a diffs line with its diffs and a watched coin's is applied watched
    // coins first, and their frames go out before the rest is applied (`book::first`): the frames below include
    // those. Streaming mode applies whole blocks.
    let split = counter(&health, "split_diff_steps");
    assert_eq!(split > 0, mode == Mode::ByBlock, "diffs lines applied in two steps: {split}");
    // By-block the simulator's books at its last block, for the plain oracle; streaming leaves its last block
    // incomplete, so its books are ahead of every frame.
    let sim_books = (mode == Mode::ByBlock).then(|| sim_books_json(&info_url, &out.path().join("end.json"), last));
    // The replay says which block last changed each coin's levels, up to `target`: each connection reads until
    // it has that frame of every coin.
    let oracles: Vec<HashMap<&str, HashMap<u64, Value>>> = variants
        .iter()
        .map(|v| COINS.iter().map(|c| (*c, replay_l2(&start, &data, mode, c, v.replay))).collect())
        .collect();
    for (tx, oracle) in done.iter().zip(&oracles) {
        let newest = COINS.iter().map(|c| (*c, last_change(&oracle[c], target))).collect();
        tx.send(Some(newest)).unwrap();
    }
    let got: Vec<Vec<Value>> = tasks.into_iter().map(|t| rt.block_on(t).expect("a collecting task")).collect();
    assert!(server.running(), "the server is still up");
    sim.stop();
    server.stop();

    for ((v, frames), oracles) in variants.iter().zip(&got).zip(&oracles) {
        let acks = frames.iter().filter(|f| channel(f) == "subscriptionResponse").count();
        assert_eq!(acks, COINS.len(), "{}: one ack per coin", v.name);
        for f in frames {
            assert!(matches!(channel(f), "subscriptionResponse" | "l2Book"), "{}: unexpected frame {f}", v.name);
        }
        for coin in COINS {
            let oracle = &oracles[coin];
            let mine: Vec<&Value> =
                frames.iter().filter(|f| channel(f) == "l2Book" && f["data"]["coin"] == coin).collect();
            let ack = frames
                .iter()
                .position(|f| channel(f) == "subscriptionResponse" && f["data"]["subscription"]["coin"] == coin);
            let first = frames.iter().position(|f| channel(f) == "l2Book" && f["data"]["coin"] == coin);
            assert!(ack < first, "{} {coin}: the ack comes before any data", v.name);
            let mut last_height = 0;
            for f in &mine {
                let h = audit_height(f).unwrap_or_else(|| panic!("{}: frame without an audit height: {f}", v.name));
                assert!(h > last_height, "{} {coin}: heights not increasing ({last_height} then {h})", v.name);
                last_height = h;
                let want = oracle.get(&h).unwrap_or_else(|| {
                    panic!("{} {coin}: no replay line at height {h} (replay from {start_height})", v.name)
                });
                assert_eq!(&f["data"], want, "{} {coin} at height {h}", v.name);
            }
            assert!(mine.len() >= MIN_FRAMES, "{} {coin}: only {} frames compared", v.name, mine.len());
            eprintln!("{} {coin}: {} frames equal the replay", v.name, mine.len());
        }
        if let (Some(books), Some(n_sig)) = (&sim_books, plain_variant(v)) {
            let newest = frames.iter().rev().find(|f| channel(f) == "l2Book" && f["data"]["coin"] == "BTC").unwrap();
            assert_eq!(levels_of(newest), plain_l2(books, "BTC", n_sig), "{}: BTC against the plain oracle", v.name);
            eprintln!("{}: BTC's last frame equals the plain oracle", v.name);
        }
        let stray: Vec<&Value> = frames
            .iter()
            .filter(|f| channel(f) == "l2Book" && !COINS.iter().any(|c| f["data"]["coin"] == *c))
            .collect();
        assert!(stray.is_empty(), "{}: frames for coins nobody subscribed: {stray:?}", v.name);
    }
}

#[test]
fn l2_frames_equal_replay_every_variant_by_block() {
    oracle(Mode::ByBlock, 200, &variants());
}

#[test]
fn l2_frames_equal_replay_streaming() {
    let full: Vec<Variant> =
        variants().into_iter().filter(|v| v.name == "full" || v.name == "nSigFigs 5 mantissa 2").collect();
    oracle(Mode::Streaming, 200, &full);
}

/// The variants the plain oracle checks, and their `nSigFigs` (0: full precision).
fn plain_variant(v: &Variant) -> Option<u32> {
    match v.name {
        "full" => Some(0),
        "nSigFigs 3" => Some(3),
        _ => None,
    }
}

/// The simulator's `[height, books]` snapshot once its height is `last` (it has written its last block).
fn sim_books_json(info_url: &str, path: &Path, last: u64) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        assert!(sim_snapshot(info_url, path) <= last, "the simulator went past its last block");
        let v: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        if v[0].as_u64() == Some(last) {
            return v;
        }
        assert!(std::time::Instant::now() < deadline, "the simulator never reached {last}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A level as (price, size, orders), price and size as exact integers of 10^-10 units.
type Level = (i128, i128, u64);

/// A decimal string as an integer count of 10^-10 (exact; no price or size here has more decimals).
fn dec(s: &str) -> i128 {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    assert!(frac.len() <= 10, "too many decimals: {s}");
    let frac = format!("{frac:0<10}");
    int.parse::<i128>().unwrap() * 10_000_000_000 + frac.parse::<i128>().unwrap()
}

/// A frame's levels, bids then asks.
fn levels_of(frame: &Value) -> [Vec<Level>; 2] {
    let side = |i: usize| -> Vec<Level> {
        let levels = frame["data"]["levels"][i].as_array().unwrap();
        levels
            .iter()
            .map(|l| (dec(l["px"].as_str().unwrap()), dec(l["sz"].as_str().unwrap()), l["n"].as_u64().unwrap()))
            .collect()
    };
    [side(0), side(1)]
}

/// The 20 best levels a side of `coin` in a node-format snapshot: orders summed per price, or per bucket of
/// `10^(integer digits − n_sig)` rounded away from the spread (bids down, asks up); `n_sig` 0 is full precision.
fn plain_l2(books: &Value, coin: &str, n_sig: u32) -> [Vec<Level>; 2] {
    let book = books[1].as_array().unwrap().iter().find(|b| b[0] == coin).unwrap();
    let side = |i: usize| -> Vec<Level> {
        let mut sums: std::collections::BTreeMap<i128, (i128, u64)> = std::collections::BTreeMap::new();
        for entry in book[1][i].as_array().unwrap() {
            let order = &entry[1];
            let px = dec(order["limitPx"].as_str().unwrap());
            let px = match n_sig {
                0 => px,
                n => {
                    let digits = (px / 10_000_000_000).to_string().len() as u32;
                    let width = 10i128.pow(digits - n) * 10_000_000_000;
                    let down = px - px % width;
                    if i == 0 || down == px { down } else { down + width }
                }
            };
            let level = sums.entry(px).or_default();
            level.0 += dec(order["sz"].as_str().unwrap());
            level.1 += 1;
        }
        let levels = sums.into_iter().map(|(px, (sz, n))| (px, sz, n));
        if i == 0 { levels.rev().take(20).collect() } else { levels.take(20).collect() }
    };
    [side(0), side(1)]
}

/// The newest height up to `target` whose levels differ from the height before (the server skips a frame whose
/// levels did not change).
fn last_change(oracle: &HashMap<u64, Value>, target: u64) -> u64 {
    let mut heights: Vec<u64> = oracle.keys().copied().filter(|h| *h <= target).collect();
    heights.sort_unstable();
    let changed = heights.windows(2).filter(|w| oracle[&w[0]]["levels"] != oracle[&w[1]]["levels"]);
    changed.map(|w| w[1]).next_back().unwrap_or(heights[0])
}
