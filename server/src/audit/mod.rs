//! Where each block's time goes: per-block stage timestamps, per-stage latency histograms, and their exports
//! (`/metrics`, `/status`).
//!
//! Ingest records when each line of a block was written by the node, read and applied
//! (`state::LineTimes`): a block is published in steps, L2 from its diffs line, trades from its fills line,
//! l4Book once its statuses line completes it. The publisher adds when a line's frames were published; connections
//! add when they wrote them (first and last socket write over all connections, with two atomics per line, so the
//! hot path never locks). About a second after a line was published its entry is final: each stage goes into a
//! cumulative `hdrhistogram` per source line (for Prometheus) and into a one-minute window (for `/status` and the
//! status page), so each line's stages add up on their own.

mod exposed;
pub mod metrics;
pub mod status;

pub use exposed::Exposed;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

use hdrhistogram::Histogram;
use parking_lot::Mutex;

use crate::node::Stream;
use crate::state::LineTimes;

/// The status page served at `/` (it polls `/status`).
pub const STATUS_PAGE: &str = include_str!("status.html");

/// The stages, in pipeline order: (name, from, to) over a `SettledLine` entry's fields.
pub const STAGES: [&str; 7] = [
    "block_to_node_write",
    "node_write_to_read",
    "read_to_applied",
    "applied_to_published",
    "published_to_first_write",
    "published_to_last_write",
    "block_to_last_write",
];

/// Lines tracked at once (three per block: about five minutes of mainnet blocks).
const RING: usize = 3 * 4096;
/// A block's entry is final this long after it was published (its frames have been written by then).
const SETTLE_NS: i64 = 1_000_000_000;
/// The window `/status` reports unless `server.status_window_secs` says otherwise.
pub const WINDOW_NS: i64 = 60_000_000_000;

#[derive(Debug, Default)]
struct Entry {
    /// `key(height, line)` of the line tracked here.
    key: AtomicU64,
    times: Mutex<LineTimes>,
    published: AtomicI64,
    first_sent: AtomicI64,
    last_sent: AtomicI64,
}

/// One settled line of a block: its stage latencies in ns (`None` when a stage did not happen, e.g. nothing was
/// sent).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SettledLine {
    pub height: u64,
    pub line: Stream,
    pub applied_ns: i64,
    pub stages: [Option<i64>; 7],
}

#[derive(Debug)]
pub struct Stages {
    ring: Box<[Entry]>,
    /// Lines (`key`) published and not yet settled, oldest first.
    pending: Mutex<VecDeque<u64>>,
    /// Per source line (`Stream::index`), one histogram per stage.
    histograms: Mutex<[Vec<Histogram<u64>>; 3]>,
    window: Mutex<VecDeque<SettledLine>>,
    /// How much wall time `window` covers.
    window_ns: i64,
}

impl Default for Stages {
    fn default() -> Self {
        Stages::new()
    }
}

impl Stages {
    pub fn new() -> Stages {
        let hist = || Histogram::new_with_bounds(1, 600_000_000_000, 3).unwrap_or_else(|_| Histogram::new(3).unwrap());
        Stages {
            ring: (0..RING).map(|_| Entry::default()).collect(),
            pending: Mutex::new(VecDeque::new()),
            histograms: Mutex::new(std::array::from_fn(|_| (0..STAGES.len()).map(|_| hist()).collect())),
            window: Mutex::new(VecDeque::new()),
            window_ns: WINDOW_NS,
        }
    }

    /// The window covers `window_ns` of wall time instead of a minute.
    pub fn set_window(&mut self, window_ns: i64) {
        self.window_ns = window_ns.max(1);
    }

    /// The wall time the window covers.
    pub fn window_ns(&self) -> i64 {
        self.window_ns
    }

    fn entry(&self, key: u64) -> &Entry {
        &self.ring[(key % RING as u64) as usize]
    }

    /// The publisher is about to publish frames of `times.height`'s `times.line`: from now on their writes count.
    pub fn begin(&self, times: LineTimes) {
        let k = key(times.height, times.line);
        let e = self.entry(k);
        *e.times.lock() = times;
        e.published.store(0, Relaxed);
        e.first_sent.store(i64::MAX, Relaxed);
        e.last_sent.store(0, Relaxed);
        e.key.store(k, Relaxed);
    }

    /// The publisher published frames of `height`'s `line` at `published_ns` (after `begin`).
    pub fn published(&self, height: u64, line: Stream, published_ns: i64) {
        let k = key(height, line);
        let e = self.entry(k);
        if e.key.load(Relaxed) == k {
            e.published.store(published_ns, Relaxed);
            self.pending.lock().push_back(k);
        }
    }

