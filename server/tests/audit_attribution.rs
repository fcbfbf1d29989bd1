//! The audit puts a known delay in the right stage (issue #6's acceptance): the simulator holds the last line of
//! some blocks (the status line) for 30 ms after stamping its `local_time` (`--delay-last-line-ms`), which is time
//! between the node's write and our read, so it must show up in the status line's `node_write_to_read` and in no
//! other stage; and, since L2 is published from the diffs line (issue #16), not in the diffs line's stages at all.
//!
//! The delay is made large enough to be unmistakable on a busy shared machine, and every check is against it
//! (more than half of it where it belongs, less than half where it does not), never against a fixed time.
//! Compared by medians over hundreds of blocks, never single blocks: on a loaded two-core machine a single
//! block's read can be late by tens of ms, while the median of the delayed blocks against that of the plain ones
//! in the same run cancels everything the two share.
//!
//! * The server's own stages: one run delaying every second block; `/status?blocks=N` gives each block's
//!   stages, split by height parity.
//! * `latency_stats --audit`: it reports percentiles, not blocks, so two simulated markets run side by side (same
//!   load on both), one delaying every block and one none, and its `node_write_to_read` p50 of l2Book and bbo
//!   frames (built from the undelayed diffs line) is compared: the same in both.
//!   Skipped (with a note) when `latency_stats` is not built.

mod auditkit;
mod livefeed;
mod procs;

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use auditkit::{Blocks, Reader, gather, median};
use hlbook::audit::STAGES;
use livefeed::LiveRig;
use procs::get_json;
use serde_json::{Value, json};

const DELAY_MS: f64 = 30.0;
const DELAY: &str = "30";
/// Where the delay belongs a median moves by more than this, elsewhere by less.
const HALF_DELAY_MS: f64 = DELAY_MS / 2.0;
/// Blocks per parity the medians are taken over.
const PER_SIDE: usize = 150;
/// Blocks right after going live are left out (the books were just loaded; the first frames go out).
const WARMUP_BLOCKS: u64 = 50;

/// Both tests load the machine; one at a time keeps each one's numbers about its own markets.
static SERIAL: Mutex<()> = Mutex::new(());

/// A light market at 25 blocks a second (many blocks quickly; small lines, so reading one is quick), with
/// validation off so no snapshot work lands in some blocks' stages; `delay` = (ms, every).
fn market(delay: Option<(&str, &str)>) -> LiveRig {
    // Each block's lines at once (`--burst`): the test compares the node-lag medians of two halves of the blocks,
    // which a processing span drawn per block would only blur.
    let mut flags =
        vec![("--block-ms", "40"), ("--rate", "0.1"), ("--reject-ratio", "1"), ("--coins", "4"), ("--burst", "true")];
    if let Some((ms, every)) = delay {
        flags.push(("--delay-last-line-ms", ms));
        flags.push(("--delay-every", every));
    }
    LiveRig::start_with(&flags, "\n[ingest]\nvalidate_interval_secs = 0\n")
}

fn subscriptions() -> Vec<Value> {
    vec![
        json!({"type": "allMids"}),
        json!({"type": "l2Book", "coin": "BTC"}),
        json!({"type": "trades", "coin": "BTC"}),
        json!({"type": "bbo", "coin": "ETH"}),
        // Frames built from the status line, so its write stages happen too.
        json!({"type": "l4Book", "coin": "BTC"}),
    ]
}

#[allow(clippy::float_arithmetic)]
fn ms(ns: i64) -> f64 {
    ns as f64 / 1e6
}

