//! `latency_stats --audit` against our server, on the questions a user asks of it (issue #32): is a quiet coin
//! called lossy, is a frame lost on the way named exactly, is a slow client's conflation told apart from loss,
//! does a feed without audit fields pass as healthy, and does a server restart read as loss of heights. Each
//! runs the real binaries: hlsim (with a universe of 400 coins, most of them quiet, as mainnet's are), hlbook
//! serve, and the C++ `latency_stats` from `make cpp-build`.

mod procs;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::Duration;

use procs::{Proc, admin_base, get_json, start_serve_at, start_serve_env, start_sim, wait_health};
use serde_json::Value;

/// One run at a time: each loads the two cores with a 400-coin market.
static SERIAL: Mutex<()> = Mutex::new(());

/// 400 coins (mainnet lists about as many): the ones past the named 13 trade rarely, so many blocks leave them
/// alone.
const MARKET: [&str; 8] = ["--coins", "400", "--btc-orders", "4000", "--orders-per-coin", "20", "--reject-ratio", "2"];

fn latency_stats() -> Option<PathBuf> {
    let p = std::env::var_os("LATENCY_STATS").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../build/latency_client/latency_stats"),
        PathBuf::from,
    );
    p.exists().then_some(p)
}

/// The simulator and a server following it (with `extra` flags and `env`), live.
struct LiveRig {
    _sim: Proc,
    server: Proc,
    ws: String,
    base: String,
    admin: String,
    info_url: String,
    dir: tempfile::TempDir,
}

fn feed(extra: &[&str], env: &[(&str, &str)]) -> LiveRig {
    let dir = tempfile::tempdir().unwrap();
    let (sim, info_url) = start_sim(&dir.path().join("data"), &MARKET, &dir.path().join("sim.log"));
    let server = start_serve_env(
        &dir.path().join("data"),
        &info_url,
        &dir.path().join("snaps"),
        extra,
        env,
        &dir.path().join("serve.log"),
    );
    let addr = server.wait_line("hlbook listening on", Duration::from_secs(60));
    let admin = admin_base(&server);
    let base = format!("http://{addr}");
    wait_health(&base, Duration::from_secs(120), |h| h["state"] == "live");
    LiveRig { _sim: sim, server, ws: format!("ws://{addr}/ws"), base, admin, info_url, dir }
}

impl LiveRig {
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("serve.log")).unwrap_or_default()
    }

    fn height(&self) -> u64 {
        get_json(&format!("{}/health", self.base)).expect("health")["height"].as_u64().unwrap()
    }
}

/// Runs `latency_stats --audit` with `args` and returns its exit code, stdout and JSON report.
fn run(bin: &Path, url: &str, args: &[&str], json: &Path) -> (i32, String, Value) {
    let Output { status, stdout, stderr } = Command::new(bin)
        .args(["--url", url, "--audit", "--json"])
        .arg(json)
        .args(args)
        .output()
        .expect("running latency_stats");
    let out = String::from_utf8_lossy(&stdout).into_owned();
    let report = serde_json::from_slice(&std::fs::read(json).unwrap_or_default())
        .unwrap_or_else(|e| panic!("no JSON report ({e}):\n{out}\n{}", String::from_utf8_lossy(&stderr)));
    (status.code().expect("an exit code"), out, report)
}

fn channel<'a>(report: &'a Value, name: &str) -> &'a Value {
    let all = report["channels"].as_array().expect("channels");
    all.iter().find(|c| c["channel"] == name).unwrap_or_else(|| panic!("no {name} in {report}"))
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// `setup`, for a test that needs the server's fault hooks (`HLBOOK_TEST_*`), which only `test-hooks` builds have.
fn setup_with_hooks() -> Option<(std::sync::MutexGuard<'static, ()>, PathBuf)> {
    if !cfg!(feature = "test-hooks") {
        procs::skip("the server's test hooks are compiled out: build with `--features test-hooks` (make test does)");
        return None;
    }
    setup()
}

/// Takes the lock and the binary, or says why the test cannot run.
fn setup() -> Option<(std::sync::MutexGuard<'static, ()>, PathBuf)> {
    let Some(bin) = latency_stats() else {
        procs::skip("latency_stats not built (run `make cpp-build` or set LATENCY_STATS)");
        return None;
    };
    Some((SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner), bin))
}

#[test]
fn a_quiet_coin_is_not_loss() {
    let Some((_serial, bin)) = setup() else { return };
    let f = feed(&[], &[]);
    let from = f.height();
    let json = f.dir.path().join("quiet.json");
    let (code, out, report) = run(&bin, &f.ws, &["--coins", "C150", "--channels", "l2Book", "--duration", "20"], &json);
    let blocks = f.height() - from;
    let l2 = channel(&report, "l2Book");
    // The point of the test: many blocks left the coin alone.
    assert!(n(&l2["chained_frames"]) < blocks * 9 / 10, "C150 changed in nearly every block: {l2}\n{out}");
    assert!(n(&l2["chained_frames"]) >= 20, "too few frames to judge: {l2}");
    assert_eq!(code, 0, "{out}");
    assert_eq!(report["result"], "HEALTHY", "{out}");
    for zero in ["lost_frames", "dropped_heights", "conflated", "height_regressions"] {
        assert_eq!(n(&l2[zero]), 0, "{zero}: {l2}");
    }
}

