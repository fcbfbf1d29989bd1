//! l2Book frames against the replay oracle, with the real binaries: `hlsim` writes a small market, `hlbook serve`
//! follows it, one `?audit=1` connection per L2 variant subscribes a few coins, and afterwards `hlbook replay`
//! rebuilds the same books from a simulator snapshot taken before the server started. Every frame must carry
//! exactly the replay's book (coin, time, levels) at the frame's audit height, including the frames sent between
//! the two parts of a split diffs step (the watched coins' diffs first, `book::first`).
//!
//! One connection per variant, because an l2Book frame names its coin but not its aggregation: two variants of one
//! coin on one connection could not be told apart (the official API has the same property).

mod procs;
mod wsload;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use hlbook::node::Mode;
use procs::{HLBOOK, Proc, counter, start_sim, wait_health};
use serde_json::{Value, json};
use wsload::{audit_height, channel};

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
    let out = Command::new(HLBOOK).args(&args).output().expect("running hlbook replay");
    assert!(out.status.success(), "replay {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    let mut by_height = HashMap::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let mut v: Value = serde_json::from_str(line).unwrap();
        let h = v["height"].as_u64().expect("height");
        assert!(by_height.insert(h, v["l2Book"].take()).is_none(), "two replay lines at {h} for {coin}");
    }
    by_height
}

/// Everything one connection received until `stop`, after subscribing `sub` (plus `coin`) for every coin.
async fn collect(addr: String, sub: Value, mut stop: tokio::sync::watch::Receiver<bool>) -> Vec<Value> {
    let mut ws = wsload::connect(&addr, "audit=1", None).await;
    for coin in COINS {
        let mut s = sub.clone();
        s["type"] = "l2Book".into();
        s["coin"] = coin.into();
        wsload::subscribe(&mut ws, s).await;
    }
    wsload::collect_until(&mut ws, &mut stop, &sub.to_string()).await
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
    #[rustfmt::skip]
    let serve_args = [
        "serve", "--node-dir", data.to_str().unwrap(), "--mode", mode.as_str(), "--info-url", &info_url,
        "--snapshot-dir", snaps.to_str().unwrap(), "--listen", "127.0.0.1:0", "--admin-listen", "none",
    ];
    // The replay prints whole blocks, so streaming mode publishes whole blocks here (`ingest.stream_lines = false`);
    // the books between a block's lines are checked on the capture (tests/stream_lines.rs).
    let mut serve_args = serve_args.to_vec();
    serve_args.extend(["--set", "ingest.stream_lines=false"]);
    let mut server = Proc::start(HLBOOK, &serve_args, &out.path().join("serve.log"));
    let addr = server.wait_line("hlbook listening on", Duration::from_secs(30));
    let base = format!("http://{addr}");
    wait_health(&base, Duration::from_secs(60), |h| h["state"] == "live");

    let rt = tokio::runtime::Runtime::new().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let tasks: Vec<_> =
        variants.iter().map(|v| rt.spawn(collect(addr.clone(), v.sub.clone(), stop_rx.clone()))).collect();
    // The simulator's last block: in streaming mode the server never completes it (no later block appears).
    let last = 1_000_000_000 + blocks - 1;
    let target = if mode == Mode::Streaming { last - 1 } else { last };
    let health = wait_health(&base, Duration::from_secs(120), |h| h["height"].as_u64() >= Some(target));
    // Nobody watches xyz:GOLD, so by-block, a diffs line with its diffs and a watched coin's is applied watched
    // coins first, and their frames go out before the rest is applied (`book::first`): the frames below include
    // those. Streaming mode applies whole blocks.
    let split = counter(&health, "split_diff_steps");
    assert_eq!(split > 0, mode == Mode::ByBlock, "diffs lines applied in two steps: {split}");
    // One more publish pass reaches the connections.
    std::thread::sleep(Duration::from_millis(500));
    stop_tx.send(true).unwrap();
    let got: Vec<Vec<Value>> = tasks.into_iter().map(|t| rt.block_on(t).expect("a collecting task")).collect();
    assert!(server.running(), "the server is still up");
    sim.stop();
    server.stop();

    for (v, frames) in variants.iter().zip(&got) {
        let acks = frames.iter().filter(|f| channel(f) == "subscriptionResponse").count();
        assert_eq!(acks, COINS.len(), "{}: one ack per coin", v.name);
        for f in frames {
            assert!(matches!(channel(f), "subscriptionResponse" | "l2Book"), "{}: unexpected frame {f}", v.name);
        }
        for coin in COINS {
            let oracle = replay_l2(&start, &data, mode, coin, v.replay);
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
