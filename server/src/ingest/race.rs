//! Racing several sources (two nodes, or a node and a relay): each by-block line is taken from whichever source
//! delivers it first, and every later copy is checked against it.
//!
//! Each source has a reader thread of its own (its `LineSource` and `NodeParser`), so parsing runs in parallel and
//! off the book path; a slow, silent or restarting source holds back only its own thread. Readers hand the ingest
//! thread each parsed line as soon as it is parsed, each with a digest of its bytes after `local_time` (the only field two honest
//! nodes write differently). For each (stream, height) the ingest thread keeps the first line, applies it exactly
//! as with one source (so every channel still goes out as soon as its line is in), and keeps its digest for a
//! window of heights: a later copy whose digest differs is a disagreement, counted, logged with both sources
//! named, and its coins go to validation's repair path. A copy's arrival also measures the winner's lead.
//!
//! A line is lost (the block broken, resync) only when every source has moved past it without delivering it, or
//! when one has and no other delivered it within `grace`: a source that stalls, restarts or drops a line never
//! stops the books while another carries them. Lines a reader sees below the applied height are hashed, not
//! parsed: they can only be copies.

use std::collections::BTreeMap;
use std::hash::Hasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::time::{Duration, Instant};

use super::health::Health;
use super::source::SourceEvent;
use super::sources::{SourceBoard, SourceEntry, SourceSpec};
use super::tail::block_number;
use crate::node::time::now_nanos;
use crate::node::{Coin, Events, Line, Mode, NodeParser, Stream, Watched};

/// Heights whose winning lines' digests are kept, for copies that come late.
const WINDOW: u64 = 512;
/// Lines a reader may have in flight before it waits for the ingest thread (about 300 by-block blocks).
const CHANNEL: usize = 1024;

/// What a reader made of one line.
#[derive(Debug)]
pub enum Parsed {
    Line(Line),
    /// Below the applied height when read: only hashed, to be compared.
    Copy,
    /// Did not parse; the source moved past this height without a usable line.
    Malformed,
}

#[derive(Debug)]
pub struct Raced {
    pub stream: Stream,
    pub height: u64,
    pub digest: u64,
    pub read_at: i64,
    pub parsed: Parsed,
    /// The line was not in the node's exact layout (read by the slower serde parse).
    pub off_layout: bool,
}

#[derive(Debug)]
enum Msg {
    Line(usize, Raced),
    /// The source lost its place and reads again after the applied height.
    Restart(usize),
}

/// What the ingest thread tells the readers, through atomics (it never waits on them).
#[derive(Debug, Default)]
struct Control {
    /// The last block ingest handed out: readers resume after it and only hash lines at or below it.
    floor: AtomicU64,
    /// Bumped to make every reader start over after `restart_height` (a snapshot's height).
    generation: AtomicU64,
    restart_height: AtomicU64,
    stop: AtomicBool,
    /// Why a reader thread died (it panicked): the ingest thread fails the service on its next poll, since the
    /// readers hold no `Health` of their own and a race quietly down to fewer sources would hide a bug.
    died: parking_lot::Mutex<Option<String>>,
}

/// Digest of a line's events: its bytes from `"block_time"` on, so `local_time` (first in the envelope) is left out.
pub fn digest(line: &[u8]) -> u64 {
    let head = &line[..line.len().min(128)];
    let from = memchr::memmem::find(head, b"\"block_time\"").unwrap_or(0);
    let mut h = rustc_hash::FxHasher::default();
    h.write(&line[from..]);
    h.finish()
}

/// The winner of one (stream, height).
#[derive(Debug)]
struct Taken {
    src: usize,
    digest: u64,
    read_at: i64,
    /// A copy from another source arrived (its lead is recorded once).
    led: bool,
    coins: Vec<Coin>,
}

fn coins_of(line: &Line) -> Vec<Coin> {
    let mut coins: Vec<Coin> = Vec::new();
    let mut add = |c: &Coin| {
        if !coins.contains(c) {
            coins.push(c.clone());
        }
    };
    match &line.events {
        Events::Diffs(d) => d.iter().for_each(|x| add(&x.coin)),
        Events::Statuses { kept, .. } => kept.iter().for_each(|x| add(&x.coin)),
        Events::Fills(f) => f.iter().for_each(|x| add(&x.coin)),
    }
    coins
}

