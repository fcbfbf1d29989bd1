//! Settings of `hlbook serve`: defaults, then the TOML file (`--config`), then command-line flags.
//!
//! Unknown keys are errors (a typo must not silently fall back to a default), and every value is checked before
//! anything starts, with one message naming the key. `config/hlbook.toml` lists every setting with its default.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::node::Mode;

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub ingest: IngestConfig,
    pub server: ServerConfig,
    pub log: LogConfig,
    /// NATS: credentials, TLS and stream settings for `nats://` sources and `hlbook relay --nats`.
    pub nats: crate::ingest::nats::NatsConfig,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct IngestConfig {
    /// The node's data dir (`~/hl/data`); `~` is expanded.
    pub node_dir: PathBuf,
    /// `by-block` (`--batch-by-block`) or `streaming` (`--stream-with-block-info`).
    pub mode: Mode,
    /// `file` (read `node_dir`), `file:PATH` (another data dir) or `tcp://HOST:PORT` (an `hlbook relay`).
    pub source: String,
    /// Several sources to race, each as in `source` (overrides it when not empty): every line is taken from the
    /// one that delivers it first and checked against the others. By-block only.
    pub sources: Vec<String>,
    /// Racing: how long a line one source skipped may take to come from another before its block counts as
    /// broken (resync), in milliseconds.
    pub race_grace_ms: u64,
    /// Streaming mode: publish each batch of lines as it lands (true), or each block once it is whole.
    pub stream_lines: bool,
    /// At most one snapshot request (resync) per this many seconds, whatever caused it.
    pub resync_min_interval_secs: f64,
    /// The node's info server; empty: no snapshots (bootstrap needs `snapshot_file` then, and no resync).
    pub info_url: String,
    /// Where the node writes the snapshots we ask for: it must be able to write there, and we to read.
    pub snapshot_dir: PathBuf,
    /// Start from this snapshot file instead of asking the node (later resyncs still ask the node).
    pub snapshot_file: Option<PathBuf>,
    /// No block for this long: `stale`.
    pub stale_after_secs: f64,
    /// Slow poll of the source when no file event arrives, in milliseconds.
    pub poll_interval_ms: u64,
    /// Compare with a node snapshot this often; 0 disables periodic validation (coins that racing sources disagree
    /// about are still repaired at once from a snapshot).
    pub validate_interval_secs: f64,
    /// Longest line taken from a source (file or relay), in bytes; a longer one is refused as lost.
    pub max_line_bytes: usize,
    /// A line of a block more than this many blocks past the last one handed out is refused.
    pub max_height_jump: u64,
    /// Racing: later blocks that may wait for a missing earlier one; at this many it is lost (resync), whatever
    /// `race_grace_ms` says.
    pub race_max_parked_blocks: usize,
}

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
    /// Open WebSocket connections, in total and per client IP.
    pub max_connections: usize,
    pub max_connections_per_ip: usize,
    /// New WebSocket connections a minute from one IP.
    pub new_connections_per_minute_per_ip: u32,
    /// Subscriptions one connection may hold.
    pub max_subscriptions: usize,
    /// Largest client frame (and inflated message), in bytes.
    pub max_frame_bytes: usize,
    /// Client messages a minute on one connection.
    pub max_messages_per_minute: u32,
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
    /// Blocks of trades/l4Book frames kept for connections that fall behind, and their byte cap.
    pub backlog_blocks: usize,
    pub backlog_bytes: usize,
    /// Bytes held for one connection and not yet written (its batch's own copies, post answers, l4Book
    /// snapshots); over it the connection is closed with 1008.
    pub conn_budget_bytes: usize,
    /// The same for all connections together; when it is exhausted the heavy holders are closed.
    pub global_budget_bytes: usize,
    /// History reads of the node's files (userFills first frames, candle backfills, candleSnapshot) running at
    /// once, how many may wait for a turn, and how long each waits before it is refused with an error.
    pub history_reads: usize,
    pub history_queue: usize,
    pub history_wait_ms: u64,
    /// Per-user subscriptions (orderUpdates, userFills, userEvents) one client IP may hold, across connections.
    pub max_user_subscriptions_per_ip: usize,
    /// Pass the `info_types` of `POST /info` and socket `post` requests to `ingest.info_url` (the node's info
    /// server); l2Book is always answered from our books.
    pub info_passthrough: bool,
    /// The only info types passed to the node: read-only public market data. Anything else (`fileSnapshot`,
    /// which makes the node write a file) is refused with the type named.
    pub info_types: Vec<String>,
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

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// `human` or `json`.
    pub format: String,
    /// A `tracing` filter, e.g. `info` or `hlbook=debug`; `RUST_LOG` wins when set.
    pub level: String,
}

