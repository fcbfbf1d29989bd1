//! The server against the node simulator, one fault at a time, with the real binaries: `hlsim` writes a market
//! (and answers `fileSnapshot`), `hlbook serve` bootstraps from it while it writes, and at the end the server's
//! books must equal the simulator's own books order by order. The server must never exit, and its health state
//! and counters must tell what happened.

mod procs;

use std::time::Duration;

use hlbook::node::Mode;
use procs::{
    CHECKED_MARKET, Proc, assert_same_books, books_from_snapshot, counter, get_bytes, sim_books_at, start_serve,
    start_sim, wait_health,
};

const START: u64 = 1_000_000_000;

struct Run {
    sim: Proc,
    server: Proc,
    /// The admin listener: `/health` with the counters and sources, `/status`, `/l4snapshot`.
    admin: String,
    info_url: String,
    out: tempfile::TempDir,
    _logs: tempfile::TempDir,
    mode: Mode,
    last: u64,
}

/// Starts the simulator for `blocks` blocks with `fault` flags, then the server while it writes.
fn start(mode: Mode, blocks: u64, fault: &[&str], serve_extra: &[&str]) -> Run {
    let out = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let dir = out.path().join("data");
    let n = blocks.to_string();
    let mut args = vec!["--mode", mode.as_str(), "--blocks", &n];
    args.extend_from_slice(&CHECKED_MARKET);
    args.extend_from_slice(fault);
    let (sim, info_url) = start_sim(&dir, &args, &logs.path().join("sim.log"));
    let snaps = out.path().join("snapshots");
    let mut extra = vec!["--mode", mode.as_str()];
    extra.extend_from_slice(serve_extra);
    let server = start_serve(&dir, &info_url, &snaps, &extra, &logs.path().join("serve.log"));
    server.wait_line("hlbook listening on", Duration::from_secs(30));
    let admin = procs::admin_base(&server);
    Run { sim, server, admin, info_url, out, _logs: logs, mode, last: START + blocks - 1 }
}

/// Waits for the simulator's last block, then compares every order of every book. In streaming mode the last
/// block stays incomplete for the server (no later block number ever appears), so the server's books are brought
/// to the end by replaying the remaining lines of the files, which finishes it.
fn finish(mut run: Run) -> serde_json::Value {
    let theirs = sim_books_at(&run.info_url, run.out.path(), run.last);
    let target = if run.mode == Mode::Streaming { run.last - 1 } else { run.last };
    let health = wait_health(&run.admin, Duration::from_secs(60), |h| h["height"].as_u64() >= Some(target));
    let mut ours = books_from_snapshot(&get_bytes(&format!("{}/l4snapshot", run.admin)).unwrap());
    if ours.height() < run.last {
        hlbook::ingest::replay::replay(&mut ours, &run.out.path().join("data"), run.mode, |_| {}).unwrap();
    }
    assert_eq!(ours.height(), run.last);
    assert_same_books(&ours, &theirs);
    assert!(run.server.running(), "the server never exits on bad input");
    assert!(run.server.stop().success(), "SIGTERM exits 0");
    run.sim.stop();
    health
}

#[test]
fn clean_run_by_block() {
    let h = finish(start(Mode::ByBlock, 120, &[], &[]));
    for zero in ["gaps", "inconsistencies", "malformed_lines", "broken_blocks", "repairs"] {
        assert_eq!(counter(&h, zero), 0, "{zero}: {h}");
    }
    assert_eq!(counter(&h, "books_loaded"), 1, "bootstrap only: {h}");
}

#[test]
fn clean_run_streaming() {
    let h = finish(start(Mode::Streaming, 120, &[], &[]));
    for zero in ["gaps", "inconsistencies", "malformed_lines", "broken_blocks", "repairs"] {
        assert_eq!(counter(&h, zero), 0, "{zero}: {h}");
    }
}

#[test]
fn stop_mid_line_resyncs() {
    let h =
        finish(start(Mode::ByBlock, 150, &["--stop-mid-line-at", &(START + 60).to_string(), "--pause-secs", "1"], &[]));
    assert!(counter(&h, "malformed_lines") >= 1, "{h}");
    assert!(counter(&h, "books_loaded") >= 2, "bootstrap and one resync: {h}");
    assert_eq!(counter(&h, "inconsistencies"), 0, "{h}");
}

