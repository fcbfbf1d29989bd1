//! Serving: the WebSocket API (`/ws`) and the HTTP endpoints beside it, over the shared books and the publisher's
//! frames.
//!
//! `context` holds what every connection shares, behind methods. `upgrade` admits a client and negotiates compression,
//! `conn` runs one task per connection, `protocol` knows the official request and response texts, `info` routes info
//! requests (`info_weight` charges each client IP the exchange's weight, `info_gate` admits each client's,
//! `market_info`, `fills_info`, `user_info`, `candle_info` and `trades_info` answer what hlbook keeps, `passthrough` guards the ways
//! to the node and the upstream), `deflate` compresses frames once and inflates what clients compress, `wire` frames
//! each message once and writes it beneath tungstenite, `limits` and `ip_quota` keep abusers to themselves, `auth`
//! checks the optional token, `listen` accepts every listener's connections (header and idle deadlines, and `tcp_cap`'s
//! per-IP cap), `http` holds the public endpoints and `admin` the operator's.

pub mod admin;
pub mod auth;
pub mod budget;
pub mod candle_info;
mod candle_stream;
pub mod conn;
mod context;
pub mod deflate;
mod events_info;
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
pub mod trades_info;
mod twap_info;
pub mod upgrade;
pub mod user_cap;
pub mod user_info;
pub mod user_protocol;
mod user_stream;
pub mod wire;

use std::sync::atomic::{AtomicI64, Ordering::Relaxed};

pub use context::WsContext;

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
        /// Ordered subscriptions resumed with `since` (docs/api.md "Resume").
        resumes,
        /// Of those, trades older than the feed holds, caught up from the history store.
        resumes_from_store,
        /// Of those, catch-ups that reached the feed's kept frames and went live (the rest are still reading the
        /// store, or ended with a notice).
        resumes_caught_up,
        /// `since` refused (too old, ahead, or not kept): the subscription started afresh, with a notice.
        resumes_refused,
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
pub const CHANNELS: [&str; 14] = [
    "l2Book",
    "trades",
    "bbo",
    "allMids",
    "l4Book",
    "candle",
    "orderUpdates",
    "userFills",
    "userEvents",
    "userFundings",
    "userNonFundingLedgerUpdates",
    "userTwapSliceFills",
    "userTwapHistory",
    "liquidations",
];

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
