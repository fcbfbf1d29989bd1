//! `latency_stats` (the C++ auditor) against our server fed by the simulator for 10 s: every requested channel has
//! samples, no frame is bad, the audited stages' medians add up to the end-to-end median within 10%, and the table,
//! JSON, CSV and SVG are all written (the SVG well-formed XML).
//!
//! The binary comes from `make cpp-build` (build/latency_client/latency_stats, or `$LATENCY_STATS`); `make test`
//! builds it before the Rust tests. Run alone without it, the test says so and skips.

mod procs;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use procs::{HLBOOK, Proc, wait_health};

const HLSIM: &str = env!("CARGO_BIN_EXE_hlsim");

fn latency_stats() -> Option<PathBuf> {
    let p = std::env::var_os("LATENCY_STATS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../build/latency_client/latency_stats"));
    p.exists().then_some(p)
}

#[test]
fn latency_stats_reports_every_channel_from_our_server() {
    let Some(bin) = latency_stats() else {
        eprintln!("skipped: latency_stats not built (run `make cpp-build` or set LATENCY_STATS)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let sim = Proc::start(
        HLSIM,
        &[
            "--out",
            data.to_str().unwrap(),
            "--coins",
            "5",
            "--btc-orders",
            "4000",
            "--orders-per-coin",
            "300",
            "--reject-ratio",
            "2",
            "--info-listen",
            "127.0.0.1:0",
        ],
        &dir.path().join("sim.log"),
    );
    let info = sim.wait_line("info listening on", Duration::from_secs(30));
    let snaps = dir.path().join("snaps");
    let server = Proc::start(
        HLBOOK,
        &[
            "serve",
            "--node-dir",
            data.to_str().unwrap(),
            "--info-url",
            &format!("http://{info}/info"),
            "--snapshot-dir",
            snaps.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "none",
            "--validate-interval",
            "0",
        ],
        &dir.path().join("server.log"),
    );
    let addr = server.wait_line("hlbook listening on", Duration::from_secs(30));
    wait_health(&format!("http://{addr}"), Duration::from_secs(60), |h| h["state"] == "live");

    let out = |name: &str| dir.path().join(name);
    let run = Command::new(&bin)
        .args(["--url", &format!("ws://{addr}/ws"), "--coins", "all", "--channels", "l2Book,trades,bbo"])
        .args(["--duration", "10", "--audit", "--interval", "2"])
        .arg("--json")
        .arg(out("r.json"))
        .arg("--csv")
        .arg(out("r.csv"))
        .arg("--svg")
        .arg(out("r.svg"))
        .output()
        .expect("running latency_stats");
    let table = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "latency_stats failed: {}\n{table}", String::from_utf8_lossy(&run.stderr));
    assert!(table.contains("channel") && table.contains("p99.9"), "no table:\n{table}");

    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(out("r.json")).unwrap()).unwrap();
    let channels = report["channels"].as_array().expect("channels");
    assert_eq!(channels.len(), 3, "{report}");
    for c in channels {
        assert!(c["count"].as_u64().unwrap() > 0, "no samples: {c}");
        // With ?audit=1 our server splits every frame's latency into stages.
        assert!(c["audited_frames"].as_u64().unwrap() > 0, "no audited frames: {c}");
        // The four stages cover the whole way, so their medians add up to about the end-to-end median (issue #6:
        // within 10%).
        let stages = c["stages"].as_array().expect("stages with --audit");
        assert_eq!(stages.len(), 4, "{c}");
        let parts: f64 = stages.iter().map(|s| s["p50"].as_f64().unwrap()).sum();
        let whole = c["p50"].as_f64().unwrap();
        eprintln!("{}: stage medians add up to {parts:.3} ms, end-to-end median {whole:.3} ms", c["channel"]);
        assert!(
            within_10_percent(parts, whole),
            "{}: stage medians add up to {parts} ms, end to end {whole} ms",
            c["channel"]
        );
    }
    let counters = &report["counters"];
    assert_eq!(counters["bad_frames"], 0, "{counters}");
    assert_eq!(counters["error_frames"], 0, "{counters}");
    assert_eq!(counters["unknown_coin"], 0, "{counters}");
    assert!(report["coins"].as_array().unwrap().len() >= 3, "allMids gave too few coins: {report}");

    let csv = std::fs::read_to_string(out("r.csv")).unwrap();
    let rows: Vec<&str> = csv.lines().collect();
    assert!(rows[0].starts_with("window_start_unix_s,"), "{csv}");
    assert!(rows.len() > 3, "too few CSV windows: {csv}");

    let svg = std::fs::read_to_string(out("r.svg")).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("SVG is not well-formed XML: {e}"));
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    assert!(doc.descendants().filter(|n| n.has_tag_name("polyline")).count() >= 3, "one CDF per channel");
}

#[allow(clippy::float_arithmetic)]
fn within_10_percent(parts: f64, whole: f64) -> bool {
    (parts - whole).abs() <= 0.1 * whole
}
