//! One client IP's shape flood (issue #43): what it costs a bystander's l2Book latency and the server's memory,
//! with the old per-IP defaults and the new ones.
//!
//! Per case: `hlsim` (4 coins, 100 ms blocks) and `hlbook serve`; a `?audit=1` bystander on 127.0.0.1 follows BTC's
//! and ETH's l2Book, each frame timed from its diffs line's `node_ns` (the simulator wrote it) to its arrival.
//! It is measured alone, then while an attacker on 127.0.0.2 holds 12 connections, each subscribing 1,000
//! distinct real l2Book shapes (coin × (nSigFigs, mantissa) × nLevels) padded to just under the 4 KiB cap, never
//! reading. Printed: p50/p99 alone and flooded, their ratio, the p50 of the server's own part (the frame's
//! `applied_ns` → `sent_ns`: publishing and writing, without the simulator's write or the client's read, which
//! dominate the end-to-end figure on a shared 2-core machine), the server's RSS before and after the flood, and the
//! subscriptions the server took. Needs the release binaries (`make bench` builds them); `HLBOOK_BENCH_SECS` sets
//! each measured window (default 30 s). `HLBOOK_BENCH_SERVER` names another build's `hlbook` to measure as a third
//! case (with its own defaults: the keys this bench sets for the old limits do not exist there). Results:
//! docs/benchmarks.md, "Issue #43".
//!
//! `HLBOOK_BENCH_FLOOD=resume` runs issue #46's flood instead, on the new defaults only: the same 12 connections,
//! each over and over subscribing every ordered stream of every coin (trades, l4Book, candle 1m) resuming from the
//! oldest height the feed keeps, one coin from 500 blocks before it (its trades catch up from the history store)
//! and one from a day back, reading nothing for a second, then resetting the connection; `HLBOOK_BENCH_RESUME_L4=0`
//! leaves the l4Book resumes out (all but the probe), `HLBOOK_BENCH_RESUME_SINCE=0` sends the same subscriptions
//! without `since`. Results: docs/benchmarks.md, "Issue #46".

// The tests' process rig (server/tests/procs) and plain client (server/tests/wsclient/raw.rs).
#[allow(dead_code)]
#[path = "../../server/tests/wsclient/raw.rs"]
mod raw;
#[allow(clippy::duration_suboptimal_units)]
#[path = "../../server/tests/procs/mod.rs"]
mod rig;

use std::net::IpAddr;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

/// The limits before issue #43, on this build (per-IP subscriptions and messages did not exist: lifted here).
const OLD_DEFAULTS: &str = "max_connections_per_ip = 1000\nmax_http_connections_per_ip = 1100\n\
                            max_subscriptions_per_ip = 100000000\nmax_messages_per_minute_per_ip = 100000000\n";

const ATTACK_CONNS: usize = 12;
const SHAPES_PER_CONN: usize = 1000;

#[allow(clippy::float_arithmetic)] // latency ratios, not money
fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let secs: u64 = std::env::var("HLBOOK_BENCH_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(30);
    let resume = std::env::var("HLBOOK_BENCH_FLOOD").is_ok_and(|f| f == "resume");
    let mut cases: Vec<(&str, String, Option<String>)> = if resume {
        vec![("new defaults, resume flood", String::new(), None)]
    } else {
        vec![("old defaults", OLD_DEFAULTS.to_string(), None), ("new defaults", String::new(), None)]
    };
    if let Ok(other) = std::env::var("HLBOOK_BENCH_SERVER") {
        cases.push(("other build, its defaults", String::new(), Some(other)));
    }
    println!(
        "| case | alone p50 / p99 ms | flooded p50 / p99 ms | p50 / p99 ratio | applied → sent p50 alone / flooded µs | RSS before → after MB | attacker subscriptions held |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    for (name, toml, server) in cases {
        let r = run(&toml, server.as_deref(), Duration::from_secs(secs), resume);
        println!(
            "| {name} | {:.2} / {:.2} | {:.2} / {:.2} | {:.1} / {:.1} | {} / {} | {} → {} | {} |",
            r.alone.0,
            r.alone.1,
            r.flooded.0,
            r.flooded.1,
            r.flooded.0 / r.alone.0,
            r.flooded.1 / r.alone.1,
            r.alone.2,
            r.flooded.2,
            r.rss.0 >> 20,
            r.rss.1 >> 20,
            r.held,
        );
    }
}

struct Outcome {
    alone: (f64, f64, i64),
    flooded: (f64, f64, i64),
    rss: (u64, u64),
    held: i64,
}

