//! Writing hlsim's optional streams, `misc_events` and `node_twap_statuses`, each into its own hour files
//! (`misc_events_<mode>/hourly/YYYYMMDD/H`, no `node_` prefix, see `crate::node::misc`;
//! `node_twap_statuses_<mode>/hourly/YYYYMMDD/H`, see `crate::node::twap`), in the hour the other streams write,
//! pruned with them: by-block one
//! line per block (`"events":[]` when empty, as every by-block stream), streaming one line per event. A block's
//! misc line is written after its book lines. Not re-emitted by `--restart-at` (only the book streams are).

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::block::{BlockOut, StreamBuf};
use super::fmt::{node_time, uint};
use crate::node::Mode;
use crate::node::misc::misc_dir;
use crate::node::paths::hour_files_under;
use crate::node::time::now_nanos;
use crate::node::twap::twap_dir;

#[derive(Debug)]
pub struct MiscOut {
    hourly: PathBuf,
    mode: Mode,
    /// Which of a block's buffers this stream writes.
    events: fn(&BlockOut) -> &StreamBuf,
    file: Option<((u32, u8), File)>,
    line: Vec<u8>,
    /// Bytes of the blocks recorded for a coming `--restart-at`.
    history: VecDeque<Vec<u8>>,
}

impl MiscOut {
    pub fn new(node_dir: &Path, mode: Mode) -> MiscOut {
        MiscOut::stream(node_dir.join(misc_dir(mode)), mode, |b| &b.misc)
    }

    /// The `node_twap_statuses` stream (`--write-twaps`).
    pub fn twaps(node_dir: &Path, mode: Mode) -> MiscOut {
        MiscOut::stream(node_dir.join(twap_dir(mode)), mode, |b| &b.twaps)
    }

    fn stream(dir: PathBuf, mode: Mode, events: fn(&BlockOut) -> &StreamBuf) -> MiscOut {
        MiscOut { hourly: dir.join("hourly"), mode, events, file: None, line: Vec::new(), history: VecDeque::new() }
    }

    /// Writes block `b`'s events of this stream into the file of `hour`, keeping the bytes when `record`.
    pub fn write(&mut self, b: &BlockOut, hour: (u32, u8), prune_keep: usize, record: bool) -> io::Result<()> {
        self.open(hour, prune_keep)?;
        self.line.clear();
        let events = (self.events)(b);
        match self.mode {
            Mode::ByBlock => {
                envelope(&mut self.line, b);
                self.line.extend_from_slice(&events.data);
                self.line.extend_from_slice(b"]}\n");
            }
            Mode::Streaming => {
                for i in 0..events.len() {
                    envelope(&mut self.line, b);
                    self.line.extend_from_slice(events.event(i));
                    self.line.extend_from_slice(b"]}\n");
                }
            }
        }
        if record {
            self.history.push_back(self.line.clone());
        }
        self.emit()
    }

    /// After `--restart-at`: writes the recorded blocks again, byte for byte.
    pub fn reemit(&mut self, hour: (u32, u8), prune_keep: usize) -> io::Result<()> {
        self.open(hour, prune_keep)?;
        for bytes in std::mem::take(&mut self.history) {
            self.line = bytes;
            self.emit()?;
        }
        Ok(())
    }

    fn emit(&mut self) -> io::Result<()> {
        if self.line.is_empty() {
            return Ok(());
        }
        match &mut self.file {
            Some((_, f)) => f.write_all(&self.line),
            None => unreachable!("opened before writing"),
        }
    }

    fn open(&mut self, hour: (u32, u8), prune_keep: usize) -> io::Result<()> {
        if self.file.as_ref().is_some_and(|(h, _)| *h == hour) {
            return Ok(());
        }
        let rolled = self.file.is_some();
        let path = self.hourly.join(hour.0.to_string()).join(hour.1.to_string());
        if let Some(p) = path.parent() {
            fs::create_dir_all(p)?;
        }
        self.file = Some((hour, OpenOptions::new().create(true).append(true).open(&path)?));
        if rolled && prune_keep > 0 {
            let files = hour_files_under(&self.hourly, 0)?;
            for f in &files[..files.len().saturating_sub(prune_keep)] {
                fs::remove_file(&f.path)?;
            }
        }
        Ok(())
    }
}

/// `{"local_time":…,"block_time":…,"block_number":…,"events":[`.
fn envelope(line: &mut Vec<u8>, b: &BlockOut) {
    line.extend_from_slice(b"{\"local_time\":\"");
    node_time(line, now_nanos());
    line.extend_from_slice(b"\",\"block_time\":\"");
    node_time(line, b.block_time);
    line.extend_from_slice(b"\",\"block_number\":");
    uint(line, b.height);
    line.extend_from_slice(b",\"events\":[");
}
