//! Turning lines of three independent streams into whole blocks, in height order.
//!
//! The streams are separate files written one after another, so their lines arrive interleaved arbitrarily.
//! By-block: a block is whole when each stream gave its one line; a stream that moves past a height without
//! giving it has lost that line, and the block is reported broken (the books must resync, never guess).
//! Streaming: a stream writes nothing for a block without events, so a block is whole once the diff and status
//! streams have both moved past it (or input ended); heights no stream mentioned are empty blocks, carrying the
//! previous block's time since no line dates them (a whole-market status stream has lines in every block).
//! Lines at or below the last emitted height (a restarted node re-emitting, or a late line) are dropped and
//! counted.
//!
//! Live by-block ingest also asks for the next block's fills and diffs lines as soon as each is read (`split`):
//! trades and L2 need nothing else, and the status line that completes the block is by far the longest.
//!
//! Live streaming ingest asks for lines too (`streaming_lines`): the open block's diffs lines as they come (the
//! books step through the engine's states line by line), and every fills line as it comes, whatever block it is
//! in, since trades need no book. Fills lines then never wait in a block: each is handed out once, counted per
//! height, so a source that starts over never hands a trade twice.
//!
//! What closes a streaming block: the format has no end marker, but the node writes every line of a block, in all
//! three streams, before any line of the next (checked on the capture: no overlap in 51 blocks). So block `h` is
//! whole once (a) the diff and status streams both showed a later block, or (b) any stream showed one and then a
//! whole pass read every stream to its end (`drained`, from sources that read in passes): every line of `h` was
//! written before that later line, so the pass found it. (b) is what ends a block as soon as the next one starts,
//! whichever stream the node writes first and whichever reader ran ahead; (a) serves sources without passes.

use std::collections::BTreeMap;

use crate::node::{Block, Line, Mode, Stream};

/// What the assembler hands out, in height order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Assembled {
    /// By-block with `split`: the next block's fills or diffs line, handed out as soon as it is read. The block
    /// stays pending (`pending` reads it) and is handed out whole (or broken) later.
    Line {
        height: u64,
        stream: Stream,
    },
    Block(Block),
    /// By-block only: these streams skipped `height`. Nothing of this height is applied.
    Broken {
        height: u64,
        missing: Vec<Stream>,
    },
    /// Streaming with `streaming_lines`: a fills line, handed out once as soon as it is read (it is in no block).
    Fills(Line),
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AssemblerCounters {
    pub lines: u64,
    /// Lines for heights already emitted: re-emitted after a node restart, or late.
    pub stale_lines: u64,
    pub broken_blocks: u64,
}

#[derive(Debug)]
struct Pending {
    block: Block,
    got: [bool; 3],
    /// Lines pushed, and lines already handed out as `Assembled::Line`, per stream.
    lines: [u32; 3],
    handed: [u32; 3],
    /// Bytes of the lines pushed (as read from the source).
    bytes: usize,
}

impl Pending {
    fn new(h: u64, block_time: i64) -> Pending {
        Pending { block: Block::new(h, block_time), got: [false; 3], lines: [0; 3], handed: [0; 3], bytes: 0 }
    }
}

/// What an assembler hands out before a block is whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Early {
    Nothing,
    /// `split_lines`: the next block's fills and diffs lines (by-block).
    ByBlockLines,
    /// `streaming_lines`: the open block's diffs and statuses lines, and every fills line (streaming).
    StreamingLines,
}

/// Streaming lines: the fills lines of the newest height handed out, and how many of them came since a restart.
#[derive(Debug, Default)]
struct FillsMark {
    height: u64,
    handed: u32,
    seen: u32,
}

#[derive(Debug)]
pub struct Assembler {
    mode: Mode,
    /// What is handed out before a block is whole.
    early: Early,
    emitted: u64,
    last_block_time: i64,
    pending: BTreeMap<u64, Pending>,
    /// Bytes of every line in `pending`: what a stream running ahead of another makes the assembler hold.
    pending_bytes: usize,
    /// Highest height each stream has shown.
    seen: [Option<u64>; 3],
    /// A stream that went back (re-emission) is skipped through this height.
    replaying: [Option<u64>; 3],
    finished: bool,
    counters: AssemblerCounters,
    /// Lines come from several racing sources (`ingest::race`), each at most once per stream and height but not
    /// in height order: only the race knows when a line is lost (`give_up`).
    raced: bool,
    fills_out: std::collections::VecDeque<Line>,
    fills_mark: FillsMark,
    /// Rule (b) of the module doc: the highest height any stream showed, that height as of the last drained pass,
    /// and the blocks known whole through a drained pass.
    seen_any: u64,
    seen_at_drain: u64,
    drained_through: u64,
}

impl Assembler {
    /// An assembler that emits blocks after `after_height` (the snapshot's height).
    pub fn new(mode: Mode, after_height: u64) -> Assembler {
        Assembler {
            mode,
            early: Early::Nothing,
            emitted: after_height,
            last_block_time: 0,
            pending: BTreeMap::new(),
            pending_bytes: 0,
            seen: [None; 3],
            replaying: [None; 3],
            finished: false,
            counters: AssemblerCounters::default(),
            raced: false,
            fills_out: std::collections::VecDeque::new(),
            fills_mark: FillsMark::default(),
            seen_any: 0,
            seen_at_drain: 0,
            drained_through: 0,
        }
    }

