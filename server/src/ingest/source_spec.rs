//! Where ingest's lines come from, as configured (`--source`, `ingest.sources`): a `SourceSpec` names a source and
//! opens it. What operators see of each source (the `SourceBoard`) lives in `state::sources`.

use std::path::PathBuf;

use super::file_source::FileSource;
use super::line_source::LineSource;
use super::nats::source::{NatsSource, NatsTarget};
use crate::node::Mode;

/// Where lines come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceSpec {
    /// A node's data dir (`~/hl/data`) on this host.
    Files(PathBuf),
    /// A JetStream stream that `hlbook relay --nats` publishes into.
    Nats(Box<NatsTarget>),
}

impl SourceSpec {
    /// The name logs, `/health` and metric labels use: `file:PATH` or `nats://HOST:PORT/STREAM`.
    pub fn label(&self) -> String {
        match self {
            SourceSpec::Files(p) => format!("file:{}", p.display()),
            SourceSpec::Nats(t) => format!("nats://{}/{}", t.servers.trim_start_matches("nats://"), t.stream),
        }
    }

    /// The source, positioned after `height`; `lines`: streaming at line speed (`FileSource::fills_first`); lines
    /// over `max_line` bytes are refused.
    pub fn open(&self, mode: Mode, height: u64, lines: bool, max_line: usize) -> Box<dyn LineSource> {
        match self {
            SourceSpec::Files(dir) if lines => Box::new(FileSource::new(dir, mode, height, max_line).fills_first()),
            SourceSpec::Files(dir) => Box::new(FileSource::new(dir, mode, height, max_line)),
            SourceSpec::Nats(t) => Box::new(NatsSource::new(t, mode, height, max_line)),
        }
    }
}