#[test]
fn a_frame_lost_on_the_way_is_named_by_its_height() {
    let Some((_serial, bin)) = setup_with_hooks() else { return };
    let f = feed(&[], &[("HLBOOK_TEST_DROP_FRAME", "6")]);
    let json = f.dir.path().join("drop.json");
    let (code, out, report) = run(&bin, &f.ws, &["--coins", "BTC", "--channels", "l2Book", "--duration", "6"], &json);
    let log = f.log();
    let hook = log.lines().find(|l| l.contains("HLBOOK_TEST_DROP_FRAME")).expect("the hook's log line");
    let height: u64 = hook.split("height=").nth(1).unwrap().split_whitespace().next().unwrap().parse().unwrap();
    assert_eq!(code, 3, "{out}");
    let l2 = channel(&report, "l2Book");
    assert_eq!(n(&l2["lost_frames"]), 1, "{l2}");
    let ranges = l2["lost_ranges"].as_array().unwrap();
    assert_eq!(ranges.len(), 1, "{l2}");
    assert_eq!((&ranges[0]["coin"], n(&ranges[0]["first"]), n(&ranges[0]["last"])), (&"BTC".into(), height, height));
    assert!(out.contains(&format!("BTC {height}")), "the table names the height:\n{out}");
}

#[test]
fn a_slow_client_is_told_conflation_and_dropped_trades_apart_from_loss() {
    let Some((_serial, bin)) = setup() else { return };
    // A short backlog, so a client that stops reading for 6 s falls behind on trades.
    let f = feed(&["--set", "server.backlog_blocks=20"], &[]);
    let conflated_before = ws_counter(&f, "conflated");
    // Every coin's book, so a stalled client's socket buffers fill and the server's writes block.
    let args = ["--coins", "all", "--duration", "14", "--stall", "3,6", "--max-silence", "12"];
    let json = f.dir.path().join("books.json");
    let (code, out, report) = run(&bin, &f.ws, &[&args[..], &["--channels", "l2Book"]].concat(), &json);
    let l2 = channel(&report, "l2Book");
    let conflated = n(&l2["conflated"]);
    assert!(conflated > 0, "the server never conflated: {l2}\n{out}");
    assert_eq!(conflated, ws_counter(&f, "conflated") - conflated_before, "the server's own count, exactly");
    assert_eq!((n(&l2["lost_frames"]), n(&l2["dropped_heights"])), (0, 0), "{l2}");
    assert_eq!(code, 0, "conflated books are not lost data:\n{out}");

    let json = f.dir.path().join("trades.json");
    let (code, out, report) = run(&bin, &f.ws, &[&args[..], &["--channels", "l2Book,trades"]].concat(), &json);
    let trades = channel(&report, "trades");
    assert!(n(&trades["dropped_heights"]) > 0, "the server dropped no trades: {trades}\n{out}");
    assert_eq!(trades["verdict"], "lost", "{trades}");
    assert_eq!(code, 3, "lost trades are loss:\n{out}");
}

/// A WebSocket counter from `/status`.
fn ws_counter(f: &LiveRig, name: &str) -> u64 {
    n(&get_json(&format!("{}/status", f.admin)).expect("status")[name])
}

#[test]
fn a_feed_without_audit_fields_is_unverified() {
    let Some((_serial, bin)) = setup_with_hooks() else { return };
    let f = feed(&[], &[("HLBOOK_TEST_NO_AUDIT", "1")]);
    let json = f.dir.path().join("none.json");
    let (code, out, report) =
        run(&bin, &f.ws, &["--coins", "BTC", "--channels", "l2Book,trades", "--duration", "4"], &json);
    assert!(n(&channel(&report, "l2Book")["frames"]) > 0, "no frames at all:\n{out}");
    assert_eq!(code, 4, "{out}");
    assert_eq!(report["result"], "UNVERIFIED", "{out}");
    assert!(out.contains("UNVERIFIED"), "{out}");
}

#[test]
fn a_server_restart_is_one_disconnect_and_no_lost_heights() {
    let Some((_serial, bin)) = setup() else { return };
    let mut f = feed(&[], &[]);
    let json = f.dir.path().join("restart.json");
    let addr = f.ws.trim_start_matches("ws://").trim_end_matches("/ws").to_string();
    let mut child = Command::new(&bin)
        .args(["--url", &f.ws, "--audit", "--coins", "BTC,ETH", "--channels", "l2Book,trades", "--duration", "20"])
        .arg("--json")
        .arg(&json)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Some blocks reach the client before the restart.
    let h = f.height();
    wait_health(&f.base, Duration::from_secs(60), |x| x["height"].as_u64() >= Some(h + 30));
    assert!(f.server.stop().success());
    // The same address again (the listener sets SO_REUSEADDR), from a fresh snapshot.
    let (data, snaps, log) = (f.dir.path().join("data"), f.dir.path().join("snaps2"), f.dir.path().join("serve2.log"));
    let restarted = start_serve_at(&addr, &data, &f.info_url, &snaps, &[], &[], &log);
    restarted.wait_line("hlbook listening on", Duration::from_secs(60));
    let status = child.wait().unwrap();
    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let counters = &report["counters"];
    assert_eq!((n(&counters["disconnects"]), n(&counters["reconnects"])), (1, 1), "{counters}");
    for ch in ["l2Book", "trades"] {
        let c = channel(&report, ch);
        assert_eq!((n(&c["lost_frames"]), n(&c["dropped_heights"])), (0, 0), "no phantom loss on {ch}: {c}");
    }
    assert!(!status.success(), "a disconnect is downtime, which the verdict reports");
}
