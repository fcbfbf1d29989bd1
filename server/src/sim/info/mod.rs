//! The simulator's info servers (`POST /info`), two roles over one simulated market:
//!
//! - **node** (`--info-listen`): what a non-validating node started with `--serve-info` answers, and nothing more:
//!   exactly [`node::NODE_INFO_TYPES`] plus `fileSnapshot` (the node's documented list,
//!   ../shared/docs/hl-node-info-server.md). A stand-in must be at least as strict as the real thing, or hlbook
//!   could come to rely on answers (`l2Book`, asset contexts, history) a real node never gives.
//! - **exchange** (`--exchange-listen`): the public API, for tests of what hlbook asks upstream
//!   (`server.upstream_info_url`, `store.seed_url`): the node's types except `fileSnapshot`, plus market data and
//!   history (`exchange`).
//!
//! Both refuse any other body as the exchange's and the node's axum servers refuse one they cannot deserialize
//! into their request enum: 422 with a plain-text reason. A body that is not JSON at all is axum's 400.
//!
//! For tests of what reaches a server, `GET /sim/info-stats` counts its requests by type (each server its own)
//! and the most that were in flight at once, and `--info-delay-ms` makes every answered request slow, as a busy
//! node's would be (refusals stay fast: they fail before any handler runs).

pub mod accounts;
mod exchange;
pub mod node;
pub mod snapshot;
#[cfg(test)]
#[path = "info_tests.rs"]
mod tests;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::Value;

pub use node::NODE_INFO_TYPES;
pub use snapshot::{SnapshotCopy, copy_books, copy_books_with, serialize, write_snapshot};

use super::SimShared;

/// Which server a router plays.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Role {
    Node,
    Exchange,
}

/// An answer, or the reason the request cannot be deserialized (sent as a 422).
pub type Reply = Result<Value, String>;

/// The info server of `role`.
pub fn router(shared: Arc<SimShared>, role: Role) -> Router {
    router_with(shared, role, Duration::ZERO)
}

/// The info server of `role` with every answer held back `delay`.
pub fn router_with(shared: Arc<SimShared>, role: Role, delay: Duration) -> Router {
    let state = InfoState { shared, role, delay, stats: Arc::default() };
    Router::new().route("/info", post(info)).route("/sim/info-stats", get(stats)).with_state(state)
}

#[derive(Clone, Debug)]
struct InfoState {
    shared: Arc<SimShared>,
    role: Role,
    delay: Duration,
    stats: Arc<InfoStats>,
}

/// What reached one info server.
#[derive(Debug, Default)]
struct InfoStats {
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    by_type: parking_lot::Mutex<std::collections::BTreeMap<String, u64>>,
}

/// Counts one request in flight while alive.
struct InFlight<'a>(&'a InfoStats);

impl<'a> InFlight<'a> {
    fn new(stats: &'a InfoStats, kind: &str) -> InFlight<'a> {
        *stats.by_type.lock().entry(kind.to_string()).or_default() += 1;
        let now = stats.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        stats.max_in_flight.fetch_max(now, Ordering::SeqCst);
        InFlight(stats)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn stats(State(s): State<InfoState>) -> Response {
    let by_type = s.stats.by_type.lock().clone();
    json(serde_json::json!({"max_in_flight": s.stats.max_in_flight.load(Ordering::SeqCst), "by_type": by_type}))
}

pub(crate) fn bad(msg: impl Into<String>) -> Response {
    (StatusCode::BAD_REQUEST, msg.into()).into_response()
}

pub(crate) fn json(v: Value) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], v.to_string()).into_response()
}

/// The refusal of a body the server cannot deserialize: axum's `Json` rejection, 422 and plain text.
pub(crate) fn refuse(reason: &str) -> Response {
    let text = format!("Failed to deserialize the JSON body into the target type: {reason}");
    (StatusCode::UNPROCESSABLE_ENTITY, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response()
}

/// Whether a server of `role` answers type `kind`.
pub fn answers(role: Role, kind: &str) -> bool {
    match role {
        Role::Node => kind == "fileSnapshot" || NODE_INFO_TYPES.contains(&kind),
        Role::Exchange => exchange::EXTRA_TYPES.contains(&kind) || NODE_INFO_TYPES.contains(&kind),
    }
}

async fn info(State(s): State<InfoState>, body: Bytes) -> Response {
    let v: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return bad(format!("Failed to parse the request body as JSON: {e}")),
    };
    let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
    let _counted = InFlight::new(&s.stats, kind);
    if v.get("type").is_none() {
        return refuse("missing field `type`");
    }
    if !answers(s.role, kind) {
        return refuse(&format!("unknown variant `{kind}`"));
    }
    if !s.delay.is_zero() && kind != "fileSnapshot" {
        tokio::time::sleep(s.delay).await;
    }
    if kind == "fileSnapshot" {
        return snapshot::file_snapshot(s.shared, &v).await;
    }
    let reply = match s.role {
        Role::Node => node::answer(&s.shared, &v, kind),
        Role::Exchange => exchange::answer(&s.shared, &v, kind),
    };
    match reply {
        Ok(v) => json(v),
        Err(reason) => refuse(&reason),
    }
}
