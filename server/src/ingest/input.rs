//! Where the ingest thread gets its parsed lines: one source read in the ingest thread itself (no hand-over, the
//! lowest latency), or several racing sources read by their own threads (`ingest::race`).
//!
//! Either way the lines go into the one `Assembler`, and the source's state is kept on the `SourceBoard` (height,
//! lines, what it is missing), so `/health` shows every source the same way, one or many.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::data_dir::diagnose_dir;
use super::limits::Limits;
use super::line_source::{LineSource, SourceEvent};
use super::live_config::LiveConfig;
use super::open_source::open_source;
use super::race::Race;
use crate::config::Source;
use crate::node::time::now_nanos;
use crate::node::{Coin, Line, Mode, NodeParser, Stream, Watched};
use crate::state::health::Health;
use crate::state::sources::SourceEntry;

/// How often a silent source is asked what it is missing.
const CHECK_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub enum Input {
    /// Boxed: the tails' buffers make it far larger than the others, and the input is moved out and back per read.
    One(Box<One>),
    /// Boxed too: it is far larger than the stand-in.
    Race(Box<Race>),
    /// Stands in while `Ingest::step` has lent the input out to read.
    Lent,
}

/// What reading hands the ingest thread, one at a time, as soon as each is there.
#[derive(Debug)]
pub enum InputEvent {
    /// A parsed line for the assembler; with racing sources, when its reader read it; its length in bytes.
    Line(Stream, Line, Option<i64>, usize),
    /// A line is lost for good (its events are nowhere else): a malformed streaming line, or a line refused as too
    /// long. Says why.
    LostLine(String),
    /// The one source lost its place and resumes after the last block handed out: drop partial blocks.
    Restart,
    /// The one source read every stream to its end (`SourceEvent::Drained`).
    Drained,
}

#[derive(Debug)]
pub struct One {
    spec: Source,
    source: Box<dyn LineSource>,
    parser: NodeParser,
    entry: Arc<SourceEntry>,
    checked: Instant,
    limits: Limits,
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
            let mut race =
                Race::start(&specs, cfg.mode, cfg.poll_interval, cfg.race_grace, cfg.limits, health, watched);
            if height > 0 {
                race.restart_after(height);
            }
            return Input::Race(Box::new(race));
        }
        let spec = specs.into_iter().next().unwrap_or(Source::Files("~/hl/data".into()));
        let entry = health.sources().add(spec.label());
        let lines = cfg.stream_lines && cfg.mode == Mode::Streaming;
        let source = open_source(&spec, cfg.mode, height, lines, cfg.limits.max_line_bytes);
        let parser = NodeParser::with_watched(watched.clone());
        Input::One(Box::new(One {
            spec,
            source,
            parser,
            entry,
            // Long enough ago that the first poll checks at once (now, on a machine up for less than that).
            checked: Instant::now().checked_sub(CHECK_EVERY).unwrap_or_else(Instant::now),
            limits: cfg.limits,
        }))
    }

    /// Waits up to `poll` for lines and hands each to `on` as soon as it is parsed (one source) or won (racing
    /// sources); `emitted` is the last block handed out.
    pub fn read(&mut self, poll: Duration, mode: Mode, emitted: u64, health: &Health, on: &mut dyn FnMut(InputEvent)) {
        match self {
            Input::One(one) => one.read(poll, mode, emitted, health, on),
            Input::Race(race) => {
                race.set_floor(emitted);
                race.poll(poll, emitted, health, &mut |won| {
                    on(InputEvent::Line(won.stream, won.line, Some(won.read_at), won.bytes));
                });
            }
            Input::Lent => {}
        }
    }

    /// Racing: the streams of block `next` that no source will deliver (`have`: the streams it has; `parked`:
    /// how many later blocks wait for it).
    pub fn lost(&mut self, next: u64, have: [bool; 3], parked: usize, health: &Health) -> Vec<Stream> {
        match self {
            Input::Race(race) => race.lost(next, have, parked, health),
            _ => Vec::new(),
        }
    }

    /// While ingest has no position to read from (waiting for a snapshot): say what the source is missing.
    pub fn idle(&mut self, mode: Mode) {
        if let Input::One(one) = self
            && one.checked.elapsed() >= CHECK_EVERY
        {
            one.checked = Instant::now();
            if let Source::Files(dir) = &one.spec {
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
            Input::Lent => {}
        }
    }

    /// Coins whose lines two sources disagree about, since the last call.
    pub fn take_distrusted(&mut self) -> Vec<Coin> {
        match self {
            Input::Race(race) => race.take_distrusted(),
            _ => Vec::new(),
        }
    }

    /// Copies the source's totals into the health counters (one source; racing sources count per source).
    pub fn sync_counters(&self, health: &Health) {
        if let Input::One(one) = self {
            let s = one.source.counters();
            let c = &health.counters();
            c.bytes.set(s.bytes);
            c.rollovers.set(s.rollovers);
            c.partial_lines_dropped.set(s.partial_lines_dropped);
            c.files_reopened.set(s.files_reopened);
            c.source_connects.set(s.connects);
            c.source_disconnects.set(s.disconnects);
            c.foreign_messages.set(s.foreign_messages);
            c.nats_live_lines.set(s.live_lines);
            c.nats_permission_denied.set(s.permission_denied);
        }
    }
}

