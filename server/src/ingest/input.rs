//! Where the ingest thread gets its parsed lines: one source read in the ingest thread itself (no hand-over, the
//! lowest latency), or several racing sources read by their own threads (`ingest::race`).
//!
//! Either way the lines go into the one `Assembler`, and the source's state is kept on the `SourceBoard` (height,
//! lines, what it is missing), so `/health` shows every source the same way, one or many.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use super::assemble::Assembler;
use super::health::Health;
use super::live::LiveConfig;
use super::race::Race;
use super::source::{LineSource, SourceEvent};
use super::sources::{SourceEntry, SourceSpec, diagnose_dir};
use crate::node::time::now_nanos;
use crate::node::{Coin, Mode, NodeParser, Stream, Watched};

/// How often a silent source is asked what it is missing.
const CHECK_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub enum Input {
    One(One),
    Race(Race),
}

#[derive(Debug)]
pub struct One {
    spec: SourceSpec,
    source: Box<dyn LineSource>,
    parser: NodeParser,
    entry: Arc<SourceEntry>,
    checked: Instant,
}

impl Input {
    /// The configured sources, positioned after `height`. Several sources race only by-block: a streaming
    /// block's part of a stream is many lines, known whole only when the next block appears.
    pub fn new(cfg: &LiveConfig, height: u64, health: &Health, watched: &Arc<Watched>) -> Input {
        let mut specs = cfg.sources.clone();
        if specs.len() > 1 && cfg.mode == Mode::Streaming {
            tracing::error!("several sources race in by-block mode only; reading just the first");
            specs.truncate(1);
        }
        if specs.len() > 1 {
            let mut race = Race::start(&specs, cfg.mode, cfg.poll_interval, cfg.race_grace, health, watched);
            if height > 0 {
                race.restart_after(height);
            }
            return Input::Race(race);
        }
        let spec = specs.into_iter().next().unwrap_or(SourceSpec::Files("~/hl/data".into()));
        let entry = health.sources.add(spec.label());
        let source = spec.open(cfg.mode, height);
        let parser = NodeParser::with_watched(watched.clone());
        Input::One(One { spec, source, parser, entry, checked: Instant::now() - CHECK_EVERY })
    }

    /// Reads what is there into `assembler`. Returns false when a lost line broke the stream for good (a
    /// malformed streaming line).
    pub fn read(&mut self, cfg: &LiveConfig, assembler: &mut Assembler, health: &Health) -> bool {
        match self {
            Input::One(one) => one.read(cfg, assembler, health),
            Input::Race(race) => {
                race.set_floor(assembler.emitted());
                race.poll(cfg.poll_interval, assembler.emitted(), health, &mut |won| {
                    assembler.push(won.stream, won.line)
                });
                let next = assembler.emitted() + 1;
                for stream in race.lost(next, assembler.has(next)) {
                    assembler.give_up(next, stream);
                }
                true
            }
        }
    }

    /// While ingest has no position to read from (waiting for a snapshot): say what the source is missing.
    pub fn idle(&mut self, mode: Mode) {
        if let Input::One(one) = self
            && one.checked.elapsed() >= CHECK_EVERY
        {
            one.checked = Instant::now();
            if let SourceSpec::Files(dir) = &one.spec {
                one.entry.set_problem(diagnose_dir(dir, mode));
            }
        }
    }

    /// Starts over with the lines of blocks after `height` (a snapshot's height).
    pub fn restart_after(&mut self, height: u64) {
        match self {
            Input::One(one) => {
                one.source.restart_after(height);
                one.entry.reset_height(height);
            }
            Input::Race(race) => race.restart_after(height),
        }
    }

    /// When the line of (height, stream) that is applied was read, if it came through the race.
    pub fn read_at(&self, height: u64, stream: Stream) -> Option<i64> {
        match self {
            Input::One(_) => None,
            Input::Race(race) => race.read_at(height, stream),
        }
    }

    /// Coins whose lines two sources disagree about, since the last call.
    pub fn take_distrusted(&mut self) -> Vec<Coin> {
        match self {
            Input::One(_) => Vec::new(),
            Input::Race(race) => race.take_distrusted(),
        }
    }

    /// Copies the source's totals into the health counters (one source; racing sources count per source).
    pub fn sync_counters(&self, health: &Health) {
        if let Input::One(one) = self {
            let s = one.source.counters();
            let c = &health.counters;
            c.bytes.store(s.bytes, Relaxed);
            c.rollovers.store(s.rollovers, Relaxed);
            c.partial_lines_dropped.store(s.partial_lines_dropped, Relaxed);
            c.files_reopened.store(s.files_reopened, Relaxed);
            c.source_connects.store(s.connects, Relaxed);
            c.source_disconnects.store(s.disconnects, Relaxed);
        }
    }
}

impl One {
    fn read(&mut self, cfg: &LiveConfig, assembler: &mut Assembler, health: &Health) -> bool {
        self.source.set_resume_after(assembler.emitted());
        let (parser, entry, mode) = (&mut self.parser, &self.entry, cfg.mode);
        let mut lost_line = false;
        let mut any = false;
        let polled = self.source.poll(cfg.poll_interval, &mut |ev| match ev {
            SourceEvent::Line(stream, bytes) => {
                any = true;
                lost_line |= !push_line(parser, assembler, health, entry, mode, stream, bytes);
            }
            SourceEvent::Restart => {
                entry.restarts.fetch_add(1, Relaxed);
                assembler.restart(assembler.emitted())
            }
        });
        if let Err(e) = &polled {
            health.counters.io_errors.fetch_add(1, Relaxed);
            tracing::warn!("reading node lines: {e}");
            if matches!(self.spec, SourceSpec::Files(_)) {
                std::thread::sleep(cfg.poll_interval);
            }
        }
        if any {
            self.entry.touch(now_nanos());
        }
        if any && polled.is_ok() {
            self.entry.set_problem(None);
            self.checked = Instant::now();
        } else if self.checked.elapsed() >= CHECK_EVERY {
            self.checked = Instant::now();
            self.entry.set_problem(self.source.problem().or_else(|| polled.err().map(|e| e.to_string())));
        }
        !lost_line
    }
}

/// Parses one line into the assembler. Returns false when a lost line breaks the stream for good: a malformed
/// streaming line carries events that nothing later reveals (a by-block loss shows up as a broken block).
fn push_line(
    parser: &mut NodeParser,
    assembler: &mut Assembler,
    health: &Health,
    entry: &SourceEntry,
    mode: Mode,
    stream: Stream,
    bytes: &[u8],
) -> bool {
    let c = &health.counters;
    c.lines.fetch_add(1, Relaxed);
    match parser.parse_bytes(stream, bytes) {
        Ok(line) => {
            entry.line(line.meta.height);
            assembler.push(stream, line);
            true
        }
        Err(e) => {
            c.malformed_lines.fetch_add(1, Relaxed);
            entry.malformed.fetch_add(1, Relaxed);
            let head = String::from_utf8_lossy(&bytes[..bytes.len().min(120)]).into_owned();
            tracing::warn!(%stream, "malformed node line ({e}); starts {head:?}");
            mode != Mode::Streaming
        }
    }
}
