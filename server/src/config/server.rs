//! `[server]`: the listeners, their limits, and what is passed to the node's info server.

use std::net::IpAddr;

use serde::Deserialize;

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Addresses to serve the public endpoints on (`/ws`, `POST /info`, `/health`; several allowed).
    pub listen: Vec<String>,
    /// Addresses for the operator's endpoints (`/status`, `/metrics`, `/l4snapshot`, the status page, and
    /// `/health` again); empty turns them off. Loopback by default: they reveal every resting order's user.
    pub admin_listen: Vec<String>,
    /// Offer permessage-deflate to clients that ask for it.
    pub compression: bool,
    /// Deflate level 1 (fastest) to 9; each shared frame is compressed once at this level.
    pub compression_level: u32,
    /// Open WebSocket connections, in total and per client IP (the exchange allows an IP 100).
    pub max_connections: usize,
    pub max_connections_per_ip: usize,
    /// New WebSocket connections a minute from one IP.
    pub new_connections_per_minute_per_ip: u32,
    /// Subscriptions one connection may hold.
    pub max_subscriptions: usize,
    /// Subscriptions one client IP may hold across all of its connections (the exchange allows 1,000).
    pub max_subscriptions_per_ip: usize,
    /// Largest client frame (and inflated message), in bytes.
    pub max_frame_bytes: usize,
    /// Client messages a minute on one connection, pings included.
    pub max_messages_per_minute: u32,
    /// Client messages a minute from one client IP across all of its connections, pings included (the exchange
    /// allows 2,000); the connection whose message goes over is closed with 1008.
    pub max_messages_per_minute_per_ip: u32,
    /// Close a connection after this many seconds with nothing sent or received.
    pub idle_timeout_secs: u64,
    /// Every listener (public and admin): a request's headers must be complete within this many seconds of the
    /// server starting to wait for them (at accept, and after each response on a keep-alive connection), or the
    /// connection is dropped, so a client that sends nothing or a byte at a time (slowloris) holds nothing long.
    pub header_timeout_secs: u64,
    /// Every listener: a plain HTTP connection with no request being answered and no byte moving either way for
    /// this many seconds is closed. WebSocket connections, once upgraded, follow `idle_timeout_secs` instead.
    pub http_idle_timeout_secs: u64,
    /// Every listener: open TCP connections (plain HTTP and WebSocket alike) from one client IP group
    /// (`ipv6_prefix_len`); the public and the admin listeners count apart. More are closed at accept, before a
    /// byte is read. Peers in `trusted_proxies` are not capped here (their clients are, at `/ws`).
    pub max_http_connections_per_ip: usize,
    /// Require this bearer token (`?token=` or `Authorization: Bearer`); empty: open.
    pub token: String,
    /// Named tokens (`[[server.tokens]]`), each with allowances of its own: a client presenting one may use `/ws`
    /// and `POST /info`, and its connections, subscriptions and messages count against the token, not its IP.
    pub tokens: Vec<NamedToken>,
    /// Blocks of trades/l4Book frames kept for connections that fall behind, and their byte cap.
    pub backlog_blocks: usize,
    pub backlog_bytes: usize,
    /// Seconds an ordered stream (trades, l4Book, candle, a user's channels) is still built after its last
    /// subscriber leaves, so a client that lost its connection can resume it with `since` (docs/api.md "Resume").
    pub resume_window_secs: u64,
    /// Bytes held for one connection and not yet written (its batch's own copies, post answers, l4Book
    /// snapshots); over it the connection is closed with 1008.
    pub conn_budget_bytes: usize,
    /// The same for all connections together, a hard bound: past it new connections and subscriptions are
    /// refused and the largest holders are closed until the rest fits.
    pub global_budget_bytes: usize,
    /// History reads of the node's files (userFills first frames, candle backfills, candleSnapshot) running at
    /// once, how many may wait for a turn, and how long each waits before it is refused with an error.
    pub history_reads: usize,
    pub history_queue: usize,
    pub history_wait_ms: u64,
    /// The wall time `/status` (and `hlbook_blocks_per_second`) describes: settled blocks of the last this many
    /// seconds.
    pub status_window_secs: u64,
    /// Per-user subscriptions (orderUpdates, userFills, userEvents) one client IP may hold, across connections.
    pub max_user_subscriptions_per_ip: usize,
    /// Pass the `info_types` of `POST /info` and socket `post` requests to `ingest.info_url` (the node's info
    /// server); the types hlbook answers itself (`ws::info`) never go there.
    pub info_passthrough: bool,
    /// The info types passed to the node: by default every read type a node's `--serve-info` answers
    /// (`NODE_INFO_TYPES`). `fileSnapshot`, which makes the node write a file, is never passed.
    pub info_types: Vec<String>,
    /// Weight of info requests one client IP may spend a minute (`POST /info` and socket `post` together), each
    /// type weighted as the exchange weighs it (`ws::info_weight`); 0: no limit. The exchange allows 1200.
    pub info_weight_per_minute: u32,
    /// An info server for the types neither hlbook nor the node answers (`metaAndAssetCtxs`, `fundingHistory`,
    /// history older than the store, …), e.g. `https://api.hyperliquid.xyz/info`; empty: they are refused with
    /// a text that names this setting.
    pub upstream_info_url: String,
    /// Identical upstream requests within this many milliseconds share one answer.
    pub upstream_cache_ms: u64,
    /// Weight of upstream requests this server may spend a minute, all clients together (the exchange allows one
    /// IP 1200; keep room for `store.seed_url`).
    pub upstream_weight_per_minute: u32,
    /// Passed-through requests in flight at the node at once, in total.
    pub info_max_in_flight: usize,
    /// Info requests of one client IP being answered at once, of every type (`ws::info_gate`).
    pub info_max_in_flight_per_ip: usize,
    /// Info requests of one client IP waiting for a place, beyond which it is refused (429).
    pub info_max_queued_per_ip: usize,
    /// A passed-through request's limit, waiting included.
    pub info_timeout_ms: u64,
    /// Largest answer taken from the node; a larger one is an error (502).
    pub info_max_response_bytes: usize,
    /// Identical requests within this many milliseconds share one answer from the node (0: no cache).
    pub info_cache_ms: u64,
    /// Balancers in front of this server: for connections from these addresses the per-IP limits apply to the
    /// client named by `X-Forwarded-For`, not to the balancer.
    pub trusted_proxies: Vec<IpAddr>,
    /// Distinct users (orderUpdates, userFills, userEvents) one client IP may follow (the official API: 15).
    pub max_users_per_ip: usize,
    /// Per-IP limits count an IPv6 client by its first this many bits (a /64 is one subscriber's network; 128 counts
    /// every address apart).
    pub ipv6_prefix_len: u8,
}

