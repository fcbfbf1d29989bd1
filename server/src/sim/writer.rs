//! Writing blocks as the node does: hour files per stream, by-block or streaming lines, every line (or run of
//! same-stream lines) reaching the file in one `write_all` with no user-space buffering, and the timing CSV.
//!
//! The hour a file is named after comes from `HourClock`: the UTC hour of the write by default, or a virtual
//! clock that advances an hour every few real seconds so tests can watch rollovers and pruning.

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::block::BlockOut;
use super::faults::{self, Faults};
use super::fmt::{date_hour, node_time, uint};
use crate::node::paths::{hour_files, hour_path};
use crate::node::time::now_nanos;
use crate::node::{Mode, Stream};

/// By-block write order: the node's. In the mainnet capture (`local_time` of each line) every block is written
/// fills → diffs → statuses (diffs 0.03–0.08 ms after fills, statuses up to 0.9 ms after diffs), so the status
/// line, by far the longest, is the block's last line.
const BY_BLOCK_ORDER: [Stream; 3] = [Stream::Fills, Stream::Diffs, Stream::Statuses];

/// Which (date, hour) file the node writes into now.
#[derive(Debug)]
pub enum HourClock {
    Wall,
    /// Starts at `base` (22:00 UTC of the start day) and advances an hour every `secs` seconds.
    Virtual {
        started: Instant,
        base: i64,
        secs: u64,
    },
}

impl HourClock {
    pub fn new(rollover_secs: Option<u64>) -> HourClock {
        match rollover_secs {
            None => HourClock::Wall,
            Some(secs) => {
                let day = now_nanos().div_euclid(86_400_000_000_000) * 86_400_000_000_000;
                HourClock::Virtual { started: Instant::now(), base: day + 22 * 3_600_000_000_000, secs: secs.max(1) }
            }
        }
    }

    pub fn now(&self) -> (u32, u8) {
        match self {
            HourClock::Wall => date_hour(now_nanos()),
            HourClock::Virtual { started, base, secs } => {
                let hours = started.elapsed().as_secs() / secs;
                date_hour(base + hours as i64 * 3_600_000_000_000)
            }
        }
    }
}

#[derive(Debug)]
pub struct NodeFileWriter {
    dir: PathBuf,
    mode: Mode,
    clock: HourClock,
    prune_keep: usize,
    files: [Option<((u32, u8), File)>; 3],
    faults: Faults,
    /// Exact bytes written per block, kept only for a coming `--restart-at`.
    history: VecDeque<Vec<(Stream, Vec<u8>)>>,
    timing: Option<File>,
    line: Vec<u8>,
    /// Whether the previous block left a fragment (stop-mid-line): its rest of the block's diffs is lost.
    cut: bool,
    /// Each block's lines spread over a processing span like the node's (`sim::span`); `None`: one burst.
    spans: Option<super::span::Spans>,
    /// `--write-misc-events`.
    misc: Option<super::misc_out::MiscOut>,
    /// `--write-twaps`.
    twaps: Option<super::misc_out::MiscOut>,
}

impl NodeFileWriter {
    pub fn new(dir: &Path, mode: Mode, clock: HourClock, prune_keep: usize, faults: Faults) -> NodeFileWriter {
        NodeFileWriter {
            dir: dir.to_path_buf(),
            mode,
            clock,
            prune_keep,
            files: [None, None, None],
            faults,
            history: VecDeque::new(),
            timing: None,
            line: Vec::new(),
            cut: false,
            spans: None,
            misc: None,
            twaps: None,
        }
    }

    /// Also writes the `misc_events` stream (`--write-misc-events`).
    pub fn write_misc_events(&mut self, on: bool) {
        self.misc = on.then(|| super::misc_out::MiscOut::new(&self.dir, self.mode));
    }

    /// Also writes the `node_twap_statuses` stream (`--write-twaps`).
    pub fn write_twaps(&mut self, on: bool) {
        self.twaps = on.then(|| super::misc_out::MiscOut::twaps(&self.dir, self.mode));
    }

    /// Spreads each block's lines over a span drawn as the node's (`sim::span`): streaming runs across it,
    /// by-block lines at its end.
    pub fn spread(&mut self, spans: Option<super::span::Spans>) {
        self.spans = spans;
    }

    /// Starts the timing CSV (header written now): per block, when each stream's line (by-block) or last run of
    /// lines (streaming) was fully written, in Unix ns (0 = the stream wrote nothing), and the block's last write.
    pub fn timing(&mut self, path: &Path) -> io::Result<()> {
        let mut f = File::create(path)
            .map_err(|e| io::Error::new(e.kind(), format!("creating the timing file {}: {e}", path.display())))?;
        f.write_all(b"height,block_time_ns,fills_written_ns,statuses_written_ns,diffs_written_ns,last_written_ns\n")?;
        self.timing = Some(f);
        Ok(())
    }