#[test]
#[allow(clippy::float_arithmetic)]
fn a_delayed_last_line_is_attributed_to_node_write_to_read() {
    let _serial = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    // Heights that are multiples of 2 are delayed.
    let feed = market(Some((DELAY, "2")));
    let live = get_json(&format!("{}/health", feed.base)).expect("health")["height"].as_u64().unwrap();
    let first = live + WARMUP_BLOCKS;
    // A subscriber, so the write stages happen too.
    let reader = Reader::start(&feed.ws_url(), &subscriptions());
    let (mut blocks, mut diffs_lines) = (Blocks::new(), Blocks::new());
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        gather(&feed.admin, "statuses", &mut blocks);
        gather(&feed.admin, "diffs", &mut diffs_lines);
        let counted = blocks.range(first..).count();
        if counted >= 2 * PER_SIDE + 10 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "only {counted} settled blocks after {first} within 240 s\n{}",
            feed.server_log()
        );
        std::thread::sleep(Duration::from_secs(5));
    }
    let received = reader.finish();
    assert!(received > 0, "the subscriber got nothing");

    // L2 does not wait for the held status line: the diffs line's read is as prompt in delayed blocks as in others.
    let read_of = |delayed: bool| -> Vec<f64> {
        let of_parity = diffs_lines.range(first..).filter(|(h, _)| (*h % 2 == 0) == delayed);
        of_parity.filter_map(|(_, s)| s.get("node_write_to_read").copied().map(ms)).collect()
    };
    let (d, p) = (read_of(true), read_of(false));
    assert!(d.len() >= PER_SIDE / 2 && p.len() >= PER_SIDE / 2, "too few diffs lines ({} / {})", d.len(), p.len());
    let diffs_diff = median(d) - median(p);
    assert!(
        diffs_diff.abs() < HALF_DELAY_MS,
        "the diffs line's node_write_to_read is {diffs_diff:.3} ms higher in delayed blocks: L2 waited for statuses"
    );

    let side = |delayed: bool, stage: &str| -> Vec<f64> {
        blocks
            .range(first..)
            .filter(|(h, _)| (*h % 2 == 0) == delayed)
            .filter_map(|(_, s)| s.get(stage).copied().map(ms))
            .collect()
    };
    let mut report = String::from("stage                       delayed p50  plain p50   diff (ms)   blocks\n");
    let mut diffs = std::collections::BTreeMap::new();
    for stage in STAGES {
        let (d, p) = (side(true, stage), side(false, stage));
        assert!(
            d.len() >= PER_SIDE / 2 && p.len() >= PER_SIDE / 2,
            "{stage}: too few blocks ({} / {})",
            d.len(),
            p.len()
        );
        let (dn, pn) = (d.len(), p.len());
        let (dm, pm) = (median(d), median(p));
        report += &format!("{stage:<28}{dm:>11.3}{pm:>11.3}{:>11.3}   {dn}/{pn}\n", dm - pm);
        diffs.insert(stage, dm - pm);
    }
    eprintln!("{report}");
    // The component stages: the delay is in node_write_to_read and nowhere else. (`block_to_last_write` is their
    // sum, not a stage of its own: the median of a sum of skewed parts moves with their spread too, so it is
    // checked block by block below instead.)
    for stage in STAGES.iter().filter(|s| **s != "block_to_last_write") {
        let diff = diffs[stage];
        let here = *stage == "node_write_to_read";
        assert!(
            if here { diff > HALF_DELAY_MS } else { diff.abs() < HALF_DELAY_MS },
            "{stage}: delayed blocks' median is {diff:.3} ms above the others' with a {DELAY_MS} ms delay, which \
             belongs {} this stage\n{report}",
            if here { "in" } else { "not in" }
        );
    }
    // Every block's end-to-end stage is exactly its parts: the delay cannot hide between stages.
    let chain = ["block_to_node_write", "node_write_to_read", "read_to_applied", "applied_to_published"];
    let mut whole_blocks = 0;
    for (h, s) in blocks.range(first..) {
        let (Some(whole), Some(last)) = (s.get("block_to_last_write"), s.get("published_to_last_write")) else {
            continue;
        };
        let parts: i64 = chain.iter().map(|c| s[*c]).sum::<i64>() + last;
        assert_eq!(parts, *whole, "block {h}: stages {s:?}");
        whole_blocks += 1;
    }
    assert!(whole_blocks >= PER_SIDE, "only {whole_blocks} blocks were written to the subscriber");

    // The stages add up: their medians against the end-to-end stage's, over all blocks.
    let all = |stage: &str| -> f64 {
        median(blocks.range(first..).filter_map(|(_, s)| s.get(stage).copied().map(ms)).collect())
    };
    let parts: f64 = STAGES[..5].iter().map(|s| all(s)).sum();
    let whole = all("block_to_last_write");
    assert!((parts - whole).abs() <= 0.1 * whole, "stage medians add up to {parts:.3} ms, end to end {whole:.3} ms");
}