/// The ingest thread's side of the race.
#[derive(Debug)]
pub struct Race {
    rx: Receiver<Msg>,
    ctl: Arc<Control>,
    entries: Vec<Arc<SourceEntry>>,
    board: Arc<SourceBoard>,
    threads: Vec<std::thread::JoinHandle<()>>,
    taken: BTreeMap<u64, [Option<Taken>; 3]>,
    /// Per source and stream: the highest height it delivered (or moved past with a malformed line).
    seen: Vec<[u64; 3]>,
    /// When a source first moved past a line of the next block that nobody delivered: (height, since). One timer
    /// per block, whichever of its streams are missing: a block lost whole (three streams) expires like one line.
    waiting: Option<(u64, Instant)>,
    grace: Duration,
    /// Disagreeing coins to mark untrusted under the next write lock.
    distrust: Vec<Coin>,
}

/// A winning line for the assembler.
#[derive(Debug)]
pub struct Won {
    pub stream: Stream,
    pub line: Line,
    /// When its reader read it.
    pub read_at: i64,
}

impl Race {
    /// Starts one reader thread per source; they read nothing until `restart_after` positions them.
    /// Readers parse with `watched`, the server's set of followed users (orderUpdates, userFills).
    pub fn start(
        specs: &[SourceSpec],
        mode: Mode,
        poll: Duration,
        grace: Duration,
        health: &Health,
        watched: &Arc<Watched>,
    ) -> Race {
        let (tx, rx) = mpsc::sync_channel(CHANNEL);
        let ctl = Arc::new(Control::default());
        let board = health.sources.clone();
        let mut entries = Vec::new();
        let mut threads = Vec::new();
        for (i, spec) in specs.iter().enumerate() {
            let entry = board.add(spec.label());
            entries.push(entry.clone());
            let r = Reader { src: i, spec: spec.clone(), mode, poll, ctl: ctl.clone(), entry, tx: tx.clone() };
            let watched = watched.clone();
            let ctl = ctl.clone();
            let t = std::thread::Builder::new()
                .name(format!("hlbook-src{i}"))
                .spawn(move || {
                    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        r.run(NodeParser::with_watched(watched));
                    }));
                    if let Err(p) = ran {
                        let why = super::health::panic_message(p.as_ref());
                        ctl.died.lock().get_or_insert(format!("the source {i} reader thread panicked: {why}"));
                    }
                })
                .expect("spawning a thread");
            threads.push(t);
        }
        Race {
            rx,
            ctl,
            seen: vec![[0; 3]; entries.len()],
            entries,
            board,
            threads,
            taken: BTreeMap::new(),
            waiting: None,
            grace,
            distrust: Vec::new(),
        }
    }

    /// Every reader starts over after `height`.
    pub fn restart_after(&mut self, height: u64) {
        self.ctl.floor.store(height, Ordering::Relaxed);
        self.ctl.restart_height.store(height, Ordering::Relaxed);
        self.ctl.generation.fetch_add(1, Ordering::Release);
        self.taken.retain(|&h, _| h <= height);
        self.seen.iter_mut().for_each(|s| *s = [0; 3]);
        self.waiting = None;
    }

    /// The last block handed out: readers resume after it.
    pub fn set_floor(&self, emitted: u64) {
        self.ctl.floor.store(emitted, Ordering::Relaxed);
    }

    /// Coins to mark untrusted (disagreements since the last call).
    pub fn take_distrusted(&mut self) -> Vec<Coin> {
        std::mem::take(&mut self.distrust)
    }

    /// Waits up to `wait` for lines, then takes every line queued; winning lines above `emitted` go to `on`.
    pub fn poll(&mut self, wait: Duration, emitted: u64, health: &Health, on: &mut dyn FnMut(Won)) {
        if let Some(why) = self.ctl.died.lock().take() {
            health.fail(why);
        }
        let first = match self.rx.recv_timeout(wait) {
            Ok(m) => m,
            Err(RecvTimeoutError::Timeout) => return,
            Err(RecvTimeoutError::Disconnected) => {
                std::thread::sleep(wait);
                return;
            }
        };
        self.on_msg(first, emitted, health, on);
        while let Ok(m) = self.rx.try_recv() {
            self.on_msg(m, emitted, health, on);
        }
        self.taken.retain(|&h, _| h + WINDOW > emitted);
    }

    fn on_msg(&mut self, msg: Msg, emitted: u64, health: &Health, on: &mut dyn FnMut(Won)) {
        match msg {
            Msg::Restart(src) => self.seen[src] = [0; 3],
            Msg::Line(src, l) => self.on_line(src, l, emitted, health, on),
        }
    }

    fn on_line(&mut self, src: usize, l: Raced, emitted: u64, health: &Health, on: &mut dyn FnMut(Won)) {
        let i = l.stream.index();
        health.counters.lines.fetch_add(1, Ordering::Relaxed);
        if matches!(l.parsed, Parsed::Malformed) {
            health.counters.malformed_lines.fetch_add(1, Ordering::Relaxed);
        }
        if l.off_layout {
            health.counters.lines_off_layout.fetch_add(1, Ordering::Relaxed);
        }
        if !matches!(l.parsed, Parsed::Copy) {
            self.seen[src][i] = self.seen[src][i].max(l.height);
        }
        if let Some(t) = self.taken.get_mut(&l.height).and_then(|s| s[i].as_mut()) {
            if t.src != src && !t.led {
                t.led = true;
                let lead = l.read_at - t.read_at;
                self.entries[t.src].led(l.stream, lead);
                self.board.record_lead(l.height, l.stream, lead);
            }
            if matches!(l.parsed, Parsed::Malformed) {
                return;
            }
            self.entries[src].copies.fetch_add(1, Ordering::Relaxed);
            if t.digest != l.digest {
                let winner = self.entries[t.src].name.clone();
                let mut coins = t.coins.clone();
                if let Parsed::Line(line) = &l.parsed {
                    coins.extend(coins_of(line).into_iter().filter(|c| !t.coins.contains(c)));
                }
                self.disagree(src, &winner, &l, coins, health);
            }
            return;
        }
        let Parsed::Line(line) = l.parsed else { return };
        if l.height <= emitted {
            return; // Before the window (or a resync moved back): nothing left to compare with.
        }
        self.entries[src].won(l.stream);
        self.board.record_win(l.height, l.stream, src);
        let coins = coins_of(&line);
        let taken = Taken { src, digest: l.digest, read_at: l.read_at, led: false, coins };
        self.taken.entry(l.height).or_default()[i] = Some(taken);
        on(Won { stream: l.stream, line, read_at: l.read_at });
    }

    fn disagree(&mut self, src: usize, winner: &str, l: &Raced, coins: Vec<Coin>, health: &Health) {
        self.entries[src].disagreements.fetch_add(1, Ordering::Relaxed);
        health.counters.disagreements.fetch_add(1, Ordering::Relaxed);
        let names: Vec<&str> = coins.iter().map(|c| &**c).collect();
        tracing::error!(
            height = l.height,
            stream = %l.stream,
            applied_from = winner,
            differs = %self.entries[src].name,
            coins = ?names,
            "sources disagree about a line; its coins go to repair"
        );
        self.distrust.extend(coins);
    }

    /// The streams of block `next` that no source can still be expected to deliver: every source moved past
    /// them, or one did more than `grace` ago. `have` says which streams the block already has.
    pub fn lost(&mut self, next: u64, have: [bool; 3]) -> Vec<Stream> {
        let mut lost = Vec::new();
        for s in Stream::ALL.into_iter().filter(|s| !have[s.index()]) {
            let passed = self.seen.iter().filter(|seen| seen[s.index()] > next).count();
            if passed == 0 {
                continue;
            }
            if passed == self.seen.len() {
                lost.push(s);
                continue;
            }
            let since = match self.waiting {
                Some((h, since)) if h == next => since,
                _ => self.waiting.insert((next, Instant::now())).1,
            };
            if since.elapsed() >= self.grace {
                lost.push(s);
            }
        }
        if !lost.is_empty() {
            self.waiting = None;
        }
        lost
    }
}

