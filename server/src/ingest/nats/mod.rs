//! NATS JetStream between the node's host and edges (issue #36): `hlbook relay --nats` publishes every node line
//! (`publish`), `hlbook serve --source nats://…` consumes them (`source`), starting at a height found by binary
//! search over the stream (`lookup`).
//!
//! What both sides agree on lives here. A node's lines go to one JetStream stream, one subject per node stream:
//! `<prefix>.<mode>.<fills|diffs|statuses>`. Every message carries its block height and stream in headers, and a
//! message id (`<stream>:<height>:<index>[:<part>]`, `index`: the line's place among its block's lines in that
//! stream) that makes a republished line a duplicate the server drops. Lines above `chunk_bytes` travel in parts
//! (`Hl-Part: i/n`), so the largest status lines (several MB) arrive whole under NATS's default 1 MB payload
//! limit, on any server, cluster or gateway, without raising `max_payload` everywhere.

pub mod lookup;
pub mod publish;
pub mod source;

use std::path::PathBuf;

use anyhow::Context;
use async_nats::HeaderMap;
use serde::Deserialize;

use crate::node::{Mode, Stream};

pub const H_HEIGHT: &str = "Hl-Height";
pub const H_STREAM: &str = "Hl-Stream";
pub const H_INDEX: &str = "Hl-Index";
/// `i/n`: part `i` (from 0) of a line sent in `n` parts; absent for a line sent whole.
pub const H_PART: &str = "Hl-Part";
/// The publisher refused this line (over its `max_line_bytes`): its length; the payload is empty.
pub const H_LOST: &str = "Hl-Lost";

/// `[nats]` in the config file: how to reach NATS and what to call things there. Credentials are read from
/// files named here, never from the command line.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct NatsConfig {
    /// The JetStream stream of one node's lines (each racing node publishes its own).
    pub stream: String,
    /// Subjects are `<subject_prefix>.<mode>.<stream>`; two nodes' streams need different prefixes.
    pub subject_prefix: String,
    /// A NATS user and a file holding its password (deploy/nats/hlbook.conf defines `publisher` and `edge`).
    pub user: String,
    pub password_file: Option<PathBuf>,
    /// A NATS credentials file (JWT + nkey), instead of user and password.
    pub creds_file: Option<PathBuf>,
    /// PEM CA that signed the NATS servers' certificates; set: TLS is required.
    pub tls_ca_file: Option<PathBuf>,
    /// Publisher: how long, and how many bytes, the stream keeps (0 bytes: no byte limit).
    pub max_age_secs: u64,
    pub max_bytes: i64,
    /// Publisher: stream replicas (3 in a 3-node cluster).
    pub replicas: usize,
    /// Publisher: lines longer than this go in parts of at most this many bytes (below NATS's 1 MB default
    /// `max_payload`, headers included).
    pub chunk_bytes: usize,
}

impl Default for NatsConfig {
    fn default() -> NatsConfig {
        NatsConfig {
            stream: "HL".into(),
            subject_prefix: "hl".into(),
            user: String::new(),
            password_file: None,
            creds_file: None,
            tls_ca_file: None,
            max_age_secs: 6 * 3600,
            max_bytes: 0,
            replicas: 1,
            chunk_bytes: 900 * 1024,
        }
    }
}

impl NatsConfig {
    pub fn check(&self) -> Result<(), String> {
        let name_ok = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !name_ok(&self.stream) {
            return Err(format!("nats.stream {:?}: letters, digits, `_` and `-` only", self.stream));
        }
        if self.subject_prefix.is_empty() || self.subject_prefix.contains(['*', '>', ' ']) {
            return Err(format!("nats.subject_prefix {:?}: a subject without wildcards", self.subject_prefix));
        }
        if !(4096..=64 << 20).contains(&self.chunk_bytes) {
            return Err("nats.chunk_bytes: 4096 ..= 67108864".into());
        }
        if !(1..=5).contains(&self.replicas) {
            return Err("nats.replicas: 1 ..= 5".into());
        }
        if self.user.is_empty() != self.password_file.is_none() {
            return Err("nats.user and nats.password_file go together".into());
        }
        Ok(())
    }
}

pub fn subject(prefix: &str, mode: Mode, stream: Stream) -> String {
    format!("{prefix}.{}.{}", mode.as_str(), stream_word(stream))
}

pub fn stream_word(stream: Stream) -> &'static str {
    match stream {
        Stream::Fills => "fills",
        Stream::Diffs => "diffs",
        Stream::Statuses => "statuses",
    }
}

pub fn word_stream(word: &str) -> Option<Stream> {
    Stream::ALL.into_iter().find(|&s| stream_word(s) == word)
}

/// A header parsed as a number.
pub fn header_u64(h: &HeaderMap, name: &str) -> Option<u64> {
    h.get(name)?.as_str().parse().ok()
}

/// `Hl-Part: i/n` as `(i, n)`; `(0, 1)` when absent.
pub fn header_part(h: &HeaderMap) -> Option<(u64, u64)> {
    let Some(v) = h.get(H_PART) else { return Some((0, 1)) };
    let (i, n) = v.as_str().split_once('/')?;
    let (i, n) = (i.parse().ok()?, n.parse().ok()?);
    (i < n).then_some((i, n))
}

/// Connects with the credentials and TLS settings of `cfg`; `url` may list several servers, comma-separated.
/// `reconnected` hears of every reconnection (an edge's ordered consumer lives on one server, so it starts over).
pub async fn connect(
    url: &str,
    cfg: &NatsConfig,
    name: &str,
    reconnected: Option<tokio::sync::mpsc::UnboundedSender<()>>,
) -> anyhow::Result<async_nats::Client> {
    let mut opts = match &cfg.creds_file {
        Some(path) => async_nats::ConnectOptions::with_credentials_file(path.clone())
            .await
            .with_context(|| format!("reading nats.creds_file {}", path.display()))?,
        None => async_nats::ConnectOptions::new(),
    };
    if let Some(path) = &cfg.password_file {
        let pass =
            std::fs::read_to_string(path).with_context(|| format!("reading nats.password_file {}", path.display()))?;
        opts = opts.user_and_password(cfg.user.clone(), pass.trim_end().to_string());
    }
    if let Some(ca) = &cfg.tls_ca_file {
        opts = opts.add_root_certificates(ca.clone()).require_tls(true);
    }
    if let Some(tx) = reconnected {
        let seen_disconnect = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        opts = opts.event_callback(move |ev| {
            let (tx, seen) = (tx.clone(), seen_disconnect.clone());
            async move {
                use std::sync::atomic::Ordering::Relaxed;
                match ev {
                    async_nats::Event::Disconnected => seen.store(true, Relaxed),
                    async_nats::Event::Connected if seen.swap(false, Relaxed) => {
                        let _ = tx.send(());
                    }
                    _ => {}
                }
            }
        });
    }
    let servers: Vec<&str> = url.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    let addrs = servers
        .iter()
        .map(|s| s.parse::<async_nats::ServerAddr>().with_context(|| format!("bad NATS server address {s:?}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    opts.name(name)
        .connection_timeout(std::time::Duration::from_secs(5))
        .connect(addrs)
        .await
        .with_context(|| format!("connecting to NATS at {url}"))
}
