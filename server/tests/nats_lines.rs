//! Node lines through NATS JetStream with the real binaries and a real `nats-server`: `hlbook relay --nats` on
//! the node's files, edges on `--source nats://…` only. Every edge ends with the books of a `replay` of the files,
//! each block applied once, none skipped, through a publisher crash, an edge crash and restart, an edge that
//! starts late and reads history, and a NATS server crash and restart. Status lines travel compressed and in parts
//! (a small `nats.chunk_bytes` in by-block mode), so parts are reassembled and inflated under every fault.

#[allow(clippy::duplicate_mod)]
mod common;
#[allow(clippy::duplicate_mod)]
mod procs;

use std::path::Path;
use std::time::Duration;

use hlbook::node::Mode;
use procs::nats::{NatsServer, publisher, publishing, relay_config};
use procs::{HLBOOK, Proc, books_from_snapshot, counter, get_bytes, wait_health};

const FIRST: u64 = 985148182;

/// An edge fed only by NATS; returns it with its public and admin bases.
fn edge(url: &str, mode: &str, snapshot: &Path, log: &Path) -> (Proc, String, String) {
    procs::start_edge(&format!("{url}/HL"), mode, snapshot, log)
}

fn check(cap: &common::Capture, mode: Mode, admin: &str, last: u64) {
    let (ours, _) = procs::clean_books_at(admin, last, last - FIRST + 1, Duration::from_secs(90));
    assert_eq!(ours.height(), last);
    assert_eq!(common::l4_digest(&ours), common::replay_digest(cap, mode, last), "{mode:?}: differs from replay");
}

