//! The `hlsim` binary end to end: prints its info address, answers over HTTP, writes blocks, exits 0 on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[test]
fn hlsim_serves_info_and_exits_cleanly_on_sigterm() {
    let tmp = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_hlsim"))
        .args(["--out", tmp.path().to_str().unwrap(), "--info-listen", "127.0.0.1:0", "--blocks", "5"])
        .args(["--btc-orders", "500", "--orders-per-coin", "100", "--block-ms", "10", "--reject-ratio", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().strip_prefix("info listening on ").unwrap_or_else(|| panic!("{line:?}")).to_string();
    let client = reqwest::blocking::Client::new();
    let meta: serde_json::Value = client
        .post(format!("http://{addr}/info"))
        .json(&serde_json::json!({"type":"meta"}))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(meta["universe"][0]["name"], "BTC");
    // After its blocks it keeps serving: wait for the last line, then ask for a snapshot at its height.
    let snap = tmp.path().join("snap.json");
    let req = serde_json::json!({"type":"fileSnapshot","request":{"type":"l4Snapshots","includeUsers":true,
        "includeTriggerOrders":false},"outPath":snap,"includeHeightInOutput":true});
    let mut height = 0;
    for _ in 0..100 {
        let r = client.post(format!("http://{addr}/info")).json(&req).send().unwrap();
        assert_eq!(r.status(), 200);
        let text = std::fs::read_to_string(&snap).unwrap();
        height = text[1..].split(',').next().unwrap().parse::<u64>().unwrap();
        if height == 1_000_000_004 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(height, 1_000_000_004);
    assert!(child.try_wait().unwrap().is_none(), "still serving after its last block");
    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    assert!(child.wait().unwrap().success(), "exit 0 on SIGTERM");
}
