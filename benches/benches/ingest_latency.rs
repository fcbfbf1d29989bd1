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
use std::path::Path;
use std::time::Duration;

use hdrhistogram::Histogram;
use hlbook::ingest::info_client::SnapshotFrom;
use hlbook::ingest::validate::{self, ValidateConfig};
use hlbook::node::{Mode, Stream};
use hlbook::state::Shared;
use hlbook_benches::{Follower, written_times};
use rig::Proc;

// The tests' process rig (server/tests/procs): how every test and bench starts hlsim and hlbook.
#[allow(clippy::duration_suboptimal_units)]
#[path = "../../server/tests/procs/mod.rs"]
mod rig;

const WARMUP: Duration = Duration::from_secs(5);

fn start_sim(out: &Path, mode: &str, rate: &str) -> (Proc, String) {
    let timing = out.join("timing.csv");
    let mut market = vec!["--mode", mode, "--rate", rate, "--timing", timing.to_str().unwrap()];
    let extra = std::env::var("HLBOOK_BENCH_SIM_ARGS").unwrap_or_default();
    market.extend(extra.split_whitespace());
    rig::start_sim(&out.join("data"), &market, &out.join("sim.log"))
}

struct Case {
    mode: Mode,
    rate: &'static str,
    validate: bool,
}

fn run(case: &Case, secs: u64) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let (sim, url) = start_sim(tmp.path(), case.mode.as_str(), case.rate);
    let snaps = tmp.path().join("snapshots");
    let follower = Follower::start(&tmp.path().join("data"), case.mode, &url, &snaps);
    let (stop, shared) = (follower.stop.clone(), follower.shared.clone());
    let t_validate = case.validate.then(|| {
        let vc = ValidateConfig {
            from: SnapshotFrom::Info { url, dir: snaps },
            interval: Some(Duration::from_secs(1)),
            repair_min_interval: Duration::from_secs(1),
        };
        let (st, sh) = (stop.clone(), shared.clone());
        std::thread::spawn(move || validate::run(vc, sh, &st))
    });
    std::thread::sleep(WARMUP);
    let first = shared.health().height() + 1;
    std::thread::sleep(Duration::from_secs(secs));
    let last = shared.health().height();
    drop(sim);
    follower.finish();
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