    /// A connection wrote a frame built from `height`'s `line` at `sent_ns`.
    pub fn sent(&self, height: u64, line: Stream, sent_ns: i64) {
        let k = key(height, line);
        let e = self.entry(k);
        if e.key.load(Relaxed) == k {
            e.first_sent.fetch_min(sent_ns, Relaxed);
            e.last_sent.fetch_max(sent_ns, Relaxed);
        }
    }

    /// Settles every entry published more than a second before `now`.
    pub fn settle(&self, now: i64) {
        let mut settled = Vec::new();
        {
            let mut pending = self.pending.lock();
            while let Some(&k) = pending.front() {
                let e = self.entry(k);
                if e.key.load(Relaxed) == k && now - e.published.load(Relaxed) < SETTLE_NS {
                    break;
                }
                pending.pop_front();
                // Streaming publishes a block's line in parts, each `begin`ning the same entry again: it settles
                // once, with the newest part's times.
                if e.key.compare_exchange(k, 0, Relaxed, Relaxed).is_ok() {
                    settled.push(finalize(e));
                }
            }
        }
        if settled.is_empty() {
            return;
        }
        let mut hist = self.histograms.lock();
        for f in &settled {
            for (h, v) in hist[f.line.index()].iter_mut().zip(f.stages) {
                if let Some(v) = v {
                    h.saturating_record(v.max(1) as u64);
                }
            }
        }
        drop(hist);
        let mut w = self.window.lock();
        w.extend(settled);
        while w.front().is_some_and(|f| now - f.applied_ns > self.window_ns) {
            w.pop_front();
        }
    }

    /// Cumulative histograms since start per source line (`Stream::index`), one per stage (in `STAGES` order).
    pub fn histograms(&self) -> [Vec<Histogram<u64>>; 3] {
        self.histograms.lock().clone()
    }

    /// Settled blocks applied in the window of wall time before `now`. Settles what is due first and drops what
    /// is older, so a server whose node went quiet reports an empty window instead of the minute before the
    /// silence (settling otherwise only happens when the publisher publishes).
    pub fn window(&self, now: i64) -> Vec<SettledLine> {
        self.settle(now);
        let mut w = self.window.lock();
        while w.front().is_some_and(|f| now - f.applied_ns > self.window_ns) {
            w.pop_front();
        }
        w.iter().copied().collect()
    }

    /// The window as `/status` and `/metrics` report it (see `Recent`).
    pub fn recent(&self, now: i64) -> Recent {
        let blocks = self.window(now);
        // A block is counted once, by the line that completes it.
        let complete = blocks.iter().filter(|f| f.line == Stream::Statuses);
        let (count, newest) = complete.fold((0, None), |(n, _), f| (n + 1, Some(f.applied_ns)));
        let newest_age_ns = newest.map(|t| now - t);
        Recent { blocks_per_sec: blocks_per_sec(count, self.window_ns), blocks, newest_age_ns }
    }
}

/// The last minute of wall time: its settled lines, the rate of blocks over the whole minute, and how old the newest
/// complete block is.
#[derive(Debug)]
pub struct Recent {
    pub blocks: Vec<SettledLine>,
    pub blocks_per_sec: f64,
    pub newest_age_ns: Option<i64>,
}

/// Blocks per second over a window of `window_ns`, to 2 decimals (a rate for people, not money).
#[allow(clippy::float_arithmetic)]
fn blocks_per_sec(blocks: usize, window_ns: i64) -> f64 {
    let per_sec = blocks as f64 * 1e9 / window_ns as f64;
    (per_sec * 100.0).round() / 100.0
}

/// One ring key per (block, line).
fn key(height: u64, line: Stream) -> u64 {
    height * 3 + line.index() as u64
}