#[test]
fn pause_goes_stale_then_live() {
    let run = start(
        Mode::ByBlock,
        120,
        &["--pause-at", &(START + 50).to_string(), "--pause-secs", "4"],
        &["--stale-after", "1"],
    );
    let stale = wait_health(&run.admin, Duration::from_secs(60), |h| h["state"] == "stale");
    assert_eq!(stale["height"].as_u64(), Some(START + 49), "{stale}");
    wait_health(&run.admin, Duration::from_secs(60), |h| h["state"] == "live");
    let h = finish(run);
    assert_eq!((counter(&h, "gaps"), counter(&h, "books_loaded")), (0, 1), "{h}");
}

#[test]
fn restart_reemits_without_double_apply() {
    let h = finish(start(Mode::ByBlock, 120, &["--restart-at", &(START + 60).to_string(), "--restart-back", "5"], &[]));
    assert_eq!(counter(&h, "stale_lines"), 15, "5 blocks × 3 streams dropped: {h}");
    assert_eq!((counter(&h, "inconsistencies"), counter(&h, "books_loaded")), (0, 1), "{h}");
}

#[test]
fn restart_reemits_streaming() {
    let h = finish(start(Mode::Streaming, 120, &["--restart-at", &(START + 60).to_string()], &[]));
    assert!(counter(&h, "stale_lines") > 0, "{h}");
    assert_eq!((counter(&h, "inconsistencies"), counter(&h, "books_loaded")), (0, 1), "{h}");
}

#[test]
fn dropped_line_by_block_resyncs() {
    let h = finish(start(Mode::ByBlock, 150, &["--drop-block", &(START + 60).to_string()], &[]));
    assert_eq!(counter(&h, "broken_blocks"), 1, "{h}");
    assert!(counter(&h, "books_loaded") >= 2, "{h}");
}

#[test]
fn dropped_status_line_by_block_resyncs() {
    // The block's diffs were applied as soon as their line was read; its status line never comes, so the block
    // never completes and the resync replaces the half-applied books.
    let drop = ["--drop-block", &(START + 60).to_string(), "--drop-stream", "statuses"];
    let h = finish(start(Mode::ByBlock, 150, &drop, &[]));
    assert_eq!(counter(&h, "broken_blocks"), 1, "{h}");
    assert!(counter(&h, "books_loaded") >= 2, "{h}");
}

#[test]
fn dropped_line_streaming_is_caught_by_validation() {
    // A streaming stream skips heights by design: the loss is invisible in the lines, so validation finds it.
    let run = start(Mode::Streaming, 200, &["--drop-block", &(START + 40).to_string()], &["--validate-interval", "1"]);
    let h = wait_health(&run.admin, Duration::from_secs(60), |h| counter(h, "repairs") >= 1);
    assert!(counter(&h, "validation_mismatches") >= 1 || counter(&h, "inconsistencies") >= 1, "{h}");
    finish(run);
}

#[test]
fn corrupt_line_resyncs() {
    let h = finish(start(Mode::ByBlock, 150, &["--corrupt-at", &(START + 60).to_string()], &[]));
    assert_eq!(counter(&h, "malformed_lines"), 1, "{h}");
    assert!(counter(&h, "books_loaded") >= 2, "{h}");
}

#[test]
fn wrong_bootstrap_snapshot_is_repaired() {
    let run = start(Mode::ByBlock, 200, &["--snapshot-mismatch", "BTC"], &["--validate-interval", "1"]);
    let h = wait_health(&run.admin, Duration::from_secs(60), |h| counter(h, "repairs") >= 1);
    assert!(counter(&h, "validation_mismatches") >= 1, "{h}");
    let h = finish(run);
    assert!(counter(&h, "repairs") >= 1, "{h}");
}

#[test]
fn rollover_and_pruning_are_followed() {
    let run = start(Mode::ByBlock, 200, &["--rollover-secs", "2", "--prune-keep", "2"], &[]);
    let h = finish(run);
    assert!(counter(&h, "rollovers") >= 6, "three streams, at least two rollovers each: {h}");
    assert_eq!((counter(&h, "gaps"), counter(&h, "broken_blocks"), counter(&h, "books_loaded")), (0, 0, 1), "{h}");
}
