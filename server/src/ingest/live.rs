//! The live listener: reads node lines from a source, assembles blocks and applies them to the shared books, and
//! (re)starts the books from a node snapshot whenever it has none it can trust.
//!
//! One blocking thread owns the source (or, with several racing sources, the race: `ingest::race`), the parser and
//! the assembler, so parsing happens before the write lock and
//! the lock is held only to apply a line's step (`ingest::steps`): by-block, a block's fills and diffs are handed
//! on as soon as each line is parsed, and its statuses complete it. Starting (or resyncing after a gap, a lost or malformed line) is a
//! sync: a loader thread asks the node for a snapshot and reports its height first, so the source is positioned
//! right away and blocks that arrive while the snapshot loads are assembled and cached; once loaded, the books
//! are swapped in and the cached blocks above the snapshot's height are applied: no gap, nothing twice. Until
//! then the old books (if any) are served, flagged `resyncing`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::assemble::{Assembled, Assembler};
use super::info_client::{self as info, SnapshotFrom};
use super::input::{Input, InputEvent};
use super::steps;
use lines::Open;

#[path = "live_lines.rs"]
mod lines;
use crate::book::{Books, Outcome};
use crate::node::time::now_nanos;
use crate::node::{Block, Line, Mode, Stream};
use crate::state::Shared;

pub use super::live_config::LiveConfig;

/// A sync whose cache grows past this many blocks gives up and starts again.
const MAX_CACHED: usize = 50_000;

/// What the loader thread reports.
enum Loaded {
    Height(u64),
    Books(Box<Books>),
    /// Why; and whether it was a snapshot over `nats.max_snapshot_bytes`.
    Failed(String, bool),
}

enum Phase {
    Live,
    /// Waiting for a snapshot; blocks assembled meanwhile are cached.
    Syncing {
        rx: mpsc::Receiver<Loaded>,
        height: Option<u64>,
        cache: Vec<Block>,
    },
    /// The stream was lost; a new sync starts at `retry_at`.
    Lost {
        retry_at: Instant,
    },
}

/// The ingest thread's state.
pub struct Ingest {
    cfg: LiveConfig,
    shared: Arc<Shared>,
    input: Input,
    assembler: Assembler,
    /// Per stream: the height and read time of the last line the race handed over (its reader's clock, so the
    /// hand-over between threads counts as ours).
    raced_read: [(u64, i64); 3],
    phase: Phase,
    /// Index into `cfg.snapshots` of the next source to try; a `File` is used once.
    next_snapshot: usize,
    failures: u32,
    /// When the last snapshot was asked for (`resync_min_interval`).
    last_sync: Option<Instant>,
    /// The highest height whose fills were handed to the publisher.
    fills_handed: u64,
    /// Streaming lines: the open block and how much of it went to the books and the publisher.
    open: Option<Open>,
    /// Streaming lines read since the last flush: the open block has new diffs or statuses lines, and fills lines
    /// to hand on.
    diffs_due: bool,
    statuses_due: bool,
    fills_due: Vec<Line>,
    /// The stream of the last line read: lines of one stream come in runs (a tail read), and a run is a batch.
    last_stream: Option<Stream>,
}

impl std::fmt::Debug for Ingest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ingest").field("cfg", &self.cfg).finish_non_exhaustive()
    }
}

impl Ingest {
    /// Ingest that continues from the books' height, or syncs from a snapshot first when they are empty.
    pub fn new(cfg: LiveConfig, shared: Arc<Shared>) -> Ingest {
        let height = shared.books().height();
        let input = Input::new(&cfg, height, shared.health(), shared.watched());
        let mut assembler = Assembler::new(cfg.mode, height).split_lines();
        if cfg.stream_lines {
            assembler = assembler.streaming_lines();
        }
        if matches!(input, Input::Race(_)) {
            assembler = assembler.raced();
        }
        let phase = if height > 0 { Phase::Live } else { Phase::Lost { retry_at: Instant::now() } };
        Ingest {
            cfg,
            shared,
            input,
            assembler,
            raced_read: [(0, 0); 3],
            phase,
            next_snapshot: 0,
            failures: 0,
            last_sync: None,
            fills_handed: height,
            open: None,
            diffs_due: false,
            statuses_due: false,
            fills_due: Vec::new(),
            last_stream: None,
        }
    }

    fn lines(&self) -> bool {
        self.cfg.stream_lines && self.cfg.mode == Mode::Streaming
    }