fn finalize(e: &Entry) -> SettledLine {
    let t = *e.times.lock();
    let (first, last) = (e.first_sent.load(Relaxed), e.last_sent.load(Relaxed));
    let known = |v: i64| v > 0 && v != i64::MAX;
    // A line's frames become visible one channel at a time during the pass and `published` is stamped at its end,
    // so a connection can write some of them first: the line was published by its first write. Without this the
    // write stages clamp to 0 and the parts no longer add up to `block_to_last_write`.
    let published = e.published.load(Relaxed);
    let published = if known(first) { published.min(first) } else { published };
    let d = |a: i64, b: i64| (known(a) && known(b)).then(|| (b - a).max(0));
    SettledLine {
        height: t.height,
        line: t.line,
        applied_ns: t.applied,
        stages: [
            d(t.block_time, t.node_written),
            d(t.node_written, t.read),
            d(t.read, t.applied),
            d(t.applied, published),
            d(published, first),
            d(published, last),
            d(t.block_time, last),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_settles_into_every_stage() {
        let s = Stages::new();
        let line = Stream::Diffs;
        let t = LineTimes { height: 7, line, block_time: 1_000, node_written: 3_000, read: 3_500, applied: 3_600 };
        s.begin(t);
        s.sent(7, line, 4_200);
        s.published(7, line, 4_000);
        s.sent(7, line, 4_900);
        s.sent(8, line, 1); // not tracked: ignored
        s.sent(7, Stream::Fills, 1); // another line: not this entry's
        s.settle(4_000 + SETTLE_NS / 2);
        assert!(s.window(4_000 + SETTLE_NS / 2).is_empty(), "not settled yet");
        s.settle(4_000 + SETTLE_NS);
        let w = s.window(4_000 + SETTLE_NS);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].stages, [Some(2_000), Some(500), Some(100), Some(400), Some(200), Some(900), Some(3_900)]);
        assert_eq!(w[0].line, line);
        assert_eq!(s.histograms()[line.index()][1].len(), 1);
        assert_eq!(s.histograms()[Stream::Fills.index()][1].len(), 0);
    }

    #[test]
    fn each_line_of_a_block_settles_on_its_own() {
        let s = Stages::new();
        for (line, written) in [(Stream::Fills, 100), (Stream::Diffs, 150), (Stream::Statuses, 900)] {
            let t = LineTimes { height: 5, line, block_time: 10, node_written: written, read: written + 5, applied: 0 };
            s.begin(LineTimes { applied: written + 10, ..t });
            s.published(5, line, written + 20);
            s.sent(5, line, written + 30);
        }
        let w = s.window(2_000 + SETTLE_NS);
        let of = |l: Stream| w.iter().find(|f| f.line == l).unwrap().stages;
        assert_eq!(of(Stream::Fills)[..5], [Some(90), Some(5), Some(5), Some(10), Some(10)]);
        assert_eq!(of(Stream::Statuses)[6], Some(920));
        assert_eq!(of(Stream::Diffs)[6], Some(170));
    }

    #[test]
    fn a_write_before_the_pass_ends_counts_as_published_by_then() {
        let s = Stages::new();
        let line = Stream::Statuses;
        s.begin(LineTimes { height: 3, line, block_time: 100, node_written: 200, read: 210, applied: 220 });
        // A connection wrote the line's l4Book frame while the pass was still publishing other channels.
        s.sent(3, line, 400);
        s.sent(3, line, 450);
        s.published(3, line, 500);
        let w = s.window(500 + SETTLE_NS);
        let st = w[0].stages;
        assert_eq!(st, [Some(100), Some(10), Some(10), Some(180), Some(0), Some(50), Some(350)]);
        let parts: i64 = st[..4].iter().flatten().sum::<i64>() + st[5].unwrap();
        assert_eq!(Some(parts), st[6], "the stages add up to the whole");
    }

    #[test]
    fn blocks_nobody_received_have_no_write_stages() {
        let s = Stages::new();
        s.begin(LineTimes { height: 1, block_time: 10, node_written: 20, read: 30, applied: 40, ..Default::default() });
        s.published(1, Stream::Statuses, 50);
        s.settle(50 + SETTLE_NS);
        assert_eq!(s.window(50 + SETTLE_NS)[0].stages[4..], [None, None, None]);
    }

    #[test]
    fn the_window_ages_without_new_blocks() {
        let s = Stages::new();
        let sec = 1_000_000_000;
        for h in 1..=30u64 {
            let t = h as i64 * sec / 2; // two blocks a second for 15 s
            let line = Stream::Statuses;
            s.begin(LineTimes { height: h, line, block_time: t - 100, node_written: t - 50, read: t - 10, applied: t });
            s.published(h, line, t + 5);
        }
        // Nobody published since: reading the window settles the last block and ages the rest.
        let r = s.recent(16 * sec + 10);
        assert_eq!(r.blocks.len(), 30);
        assert_eq!(r.blocks_per_sec, 0.5, "30 blocks over the last minute");
        assert_eq!(r.newest_age_ns, Some(sec + 10));
        let r = s.recent(15 * sec + WINDOW_NS + 1);
        assert!(r.blocks.is_empty(), "a silent minute has no blocks: {r:?}");
        assert_eq!(r.blocks_per_sec, 0.0);
        assert_eq!(r.newest_age_ns, None);
    }

    #[test]
    fn a_shorter_window_ages_sooner_and_rates_over_itself() {
        let sec = 1_000_000_000;
        let mut s = Stages::new();
        s.set_window(10 * sec);
        for h in 1..=10u64 {
            let t = h as i64 * sec;
            let line = Stream::Statuses;
            s.begin(LineTimes { height: h, line, block_time: t - 100, node_written: t - 50, read: t - 10, applied: t });
            s.published(h, line, t + 5);
        }
        let r = s.recent(12 * sec);
        assert_eq!(r.blocks.len(), 9, "blocks 2..=10 (2 is exactly 10 s old): {r:?}");
        assert_eq!(r.blocks_per_sec, 0.9);
        assert!(s.recent(21 * sec).blocks.is_empty());
    }
}
