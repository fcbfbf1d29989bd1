//! `GET /ws`: checks the token and the limits, negotiates permessage-deflate, answers 101 and hands the upgraded
//! stream to a connection task.
//!
//! The handshake is done here rather than by axum's WebSocket extractor because compressed client frames must be
//! inflated beneath tungstenite (which rejects RSV1) and compressed frames are sent pre-built, so we need the raw
//! upgraded stream and the raw tungstenite frame API.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

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
use super::ip_quota::Who;

/// Bytes tungstenite reads (and zeroes beforehand) per poll of a client socket.
const READ_BUFFER: usize = 4 << 10;

#[derive(Debug, Default, Deserialize)]
pub struct WsQuery {
    /// `1`: add stage timestamps to every data frame (docs/api.md).
    audit: Option<String>,
    /// `1`: send everything due at once as one JSON array frame.
    batch: Option<String>,
}

fn flag(v: Option<&str>) -> bool {
    matches!(v, Some("1" | "true" | "yes"))
}

/// The client the per-IP limits count: the TCP peer, or, when the peer is a trusted balancer, the rightmost
/// `X-Forwarded-For` hop that is not itself trusted (hops further left are the client's own claims and can be
/// forged). A hop that is not an address ends the walk at the last trusted one.
pub(super) fn client_ip(peer: IpAddr, headers: &HeaderMap, trusted: &[IpAddr]) -> IpAddr {
    let peer = peer.to_canonical();
    if !trusted.contains(&peer) {
        return peer;
    }
    let values = headers.get_all("x-forwarded-for").iter().filter_map(|v| v.to_str().ok());
    let hops: Vec<&str> = values.flat_map(|v| v.split(',')).map(str::trim).collect();
    let mut client = peer;
    for hop in hops.iter().rev() {
        match hop.parse::<IpAddr>().map(|ip| ip.to_canonical()) {
            Ok(ip) if trusted.contains(&ip) => client = ip,
            Ok(ip) => return ip,
            Err(_) => break,
        }
    }
    client
}

/// The address per-IP limits count `ip` as: IPv4 as it is, IPv6 by its first `prefix_len` bits (the rest zero),
/// since one subscriber holds a whole /64 and could otherwise open a budget per address.
pub(super) fn ip_group(ip: IpAddr, prefix_len: u8) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => {
            let keep = u32::from(prefix_len.min(128));
            let mask = u128::MAX.checked_shl(128 - keep).unwrap_or(0);
            IpAddr::V6((u128::from(v6) & mask).into())
        }
    }
}

