//! Serving: the WebSocket API (`/ws`) and the HTTP endpoints beside it, over the shared books and the publisher's
//! frames.
//!
//! `upgrade` admits a client and negotiates compression, `conn` runs one task per connection, `protocol` knows the
//! official request and response texts, `info` answers info requests (`info_gate` admits each client's,
//! `passthrough` guards the way to the node), `deflate` compresses frames once and inflates what clients compress,
//! `wire` frames each message once and writes it beneath tungstenite, `limits` keeps abusers to themselves, `auth`
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
pub mod http;
pub mod info;
pub mod info_gate;
pub mod limits;
pub mod listen;
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
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

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
    pub passthrough: Option<info::Passthrough>,
    /// Per-client places for info requests of every type.
    pub info_gate: Arc<info_gate::InfoGate>,
    pub limits: Arc<limits::Limits>,
    pub counters: WsCounters,
    /// Turns true when the server shuts down: every connection closes with 1001.
    pub closing: watch::Receiver<bool>,
    /// Distinct users followed per client IP.
    pub user_cap: user_cap::UserCap,
    /// Bytes held for clients, per connection and in all.
    pub budgets: Arc<budget::Budgets>,
}

/// Counters of the serving stage.
#[derive(Debug, Default)]
pub struct WsCounters {
    pub connections_accepted: AtomicU64,
    pub connections_refused: AtomicU64,
    pub messages_received: AtomicU64,
    pub protocol_errors: AtomicU64,
    pub frames_sent: AtomicU64,
    pub bytes_sent: AtomicU64,
    /// Batches written to sockets: one per connection woken with something due.
    pub writes: AtomicU64,
    /// L2/bbo/allMids frames a slow connection skipped because a newer one replaced them.
    pub conflated: AtomicU64,
    /// Loss notices: a connection fell further behind on an ordered stream than its backlog allows.
    pub overflows: AtomicU64,
    pub closed_idle: AtomicU64,
    pub closed_abuse: AtomicU64,
    /// Connections closed with 1008 for going over their byte budget (or a share of the exhausted global one).
    pub closed_budget: AtomicU64,
    /// Connections dropped because their client stopped reading for `idle_timeout_secs` mid-write.
    pub closed_slow: AtomicU64,
    /// TCP connections closed at accept: their IP group had `max_http_connections_per_ip` open (`listen`).
    pub http_refused: AtomicU64,
    /// Connections dropped because a request's headers were not complete within `header_timeout_secs`.
    pub http_header_timeouts: AtomicU64,
    /// Plain HTTP connections closed after `http_idle_timeout_secs` with nothing in flight.
    pub http_closed_idle: AtomicU64,
    /// Open subscriptions per channel, in `CHANNELS` order.
    subs: [AtomicI64; CHANNELS.len()],
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
    fn publish_counters(&self) -> Vec<(&'static str, u64)> {
        self.hub.counter_list()
    }
    fn feed_bytes(&self) -> u64 {
        self.hub.feed_bytes()
    }
    fn ws_counters(&self) -> Vec<(&'static str, u64)> {
        let gate = [("info_waited", &self.info_gate.waited), ("info_refused", &self.info_gate.refused)];
        let gate = gate.map(|(name, c)| (name, c.load(Relaxed)));
        self.counters.to_map().into_iter().chain(gate).collect()
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

    pub fn to_map(&self) -> std::collections::BTreeMap<&'static str, u64> {
        [
            ("connections_accepted", &self.connections_accepted),
            ("connections_refused", &self.connections_refused),
            ("messages_received", &self.messages_received),
            ("protocol_errors", &self.protocol_errors),
            ("frames_sent", &self.frames_sent),
            ("bytes_sent", &self.bytes_sent),
            ("writes", &self.writes),
            ("conflated", &self.conflated),
            ("overflows", &self.overflows),
            ("closed_idle", &self.closed_idle),
            ("closed_abuse", &self.closed_abuse),
            ("closed_budget", &self.closed_budget),
            ("closed_slow", &self.closed_slow),
            ("http_refused", &self.http_refused),
            ("http_header_timeouts", &self.http_header_timeouts),
            ("http_closed_idle", &self.http_closed_idle),
        ]
        .into_iter()
        .map(|(k, v)| (k, v.load(Relaxed)))
        .collect()
    }
}
