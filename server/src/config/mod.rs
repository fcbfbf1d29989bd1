//! Settings of `hlbook serve`: defaults, then the TOML file (`--config`), then command-line flags.
//!
//! Unknown keys are errors (a typo must not silently fall back to a default), and every value is checked before
//! anything starts, with one message naming the key. `config/hlbook.toml` lists every setting with its default.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::node::Mode;

mod ingest;
mod nats;
mod server;
mod source;
mod store;

pub use ingest::IngestConfig;
pub use nats::NatsConfig;
pub use server::{NODE_INFO_TYPES, NamedToken, ServerConfig};
pub use source::{NatsTarget, Source};
pub use store::{FillsUsers, StoreConfig};

#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub ingest: IngestConfig,
    pub server: ServerConfig,
    pub store: StoreConfig,
    pub log: LogConfig,
    /// NATS: credentials, TLS and stream settings for `nats://` sources and `hlbook relay --nats`.
    pub nats: NatsConfig,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// `human` or `json`.
    pub format: String,
    /// A `tracing` filter, e.g. `info` or `hlbook=debug`; `RUST_LOG` wins when set.
    pub level: String,
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
                return Err(invalid("ingest.sources", &format!("{} is listed twice", a.label())));
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
        if i.max_pending_bytes < i.max_line_bytes {
            return Err(invalid("ingest.max_pending_bytes", "must be at least ingest.max_line_bytes"));
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
        if i.info_url.is_empty() && i.snapshot_file.is_none() && !self.nats_snapshots() {
            return Err(invalid(
                "ingest.info_url",
                "needed to bootstrap unless ingest.snapshot_file is set or a nats:// source brings snapshots",
            ));
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
        let up = &v.upstream_info_url;
        if !up.is_empty() && !up.starts_with("http://") && !up.starts_with("https://") {
            return Err(invalid("server.upstream_info_url", "must be an http:// or https:// URL, or empty"));
        }
        if !up.is_empty() && v.upstream_weight_per_minute == 0 {
            return Err(invalid("server.upstream_weight_per_minute", "must be at least 1 with an upstream"));
        }
        if !(1..=9).contains(&v.compression_level) {
            return Err(invalid("server.compression_level", "must be 1..=9"));
        }
        for (key, n) in [
            ("server.max_connections", v.max_connections),
            ("server.max_connections_per_ip", v.max_connections_per_ip),
            ("server.new_connections_per_minute_per_ip", v.new_connections_per_minute_per_ip as usize),
            ("server.max_subscriptions", v.max_subscriptions),
            ("server.max_subscriptions_per_ip", v.max_subscriptions_per_ip),
            ("server.max_messages_per_minute", v.max_messages_per_minute as usize),
            ("server.max_messages_per_minute_per_ip", v.max_messages_per_minute_per_ip as usize),
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
        if v.resume_window_secs > 3600 {
            return Err(invalid("server.resume_window_secs", "must be 0..=3600"));
        }
        if !(1..=3600).contains(&v.status_window_secs) {
            return Err(invalid("server.status_window_secs", "must be 1..=3600"));
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
        server::check_tokens(v)?;
        self.store.check()?;
        self.nats.check().map_err(|why| invalid("nats", &why))?;
        if !matches!(self.log.format.as_str(), "human" | "json") {
            return Err(invalid("log.format", "`human` or `json`"));
        }
        Ok(())
    }

    /// The sources to read: `ingest.sources`, or `ingest.source` when that list is empty; `file` is
    /// `ingest.node_dir`, and a `nats://` source without a stream reads `[nats]`'s.
    pub fn sources(&self) -> Result<Vec<Source>, ConfigError> {
        let (i, dir) = (&self.ingest, self.node_dir());
        if i.sources.is_empty() {
            return Ok(vec![source::parse("ingest.source", &i.source, &dir, &self.nats)?]);
        }
        i.sources.iter().map(|s| source::parse("ingest.sources", s, &dir, &self.nats)).collect()
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
        (s > 0.0 && (!self.ingest.info_url.is_empty() || self.nats_snapshots())).then(|| Duration::from_secs_f64(s))
    }

    /// An edge: no node info server, so snapshots come from the publisher of its first `nats://` source.
    pub fn nats_snapshots(&self) -> bool {
        self.ingest.info_url.is_empty() && self.sources().is_ok_and(|s| s.iter().any(|s| matches!(s, Source::Nats(_))))
    }
}

/// What a `tcp://` source, or `hlbook relay --listen`, is told: the TCP relay is gone, NATS replaces it.
pub const TCP_RETIRED: &str = "the TCP relay and `tcp://` sources were retired; publish with `hlbook relay --nats` \
     and read `nats://HOST:4222/STREAM` (docs/operations.md, \"Moving from the TCP relay to NATS\")";

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
#[path = "config_tests.rs"]
mod tests;
