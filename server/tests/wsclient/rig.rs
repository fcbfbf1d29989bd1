//! One test's world: `hlsim` writing a small market and answering info requests, and `hlbook serve` following
//! it, each on its own ports (port 0) and temp dirs, so tests can run in parallel.

use std::time::Duration;

use serde_json::Value;

use crate::procs::{Proc, admin_base, start_serve, wait_health};

const HLSIM: &str = env!("CARGO_BIN_EXE_hlsim");

#[derive(Debug)]
pub struct Rig {
    pub sim: Proc,
    pub server: Proc,
    /// `http://ADDR` of the server's public endpoints.
    pub base: String,
    /// `http://ADDR` of its admin endpoints (`/status`, `/metrics`, `/l4snapshot`).
    pub admin: String,
    /// `http://ADDR/info` of the simulator (the node's info server).
    pub sim_info: String,
    _dir: tempfile::TempDir,
}

impl Rig {
    /// Starts both with `server_toml` as the server's config file (empty: defaults) and waits until the server
    /// is live.
    pub fn start(server_toml: &str) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let snaps = dir.path().join("snapshots");
        let config = dir.path().join("hlbook.toml");
        std::fs::write(&config, server_toml).unwrap();
        let sim_args = [
            "--out",
            data.to_str().unwrap(),
            "--coins",
            "5",
            "--btc-orders",
            "4000",
            "--orders-per-coin",
            "300",
            "--block-ms",
            "40",
            "--reject-ratio",
            "2",
            "--info-listen",
            "127.0.0.1:0",
        ];
        let sim = Proc::start(HLSIM, &sim_args, &dir.path().join("sim.log"));
        let sim_addr = sim.wait_line("info listening on", Duration::from_secs(60));
        let sim_info = format!("http://{sim_addr}/info");
        let extra = ["--config", config.to_str().unwrap(), "--validate-interval", "0"];
        let server = start_serve(&data, &sim_info, &snaps, &extra, &dir.path().join("serve.log"));
        let base = format!("http://{}", server.wait_line("hlbook listening on", Duration::from_secs(60)));
        let admin = admin_base(&server);
        wait_health(&base, Duration::from_secs(90), |h| h["state"] == "live");
        Rig { sim, server, base, admin, sim_info, _dir: dir }
    }

    /// `ws://ADDR/ws` with an optional query (`"batch=1"`).
    pub fn ws(&self, query: &str) -> String {
        let url = format!("{}/ws", self.base.replacen("http://", "ws://", 1));
        if query.is_empty() { url } else { format!("{url}?{query}") }
    }
}

/// GET `url` as JSON (async: the blocking helpers cannot run inside a runtime).
pub async fn get_json(url: &str) -> Value {
    let resp = reqwest::get(url).await.unwrap_or_else(|e| panic!("GET {url}: {e}"));
    resp.json().await.unwrap_or_else(|e| panic!("GET {url}: not JSON: {e}"))
}

/// POST `body` to `url`; returns the status and the JSON answer.
pub async fn post_json(url: &str, body: &Value) -> (u16, Value) {
    let resp = reqwest::Client::new().post(url).json(body).send().await.unwrap_or_else(|e| panic!("POST {url}: {e}"));
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or_else(|e| panic!("POST {url}: not JSON: {e}")))
}

/// Polls the server's `/health` until `pred` holds; panics with the last answer after `WAIT`.
pub async fn health_until(base: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + super::WAIT;
    loop {
        let h = get_json(&format!("{base}/health")).await;
        if pred(&h) {
            return h;
        }
        assert!(tokio::time::Instant::now() < deadline, "health never showed {what} within {:?}: {h}", super::WAIT);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