/// What the four client families (the Python and Rust SDKs, ccxt, @nktkas/hyperliquid) ask the info server at
/// start-up: market metadata, read-only and the same for every client.
pub const DEFAULT_INFO_TYPES: &[&str] = &["meta", "spotMeta", "metaAndAssetCtxs", "spotMetaAndAssetCtxs", "perpDexs"];

impl Default for IngestConfig {
    fn default() -> IngestConfig {
        IngestConfig {
            node_dir: PathBuf::from("~/hl/data"),
            mode: Mode::ByBlock,
            source: "file".into(),
            sources: Vec::new(),
            race_grace_ms: 1000,
            stream_lines: true,
            resync_min_interval_secs: 5.0,
            info_url: "http://127.0.0.1:3001/info".into(),
            snapshot_dir: std::env::temp_dir().join("hlbook-snapshots"),
            snapshot_file: None,
            stale_after_secs: 10.0,
            poll_interval_ms: 100,
            validate_interval_secs: 60.0,
            // The defaults of `ingest::limits` (config sits below ingest; tests/source_limits.rs holds them equal).
            max_line_bytes: 64 << 20,
            max_height_jump: 10_000,
            race_max_parked_blocks: 256,
        }
    }
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            listen: vec!["127.0.0.1:8000".into()],
            admin_listen: vec!["127.0.0.1:8001".into()],
            compression: true,
            compression_level: 1,
            max_connections: 10_000,
            max_connections_per_ip: 1_000,
            new_connections_per_minute_per_ip: 1_200,
            max_subscriptions: 1_000,
            max_frame_bytes: 1 << 20,
            max_messages_per_minute: 2_000,
            idle_timeout_secs: 60,
            header_timeout_secs: 10,
            http_idle_timeout_secs: 60,
            // The WebSocket cap (`max_connections_per_ip`) and room for plain requests beside it.
            max_http_connections_per_ip: 1_100,
            token: String::new(),
            backlog_blocks: 2_048,
            backlog_bytes: 256 << 20,
            conn_budget_bytes: 64 << 20,
            global_budget_bytes: 2 << 30,
            history_reads: 2,
            history_queue: 64,
            history_wait_ms: 10_000,
            max_user_subscriptions_per_ip: 100,
            info_passthrough: true,
            info_types: DEFAULT_INFO_TYPES.iter().map(|t| (*t).to_string()).collect(),
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

impl Default for LogConfig {
    fn default() -> LogConfig {
        LogConfig { format: "human".into(), level: "info".into() }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("config {path}: {message}")]
    Parse { path: String, message: String },
    #[error("invalid setting `{key}`: {why}")]
    Invalid { key: &'static str, why: String },
}

/// Where lines come from, parsed from `ingest.source`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    File,
    /// Another node data dir on this host (`file:PATH`).
    FileAt(PathBuf),
    Tcp(String),
    /// `nats://HOST:PORT[,HOST:PORT…][/STREAM]`: servers as `nats://HOST:PORT,…`, and the stream when named.
    Nats {
        servers: String,
        stream: Option<String>,
    },
}

impl Config {
    /// Reads a TOML file over the defaults.
    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: p.clone(), source })?;
        toml::from_str(&text).map_err(|e| ConfigError::Parse { path: p, message: e.to_string().trim().to_string() })
    }

    /// The file (if any) with `SECTION.KEY=VALUE` overrides applied over it; values are TOML (`5`, `true`,
    /// `"text"`), and a value that is not TOML is taken as a string.
    pub fn load(path: Option<&Path>, overrides: &[String]) -> Result<Config, ConfigError> {
        let (name, text) = match path {
            Some(p) => {
                let name = p.display().to_string();
                let text =
                    std::fs::read_to_string(p).map_err(|source| ConfigError::Read { path: name.clone(), source })?;
                (name, text)
            }
            None => ("(defaults)".to_string(), String::new()),
        };
        let parse_err = |message: String| ConfigError::Parse { path: name.clone(), message };
        let mut table: toml::Table = toml::from_str(&text).map_err(|e| parse_err(e.to_string().trim().to_string()))?;
        for o in overrides {
            let (key, value) =
                o.split_once('=').ok_or_else(|| parse_err(format!("--set {o:?}: expected SECTION.KEY=VALUE")))?;
            let (section, key) = key
                .trim()
                .split_once('.')
                .ok_or_else(|| parse_err(format!("--set {o:?}: expected SECTION.KEY=VALUE")))?;
            let value = toml::from_str::<toml::Table>(&format!("v = {value}"))
                .ok()
                .and_then(|mut t| t.remove("v"))
                .unwrap_or_else(|| toml::Value::String(value.to_string()));
            let entry = table.entry(section.to_string()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
            match entry {
                toml::Value::Table(t) => {
                    t.insert(key.to_string(), value);
                }
                _ => return Err(parse_err(format!("--set {o:?}: `{section}` is not a section"))),
            }
        }
        toml::Value::Table(table).try_into().map_err(|e: toml::de::Error| parse_err(e.to_string().trim().to_string()))
    }

    /// Checks every value; the first bad one is named.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let i = &self.ingest;
        let sources = self.sources()?;
        if sources.len() > 1 && i.mode != Mode::ByBlock {
            return Err(invalid("ingest.sources", "several sources race in by-block mode only"));
        }
        for (n, a) in sources.iter().enumerate() {
            if sources[..n].contains(a) {
                return Err(invalid("ingest.sources", &format!("{a:?} is listed twice")));
            }
        }
        if i.race_grace_ms == 0 || i.race_grace_ms > 60_000 {
            return Err(invalid("ingest.race_grace_ms", "must be 1..=60000"));
        }
        secs("ingest.stale_after_secs", i.stale_after_secs)?;
        secs("ingest.validate_interval_secs", i.validate_interval_secs)?;
        secs("ingest.resync_min_interval_secs", i.resync_min_interval_secs)?;
        if i.max_line_bytes < 1 << 20 {
            return Err(invalid(
                "ingest.max_line_bytes",
                "must be at least 1048576 (real status lines reach several MB)",
            ));
        }
        if i.max_height_jump == 0 {
            return Err(invalid("ingest.max_height_jump", "must be at least 1"));
        }
        if i.race_max_parked_blocks == 0 {
            return Err(invalid("ingest.race_max_parked_blocks", "must be at least 1"));
        }
        if i.poll_interval_ms == 0 || i.poll_interval_ms > 60_000 {
            return Err(invalid("ingest.poll_interval_ms", "must be 1..=60000"));
        }
        if !i.info_url.is_empty() && !i.info_url.starts_with("http://") {
            return Err(invalid("ingest.info_url", "must be an http:// URL (the node's info server is local)"));
        }
        if i.info_url.is_empty() && i.snapshot_file.is_none() {
            return Err(invalid("ingest.info_url", "needed to bootstrap unless ingest.snapshot_file is set"));
        }
        if self.server.listen.is_empty() {
            return Err(invalid("server.listen", "at least one address"));
        }
        for a in &self.server.listen {
            a.parse::<SocketAddr>().map_err(|e| invalid("server.listen", &format!("{a:?}: {e}")))?;
        }
        for a in &self.server.admin_listen {
            a.parse::<SocketAddr>().map_err(|e| invalid("server.admin_listen", &format!("{a:?}: {e}")))?;
        }
        for t in &self.server.info_types {
            if WRITE_INFO_TYPES.contains(&t.as_str()) {
                return Err(invalid("server.info_types", &format!("{t:?} makes the node write; it is never passed")));
            }
        }
        let v = &self.server;
        if !(1..=9).contains(&v.compression_level) {
            return Err(invalid("server.compression_level", "must be 1..=9"));
        }
        for (key, n) in [
            ("server.max_connections", v.max_connections),
            ("server.max_connections_per_ip", v.max_connections_per_ip),
            ("server.new_connections_per_minute_per_ip", v.new_connections_per_minute_per_ip as usize),
            ("server.max_subscriptions", v.max_subscriptions),
            ("server.max_messages_per_minute", v.max_messages_per_minute as usize),
            ("server.idle_timeout_secs", v.idle_timeout_secs as usize),
            ("server.header_timeout_secs", v.header_timeout_secs as usize),
            ("server.http_idle_timeout_secs", v.http_idle_timeout_secs as usize),
            ("server.max_http_connections_per_ip", v.max_http_connections_per_ip),
            ("server.backlog_blocks", v.backlog_blocks),
            ("server.info_max_in_flight", v.info_max_in_flight),
            ("server.info_max_in_flight_per_ip", v.info_max_in_flight_per_ip),
            ("server.info_max_queued_per_ip", v.info_max_queued_per_ip),
            ("server.info_timeout_ms", v.info_timeout_ms as usize),
            ("server.info_max_response_bytes", v.info_max_response_bytes),
            ("server.max_users_per_ip", v.max_users_per_ip),
            ("server.history_reads", v.history_reads),
            ("server.history_wait_ms", v.history_wait_ms as usize),
            ("server.max_user_subscriptions_per_ip", v.max_user_subscriptions_per_ip),
        ] {
            if n == 0 {
                return Err(invalid(key, "must be at least 1"));
            }
        }
        if !(1..=128).contains(&v.ipv6_prefix_len) {
            return Err(invalid("server.ipv6_prefix_len", "must be 1..=128"));
        }
        if v.max_frame_bytes < 1024 {
            return Err(invalid("server.max_frame_bytes", "must be at least 1024"));
        }
        if v.conn_budget_bytes < 1 << 20 || v.global_budget_bytes < v.conn_budget_bytes {
            return Err(invalid(
                "server.conn_budget_bytes",
                "must be at least 1048576 and at most global_budget_bytes",
            ));
        }
        if v.backlog_bytes < 1 << 20 {
            return Err(invalid("server.backlog_bytes", "must be at least 1048576"));
        }
        self.nats.check().map_err(|why| invalid("nats", &why))?;
        if !matches!(self.log.format.as_str(), "human" | "json") {
            return Err(invalid("log.format", "`human` or `json`"));
        }
        Ok(())
    }

    /// The sources to read: `ingest.sources`, or `ingest.source` when that list is empty.
    pub fn sources(&self) -> Result<Vec<Source>, ConfigError> {
        let i = &self.ingest;
        if i.sources.is_empty() {
            return Ok(vec![parse_source("ingest.source", &i.source)?]);
        }
        i.sources.iter().map(|s| parse_source("ingest.sources", s)).collect()
    }

    /// The first source (the only one unless several race).
    pub fn source(&self) -> Result<Source, ConfigError> {
        Ok(self.sources()?.swap_remove(0))
    }

    pub fn node_dir(&self) -> PathBuf {
        expand_home(&self.ingest.node_dir)
    }

    pub fn stale_after(&self) -> Duration {
        Duration::from_secs_f64(self.ingest.stale_after_secs)
    }

    pub fn validate_interval(&self) -> Option<Duration> {
        let s = self.ingest.validate_interval_secs;
        (s > 0.0 && !self.ingest.info_url.is_empty()).then(|| Duration::from_secs_f64(s))
    }
}

