//! Following the node's hour files as they grow: complete lines out, in file order, exactly once.
//!
//! One `StreamTail` per stream. It reads from its offset to the end of the current hour file whenever woken
//! (inotify, read by the ingest thread itself in `wake`, plus a slow poll in case an event is lost), keeps a
//! trailing partial line until its newline arrives, and moves to the next hour file only once one exists and the
//! current one has been drained to its end (the node never writes an hour file again after starting the next).
//! Lines are handed out of the read buffer itself: a status line of several MB is read straight into place and
//! never copied again. Looking for the next hour file lists folders, so the caller says when that is worth doing (a
//! folder changed, or a while passed). A file replaced under the same name (new inode) or truncated is read again
//! from its start; lines already applied are dropped downstream by height, so nothing is applied twice.
//!
//! A line longer than the cap (`ingest.max_line_bytes`) is refused: once its bytes so far pass the cap (newline or
//! not), it is reported (`SourceEvent::TooLong`), the bytes are dropped and the rest of it is skipped up to its
//! newline, so a line that never ends costs at most the cap and one read. Skipping loses only that line, which the
//! caller treats as lost (a resync, or another racing source's copy); the lines after it are read as usual.
//!
//! A tail can be told to hold lines above a height (`hold_above`): it then stops at the first such line and reads no
//! further until the bound moves, so a reader of several streams (the NATS publisher) keeps them in step by height.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::limits::MAX_LINE_BYTES;
use super::line_source::SourceEvent;
use crate::node::paths::{HourFile, hour_files_under, hourly_dir};
use crate::node::{Mode, Stream};

/// Free space made in the buffer before each read; a line longer than this (tens of MB happen) grows the buffer.
const CHUNK: usize = 1 << 20;
/// At most this much is read before the lines in it are handed out, so catching up on a long file stays bounded.
const READ_MAX: u64 = 8 << 20;

/// What a tail counted since start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TailCounters {
    pub bytes: u64,
    pub lines: u64,
    pub rollovers: u64,
    /// Hour files that ended without a newline (node stopped mid-line): that fragment was discarded.
    pub partial_lines_dropped: u64,
    /// Files found replaced (inode change) or truncated, and read again from the start.
    pub reopened: u64,
    pub io_errors: u64,
    /// Lines longer than the cap, refused.
    pub lines_refused: u64,
}

#[derive(Debug)]
struct Open {
    hour: HourFile,
    file: File,
    inode: u64,
    offset: u64,
}

/// Follows one stream's hour files.
#[derive(Debug)]
pub struct StreamTail {
    /// The stream's `hourly` folder.
    hourly: PathBuf,
    stream: Stream,
    open: Option<Open>,
    /// Bytes read and not yet handed out start at `start`; no newline lies in `start..scanned`.
    data: Vec<u8>,
    start: usize,
    scanned: usize,
    /// Skip lines whose block number is at most this (cheap check, no parse).
    skip_through: u64,
    /// Longest line handed out; a longer one is refused.
    max_line: usize,
    /// The bytes up to the next newline belong to a refused line.
    skipping: bool,
    /// Lines of blocks above this wait (`hold_above`).
    hold_above: Option<u64>,
    /// The block of the complete line waiting at `start` because of `hold_above`.
    held: Option<u64>,
    counters: TailCounters,
}

impl StreamTail {
    /// A tail that starts in the hour file holding block `after_height + 1` (or the newest one).
    pub fn new(node_dir: &Path, mode: Mode, stream: Stream, after_height: u64) -> StreamTail {
        StreamTail {
            hourly: hourly_dir(node_dir, mode, stream),
            stream,
            open: None,
            data: Vec::new(),
            start: 0,
            scanned: 0,
            skip_through: after_height,
            max_line: MAX_LINE_BYTES,
            skipping: false,
            hold_above: None,
            held: None,
            counters: TailCounters::default(),
        }
    }

    /// A tail of a side stream (`misc_events`, `node_twap_statuses`: `ingest::side`) in `stream_dir`, which lies
    /// outside the three book streams' folders. Its lines carry the `Statuses` tag, which means nothing: only the
    /// side reader uses such a tail.
    pub fn side(stream_dir: &Path, mode: Mode, after_height: u64) -> StreamTail {
        let mut t = StreamTail::new(stream_dir, mode, Stream::Statuses, after_height);
        t.hourly = stream_dir.join("hourly");
        t
    }

