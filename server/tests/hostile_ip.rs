//! What one client IP, or many, may make the server hold (issue #43), against the real binaries (`hlsim` and
//! `hlbook serve` through the `livefeed` rig), each case with a `?audit=1` bystander on 127.0.0.1 whose l2Book
//! audit chain must stay whole (every frame numbered in order, nothing lost) while the attack runs. Attackers bind
//! other loopback addresses (all of 127/8 is loopback on Linux), so each is an IP of its own:
//! - a shape flood from one IP: a thousand distinct l2Book shapes, each message padded to just under the 4 KiB cap
//!   with an array of small values (read only to learn the answers, so the test waits for events, not time): the
//!   IP gets the exchange's allowance (1,000 subscriptions, 100 connections) and the server's memory stays bounded;
//! - pings from one IP on two connections that never read: they count as messages, per IP;
//! - twenty IPs flooding at once: the global byte budget holds;
//! - l4Book subscribe/unsubscribe churn over every coin from one IP: snapshot work is bounded by blocks × coins,
//!   not by requests, and the writer copies a book only for a snapshot still holding it;
//! - a named token (`server.tokens`) with a raised connection allowance: its holder gets past the per-IP cap, and
//!   neither its IP's token-less clients nor another IP do.

mod livefeed;
mod procs;
mod wsclient;

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use livefeed::LiveRig;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use wsclient::raw::{Ws, channel, rss_bytes, try_connect_from};

