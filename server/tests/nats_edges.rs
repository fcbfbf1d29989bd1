//! Edges that fall behind, with the real binaries and a real `nats-server` (issue #36): an edge stopped with
//! SIGSTOP delays no one (the other edge is fed all the while) and catches up on SIGCONT with books equal to a
//! replay; an edge started ten minutes of mainnet blocks behind the stream reads that history through NATS and
//! ends with the simulator's own books, holding little for incomplete blocks meanwhile (the relay publishes the
//! streams in step).

#[allow(clippy::duplicate_mod)]
mod common;
#[allow(clippy::duplicate_mod)]
mod procs;

use std::time::Duration;

use hlbook::node::Mode;
use procs::nats::publishing;
use procs::{counter, wait_health};

const FIRST: u64 = 985148182;
const LAST: u64 = 985148232;
const START: u64 = 1_000_000_000;
/// Ten minutes of mainnet blocks: the capture's 51 blocks span 3.38 s of block time (14.8 blocks a second).
const TEN_MINUTES_OF_BLOCKS: u64 = 8_900;

fn signal(pid: u32, sig: &str) {
    let ok = std::process::Command::new("kill").args([sig, &pid.to_string()]).status().unwrap().success();
    assert!(ok, "kill {sig} {pid}");
}

fn height(base: &str) -> u64 {
    procs::get_json(&format!("{base}/health")).and_then(|h| h["height"].as_u64()).expect("a height")
}

/// Books equal to the capture's replay at `LAST`, every block applied once.
fn check_replay(cap: &common::Capture, admin: &str) {
    let (ours, _) = procs::clean_books_at(admin, LAST, LAST - FIRST + 1, Duration::from_secs(120));
    assert_eq!(common::l4_digest(&ours), common::replay_digest(cap, Mode::ByBlock, LAST), "differs from replay");
}

#[test]
fn a_stopped_edge_delays_no_one_and_catches_up() {
    if !procs::nats::available_or_skip() {
        return;
    }
    let Some(cap) = common::unpack() else { return };
    let (dst, logs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = |name: &str| logs.path().join(name);
    let (nats, _publisher, _) = publishing(logs.path(), dst.path(), "by-block", "", "pub.log");
    let source = nats.source();
    let (mut a, base_a, admin_a) = procs::start_edge(&source, "by-block", &cap.snapshot, &log("a.log"));
    let (mut b, base_b, admin_b) = procs::start_edge(&source, "by-block", &cap.snapshot, &log("b.log"));

    let (src, out) = (cap.node_dir.clone(), dst.path().to_path_buf());
    let writer =
        std::thread::spawn(move || common::write_capture(&src, &out, Mode::ByBlock, None, Duration::from_millis(60)));
    wait_health(&base_b, Duration::from_secs(60), |h| h["height"].as_u64() >= Some(FIRST + 5));
    signal(b.pid().unwrap(), "-STOP");
    let (stopped_at, a_at_stop) = (FIRST + 5, height(&base_a));
    // While b is stopped, a is fed to the last block: b's unread lines wait in NATS, not in anyone's way.
    wait_health(&base_a, Duration::from_secs(90), |h| h["height"].as_u64() == Some(LAST));
    writer.join().unwrap();
    assert!(a_at_stop < LAST, "a was fed while b was stopped: from block {a_at_stop} (b at least {stopped_at})");
    signal(b.pid().unwrap(), "-CONT");

    check_replay(&cap, &admin_a);
    check_replay(&cap, &admin_b);
    assert!(a.stop().success() && b.stop().success());
}

/// The stream holds ten minutes of mainnet blocks (the simulator writes them as fast as it can, after a pause at
/// the start in which the test takes a snapshot); an edge bootstrapped from that early snapshot finds its place by
/// height (binary search) and reads all of it from NATS, ending with the simulator's books at the last block. The
/// relay publishes the three streams in step, so the edge does with 64 MiB of lines held for incomplete blocks
/// (`ingest.max_pending_bytes`; past it the books would resync): no stream of the history runs far ahead.
#[test]
fn an_edge_ten_minutes_behind_reads_the_history() {
    if !procs::nats::available_or_skip() {
        return;
    }
    let (data, logs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = |name: &str| logs.path().join(name);
    let (nats, _publisher, _) = publishing(logs.path(), data.path(), "by-block", "", "pub.log");
    let blocks = TEN_MINUTES_OF_BLOCKS + 100;
    let (n, pause_at) = (blocks.to_string(), (START + 20).to_string());
    let market = ["--coins", "3", "--btc-orders", "400", "--orders-per-coin", "60", "--reject-ratio", "2"];
    let fast = ["--block-ms", "0", "--blocks", &n, "--pause-at", &pause_at, "--pause-secs", "10"];
    let (_sim, info) = procs::start_sim(data.path(), &[&market[..], &fast[..]].concat(), &log("sim.log"));
    let snapshot = logs.path().join("early.json");
    // The simulator's snapshot as soon as it answers.
    let from = procs::sim_snapshot(&info, &snapshot).height();
    let last = START + blocks - 1;
    assert!(last - from >= TEN_MINUTES_OF_BLOCKS, "the snapshot came late (block {from}): too little history");
    // The whole history is written (and the simulator's books taken) before the edge starts.
    let theirs = procs::sim_books_at(&info, logs.path(), last);

    let (source, snap) = (nats.source(), snapshot.to_str().unwrap());
    #[rustfmt::skip]
    let args = [
        "serve", "--source", &source, "--mode", "by-block", "--snapshot-file", snap, "--info-url", "",
        "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--validate-interval", "0",
        "--set", "ingest.max_pending_bytes=67108864",
    ];
    let mut edge = procs::Proc::start(procs::HLBOOK, &args, &log("edge.log"));
    edge.wait_line("hlbook listening on", Duration::from_secs(20));
    let admin = procs::admin_base(&edge);
    // Each block after the snapshot applied once.
    let (ours, h) = procs::clean_books_at(&admin, last, last - from, Duration::from_secs(300));
    procs::assert_same_books(&ours, &theirs);
    assert_eq!(counter(&h, "pending_bytes_full"), 0, "no stream ran 64 MiB ahead of another: {h}");
    assert_eq!(counter(&h, "books_loaded"), 1, "bootstrapped once, never resynced: {h}");
    assert!(edge.stop().success());
}