    /// Runs until `stop` is set. Never exits on silence or bad input.
    pub fn run(mut self, stop: &AtomicBool) {
        while !stop.load(Relaxed) {
            self.step();
        }
    }

    /// Waits for input (at most the poll interval), then applies every block it completes.
    pub fn step(&mut self) {
        self.advance_phase();
        if !self.reading() {
            // No position to read from yet (waiting for a snapshot's height, or for the next try).
            self.input.idle(self.cfg.mode);
            self.idle();
            self.shared.health().report();
            return;
        }
        // The input is lent out for the poll so that each line is applied the moment it is parsed: a block's
        // diffs go to the books before its (much longer) status line is even read, when both are waiting.
        let mut input = std::mem::replace(&mut self.input, Input::Lent);
        let shared = self.shared.clone();
        let (poll, mode) = (self.cfg.poll_interval, self.cfg.mode);
        input.read(poll, mode, self.assembler.emitted(), shared.health(), &mut |ev| match ev {
            InputEvent::Line(stream, line, read_at, bytes) => {
                if let Some(at) = read_at {
                    self.raced_read[stream.index()] = (line.meta.height, at);
                }
                if self.last_stream.replace(stream) != Some(stream) {
                    self.flush_lines();
                }
                self.assembler.push_sized(stream, line, bytes);
                self.take_assembled();
                self.bound_pending();
            }
            InputEvent::LostLine(why) => self.lost(&why),
            InputEvent::Restart => self.assembler.restart(self.assembler.emitted()),
            InputEvent::Drained => {
                self.flush_lines();
                self.assembler.drained();
                self.take_assembled();
            }
        });
        self.input = input;
        self.flush_lines();
        self.publish_fills_through();
        self.roll_back_for_readers();
        // Racing: a line that every source skipped, or that none supplied within the grace, is lost.
        let next = self.assembler.emitted() + 1;
        let (have, parked) = (self.assembler.has(next), self.assembler.parked_after(next));
        for stream in self.input.lost(next, have, parked, self.shared.health()) {
            self.assembler.give_up(next, stream);
        }
        self.distrust();
        self.sync_source_counters();
        self.take_assembled();
        // Silence changes the state too (stale): log it from here, at most a poll interval late.
        self.shared.health().report();
    }

    /// Applies (or caches, while syncing) every line and block the assembler has ready.
    fn take_assembled(&mut self) {
        while let Some(next) = self.assembler.next_block() {
            match next {
                // Streaming lines: applied per batch (`flush_lines`), not per line.
                Assembled::Line { stream: Stream::Statuses, .. } if self.lines() => self.statuses_due = true,
                Assembled::Line { .. } if self.lines() => self.diffs_due = true,
                Assembled::Line { height, stream } => self.take_line(height, stream),
                Assembled::Fills(line) => self.fills_due.push(line),
                Assembled::Block(block) => self.take(block),
                Assembled::Broken { height, missing } => {
                    self.shared.health().counters().broken_blocks.inc();
                    self.lost(&format!("block {height} lost its line from {missing:?}"));
                }
            }
        }
    }

    /// Whether the source is positioned where the books (or the loading snapshot) need it.
    fn reading(&self) -> bool {
        matches!(self.phase, Phase::Live | Phase::Syncing { height: Some(_), .. })
    }

    fn idle(&mut self) {
        match &self.phase {
            Phase::Syncing { rx, .. } => {
                // Wake as soon as the loader reports.
                if let Ok(msg) = rx.recv_timeout(self.cfg.poll_interval) {
                    self.on_loaded(msg);
                }
            }
            _ => std::thread::sleep(self.cfg.poll_interval.min(Duration::from_millis(100))),
        }
    }

    fn take(&mut self, block: Block) {
        match &mut self.phase {
            Phase::Live => self.apply(block),
            Phase::Syncing { cache, .. } if cache.len() < MAX_CACHED => cache.push(block),
            Phase::Syncing { .. } => self.lost("the snapshot took too long to load"),
            Phase::Lost { .. } => {}
        }
    }

    /// A line of the next block, read before the block is whole: live, its step is applied now (while syncing,
    /// the whole block is cached instead).
    fn take_line(&mut self, height: u64, stream: Stream) {
        if !matches!(self.phase, Phase::Live) {
            return;
        }
        let Some(block) = self.assembler.pending(height) else { return };
        let (raced_height, raced_at) = self.raced_read[stream.index()];
        let read = if raced_height == height { raced_at } else { now_nanos() };
        let outcome = match stream {
            Stream::Fills => {
                steps::hand_fills(&self.shared, &mut self.fills_handed, block, read);
                None
            }
            Stream::Diffs => steps::apply_diffs(&self.shared, block, read, true),
            Stream::Statuses => None,
        };
        if let Some(o) = outcome {
            self.after(&o);
        }
    }

