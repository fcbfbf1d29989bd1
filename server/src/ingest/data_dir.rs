//! What a node data dir lacks for a mode, in words an operator can act on (the node flags to add, or the mode to
//! set): shown for a file source that gives nothing.

use std::path::Path;

use crate::node::{Mode, Stream};

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