fn run(server_toml: &str, server_bin: Option<&str>, window: Duration, resume: bool) -> Outcome {
    let dir = tempfile::tempdir().unwrap();
    let market = ["--coins", "4", "--btc-orders", "2000", "--orders-per-coin", "200", "--block-ms", "100"];
    let (_sim, info) = rig::start_sim(&dir.path().join("data"), &market, &dir.path().join("sim.log"));
    let config = dir.path().join("hlbook.toml");
    std::fs::write(&config, format!("[server]\n{server_toml}")).unwrap();
    let args = ["--config", config.to_str().unwrap()];
    let server = match server_bin {
        Some(bin) => {
            let (data, snaps) = (dir.path().join("data"), dir.path().join("snaps"));
            let a = [
                "serve",
                "--node-dir",
                data.to_str().unwrap(),
                "--info-url",
                &info,
                "--listen",
                "127.0.0.1:0",
                "--admin-listen",
                "none",
            ];
            let a: Vec<String> = a
                .iter()
                .map(|s| (*s).to_string())
                .chain(["--snapshot-dir".into(), snaps.display().to_string()])
                .collect();
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            rig::Proc::start(bin, &a, &dir.path().join("serve.log"))
        }
        None => rig::start_serve(
            &dir.path().join("data"),
            &info,
            &dir.path().join("snaps"),
            &args,
            &dir.path().join("serve.log"),
        ),
    };
    let addr = server.wait_line("hlbook listening on", Duration::from_mins(1));
    let base = format!("http://{addr}");
    // This build counts subscriptions on its admin listener's /health; the older build compared against it (before
    // issue #43) on its only /health.
    let counts = if server_bin.is_some() { base.clone() } else { rig::admin_base(&server) };
    rig::wait_health(&base, Duration::from_mins(2), |h| h["state"] == "live");
    let pid = server.pid().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let alone = rt.block_on(bystander(&addr, window));
    let rss0 = raw::rss_bytes(pid).unwrap();
    let l2_before = rig::get_json(&format!("{counts}/health")).unwrap()["subscriptions"]["l2Book"].as_i64().unwrap();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let _attack = if resume {
        for c in 0..ATTACK_CONNS {
            rt.spawn(resume_flood(addr.clone(), c, stopped.clone()));
        }
        Vec::new()
    } else {
        rt.block_on(flood(&addr))
    };
    let flooded = rt.block_on(bystander(&addr, window));
    stop.send_replace(true);
    let rss1 = raw::rss_bytes(pid).unwrap();
    let health = rig::get_json(&format!("{counts}/health")).unwrap();
    let l2_after = health["subscriptions"]["l2Book"].as_i64().unwrap();
    if resume {
        let ws = &health["ws"];
        println!(
            "resume flood: {} resumes ({} from the store), {} refused, {} overflows, {} closed over budget",
            ws["resumes"], ws["resumes_from_store"], ws["resumes_refused"], ws["overflows"], ws["closed_budget"]
        );
    }
    Outcome { alone, flooded, rss: (rss0, rss1), held: l2_after - l2_before }
}

/// The bystander's l2Book latency (node wrote the line → frame read) over `window`: (p50, p99) in ms, and the p50
/// of the server's applied → sent in µs.
#[allow(clippy::float_arithmetic)] // milliseconds, not money
async fn bystander(addr: &str, window: Duration) -> (f64, f64, i64) {
    let mut ws = raw::connect(addr, "audit=1", None).await;
    raw::subscribe(&mut ws, json!({"type": "l2Book", "coin": "BTC"})).await;
    raw::subscribe(&mut ws, json!({"type": "l2Book", "coin": "ETH"})).await;
    let end = Instant::now() + window;
    let mut ms = Vec::new();
    let mut server_us = Vec::new();
    while let Ok(Some(Ok(m))) = tokio::time::timeout_at(end.into(), ws.next()).await {
        let Message::Text(t) = m else { continue };
        let now = hlbook::node::time::now_nanos();
        let v: Value = serde_json::from_str(t.as_str()).unwrap();
        let a = &v["audit"];
        if v["channel"] != "l2Book" || a["snapshot"] == true {
            continue;
        }
        ms.push((now - a["node_ns"].as_i64().unwrap()) as f64 / 1e6);
        server_us.push((a["sent_ns"].as_i64().unwrap() - a["applied_ns"].as_i64().unwrap()) / 1000);
    }
    server_us.sort_unstable();
    ms.sort_by(f64::total_cmp);
    assert!(ms.len() > 10, "the bystander got {} frames", ms.len());
    let q = |p: f64| ms[((ms.len() - 1) as f64 * p) as usize];
    (q(0.5), q(0.99), server_us[server_us.len() / 2])
}