fn latency_stats() -> Option<PathBuf> {
    let p = std::env::var_os("LATENCY_STATS").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../build/latency_client/latency_stats"),
        PathBuf::from,
    );
    p.exists().then_some(p)
}

/// Starts `latency_stats --audit` against `feed` for `secs`, writing its JSON report to `out`.
fn start_latency_stats(bin: &PathBuf, feed: &LiveRig, secs: u32, out: &std::path::Path) -> std::process::Child {
    Command::new(bin)
        .args(["--url", &feed.ws_url(), "--coins", "all", "--channels", "l2Book,bbo", "--audit"])
        .args(["--warmup", "2", "--duration", &secs.to_string()])
        .arg("--json")
        .arg(out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starting latency_stats")
}

/// Waits (bounded) for a `latency_stats` run and returns its report.
fn finish(mut child: std::process::Child, out: &std::path::Path, within: Duration) -> Value {
    let deadline = Instant::now() + within;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("latency_stats did not finish within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut err);
    }
    assert!(status.success(), "latency_stats failed: {err}");
    serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap()
}

/// p50 (ms) of a channel's stage in a report.
fn stage_p50(report: &Value, channel: &str, stage: &str) -> (f64, u64) {
    let c = report["channels"].as_array().unwrap().iter().find(|c| c["channel"] == channel).expect("channel");
    let s = c["stages"].as_array().expect("stages").iter().find(|s| s["stage"] == stage).expect("stage");
    (s["p50"].as_f64().unwrap(), s["count"].as_u64().unwrap())
}

#[test]
#[allow(clippy::float_arithmetic)]
fn latency_stats_shows_l2_frames_do_not_wait_for_a_delayed_status_line() {
    let Some(bin) = latency_stats() else {
        procs::skip("latency_stats not built (run `make cpp-build` or set LATENCY_STATS)");
        return;
    };
    let _serial = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let plain = market(None);
    let delayed = market(Some((DELAY, "1")));
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("plain.json"), dir.path().join("delayed.json"));
    const SECS: u32 = 25;
    let runs = [start_latency_stats(&bin, &plain, SECS, &a), start_latency_stats(&bin, &delayed, SECS, &b)];
    let [ra, rb] = runs;
    let within = Duration::from_secs(u64::from(SECS) + 60);
    let (plain_report, delayed_report) = (finish(ra, &a, within), finish(rb, &b, within));

    let mut report = String::from("channel stage                          plain p50  delayed p50   diff (ms)\n");
    let mut checked = Vec::new();
    for channel in ["l2Book", "bbo"] {
        for stage in ["block_to_node_write", "node_write_to_read", "read_to_sent", "sent_to_receive"] {
            let ((p, pn), (d, dn)) =
                (stage_p50(&plain_report, channel, stage), stage_p50(&delayed_report, channel, stage));
            assert!(pn >= 100 && dn >= 100, "{channel} {stage}: too few frames ({pn} / {dn})");
            report += &format!("{channel:<8}{stage:<30}{p:>11.3}{d:>13.3}{:>12.3}\n", d - p);
            if stage == "node_write_to_read" {
                checked.push((channel, d - p));
            }
        }
    }
    eprintln!("{report}");
    // l2Book and bbo are built from the diffs line, which is not held: the delayed status line costs them nothing.
    for (channel, diff) in checked {
        assert!(
            diff.abs() < HALF_DELAY_MS,
            "{channel}: latency_stats puts {diff:.3} ms more into node_write_to_read with the status line held {DELAY_MS} ms: it belongs to l4Book's line only\n{report}"
        );
    }
}
