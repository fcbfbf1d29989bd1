//! NATS JetStream between the node's host and edges (issue #36): `hlbook relay --nats` publishes every node line
//! (`publish`), `hlbook serve --source nats://…` consumes them (`source`, `lines`), starting at a height found by
//! binary search over the stream (`lookup`). Snapshots go the same way: the publisher keeps node snapshots in an
//! object store and answers requests for them (`snapshot_keeper`), edges bootstrap, resync and validate from them
//! (`snapshots`).
//!
//! What both sides agree on lives here. A node's lines go to one JetStream stream, one subject per node stream:
//! `<prefix>.<mode>.<fills|diffs|statuses>`. Every message carries its block height and stream in headers, and a
//! message id (`<stream>:<height>:<index>[:<part>]`, `index`: the line's place among its block's lines in that
//! stream) that makes a republished line a duplicate the server drops. Lines above `chunk_bytes` travel in parts
//! (`Hl-Part: i/n`), so the largest status lines (several MB) arrive whole under NATS's default 1 MB payload
//! limit, on any server, cluster or gateway, without raising `max_payload` everywhere. Lines of at least
//! `compress_min_bytes` travel zstd-compressed (`codec` says why); a line's parts are cut from the compressed bytes.

mod codec;
mod lines;
pub mod lookup;
pub mod metrics;
pub mod mirror;
pub mod publish;
pub mod snapshot_keeper;
pub mod snapshots;
pub mod source;
mod streams;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use anyhow::Context;
use async_nats::HeaderMap;

use crate::node::{Mode, Stream};

pub const H_HEIGHT: &str = "Hl-Height";
pub const H_STREAM: &str = "Hl-Stream";
pub const H_INDEX: &str = "Hl-Index";
/// `i/n`: part `i` (from 0) of a line sent in `n` parts; absent for a line sent whole.
pub const H_PART: &str = "Hl-Part";
/// The publisher refused this line (over its `max_line_bytes`): its length; the payload is empty.
pub const H_LOST: &str = "Hl-Lost";
/// `height:index` of the line before this one on the same subject, as the publisher knows it: an edge takes a
/// line straight from the subject (not yet from the stream) only when it follows the edge's last line there.
pub const H_PREV: &str = "Hl-Prev";
/// `zstd`: the payload (all parts together) is the line compressed; absent: the line as the node wrote it.
pub const H_ENC: &str = "Hl-Enc";
/// The line's length, on each part of a line sent in parts or compressed: an edge knows a line is over its limit
/// at the first part, and never inflates past it.
pub const H_LEN: &str = "Hl-Len";

pub use crate::config::NatsConfig;
pub use crate::config::NatsTarget;

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

/// A `height:index` header (`Hl-Prev`).
pub fn header_key(h: &HeaderMap, name: &str) -> Option<(u64, u64)> {
    let (height, index) = h.get(name)?.as_str().split_once(':')?;
    Some((height.parse().ok()?, index.parse().ok()?))
}

/// `Hl-Part: i/n` as `(i, n)`; `(0, 1)` when absent.
pub fn header_part(h: &HeaderMap) -> Option<(u64, u64)> {
    let Some(v) = h.get(H_PART) else { return Some((0, 1)) };
    let (i, n) = v.as_str().split_once('/')?;
    let (i, n) = (i.parse().ok()?, n.parse().ok()?);
    (i < n).then_some((i, n))
}

/// JetStream in `cfg`'s domain (a regional mirror's), or the server's own.
pub fn jetstream(client: async_nats::Client, cfg: &NatsConfig) -> async_nats::jetstream::Context {
    if cfg.domain.is_empty() {
        async_nats::jetstream::new(client)
    } else {
        async_nats::jetstream::with_domain(client, &cfg.domain)
    }
}

/// The subject prefix of stream `st`'s lines in `mode`: from its subjects, or for a mirror (which has none) the
/// config's `nats.subject_prefix`.
pub fn stream_prefix(st: &async_nats::jetstream::stream::Stream, mode: Mode, cfg: &NatsConfig) -> Option<String> {
    let c = &st.cached_info().config;
    if c.mirror.is_some() {
        return Some(cfg.subject_prefix.clone());
    }
    let wanted = format!(".{}.*", mode.as_str());
    c.subjects.iter().find_map(|s| s.strip_suffix(&wanted)).map(str::to_string)
}

