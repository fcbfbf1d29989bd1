//! A user's recent fills, read back from the fills files the node keeps, for userFills' first (`isSnapshot`)
//! frame.
//!
//! The node's files are the only history there is (hlbook keeps no per-user store). Reading is bounded: the
//! newest `HOUR_FILES` hour files at most, newest first, stopping once `max` fills are found, and only blocks
//! below the height the live frames start at, so the snapshot and the live stream neither overlap nor leave a
//! hole. Lines are streamed, so memory stays one line however big an hour file is. It runs on a blocking thread.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde_json::value::RawValue;

use crate::node::event::HexBytes;
use crate::node::paths::hour_files;
use crate::node::{Address, Mode, Stream};

/// Hour files looked at, newest first (the current hour and the one before).
pub const HOUR_FILES: usize = 2;

/// Where the node's fills files are.
#[derive(Clone, Debug)]
pub struct FillsDir {
    pub node_dir: PathBuf,
    pub mode: Mode,
}

/// Envelope fields read from each matching line.
#[derive(serde::Deserialize)]
struct FillsLine<'a> {
    block_number: u64,
    #[serde(borrow)]
    events: Vec<(HexBytes<20>, &'a RawValue)>,
}

/// The user's last `max` fills of blocks below `before`, oldest first, verbatim; `None` once `stop` says nobody
/// wants them any more (asked every line).
pub fn recent_fills(
    dir: &FillsDir,
    user: Address,
    before: u64,
    max: usize,
    stop: &dyn Fn() -> bool,
) -> Option<Vec<String>> {
    let files = hour_files(&dir.node_dir, dir.mode, Stream::Fills).unwrap_or_default();
    let needle = user.to_string();
    let mut newest_first: Vec<Vec<String>> = Vec::new();
    let mut found = 0;
    for f in files.iter().rev().take(HOUR_FILES) {
        let got = file_fills(&f.path, &user, needle.as_bytes(), before, stop)?;
        found += got.len();
        newest_first.push(got);
        if found >= max {
            break;
        }
    }
    let mut all: Vec<String> = newest_first.into_iter().rev().flatten().collect();
    let cut = all.len().saturating_sub(max);
    all.drain(..cut);
    Some(all)
}

/// One file's fills of `user` below `before`, in file order. Lines that do not parse (a partial last line) are
/// skipped.
fn file_fills(path: &Path, user: &Address, needle: &[u8], before: u64, stop: &dyn Fn() -> bool) -> Option<Vec<String>> {
    let Ok(file) = File::open(path) else { return Some(Vec::new()) };
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let finder = memchr::memmem::Finder::new(needle);
    let (mut line, mut out) = (Vec::new(), Vec::new());
    loop {
        if stop() {
            return None;
        }
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if finder.find(&line).is_none() {
            continue;
        }
        let Ok(parsed) = serde_json::from_slice::<FillsLine<'_>>(line.trim_ascii_end()) else { continue };
        if parsed.block_number >= before {
            break;
        }
        out.extend(parsed.events.iter().filter(|(u, _)| u == user).map(|(_, f)| f.get().to_string()));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_fills_below_the_height_across_hour_files() {
        let dir = tempfile::tempdir().unwrap();
        let a = "0x5eaac7c475b1fad85701f02c4e9e796a53f94bd5";
        let b = "0x1624aac7c475b1fad85701f02c4e9e796a53f94b";
        let line = |h: u64, users: &[&str]| {
            let ev: Vec<String> = users.iter().map(|u| format!(r#"["{u}",{{"tid":{h},"x":"{u}"}}]"#)).collect();
            format!(
                r#"{{"local_time":"2026-05-05T17:39:13.3","block_time":"2026-05-05T17:39:13.0","block_number":{h},"events":[{}]}}"#,
                ev.join(",")
            )
        };
        let hourly = dir.path().join("node_fills_by_block/hourly/20260505");
        std::fs::create_dir_all(&hourly).unwrap();
        std::fs::write(hourly.join("9"), format!("{}\n{}\n", line(1, &[a, b]), line(2, &[b]))).unwrap();
        std::fs::write(hourly.join("10"), format!("{}\n{}\n{}\n", line(3, &[a]), line(4, &[a, a]), line(5, &[a])))
            .unwrap();
        let fd = FillsDir { node_dir: dir.path().to_path_buf(), mode: Mode::ByBlock };
        let user = Address::parse(a).unwrap();
        let tids = |v: Option<Vec<String>>| -> Vec<u64> {
            v.unwrap()
                .iter()
                .map(|f| serde_json::from_str::<serde_json::Value>(f).unwrap()["tid"].as_u64().unwrap())
                .collect()
        };
        let go = || false;
        assert_eq!(tids(recent_fills(&fd, user, 5, 100, &go)), vec![1, 3, 4, 4]);
        assert_eq!(tids(recent_fills(&fd, user, 5, 2, &go)), vec![4, 4]);
        assert_eq!(tids(recent_fills(&fd, user, 2, 100, &go)), vec![1]);
        assert_eq!(recent_fills(&fd, user, 5, 100, &|| true), None, "a read nobody wants stops");
    }
}