impl Drop for Race {
    fn drop(&mut self) {
        self.ctl.stop.store(true, Ordering::Relaxed);
        // Drain so no reader stays blocked on a full channel, then let them see `stop`.
        while self.rx.try_recv().is_ok() {}
        for t in std::mem::take(&mut self.threads) {
            while !t.is_finished() {
                while self.rx.try_recv().is_ok() {}
                std::thread::sleep(Duration::from_millis(5));
            }
            let _ = t.join();
        }
    }
}

/// One source's reader thread.
struct Reader {
    src: usize,
    spec: SourceSpec,
    mode: Mode,
    poll: Duration,
    ctl: Arc<Control>,
    entry: Arc<SourceEntry>,
    tx: SyncSender<Msg>,
}

impl Reader {
    fn run(self, mut parser: NodeParser) {
        let mut source = None;
        let mut generation = 0;
        let mut checked = Instant::now().checked_sub(Duration::from_secs(10)).unwrap_or_else(Instant::now);
        while !self.ctl.stop.load(Ordering::Relaxed) {
            let g = self.ctl.generation.load(Ordering::Acquire);
            if g != generation {
                generation = g;
                let h = self.ctl.restart_height.load(Ordering::Relaxed);
                match &mut source {
                    None => source = Some(self.spec.open(self.mode, h, false)),
                    Some(s) => {
                        let s: &mut Box<dyn super::source::LineSource> = s;
                        s.restart_after(h);
                        if self.tx.send(Msg::Restart(self.src)).is_err() {
                            return;
                        }
                    }
                }
                self.entry.reset_height(h);
            }
            let Some(s) = source.as_mut() else {
                // Not positioned yet (the snapshot's height is not known): say what is missing meanwhile.
                if checked.elapsed() >= Duration::from_secs(1) {
                    checked = Instant::now();
                    if let SourceSpec::Files(dir) = &self.spec {
                        self.entry.set_problem(super::sources::diagnose_dir(dir, self.mode));
                    }
                }
                std::thread::sleep(self.poll.min(Duration::from_millis(50)));
                continue;
            };
            let floor = self.ctl.floor.load(Ordering::Relaxed);
            s.set_resume_after(floor);
            let (mut any, mut gone, mut restarted) = (false, false, false);
            // Each line goes over as soon as it is parsed: a block's diffs line (l2Book, bbo) must not wait for
            // its long statuses line read in the same poll.
            let polled = s.poll(self.poll, &mut |ev| match ev {
                SourceEvent::Line(stream, bytes) => {
                    any = true;
                    let line = self.parse(&mut parser, stream, bytes, floor);
                    gone |= !gone && self.tx.send(Msg::Line(self.src, line)).is_err();
                }
                SourceEvent::Restart => restarted = true,
                // Racing is by-block: a block is whole when each stream gave its one line.
                SourceEvent::Drained => {}
            });
            if gone {
                return;
            }
            if let Err(e) = &polled {
                tracing::warn!(source = %self.entry.name, "reading node lines: {e}");
                self.entry.set_problem(Some(e.to_string()));
                std::thread::sleep(self.poll);
            }
            if restarted {
                self.entry.restarts.fetch_add(1, Ordering::Relaxed);
                if self.tx.send(Msg::Restart(self.src)).is_err() {
                    return;
                }
            }
            if !any {
                if checked.elapsed() >= Duration::from_secs(1) {
                    checked = Instant::now();
                    self.entry.set_problem(s.problem());
                }
                continue;
            }
            if polled.is_ok() {
                self.entry.set_problem(None);
            }
        }
    }

    fn parse(&self, parser: &mut NodeParser, stream: Stream, bytes: &[u8], floor: u64) -> Raced {
        let read_at = now_nanos();
        let head = block_number(bytes);
        let off_layout = parser.off_layout(stream);
        let parsed = if head.is_some_and(|h| h <= floor) {
            Parsed::Copy
        } else {
            match parser.parse_bytes(stream, bytes) {
                Ok(line) => Parsed::Line(line),
                Err(e) => {
                    self.entry.malformed.fetch_add(1, Ordering::Relaxed);
                    let start = String::from_utf8_lossy(&bytes[..bytes.len().min(120)]).into_owned();
                    tracing::warn!(source = %self.entry.name, %stream, "malformed node line ({e}); starts {start:?}");
                    Parsed::Malformed
                }
            }
        };
        let height = match &parsed {
            Parsed::Line(l) => l.meta.height,
            _ => head.unwrap_or(0),
        };
        self.entry.line(height);
        self.entry.touch(read_at);
        let off_layout = parser.off_layout(stream) > off_layout;
        Raced { stream, height, digest: digest(bytes), read_at, parsed, off_layout }
    }
}

#[cfg(test)]
#[path = "race_tests.rs"]
mod tests;
