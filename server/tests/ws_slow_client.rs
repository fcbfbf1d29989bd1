//! A client that stops reading its socket for 30 s, with the real binaries: `hlsim` at its default market size and
//! cadence, `hlbook serve` beside it, three healthy `?audit=1` clients reading normally and one slow client
//! (l2Book, trades and l4Book of BTC) that keeps its connection open but reads nothing.
//!
//! What must hold: the server's memory stays bounded, the healthy clients keep getting frames the whole time,
//! and when the slow client reads again it learns what it lost on the ordered streams (an error frame and a fresh
//! l4Book snapshot) and jumps to the newest L2 instead of replaying 30 s of history; its connection stays usable.

mod procs;
mod wsclient;

use std::time::{Duration, Instant};

use procs::{get_json, start_serve, start_sim, wait_health};
use serde_json::json;
use wsclient::raw::{Read, Ws, audit_height, channel};

const STALL: Duration = Duration::from_secs(30);
/// LiveRig blocks a connection may fall behind before it loses blocks. At the simulator's default cadence (80 ms a
/// block) 30 s is ~375 blocks, far below the server's default `backlog_blocks` (2048), so with the default the
/// stall would never overflow; 100 blocks (~8 s) makes it overflow by a wide margin.
const BACKLOG_BLOCKS: u64 = 100;
/// How far the slow client's first L2 after the loss notice may be below the server's height when it resumed:
/// the frame is the newest published one, older only by blocks that did not change BTC's top levels.
const FEW_BLOCKS: u64 = 10;
/// Extra resident memory allowed during the stall. This is a memory bound (a stalled client must not make the
/// server buffer its missed feed without limit), not a speed goal: it is generous on purpose. The server's own
/// bounded rings (512 recent blocks for the publisher) are still filling during the first minute at this market
/// size, so the RSS grows by some tens of MB during the stall even without a stalled client.
const RSS_ALLOWANCE: u64 = 300 << 20;

/// What a healthy client saw: when each data frame arrived, and anything wrong.
#[derive(Debug, Default)]
struct Seen {
    frames: Vec<(Instant, String, Option<u64>)>,
    errors: Vec<String>,
}

async fn healthy(addr: String, coins: &'static [&'static str], mut stop: tokio::sync::watch::Receiver<bool>) -> Seen {
    let mut ws = wsclient::raw::connect(&addr, "audit=1", None).await;
    for coin in coins {
        wsclient::raw::subscribe(&mut ws, json!({"type": "l2Book", "coin": coin})).await;
        wsclient::raw::subscribe(&mut ws, json!({"type": "trades", "coin": coin})).await;
    }
    let mut seen = Seen::default();
    loop {
        tokio::select! {
            _ = stop.changed() => return seen,
            r = wsclient::raw::next_json(&mut ws, Duration::from_secs(60)) => match r {
                Read::Json(v) if matches!(channel(&v), "error" | "hlbookNotice") => seen.errors.push(v.to_string()),
                Read::Json(v) if matches!(channel(&v), "l2Book" | "trades") => {
                    seen.frames.push((Instant::now(), channel(&v).to_string(), audit_height(&v)));
                }
                Read::Json(_) => {}
                other => {
                    seen.errors.push(format!("connection ended: {other:?}"));
                    return seen;
                }
            },
        }
    }
}

/// Connects the slow client (a small receive buffer, so its socket fills fast), subscribes, and reads until it
/// has its l4Book snapshot, an l4Book update and an l2Book frame: every stream is live when it stops reading.
async fn slow_client(addr: &str) -> Ws {
    let mut ws = wsclient::raw::connect(addr, "audit=1", Some(32 << 10)).await;
    for kind in ["l2Book", "trades", "l4Book"] {
        wsclient::raw::subscribe(&mut ws, json!({"type": kind, "coin": "BTC"})).await;
    }
    let (mut snapshot, mut update, mut l2) = (false, false, false);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while !(snapshot && update && l2) {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let v = wsclient::raw::expect_json(&mut ws, left).await;
        match (channel(&v), v["data"]["type"].as_str()) {
            ("l4Book", Some("snapshot")) => snapshot = true,
            ("l4Book", Some("updates")) => update = update || snapshot,
            ("l2Book", _) => l2 = true,
            ("error", _) => panic!("slow client got an error before stalling: {v}"),
            _ => {}
        }
    }
    ws
}

/// What the slow client saw after it resumed reading.
#[derive(Debug, Default)]
struct Resumed {
    /// The loss notices (error frames naming lost blocks).
    losses: Vec<String>,
    /// Audit height of the first l2Book frame after the first loss notice.
    l2_after_loss: Option<u64>,
    /// A fresh l4Book snapshot after the first loss notice.
    snapshot_after_loss: bool,
    /// l2Book frames read before that first post-loss frame (stale ones still in the socket buffers).
    stale_l2: usize,
    pong: bool,
}

async fn resume(ws: &mut Ws) -> Resumed {
    let mut r = Resumed::default();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while r.l2_after_loss.is_none() || !r.snapshot_after_loss {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let v = match wsclient::raw::next_json(ws, left).await {
            Read::Json(v) => v,
            other => panic!("slow client after resuming: {other:?}; so far {r:?}"),
        };
        let lost = !r.losses.is_empty();
        match (channel(&v), v["data"]["type"].as_str()) {
            ("error", _) => panic!("a slow client gets no error, only a notice: {v}"),
            ("hlbookNotice", _) => {
                let text = v["data"].as_str().unwrap_or_default().to_string();
                assert!(text.contains("fell behind") && text.contains("lost blocks"), "unexpected error: {text}");
                r.losses.push(text);
            }
            ("l4Book", Some("snapshot")) if lost => r.snapshot_after_loss = true,
            ("l2Book", _) if lost && r.l2_after_loss.is_none() => r.l2_after_loss = audit_height(&v),
            ("l2Book", _) if !lost => r.stale_l2 += 1,
            _ => {}
        }
    }
    wsclient::raw::send(ws, &json!({"method": "ping"})).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !r.pong {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let v = wsclient::raw::expect_json(ws, left).await;
        r.pong = channel(&v) == "pong";
    }
    r
}

