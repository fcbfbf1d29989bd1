//! Serving: the WebSocket API (`/ws`) and the HTTP endpoints beside it, over the shared books and the publisher's
//! frames.
//!
//! `upgrade` admits a client and negotiates compression, `conn` runs one task per connection, `protocol` knows the
//! official request and response texts, `info` routes info requests (`info_weight` charges each client IP the
//! exchange's weight, `info_gate` admits each client's, `market_info`, `fills_info`, `user_info` and
//! `candle_info` answer what hlbook keeps, `passthrough` guards the ways to the node and the upstream),
//! `deflate` compresses frames once and inflates what clients compress, `wire` frames each message once and writes it beneath tungstenite, `limits` and `ip_quota` keep abusers to themselves, `auth`
//! checks the optional token, `listen` accepts every listener's connections (header and idle deadlines, and
//! `tcp_cap`'s per-IP cap), `http` holds the public endpoints and `admin` the operator's.

pub mod admin;
pub mod auth;
pub mod budget;
pub mod candle_info;
mod candle_stream;
pub mod conn;
pub mod deflate;
pub mod fair_slots;
mod fills_info;
pub mod http;
pub mod info;
pub mod info_gate;
pub mod info_weight;
pub mod ip_quota;
pub mod limits;
pub mod listen;
mod market_info;
pub mod passthrough;
pub mod protocol;
pub mod tcp_cap;
pub mod upgrade;
pub mod user_cap;
pub mod user_info;
pub mod user_protocol;
mod user_stream;
pub mod wire;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};

use tokio::sync::watch;

use crate::config::ServerConfig;
use crate::publish::Hub;

/// What every connection shares.
#[derive(Debug)]
pub struct WsContext {
    /// The books and the state beside them (info answers read them; subscriptions check their coins).
    pub state: Arc<crate::state::Shared>,
    pub hub: Arc<Hub>,
    pub cfg: ServerConfig,
    /// The way to the node's info server, for `server.info_types`.
    pub passthrough: Option<info::Passthrough>,
    /// The way to `server.upstream_info_url`, for the read types nobody here answers.
    pub upstream: Option<info::Passthrough>,
    /// Each client IP's info request weight a minute, as the exchange counts it.
    pub info_weight: info_weight::InfoWeight,
    /// Per-client places for info requests of every type.
    pub info_gate: Arc<info_gate::InfoGate>,
    pub limits: Arc<limits::ConnLimits>,
    pub counters: WsCounters,
    /// Turns true when the server shuts down: every connection closes with 1001.
    pub closing: watch::Receiver<bool>,
    /// Distinct users followed per client IP.
    pub user_cap: user_cap::UserCap,
    /// Subscriptions and messages a minute per client IP, across its connections.
    pub ip_quota: ip_quota::IpQuota,
    /// Bytes held for clients, per connection and in all.
    pub budgets: Arc<budget::Budgets>,
}

crate::state::counter::counters! {
    /// Counters of the serving stage, exported as `hlbook_ws_<name>` and under `ws` in the admin `/health`.
    pub struct WsCounters {
        /// WebSocket connections accepted.
        connections_accepted,
        /// WebSocket connections refused by the connection limits.
        connections_refused,
        /// Messages received from clients.
        messages_received,
        /// Client messages that broke the protocol.
        protocol_errors,
        /// Frames sent to clients.
        frames_sent,
        /// Bytes sent to clients.
        bytes_sent,
        /// Batches written to sockets: one per connection woken with something due.
        writes,
        /// L2/bbo/allMids frames a slow connection skipped because a newer one replaced them.
        conflated,
        /// Loss notices: a connection fell further behind on an ordered stream than its backlog allows.
        overflows,
        /// Connections closed as idle.
        closed_idle,
        /// Connections closed for abuse.
        closed_abuse,
        /// Connections closed with 1008 for going over their byte budget (or a share of the exhausted global one).
        closed_budget,
        /// Connections dropped because their client stopped reading for `idle_timeout_secs` mid-write.
        closed_slow,
        /// TCP connections closed at accept: their IP group had `max_http_connections_per_ip` open (`listen`).
        http_refused,
        /// Connections dropped because a request's headers were not complete within `header_timeout_secs`.
        http_header_timeouts,
        /// Plain HTTP connections closed after `http_idle_timeout_secs` with nothing in flight.
        http_closed_idle,
    }
    also {
        /// Open subscriptions per channel, in `CHANNELS` order (a gauge: it goes down too).
        subs: [AtomicI64; CHANNELS.len()],
    }
}

/// Every channel a client can subscribe to, as `Subscription::channel` names it: each is counted.
pub const CHANNELS: [&str; 9] =
    ["l2Book", "trades", "bbo", "allMids", "l4Book", "candle", "orderUpdates", "userFills", "userEvents"];

/// What the exporters (`/metrics`, `/status`) read.
impl crate::audit::Exposed for WsContext {
    fn health(&self) -> &crate::state::health::Health {
        self.state.health()
    }
    fn stages(&self) -> &crate::audit::Stages {
        self.hub.stages()
    }
    fn publish_counters(&self) -> Vec<crate::state::counter::Named> {
        self.hub.counter_list()
    }
    fn feed_bytes(&self) -> u64 {
        self.hub.feed_bytes()
    }
    fn ws_counters(&self) -> Vec<crate::state::counter::Named> {
        let mut list = self.counters.to_list();
        list.extend(self.info_gate.counters.to_list());
        list
    }
    fn connections(&self) -> usize {
        self.limits.open()
    }
    fn subscriptions(&self) -> Vec<(&'static str, i64)> {
        self.counters.subscriptions().to_vec()
    }
    fn newest_l2(&self) -> Vec<(String, i64)> {
        self.hub.newest_l2()
    }
    fn store_metrics(&self) -> Vec<(&'static str, &'static str, bool, u64)> {
        self.hub.store().map(|s| s.metrics()).unwrap_or_default()
    }
}

impl WsCounters {
    pub fn subscription_delta(&self, channel: &str, d: i64) {
        if let Some(i) = CHANNELS.iter().position(|c| *c == channel) {
            self.subs[i].fetch_add(d, Relaxed);
        } else {
            // A channel added to the protocol and not here: said, never silently left out.
            tracing::error!(channel, "a subscription of a channel the counters do not list");
        }
    }

    /// Subscriptions by channel.
    pub fn subscriptions(&self) -> [(&'static str, i64); CHANNELS.len()] {
        std::array::from_fn(|i| (CHANNELS[i], self.subs[i].load(Relaxed)))
    }
}