    /// Streaming: hands out the open block's diffs and statuses lines (`Assembled::Line`) and every fills line
    /// (`Assembled::Fills`) as soon as each is read.
    #[must_use]
    pub fn streaming_lines(mut self) -> Assembler {
        if self.mode == Mode::Streaming {
            self.early = Early::StreamingLines;
        }
        self
    }

    /// Streaming: the height through which every fills line has been read. A block is whole by its diff and
    /// status streams (rule (a)), so its fills lines may still come; the fills stream is through the heights below
    /// its newest line, and a drained pass is through everything before it (rule (b)). Racing sources' streams
    /// have no order, so only a drained pass counts. By-block (and input that ended): every whole block.
    pub fn fills_through(&self) -> u64 {
        if self.mode == Mode::ByBlock || self.finished {
            return u64::MAX;
        }
        let newest = if self.raced { None } else { self.seen[Stream::Fills.index()] };
        newest.map_or(0, |h| h.saturating_sub(1)).max(self.drained_through)
    }

    /// The source read every stream to its end since the last call (a whole pass): rule (b) of the module doc.
    pub fn drained(&mut self) {
        self.drained_through = self.drained_through.max(self.seen_at_drain.saturating_sub(1));
        self.seen_at_drain = self.seen_any;
    }

    /// Lines come from racing sources: no ordering per stream is assumed, and a line is lost only when the race
    /// says so (`give_up`).
    #[must_use]
    pub fn raced(mut self) -> Assembler {
        self.raced = true;
        self
    }

    /// Racing: no source will deliver `stream`'s line of block `height` (by-block only).
    pub fn give_up(&mut self, height: u64, stream: Stream) {
        let s = &mut self.seen[stream.index()];
        *s = Some(s.map_or(height + 1, |v| v.max(height + 1)));
    }

    /// Which streams' lines block `height` has so far.
    pub fn has(&self, height: u64) -> [bool; 3] {
        self.pending.get(&height).map_or([false; 3], |p| p.got)
    }

    /// How many blocks after `height` are partly assembled (racing: parked while `height` waits for a line).
    pub fn parked_after(&self, height: u64) -> usize {
        self.pending.range(height + 1..).count()
    }

    /// Hands out the next block's fills and diffs lines as soon as they are read (by-block only).
    #[must_use]
    pub fn split_lines(mut self) -> Assembler {
        if self.mode == Mode::ByBlock {
            self.early = Early::ByBlockLines;
        }
        self
    }

    /// The partly assembled block of `height`, if any of its lines has come.
    pub fn pending(&self, height: u64) -> Option<&Block> {
        self.pending.get(&height).map(|p| &p.block)
    }

    pub fn counters(&self) -> &AssemblerCounters {
        &self.counters
    }

    /// Height of the last block handed out.
    pub fn emitted(&self) -> u64 {
        self.emitted
    }

    /// Adds a parsed line of `stream`.
    pub fn push(&mut self, stream: Stream, line: Line) {
        self.push_sized(stream, line, 0);
    }

    /// Bytes of the lines held in blocks not handed out yet (see `push_sized`).
    pub fn pending_bytes(&self) -> usize {
        self.pending_bytes
    }

    /// Adds a parsed line of `stream` that was `bytes` long, counted in `pending_bytes` while its block waits.
    pub fn push_sized(&mut self, stream: Stream, line: Line, bytes: usize) {
        self.counters.lines += 1;
        let (h, i) = (line.meta.height, stream.index());
        if self.raced {
            return self.push_raced(stream, line, bytes);
        }
        if self.replaying[i].is_some_and(|through| h <= through) {
            self.counters.stale_lines += 1;
            return;
        }
        self.replaying[i] = None;
        if let Some(max) = self.seen[i]
            && h < max
        {
            // A stream never goes back on its own: a restarted node is writing recent blocks again. Skip them
            // through the highest height it had reached, or a block still pending would get its lines twice.
            self.replaying[i] = Some(max);
            self.counters.stale_lines += 1;
            return;
        }
        self.seen[i] = Some(self.seen[i].map_or(h, |s| s.max(h)));
        self.seen_any = self.seen_any.max(h);
        if self.early == Early::StreamingLines && stream == Stream::Fills {
            return self.push_fills(line);
        }
        if h <= self.emitted {
            self.counters.stale_lines += 1;
            return;
        }
        let p = self.pending.entry(h).or_insert_with(|| Pending::new(h, line.meta.block_time));
        if self.mode == Mode::ByBlock && p.got[stream.index()] {
            // A second by-block line for one height: the node restarted mid-block. Keep the first.
            self.counters.stale_lines += 1;
            return;
        }
        p.got[stream.index()] = true;
        p.lines[stream.index()] += 1;
        p.bytes += bytes;
        self.pending_bytes += bytes;
        p.block.push(stream, line);
    }

