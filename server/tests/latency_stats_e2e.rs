//! `latency_stats` (the C++ auditor) against our server fed by the simulator for 10 s: every requested channel has
//! samples and a healthy verdict (exit code 0), no frame is bad, the audit end-to-end row (receive − block_ns)
//! tracks the ms `time` row within the 1 ms grain, the table, JSON, CSV, SVGs and HdrHistogram log are all
//! written, each SVG chart has one series per channel with the JSON's counts, and the `--hlog` file read back with
//! the `hdrhistogram` crate's interval-log parser gives the same p50 / p99 / max.
//!
//! Through a proxy that cuts every connection every 2 s (a reset, no close), `--resume` loses nothing: each trades
//! subscription comes back with `since`, the frames received twice are dropped and the audit chain joins every
//! session to the one before (issue #46); the same run without `--resume` reports the heights between sessions as
//! loss.
//!
//! The binary comes from `make cpp-build` (build/latency_client/latency_stats, or `$LATENCY_STATS`); `make test`
//! builds it before the Rust tests. Run alone without it, the test says so and skips.

mod procs;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use hdrhistogram::Histogram;

use procs::fault_proxy::FaultProxy;
use procs::{Proc, start_serve, start_sim, wait_health};

fn latency_stats() -> Option<PathBuf> {
    let p = std::env::var_os("LATENCY_STATS").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../build/latency_client/latency_stats"),
        PathBuf::from,
    );
    p.exists().then_some(p)
}

