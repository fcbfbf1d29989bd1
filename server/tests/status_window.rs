//! `/status` describes the last `server.status_window_secs` of wall time (issue #18; a minute by default, 10 s
//! here): with the real `hlsim` paused behind a real `hlbook serve`, the document first shows blocks and stage
//! samples, then, while the node stays quiet, 0 blocks/s and no stage samples (and no age of a newest block) instead
//! of the figures from before the silence. The pause outlasts the test, so the test never races its end: it waits
//! for the window to empty, and its deadline only guards against hanging.

mod procs;

use std::time::{Duration, Instant};

use procs::{HLSIM, Proc, get_json, start_serve, wait_health};

const START: u64 = 1_000_000_000;
const PAUSE_AT: u64 = START + 100;
/// Longer than the test runs: the simulator is killed, still paused, when the test ends.
const PAUSE_SECS: u64 = 3600;
const WINDOW_SECS: u64 = 10;
/// How long the test waits for the window to empty before it calls the server stuck (a guard, not a measurement).
const HANG_GUARD: Duration = Duration::from_secs(180);

fn stage_samples(s: &serde_json::Value) -> u64 {
    s["stages"].as_array().expect("stages").iter().map(|g| g["count"].as_u64().unwrap()).sum()
}

#[test]
fn status_forgets_blocks_older_than_its_window_while_the_node_is_quiet() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let pause_at = PAUSE_AT.to_string();
    let pause_secs = PAUSE_SECS.to_string();
    let sim = Proc::start(
        HLSIM,
        &[
            "--out",
            data.to_str().unwrap(),
            "--coins",
            "3",
            "--btc-orders",
            "2000",
            "--orders-per-coin",
            "200",
            "--block-ms",
            "40",
            "--pause-at",
            &pause_at,
            "--pause-secs",
            &pause_secs,
            "--info-listen",
            "127.0.0.1:0",
        ],
        &dir.path().join("sim.log"),
    );
    let info = sim.wait_line("info listening on", Duration::from_secs(30));
    let config = dir.path().join("hlbook.toml");
    std::fs::write(&config, format!("[server]\nstatus_window_secs = {WINDOW_SECS}\n")).unwrap();
    let server = start_serve(
        &data,
        &format!("http://{info}/info"),
        &dir.path().join("snaps"),
        &["--validate-interval", "0", "--config", config.to_str().unwrap()],
        &dir.path().join("serve.log"),
    );
    let base = format!("http://{}", server.wait_line("hlbook listening on", Duration::from_secs(30)));
    let admin = procs::admin_base(&server);
    let url = format!("{admin}/status");

    // Before the pause: blocks are settling, so the window has a rate and stage samples.
    let deadline = Instant::now() + Duration::from_secs(60);
    let before = loop {
        let s = get_json(&url);
        if let Some(s) = s.filter(|s| s["blocks"].as_u64().unwrap_or(0) >= 10) {
            break s;
        }
        assert!(Instant::now() < deadline, "no settled blocks in /status within 60 s");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(before["blocks_per_sec"].as_f64().unwrap() > 0.0, "{before}");
    assert_eq!(before["window_s"].as_u64(), Some(WINDOW_SECS), "{before}");
    assert!(stage_samples(&before) > 0, "{before}");

    // The pause: the height stops one block short of PAUSE_AT.
    wait_health(&base, Duration::from_secs(60), |h| h["height"].as_u64() == Some(PAUSE_AT - 1));
    let deadline = Instant::now() + HANG_GUARD;

    // Within the pause, a window's length after the last block, the window is empty. Every answer is checked to still be
    // in the pause (the height has not moved), so a resumed simulator cannot make this pass.
    let mut last = serde_json::Value::Null;
    loop {
        if let Some(s) = get_json(&url) {
            assert_eq!(s["height"].as_u64(), Some(PAUSE_AT - 1), "the simulator resumed before /status aged: {last}");
            let aged = s["blocks_per_sec"].as_f64() == Some(0.0)
                && s["blocks"].as_u64() == Some(0)
                && stage_samples(&s) == 0
                && s["newest_block_age_ms"].is_null();
            if aged {
                break;
            }
            // Until then every block it does report is from the last minute.
            if let Some(age) = s["newest_block_age_ms"].as_u64() {
                assert!(age <= WINDOW_SECS * 1000, "a block older than the window is reported as current: {s}");
            }
            last = s;
        }
        assert!(Instant::now() < deadline, "/status still shows blocks {HANG_GUARD:?} into the pause: {last}");
        std::thread::sleep(Duration::from_millis(500));
    }
    let metrics = reqwest::blocking::get(format!("{admin}/metrics")).unwrap().text().unwrap();
    assert!(
        metrics.lines().any(|l| l == "hlbook_blocks_per_second 0.0" || l == "hlbook_blocks_per_second 0"),
        "{metrics}"
    );
}
