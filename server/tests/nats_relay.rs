//! The relay's side of NATS on a real nats-server: a publisher back after more than `max_age` starts after a fresh
//! node snapshot instead of republishing the disk (and the stream takes the config's new settings); a stream it
//! cannot change stops it with an error that says why; snapshot requests far above its height, or too frequent
//! from one edge, are refused (issue #43) and counted in its `/metrics`; a relay catching up on many blocks
//! publishes the three streams in step (issue #44).

#[allow(clippy::duplicate_mod)]
mod procs;

use std::time::{Duration, Instant};

use hlbook::ingest::nats::publish::MAX_LEAD_BLOCKS;
use procs::nats::{NatsServer, PUBLISHER_PASSWORD, connect_as_edge, relay, relay_config, user_config, wait_log};
use procs::{HLBOOK, Proc, get_bytes};

/// The JetStream view of stream `HL` (a client of its own).
async fn stream_info(url: &str) -> async_nats::jetstream::stream::Info {
    let js = async_nats::jetstream::new(async_nats::connect(url).await.unwrap());
    js.get_stream("HL").await.unwrap().info().await.unwrap().clone()
}

/// Polls the stream until `pred` holds (bounded).
fn wait_stream(
    rt: &tokio::runtime::Runtime,
    url: &str,
    what: &str,
    pred: impl Fn(&async_nats::jetstream::stream::Info) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let info = rt.block_on(stream_info(url));
        if pred(&info) {
            return;
        }
        assert!(Instant::now() < deadline, "the stream never {what}: {:?}", info.state);
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_publisher_back_after_max_age_starts_at_a_fresh_snapshot_not_the_whole_disk() {
    if !procs::nats::available_or_skip() {
        return;
    }
    let (data, logs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = |n: &str| logs.path().join(n);
    let nats = NatsServer::start(&log("nats"), "");
    let market = [&procs::CHECKED_MARKET[..], &["--blocks", "400"]].concat();
    let (_sim, info) = procs::start_sim(data.path(), &market, &log("sim.log"));
    let last = 1_000_000_000 + 399;
    let snaps = log("relay-snaps");
    let extra = ["--info-url", &info, "--snapshot-dir", snaps.to_str().unwrap()];
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();

    // Lines kept one second: the first publisher stops, and retention empties the stream.
    let short = relay_config(logs.path(), "max_age_secs = 1\nsnapshot_interval_secs = 0\n");
    let mut first = relay(&nats.url(), data.path(), &short, &extra, &log("relay1.log"), Duration::from_secs(30));
    wait_stream(&rt, &nats.url(), "took 30 lines", |i| i.state.last_sequence >= 30);
    assert!(first.stop().success());
    wait_stream(&rt, &nats.url(), "emptied", |i| i.state.messages == 0);
    let before = rt.block_on(stream_info(&nats.url())).state.last_sequence;

    // Back with six hours of retention: the stream takes it, and lines start after a snapshot taken now.
    let long = relay_config(logs.path(), "max_age_secs = 21600\nsnapshot_interval_secs = 0\n");
    let _second = relay(&nats.url(), data.path(), &long, &extra, &log("relay2.log"), Duration::from_secs(30));
    let said = procs::nats::wait_log(&log("relay2.log"), "fresh snapshot's height", Duration::from_secs(60));
    let height: u64 = said
        .split("fresh snapshot's height ")
        .nth(1)
        .unwrap()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(height > 1_000_000_000, "{said}");
    wait_stream(&rt, &nats.url(), "took lines again", |i| i.state.messages > 0);
    let info_now = rt.block_on(stream_info(&nats.url()));
    assert_eq!(info_now.config.max_age, Duration::from_secs(21600), "the config's new max_age applied");
    let first_height = rt.block_on(async {
        let js = async_nats::jetstream::new(async_nats::connect(nats.url()).await.unwrap());
        let st = js.get_stream("HL").await.unwrap();
        let m = st.get_raw_message(before + 1).await.unwrap();
        m.headers.get("Hl-Height").unwrap().as_str().parse::<u64>().unwrap()
    });
    assert_eq!(first_height, height + 1, "the first line after the outage is the snapshot's next block");

    // An edge with only NATS bootstraps from that snapshot and ends with the simulator's books.
    let edge_snaps = log("edge-snaps");
    let source = nats.source();
    #[rustfmt::skip]
    let args = [
        "serve", "--source", &source, "--mode", "by-block", "--info-url", "", "--snapshot-dir",
        edge_snaps.to_str().unwrap(), "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
        "--validate-interval", "0",
    ];
    let mut edge = Proc::start(HLBOOK, &args, &log("edge.log"));
    edge.wait_line("hlbook listening on", Duration::from_secs(30));
    let admin = procs::admin_base(&edge);
    let h = procs::wait_health(&admin, Duration::from_secs(180), |h| h["height"].as_u64() == Some(last));
    assert_eq!(procs::counter(&h, "gaps"), 0, "{h}");
    let ours = procs::books_from_snapshot(&get_bytes(&format!("{admin}/l4snapshot")).expect("snapshot"));
    procs::assert_same_books(&ours, &procs::sim_books_at(&info, logs.path(), last));
    assert!(edge.stop().success());
}

#[test]
fn a_stream_of_other_subjects_stops_the_relay_with_the_reason() {
    if !procs::nats::available_or_skip() {
        return;
    }
    let (data, logs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let nats = NatsServer::start(&logs.path().join("nats"), "");
    let market = [&procs::CHECKED_MARKET[..], &["--blocks", "5"]].concat();
    let (_sim, _info) = procs::start_sim(data.path(), &market, &logs.path().join("sim.log"));
    let conf = relay_config(logs.path(), "");
    let by_block = ["--mode", "by-block", "--info-url", "", "--admin-listen", "none"];
    let mut first =
        relay(&nats.url(), data.path(), &conf, &by_block, &logs.path().join("r1.log"), Duration::from_secs(30));
    assert!(first.stop().success());
    let (d, c) = (data.path().to_str().unwrap(), conf.to_str().unwrap());
    #[rustfmt::skip]
    let args = ["relay", "--nats", &nats.url(), "--config", c, "--node-dir", d, "--mode", "streaming", "--info-url", "", "--admin-listen", "none"];
    let out = std::process::Command::new(HLBOOK).args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a streaming relay on a by-block stream must stop: {err}");
    assert!(err.contains("another mode") && err.contains("nats.stream"), "{err}");
}

/// The largest lead of one subject over another in the stream's order: after each message, the highest block any
/// subject reached minus the lowest (a subject with no message yet counts as just before the first block).
async fn largest_lead(url: &str) -> u64 {
    let js = async_nats::jetstream::new(async_nats::connect(url).await.unwrap());
    let st = js.get_stream("HL").await.unwrap();
    let n = st.cached_info().state.last_sequence;
    let mut last = std::collections::HashMap::new();
    let (mut lead, mut first) = (0, None);
    for seq in 1..=n {
        let m = st.get_raw_message(seq).await.unwrap();
        let header = |k: &str| m.headers.get(k).unwrap().as_str().to_string();
        let h: u64 = header("Hl-Height").parse().unwrap();
        let before = *first.get_or_insert(h - 1);
        last.insert(header("Hl-Stream"), h);
        let at = ["fills", "diffs", "statuses"].map(|s| last.get(s).copied().unwrap_or(before));
        lead = lead.max(at.iter().max().unwrap() - at.iter().min().unwrap());
    }
    lead
}

/// The block of the last message on each line subject (0 for none).
async fn last_heights(url: &str) -> [u64; 3] {
    let js = async_nats::jetstream::new(async_nats::connect(url).await.unwrap());
    let st = js.get_stream("HL").await.unwrap();
    let mut out = [0; 3];
    for (i, s) in ["fills", "diffs", "statuses"].iter().enumerate() {
        if let Ok(m) = st.get_last_raw_message_by_subject(&format!("hl.by-block.{s}")).await {
            out[i] = m.headers.get("Hl-Height").unwrap().as_str().parse().unwrap();
        }
    }
    out
}

/// The node wrote 1,500 blocks before the relay starts: it catches up on all of them, and walking the stream in
/// order, no subject is ever more than `MAX_LEAD_BLOCKS` ahead of another (published one stream after another,
/// the fills would be 1,500 blocks ahead of the statuses), so an edge reading this history holds a few blocks of
/// lines at most while their blocks complete.
#[test]
fn a_relay_catching_up_publishes_the_streams_in_step() {
    if !procs::nats::available_or_skip() {
        return;
    }
    let (data, logs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = |n: &str| logs.path().join(n);
    let nats = NatsServer::start(&log("nats"), "");
    const BLOCKS: u64 = 1500;
    #[rustfmt::skip]
    let market = [
        "--coins", "3", "--btc-orders", "400", "--orders-per-coin", "60", "--reject-ratio", "2",
        "--block-ms", "0", "--blocks", &BLOCKS.to_string(),
    ];
    let (_sim, _info) = procs::start_sim(data.path(), &market, &log("sim.log"));
    wait_log(&log("sim.log"), "all blocks produced", Duration::from_secs(120));
    let conf = relay_config(logs.path(), "");
    let _relay =
        relay(&nats.url(), data.path(), &conf, &["--info-url", ""], &log("relay.log"), Duration::from_secs(30));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let last = 1_000_000_000 + BLOCKS - 1;
    let deadline = Instant::now() + Duration::from_secs(120);
    while rt.block_on(last_heights(&nats.url())) != [last; 3] {
        assert!(Instant::now() < deadline, "the relay never published block {last} in every stream");
        std::thread::sleep(Duration::from_millis(50));
    }
    let lead = rt.block_on(largest_lead(&nats.url()));
    assert!(lead <= MAX_LEAD_BLOCKS, "a stream ran {lead} blocks ahead of another (bound {MAX_LEAD_BLOCKS})");
}

/// A snapshot request through the edge user's own inbox; the publisher's answer as JSON.
async fn ask(client: &async_nats::Client, min_height: u64) -> serde_json::Value {
    let body = serde_json::json!({ "min_height": min_height }).to_string();
    let req = async_nats::Request::new().payload(body.into()).timeout(Some(Duration::from_secs(120)));
    let answer = client.send_request("hl.snapshot.request", req).await.expect("an answer");
    serde_json::from_slice(&answer.payload).unwrap()
}

#[test]
fn snapshot_requests_above_the_height_or_too_often_are_refused() {
    if !procs::nats::available_or_skip() {
        return;
    }
    let (data, logs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = |n: &str| logs.path().join(n);
    let nats = NatsServer::start_with_accounts(&log("nats"));
    let (_sim, info) = procs::start_sim(data.path(), &procs::CHECKED_MARKET, &log("sim.log"));
    let conf = user_config(logs.path(), "publisher", PUBLISHER_PASSWORD, "snapshot_interval_secs = 0\n");
    let snaps = log("relay-snaps");
    let extra = ["--info-url", &info, "--snapshot-dir", snaps.to_str().unwrap(), "--admin-listen", "127.0.0.1:0"];
    let relay_log = log("relay.log");
    let (d, c) = (data.path().to_str().unwrap(), conf.to_str().unwrap());
    let url = nats.url();
    let args = [&["relay", "--nats", &url, "--config", c, "--node-dir", d][..], &extra].concat();
    let r = Proc::start(HLBOOK, &args, &relay_log);
    let admin = format!("http://{}", r.wait_line("relay admin listening on", Duration::from_secs(30)));
    r.wait_line("relay publishing to nats stream", Duration::from_secs(30));
    // The snapshot keeper subscribes on its own thread: asked before it has, NATS says no responders.
    wait_log(&relay_log, "serving node snapshots over NATS", Duration::from_secs(30));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let edge = connect_as_edge(&url).await;
        let far = ask(&edge, u64::MAX).await;
        assert!(far["error"].as_str().is_some_and(|e| e.contains("above")), "{far}");
        // The first fresh one is taken; the same edge asking again at once is refused, not a second node snapshot.
        let first = ask(&edge, 1).await;
        let h = first["stored"]["height"].as_u64().unwrap_or_else(|| panic!("{first}"));
        let again = ask(&edge, h + 1).await;
        assert!(again["error"].as_str().is_some_and(|e| e.contains("_INBOX_edge asked for a new snapshot")), "{again}");
        // What is stored is still answered.
        assert_eq!(ask(&edge, h).await["stored"]["height"].as_u64(), Some(h));
    });
    let metrics = String::from_utf8(get_bytes(&format!("{admin}/metrics")).unwrap()).unwrap();
    for want in [
        "hlbook_relay_snapshot_requests_total{result=\"refused\"} 2",
        "hlbook_relay_snapshot_requests_total{result=\"answered\"} 2",
        "hlbook_relay_snapshots_taken_total 1",
    ] {
        assert!(metrics.lines().any(|l| l == want), "{want} in:\n{metrics}");
    }
}