fn parse_source(key: &'static str, s: &str) -> Result<Source, ConfigError> {
    if s == "file" {
        return Ok(Source::File);
    }
    if let Some(path) = s.strip_prefix("file:").filter(|p| !p.is_empty()) {
        return Ok(Source::FileAt(expand_home(Path::new(path))));
    }
    if let Some(rest) = s.strip_prefix("nats://") {
        let (hosts, stream) = rest.split_once('/').map_or((rest, None), |(h, st)| (h, Some(st.to_string())));
        let ok = |a: &str| a.rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
        if hosts.split(',').all(ok) && stream.as_deref().is_none_or(|st| !st.is_empty() && !st.contains('/')) {
            let servers = hosts.split(',').map(|a| format!("nats://{a}")).collect::<Vec<_>>().join(",");
            return Ok(Source::Nats { servers, stream });
        }
        return Err(invalid(key, &format!("{s:?}: expected `nats://HOST:PORT[,HOST:PORT…][/STREAM]`")));
    }
    match s.strip_prefix("tcp://") {
        Some(addr) if addr.rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok()) => {
            Ok(Source::Tcp(addr.to_string()))
        }
        _ => {
            Err(invalid(key, &format!("{s:?}: expected `file`, `file:PATH`, `tcp://HOST:PORT` or `nats://HOST:PORT`")))
        }
    }
}

