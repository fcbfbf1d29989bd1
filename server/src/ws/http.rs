//! The router: `/ws`, and the plain HTTP endpoints beside it: `/health` for operators and balancers, `/status`,
//! `/metrics` and the status page at `/` for people and dashboards, `POST /info` for SDKs, `/l4snapshot` for
//! diagnostics (our books in the node's snapshot format, to diff against the node's).

use std::sync::Arc;

use axum::Router;
use axum::extract::{FromRef, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use crate::book::export::write_snapshot;
use crate::ingest::live::Shared;
use crate::node::Coin;
use crate::ws::WsContext;

/// What every handler can reach.
#[derive(Clone, Debug)]
pub struct AppState {
    pub shared: Arc<Shared>,
    pub ws: Arc<WsContext>,
    pub metrics: Arc<prometheus_client::registry::Registry>,
}

impl AppState {
    pub fn new(shared: Arc<Shared>, ws: Arc<WsContext>) -> AppState {
        let metrics = Arc::new(crate::audit::metrics::registry(ws.clone()));
        AppState { shared, ws, metrics }
    }
}

/// Prometheus/OpenMetrics text.
async fn metrics(State(s): State<AppState>) -> Response {
    let body = crate::audit::metrics::render(&s.metrics);
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], body).into_response()
}

#[derive(Debug, Deserialize)]
struct StatusQuery {
    /// Also return the last N settled blocks' stage values.
    blocks: Option<usize>,
}

/// State, stage percentiles over the last minute, connections (docs/api.md).
async fn status(State(s): State<AppState>, Query(q): Query<StatusQuery>) -> Response {
    axum::Json(crate::audit::status::status(&s.ws, q.blocks.unwrap_or(0))).into_response()
}

/// The status page: one self-contained HTML file that charts `/status` (no build step, nothing fetched from
/// elsewhere).
async fn status_page() -> Response {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8"), (header::CACHE_CONTROL, "no-cache")],
        crate::audit::STATUS_PAGE,
    )
        .into_response()
}

impl FromRef<AppState> for Arc<WsContext> {
    fn from_ref(s: &AppState) -> Arc<WsContext> {
        s.ws.clone()
    }
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/", get(status_page))
        .route("/ws", get(super::upgrade::ws))
        .route("/info", post(info))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/status", get(status))
        .route("/l4snapshot", get(l4snapshot))
        .with_state(state)
}

/// `POST /info`: l2Book from our books, other types through the node's info server.
async fn info(State(s): State<AppState>, body: axum::body::Bytes) -> Response {
    let Ok(req) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return (StatusCode::UNPROCESSABLE_ENTITY, "Failed to deserialize the JSON body into the target type")
            .into_response();
    };
    let (status, answer) = super::info::answer(&s.shared, s.ws.passthrough.as_ref(), &req).await;
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    (code, axum::Json(answer)).into_response()
}

/// 200 while the books follow the node (`live`, `catching_up`), 503 otherwise, so a balancer can drop a server
/// whose books are stale or being rebuilt.
async fn health(State(s): State<AppState>) -> Response {
    let h = &s.shared.health;
    let state = h.state();
    let (block_lag, node_lag) = h.lag();
    let body = serde_json::json!({
        "state": state,
        "height": h.height(),
        "lag_ms": {"block": block_lag / 1_000_000, "node_write": node_lag / 1_000_000},
        "connections": s.ws.limits.open(),
        "subscriptions": s.ws.counters.subscriptions().into_iter().collect::<std::collections::BTreeMap<_, _>>(),
        "counters": h.counters.to_map(),
        "ws": s.ws.counters.to_map(),
    });
    let code = if state.serving() { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (code, axum::Json(body)).into_response()
}

#[derive(Debug, Deserialize)]
struct SnapshotQuery {
    /// Comma-separated coins; all when absent.
    coins: Option<String>,
}

/// Our books as `[height, [[coin, [bids, asks]], …]]`. Holds the read lock while writing (tens of ms for a big
/// book): for diagnostics and tests, not for clients.
async fn l4snapshot(State(s): State<AppState>, Query(q): Query<SnapshotQuery>) -> Response {
    let coins: Option<Vec<Coin>> = q.coins.map(|c| c.split(',').map(Coin::from).collect());
    let shared = s.shared.clone();
    let body = tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        // Whole orders only: a half-applied block's statuses follow within milliseconds (a lost status line
        // leaves the books half-applied until the resync installs new ones).
        let books = shared.complete_books(std::time::Duration::from_secs(5)).ok_or_else(|| {
            std::io::Error::other("the books are half-applied (a block's status line is awaited); try again")
        })?;
        write_snapshot(&books, coins.as_deref(), &mut out).map(|()| out)
    })
    .await;
    match body {
        Ok(Ok(bytes)) => ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        Ok(Err(e)) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}