fn run(mode: Mode, last: u64, chunk_bytes: usize) {
    let m = mode.as_str();
    if !procs::nats::available_or_skip() {
        return;
    }
    let Some(cap) = common::unpack() else { return };
    let (dst, logs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = |name: &str| logs.path().join(name);
    let keys = format!("chunk_bytes = {chunk_bytes}\n");
    let (mut nats, mut pub1, config) = publishing(logs.path(), dst.path(), m, &keys, "pub1.log");
    let url = nats.url();
    let (mut a, base_a, admin_a) = edge(&url, m, &cap.snapshot, &log("a.log"));

    let (src, out) = (cap.node_dir.clone(), dst.path().to_path_buf());
    let writer = std::thread::spawn(move || common::write_capture(&src, &out, mode, None, Duration::from_millis(60)));
    // The publisher crashes part-way through and comes back: it goes on from what the stream holds.
    wait_health(&base_a, Duration::from_secs(60), |h| h["height"].as_u64() >= Some(FIRST + 10));
    pub1.kill();
    let _pub2 = publisher(&url, dst.path(), m, &config, &log("pub2.log"));
    // An edge that starts late reads the history it missed, then crashes and starts again.
    let (mut b, base_b, _) = edge(&url, m, &cap.snapshot, &log("b1.log"));
    wait_health(&base_b, Duration::from_secs(60), |h| h["height"].as_u64() >= Some(FIRST + 20));
    b.kill();
    // NATS itself crashes and restarts (same port, same store): publisher and edges reconnect.
    wait_health(&base_a, Duration::from_secs(60), |h| h["height"].as_u64() >= Some(FIRST + 25));
    nats.restart();
    let (mut b2, _, admin_b2) = edge(&url, m, &cap.snapshot, &log("b2.log"));
    writer.join().unwrap();

    check(&cap, mode, &admin_a, last);
    check(&cap, mode, &admin_b2, last);
    // Edge a lived through the NATS restart: it lost its consumer and started another, and never exited.
    let h = procs::get_json(&format!("{admin_a}/health")).unwrap();
    assert!(counter(&h, "source_disconnects") >= 1 && counter(&h, "source_connects") >= 2, "{h}");
    assert!(a.running(), "an edge never exits on a lost NATS connection");
    assert!(a.stop().success() && b2.stop().success());
}

#[test]
fn by_block_in_parts_through_publisher_edge_and_nats_crashes() {
    // Compressed status lines are ~20 KB here: parts of 4 KB still cut each into several.
    run(Mode::ByBlock, 985148232, 4096);
}

/// Streaming at line speed, where a NATS restart lands while a block's diffs are partly applied: the edge goes on
/// from the stream sequence after its last line, so no diff is applied twice.
#[test]
fn streaming_through_publisher_edge_and_nats_crashes() {
    run(Mode::Streaming, 985148231, 900 * 1024);
}

/// Whole-market status lines of several MB (the simulator at mainnet's rejection ratio) cross NATS in parts under
/// its default 1 MB payload limit and arrive whole: the edge's books equal the simulator's own at the last block.
#[test]
fn multi_mb_status_lines_arrive_whole() {
    multi_mb_lines(0);
}

/// The same lines zstd-compressed by the publisher (the default): what JetStream stores is a fraction of the
/// lines, and the edge inflates them to the same books.
#[test]
fn multi_mb_status_lines_arrive_whole_compressed() {
    multi_mb_lines(32 * 1024);
}

fn multi_mb_lines(compress_min_bytes: usize) {
    if !procs::nats::available_or_skip() {
        return;
    }
    let (data, logs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = |name: &str| logs.path().join(name);
    let nats = NatsServer::start(&logs.path().join("nats"), "");
    let market = ["--coins", "5", "--btc-orders", "4000", "--orders-per-coin", "300", "--block-ms", "100"];
    let market = [&market[..], &["--reject-ratio", "20", "--blocks", "40"]].concat();
    let (_sim, info) = procs::start_sim(data.path(), &market, &log("sim.log"));
    let config = relay_config(logs.path(), &format!("compress_min_bytes = {compress_min_bytes}\n"));
    let _publisher = publisher(&nats.url(), data.path(), "by-block", &config, &log("pub.log"));
    let source = nats.source();
    let extra = ["--source", &source, "--validate-interval", "0"];
    let (mut server, _, admin) = procs::start_info_edge(&info, &log("snapshots"), &extra, &log("edge.log"));
    let last = 1_000_000_000 + 39;
    let h = wait_health(&admin, Duration::from_secs(120), |h| h["height"].as_u64() == Some(last));
    let statuses = data.path().join("node_order_statuses_by_block");
    let largest = largest_line(&statuses);
    assert!(largest > 3 << 20, "the test needs status lines of several MB, not {largest} bytes");
    let (lines, stored) = (bytes_under(&statuses), bytes_under(&logs.path().join("nats")));
    if compress_min_bytes > 0 {
        assert!(stored * 4 < lines, "compressed: NATS stored {stored} bytes for {lines} bytes of status lines");
    } else {
        assert!(stored > lines, "uncompressed: NATS stored {stored} bytes for {lines} bytes of status lines");
    }
    let ours = books_from_snapshot(&get_bytes(&format!("{admin}/l4snapshot")).expect("snapshot"));
    procs::assert_same_books(&ours, &procs::sim_books_at(&info, logs.path(), last));
    for zero in ["gaps", "inconsistencies", "malformed_lines", "broken_blocks", "lines_too_long"] {
        assert_eq!(counter(&h, zero), 0, "{zero}: {h}");
    }
    assert!(server.stop().success());
}

/// The bytes of every file under `dir`.
fn bytes_under(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .fold(0, |n, p| n + if p.is_dir() { bytes_under(&p) } else { std::fs::metadata(&p).map_or(0, |m| m.len()) })
}

fn largest_line(dir: &Path) -> usize {
    let mut largest = 0;
    for day in std::fs::read_dir(dir.join("hourly")).unwrap() {
        for hour in std::fs::read_dir(day.unwrap().path()).unwrap() {
            let text = std::fs::read(hour.unwrap().path()).unwrap();
            largest = largest.max(text.split(|&b| b == b'\n').map(<[u8]>::len).max().unwrap_or(0));
        }
    }
    largest
}

/// NATS races the node's files like any other source: the edge takes each line from whichever brings it first,
/// checks it against the other's copy, and ends equal to replay with no disagreement.
#[test]
fn nats_races_the_files() {
    if !procs::nats::available_or_skip() {
        return;
    }
    let Some(cap) = common::unpack() else { return };
    let (dst, logs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = |name: &str| logs.path().join(name);
    let (nats, _publisher, _) = publishing(logs.path(), dst.path(), "by-block", "", "pub.log");
    let (files, source) = (format!("file:{}", dst.path().display()), nats.source());
    let snapshot = cap.snapshot.to_str().unwrap();
    let args = ["serve", "--source", &files, "--source", &source, "--snapshot-file", snapshot, "--info-url", ""];
    let args = [&args[..], &["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--validate-interval", "0"]];
    let mut server = Proc::start(HLBOOK, &args.concat(), &log("edge.log"));
    server.wait_line("hlbook listening on", Duration::from_secs(20));
    let admin = procs::admin_base(&server);
    common::write_capture(&cap.node_dir, dst.path(), Mode::ByBlock, None, Duration::from_millis(60));
    check(&cap, Mode::ByBlock, &admin, 985148232);
    let h = procs::get_json(&format!("{admin}/health")).unwrap();
    assert_eq!(counter(&h, "disagreements"), 0, "{h}");
    let names: Vec<&str> = h["sources"].as_array().unwrap().iter().filter_map(|s| s["name"].as_str()).collect();
    assert_eq!(names.len(), 2, "{h}");
    assert!(server.stop().success());
}