    /// Hands out no line of a block above `height` (None: no bound) until told otherwise; the tail stops at the
    /// first such line and reads no more of its file meanwhile.
    pub fn hold_above(&mut self, height: Option<u64>) {
        self.hold_above = height;
    }

    /// The block of the line this tail stopped at because of `hold_above`, if it did.
    pub fn held(&self) -> Option<u64> {
        self.held
    }

    /// Refuses lines longer than `bytes` (`MAX_LINE_BYTES` by default).
    #[must_use]
    pub fn max_line(mut self, bytes: usize) -> StreamTail {
        self.max_line = bytes;
        self
    }

    pub fn stream(&self) -> Stream {
        self.stream
    }

    pub fn counters(&self) -> &TailCounters {
        &self.counters
    }

    /// The directories to watch for this stream.
    pub fn watch_root(&self) -> PathBuf {
        self.hourly.clone()
    }

    /// Reads everything available now, calling `on_line` for each complete line past the start height (and for
    /// each line refused as too long). With `look_for_next`, also moves on to newer hour files once the current one
    /// is drained.
    pub fn poll(&mut self, look_for_next: bool, on_line: &mut impl FnMut(SourceEvent<'_>)) -> io::Result<()> {
        loop {
            if self.open.is_none() && !self.open_first()? {
                return Ok(());
            }
            self.check_replaced()?;
            self.read_to_end(on_line)?;
            if self.held.is_some() || !look_for_next || !self.next_file(on_line)? {
                return Ok(());
            }
        }
    }

    /// Opens the starting file: the newest hour file whose first line is not past the start height.
    fn open_first(&mut self) -> io::Result<bool> {
        let files = hour_files_under(&self.hourly, 0)?;
        let Some(mut pick) = files.last().cloned() else { return Ok(false) };
        for f in files.iter().rev() {
            pick = f.clone();
            match first_height(&f.path)? {
                Some(h) if h > self.skip_through + 1 => {}
                _ => break,
            }
        }
        self.open_file(pick)?;
        Ok(true)
    }

    fn open_file(&mut self, hour: HourFile) -> io::Result<()> {
        let file = File::open(&hour.path)?;
        let inode = file.metadata()?.ino();
        self.open = Some(Open { hour, file, inode, offset: 0 });
        self.data.clear();
        (self.start, self.scanned) = (0, 0);
        self.skipping = false;
        self.held = None;
        Ok(())
    }

    /// A file recreated under the same name, or truncated, is read again from its start.
    fn check_replaced(&mut self) -> io::Result<()> {
        let Some(open) = &self.open else { return Ok(()) };
        let replaced = match std::fs::metadata(&open.hour.path) {
            Ok(m) => m.ino() != open.inode || m.len() < open.offset,
            // Pruned: keep draining our handle; `next_file` moves on.
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) => return Err(e),
        };
        if replaced {
            self.counters.reopened += 1;
            let hour = open.hour.clone();
            self.open_file(hour)?;
        }
        Ok(())
    }