/// A named bearer token and its allowances across all of its connections; an unset one is the per-IP default
/// (`max_connections_per_ip`, `max_subscriptions_per_ip`, `max_messages_per_minute_per_ip`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NamedToken {
    /// Names the token in refusals and logs (never the token itself).
    pub name: String,
    pub token: String,
    pub max_connections: Option<usize>,
    pub max_subscriptions: Option<usize>,
    pub max_messages_per_minute: Option<u32>,
}

impl NamedToken {
    /// Its allowances: (connections, subscriptions, messages a minute), the per-IP ones where unset.
    pub fn allowances(&self, c: &ServerConfig) -> (usize, usize, u32) {
        (
            self.max_connections.unwrap_or(c.max_connections_per_ip),
            self.max_subscriptions.unwrap_or(c.max_subscriptions_per_ip),
            self.max_messages_per_minute.unwrap_or(c.max_messages_per_minute_per_ip),
        )
    }
}

/// Named tokens have names, are told apart from each other and from `server.token`, and allow at least one of
/// everything they set.
pub(super) fn check_tokens(c: &ServerConfig) -> Result<(), super::ConfigError> {
    let bad = |why: String| Err(super::invalid("server.tokens", &why));
    for (n, t) in c.tokens.iter().enumerate() {
        if t.name.is_empty() || t.token.is_empty() {
            return bad(format!("entry {n}: a name and a token"));
        }
        if t.token == c.token || c.tokens[..n].iter().any(|o| o.token == t.token || o.name == t.name) {
            return bad(format!("{:?}: its name and token must be its own", t.name));
        }
        let (conns, subs, msgs) = t.allowances(c);
        if conns == 0 || subs == 0 || msgs == 0 {
            return bad(format!("{:?}: limits must be at least 1", t.name));
        }
    }
    Ok(())
}

