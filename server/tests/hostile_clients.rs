//! Hostile clients against the real binaries (`hlsim` and `hlbook serve`, through the `livefeed` rig), each with a
//! well-behaved bystander beside it that must keep getting its frames, with no loss notice, and the server's
//! memory bounded:
//! - a client that never reads, asking for every coin's l4Book with `?audit=1&batch=1`, is closed at its byte
//!   budget (1008, counted);
//! - 200 connections from one IP follow one busy user's userFills and resubscribe in a loop: the node's files are
//!   read a handful of times, the subscriptions share those reads, and the per-IP cap refuses the excess;
//! - subscriptions with huge extra fields, and made-up names, keep nothing.

mod livefeed;
mod procs;
mod wsclient;

use std::time::Duration;

use livefeed::LiveRig;
use serde_json::{Value, json};
use wsclient::raw::{Read, Ws, channel, rss_bytes};

/// Extra resident memory a hostile client may cost: a memory bound, generous on purpose (the server's bounded
/// rings are still filling in the first minute), not a speed goal.
const RSS_ALLOWANCE: u64 = 64 << 20;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn health(feed: &LiveRig) -> Value {
    procs::get_json(&format!("{}/health", feed.admin)).expect("/health answers")
}

/// The server's height (admin `/status`).
fn height(feed: &LiveRig) -> u64 {
    let status = procs::get_json(&format!("{}/status", feed.admin)).expect("/status answers");
    status["height"].as_u64().unwrap_or_else(|| panic!("no height in {status}"))
}

/// A `?audit=1` bystander following BTC's l2Book and trades; collects until `until` names a height and an l2Book
/// frame at or past it came (so it was served blocks after whatever the test did, with no pause to hope so), and
/// panics on any error, loss notice or end of its connection.
async fn bystander(addr: String, mut until: tokio::sync::watch::Receiver<Option<u64>>) -> Vec<Value> {
    let mut ws = wsclient::raw::connect(&addr, "audit=1", None).await;
    wsclient::raw::subscribe(&mut ws, json!({"type": "l2Book", "coin": "BTC"})).await;
    wsclient::raw::subscribe(&mut ws, json!({"type": "trades", "coin": "BTC"})).await;
    let past = |got: &[Value], h: &u64| l2_heights(got).last().is_some_and(|l| l >= h);
    let got = wsclient::raw::collect_until_complete(&mut ws, &mut until, past, "bystander").await;
    for v in &got {
        assert!(!matches!(channel(v), "error" | "hlbookNotice"), "the bystander was hurt: {v}");
    }
    got
}

/// Every l2Book frame's height in `frames`, in order.
fn l2_heights(frames: &[Value]) -> Vec<u64> {
    frames.iter().filter(|v| channel(v) == "l2Book").filter_map(wsclient::raw::audit_height).collect()
}

#[test]
fn a_client_that_never_reads_is_closed_at_its_budget() {
    // A big BTC book (its l4Book snapshot is several MB) and a 1 MiB budget per connection.
    let feed = LiveRig::start_with(&[("--btc-orders", "20000")], "conn_budget_bytes = 1048576\n");
    let pid = feed.server.pid().expect("server running");
    let rt = rt();
    let (stop_tx, stop) = tokio::sync::watch::channel(None);
    let by = rt.spawn(bystander(feed.addr.clone(), stop));
    let rss_before = rss_bytes(pid).unwrap();
    let coins = ["BTC", "ETH", "SOL", "HYPE"];
    let mut hog: Ws = rt.block_on(wsclient::raw::connect(&feed.addr, "audit=1&batch=1", Some(4096)));
    rt.block_on(async {
        for c in coins {
            wsclient::raw::subscribe(&mut hog, json!({"type": "l4Book", "coin": c})).await;
        }
    });
    // Never read: wait (bounded) for the server to count the closure.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while health(&feed)["ws"]["closed_budget"].as_u64().unwrap_or(0) == 0 {
        assert!(std::time::Instant::now() < deadline, "never closed at its budget: {}", health(&feed));
        std::thread::sleep(Duration::from_millis(200));
    }
    let rss_after = rss_bytes(pid).unwrap();
    // Now read what the hog was sent: the end of its connection comes, not more and more data.
    let ended = rt.block_on(async {
        loop {
            match wsclient::raw::next_json(&mut hog, Duration::from_secs(30)).await {
                Read::Json(_) => {}
                Read::Closed(why) => return why,
                Read::Timeout => panic!("the hog's connection stayed open"),
            }
        }
    });
    // More blocks for the bystander after the closure.
    stop_tx.send(Some(height(&feed) + 5)).unwrap();
    let seen = rt.block_on(by).unwrap();
    let heights = l2_heights(&seen);
    assert!(heights.len() > 5, "the bystander kept receiving: {heights:?}");
    assert!(heights.windows(2).all(|w| w[0] < w[1]), "in order: {heights:?}");
    assert!(rss_after < rss_before + RSS_ALLOWANCE, "RSS {rss_before} -> {rss_after} with a client that never reads");
    assert_eq!(health(&feed)["ws"]["overflows"], 0, "nobody lost blocks; the hog ended: {ended}");
}

