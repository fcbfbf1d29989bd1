//! The `hlsim` binary end to end: prints its info address, answers over HTTP, writes blocks, exits 0 on SIGTERM;
//! with `--exchange-listen` a second server plays the public API over the same market.

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

#[test]
fn node_server_refuses_what_a_node_refuses_and_the_exchange_server_answers_it() {
    let tmp = tempfile::tempdir().unwrap();
    let market = ["--btc-orders", "500", "--orders-per-coin", "100", "--block-ms", "20", "--reject-ratio", "1"];
    let (mut sim, node, exchange) =
        procs::start_sim_exchange(&tmp.path().join("data"), &market, &tmp.path().join("sim.log"));
    let client = reqwest::blocking::Client::new();
    let ctxs = serde_json::json!({"type": "metaAndAssetCtxs"});
    let r = client.post(&node).json(&ctxs).send().unwrap();
    assert_eq!(r.status(), 422);
    assert!(r.text().unwrap().starts_with("Failed to deserialize the JSON body into the target type"));
    let both: serde_json::Value = client.post(&exchange).json(&ctxs).send().unwrap().json().unwrap();
    assert_eq!(both[0]["universe"][0]["name"], "BTC");
    let status: serde_json::Value =
        client.post(&node).json(&serde_json::json!({"type": "exchangeStatus"})).send().unwrap().json().unwrap();
    assert!(status["time"].as_u64().unwrap() > 0, "{status}");
    // Each server counts its own requests.
    let stats = |url: &str| -> serde_json::Value {
        let base = url.trim_end_matches("/info");
        reqwest::blocking::get(format!("{base}/sim/info-stats")).unwrap().json().unwrap()
    };
    assert_eq!(stats(&node)["by_type"], serde_json::json!({"exchangeStatus": 1, "metaAndAssetCtxs": 1}));
    assert_eq!(stats(&exchange)["by_type"], serde_json::json!({"metaAndAssetCtxs": 1}));
    assert!(sim.stop().success(), "exit 0 on SIGTERM");
}
