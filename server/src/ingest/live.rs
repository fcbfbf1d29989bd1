//! The live listener: tails the node's files, assembles blocks and applies them to the shared books.
//!
//! One blocking thread owns the tails, the parser and the assembler, so parsing happens before the write lock and
//! the lock is held only to apply a whole block. It wakes on inotify events (through `notify`), with a slow poll
//! as a fallback for lost events and for stream folders that do not exist yet. Each applied block bumps a sequence
//! number and wakes whoever waits on it (the publisher). A gap, a lost line or a malformed line stops application
//! and flags `resyncing`: the books are never advanced past data they did not see.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use parking_lot::{Condvar, Mutex, RwLock};

use super::assemble::{Assembled, Assembler};
use super::health::Health;
use super::tail::StreamTail;
use crate::book::{Books, Outcome};
use crate::node::{Block, Mode, NodeParser, Stream};

#[derive(Clone, Debug)]
pub struct LiveConfig {
    /// The node's data dir (`~/hl/data`).
    pub node_dir: PathBuf,
    pub mode: Mode,
    /// How often to look at the files when no inotify event arrives.
    pub poll_interval: Duration,
    /// No block for this long: `stale`.
    pub stale_after: Duration,
}

/// What ingest shares with the rest of the server.
#[derive(Debug)]
pub struct Shared {
    pub books: RwLock<Books>,
    pub health: Health,
    applied: Mutex<u64>,
    wake: Condvar,
}

impl Shared {
    pub fn new(books: Books, stale_after: Duration) -> Shared {
        Shared {
            books: RwLock::new(books),
            health: Health::new(stale_after),
            applied: Mutex::new(0),
            wake: Condvar::new(),
        }
    }

    /// Number of blocks applied so far.
    pub fn applied_seq(&self) -> u64 {
        *self.applied.lock()
    }

    /// Blocks until more than `seen` blocks were applied or `timeout` passes; returns the current sequence.
    pub fn wait_applied(&self, seen: u64, timeout: Duration) -> u64 {
        let mut seq = self.applied.lock();
        if *seq <= seen {
            self.wake.wait_for(&mut seq, timeout);
        }
        *seq
    }

    fn bump(&self) {
        *self.applied.lock() += 1;
        self.wake.notify_all();
    }
}

/// Parses one line into the assembler. Returns false when a lost line breaks the stream for good: a malformed
/// streaming line carries events that nothing later reveals (a by-block loss shows up as a broken block).
fn push_line(
    parser: &mut NodeParser,
    assembler: &mut Assembler,
    health: &Health,
    mode: Mode,
    stream: Stream,
    bytes: &[u8],
) -> bool {
    let c = &health.counters;
    c.lines.fetch_add(1, Relaxed);
    let parsed = std::str::from_utf8(bytes)
        .map_err(|e| e.to_string())
        .and_then(|text| parser.parse(stream, text).map_err(|e| e.to_string()));
    match parsed {
        Ok(line) => {
            assembler.push(stream, line);
            true
        }
        Err(e) => {
            c.malformed_lines.fetch_add(1, Relaxed);
            let head = String::from_utf8_lossy(&bytes[..bytes.len().min(120)]).into_owned();
            tracing::warn!(%stream, "malformed node line ({e}); starts {head:?}");
            mode != Mode::Streaming
        }
    }
}

/// The ingest thread's state.
pub struct Ingest {
    cfg: LiveConfig,
    shared: Arc<Shared>,
    tails: Vec<StreamTail>,
    parser: NodeParser,
    assembler: Assembler,
    stopped_applying: bool,
}

impl std::fmt::Debug for Ingest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ingest").field("cfg", &self.cfg).finish_non_exhaustive()
    }
}

impl Ingest {
    /// Ingest that continues from the books' height.
    pub fn new(cfg: LiveConfig, shared: Arc<Shared>) -> Ingest {
        let height = shared.books.read().height();
        let tails = Stream::ALL.iter().map(|&s| StreamTail::new(&cfg.node_dir, cfg.mode, s, height)).collect();
        let assembler = Assembler::new(cfg.mode, height);
        Ingest { cfg, shared, tails, parser: NodeParser::new(), assembler, stopped_applying: false }
    }