/// The attacker: 12 connections from 127.0.0.2, 1,000 padded shapes each, never read. Returns the connections
/// (held open) once every message is sent or the connection is gone.
async fn flood(addr: &str) -> Vec<raw::Ws> {
    let from: IpAddr = "127.0.0.2".parse().unwrap();
    let mut conns = Vec::new();
    for c in 0..ATTACK_CONNS {
        let Ok(mut ws) = raw::try_connect_from(addr, "", from).await else { continue };
        for k in 0..SHAPES_PER_CONN {
            let msg = json!({"method": "subscribe", "subscription": padded_shape(c * SHAPES_PER_CONN + k)});
            let send = futures_util::SinkExt::send(&mut ws, Message::Text(msg.to_string().into()));
            if !matches!(tokio::time::timeout(Duration::from_secs(5), send).await, Ok(Ok(()))) {
                break;
            }
        }
        conns.push(ws);
    }
    conns
}

/// The `i`th of 2,800 distinct l2Book shapes of the 4-coin market, padded with zeros to just under 4096 bytes.
fn padded_shape(i: usize) -> Value {
    const COINS: [&str; 4] = ["BTC", "@107", "xyz:GOLD", "ETH"];
    let params = [(None, None), (Some(2), None), (Some(3), None), (Some(4), None), (Some(5), None)];
    let params: Vec<(Option<u8>, Option<u8>)> =
        params.into_iter().chain([(Some(5), Some(2)), (Some(5), Some(5))]).collect();
    let i = i % 2800;
    let (sig, mantissa) = params[(i / 4) % params.len()];
    let mut sub = json!({"type": "l2Book", "coin": COINS[i % 4], "nSigFigs": sig, "mantissa": mantissa, "nLevels": 1 + (i / 28) % 100});
    let len = |s: &Value| json!({"method": "subscribe", "subscription": s}).to_string().len();
    let mut n = (4095 - len(&sub)) / 2;
    loop {
        sub["pad"] = json!(vec![0; n]);
        if len(&sub) < 4096 {
            return sub;
        }
        n -= 1;
    }
}

async fn send(ws: &mut raw::Ws, sub: Value) -> Result<(), tokio_tungstenite::tungstenite::Error> {
    let msg = json!({"method": "subscribe", "subscription": sub}).to_string();
    futures_util::SinkExt::send(ws, Message::Text(msg.into())).await
}

/// One connection of the resume flood: until `stop`, rounds of: subscribe BTC's trades from height 1 (the notice
/// names the oldest height kept), then every ordered stream of every coin from just after it, and `day_back` from a
/// day back (about 1.1 million blocks); read nothing for a second; reset.
async fn resume_flood(addr: String, conn: usize, mut stop: tokio::sync::watch::Receiver<bool>) {
    const COINS: [&str; 4] = ["BTC", "@107", "xyz:GOLD", "ETH"];
    let from: IpAddr = "127.0.0.2".parse().unwrap();
    // HLBOOK_BENCH_RESUME_L4=0: no l4Book beyond the probe (to tell its snapshots' memory from the rest).
    let l4 = std::env::var("HLBOOK_BENCH_RESUME_L4").map_or(true, |v| v != "0");
    // HLBOOK_BENCH_RESUME_SINCE=0: the same subscriptions without `since` (what subscribing alone costs).
    let with_since = std::env::var("HLBOOK_BENCH_RESUME_SINCE").map_or(true, |v| v != "0");
    while !*stop.borrow() {
        let Ok(mut ws) = raw::try_connect_from(&addr, "", from).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        // l4Book resumes from the feed only: its notice names the feed's oldest height.
        let _ = send(&mut ws, json!({"type": "l4Book", "coin": "BTC", "since": 1})).await;
        let oldest = loop {
            match tokio::time::timeout(Duration::from_secs(5), ws.next()).await {
                Ok(Some(Ok(Message::Text(t)))) if t.contains("oldest height it can resume from is ") => {
                    let n = t.as_str().split("resume from is ").nth(1).unwrap_or_default();
                    break n.split(';').next().and_then(|n| n.parse::<u64>().ok());
                }
                Ok(Some(Ok(_))) => {}
                _ => break None,
            }
        };
        let Some(oldest) = oldest else { continue };
        let day_back = oldest.saturating_sub(1_100_000);
        for (i, coin) in COINS.iter().enumerate() {
            // One coin from a day back (refused: older than anything kept), one from 500 blocks before the feed
            // (trades catch up from the store), the rest from the feed's oldest.
            let since = match (i + COINS.len() - conn % COINS.len()) % COINS.len() {
                0 => day_back,
                1 => oldest.saturating_sub(500),
                _ => oldest + 1,
            };
            let since = |mut sub: Value| {
                if with_since {
                    sub["since"] = since.into();
                }
                sub
            };
            let _ = send(&mut ws, since(json!({"type": "trades", "coin": coin}))).await;
            let _ = send(&mut ws, since(json!({"type": "candle", "coin": coin, "interval": "1m"}))).await;
            if *coin != "BTC" && l4 {
                let _ = send(&mut ws, since(json!({"type": "l4Book", "coin": coin}))).await;
            }
        }
        tokio::select! {
            _ = stop.changed() => {}
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        ws.get_ref().set_zero_linger().ok();
        drop(ws);
    }
}