    /// Writes every line of block `b`; returns when each stream's last line was written (0 = nothing written).
    pub fn write_block(&mut self, b: &BlockOut) -> io::Result<[i64; 3]> {
        let hour = self.clock.now();
        for s in Stream::ALL {
            self.open(s, hour)?;
        }
        let mut chunks = Vec::new();
        let written = match self.mode {
            Mode::ByBlock => self.by_block(b, &mut chunks)?,
            Mode::Streaming => self.streaming(b, &mut chunks)?,
        };
        for m in [&mut self.misc, &mut self.twaps].into_iter().flatten() {
            m.write(b, hour, self.prune_keep, self.faults.records(b.height))?;
        }
        if self.faults.records(b.height) {
            self.history.push_back(chunks);
        }
        if let Some(t) = &mut self.timing {
            let mut row = Vec::with_capacity(80);
            let last = written.iter().copied().max().unwrap_or(0);
            let cols = [b.height as i64, b.block_time, written[0], written[2], written[1], last];
            for (i, v) in cols.into_iter().enumerate() {
                if i > 0 {
                    row.push(b',');
                }
                uint(&mut row, v.max(0) as u64);
            }
            row.push(b'\n');
            t.write_all(&row)?;
        }
        Ok(written)
    }

    /// After `--restart-at`: writes the recorded blocks again, byte for byte.
    pub fn reemit(&mut self) -> io::Result<()> {
        let hour = self.clock.now();
        for m in [&mut self.misc, &mut self.twaps].into_iter().flatten() {
            m.reemit(hour, self.prune_keep)?;
        }
        for chunks in std::mem::take(&mut self.history) {
            for (s, bytes) in chunks {
                self.open(s, hour)?;
                self.file(s).write_all(&bytes)?;
            }
        }
        Ok(())
    }

    fn file(&mut self, s: Stream) -> &mut File {
        match &mut self.files[s.index()] {
            Some((_, f)) => f,
            None => unreachable!("stream files are opened before writing"),
        }
    }

    /// Makes sure stream `s` writes into the file of `hour`; a change of hour is a rollover (and may prune).
    fn open(&mut self, s: Stream, hour: (u32, u8)) -> io::Result<()> {
        if self.files[s.index()].as_ref().is_some_and(|(h, _)| *h == hour) {
            return Ok(());
        }
        let rolled = self.files[s.index()].is_some();
        let path = hour_path(&self.dir, self.mode, s, hour.0, hour.1);
        if let Some(p) = path.parent() {
            fs::create_dir_all(p)?;
        }
        let f = OpenOptions::new().create(true).append(true).open(&path)?;
        self.files[s.index()] = Some((hour, f));
        if rolled {
            tracing::info!(stream = %s, file = %path.display(), "hour file rolled over");
            if self.prune_keep > 0 {
                self.prune(s)?;
            }
        }
        Ok(())
    }

    /// Deletes a stream's hour files beyond the newest `prune_keep`.
    fn prune(&self, s: Stream) -> io::Result<()> {
        let files = hour_files(&self.dir, self.mode, s)?;
        let excess = files.len().saturating_sub(self.prune_keep);
        for f in &files[..excess] {
            fs::remove_file(&f.path)?;
            tracing::info!(file = %f.path.display(), "pruned hour file");
        }
        Ok(())
    }

    /// Appends a line's envelope start (`{"local_time":…,"events":[`) to `self.line`.
    fn envelope(&mut self, b: &BlockOut) {
        self.line.extend_from_slice(b"{\"local_time\":\"");
        node_time(&mut self.line, now_nanos());
        self.line.extend_from_slice(b"\",\"block_time\":\"");
        node_time(&mut self.line, b.block_time);
        self.line.extend_from_slice(b"\",\"block_number\":");
        uint(&mut self.line, b.height);
        self.line.extend_from_slice(b",\"events\":[");
    }

    /// Writes `self.line` to stream `s`, recording it; returns the time it was fully written.
    fn emit(&mut self, s: Stream, chunks: &mut Vec<(Stream, Vec<u8>)>, record: bool) -> io::Result<i64> {
        let line = std::mem::take(&mut self.line);
        self.file(s).write_all(&line)?;
        let t = now_nanos();
        if record {
            chunks.push((s, line.clone()));
        }
        self.line = line;
        self.line.clear();
        Ok(t)
    }

