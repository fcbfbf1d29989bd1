//! Following the node's optional side streams, `misc_events` (`crate::node::misc`) and `node_twap_statuses`
//! (`crate::node::twap`), into whole blocks of events, in order, each block once, under the book streams' rules:
//! the hour files are tailed the same way (`tail`), by-block lines must step by one block (a missing one is a gap,
//! counted and logged: its events are lost to subscribers), streaming blocks are complete when a later block
//! appears, and lines at or below the last block handed out (a restarted node writing recent blocks again, a file
//! replaced) are dropped. A malformed line is counted, logged and skipped; an unknown or malformed event inside a
//! good line costs only that event. One reader serves both streams (`SideStream` says which): their lines share
//! the envelope and the rules.
//!
//! hlbook runs without either stream: when the node does not write it (no folder), nothing is read and health
//! says so.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

use super::line_source::SourceEvent;
use super::tail::StreamTail;
use crate::node::LineMeta;
use crate::node::Mode;
pub use crate::node::misc::MiscBlock;
use crate::node::misc::{EventBlock, MiscEvent, Skipped, misc_dir, parse_misc_line};
use crate::node::twap::{TwapEvent, parse_twap_line, twap_dir};
use crate::state::Shared;
use crate::state::health::Health;
use crate::state::misc_stream::{MiscRead, MiscStream, MiscStreamCounters};

/// One of the node's side streams: where its files are, how a line reads, where its standing is shown.
pub trait SideStream {
    type Event: std::fmt::Debug;
    /// The stream's name in logs.
    const NAME: &'static str;
    /// What goes without events when the node does not write it (logged once).
    const WITHOUT: &'static str;
    fn dir(mode: Mode) -> &'static str;
    /// One complete line: its envelope, its events, the events skipped; Err: the envelope did not parse.
    fn parse(line: &str) -> Result<ParsedLine<Self::Event>, String>;
    fn status(health: &Health) -> &MiscStream;
}

pub type ParsedLine<E> = (LineMeta, Vec<E>, Vec<Skipped>);

/// `misc_events`: fundings and ledger updates.
#[derive(Debug)]
pub struct MiscEvents;

impl SideStream for MiscEvents {
    type Event = MiscEvent;
    const NAME: &'static str = "misc_events";
    const WITHOUT: &'static str = "userFundings and ledger updates get no events";
    fn dir(mode: Mode) -> &'static str {
        misc_dir(mode)
    }
    fn parse(line: &str) -> Result<ParsedLine<MiscEvent>, String> {
        parse_misc_line(line).map(|l| (l.meta, l.events, l.skipped)).map_err(|e| e.to_string())
    }
    fn status(health: &Health) -> &MiscStream {
        health.misc()
    }
}

/// `node_twap_statuses`: TWAP orders started and ended.
#[derive(Debug)]
pub struct TwapStatuses;

impl SideStream for TwapStatuses {
    type Event = TwapEvent;
    const NAME: &'static str = "node_twap_statuses";
    const WITHOUT: &'static str = "userTwapHistory gets no events";
    fn dir(mode: Mode) -> &'static str {
        twap_dir(mode)
    }
    fn parse(line: &str) -> Result<ParsedLine<TwapEvent>, String> {
        parse_twap_line(line).map(|l| (l.meta, l.events, l.skipped)).map_err(|e| e.to_string())
    }
    fn status(health: &Health) -> &MiscStream {
        health.twaps()
    }
}

/// What the reader counted since start (health and metrics).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MiscCounters {
    pub lines: u64,
    pub blocks: u64,
    pub events: u64,
    /// Lines that did not parse (lost whole).
    pub bad_lines: u64,
    pub unknown_events: u64,
    pub malformed_events: u64,
    /// By-block: places where blocks were missing.
    pub gaps: u64,
    /// Lines of blocks already handed out (a restarted node, a replaced file), dropped.
    pub duplicates: u64,
    pub lines_refused: u64,
}