#[test]
fn latency_stats_reports_every_channel_from_our_server() {
    let Some(bin) = latency_stats() else {
        procs::skip("latency_stats not built (run `make cpp-build` or set LATENCY_STATS)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_sim, _server, addr) = sim_and_server(dir.path());

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
        .arg("--hlog")
        .arg(out("r.hlog"))
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
        assert_eq!(c["verdict"], "ok", "{c}");
        // With ?audit=1 our server splits every frame's latency into stages.
        assert!(c["audited_frames"].as_u64().unwrap() > 0, "no audited frames: {c}");
        let stages = c["stages"].as_array().expect("stages with --audit");
        assert_eq!(stages.len(), 4, "{c}");
        for s in stages {
            assert!(s["count"].as_u64().unwrap() > 0, "stage never sampled: {s}");
        }
        let e2e = &c["audit_e2e"];
        assert!(e2e["count"].as_u64().unwrap() > 0, "{c}");
        // l2Book and bbo carry one sample per frame whose `time` is the block time truncated to the ms, so the ms
        // row is the audit row shifted by less than 1 ms (plus the histograms' < 0.1 % resolution).
        if c["channel"] != "trades" {
            let (ms, ns) = (ms_of(&c["p50"]), ms_of(&e2e["p50"]));
            eprintln!("{}: p50 ms row {ms:.3} ms, audit row {ns:.3} ms", c["channel"]);
            assert!(within_1ms(ms, ns), "{}: ms row p50 {ms}, audit row p50 {ns}", c["channel"]);
        }
    }
    assert_eq!(report["healthy"], true, "{report}");
    assert_eq!(report["health"]["missed_heights"], 0, "{report}");
    let counters = &report["counters"];
    assert_eq!(counters["bad_frames"], 0, "{counters}");
    assert_eq!(counters["error_frames"], 0, "{counters}");
    assert_eq!(counters["unknown_coin"], 0, "{counters}");
    assert!(report["coins"].as_array().unwrap().len() >= 3, "allMids gave too few coins: {report}");

    let csv = std::fs::read_to_string(out("r.csv")).unwrap();
    let rows: Vec<&str> = csv.lines().collect();
    assert!(rows[0].starts_with("window_start_unix_s,"), "{csv}");
    assert!(rows.len() > 3, "too few CSV windows: {csv}");

    // The charts: one series per channel, counting what the JSON counts.
    for (file, chart, count) in [
        ("r.svg", "percentiles", "/count"),
        ("r-stages.svg", "stages", "/audited_frames"),
        ("r-added.svg", "added", "/added/count"),
    ] {
        let svg = std::fs::read_to_string(out(file)).unwrap();
        let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{file} is not well-formed XML: {e}"));
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        let series: Vec<_> = doc.descendants().filter(|n| n.attribute("class") == Some("series")).collect();
        assert_eq!(series.len(), 3, "{file}: one series per channel");
        for (s, c) in series.iter().zip(channels) {
            assert_eq!(s.attribute("data-chart"), Some(chart), "{file}");
            assert_eq!(s.attribute("data-channel"), c["channel"].as_str(), "{file}");
            let n: u64 = s.attribute("data-count").unwrap().parse().unwrap();
            assert_eq!(Some(n), c.pointer(count).and_then(serde_json::Value::as_u64), "{file}: {c}");
        }
    }

    // The HdrHistogram log, read back by the reference reader: the intervals of each channel add up to the JSON's
    // whole-run histogram (same count; p50, p99 and max in the same HdrHistogram bucket).
    let hlog = std::fs::read(out("r.hlog")).unwrap();
    for c in channels {
        let name = c["channel"].as_str().unwrap();
        let h = read_hlog(&hlog, name);
        assert_eq!(h.len(), c["count"].as_u64().unwrap(), "{name}: hlog count");
        for (q, key) in [(0.5, "p50"), (0.99, "p99")] {
            let ours = us_of(&c[key]);
            assert!(
                h.equivalent(h.value_at_quantile(q), ours),
                "{name} {key}: hlog {} µs, ours {ours} µs",
                h.value_at_quantile(q)
            );
        }
        assert!(h.equivalent(h.max(), us_of(&c["max"])), "{name} max: hlog {} µs, ours {}", h.max(), c["max"]);
    }
}

/// hlsim (five coins: BTC, @107, xyz:GOLD, ETH, SOL) and hlbook following it, live; returns them and hlbook's
/// `HOST:PORT`.
fn sim_and_server(dir: &Path) -> (Proc, Proc, String) {
    let data = dir.join("data");
    let market = ["--coins", "5", "--btc-orders", "4000", "--orders-per-coin", "300", "--reject-ratio", "2"];
    let (sim, info_url) = start_sim(&data, &market, &dir.join("sim.log"));
    let snaps = dir.join("snaps");
    let server = start_serve(&data, &info_url, &snaps, &["--validate-interval", "0"], &dir.join("server.log"));
    let addr = server.wait_line("hlbook listening on", Duration::from_secs(30));
    wait_health(&format!("http://{addr}"), Duration::from_secs(60), |h| h["state"] == "live");
    (sim, server, addr)
}

#[test]
fn latency_stats_resume_loses_nothing_through_cut_connections() {
    let Some(bin) = latency_stats() else {
        procs::skip("latency_stats not built (run `make cpp-build` or set LATENCY_STATS)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_sim, _server, addr) = sim_and_server(dir.path());
    let proxy = FaultProxy::start(&addr, Duration::from_secs(2));
    let url = format!("ws://{}/ws", proxy.addr);
    let run = |resume: bool, json: &Path| -> Output {
        let mut cmd = Command::new(&bin);
        cmd.args(["--url", &url, "--coins", "BTC,ETH,SOL", "--channels", "trades,l2Book", "--duration", "12"]);
        cmd.arg("--audit").arg("--json").arg(json);
        if resume {
            cmd.arg("--resume");
        }
        cmd.output().expect("running latency_stats")
    };
    // Both at once, through the same cuts.
    let (resumed_json, plain_json) = (dir.path().join("resumed.json"), dir.path().join("plain.json"));
    let (resumed, plain) = std::thread::scope(|s| {
        let a = s.spawn(|| run(true, &resumed_json));
        let b = s.spawn(|| run(false, &plain_json));
        (a.join().unwrap(), b.join().unwrap())
    });
    eprintln!("the proxy cut {} connections", proxy.cuts());
    let resumed = report_of(&resumed, &resumed_json);
    let plain = report_of(&plain, &plain_json);
    let (rt, pt) = (trades_of(&resumed), trades_of(&plain));
    eprintln!("--resume: {}\nwithout: {}", resumed["verdict"], plain["verdict"]);

    // Both runs were cut, and the trades subscriptions came back each time.
    for (r, t) in [(&resumed, rt), (&plain, pt)] {
        assert!(r["counters"]["disconnects"].as_u64().unwrap() > 0, "never cut: {r}");
        assert!(t["count"].as_u64().unwrap() > 0, "no trades measured: {t}");
    }

    // --resume: every re-subscription asked for `since`, dropped what it had, and the chain joined on.
    assert!(rt["resumed"].as_u64().unwrap() > 0, "{rt}");
    assert!(rt["duplicates"].as_u64().unwrap() > 0, "the last height is always replayed: {rt}");
    for zero in ["lost_frames", "dropped_heights", "unjoined", "unjoined_heights", "resume_refused", "chain_mismatches"]
    {
        assert_eq!(rt[zero], 0, "{zero}: {rt}");
    }
    assert_eq!(resumed["health"]["missed_heights"], 0, "{resumed}");
    assert_eq!(resumed["healthy"], true, "{resumed}");
    assert_eq!(resumed["exit_code"], 0, "{resumed}");

    // Without it, the heights between a subscription's last frame before a cut and its first after are loss.
    assert_eq!(pt["resumed"], 0, "{pt}");
    assert!(pt["unjoined"].as_u64().unwrap() > 0, "{pt}");
    assert!(pt["unjoined_heights"].as_u64().unwrap() > 0, "{pt}");
    assert!(plain["health"]["missed_heights"].as_u64().unwrap() > 0, "{plain}");
    assert_eq!(plain["healthy"], false, "{plain}");
    assert_eq!(plain["exit_code"], 3, "{plain}");
    assert_eq!(pt["lost_ranges"][0]["by"], "reconnect", "{pt}");
}

/// The JSON report of a finished run, checked to agree with its exit status.
fn report_of(run: &Output, json: &Path) -> serde_json::Value {
    let out = String::from_utf8_lossy(&run.stdout);
    let bytes = std::fs::read(json).unwrap_or_else(|e| panic!("no report {}: {e}\n{out}", json.display()));
    let report: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(run.status.code().map(i64::from), report["exit_code"].as_i64(), "{out}");
    report
}

fn trades_of(report: &serde_json::Value) -> &serde_json::Value {
    let channels = report["channels"].as_array().expect("channels");
    channels.iter().find(|c| c["channel"] == "trades").expect("a trades channel")
}

/// Adds up every interval tagged `tag` (decoded with the crate's V2 deserializer).
fn read_hlog(log: &[u8], tag: &str) -> Histogram<u64> {
    use hdrhistogram::serialization::Deserializer;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
    let mut total: Option<Histogram<u64>> = None;
    let mut intervals = 0;
    for e in IntervalLogIterator::new(log) {
        let LogEntry::Interval(i) = e.expect("a well-formed interval log") else { continue };
        if i.tag().map(|t| t.as_str()) != Some(tag) {
            continue;
        }
        let bytes = base64_decode(i.encoded_histogram());
        let h: Histogram<u64> = Deserializer::new().deserialize(&mut &bytes[..]).expect("a V2 histogram");
        match &mut total {
            Some(t) => t.add(&h).unwrap(),
            None => total = Some(h),
        }
        intervals += 1;
    }
    assert!(intervals >= 5, "{tag}: {intervals} intervals in 10 s of 2 s windows");
    total.unwrap_or_else(|| panic!("no interval tagged {tag}"))
}

/// Standard base64 (the log's histogram column); the workspace has no base64 crate of its own.
fn base64_decode(s: &str) -> Vec<u8> {
    const T: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.bytes().filter(|&c| c != b'=') {
        let v = T.iter().position(|&t| t == c).expect("base64") as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

/// A JSON ms value with 3 decimals as integer µs.
fn us_of(v: &serde_json::Value) -> u64 {
    let s = v.to_string();
    let (int, frac) = s.split_once('.').unwrap_or((&s, "0"));
    int.parse::<u64>().unwrap() * 1000 + format!("{frac:0<3}")[..3].parse::<u64>().unwrap()
}

#[allow(clippy::float_arithmetic)]
fn ms_of(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap()
}

#[allow(clippy::float_arithmetic)]
fn within_1ms(ms_row: f64, audit_row: f64) -> bool {
    (ms_row - audit_row).abs() < 1.0 + 0.001 * audit_row
}
