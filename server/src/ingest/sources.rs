//! The sources ingest reads from: `SourceSpec` (where lines come from) and what a source is missing when it gives
//! nothing (`diagnose_dir`). What operators see of each source (the `SourceBoard`) lives in `state::sources`.

use std::path::{Path, PathBuf};

use super::nats::source::{NatsSource, NatsTarget};
use super::source::{FileSource, LineSource};
use crate::node::{Mode, Stream};

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

/// The node flag that makes it write `stream`.
fn stream_flag(stream: Stream) -> &'static str {
    match stream {
        Stream::Fills => "--write-fills",
        Stream::Diffs => "--write-raw-book-diffs",
        Stream::Statuses => "--write-order-statuses",
    }
}

fn mode_flag(mode: Mode) -> &'static str {
    match mode {
        Mode::ByBlock => "--batch-by-block",
        Mode::Streaming => "--stream-with-block-info",
    }
}

/// What a node data dir lacks for `mode`, in words an operator can act on; `None` when all three stream folders
/// are there.
pub fn diagnose_dir(dir: &Path, mode: Mode) -> Option<String> {
    if !dir.is_dir() {
        return Some(format!("data dir {} does not exist", dir.display()));
    }
    let missing: Vec<Stream> = Stream::ALL.into_iter().filter(|s| !dir.join(s.dir(mode)).is_dir()).collect();
    if missing.is_empty() {
        return None;
    }
    let folders: Vec<String> = missing.iter().map(|s| s.dir(mode)).collect();
    let flags: Vec<&str> = missing.iter().map(|&s| stream_flag(s)).chain(std::iter::once(mode_flag(mode))).collect();
    let mut why = format!("{}: no {} (the node needs {})", dir.display(), folders.join(", "), flags.join(" "));
    let other = match mode {
        Mode::ByBlock => Mode::Streaming,
        Mode::Streaming => Mode::ByBlock,
    };
    if Stream::ALL.into_iter().any(|s| dir.join(s.dir(other)).is_dir()) {
        why.push_str(&format!(
            "; {} folders are there instead: the node runs with {}, so set --mode {}",
            other.as_str(),
            mode_flag(other),
            other.as_str()
        ));
    }
    Some(why)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diagnosis_names_what_is_missing() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let why = diagnose_dir(&dir, Mode::ByBlock).unwrap();
        assert!(why.contains("does not exist"), "{why}");
        std::fs::create_dir_all(dir.join(Stream::Fills.dir(Mode::Streaming))).unwrap();
        std::fs::create_dir_all(dir.join(Stream::Diffs.dir(Mode::ByBlock))).unwrap();
        let why = diagnose_dir(&dir, Mode::ByBlock).unwrap();
        assert!(why.contains("node_fills_by_block") && why.contains("--write-fills"), "{why}");
        assert!(why.contains("--write-order-statuses") && !why.contains("--write-raw-book-diffs"), "{why}");
        assert!(why.contains("set --mode streaming"), "{why}");
        for s in Stream::ALL {
            std::fs::create_dir_all(dir.join(s.dir(Mode::ByBlock))).unwrap();
        }
        assert_eq!(diagnose_dir(&dir, Mode::ByBlock), None);
    }
}