/// Extra resident memory an attack may cost: a memory bound, not a speed goal. On the old code a thousand padded
/// subscriptions alone held ~100 MB of parsed echoes.
const RSS_ALLOWANCE: u64 = 100 << 20;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn health(feed: &LiveRig) -> Value {
    procs::get_json(&format!("{}/health", feed.admin)).expect("/health answers")
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// The `i`th distinct real l2Book shape (coin × (nSigFigs, mantissa) × nLevels: 2,800 of them), padded with an
/// array of zeros so its subscribe message is just under 4096 bytes: the most `Value` a message may parse into.
fn padded_shape(i: usize) -> Value {
    // The coins of the rig's `--coins 4` market.
    const COINS: [&str; 4] = ["BTC", "@107", "xyz:GOLD", "ETH"];
    let params = [(None, None), (Some(2), None), (Some(3), None), (Some(4), None), (Some(5), None)];
    let params: Vec<(Option<u8>, Option<u8>)> =
        params.into_iter().chain([(Some(5), Some(2)), (Some(5), Some(5))]).collect();
    let (sig, mantissa) = params[(i / 4) % params.len()];
    let levels = 1 + (i / 28) % 100;
    let mut sub =
        json!({"type": "l2Book", "coin": COINS[i % 4], "nSigFigs": sig, "mantissa": mantissa, "nLevels": levels});
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

/// A `?audit=1` bystander following BTC's and ETH's l2Book until `stop`; panics on any error or notice.
async fn bystander(addr: String, mut stop: tokio::sync::watch::Receiver<bool>) -> Vec<Value> {
    let mut ws = wsclient::raw::connect(&addr, "audit=1", None).await;
    wsclient::raw::subscribe(&mut ws, json!({"type": "l2Book", "coin": "BTC"})).await;
    wsclient::raw::subscribe(&mut ws, json!({"type": "l2Book", "coin": "ETH"})).await;
    let got = wsclient::raw::collect_until(&mut ws, &mut stop, "bystander").await;
    for v in &got {
        assert!(!matches!(channel(v), "error" | "hlbookNotice"), "the bystander was hurt: {v}");
    }
    got
}

/// The bystander's chain is whole: each subscription's frames are numbered 1, 2, 3 … with none missing, each names
/// the height of the one before, and none says frames were lost. Returns the l2Book frames counted.
fn assert_chain_whole(frames: &[Value]) -> usize {
    let mut last: HashMap<u64, (u64, u64)> = HashMap::new();
    let mut count = 0;
    for v in frames.iter().filter(|v| channel(v) == "l2Book") {
        let a = &v["audit"];
        let (sub, n, height) = (a["sub"].as_u64().unwrap(), a["n"].as_u64().unwrap(), a["height"].as_u64().unwrap());
        assert!(a.get("lost").is_none(), "the bystander lost frames: {a}");
        if let Some((prev_n, prev_height)) = last.get(&sub) {
            assert_eq!((n, a["prev"].as_u64().unwrap_or(0)), (prev_n + 1, *prev_height), "a gap in the chain: {a}");
        } else {
            assert_eq!(n, 1, "the chain starts at 1: {a}");
        }
        last.insert(sub, (n, height));
        count += 1;
    }
    assert_eq!(last.len(), 2, "both of the bystander's books came");
    count
}

/// How a flooding connection's subscriptions were answered.
#[derive(Debug, Default)]
struct Answers {
    acks: usize,
    /// Error texts.
    errors: Vec<String>,
    /// The close reason, if the server closed it.
    closed: Option<String>,
}

/// Sends `subs` on `ws`, then reads until each has its answer (ack or error) or the connection ends.
async fn flood(mut ws: Ws, subs: Vec<Value>) -> (Ws, Answers) {
    for sub in &subs {
        send_sub(&mut ws, sub).await;
    }
    let mut a = Answers::default();
    while a.acks + a.errors.len() < subs.len() {
        match wsclient::raw::next_json(&mut ws, Duration::from_secs(60)).await {
            wsclient::raw::Read::Json(v) if channel(&v) == "subscriptionResponse" => a.acks += 1,
            wsclient::raw::Read::Json(v) if channel(&v) == "error" => {
                a.errors.push(v["data"].as_str().unwrap_or("").chars().take(200).collect());
            }
            wsclient::raw::Read::Json(_) => {}
            wsclient::raw::Read::Closed(why) => {
                a.closed = Some(why);
                break;
            }
            wsclient::raw::Read::Timeout => panic!("a flooding connection got no answer for 60 s: {a:?}"),
        }
    }
    (ws, a)
}

/// Waits until the books have moved `blocks` further, so the bystander had frames to get during the attack.
fn wait_blocks(feed: &LiveRig, blocks: u64) {
    let from = health(feed)["height"].as_u64().unwrap();
    procs::wait_health(&feed.base, Duration::from_secs(60), |h| h["height"].as_u64().unwrap_or(0) >= from + blocks);
}

async fn send_sub(ws: &mut Ws, sub: &Value) {
    wsclient::raw::send(ws, &json!({"method": "subscribe", "subscription": sub})).await;
}

#[test]
fn a_shape_flood_from_one_ip_gets_the_exchanges_allowance() {
    let feed = LiveRig::start("");
    let pid = feed.server.pid().expect("server running");
    let rt = rt();
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let by = rt.spawn(bystander(feed.addr.clone(), stop));
    wait_blocks(&feed, 3);
    let rss_before = rss_bytes(pid).unwrap();
    let attacker = ip("127.0.0.2");
    let (refusal, over_cap, _held) = rt.block_on(async {
        // Ten connections, a hundred padded shapes each, all at once.
        let mut floods = Vec::new();
        for c in 0..10 {
            let ws = try_connect_from(&feed.addr, "", attacker).await.expect("within the allowance");
            floods.push(tokio::spawn(flood(ws, (0..100).map(|k| padded_shape(c * 100 + k)).collect())));
        }
        let mut held = Vec::new();
        for f in floods {
            let (ws, a) = f.await.unwrap();
            assert_eq!((a.acks, &a.errors, &a.closed), (100, &vec![], &None), "within the IP's allowance");
            held.push(ws);
        }
        // The IP's 1,001st subscription, on a connection of its own. Old code: acked (the cap was 1,000 per
        // connection, none per IP).
        let mut probe = try_connect_from(&feed.addr, "", attacker).await.expect("within the allowance");
        send_sub(&mut probe, &padded_shape(1000)).await;
        let refusal = wsclient::raw::expect_json(&mut probe, Duration::from_secs(30)).await;
        held.push(probe);
        // 11 open: 89 more make 100, the next is refused. Old code: accepted (1,000 per IP).
        for _ in 0..89 {
            held.push(try_connect_from(&feed.addr, "", attacker).await.expect("within 100 connections"));
        }
        let over_cap = try_connect_from(&feed.addr, "", attacker).await.err();
        (refusal, over_cap, held)
    });
    assert_eq!(channel(&refusal), "error", "{refusal}");
    let text = refusal["data"].as_str().unwrap();
    assert!(text.starts_with("Too many subscriptions from this IP: at most 1000"), "{text}");
    assert_eq!(over_cap.as_deref(), Some("429"), "the IP's 101st connection");
    assert_eq!(health(&feed)["subscriptions"]["l2Book"], 1002, "the attacker's 1,000 and the bystander's 2");
    wait_blocks(&feed, 20);
    let rss_after = rss_bytes(pid).unwrap();
    stop_tx.send(true).unwrap();
    let frames = assert_chain_whole(&rt.block_on(by).unwrap());
    assert!(frames > 20, "the bystander kept receiving: {frames} frames");
    // Old code: ~100 KB of parsed echo per padded subscription, uncharged.
    assert!(rss_after < rss_before + RSS_ALLOWANCE, "RSS {rss_before} -> {rss_after} under a shape flood");
}

/// Every frame of `ws` until its close frame: (pongs, the close code and reason). None: no close within 30 s.
async fn pongs_until_close(ws: &mut Ws) -> Option<(usize, u16, String)> {
    let mut pongs = 0;
    loop {
        match tokio::time::timeout(Duration::from_secs(30), ws.next()).await.ok()?? {
            Ok(Message::Pong(_)) => pongs += 1,
            Ok(Message::Close(Some(c))) => return Some((pongs, c.code.into(), c.reason.to_string())),
            Ok(Message::Close(None)) | Err(_) => return Some((pongs, 0, String::new())),
            Ok(_) => {}
        }
    }
}

#[test]
fn pings_count_as_messages_across_an_ips_connections() {
    let feed = LiveRig::start("");
    let rt = rt();
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let by = rt.spawn(bystander(feed.addr.clone(), stop));
    let attacker = ip("127.0.0.3");
    let (closed, other) = rt.block_on(async {
        let mut a = try_connect_from(&feed.addr, "", attacker).await.unwrap();
        let mut b = try_connect_from(&feed.addr, "", attacker).await.unwrap();
        let ping = || Message::Ping(vec![7u8; 125].into());
        // 1,500 on one connection (its pongs read, so the server reads every ping: a pong not yet written holds
        // the connection's next read), then 600 on the other, never read: under each connection's 2,000, over the
        // IP's.
        for _ in 0..1500 {
            a.send(ping()).await.unwrap();
        }
        let mut pongs = 0;
        while pongs < 1500 {
            match tokio::time::timeout(Duration::from_secs(30), a.next()).await {
                Ok(Some(Ok(Message::Pong(_)))) => pongs += 1,
                other => panic!("a's pongs: {other:?} after {pongs}"),
            }
        }
        for _ in 0..600 {
            b.send(ping()).await.unwrap();
        }
        // Old code: pings were not counted, so b got its 600 pongs and stayed open (None here).
        let closed = pongs_until_close(&mut b).await;
        let _ = a.send(ping()).await;
        (closed, pongs_until_close(&mut a).await)
    });
    let (pongs, code, reason) = closed.expect("the connection whose ping went over is closed");
    assert_eq!(code, 1008, "{reason}");
    assert!(reason.contains("server.max_messages_per_minute_per_ip"), "{reason}");
    assert_eq!(pongs, 500, "pongs stop at the allowance");
    let (_, code, _) = other.expect("the IP's other connection is closed at its next ping");
    assert_eq!(code, 1008);
    wait_blocks(&feed, 10);
    stop_tx.send(true).unwrap();
    assert!(assert_chain_whole(&rt.block_on(by).unwrap()) > 10);
}

#[test]
fn twenty_ips_flooding_stay_within_the_global_budget() {
    const GLOBAL: u64 = 8 << 20;
    let feed = LiveRig::start(&format!("conn_budget_bytes = 1048576\nglobal_budget_bytes = {GLOBAL}\n"));
    let pid = feed.server.pid().expect("server running");
    let rt = rt();
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let by = rt.spawn(bystander(feed.addr.clone(), stop));
    wait_blocks(&feed, 3);
    let rss_before = rss_bytes(pid).unwrap();
    // 20 IPs × 5 connections × 100 padded subscriptions: ~46 MB of echoes against an 8 MiB budget.
    let (answers, refused_conns, _held) = rt.block_on(async {
        let (mut floods, mut refused) = (Vec::new(), 0);
        for i in 0..20 {
            let from = ip(&format!("127.0.0.{}", 10 + i));
            for c in 0..5 {
                match try_connect_from(&feed.addr, "", from).await {
                    Ok(ws) => {
                        let subs = (0..100).map(|k| padded_shape((i * 500 + c * 100 + k) % 2800)).collect();
                        floods.push(tokio::spawn(flood(ws, subs)));
                    }
                    Err(status) => {
                        assert_eq!(status, "503", "refused for the global budget, not a per-IP limit");
                        refused += 1;
                    }
                }
            }
        }
        let (mut answers, mut held) = (Vec::new(), Vec::new());
        for f in floods {
            let (ws, a) = f.await.unwrap();
            answers.push(a);
            held.push(ws);
        }
        (answers, refused, held)
    });
    wait_blocks(&feed, 20);
    let held_bytes = health(&feed)["budget"]["held"].as_u64();
    let global_errors = answers.iter().flat_map(|a| &a.errors).filter(|e| e.contains("global_budget_bytes")).count();
    let closed = answers.iter().filter(|a| a.closed.is_some()).count();
    let acks: usize = answers.iter().map(|a| a.acks).sum();
    let rss_after = rss_bytes(pid).unwrap();
    stop_tx.send(true).unwrap();
    let frames = assert_chain_whole(&rt.block_on(by).unwrap());
    eprintln!(
        "{acks} acked, {global_errors} subscriptions and {refused_conns} connections refused, {closed} closed, \
         {held_bytes:?} bytes held"
    );
    // Old code: every subscription was kept (nothing charged it), none refused, ~1 GB of parsed echoes.
    assert!(global_errors + refused_conns > 0, "the flood was never refused");
    assert!(acks < 10_000);
    assert!(rss_after < rss_before + RSS_ALLOWANCE, "RSS {rss_before} -> {rss_after} under twenty IPs' flood");
    let held_bytes = held_bytes.expect("the budget on /health");
    assert!(held_bytes <= GLOBAL, "{held_bytes} bytes held past the global budget");
    assert!(frames > 20, "the bystander kept receiving: {frames}");
}

/// The counters of the admin `/health` the l4Book churn moves: (publish's l4Book snapshot counters, ingest's
/// `book_copies`, the height).
fn l4_counts(feed: &LiveRig) -> (HashMap<&'static str, u64>, u64, u64) {
    let h = health(feed);
    let names = ["passes", "l4_snapshots", "l4_snapshot_copies", "l4_snapshots_shared", "l4_snapshots_abandoned"];
    let publish = names.into_iter().map(|n| (n, h["publish"][n].as_u64().unwrap_or_else(|| panic!("{n}: {h}"))));
    (publish.collect(), procs::counter(&h, "book_copies"), h["height"].as_u64().unwrap())
}

/// Subscribes and unsubscribes l4Book on every coin `rounds` times in one burst, then reads until every request
/// is answered; returns the l4Book snapshot frames that came meanwhile.
async fn churn(ws: &mut Ws, coins: &[&str], rounds: usize) -> usize {
    for _ in 0..rounds {
        for coin in coins {
            let sub = json!({"type": "l4Book", "coin": coin});
            wsclient::raw::send(ws, &json!({"method": "subscribe", "subscription": sub})).await;
            wsclient::raw::send(ws, &json!({"method": "unsubscribe", "subscription": sub})).await;
        }
    }
    let (mut answers, mut snapshots) = (0, 0);
    while answers < 2 * rounds * coins.len() {
        match wsclient::raw::next_json(ws, Duration::from_secs(60)).await {
            wsclient::raw::Read::Json(v) if channel(&v) == "subscriptionResponse" => answers += 1,
            wsclient::raw::Read::Json(v) if channel(&v) == "l4Book" => snapshots += 1,
            wsclient::raw::Read::Json(v) => panic!("the churn was refused: {v}"),
            other => panic!("the churning connection got {other:?} after {answers} answers"),
        }
    }
    snapshots
}

#[test]
fn l4book_churn_from_one_ip_costs_snapshots_per_pass_not_per_request() {
    // The coins of the rig's `--coins 4` market.
    const COINS: [&str; 4] = ["BTC", "@107", "xyz:GOLD", "ETH"];
    const ROUNDS: usize = 200;
    let feed = LiveRig::start("");
    let rt = rt();
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let by = rt.spawn(bystander(feed.addr.clone(), stop));
    wait_blocks(&feed, 3);
    let (before, copies_before, from) = l4_counts(&feed);
    let seen = rt.block_on(async {
        // 1,600 messages, within the IP's 2,000 a minute.
        let mut ws = try_connect_from(&feed.addr, "", ip("127.0.0.4")).await.expect("a connection");
        let seen = churn(&mut ws, &COINS, ROUNDS).await;
        // The publisher has taken up every churned request once a later one is answered: a subscriber that stays.
        let mut last = try_connect_from(&feed.addr, "", ip("127.0.0.5")).await.expect("a connection");
        wsclient::raw::subscribe(&mut last, json!({"type": "l4Book", "coin": "BTC"})).await;
        while channel(&wsclient::raw::expect_json(&mut last, Duration::from_secs(60)).await) != "l4Book" {}
        seen
    });
    let (after, copies_after, to) = l4_counts(&feed);
    let moved = |n: &str| after[n] - before[n];
    let (requests, taken, made) = (ROUNDS * COINS.len(), moved("l4_snapshot_copies"), moved("l4_snapshots"));
    let passes = moved("passes");
    eprintln!(
        "{requests} requests in {passes} passes over blocks {from}..={to}: {taken} books taken, {made} snapshots \
         made, {} shared, {} abandoned, {seen} snapshot frames to the churner; the writer copied {} books",
        moved("l4_snapshots_shared"),
        moved("l4_snapshots_abandoned"),
        copies_after - copies_before,
    );
    // One take of each requested coin per pass at most (a reference count under the read lock), whatever the
    // number of requests.
    let bound = COINS.len() as u64 * passes;
    assert!(taken <= bound, "{taken} books taken for l4Book snapshots in {passes} passes of {} coins", COINS.len());
    assert!(made <= taken, "a snapshot is made only from a book taken for it: {made} made, {taken} taken");
    assert!(copies_after - copies_before <= taken, "the writer copies a book only for a snapshot holding it");
    // Unsubscribed before the publisher came to them: dropped before any work.
    assert!(moved("l4_snapshots_abandoned") > 0, "no request of a subscriber that left was dropped");
    wait_blocks(&feed, 10);
    stop_tx.send(true).unwrap();
    assert!(assert_chain_whole(&rt.block_on(by).unwrap()) > 10, "the bystander kept receiving");
}

#[test]
fn a_named_token_gets_its_own_connection_allowance_past_the_ips() {
    const TOKEN: &str = "d3sk-t0ken";
    let feed = LiveRig::start(&format!(
        "max_connections_per_ip = 2\n[[server.tokens]]\nname = \"desk\"\ntoken = \"{TOKEN}\"\nmax_connections = 5\n"
    ));
    let rt = rt();
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let by = rt.spawn(bystander(feed.addr.clone(), stop));
    let (desk, stranger) = (ip("127.0.0.8"), ip("127.0.0.9"));
    let with_token = format!("token={TOKEN}");
    let (over_token, over_desk_ip, over_stranger, _held) = rt.block_on(async {
        let mut held = Vec::new();
        for _ in 0..5 {
            held.push(try_connect_from(&feed.addr, &with_token, desk).await.expect("within the token's 5"));
        }
        let over_token = try_connect_from(&feed.addr, &with_token, desk).await.err();
        // The token's connections are not its IP's: the IP keeps its own 2 for clients without it.
        for _ in 0..2 {
            held.push(try_connect_from(&feed.addr, "", desk).await.expect("the IP's own allowance"));
        }
        let over_desk_ip = try_connect_from(&feed.addr, "", desk).await.err();
        for _ in 0..2 {
            held.push(try_connect_from(&feed.addr, "", stranger).await.expect("within the per-IP 2"));
        }
        let over_stranger = try_connect_from(&feed.addr, "", stranger).await.err();
        (over_token, over_desk_ip, over_stranger, held)
    });
    // Old code: one shared token and per-IP caps only, so the desk's third connection was refused.
    assert_eq!(over_token.as_deref(), Some("429"), "the token's sixth connection");
    assert_eq!(over_desk_ip.as_deref(), Some("429"), "the desk IP's third without the token");
    assert_eq!(over_stranger.as_deref(), Some("429"), "another IP without the token stops at the per-IP 2");
    wait_blocks(&feed, 5);
    stop_tx.send(true).unwrap();
    assert!(assert_chain_whole(&rt.block_on(by).unwrap()) > 5, "the bystander kept receiving");
}