/// The user with the most fills in the simulator's files so far (waits until there are some).
fn busy_user(feed: &LiveRig) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let mut counts: std::collections::HashMap<String, usize> = Default::default();
        let root = feed.dir.path().join("data/node_fills_by_block/hourly");
        for day in std::fs::read_dir(&root).into_iter().flatten().flatten() {
            for hour in std::fs::read_dir(day.path()).into_iter().flatten().flatten() {
                for line in std::fs::read_to_string(hour.path()).unwrap_or_default().lines() {
                    let Ok(v) = serde_json::from_str::<Value>(line) else { continue };
                    for ev in v["events"].as_array().into_iter().flatten() {
                        *counts.entry(ev[0].as_str().unwrap_or("").to_lowercase()).or_default() += 1;
                    }
                }
            }
        }
        if let Some((u, n)) = counts.into_iter().max_by_key(|(_, n)| *n)
            && n >= 5
        {
            return u;
        }
        assert!(std::time::Instant::now() < deadline, "the simulator wrote no fills");
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn a_user_fills_flood_from_one_ip_shares_a_few_reads() {
    // 200 connections and the bystander from one IP: twice the exchange's allowance, which this test is not about.
    let feed =
        LiveRig::start_with(&[("--users", "8")], "max_connections_per_ip = 250\nmax_http_connections_per_ip = 300\n");
    let user = busy_user(&feed);
    let pid = feed.server.pid().expect("server running");
    let rt = rt();
    let (stop_tx, stop) = tokio::sync::watch::channel(None);
    let by = rt.spawn(bystander(feed.addr.clone(), stop));
    let rss_before = rss_bytes(pid).unwrap();
    let sub = json!({"type": "userFills", "user": user});
    let (snapshots, refused) = rt.block_on(async {
        let mut conns = Vec::new();
        for _ in 0..200 {
            conns.push(wsclient::raw::connect(&feed.addr, "", None).await);
        }
        let (mut snapshots, mut refused) = (0, 0);
        for _round in 0..3 {
            for ws in &mut conns {
                wsclient::raw::subscribe(ws, sub.clone()).await;
            }
            for ws in &mut conns {
                // Each gets its ack, then its snapshot or the per-IP refusal.
                loop {
                    match wsclient::raw::next_json(ws, Duration::from_secs(60)).await {
                        Read::Json(v) if v["data"]["isSnapshot"] == true => {
                            snapshots += 1;
                            break;
                        }
                        // A refused subscription's unsubscribe of the round before.
                        Read::Json(v) if v["data"].as_str().is_some_and(|t| t.starts_with("Already unsubscribed")) => {}
                        Read::Json(v) if channel(&v) == "error" => {
                            let text = v["data"].as_str().unwrap_or("");
                            assert!(text.contains("server.max_user_subscriptions_per_ip"), "{v}");
                            refused += 1;
                            break;
                        }
                        Read::Json(_) => {}
                        other => panic!("a flooding connection ended: {other:?}"),
                    }
                }
            }
            for ws in &mut conns {
                wsclient::raw::send(ws, &json!({"method": "unsubscribe", "subscription": sub})).await;
            }
        }
        (snapshots, refused)
    });
    // Five more blocks after the hostile part: on a fast machine it is over within the first few.
    stop_tx.send(Some(height(&feed) + 5)).unwrap();
    let seen = rt.block_on(by).unwrap();
    let h = health(&feed);
    let count = |name: &str| h["publish"][name].as_u64().unwrap_or_else(|| panic!("no {name} in {h}"));
    let (reads, shared) = (count("fills_reads"), count("fills_reads_shared"));
    eprintln!("userFills flood: {snapshots} snapshots, {refused} refused, {reads} reads, {shared} shared");
    // The default cap (100 user subscriptions per IP) lets half of each round in.
    assert_eq!((snapshots, refused), (300, 300));
    assert!(reads <= 6, "{reads} reads of the node's files for 300 snapshots of one user");
    assert!(shared + reads >= 300, "every snapshot came from a read: {shared} shared, {reads} read");
    let heights = l2_heights(&seen);
    assert!(heights.len() > 5, "the bystander kept receiving: {heights:?}");
    let rss_after = rss_bytes(pid).unwrap();
    assert!(rss_after < rss_before + RSS_ALLOWANCE, "RSS {rss_before} -> {rss_after}");
}