fn overflows(base: &str) -> u64 {
    let h = get_json(&format!("{base}/health")).expect("/health");
    h["ws"]["overflows"].as_u64().unwrap_or_else(|| panic!("no ws.overflows in {h}"))
}

fn height(base: &str) -> u64 {
    get_json(&format!("{base}/health")).and_then(|h| h["height"].as_u64()).expect("/health height")
}

#[test]
fn a_stalled_client_costs_bounded_memory_delays_nobody_and_jumps_ahead() {
    let out = tempfile::tempdir().unwrap();
    let data = out.path().join("data");
    let config = out.path().join("hlbook.toml");
    std::fs::write(&config, format!("[server]\nbacklog_blocks = {BACKLOG_BLOCKS}\n")).unwrap();
    let sim_args = ["--coins", "8"];
    let (mut sim, info_url) = start_sim(&data, &sim_args, &out.path().join("sim.log"));
    let snaps = out.path().join("snapshots");
    let serve_args = ["--config", config.to_str().unwrap()];
    let mut server = start_serve(&data, &info_url, &snaps, &serve_args, &out.path().join("serve.log"));
    let addr = server.wait_line("hlbook listening on", Duration::from_secs(60));
    // The admin listener's /health: the public one has no counters.
    let base = procs::admin_base(&server);
    wait_health(&base, Duration::from_secs(180), |h| matches!(h["state"].as_str(), Some("live" | "catching_up")));

    let rt = tokio::runtime::Runtime::new().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    const SETS: [&[&str]; 3] = [&["BTC", "ETH"], &["BTC", "@107", "SOL"], &["ETH", "HYPE", "xyz:GOLD"]];
    let healthy: Vec<_> = SETS.iter().map(|set| rt.spawn(healthy(addr.clone(), set, stop_rx.clone()))).collect();
    let mut slow = rt.block_on(slow_client(&addr));

    // The stall: the slow client's stream is simply not polled. Sample the server's memory every second.
    let pid = server.pid().expect("server running");
    let baseline = wsclient::raw::rss_bytes(pid).expect("server RSS");
    let overflows_before = overflows(&base);
    let height_before = height(&base);
    let t0 = Instant::now();
    let mut samples = Vec::new();
    while t0.elapsed() < STALL {
        std::thread::sleep(Duration::from_secs(1));
        samples.push(wsclient::raw::rss_bytes(pid).expect("server RSS"));
    }
    let peak = samples.iter().copied().max().unwrap_or(baseline).max(baseline);
    let stall_end = Instant::now();
    let height_resumed = height(&base);
    assert!(
        height_resumed - height_before > BACKLOG_BLOCKS,
        "the stall must outlast the backlog: {height_before}..{height_resumed}"
    );

    let resumed = rt.block_on(resume(&mut slow));
    stop_tx.send(true).unwrap();
    let seen: Vec<Seen> = healthy.into_iter().map(|t| rt.block_on(t).expect("a healthy client task")).collect();
    let overflows_after = wait_health(&base, Duration::from_secs(30), |h| {
        h["ws"]["overflows"].as_u64().is_some_and(|n| n > overflows_before)
    })["ws"]["overflows"]
        .as_u64()
        .unwrap();
    eprintln!(
        "RSS baseline {} MB, peak {} MB (MB each second: {:?}); heights {height_before}..{height_resumed}; overflows {overflows_before} -> \
         {overflows_after}; slow client: {resumed:?}",
        baseline >> 20,
        peak >> 20,
        samples.iter().map(|s| s >> 20).collect::<Vec<_>>()
    );

    assert!(peak < baseline + RSS_ALLOWANCE, "server memory grew from {} MB to {} MB", baseline >> 20, peak >> 20);

    for (i, s) in seen.iter().enumerate() {
        assert!(s.errors.is_empty(), "healthy client {i}: {:?}", s.errors);
        for w in 0..(STALL.as_secs() / 5) {
            let (from, to) = (t0 + Duration::from_secs(5 * w), t0 + Duration::from_secs(5 * (w + 1)));
            let n = s.frames.iter().filter(|f| f.0 >= from && f.0 < to).count();
            assert!(n > 0, "healthy client {i} got no frame in seconds {}..{} of the stall", 5 * w, 5 * (w + 1));
        }
        assert!(s.frames.iter().any(|f| f.0 >= stall_end), "healthy client {i} still gets frames after the stall");
    }

    let named = |kind: &str| resumed.losses.iter().any(|t| t.contains(&format!("\"type\":\"{kind}\"")));
    assert!(named("trades") && named("l4Book"), "a loss notice for each ordered stream: {:?}", resumed.losses);
    assert!(resumed.snapshot_after_loss, "a fresh l4Book snapshot after the loss");
    let l2 = resumed.l2_after_loss.expect("an l2Book frame with an audit height after the loss");
    assert!(
        l2 + FEW_BLOCKS >= height_resumed,
        "the first L2 after the loss is at {l2}, the server was at {height_resumed} when the client resumed"
    );
    assert!(resumed.pong, "the slow connection still answers ping");
    assert!(overflows_after > overflows_before);

    drop(slow);
    assert!(server.running(), "the server is still up");
    assert!(server.stop().success(), "SIGTERM exits 0");
    sim.stop();
}