    fn read_to_end(&mut self, on_line: &mut impl FnMut(SourceEvent<'_>)) -> io::Result<()> {
        let Some(open) = self.open.as_mut() else { return Ok(()) };
        open.file.seek(SeekFrom::Start(open.offset))?;
        // Lines read before a hold come first; while one still waits, nothing more is read.
        self.hand_out_lines(on_line);
        if self.held.is_some() {
            return Ok(());
        }
        loop {
            // Only a partial line is ever moved to the front: complete lines were handed out in place.
            if self.start > 0 {
                self.data.drain(..self.start);
                self.scanned -= self.start;
                self.start = 0;
            }
            self.data.reserve(CHUNK);
            let Some(open) = self.open.as_mut() else { return Ok(()) };
            // On an error, what was read before it is in `data` too: count it, so it is never read twice.
            let before = self.data.len();
            let read = (&mut open.file).take(READ_MAX).read_to_end(&mut self.data);
            let n = self.data.len() - before;
            open.offset += n as u64;
            self.counters.bytes += n as u64;
            self.hand_out_lines(on_line);
            if read? == 0 || self.held.is_some() {
                return Ok(());
            }
        }
    }

    /// Calls `on_line` for every complete line in the buffer, skipping blocks at or below the start height, and
    /// refuses a line (whole or still coming) longer than `max_line`. Stops at a line above `hold_above`, which
    /// stays at `start`.
    fn hand_out_lines(&mut self, on_line: &mut impl FnMut(SourceEvent<'_>)) {
        self.held = None;
        while let Some(i) = memchr::memchr(b'\n', &self.data[self.scanned..]) {
            let end = self.scanned + i;
            let line = &self.data[self.start..end];
            if !self.skipping
                && let Some(h) = self.above_hold(line)
            {
                self.held = Some(h);
                self.scanned = self.start;
                return;
            }
            if std::mem::take(&mut self.skipping) {
                // The end of a line refused before its newline came.
            } else if line.len() > self.max_line {
                self.refuse(line.len(), on_line);
            } else if !line.is_empty() && block_number(line).is_none_or(|h| h > self.skip_through) {
                self.counters.lines += 1;
                on_line(SourceEvent::Line(self.stream, line));
            }
            self.start = end + 1;
            self.scanned = self.start;
        }
        if !self.skipping && self.data.len() - self.start > self.max_line {
            // No newline yet and already too long: it would only grow. Refuse it now and skip the rest of it.
            self.refuse(self.data.len() - self.start, on_line);
            self.skipping = true;
        }
        if self.skipping {
            self.start = self.data.len();
        }
        self.scanned = self.data.len();
    }

    /// The line's block when it is above `hold_above`.
    fn above_hold(&self, line: &[u8]) -> Option<u64> {
        let cap = self.hold_above?;
        // A line at or below the start height is dropped anyway: holding it could only stall.
        block_number(line).filter(|&h| h > cap && h > self.skip_through)
    }

    /// Reports the line at `start` (`len` bytes so far) as refused, unless it is of a block before the start.
    fn refuse(&mut self, len: usize, on_line: &mut impl FnMut(SourceEvent<'_>)) {
        let height = block_number(&self.data[self.start..]);
        if height.is_none_or(|h| h > self.skip_through) {
            self.counters.lines_refused += 1;
            on_line(SourceEvent::TooLong { stream: self.stream, height, bytes: len as u64 });
        }
    }

    /// Moves to the next hour file if one exists; the current file is drained first.
    fn next_file(&mut self, on_line: &mut impl FnMut(SourceEvent<'_>)) -> io::Result<bool> {
        let Some(open) = &self.open else { return Ok(false) };
        let current = (open.hour.date, open.hour.hour);
        let files = hour_files_under(&self.hourly, current.0)?;
        let Some(next) = files.into_iter().find(|f| (f.date, f.hour) > current) else { return Ok(false) };
        // Anything written to the old file before the new one appeared is read now.
        self.read_to_end(on_line)?;
        if self.held.is_some() {
            return Ok(false);
        }
        if self.start < self.data.len() {
            self.counters.partial_lines_dropped += 1;
        }
        self.counters.rollovers += 1;
        self.open_file(next)?;
        Ok(true)
    }
}

/// The `block_number` of a node line without parsing it (the envelope puts it before `events`).
pub fn block_number(line: &[u8]) -> Option<u64> {
    const KEY: &[u8] = b"\"block_number\":";
    let head = &line[..line.len().min(256)];
    let at = memchr::memmem::find(head, KEY)? + KEY.len();
    let digits: &[u8] = &head[at..];
    let end = digits.iter().position(|c| !c.is_ascii_digit()).unwrap_or(digits.len());
    std::str::from_utf8(&digits[..end]).ok()?.parse().ok()
}

/// The block number of a file's first line, if it has one yet.
fn first_height(path: &Path) -> io::Result<Option<u64>> {
    let mut head = vec![0u8; 512];
    let n = match File::open(path) {
        Ok(mut f) => f.read(&mut head)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(block_number(&head[..n]))
}

#[cfg(test)]
#[path = "tail_tests.rs"]
mod tests;
