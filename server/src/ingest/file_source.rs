//! The node's hour files on this host as a `LineSource`: each stream's file tailed (`tail`), woken by inotify
//! (`wake`) with a slow poll behind it, read in passes whose order puts the line trades and books wait for first.
//! A reader that wants the streams in step (the NATS publisher) bounds the blocks a pass hands out (`hold_above`).

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::data_dir::diagnose_dir;
use super::line_source::{LineSource, SourceCounters, SourceEvent};
use super::tail::StreamTail;
use super::wake::Wake;
use crate::node::{Mode, Stream};

/// The node's hour files on this host, followed with inotify (read by this thread, see `wake`) and a slow poll.
#[derive(Debug)]
pub struct FileSource {
    node_dir: PathBuf,
    mode: Mode,
    max_line: usize,
    /// The streams in the order each pass reads them (`read_order`).
    order: [Stream; 3],
    tails: Vec<StreamTail>,
    resume_after: u64,
    /// Lines of blocks above this wait in their tails (`hold_above`).
    hold_above: Option<u64>,
    wake: Wake,
    /// Set on anything but a data write: a file or folder appeared, went, or events were lost.
    dirs_changed: bool,
    /// When the tails last looked for newer hour files.
    listed_at: Instant,
    /// Per tail (in `read_order`): its folder is being watched.
    watched: [bool; 3],
    /// Totals of tails that were replaced by a restart.
    retired: SourceCounters,
}

impl FileSource {
    /// Streaming lines: reads the fills stream first in every pass (`read_order`).
    #[must_use]
    pub fn fills_first(mut self) -> FileSource {
        self.order = [Stream::Fills, Stream::Diffs, Stream::Statuses];
        self.restart_after(self.resume_after);
        self
    }

    /// Follows the files from the block after `height`; lines over `max_line` bytes are refused.
    pub fn new(node_dir: &Path, mode: Mode, height: u64, max_line: usize) -> FileSource {
        FileSource {
            node_dir: node_dir.to_path_buf(),
            mode,
            max_line,
            tails: tails(node_dir, mode, read_order(mode), height, max_line),
            order: read_order(mode),
            resume_after: height,
            hold_above: None,
            wake: Wake::new(),
            dirs_changed: true,
            listed_at: Instant::now(),
            watched: [false; 3],
            retired: SourceCounters::default(),
        }
    }

    /// Hands out no line of a block above `height` (None: no bound): each stream stops at its first such line
    /// and reads no further until the bound moves.
    pub fn hold_above(&mut self, height: Option<u64>) {
        self.hold_above = height;
        for t in &mut self.tails {
            t.hold_above(height);
        }
    }

    /// Per stream that stopped at the bound, the block of the line it stopped at.
    pub fn held(&self) -> impl Iterator<Item = (Stream, u64)> + '_ {
        self.tails.iter().filter_map(|t| Some((t.stream(), t.held()?)))
    }

    /// Watches the streams' folders that exist now; a folder watched for the first time may hold files we have not
    /// listed.
    fn watch_new_dirs(&mut self) {
        for (tail, done) in self.tails.iter().zip(self.watched.iter_mut()) {
            if !*done {
                *done = self.wake.watch_tree(&tail.watch_root());
                self.dirs_changed |= *done;
            }
        }
    }

    /// Whether the tails should list folders for newer hour files this time: listing costs a few syscalls per
    /// folder, so it happens when inotify reported a folder change, and otherwise only every `RELIST_EVERY` in
    /// case an event was missed.
    fn list_now(&mut self) -> bool {
        let due = !self.wake.is_active()
            || std::mem::take(&mut self.dirs_changed)
            || self.listed_at.elapsed() >= RELIST_EVERY;
        if due {
            self.listed_at = Instant::now();
        }
        due
    }

    /// Reads every tail to its end; true when anything was delivered.
    fn read_all(&mut self, on: &mut dyn FnMut(SourceEvent<'_>)) -> io::Result<bool> {
        let reopened_before: u64 = self.tails.iter().map(|t| t.counters().reopened).sum();
        // Held streams mean catching up: every stream looks for its next hour file now, or one at the end of a
        // file would seem to be at its end and bound no one.
        let list = self.list_now() || self.held().next().is_some();
        let mut any = false;
        let mut first_err = None;
        for tail in &mut self.tails {
            let r = tail.poll(list, &mut |ev| {
                any = true;
                on(ev);
            });
            if let Err(e) = r {
                tracing::warn!(stream = %tail.stream(), "reading node files: {e}");
                first_err.get_or_insert(e);
            }
        }
        let reopened_after: u64 = self.tails.iter().map(|t| t.counters().reopened).sum();
        if reopened_after > reopened_before {
            // A replaced file was read again from its start: every stream restarts together, or the other
            // streams' lines of a partly seen block would be lost with it.
            tracing::warn!("a node file was replaced; re-reading all streams after block {}", self.resume_after);
            self.restart_after(self.resume_after);
            on(SourceEvent::Restart);
            any = true;
        }
        if first_err.is_none() && self.held().next().is_none() {
            on(SourceEvent::Drained);
        }
        first_err.map_or(Ok(any), Err)
    }
}