    /// Runs until `stop` is set. Never exits on silence or bad input.
    pub fn run(mut self, stop: &AtomicBool) {
        let (tx, rx) = mpsc::channel::<()>();
        let mut watcher = notify::recommended_watcher(move |_event: notify::Result<notify::Event>| {
            let _ = tx.send(());
        })
        .map_err(|e| tracing::warn!("inotify unavailable, polling only: {e}"))
        .ok();
        let mut watched = vec![false; self.tails.len()];
        while !stop.load(Relaxed) {
            if let Some(w) = watcher.as_mut() {
                for (tail, done) in self.tails.iter().zip(watched.iter_mut()) {
                    if !*done && tail.watch_root().is_dir() {
                        *done = w.watch(&tail.watch_root(), RecursiveMode::Recursive).is_ok();
                    }
                }
            }
            self.step();
            // Wake on the next file event, or poll.
            if rx.recv_timeout(self.cfg.poll_interval).is_ok() {
                while rx.try_recv().is_ok() {}
            }
        }
    }

    /// Reads everything available and applies every block it completes.
    pub fn step(&mut self) {
        // Lines are parsed straight from the tail's buffer (no copy); fields are borrowed disjointly.
        let (parser, assembler, shared, mode) = (&mut self.parser, &mut self.assembler, &self.shared, self.cfg.mode);
        let mut lost_line = false;
        for tail in &mut self.tails {
            let result = tail.poll(&mut |stream, bytes| {
                lost_line |= !push_line(parser, assembler, &shared.health, mode, stream, bytes);
            });
            if let Err(e) = result {
                shared.health.counters.io_errors.fetch_add(1, Relaxed);
                tracing::warn!(stream = %tail.stream(), "reading node files: {e}");
            }
        }
        self.sync_tail_counters();
        if lost_line {
            self.lost("a malformed streaming line");
        }
        while let Some(next) = self.assembler.next_block() {
            match next {
                Assembled::Block(block) => self.apply(&block),
                Assembled::Broken { height, missing } => {
                    self.shared.health.counters.broken_blocks.fetch_add(1, Relaxed);
                    self.lost(&format!("block {height} lost its line from {missing:?}"));
                }
            }
        }
    }

    fn apply(&mut self, block: &Block) {
        if self.stopped_applying {
            return;
        }
        let outcome = self.shared.books.write().apply(block);
        let c = &self.shared.health.counters;
        match outcome {
            Outcome::Applied(a) => {
                if !a.inconsistencies.is_empty() {
                    c.inconsistencies.fetch_add(a.inconsistencies.len() as u64, Relaxed);
                    for i in &a.inconsistencies {
                        tracing::warn!(coin = %i.coin, oid = i.oid, height = a.height, "inconsistency: {:?}", i.kind);
                    }
                }
                let written = block.node_written.iter().flatten().max().copied();
                self.shared.health.applied(block.height, block.block_time, written);
                self.shared.bump();
            }
            Outcome::AlreadyApplied { .. } => {
                c.blocks_already_applied.fetch_add(1, Relaxed);
            }
            Outcome::Gap { expected, got } => {
                c.gaps.fetch_add(1, Relaxed);
                self.lost(&format!("gap: expected block {expected}, got {got}"));
            }
        }
    }

    /// The stream can no longer be followed exactly: stop applying and ask for a snapshot.
    fn lost(&mut self, why: &str) {
        if !self.stopped_applying {
            tracing::error!("books stop at height {}: {why}; resync needed", self.shared.books.read().height());
        }
        self.stopped_applying = true;
        self.shared.health.set_resyncing();
    }

    fn sync_tail_counters(&self) {
        let c = &self.shared.health.counters;
        let sum = |f: fn(&super::tail::TailCounters) -> u64| self.tails.iter().map(|t| f(t.counters())).sum::<u64>();
        c.bytes.store(sum(|t| t.bytes), Relaxed);
        c.rollovers.store(sum(|t| t.rollovers), Relaxed);
        c.partial_lines_dropped.store(sum(|t| t.partial_lines_dropped), Relaxed);
        c.files_reopened.store(sum(|t| t.reopened), Relaxed);
    }
}