impl One {
    fn read(&mut self, poll: Duration, mode: Mode, emitted: u64, health: &Health, on: &mut dyn FnMut(InputEvent)) {
        self.source.set_resume_after(emitted);
        let (parser, entry, limits) = (&mut self.parser, &self.entry, self.limits);
        let mut any = false;
        let polled = self.source.poll(poll, &mut |ev| match ev {
            SourceEvent::Line(stream, bytes) => {
                any = true;
                let len = bytes.len();
                match parse_line(parser, health, entry, stream, bytes) {
                    Some(line) if limits.too_far_ahead(line.meta.height, emitted) => {
                        // Refused, and nothing else changes: no empty blocks up to it, no resync.
                        health.counters().lines_too_far_ahead.inc();
                        entry.refused.inc();
                        limits.log_too_far(&entry.name, stream, line.meta.height, emitted);
                    }
                    Some(line) => {
                        entry.line(line.meta.height);
                        on(InputEvent::Line(stream, line, None, len));
                    }
                    None if mode == Mode::Streaming => on(InputEvent::LostLine("a malformed streaming line".into())),
                    None => {} // By-block, the loss shows up as a broken block.
                }
            }
            SourceEvent::TooLong { stream, height, bytes } => {
                any = true;
                health.counters().lines_too_long.inc();
                entry.refused.inc();
                limits.log_too_long(&entry.name, stream, height, bytes);
                // The line is gone for good from the only source: resync now (the node already wrote that block,
                // so its snapshot is past it) rather than wait for the block to show up broken.
                if height.is_none_or(|h| h > emitted) {
                    let at = height.map_or_else(|| "a".into(), |h| format!("block {h}'s"));
                    on(InputEvent::LostLine(format!("{at} {stream} line was refused as too long")));
                }
            }
            SourceEvent::Restart => {
                entry.restarts.inc();
                on(InputEvent::Restart);
            }
            SourceEvent::Drained => on(InputEvent::Drained),
        });
        if let Err(e) = &polled {
            health.counters().io_errors.inc();
            tracing::warn!(source = %self.entry.name, "reading node lines: {e}");
            if matches!(self.spec, Source::Files(_)) {
                std::thread::sleep(poll);
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
    }
}

/// Parses one line; a malformed one is counted and logged, and gives `None`.
fn parse_line(
    parser: &mut NodeParser,
    health: &Health,
    entry: &SourceEntry,
    stream: Stream,
    bytes: &[u8],
) -> Option<Line> {
    let c = &health.counters();
    c.lines.inc();
    let off_layout = parser.off_layout(stream);
    let parsed = parser.parse_bytes(stream, bytes);
    if parser.off_layout(stream) > off_layout {
        c.lines_off_layout.inc();
    }
    match parsed {
        Ok(line) => Some(line),
        Err(e) => {
            c.malformed_lines.inc();
            entry.malformed.inc();
            let head = String::from_utf8_lossy(&bytes[..bytes.len().min(120)]).into_owned();
            tracing::warn!(%stream, "malformed node line ({e}); starts {head:?}");
            None
        }
    }
}

#[cfg(test)]
#[path = "input_tests.rs"]
mod tests;