/// Info types that make the node act rather than answer; refused even when listed.
pub const WRITE_INFO_TYPES: &[&str] = &["fileSnapshot"];

fn invalid(key: &'static str, why: &str) -> ConfigError {
    ConfigError::Invalid { key, why: why.to_string() }
}

fn secs(key: &'static str, v: f64) -> Result<(), ConfigError> {
    if v.is_finite() && (0.0..=86_400.0).contains(&v) { Ok(()) } else { Err(invalid(key, "seconds in 0..=86400")) }
}

/// `~/…` under `$HOME`; other paths unchanged.
pub fn expand_home(p: &Path) -> PathBuf {
    match (p.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => p.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, String> {
        let c: Config = toml::from_str(text).map_err(|e| e.to_string())?;
        c.validate().map_err(|e| e.to_string())?;
        Ok(c)
    }

    #[test]
    fn set_overrides_any_key_and_is_checked() {
        let set = |v: &[&str]| Config::load(None, &v.iter().map(std::string::ToString::to_string).collect::<Vec<_>>());
        let c = set(&["server.max_connections=5", "server.token=s3cret", "ingest.mode=\"streaming\""]).unwrap();
        assert_eq!((c.server.max_connections, c.server.token.as_str(), c.ingest.mode), (5, "s3cret", Mode::Streaming));
        assert!(set(&["server.nope=1"]).unwrap_err().to_string().contains("nope"));
        assert!(set(&["server.max_connections=lots"]).is_err());
        assert!(set(&["nodot=1"]).is_err());
    }

    #[test]
    fn defaults_are_valid_and_files_override_them() {
        Config::default().validate().unwrap();
        let c = parse("[ingest]\nmode = \"streaming\"\nsource = \"tcp://10.0.0.1:7000\"\n").unwrap();
        assert_eq!(c.ingest.mode, Mode::Streaming);
        assert_eq!(c.source().unwrap(), Source::Tcp("10.0.0.1:7000".into()));
        assert_eq!(c.server, ServerConfig::default());
        let c = parse("[ingest]\nsource = \"nats://a:4222,b:4222/HL2\"\n").unwrap();
        let servers = "nats://a:4222,nats://b:4222".to_string();
        assert_eq!(c.source().unwrap(), Source::Nats { servers, stream: Some("HL2".into()) });
    }

    #[test]
    fn the_shipped_config_lists_the_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/hlbook.toml");
        let shipped = Config::from_file(&path).unwrap();
        shipped.validate().unwrap();
        // The one deliberate difference: a system path for snapshots instead of the temp dir.
        let defaults = Config {
            ingest: IngestConfig { snapshot_dir: "/var/lib/hlbook/snapshots".into(), ..IngestConfig::default() },
            ..Config::default()
        };
        assert_eq!(shipped, defaults);
    }

    #[test]
    fn bad_settings_name_their_key() {
        for (text, key) in [
            ("[ingest]\nnode_dri = \"/x\"\n", "node_dri"),
            ("[ingest]\nsource = \"udp://x:1\"\n", "ingest.source"),
            ("[ingest]\nsource = \"tcp://nohost\"\n", "ingest.source"),
            ("[ingest]\nsource = \"nats://a:4222/\"\n", "ingest.source"),
            ("[nats]\nchunk_bytes = 10\n", "nats"),
            ("[ingest]\nmode = \"fast\"\n", "mode"),
            ("[ingest]\nstale_after_secs = -1\n", "ingest.stale_after_secs"),
            ("[ingest]\ninfo_url = \"\"\n", "ingest.info_url"),
            ("[server]\nlisten = [\"localhost\"]\n", "server.listen"),
            ("[server]\nadmin_listen = [\"x\"]\n", "server.admin_listen"),
            ("[server]\ninfo_types = [\"meta\", \"fileSnapshot\"]\n", "server.info_types"),
            ("[server]\ninfo_max_in_flight = 0\n", "server.info_max_in_flight"),
            ("[log]\nformat = \"xml\"\n", "log.format"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(key), "{text:?}: {e}");
        }
    }
}