#[derive(Debug)]
pub struct SideReader<S: SideStream> {
    tail: StreamTail,
    blocks: Blocks<S>,
}

/// The reader's state apart from its files: lines in, whole blocks out. Apart from the tail so each line is
/// handled as it is read: a store catching up on days of files never holds more than a block of them.
#[derive(Debug)]
struct Blocks<S: SideStream> {
    mode: Mode,
    /// The last block handed out (the resume height before the first).
    last: u64,
    /// Streaming: the block being gathered.
    pending: Option<EventBlock<S::Event>>,
    /// The highest block seen, and while a restarted node writes recent blocks again, the height through which
    /// its lines are skipped (`assemble`'s rule: a stream never goes back on its own).
    seen: u64,
    replaying: Option<u64>,
    counters: MiscCounters,
}

pub type MiscReader = SideReader<MiscEvents>;

/// Whether the node writes the stream at all (its folder exists).
pub fn present<S: SideStream>(node_dir: &Path, mode: Mode) -> bool {
    node_dir.join(S::dir(mode)).is_dir()
}

impl<S: SideStream> SideReader<S> {
    /// Reads the blocks after `after_height` (0: from the oldest hour file on).
    pub fn new(node_dir: &Path, mode: Mode, after_height: u64) -> SideReader<S> {
        SideReader {
            tail: StreamTail::side(&node_dir.join(S::dir(mode)), mode, after_height),
            blocks: Blocks {
                mode,
                last: after_height,
                pending: None,
                seen: after_height,
                replaying: None,
                counters: MiscCounters::default(),
            },
        }
    }

    pub fn counters(&self) -> &MiscCounters {
        &self.blocks.counters
    }

    /// The last block handed out.
    pub fn last(&self) -> u64 {
        self.blocks.last
    }

    /// Reads what the files hold now and hands out every block completed by it, in order, each line as it is read.
    pub fn poll(&mut self, on_block: &mut impl FnMut(EventBlock<S::Event>)) -> io::Result<()> {
        let SideReader { tail, blocks } = self;
        tail.poll(true, &mut |ev| match ev {
            SourceEvent::Line(_, bytes) => blocks.line(bytes, on_block),
            SourceEvent::TooLong { height, bytes, .. } => {
                blocks.counters.lines_refused += 1;
                tracing::warn!(stream = S::NAME, ?height, bytes, "side stream line over the length cap skipped");
            }
            SourceEvent::Restart | SourceEvent::Drained => {}
        })
    }
}

impl<S: SideStream> Blocks<S> {
    fn line(&mut self, bytes: &[u8], on_block: &mut impl FnMut(EventBlock<S::Event>)) {
        self.counters.lines += 1;
        match std::str::from_utf8(bytes).map(S::parse) {
            Ok(Ok(l)) => self.take(l, on_block),
            Ok(Err(e)) => self.bad_line(&e),
            Err(e) => self.bad_line(&format!("not UTF-8: {e}")),
        }
    }

    fn bad_line(&mut self, why: &str) {
        self.counters.bad_lines += 1;
        tracing::warn!(stream = S::NAME, error = why, "side stream line skipped: its block's user events are lost");
    }

    fn take(&mut self, (meta, events, skipped): ParsedLine<S::Event>, on_block: &mut impl FnMut(EventBlock<S::Event>)) {
        for s in &skipped {
            if s.unknown_kind {
                self.counters.unknown_events += 1;
            } else {
                self.counters.malformed_events += 1;
            }
            tracing::warn!(stream = S::NAME, height = meta.height, at = s.at, why = %s.why, "side stream event skipped");
        }
        let h = meta.height;
        if self.replaying.is_some_and(|through| h <= through) {
            self.counters.duplicates += 1;
            return;
        }
        self.replaying = None;
        if h < self.seen && self.seen > self.last {
            // Going back with a block still open: skip through the highest, or that block gets its lines twice.
            self.replaying = Some(self.seen);
        }
        self.seen = self.seen.max(h);
        if self.replaying.is_some() || h <= self.last {
            self.counters.duplicates += 1;
            return;
        }
        if let Some(p) = self.pending.as_mut().filter(|p| p.height == h) {
            p.events.extend(events);
            return;
        }
        if let Some(done) = self.pending.take() {
            self.hand_out(done, on_block);
        }
        let block = EventBlock { height: h, block_time: meta.block_time, events };
        match self.mode {
            Mode::ByBlock => self.hand_out(block, on_block),
            Mode::Streaming => self.pending = Some(block),
        }
    }