#[test]
fn huge_extra_fields_and_made_up_names_keep_nothing() {
    // 24,000 messages from one IP, far past the exchange's 2,000 a minute this test is not about.
    let feed = LiveRig::start("max_messages_per_minute_per_ip = 100000\n");
    let pid = feed.server.pid().expect("server running");
    let rt = rt();
    let (stop_tx, stop) = tokio::sync::watch::channel(None);
    let by = rt.spawn(bystander(feed.addr.clone(), stop));
    let rss_before = rss_bytes(pid).unwrap();
    let status_url = format!("{}/status", feed.admin);
    let rss_rounds = rt.block_on(async {
        let mut ws = wsclient::raw::connect(&feed.addr, "", None).await;
        let extra = "x".repeat(512 << 10);
        for i in 0..200 {
            let sub = json!({"type": "l2Book", "coin": "BTC", "nSigFigs": 5, "pad": extra, "i": i});
            wsclient::raw::subscribe(&mut ws, sub).await;
            let v = wsclient::raw::expect_json(&mut ws, Duration::from_secs(30)).await;
            assert_eq!(channel(&v), "error", "an oversized subscription is refused: {}", &v.to_string()[..200]);
        }
        let mut rounds = Vec::new();
        for _round in 0..3 {
            let mut conns = Vec::new();
            for _ in 0..40 {
                conns.push(wsclient::raw::connect(&feed.addr, "", None).await);
            }
            for (k, ws) in conns.iter_mut().enumerate() {
                for i in 0..100 {
                    let coin = format!("MADE{k}X{i}{}", "Z".repeat(40));
                    let sub = json!({"type": "trades", "coin": coin});
                    wsclient::raw::subscribe(ws, sub.clone()).await;
                    wsclient::raw::send(ws, &json!({"method": "unsubscribe", "subscription": sub})).await;
                }
            }
            for ws in &mut conns {
                // Both answers of every pair, so the server has handled them all.
                for _ in 0..200 {
                    wsclient::raw::expect_json(ws, Duration::from_secs(30)).await;
                }
            }
            drop(conns);
            // RSS once the server has let go of them all (only the bystander and `ws` left open).
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            loop {
                let status: Value = reqwest::get(&status_url).await.unwrap().json().await.unwrap();
                if status["connections"].as_u64().is_some_and(|c| c <= 2) {
                    break;
                }
                assert!(std::time::Instant::now() < deadline, "closed connections stay open: {status}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            rounds.push(rss_bytes(pid).unwrap());
        }
        rounds
    });
    // Five more blocks after the hostile part: on a fast machine it is over within the first few.
    stop_tx.send(Some(height(&feed) + 5)).unwrap();
    let seen = rt.block_on(by).unwrap();
    let heights = l2_heights(&seen);
    assert!(heights.len() > 5, "the bystander kept receiving: {heights:?}");
    eprintln!("RSS before {rss_before}, after each round {rss_rounds:?}");
    for r in &rss_rounds {
        assert!(*r < rss_before + (20 << 20), "RSS {rss_before} -> {rss_rounds:?}");
    }
}
