//! Racing several sources (two nodes, or a node and a NATS stream): each by-block line is taken from whichever source
//! delivers it first, and every later copy is checked against it.
//!
//! Each source has a reader thread of its own (its `LineSource` and `NodeParser`), so parsing runs in parallel and
//! off the book path; a slow, silent or restarting source holds back only its own thread. Readers hand the ingest
//! thread each parsed line as soon as it is parsed, each with a digest of its bytes after `local_time` (the only field two honest
//! nodes write differently). For each (stream, height) the ingest thread keeps the first line, applies it exactly
//! as with one source (so every channel still goes out as soon as its line is in), and keeps its digest for a
//! window of heights: a later copy whose digest differs is a disagreement. Nothing says which copy is right (the
//! first is often the faulty one: a node that writes wrong events need not be slow), so neither source is blamed:
//! it is counted on both, logged and shown on `/status` with both named, and the coins of both copies are marked
//! untrusted, which makes validation repair them from a fresh node snapshot at once (`ingest::validate`). A copy's
//! arrival also measures the winner's lead.
//!
//! A line is lost (the block broken, resync) only when every source has moved past it without delivering it, or
//! when one has and no other delivered it within `grace`: a source that stalls, restarts or drops a line never
//! stops the books while another carries them. Lines a reader sees below the applied height are hashed, not
//! parsed: they can only be copies.

use std::collections::BTreeMap;
use std::hash::Hasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::limits::Limits;
use crate::config::Source;
use crate::node::{Coin, Events, Line, Mode, NodeParser, Stream, Watched};
use crate::state::health::Health;
use crate::state::sources::{Disagreement, SourceBoard, SourceEntry};

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
    /// Longer than `ingest.max_line_bytes`, refused unread: the source moved past it as with `Malformed`.
    TooLong,
}

impl Parsed {
    /// The source moved past this line without a usable copy of it.
    fn unusable(&self) -> bool {
        matches!(self, Parsed::Malformed | Parsed::TooLong)
    }
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
    /// Its length as read.
    pub bytes: usize,
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
    limits: Limits,
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
    /// Its length as read.
    pub bytes: usize,
}

impl Race {
    /// Starts one reader thread per source; they read nothing until `restart_after` positions them.
    /// Readers parse with `watched`, the server's set of followed users (orderUpdates, userFills).
    pub fn start(
        specs: &[Source],
        mode: Mode,
        poll: Duration,
        grace: Duration,
        limits: Limits,
        health: &Health,
        watched: &Arc<Watched>,
    ) -> Race {
        let (tx, rx) = mpsc::sync_channel(CHANNEL);
        let ctl = Arc::new(Control::default());
        let board = health.sources().clone();
        let mut entries = Vec::new();
        let mut threads = Vec::new();
        for (i, spec) in specs.iter().enumerate() {
            let entry = board.add(spec.label());
            entries.push(entry.clone());
            let r = Reader { src: i, spec: spec.clone(), mode, poll, limits, ctl: ctl.clone(), entry, tx: tx.clone() };
            let watched = watched.clone();
            let ctl = ctl.clone();
            let t = std::thread::Builder::new()
                .name(format!("hlbook-src{i}"))
                .spawn(move || {
                    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        r.run(NodeParser::with_watched(watched));
                    }));
                    if let Err(p) = ran {
                        let why = crate::state::supervise::panic_message(p.as_ref());
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
            limits,
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
        health.counters().lines.inc();
        match l.parsed {
            Parsed::Malformed => health.counters().malformed_lines.inc(),
            Parsed::TooLong => health.counters().lines_too_long.inc(),
            _ => {}
        }
        if matches!(l.parsed, Parsed::Line(_)) && self.limits.too_far_ahead(l.height, emitted) {
            // Refused before it counts as seen: a source must not look as if it moved past every block up to it.
            health.counters().lines_too_far_ahead.inc();
            self.entries[src].refused.inc();
            self.limits.log_too_far(&self.entries[src].name, l.stream, l.height, emitted);
            return;
        }
        if l.off_layout {
            health.counters().lines_off_layout.inc();
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
            if l.parsed.unusable() {
                return;
            }
            self.entries[src].copies.inc();
            if t.digest != l.digest {
                let first = t.src;
                let mut coins = t.coins.clone();
                if let Parsed::Line(line) = &l.parsed {
                    coins.extend(coins_of(line).into_iter().filter(|c| !t.coins.contains(c)));
                }
                self.disagree([first, src], &l, coins, health);
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
        on(Won { stream: l.stream, line, read_at: l.read_at, bytes: l.bytes });
    }

    /// Two copies of a line differ: `srcs` are the source applied first and the one whose copy differs.
    fn disagree(&mut self, srcs: [usize; 2], l: &Raced, coins: Vec<Coin>, health: &Health) {
        for (i, &s) in srcs.iter().enumerate() {
            if i == 0 || s != srcs[0] {
                self.entries[s].disagreements.inc();
            }
        }
        health.counters().disagreements.inc();
        let sources = srcs.map(|s| self.entries[s].name.clone());
        let names: Vec<String> = coins.iter().map(std::string::ToString::to_string).collect();
        tracing::error!(
            height = l.height,
            stream = %l.stream,
            sources = ?sources,
            coins = ?names,
            "two sources wrote this line differently; which is right is unknown, so neither is blamed: the coins of \
             both copies are repaired from a node snapshot"
        );
        self.board.record_disagreement(Disagreement { height: l.height, stream: l.stream, sources, coins: names });
        self.distrust.extend(coins);
    }

    /// The streams of block `next` that no source can still be expected to deliver: every source moved past
    /// them, or one did more than `grace` ago, or `parked` later blocks already wait for it (at most
    /// `ingest.race_max_parked_blocks`: the lines parked meanwhile are bounded, whatever the grace). `have` says which
    /// streams the block already has.
    pub fn lost(&mut self, next: u64, have: [bool; 3], parked: usize, health: &Health) -> Vec<Stream> {
        let full = parked >= self.limits.race_max_parked_blocks;
        let missing: Vec<Stream> = Stream::ALL.into_iter().filter(|s| !have[s.index()]).collect();
        if full && !missing.is_empty() {
            health.counters().parked_blocks_full.inc();
            tracing::error!(
                height = next,
                parked,
                ?missing,
                "{parked} later blocks wait for block {next}, at ingest.race_max_parked_blocks; it is lost"
            );
            self.waiting = None;
            return missing;
        }
        let mut lost = Vec::new();
        for s in missing {
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

#[path = "race_reader.rs"]
mod reader;
use reader::Reader;

#[cfg(test)]
#[path = "race_tests.rs"]
mod tests;