pub async fn ws(
    State(ctx): State<Arc<WsContext>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Query(q): Query<WsQuery>,
    mut req: Request,
) -> Response {
    let h = req.headers();
    let token = match super::auth::access(&ctx.cfg().token, &ctx.cfg().tokens, req.uri().query(), h) {
        super::auth::Access::Refused => return super::auth::unauthorized(),
        super::auth::Access::Shared => None,
        super::auth::Access::Named(name) => Some(name),
    };
    let Some(key) = websocket_key(h) else {
        return (StatusCode::BAD_REQUEST, "expected a WebSocket upgrade (version 13)").into_response();
    };
    let client = ip_group(client_ip(peer.ip(), h, &ctx.cfg().trusted_proxies), ctx.cfg().ipv6_prefix_len);
    // A named token's connections, subscriptions and messages count against the token, wherever it connects from.
    let who = token.map_or(Who::Ip(client), Who::Token);
    // The global budget is a hard bound: a connection it has no room for is not taken.
    if !ctx.budgets().room(super::budget::CONN_BYTES) {
        ctx.counters().connections_refused.inc();
        let why = "server busy: its byte budget for all connections is exhausted (server.global_budget_bytes)";
        return (StatusCode::SERVICE_UNAVAILABLE, why).into_response();
    }
    let admitted = match ctx.limits().admit(who.clone()) {
        Ok(a) => a,
        Err(why) => {
            ctx.counters().connections_refused.inc();
            tracing::debug!(%peer, %who, "connection refused: {why}");
            return (StatusCode::TOO_MANY_REQUESTS, why).into_response();
        }
    };
    let agreed = if ctx.cfg().compression {
        negotiate(h.get_all(header::SEC_WEBSOCKET_EXTENSIONS).iter().filter_map(|v| v.to_str().ok()))
    } else {
        None
    };
    let opts = Options {
        deflate: agreed.is_some(),
        audit: flag(q.audit.as_deref()) && !audit_stripped_for_test(),
        batch: flag(q.batch.as_deref()),
        ip: Some(client),
        who: Some(who),
    };
    let max = ctx.cfg().max_frame_bytes;
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
        // tungstenite zeroes up to `read_buffer_size` bytes of its read buffer on every poll of the socket, and
        // each connection is polled once per block: the default 128 KiB cost 40% of the server's CPU with 1,000
        // connections (docs/benchmarks.md). Client messages are small; a larger one still grows the buffer.
        let config = WebSocketConfig::default()
            .read_buffer_size(READ_BUFFER)
            .max_frame_size(Some(max))
            .max_message_size(Some(max))
            .write_buffer_size(256 << 10)
            // Only pongs and the close frame go through tungstenite's buffer (`wire` writes the rest beneath it),
            // and a pong is written before the next message is read.
            .max_write_buffer_size(1 << 20);
        let ws = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
        task_ctx.counters().connections_accepted.inc();
        Conn::new(task_ctx, ws, opts, client).run().await;
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

/// Test hook `HLBOOK_TEST_NO_AUDIT=1`: `?audit=1` is accepted and ignored, so frames carry no audit fields, as from
/// a server that has none; a test checks that `latency_stats --audit` says it could not verify such a feed. Only in
/// `test-hooks` builds.
#[cfg(feature = "test-hooks")]
fn audit_stripped_for_test() -> bool {
    static STRIPPED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *STRIPPED.get_or_init(|| std::env::var_os("HLBOOK_TEST_NO_AUDIT").is_some_and(|v| v == "1"))
}

#[cfg(not(feature = "test-hooks"))]
const fn audit_stripped_for_test() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn xff(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append("x-forwarded-for", HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn forwarded_client_counts_only_behind_a_trusted_balancer() {
        let lb = [ip("10.0.0.2"), ip("10.0.0.3")];
        // An untrusted peer's header is its own claim.
        assert_eq!(client_ip(ip("1.2.3.4"), &xff(&["9.9.9.9"]), &lb), ip("1.2.3.4"));
        // A trusted balancer names its client.
        assert_eq!(client_ip(ip("10.0.0.2"), &xff(&["5.6.7.8"]), &lb), ip("5.6.7.8"));
        // The rightmost untrusted hop wins: what the client put on the left is ignored.
        assert_eq!(client_ip(ip("10.0.0.2"), &xff(&["6.6.6.6, 5.6.7.8, 10.0.0.3"]), &lb), ip("5.6.7.8"));
        assert_eq!(client_ip(ip("10.0.0.2"), &xff(&["6.6.6.6", "5.6.7.8"]), &lb), ip("5.6.7.8"));
        // No header, or garbage where the balancer's hop should be: the balancer itself.
        assert_eq!(client_ip(ip("10.0.0.2"), &xff(&[]), &lb), ip("10.0.0.2"));
        assert_eq!(client_ip(ip("10.0.0.2"), &xff(&["5.6.7.8, unknown"]), &lb), ip("10.0.0.2"));
        // A dual-stack listener sees IPv4 balancers as mapped IPv6.
        assert_eq!(client_ip(ip("::ffff:10.0.0.2"), &xff(&["2001:db8::1"]), &lb), ip("2001:db8::1"));
    }

    #[test]
    fn ipv6_clients_are_counted_by_their_prefix() {
        let group = |a: &str, len| ip_group(ip(a), len);
        assert_eq!(group("2001:db8:1:2:aaaa::1", 64), ip("2001:db8:1:2::"));
        assert_eq!(group("2001:db8:1:2:ffff:ffff:ffff:ffff", 64), group("2001:db8:1:2::7", 64), "one /64, one budget");
        assert_ne!(group("2001:db8:1:3::1", 64), group("2001:db8:1:2::1", 64));
        assert_eq!(group("2001:db8:1:2:aaaa::1", 48), ip("2001:db8:1::"));
        assert_eq!(group("2001:db8::1", 128), ip("2001:db8::1"), "128 counts every address");
        assert_eq!(group("1.2.3.4", 64), ip("1.2.3.4"), "IPv4 as it is");
    }
}
