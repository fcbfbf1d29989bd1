//! Async HTTP helpers for socket tests (the blocking ones in `procs` cannot run inside a runtime).

use std::time::Duration;

use serde_json::Value;

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