    /// Applies a whole block: the steps its lines did not already take.
    fn apply(&mut self, mut block: Block) {
        let open = self.open.take_if(|o| o.height == block.height);
        if self.lines() {
            // Its fills lines still waiting for a trade's other side will get none now.
            self.hand_fills(block.height, block.read_at);
            // Streaming lines: the statuses not handed on yet go now, and the block carries no orderUpdates.
            let o = open.unwrap_or(Open { height: block.height, ..Open::default() });
            steps::hand_statuses_part(&self.shared, &block, o.statuses, o.rejected, block.read_at);
            block.orders_stepped = true;
        }
        let block = Arc::new(block);
        let outcome = match open {
            // The rest of the open block's diffs.
            Some(o) if o.diffs > 0 => steps::apply_diffs_part(&self.shared, &block, o.diffs, block.read_at),
            _ => {
                if !self.lines() {
                    steps::hand_fills(&self.shared, &mut self.fills_handed, &block, block.read_at);
                }
                steps::apply_diffs(&self.shared, &block, block.read_at, false)
            }
        };
        if let Some(o) = outcome
            && !matches!(o, Outcome::Applied(_))
        {
            self.after(&o);
            return;
        }
        let o = steps::complete(&self.shared, block.clone(), block.read_at);
        self.after(&o);
    }

    /// Follows up a step's outcome: a gap loses the stream.
    fn after(&mut self, outcome: &Outcome) {
        match *outcome {
            Outcome::Applied(_) => {}
            Outcome::AlreadyApplied { .. } => {
                self.shared.health().counters().blocks_already_applied.inc();
            }
            Outcome::Gap { expected, got } => {
                self.shared.health().counters().gaps.inc();
                self.lost(&format!("gap: expected block {expected}, got {got}"));
            }
        }
    }

    /// The stream can no longer be followed exactly: stop applying and sync from a new snapshot.
    fn lost(&mut self, why: &str) {
        if matches!(self.phase, Phase::Lost { .. }) {
            return;
        }
        let height = self.shared.books().height();
        tracing::error!("books stop at height {height}: {why}; resync needed");
        self.shared.health().set_resyncing();
        self.failures += 1;
        let backoff = Duration::from_millis(250 << self.failures.min(7)).min(Duration::from_secs(30));
        let retry_at = retry_at(Instant::now(), backoff, self.last_sync, self.cfg.resync_min_interval);
        self.phase = Phase::Lost { retry_at };
    }

    fn advance_phase(&mut self) {
        match &mut self.phase {
            Phase::Live => {}
            Phase::Lost { retry_at } => {
                if Instant::now() >= *retry_at {
                    self.begin_sync();
                }
            }
            Phase::Syncing { rx, .. } => match rx.try_recv() {
                Ok(msg) => self.on_loaded(msg),
                Err(mpsc::TryRecvError::Empty) => {}
                Err(mpsc::TryRecvError::Disconnected) => self.lost("the snapshot loader stopped"),
            },
        }
    }

    fn on_loaded(&mut self, msg: Loaded) {
        match msg {
            Loaded::Height(h) => self.positioned(h),
            Loaded::Books(books) => self.install(*books),
            Loaded::Failed(why, too_large) => {
                self.shared.health().counters().snapshot_failures.inc();
                if too_large {
                    self.shared.health().counters().snapshots_too_large.inc();
                }
                self.lost(&why);
            }
        }
    }

    fn begin_sync(&mut self) {
        let Some(from) = self.snapshot_source() else {
            // Nothing to sync from: stay resyncing (the health state says so) and keep the books as they are.
            self.phase = Phase::Lost { retry_at: Instant::now() + Duration::from_secs(3600) };
            return;
        };
        self.shared.health().counters().snapshots_requested.inc();
        self.last_sync = Some(Instant::now());
        let (tx, rx) = mpsc::channel();
        let shared = self.shared.clone();
        // A resync needs a snapshot past the block that broke (a line lost for good would break it again).
        let min = match self.shared.books().height() {
            0 => 0,
            h => h + 1,
        };
        // A loader that fails reports it and is retried; one that panics is a bug, which a retry would repeat.
        std::thread::Builder::new()
            .name("hlbook-snapshot".into())
            .spawn(move || shared.health().supervised("snapshot loader thread", || load_snapshot(&from, min, &tx)))
            .expect("spawning a thread");
        self.phase = Phase::Syncing { rx, height: None, cache: Vec::new() };
    }

