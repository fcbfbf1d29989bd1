//! `GET /ws`: checks the token and the limits, negotiates permessage-deflate, answers 101 and hands the upgraded
//! stream to a connection task.
//!
//! The handshake is done here rather than by axum's WebSocket extractor because compressed client frames must be
//! inflated beneath tungstenite (which rejects RSV1) and compressed frames are sent pre-built, so we need the raw
//! upgraded stream and the raw tungstenite frame API.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use axum::body::Body;
use axum::extract::{ConnectInfo, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

use super::WsContext;
use super::conn::{Conn, Options};
use super::deflate::{InflateLayer, Inflater, negotiate};

#[derive(Debug, Default, Deserialize)]
pub struct WsQuery {
    /// `1`: add stage timestamps to every data frame (docs/api.md).
    audit: Option<String>,
    /// `1`: send everything due at once as one JSON array frame.
    batch: Option<String>,
    token: Option<String>,
}

fn flag(v: &Option<String>) -> bool {
    matches!(v.as_deref(), Some("1" | "true" | "yes"))
}

pub async fn ws(
    State(ctx): State<Arc<WsContext>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Query(q): Query<WsQuery>,
    mut req: Request,
) -> Response {
    let h = req.headers();
    if !authorized(&ctx.cfg.token, &q, h) {
        return (StatusCode::UNAUTHORIZED, "a valid token is required (?token= or Authorization: Bearer)")
            .into_response();
    }
    let Some(key) = websocket_key(h) else {
        return (StatusCode::BAD_REQUEST, "expected a WebSocket upgrade (version 13)").into_response();
    };
    let admitted = match ctx.limits.admit(peer.ip()) {
        Ok(a) => a,
        Err(why) => {
            ctx.counters.connections_refused.fetch_add(1, Relaxed);
            tracing::debug!(%peer, "connection refused: {why}");
            return (StatusCode::TOO_MANY_REQUESTS, why).into_response();
        }
    };
    let agreed = if ctx.cfg.compression {
        negotiate(h.get_all(header::SEC_WEBSOCKET_EXTENSIONS).iter().filter_map(|v| v.to_str().ok()))
    } else {
        None
    };
    let opts = Options { deflate: agreed.is_some(), audit: flag(&q.audit), batch: flag(&q.batch) };
    let max = ctx.cfg.max_frame_bytes;
    let inflater = agreed.as_ref().map(|a| Inflater::new(a.client_no_context_takeover, max));
    let on_upgrade = hyper::upgrade::on(&mut req);
    let task_ctx = ctx.clone();
    tokio::spawn(async move {
        let _admitted = admitted;
        let upgraded = match on_upgrade.await {
            Ok(u) => u,
            Err(e) => return tracing::debug!(%peer, "upgrade failed: {e}"),
        };
        let io = InflateLayer::new(TokioIo::new(upgraded), inflater);
        let config = WebSocketConfig::default()
            .max_frame_size(Some(max))
            .max_message_size(Some(max))
            .write_buffer_size(256 << 10)
            .max_write_buffer_size(64 << 20);
        let ws = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
        task_ctx.counters.connections_accepted.fetch_add(1, Relaxed);
        Conn::new(task_ctx, ws, opts).run().await;
    });
    let mut resp = Response::new(Body::empty());
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let hs = resp.headers_mut();
    hs.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    hs.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    if let Ok(v) = HeaderValue::from_str(&derive_accept_key(key.as_bytes())) {
        hs.insert(header::SEC_WEBSOCKET_ACCEPT, v);
    }
    if let Some(a) = agreed
        && let Ok(v) = HeaderValue::from_str(&a.response)
    {
        hs.insert(header::SEC_WEBSOCKET_EXTENSIONS, v);
    }
    resp
}

/// The `Sec-WebSocket-Key` of a valid version-13 upgrade request.
fn websocket_key(h: &HeaderMap) -> Option<String> {
    let has = |name, want: &str| {
        h.get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(want)))
    };
    if !has(header::UPGRADE, "websocket") || !has(header::CONNECTION, "upgrade") {
        return None;
    }
    if h.get(header::SEC_WEBSOCKET_VERSION).and_then(|v| v.to_str().ok()) != Some("13") {
        return None;
    }
    h.get(header::SEC_WEBSOCKET_KEY).and_then(|v| v.to_str().ok()).map(str::to_string)
}

fn authorized(token: &str, q: &WsQuery, h: &HeaderMap) -> bool {
    if token.is_empty() {
        return true;
    }
    let bearer = h.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    q.token.as_deref() == Some(token) || bearer == Some(token)
}