    /// Streaming lines: a fills line goes out unless it was handed out before a restart.
    fn push_fills(&mut self, line: Line) {
        let (h, m) = (line.meta.height, &mut self.fills_mark);
        if h < m.height {
            self.counters.stale_lines += 1;
            return;
        }
        if h > m.height {
            *m = FillsMark { height: h, handed: 0, seen: 0 };
        }
        m.seen += 1;
        if m.seen <= m.handed {
            self.counters.stale_lines += 1;
            return;
        }
        m.handed += 1;
        self.fills_out.push_back(line);
    }

    fn push_raced(&mut self, stream: Stream, line: Line, bytes: usize) {
        let h = line.meta.height;
        if h <= self.emitted {
            self.counters.stale_lines += 1;
            return;
        }
        let p = self.pending.entry(h).or_insert_with(|| Pending::new(h, line.meta.block_time));
        if !p.got[stream.index()] {
            p.got[stream.index()] = true;
            p.lines[stream.index()] += 1;
            p.bytes += bytes;
            self.pending_bytes += bytes;
            p.block.push(stream, line);
        }
    }

    /// Starts over after `height`: partly assembled blocks are dropped because their lines are coming again.
    pub fn restart(&mut self, height: u64) {
        self.emitted = height;
        self.pending.clear();
        self.pending_bytes = 0;
        self.seen = [None; 3];
        self.replaying = [None; 3];
        // Lines come again: what was seen before proves nothing about them. The fills mark stays, so the fills
        // lines handed out already are known when they come again.
        (self.seen_any, self.seen_at_drain, self.drained_through) = (0, 0, 0);
        self.fills_mark.seen = 0;
    }

    /// No more input will come (end of a finished capture): every pending block is now decided.
    pub fn finish(&mut self) {
        self.finished = true;
    }

    /// The next block in height order, once it is decided (or, with `split`, its next line read early).
    pub fn next_block(&mut self) -> Option<Assembled> {
        if let Some(line) = self.fills_out.pop_front() {
            return Some(Assembled::Fills(line));
        }
        if self.finished && self.pending.is_empty() {
            return None;
        }
        let h = self.emitted + 1;
        if let Some(line) = self.next_line(h) {
            return Some(line);
        }
        let mut out = match self.mode {
            Mode::ByBlock => self.next_by_block(h)?,
            Mode::Streaming => self.next_streaming(h)?,
        };
        self.emitted = h;
        if let Assembled::Block(b) = &mut out {
            // One clock read per block, not per line (streaming blocks have thousands of lines): the block is
            // handed out in the same step that read its completing line.
            b.read_at = crate::node::time::now_nanos();
            self.last_block_time = b.block_time;
        } else {
            self.counters.broken_blocks += 1;
        }
        Some(out)
    }

    /// With `split`: block `h`'s fills or diffs line, once read and not yet handed out. With `streaming_lines`:
    /// block `h` has diffs or statuses lines not handed out yet (`pending` has them all; the taker keeps its own
    /// place).
    fn next_line(&mut self, h: u64) -> Option<Assembled> {
        let streams: &[Stream] = match self.early {
            Early::Nothing => return None,
            Early::ByBlockLines => &[Stream::Fills, Stream::Diffs],
            Early::StreamingLines => &[Stream::Diffs, Stream::Statuses],
        };
        let p = self.pending.get_mut(&h)?;
        let stream = streams.iter().copied().find(|s| p.lines[s.index()] > p.handed[s.index()])?;
        p.handed[stream.index()] = p.lines[stream.index()];
        Some(Assembled::Line { height: h, stream })
    }

    fn take_pending(&mut self, h: u64) -> Option<Pending> {
        let p = self.pending.remove(&h)?;
        self.pending_bytes -= p.bytes;
        Some(p)
    }

    fn passed(&self, stream: Stream, h: u64) -> bool {
        self.finished || self.seen[stream.index()].is_some_and(|s| s > h)
    }

    fn next_by_block(&mut self, h: u64) -> Option<Assembled> {
        let got = self.pending.get(&h).map_or([false; 3], |p| p.got);
        if got == [true; 3] {
            return self.take_pending(h).map(|p| Assembled::Block(p.block));
        }
        let missing: Vec<Stream> = Stream::ALL.into_iter().filter(|s| !got[s.index()]).collect();
        if missing.iter().any(|&s| self.passed(s, h)) {
            self.take_pending(h);
            return Some(Assembled::Broken { height: h, missing });
        }
        None
    }

    fn next_streaming(&mut self, h: u64) -> Option<Assembled> {
        let both_passed = self.passed(Stream::Diffs, h) && self.passed(Stream::Statuses, h);
        if !both_passed && h > self.drained_through {
            return None;
        }
        let block = match self.take_pending(h) {
            Some(p) => p.block,
            None => Block::new(h, self.last_block_time),
        };
        Some(Assembled::Block(block))
    }
}

#[cfg(test)]
#[path = "assemble_tests.rs"]
mod tests;
