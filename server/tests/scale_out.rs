//! The scale-out recipe of docs/operations.md on one machine, with the real binaries: `hlsim` plays the node,
//! `hlbook relay --nats` publishes its files into a real `nats-server`, two edge servers read the stream
//! (`--source nats://…`), and HAProxy balances
//! WebSocket clients over the edges with the shipped `deploy/haproxy/hlbook.cfg`. Clients through the balancer
//! must get exactly what clients of a single server reading the files get.

mod procs;

use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use procs::{HLBOOK, Proc, get_json, start_sim, wait_health};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

/// How long the clients read.
const COLLECT: Duration = Duration::from_secs(10);
/// Connections through the balancer.
const BALANCED: usize = 4;

/// The repository root (the workspace holds `server/`).
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The `haproxy` binary: on PATH, or in the sbin directories a non-root PATH often lacks.
fn haproxy() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join("haproxy"))
        .find(|p| p.is_file())
}

/// A listening socket on a port the kernel chose, for HAProxy to inherit (`bind fd@N`): nothing else can take the
/// port between choosing it and HAProxy's start, as it could if the port were released for HAProxy to bind.
fn inherited_listener() -> (TcpListener, u16, i32) {
    use std::os::fd::AsRawFd;
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    rustix::io::fcntl_setfd(&l, rustix::io::FdFlags::empty()).expect("clearing FD_CLOEXEC");
    let fd = l.as_raw_fd();
    (l, port, fd)
}

/// The shipped HAProxy config with its listen and server addresses replaced, everything else (mode, timeouts,
/// balance, health check and its timings) as shipped, so this test exercises the file operators install rather
/// than a copy of it. The first `bind` line becomes a plain-HTTP bind on `bind` (no certificate here), the other
/// `bind` lines (TLS) go; each `server` line keeps its name and options with the address of the next edge. One
/// more change: the global `maxconn` is lowered, because HAProxy needs about two descriptors per connection and
/// refuses to start when it cannot raise its limit that far (a test box or container without the privilege).
fn haproxy_config(shipped: &str, bind: &str, edges: &[String]) -> String {
    let (mut binds, mut servers, mut global) = (0, 0, false);
    let mut out = String::new();
    for line in shipped.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if !line.starts_with(char::is_whitespace) && !words.is_empty() {
            global = words[0] == "global";
        }
        match words.first() {
            Some(&"maxconn") if global => out.push_str("    maxconn 1000\n"),
            Some(&"bind") => {
                binds += 1;
                if binds == 1 {
                    out.push_str(&format!("    bind {bind}\n"));
                }
            }
            Some(&"server") => {
                let edge = edges
                    .get(servers)
                    .unwrap_or_else(|| panic!("the shipped config has more than {} servers", edges.len()));
                servers += 1;
                assert!(words.len() >= 3, "a server line without an address: {line}");
                out.push_str(&format!("    server {} {edge} {}\n", words[1], words[3..].join(" ")));
            }
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    assert!(binds >= 1, "the shipped config has no bind line:\n{shipped}");
    assert_eq!(servers, edges.len(), "the shipped config should name {} edge servers:\n{shipped}", edges.len());
    for want in ["mode http", "timeout tunnel", "option httpchk GET /health", "balance leastconn"] {
        assert!(out.contains(want), "the shipped config lost {want:?}:\n{out}");
    }
    out
}

/// One data frame as a client saw it: (channel, coin, audit height) → `data` as JSON text.
type Key = (String, String, u64);

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn connect(url: &str) -> Ws {
    let connecting = tokio_tungstenite::connect_async(url);
    match tokio::time::timeout(Duration::from_secs(10), connecting).await {
        Ok(Ok((ws, _))) => ws,
        Ok(Err(e)) => panic!("connecting {url}: {e}"),
        Err(e) => panic!("connecting {url}: no upgrade within 10 s ({e})"),
    }
}

/// What every client subscribes: full-depth l2Book and trades of BTC, aggregated l2Book and trades of ETH. One
/// l2Book variant per coin, because an l2Book frame does not say which variant it belongs to.
fn subscriptions() -> Vec<Value> {
    vec![
        json!({"type": "l2Book", "coin": "BTC"}),
        json!({"type": "trades", "coin": "BTC"}),
        json!({"type": "l2Book", "coin": "ETH", "nSigFigs": 4}),
        json!({"type": "trades", "coin": "ETH"}),
    ]
}

/// Subscribes, then reads until `until`; every data frame keyed by channel, coin and audit height.
async fn collect(mut ws: Ws, name: String, until: tokio::time::Instant) -> Vec<(Key, String)> {
    let subs = subscriptions();
    for s in &subs {
        let req = json!({"method": "subscribe", "subscription": s}).to_string();
        ws.send(Message::text(req)).await.unwrap_or_else(|e| panic!("{name}: subscribing: {e}"));
    }
    let (mut acks, mut frames) = (0, Vec::new());
    loop {
        let msg = match tokio::time::timeout_at(until, ws.next()).await {
            Err(_) => break,
            Ok(None) => panic!("{name}: the server closed the connection"),
            Ok(Some(Err(e))) => panic!("{name}: {e}"),
            Ok(Some(Ok(m))) => m,
        };
        let Message::Text(text) = msg else { continue };
        let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}: {text}"));
        let channel = v["channel"].as_str().unwrap_or_else(|| panic!("{name}: no channel: {text}"));
        let coin = match channel {
            "subscriptionResponse" => {
                acks += 1;
                continue;
            }
            "l2Book" => v["data"]["coin"].as_str(),
            "trades" => {
                let coins: BTreeSet<_> =
                    v["data"].as_array().into_iter().flatten().map(|t| t["coin"].as_str()).collect();
                assert_eq!(coins.len(), 1, "{name}: one coin per trades frame: {text}");
                coins.into_iter().next().flatten()
            }
            _ => panic!("{name}: unexpected message {text}"),
        };
        let coin = coin.unwrap_or_else(|| panic!("{name}: no coin: {text}")).to_string();
        let height = v["audit"]["height"].as_u64().unwrap_or_else(|| panic!("{name}: no audit height: {text}"));
        frames.push(((channel.to_string(), coin, height), v["data"].to_string()));
    }
    assert_eq!(acks, subs.len(), "{name}: every subscription acknowledged");
    let _ = ws.close(None).await;
    frames
}