/// What a connection reports besides its messages.
#[derive(Debug, Default, Clone)]
pub struct Watch {
    /// Hears of every reconnection (an edge's ordered consumer lives on one server, so it starts over), and of
    /// credentials refused (revoked while connected: the client would retry them forever).
    pub reconnected: Option<tokio::sync::mpsc::UnboundedSender<()>>,
    /// Counts what the server refused (a subscription or publish its permissions do not allow).
    pub denied: Option<Arc<AtomicU64>>,
}

/// rustls picks its crypto provider by itself only when one is compiled in; reqwest's `rustls` feature brings
/// aws-lc-rs beside async-nats's ring, and then a TLS connection to NATS panicked. Ring is installed for the
/// process unless something chose one already.
fn tls_provider() {
    use async_nats::rustls::crypto::{CryptoProvider, ring};
    if CryptoProvider::get_default().is_none() {
        let _ = ring::default_provider().install_default();
    }
}

/// Whether the server refused the credentials: at once (`-ERR 'Authorization Violation'`, a user removed while
/// connected) or when the client tried them again on reconnecting.
fn is_refused_login(ev: &async_nats::Event) -> bool {
    match ev {
        async_nats::Event::ServerError(async_nats::ServerError::AuthorizationViolation) => true,
        async_nats::Event::ClientError(async_nats::ClientError::Other(s)) => s.contains("authorization violation"),
        _ => false,
    }
}

/// Whether a server error is a refused subscription or publish (nats-server: `Permissions Violation for …`).
fn is_permission_violation(e: &async_nats::ServerError) -> bool {
    matches!(e, async_nats::ServerError::Other(s) if s.to_lowercase().contains("permissions violation"))
}

/// Connects with the credentials and TLS settings of `cfg`; `url` may list several servers, comma-separated.
/// Replies come to `cfg`'s own inbox prefix. A refused subscription or publish is a WARN, counted in
/// `watch.denied`: with the shipped permissions it means this client and the accounts disagree, and whatever
/// relied on it (the live path) is not working.
pub async fn connect(url: &str, cfg: &NatsConfig, name: &str, watch: Watch) -> anyhow::Result<async_nats::Client> {
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
        tls_provider();
        opts = opts.add_root_certificates(ca.clone()).require_tls(true);
    }
    let seen_disconnect = Arc::new(AtomicBool::new(false));
    let who = format!("{name} as {}", if cfg.user.is_empty() { "its credentials" } else { cfg.user.as_str() });
    opts = opts.event_callback(move |ev| {
        let (watch, seen, who) = (watch.clone(), seen_disconnect.clone(), who.clone());
        async move {
            match ev {
                async_nats::Event::Disconnected => seen.store(true, Relaxed),
                async_nats::Event::Connected if seen.swap(false, Relaxed) => {
                    if let Some(tx) = &watch.reconnected {
                        let _ = tx.send(());
                    }
                }
                ev if is_refused_login(&ev) => {
                    tracing::warn!("NATS refused the credentials of {who} (revoked?): {ev}");
                    if let Some(tx) = &watch.reconnected {
                        let _ = tx.send(());
                    }
                }
                async_nats::Event::ServerError(e) if is_permission_violation(&e) => {
                    let n = watch.denied.as_ref().map_or(1, |d| d.fetch_add(1, Relaxed) + 1);
                    tracing::warn!("NATS refused {who}: {e} (refusal #{n}; deploy/nats/accounts.conf)");
                }
                _ => {}
            }
        }
    });
    let servers: Vec<&str> = url.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    let addrs = servers
        .iter()
        .map(|s| s.parse::<async_nats::ServerAddr>().with_context(|| format!("bad NATS server address {s:?}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    opts.name(name)
        .custom_inbox_prefix(cfg.inbox_prefix())
        .connection_timeout(std::time::Duration::from_secs(5))
        .connect(addrs)
        .await
        .with_context(|| format!("connecting to NATS at {url}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_permission_errors_count_as_refusals() {
        let refused =
            async_nats::ServerError::Other("permissions violation for subscription to \"hl.by-block.*\"".into());
        assert!(is_permission_violation(&refused));
        assert!(!is_permission_violation(&async_nats::ServerError::Other("maximum payload violation".into())));
        assert!(!is_permission_violation(&async_nats::ServerError::AuthorizationViolation));
    }

    #[test]
    fn refused_credentials_are_told_apart_from_other_errors() {
        use async_nats::{ClientError, Event, ServerError};
        assert!(is_refused_login(&Event::ServerError(ServerError::AuthorizationViolation)));
        assert!(is_refused_login(&Event::ClientError(ClientError::Other("authorization violation".into()))));
        assert!(!is_refused_login(&Event::ClientError(ClientError::Other("io error".into()))));
        assert!(!is_refused_login(&Event::Disconnected));
    }
}
