//! NATS JetStream between the node's host and edges (issue #36): `hlbook relay --nats` publishes every node line
//! (`publish`), `hlbook serve --source nats://…` consumes them (`source`, `lines`), starting at a height found by
//! binary search over the stream (`lookup`). Snapshots go the same way: the publisher keeps node snapshots in an
//! object store and answers requests for them (`keeper`), edges bootstrap, resync and validate from them
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
pub mod keeper;
mod lines;
pub mod lookup;
pub mod publish;
pub mod snapshots;
pub mod source;

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