/// Frames of several connections merged by key; one key with two different `data` is a failure.
fn merge(label: &str, conns: &[Vec<(Key, String)>]) -> BTreeMap<Key, String> {
    let mut all = BTreeMap::new();
    for (i, frames) in conns.iter().enumerate() {
        for (key, data) in frames {
            if let Some(prev) = all.insert(key.clone(), data.clone()) {
                assert_eq!(&prev, data, "{label} connection {i}: two different frames for {key:?}");
            }
        }
    }
    all
}

/// Heights of one coin's trades frames on one connection.
fn trade_heights(frames: &[(Key, String)], coin: &str) -> BTreeSet<u64> {
    frames.iter().filter(|((ch, c, _), _)| ch == "trades" && c == coin).map(|((_, _, h), _)| *h).collect()
}

/// A started server with its public and admin bases.
fn serve(args: &[&str], log: &Path) -> (Proc, String, String) {
    let p = Proc::start(HLBOOK, args, log);
    let base = format!("http://{}", p.wait_line("hlbook listening on", Duration::from_secs(30)));
    let admin = procs::admin_base(&p);
    (p, base, admin)
}

#[test]
fn clients_through_haproxy_see_what_one_server_sends() {
    let Some(haproxy) = haproxy() else {
        procs::skip("haproxy is not installed (`make setup` installs it: APT_PACKAGES)");
        return;
    };
    if !procs::nats::available_or_skip() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let log = |name: &str| logs.path().join(name);
    let data = work.path().join("data");
    let data = data.to_str().unwrap();
    // The node writes the snapshots every server asks for into one directory they all read, as on a shared disk.
    let snaps = work.path().join("snapshots");
    let snaps = snaps.to_str().unwrap();

    let sim_args = [
        "--mode",
        "by-block",
        "--coins",
        "4",
        "--btc-orders",
        "4000",
        "--orders-per-coin",
        "300",
        "--reject-ratio",
        "2",
        "--block-ms",
        "40",
    ];
    let (mut sim, info_url) = start_sim(Path::new(data), &sim_args, &log("sim.log"));

    let nats = procs::nats::NatsServer::start(&logs.path().join("nats"), "");
    let config = procs::nats::relay_config(logs.path(), "");
    let mut relay = procs::nats::publisher(&nats.url(), Path::new(data), "by-block", &config, &log("relay.log"));
    let source = nats.source();

    let common =
        ["--info-url", &info_url, "--snapshot-dir", snaps, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"];
    let edge_args: Vec<&str> = ["serve", "--source", &source, "--mode", "by-block", "--validate-interval", "0"]
        .into_iter()
        .chain(common)
        .collect();
    let (mut edge1, base1, admin1) = serve(&edge_args, &log("edge1.log"));
    let (mut edge2, base2, admin2) = serve(&edge_args, &log("edge2.log"));
    let ref_args: Vec<&str> = ["serve", "--node-dir", data, "--mode", "by-block", "--validate-interval", "0"]
        .into_iter()
        .chain(common)
        .collect();
    let (mut single, base_ref, _) = serve(&ref_args, &log("single.log"));
    for base in [&base1, &base2, &base_ref] {
        wait_health(base, Duration::from_secs(60), |h| h["state"] == "live" || h["state"] == "catching_up");
    }

    let shipped = std::fs::read_to_string(repo().join("deploy/haproxy/hlbook.cfg")).unwrap();
    let (_listener, port, fd) = inherited_listener();
    let edges: Vec<String> = [&base1, &base2].iter().map(|b| b.trim_start_matches("http://").to_string()).collect();
    let cfg = work.path().join("haproxy.cfg");
    std::fs::write(&cfg, haproxy_config(&shipped, &format!("fd@{fd}"), &edges)).unwrap();
    let (haproxy, cfg) = (haproxy.to_str().unwrap(), cfg.to_str().unwrap());
    let check = Command::new(haproxy).args(["-c", "-f", cfg]).output().unwrap();
    assert!(
        check.status.success(),
        "haproxy rejects the config made from deploy/haproxy/hlbook.cfg:\n{}{}\n{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr),
        std::fs::read_to_string(cfg).unwrap()
    );
    let mut balancer = Proc::start(haproxy, &["-f", cfg, "-db"], &log("haproxy.log"));
    let front = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = reqwest::blocking::get(format!("{front}/health")).map(|r| r.status().as_u16());
        if status.as_ref().is_ok_and(|s| *s == 200) {
            break;
        }
        assert!(balancer.running(), "haproxy exited: {}", std::fs::read_to_string(log("haproxy.log")).unwrap());
        assert!(Instant::now() < deadline, "GET /health through haproxy never answered 200; last: {status:?}");
        std::thread::sleep(Duration::from_millis(100));
    }

    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let ws_front = format!("ws://127.0.0.1:{port}/ws?audit=1");
    let ws_ref = format!("{}/ws?audit=1", base_ref.replace("http://", "ws://"));
    // One at a time, so leastconn sees each new connection before it places the next.
    let balanced: Vec<Ws> = (0..BALANCED).map(|_| rt.block_on(connect(&ws_front))).collect();
    let direct = rt.block_on(connect(&ws_ref));
    let until = tokio::time::Instant::now() + COLLECT;
    let readers: Vec<_> = balanced
        .into_iter()
        .enumerate()
        .map(|(i, ws)| rt.spawn(collect(ws, format!("balanced #{i}"), until)))
        .collect();
    let single_reader = rt.spawn(collect(direct, "single server".into(), until));

    // Both edges carry clients: leastconn spread the connections.
    let deadline = Instant::now() + Duration::from_secs(10);
    let per_edge = loop {
        let n: Vec<u64> = [&admin1, &admin2]
            .iter()
            .map(|b| get_json(&format!("{b}/health")).and_then(|h| h["connections"].as_u64()).unwrap_or(0))
            .collect();
        if n.iter().sum::<u64>() == BALANCED as u64 {
            break n;
        }
        assert!(Instant::now() < deadline, "the edges never held the {BALANCED} balanced connections: {n:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(per_edge.iter().all(|&n| n >= 1), "leastconn should use both edges: {per_edge:?}");
    let status = reqwest::blocking::get(format!("{front}/health")).expect("GET /health through haproxy").status();
    assert_eq!(status.as_u16(), 200, "GET /health through haproxy");

    let balanced: Vec<_> = readers.into_iter().map(|r| rt.block_on(r).expect("a balanced client")).collect();
    let single_frames = rt.block_on(single_reader).expect("the single-server client");
    drop(rt);

    let through = merge("balanced", &balanced);
    let reference = merge("single server", std::slice::from_ref(&single_frames));
    let mut common_keys: BTreeMap<&str, usize> = BTreeMap::new();
    for (key, data) in &through {
        if let Some(theirs) = reference.get(key) {
            assert_eq!(data, theirs, "{key:?}: through the balancer vs from the single server");
            *common_keys.entry(key.0.as_str()).or_default() += 1;
        }
    }
    eprintln!(
        "balanced connections per edge {per_edge:?}; frames through the balancer {}, from the single server {}, \
         compared {common_keys:?}",
        through.len(),
        reference.len()
    );
    for channel in ["l2Book", "trades"] {
        let n = common_keys.get(channel).copied().unwrap_or(0);
        assert!(n >= 20, "only {n} {channel} frames seen both ways (want ≥ 20): {common_keys:?}");
    }
    // Trades are never conflated: over the heights every connection was reading, each saw the same blocks.
    let conns: Vec<&Vec<(Key, String)>> = balanced.iter().chain([&single_frames]).collect();
    for coin in ["BTC", "ETH"] {
        let sets: Vec<BTreeSet<u64>> = conns.iter().map(|f| trade_heights(f, coin)).collect();
        let lo = sets.iter().map(|s| s.first().copied().unwrap_or(u64::MAX)).max().unwrap();
        let hi = sets.iter().map(|s| s.last().copied().unwrap_or(0)).min().unwrap();
        assert!(lo < hi, "{coin}: no trades heights common to every connection ({lo}..{hi})");
        let window: Vec<BTreeSet<u64>> = sets.iter().map(|s| s.range(lo..=hi).copied().collect()).collect();
        for (i, w) in window.iter().enumerate() {
            assert_eq!(w, &window[window.len() - 1], "{coin}: connection {i}'s trades blocks in {lo}..={hi}");
        }
    }

    for (p, name) in [(&mut edge1, "edge 1"), (&mut edge2, "edge 2"), (&mut single, "single server")] {
        assert!(p.running(), "{name} exited");
        assert!(p.stop().success(), "{name}: SIGTERM exits 0");
    }
    balancer.stop();
    relay.stop();
    sim.stop();
}