    fn by_block(&mut self, b: &BlockOut, chunks: &mut Vec<(Stream, Vec<u8>)>) -> io::Result<[i64; 3]> {
        if let Some(span) = self.spans.as_mut().map(super::span::Spans::draw) {
            // The node writes a block's by-block lines once it has processed the whole block.
            std::thread::sleep(span);
        }
        let record = self.faults.records(b.height);
        let mut written = [0; 3];
        let last = BY_BLOCK_ORDER.iter().rposition(|&s| !self.faults.drops(b.height, s));
        for (i, s) in BY_BLOCK_ORDER.into_iter().enumerate() {
            if self.faults.drops(b.height, s) {
                continue;
            }
            self.line.clear();
            self.envelope(b);
            self.line.extend_from_slice(&b.stream(s).data);
            self.line.extend_from_slice(b"]}\n");
            if s == Stream::Statuses && self.faults.corrupt_at == Some(b.height) {
                faults::corrupt(&mut self.line);
            }
            if s == Stream::Diffs && self.faults.differ_at == Some(b.height) {
                faults::differ(&mut self.line);
            }
            if s == Stream::Diffs && self.faults.stop_mid_line_at == Some(b.height) {
                let keep = faults::fragment(&self.line).len();
                self.line.truncate(keep);
            }
            if Some(i) == last {
                self.hold_last_line(b.height);
            }
            written[s.index()] = self.emit(s, chunks, record)?;
        }
        Ok(written)
    }

    fn streaming(&mut self, b: &BlockOut, chunks: &mut Vec<(Stream, Vec<u8>)>) -> io::Result<[i64; 3]> {
        let record = self.faults.records(b.height);
        let mut written = [0; 3];
        let mut next = [0usize; 3];
        let runs = with_fills(b);
        let last = runs.iter().rposition(|&(s, n)| n > 0 && !self.faults.drops(b.height, s));
        self.cut = false;
        let (start, span) = (std::time::Instant::now(), self.spans.as_mut().map(super::span::Spans::draw));
        let parts = runs.len().saturating_sub(1);
        for (r, (s, n)) in runs.into_iter().enumerate() {
            let from = next[s.index()];
            next[s.index()] += n;
            if n == 0 || self.faults.drops(b.height, s) {
                continue;
            }
            if let Some(span) = span {
                super::span::wait_for_part(start, span, r, parts);
            }
            self.line.clear();
            for i in from..from + n {
                self.streaming_line(b, s, i);
            }
            if self.line.is_empty() {
                continue;
            }
            if Some(r) == last {
                self.hold_last_line(b.height);
            }
            written[s.index()] = self.emit(s, chunks, record)?;
        }
        Ok(written)
    }

    /// `--delay-last-line-ms`: the block's last line has its `local_time` and waits before reaching the file; then
    /// `--hold-last-line-until`: it waits for the test to release it.
    fn hold_last_line(&self, height: u64) {
        if let Some(d) = self.faults.last_line_delay(height) {
            faults::hold(d);
        }
        if let Some(gate) = self.faults.last_line_gate(height) {
            faults::wait_released(gate, height);
        }
    }

    /// Appends event `i` of stream `s` as one streaming line, applying corrupt and stop-mid-line faults.
    fn streaming_line(&mut self, b: &BlockOut, s: Stream, i: usize) {
        let stop = s == Stream::Diffs && self.faults.stop_mid_line_at == Some(b.height);
        if stop && self.cut {
            return; // The node died at the fragment: the rest of this block's diffs never came.
        }
        let start = self.line.len();
        self.envelope(b);
        self.line.extend_from_slice(b.stream(s).event(i));
        self.line.extend_from_slice(b"]}\n");
        if s == Stream::Statuses && i == 0 && self.faults.corrupt_at == Some(b.height) {
            let mut one = self.line.split_off(start);
            faults::corrupt(&mut one);
            self.line.extend_from_slice(&one);
        }
        if stop {
            let len = self.line.len() - start;
            self.line.truncate(start + len / 2);
            self.cut = true;
        }
    }
}

/// A block's streaming runs with its fills spread among them: a node writes a trade's two fills as its taker order
/// executes, anywhere in the block, not all at its start. Trades (pairs of lines) go evenly over the diff/status
/// runs, the first after the first run.
fn with_fills(b: &BlockOut) -> Vec<(Stream, usize)> {
    let fills = b.stream(Stream::Fills).len();
    let (pairs, seq) = (fills.div_ceil(2), &b.seq);
    let mut runs = Vec::with_capacity(2 * seq.len() + 1);
    let mut given = 0;
    for (k, &run) in seq.iter().enumerate() {
        runs.push(run);
        let due = (pairs * (k + 1) / seq.len() * 2).min(fills);
        if due > given {
            runs.push((Stream::Fills, due - given));
            given = due;
        }
    }
    if fills > given {
        runs.push((Stream::Fills, fills - given));
    }
    runs
}
