//! The public router: `/ws`, `POST /info` for SDKs, and `/health` for balancers (state, height and lag only).
//! The operator's endpoints (`/status`, `/metrics`, `/l4snapshot`, the status page, the detailed `/health`) are
//! on the admin listener (`admin`), never here.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{ConnectInfo, FromRef, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::sync::Semaphore;

use crate::ws::WsContext;

/// What every handler can reach.
#[derive(Clone, Debug)]
pub struct AppState {
    pub ws: Arc<WsContext>,
    pub metrics: Arc<prometheus_client::registry::Registry>,
    /// One `/l4snapshot` export at a time.
    pub exports: Arc<Semaphore>,
}

impl AppState {
    pub fn new(ws: Arc<WsContext>) -> AppState {
        let metrics = Arc::new(crate::audit::metrics::registry(ws.clone()));
        AppState { ws, metrics, exports: Arc::new(Semaphore::new(1)) }
    }
}

impl FromRef<AppState> for Arc<WsContext> {
    fn from_ref(s: &AppState) -> Arc<WsContext> {
        s.ws.clone()
    }
}

/// `/ws`, `POST /info`, `/health`.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/ws", get(super::upgrade::ws))
        .route("/info", post(info))
        .route("/health", get(health))
        .with_state(state)
}

/// `POST /info`: l2Book from our books, the allowed market types through the node, anything else refused.
async fn info(State(s): State<AppState>, ConnectInfo(peer): ConnectInfo<SocketAddr>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let access = super::auth::access(&s.ws.cfg().token, &s.ws.cfg().tokens, parts.uri.query(), &parts.headers);
    if access == super::auth::Access::Refused {
        return super::auth::unauthorized();
    }
    let Ok(body) = axum::body::to_bytes(body, s.ws.cfg().max_frame_bytes).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, "request body too large").into_response();
    };
    let Ok(req) = serde_json::from_slice::<serde_json::Value>(&body) else {
        return (StatusCode::UNPROCESSABLE_ENTITY, "Failed to deserialize the JSON body into the target type")
            .into_response();
    };
    let ip = super::upgrade::client_ip(peer.ip(), &parts.headers, &s.ws.cfg().trusted_proxies);
    let ip = super::upgrade::ip_group(ip, s.ws.cfg().ipv6_prefix_len);
    let answer = super::info::answer(&s.ws, ip, &req).await;
    let code = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::BAD_GATEWAY);
    let kind = if answer.text { "text/plain; charset=utf-8" } else { "application/json" };
    (code, [(header::CONTENT_TYPE, kind)], answer.body).into_response()
}

/// 200 while the books follow the node (`live`, `catching_up`), 503 otherwise, so a balancer can drop a server
/// whose books are stale or being rebuilt, or whose threads died. Public, so it says only the state, height and
/// lags (and why the service failed): source paths, NATS addresses and counters are for the operator
/// (`health_detail`, on the admin listener).
pub async fn health(State(s): State<AppState>) -> Response {
    answer(&s, |_| {})
}

/// `/health` on the admin listener: the public answer plus connections, budget, subscriptions, every counter,
/// each source and whether misc_events and node_twap_statuses are read, and what the books hold (coins, resting orders, trigger orders
/// waiting beside them).
pub async fn health_detail(State(s): State<AppState>) -> Response {
    answer(&s, |body| {
        let ws = &*s.ws;
        let h = ws.shared().health();
        body["connections"] = ws.limits().open().into();
        body["budget"] = serde_json::json!({"held": ws.budgets().held(), "max": ws.budgets().max_total()});
        body["subscriptions"] =
            serde_json::json!(ws.counters().subscriptions().into_iter().collect::<BTreeMap<_, _>>());
        body["counters"] = serde_json::json!(h.counters().to_map());
        body["sources"] = h.sources().to_json();
        body["misc_events"] = h.misc().to_json();
        body["twap_statuses"] = h.twaps().to_json();
        // O(coins) under the books' read lock: the writer waits microseconds, and only for this admin endpoint.
        let books = ws.shared().books();
        body["books"] = serde_json::json!({"coins": books.books().count(), "orders": books.order_count(),
            "trigger_orders": books.trigger_count()});
        drop(books);
        body["ws"] = by_name(crate::audit::Exposed::ws_counters(ws));
        body["publish"] = by_name(crate::audit::Exposed::publish_counters(ws));
    })
}

/// The state, height and lags, with `more` added, as 200 or 503.
fn answer(s: &AppState, more: impl FnOnce(&mut serde_json::Value)) -> Response {
    let h = s.ws.shared().health();
    let state = h.state();
    let (block_lag, node_lag) = h.lag();
    let mut body = serde_json::json!({
        "state": state,
        "height": h.height(),
        "lag_ms": {"block": block_lag / 1_000_000, "node_write": node_lag / 1_000_000},
    });
    more(&mut body);
    if let Some(why) = h.failure() {
        body["failure"] = serde_json::Value::String(why);
    }
    let code = if state.serving() { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (code, axum::Json(body)).into_response()
}

/// Counters as a JSON object by name.
fn by_name(list: Vec<crate::state::counter::Named>) -> serde_json::Value {
    serde_json::json!(list.into_iter().map(|c| (c.name, c.value)).collect::<BTreeMap<_, _>>())
}