    fn snapshot_source(&mut self) -> Option<SnapshotFrom> {
        let list = &self.cfg.snapshots;
        let from = list.get(self.next_snapshot).or_else(|| list.last())?.clone();
        if matches!(from, SnapshotFrom::File(_)) && self.next_snapshot + 1 < list.len() {
            self.next_snapshot += 1;
        }
        Some(from)
    }

    /// The snapshot's height is known: read from the block after it, caching until the books arrive.
    /// Past `ingest.max_pending_bytes` of lines waiting for blocks to be whole (a stream running far ahead of
    /// another), the source counts as broken: what it holds is dropped and the books resync, rather than hold more.
    fn bound_pending(&mut self) {
        let (held, max) = (self.assembler.pending_bytes(), self.cfg.limits.max_pending_bytes);
        if held <= max {
            return;
        }
        self.assembler.restart(self.assembler.emitted());
        if matches!(self.phase, Phase::Lost { .. }) {
            return;
        }
        self.shared.health().counters().pending_bytes_full.inc();
        self.lost(&format!(
            "{held} bytes of lines wait for blocks that are not whole, over ingest.max_pending_bytes ({max}): one \
             stream runs ahead of another"
        ));
    }

    fn positioned(&mut self, h: u64) {
        tracing::info!("snapshot at height {h}; reading blocks after it while it loads");
        self.input.restart_after(h);
        self.assembler.restart(h);
        self.open = None;
        if let Phase::Syncing { height, cache, .. } = &mut self.phase {
            *height = Some(h);
            cache.clear();
        }
    }

    fn install(&mut self, books: Books) {
        let Phase::Syncing { height, cache, .. } = std::mem::replace(&mut self.phase, Phase::Live) else { return };
        let h = books.height();
        if height != Some(h) {
            self.phase = Phase::Lost { retry_at: Instant::now() };
            return;
        }
        let (orders, triggers) = (books.order_count(), books.trigger_count());
        self.shared.install(books);
        self.open = None;
        tracing::info!(
            "books loaded at height {h} ({orders} orders, {triggers} trigger orders waiting); applying {} cached blocks",
            cache.len()
        );
        self.failures = 0;
        for block in cache {
            if matches!(self.phase, Phase::Live) {
                self.apply(block);
            }
        }
    }

    fn sync_source_counters(&self) {
        self.input.sync_counters(self.shared.health());
        let c = &self.shared.health().counters();
        c.stale_lines.set(self.assembler.counters().stale_lines);
    }

    /// Racing sources disagreed about lines of these coins: untrusted until validation repairs them.
    fn distrust(&mut self) {
        let coins = self.input.take_distrusted();
        if coins.is_empty() {
            return;
        }
        let mut books = self.shared.books_mut();
        for c in coins {
            books.distrust_coin(c);
        }
    }
}

/// When to ask for the next snapshot after losing the stream at `now`: after the back-off, and no sooner than
/// `min_interval` after the last request.
fn retry_at(now: Instant, backoff: Duration, last: Option<Instant>, min_interval: Duration) -> Instant {
    let earliest = last.map_or(now, |l| l + min_interval);
    (now + backoff).max(earliest)
}

/// The loader thread: ask for (or open) a snapshot at or above `min_height`, report its height, then load it.
fn load_snapshot(from: &SnapshotFrom, min_height: u64, tx: &mpsc::Sender<Loaded>) {
    let result = (|| {
        let (path, ours) = from.fetch(min_height)?;
        let h = if ours || path.extension().is_none_or(|e| e != "gz") {
            info::snapshot_height(&path)?
        } else {
            // A compressed file's height is only known once read; load it first.
            let books = info::load(&path, false)?;
            let _ = tx.send(Loaded::Height(books.height()));
            return Ok(books);
        };
        let _ = tx.send(Loaded::Height(h));
        info::load(&path, ours)
    })();
    let _ = tx.send(match result {
        Ok(books) => Loaded::Books(Box::new(books)),
        Err(e) => Loaded::Failed(format!("snapshot failed: {e}"), matches!(e, info::InfoError::TooLarge(_))),
    });
}

#[cfg(test)]
#[path = "live_tests.rs"]
mod tests;