/// Every read type a node's info server (`--serve-info`) answers, as the node's README lists them
/// (../shared/docs/hl-node-info-server.md). `fileSnapshot`, the one that writes, is not among them. Per-user
/// reads are public on the exchange too, so passing them on tells a client nothing it could not ask there.
pub const NODE_INFO_TYPES: &[&str] = &[
    "meta",
    "spotMeta",
    "clearinghouseState",
    "spotClearinghouseState",
    "openOrders",
    "exchangeStatus",
    "frontendOpenOrders",
    "liquidatable",
    "activeAssetData",
    "maxMarketOrderNtls",
    "vaultSummaries",
    "userVaultEquities",
    "leadingVaults",
    "extraAgents",
    "subAccounts",
    "userFees",
    "userRateLimit",
    "spotDeployState",
    "perpDeployAuctionStatus",
    "delegations",
    "delegatorSummary",
    "maxBuilderFee",
    "userToMultiSigSigners",
    "userRole",
    "perpsAtOpenInterestCap",
    "validatorL1Votes",
    "marginTable",
    "perpDexs",
    "webData2",
];

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            listen: vec!["127.0.0.1:8000".into()],
            admin_listen: vec!["127.0.0.1:8001".into()],
            compression: true,
            compression_level: 1,
            max_connections: 10_000,
            max_connections_per_ip: 100,
            new_connections_per_minute_per_ip: 1_200,
            max_subscriptions: 1_000,
            max_subscriptions_per_ip: 1_000,
            max_frame_bytes: 1 << 20,
            max_messages_per_minute: 2_000,
            max_messages_per_minute_per_ip: 2_000,
            idle_timeout_secs: 60,
            header_timeout_secs: 10,
            http_idle_timeout_secs: 60,
            // The WebSocket cap (`max_connections_per_ip`) and room for plain requests beside it.
            max_http_connections_per_ip: 200,
            token: String::new(),
            tokens: Vec::new(),
            backlog_blocks: 2_048,
            backlog_bytes: 256 << 20,
            resume_window_secs: 60,
            conn_budget_bytes: 64 << 20,
            global_budget_bytes: 2 << 30,
            history_reads: 2,
            history_queue: 64,
            history_wait_ms: 10_000,
            status_window_secs: 60,
            max_user_subscriptions_per_ip: 100,
            info_passthrough: true,
            info_types: NODE_INFO_TYPES.iter().map(|t| (*t).to_string()).collect(),
            info_weight_per_minute: 1_200,
            upstream_info_url: String::new(),
            upstream_cache_ms: 2_000,
            upstream_weight_per_minute: 600,
            info_max_in_flight: 4,
            info_max_in_flight_per_ip: 2,
            info_max_queued_per_ip: 256,
            info_timeout_ms: 10_000,
            info_max_response_bytes: 64 << 20,
            info_cache_ms: 1_000,
            trusted_proxies: Vec::new(),
            max_users_per_ip: 15,
            ipv6_prefix_len: 64,
        }
    }
}
