//! Line fully written by the simulator → its step applied to our books, at mainnet rate and at 10×, both modes;
//! and the same with a validation cycle every second, to show what validation adds.
//!
//! Open loop: `hlsim` runs as its own process on its own schedule and records when it finished writing each line
//! of each block (`--timing`); ingest runs here, exactly as in `hlbook serve` (file source, inotify, snapshot
//! bootstrap from the simulator's info server), and records when it applied each line's step (fills handed on,
//! diffs applied, statuses completing the block). Latency is the difference, per line, after a warm-up; the
//! statuses line (the block's last) is the reference from before blocks were applied line by line. Needs the release `hlsim` binary beside this one (`make bench` builds
//! it). `HLBOOK_BENCH_SECS` sets the measured time per case (default 90 s: ≥ 1,000 blocks at 80 ms);
//! `HLBOOK_BENCH_SIM_ARGS` adds simulator flags (e.g. `--reject-ratio 0` to see the cost of rejection noise) and
//! `HLBOOK_BENCH_CASES` picks cases by index (e.g. `0,1`).

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

use hdrhistogram::Histogram;
use hlbook::book::Books;
use hlbook::ingest::info_client::SnapshotFrom;
use hlbook::ingest::live::{Ingest, LiveConfig, SourceSpec};
use hlbook::ingest::validate::{self, ValidateConfig};
use hlbook::node::{Mode, Stream};
use hlbook::state::Shared;
use hlbook_benches::{Proc, release_bin};

const WARMUP: Duration = Duration::from_secs(5);

fn start_sim(out: &Path, mode: &str, rate: &str) -> (Proc, String) {
    let mut child = Command::new(release_bin("hlsim"))
        .args(["--out", out.join("data").to_str().unwrap(), "--mode", mode, "--rate", rate])
        .args(["--timing", out.join("timing.csv").to_str().unwrap(), "--info-listen", "127.0.0.1:0"])
        .args(std::env::var("HLBOOK_BENCH_SIM_ARGS").unwrap_or_default().split_whitespace())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start hlsim");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).expect("hlsim prints its address");
    let addr = line.trim().strip_prefix("info listening on ").expect("address line").to_string();
    (Proc(child), addr)
}

/// Block height → when each of its lines was fully written (ns), indexed by `Stream::index` (0: none).
fn written_times(timing: &Path) -> HashMap<u64, [i64; 3]> {
    let text = std::fs::read_to_string(timing).expect("timing csv");
    let mut rows = text.lines();
    let header: Vec<&str> = rows.next().unwrap_or_default().split(',').collect();
    let col = |name: &str| header.iter().position(|c| *c == name).expect("a timing column");
    let cols = [col("fills_written_ns"), col("diffs_written_ns"), col("statuses_written_ns")];
    let mut out = HashMap::new();
    for row in rows {
        let f: Vec<i64> = row.split(',').filter_map(|x| x.parse().ok()).collect();
        if f.len() == header.len() {
            out.insert(f[0] as u64, cols.map(|c| f[c]));
        }
    }
    out
}

struct Case {
    mode: Mode,
    rate: &'static str,
    validate: bool,
}

fn run(case: &Case, secs: u64) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let (sim, info) = start_sim(tmp.path(), case.mode.as_str(), case.rate);
    let url = format!("http://{info}/info");
    let snaps = tmp.path().join("snapshots");
    let shared = Arc::new(Shared::new(Books::default(), Duration::from_secs(10)));
    let cfg = LiveConfig {
        sources: vec![SourceSpec::Files(tmp.path().join("data"))],
        mode: case.mode,
        race_grace: Duration::from_secs(1),
        poll_interval: Duration::from_millis(100),
        stale_after: Duration::from_secs(10),
        snapshots: vec![SnapshotFrom::Info { url: url.clone(), dir: snaps.clone() }],

        stream_lines: true,
        resync_min_interval: Duration::from_secs(5),
        limits: hlbook::ingest::limits::Limits::default(),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let ingest = Ingest::new(cfg, shared.clone());
    let (st, sh) = (stop.clone(), shared.clone());
    let t_ingest = std::thread::spawn(move || ingest.run(&st));
    let t_validate = case.validate.then(|| {
        let vc = ValidateConfig {
            info_url: url,
            snapshot_dir: snaps,
            interval: Some(Duration::from_secs(1)),
            repair_min_interval: Duration::from_secs(1),
        };
        let (st, sh) = (stop.clone(), sh);
        std::thread::spawn(move || validate::run(vc, sh, &st))
    });
    std::thread::sleep(WARMUP);
    let first = shared.health().height() + 1;
    std::thread::sleep(Duration::from_secs(secs));
    let last = shared.health().height();
    drop(sim);
    stop.store(true, Relaxed);
    t_ingest.join().unwrap();
    if let Some(t) = t_validate {
        t.join().unwrap();
    }
    report(case, &shared, &written_times(&tmp.path().join("timing.csv")), first..=last);
}

/// Per line of the block (fills handed on, diffs applied, statuses completing the block): that line written →
/// its step applied, and written → read. The statuses line is the block's last (the reference before issue #16).
fn report(case: &Case, shared: &Shared, written: &HashMap<u64, [i64; 3]>, heights: std::ops::RangeInclusive<u64>) {
    let hist = || Histogram::<u64>::new(3).unwrap();
    let (mut total, mut read): (Vec<_>, Vec<_>) = (0..3).map(|_| (hist(), hist())).unzip();
    for t in shared.times_in(heights) {
        let i = t.line.index();
        if let Some(&w) = written.get(&t.height).map(|w| &w[i]).filter(|w| **w > 0) {
            total[i].record((t.applied - w).max(0) as u64 / 1000).unwrap();
            read[i].record((t.read - w).max(0) as u64 / 1000).unwrap();
        }
    }
    let c = shared.health().counters();
    let v = if case.validate {
        format!(" validations={} mismatches={}", c.validations.get(), c.validation_mismatches.get())
    } else {
        String::new()
    };
    for line in Stream::ALL {
        let i = line.index();
        for (what, h) in [("written→applied", &total[i]), ("written→read", &read[i])] {
            println!(
                "{:<9} rate={:<3} validate={:<5} {:<8} {what:<16} n={:<5} p50={:>6} µs p99={:>6} µs p99.9={:>6} µs max={:>6} µs{v}",
                case.mode.as_str(),
                case.rate,
                case.validate,
                line.short(),
                h.len(),
                h.value_at_quantile(0.5),
                h.value_at_quantile(0.99),
                h.value_at_quantile(0.999),
                h.max(),
            );
        }
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a test run of benches (`cargo test --benches`) must not take minutes.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let secs = std::env::var("HLBOOK_BENCH_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(90);
    let cases = [
        Case { mode: Mode::ByBlock, rate: "1", validate: false },
        Case { mode: Mode::ByBlock, rate: "1", validate: true },
        Case { mode: Mode::ByBlock, rate: "10", validate: false },
        Case { mode: Mode::Streaming, rate: "1", validate: false },
        Case { mode: Mode::Streaming, rate: "10", validate: false },
    ];
    let pick = std::env::var("HLBOOK_BENCH_CASES").ok();
    for (i, case) in cases.iter().enumerate() {
        if pick.as_ref().is_none_or(|p| p.split(',').any(|x| x.trim() == i.to_string())) {
            run(case, secs);
        }
    }
}