/// Read order, per mode. By-block: the node's own write order (fills, diffs, statuses), so each line is read as
/// soon as possible after it lands and the trades and books it feeds never wait behind the long status line read
/// in the same wake-up (fills read last came out 1.7 ms after their write, docs/benchmarks.md); the assembler
/// takes the lines of a block in any order. Streaming whole blocks: fills last, because a streaming block may
/// complete on diffs and statuses alone, and every fill of a block whose diffs and statuses were just read is then
/// already on disk. Streaming lines (`fills_first`): fills lines are handed on by themselves, never in a block, so
/// they are read first, before the far longer status stream.
fn read_order(mode: Mode) -> [Stream; 3] {
    match mode {
        Mode::ByBlock => [Stream::Fills, Stream::Diffs, Stream::Statuses],
        Mode::Streaming => [Stream::Diffs, Stream::Statuses, Stream::Fills],
    }
}

/// How often tails look for a newer hour file when the watcher reported no folder change.
const RELIST_EVERY: Duration = Duration::from_millis(250);

fn tails(node_dir: &Path, mode: Mode, order: [Stream; 3], height: u64, max_line: usize) -> Vec<StreamTail> {
    order.into_iter().map(|s| StreamTail::new(node_dir, mode, s, height).max_line(max_line)).collect()
}

impl LineSource for FileSource {
    fn poll(&mut self, wait: Duration, on: &mut dyn FnMut(SourceEvent<'_>)) -> io::Result<()> {
        self.watch_new_dirs();
        // Events queued so far are answered by the read below; a write after this point wakes the wait at once.
        self.dirs_changed |= self.wake.take().dirs_changed;
        // A stream held at the bound has lines waiting: the caller moves the bound rather than anyone sleeping.
        if self.read_all(on)? || self.held().next().is_some() {
            return Ok(());
        }
        // Nothing new: sleep in this thread until a file event (or the slow poll), then read again.
        self.dirs_changed |= self.wake.wait(wait).dirs_changed;
        self.read_all(on).map(drop)
    }

    fn restart_after(&mut self, height: u64) {
        let old =
            std::mem::replace(&mut self.tails, tails(&self.node_dir, self.mode, self.order, height, self.max_line));
        self.hold_above(self.hold_above);
        for t in &old {
            add(&mut self.retired, t.counters());
        }
        self.resume_after = height;
    }

    fn set_resume_after(&mut self, height: u64) {
        self.resume_after = height;
    }

    fn problem(&mut self) -> Option<String> {
        diagnose_dir(&self.node_dir, self.mode)
    }

    fn counters(&self) -> SourceCounters {
        let mut c = self.retired.clone();
        for t in &self.tails {
            add(&mut c, t.counters());
        }
        c
    }
}

fn add(c: &mut SourceCounters, t: &super::tail::TailCounters) {
    c.bytes += t.bytes;
    c.lines += t.lines;
    c.rollovers += t.rollovers;
    c.partial_lines_dropped += t.partial_lines_dropped;
    c.files_reopened += t.reopened;
}
