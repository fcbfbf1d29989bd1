//! Where ingest's lines come from (`--source`, `ingest.source`, `ingest.sources`), parsed and resolved against the
//! rest of the settings: `file` becomes `ingest.node_dir`, and a `nats://` source without a stream takes `[nats]`'s
//! stream and credentials. One type for the setting and for what ingest opens, so the two cannot disagree; ingest
//! opens it (`ingest::open_source`), and what operators see of each source lives in `state::sources`.

use std::path::{Path, PathBuf};

use super::{ConfigError, NatsConfig, TCP_RETIRED, expand_home, invalid};

/// Where lines come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A node's data dir (`~/hl/data`) on this host: `file` (`ingest.node_dir`) or `file:PATH`.
    Files(PathBuf),
    /// A JetStream stream that `hlbook relay --nats` publishes into: `nats://HOST:PORT[,HOST:PORT…][/STREAM]`.
    Nats(Box<NatsTarget>),
}

/// Where a NATS source reads: servers (`nats://HOST:PORT`, comma-separated) and the stream, with `[nats]` for
/// credentials and TLS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NatsTarget {
    pub servers: String,
    pub stream: String,
    pub cfg: NatsConfig,
}

impl Source {
    /// The name logs, `/health` and metric labels use: `file:PATH` or `nats://HOST:PORT/STREAM`.
    pub fn label(&self) -> String {
        match self {
            Source::Files(p) => format!("file:{}", p.display()),
            Source::Nats(t) => format!("nats://{}/{}", t.servers.trim_start_matches("nats://"), t.stream),
        }
    }
}

/// `s`, the value of `key`: `file` is `node_dir`, and a `nats://` source without a stream reads `nats.stream`.
pub(super) fn parse(key: &'static str, s: &str, node_dir: &Path, nats: &NatsConfig) -> Result<Source, ConfigError> {
    if s == "file" {
        return Ok(Source::Files(node_dir.to_path_buf()));
    }
    if let Some(path) = s.strip_prefix("file:").filter(|p| !p.is_empty()) {
        return Ok(Source::Files(expand_home(Path::new(path))));
    }
    if let Some(rest) = s.strip_prefix("nats://") {
        let (hosts, stream) = rest.split_once('/').map_or((rest, None), |(h, st)| (h, Some(st.to_string())));
        let ok = |a: &str| a.rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
        if hosts.split(',').all(ok) && stream.as_deref().is_none_or(|st| !st.is_empty() && !st.contains('/')) {
            let servers = hosts.split(',').map(|a| format!("nats://{a}")).collect::<Vec<_>>().join(",");
            let stream = stream.unwrap_or_else(|| nats.stream.clone());
            return Ok(Source::Nats(Box::new(NatsTarget { servers, stream, cfg: nats.clone() })));
        }
        return Err(invalid(key, &format!("{s:?}: expected `nats://HOST:PORT[,HOST:PORT…][/STREAM]`")));
    }
    if s.starts_with("tcp://") {
        return Err(invalid(key, &format!("{s:?}: {TCP_RETIRED}")));
    }
    Err(invalid(key, &format!("{s:?}: expected `file`, `file:PATH` or `nats://HOST:PORT[/STREAM]`")))
}
