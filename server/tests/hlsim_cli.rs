//! The `hlsim` binary end to end: prints its info address, answers over HTTP, writes blocks, exits 0 on SIGTERM.

mod procs;

#[test]
fn hlsim_serves_info_and_exits_cleanly_on_sigterm() {
    let tmp = tempfile::tempdir().unwrap();
    let market = ["--blocks", "5", "--btc-orders", "500", "--orders-per-coin", "100", "--block-ms", "10"];
    let (mut sim, info_url) = procs::start_sim(
        &tmp.path().join("data"),
        &[&market[..], &["--reject-ratio", "1"]].concat(),
        &tmp.path().join("sim.log"),
    );
    let client = reqwest::blocking::Client::new();
    let meta: serde_json::Value =
        client.post(&info_url).json(&serde_json::json!({"type":"meta"})).send().unwrap().json().unwrap();
    assert_eq!(meta["universe"][0]["name"], "BTC");
    // After its blocks it keeps serving: wait for the last line, then ask for a snapshot at its height.
    let snap = tmp.path().join("snap.json");
    let req = serde_json::json!({"type":"fileSnapshot","request":{"type":"l4Snapshots","includeUsers":true,
        "includeTriggerOrders":false},"outPath":snap,"includeHeightInOutput":true});
    let mut height = 0;
    for _ in 0..100 {
        let r = client.post(&info_url).json(&req).send().unwrap();
        assert_eq!(r.status(), 200);
        let text = std::fs::read_to_string(&snap).unwrap();
        height = text[1..].split(',').next().unwrap().parse::<u64>().unwrap();
        if height == 1_000_000_004 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(height, 1_000_000_004);
    assert!(sim.running(), "still serving after its last block");
    assert!(sim.stop().success(), "exit 0 on SIGTERM");
}