    fn hand_out(&mut self, block: EventBlock<S::Event>, on_block: &mut impl FnMut(EventBlock<S::Event>)) {
        if self.mode == Mode::ByBlock && self.last > 0 && block.height > self.last + 1 {
            self.counters.gaps += 1;
            tracing::warn!(stream = S::NAME, from = self.last + 1, to = block.height - 1, "side stream blocks missing");
        }
        self.last = block.height;
        self.counters.blocks += 1;
        self.counters.events += block.events.len() as u64;
        on_block(block);
    }
}

/// `serve`'s thread of one side stream: once the books are loaded, follows it from their height until `stop`,
/// handing each whole block to `sink` and mirroring the reader's counters into the health. While the node writes
/// no such folder the stream is `absent` and looked for again at every poll (a node restarted with the flag).
pub fn follow<S: SideStream>(
    node_dir: &Path,
    mode: Mode,
    poll: Duration,
    shared: &Shared,
    stop: &AtomicBool,
    sink: &mut impl FnMut(EventBlock<S::Event>),
) {
    let status = S::status(shared.health());
    let mut reader: Option<SideReader<S>> = None;
    while !stop.load(Relaxed) {
        match &mut reader {
            Some(r) => {
                if let Err(e) = r.poll(sink) {
                    status.counters().io_errors.inc();
                    tracing::warn!(stream = S::NAME, error = %e, "side stream read failed; retried at the next poll");
                }
                mirror(r.counters(), status.counters());
                status.set_height(r.last());
            }
            None => reader = start::<S>(node_dir, mode, shared),
        }
        std::thread::sleep(poll);
    }
}

/// A reader from the books' height once they are loaded and the folder exists; says on the health which it is.
fn start<S: SideStream>(node_dir: &Path, mode: Mode, shared: &Shared) -> Option<SideReader<S>> {
    let height = shared.health().height();
    let status = S::status(shared.health());
    if height == 0 {
        return None;
    }
    #[cfg(feature = "test-hooks")]
    assert!(!crate::state::test_panic(S::NAME), "HLBOOK_TEST_PANIC asked the {} thread to panic", S::NAME);
    if !present::<S>(node_dir, mode) {
        if status.read() != MiscRead::Absent {
            let dir = node_dir.join(S::dir(mode));
            tracing::info!(dir = %dir.display(), "no {}: {}", S::NAME, S::WITHOUT);
            status.set_read(MiscRead::Absent);
        }
        return None;
    }
    tracing::info!(after = height, "reading {}", S::NAME);
    status.set_from(height);
    status.set_read(MiscRead::Read);
    Some(SideReader::new(node_dir, mode, height))
}

fn mirror(c: &MiscCounters, to: &MiscStreamCounters) {
    for (n, v) in [
        (&to.lines, c.lines),
        (&to.blocks, c.blocks),
        (&to.events, c.events),
        (&to.bad_lines, c.bad_lines),
        (&to.unknown_events, c.unknown_events),
        (&to.malformed_events, c.malformed_events),
        (&to.gaps, c.gaps),
        (&to.duplicates, c.duplicates),
        (&to.lines_refused, c.lines_refused),
    ] {
        n.set(v);
    }
}

#[cfg(test)]
#[path = "side_tests.rs"]
mod tests;
