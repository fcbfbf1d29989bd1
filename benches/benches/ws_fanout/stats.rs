//! After the run, in the client process: joins every frame with the simulator's timing CSV and summarizes.
//!
//! A frame's latency is its receive time minus the time the simulator finished writing the last line of the
//! frame's block (its status line: the reference), and also minus the write of the line the frame is built from
//! (l2Book: the diffs line, trades: the fills line), which is what the server waits for since issue #16. The last-subscriber latency of block H is, over all connections, the latest time at which a
//! connection got its first l2Book frame of height ≥ H (a connection whose frame for H was conflated into a later
//! one is counted when that later one arrives), minus H's write time.

use std::collections::{HashMap, HashSet};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::client::{ConnLog, L2, Spec, TRADES, USER_FILLS};

/// Blocks written in the last second of the window are left out of last-subscriber latency: their frames may
/// still be on the way when the client stops.
const TAIL_NS: i64 = 1_000_000_000;

/// Percentiles in µs, with the sample count.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct Pct {
    pub n: u64,
    pub p50: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

impl Pct {
    fn of(h: &Histogram<u64>) -> Pct {
        Pct {
            n: h.len(),
            p50: h.value_at_quantile(0.5),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
        }
    }
}

/// What the client reports to the parent, one JSON line.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ClientResult {
    pub window_ns: i64,
    /// Data frames (l2Book + trades) received in the window, by timed connections and by sinks.
    pub frames: u64,
    pub sink_frames: u64,
    pub timed_conns: u64,
    pub all: Pct,
    pub l2: Pct,
    pub trades: Pct,
    /// l2Book from its block's diffs line's write; trades from the fills line's.
    pub l2_from_diffs: Pct,
    pub trades_from_fills: Pct,
    /// With audit, from the line's `local_time` (stamped before its write begins): the same two, measured from a
    /// time the server cannot run ahead of. A woken server thread can preempt the simulator between its write's
    /// return and its clock read, which makes the two above look shorter than they were.
    #[serde(default)]
    pub l2_from_line_start: Pct,
    #[serde(default)]
    pub trades_from_line_start: Pct,
    /// With audit: the server's socket write → this client's read, over every frame (the loopback and the
    /// client's own scheduling, which the server's stages cannot see).
    pub wire: Pct,
    /// userFills frames from their block's last line's write, and from its fills line's.
    #[serde(default)]
    pub user_fills: Pct,
    #[serde(default)]
    pub user_fills_from_fills: Pct,
    /// With audit, userFills from the fills line's `local_time`, as `trades_from_line_start`.
    #[serde(default)]
    pub user_fills_from_line_start: Pct,
    pub last_sub: Pct,
    /// Blocks written in the window with no l2Book frame of their own height (merged into a later publish pass,
    /// or nothing changed on the coins): their last-subscriber latency runs until the next frame.
    pub blocks_without_l2: u64,
    /// (connection, block) pairs where the connection never got an l2Book frame of that height or later.
    pub never_caught_up: u64,
    /// Frames whose block is not in the timing CSV.
    pub unjoined: u64,
    pub unparsed: u64,
    pub errors: u64,
    pub closed_early: u64,
}

/// One block's times from the simulator's `--timing` CSV (ns).
#[derive(Clone, Copy, Debug)]
pub struct Written {
    pub block_time: i64,
    pub fills: i64,
    pub diffs: i64,
    /// The block's last line (its status line).
    pub last: i64,
}

/// Height → its times, from the simulator's `--timing` CSV (columns found by name).
pub fn timing(path: &str) -> HashMap<u64, Written> {
    let text = std::fs::read_to_string(path).expect("timing csv");
    let mut rows = text.lines();
    let header: Vec<&str> = rows.next().unwrap_or_default().split(',').collect();
    let col = |name: &str| header.iter().position(|c| *c == name).expect("a timing column");
    let (bt, fills, diffs, last) =
        (col("block_time_ns"), col("fills_written_ns"), col("diffs_written_ns"), col("last_written_ns"));
    let mut out = HashMap::new();
    for row in rows {
        let f: Vec<i64> = row.split(',').filter_map(|x| x.parse().ok()).collect();
        if f.len() == header.len() {
            let w = Written { block_time: f[bt], fills: f[fills], diffs: f[diffs], last: f[last] };
            out.insert(f[0] as u64, w);
        }
    }
    out
}

fn hist() -> Histogram<u64> {
    Histogram::new(3).expect("histogram")
}

fn us(ns: i64) -> u64 {
    (ns.max(0) / 1000) as u64
}

pub fn summarize(spec: &Spec, logs: &[ConnLog], t0: i64, t1: i64, sink_frames: u64) -> ClientResult {
    let blocks = timing(&spec.timing);
    // Without audit a frame names its block by time (ms); block times are tens of ms apart, so that is unique.
    let by_time: HashMap<u64, u64> = blocks.iter().map(|(&h, w)| ((w.block_time / 1_000_000) as u64, h)).collect();
    let height =
        |key: u64| if spec.audit { Some(key).filter(|h| blocks.contains_key(h)) } else { by_time.get(&key).copied() };
    let mut r = ClientResult { window_ns: t1 - t0, frames: sink_frames, sink_frames, ..ClientResult::default() };
    let (mut all, mut l2, mut trades) = (hist(), hist(), hist());
    let (mut l2_diffs, mut trades_fills, mut wire) = (hist(), hist(), hist());
    let (mut l2_start, mut trades_start) = (hist(), hist());
    let (mut users, mut users_fills, mut users_start) = (hist(), hist(), hist());
    // Blocks for last-subscriber latency: written in the window, early enough for every frame to arrive.
    let measured: Vec<u64> = {
        let mut v: Vec<u64> =
            blocks.iter().filter(|&(_, w)| w.last >= t0 && w.last <= t1 - TAIL_NS).map(|(&h, _)| h).collect();
        v.sort_unstable();
        v
    };
    let (lo, hi) = (measured.first().copied().unwrap_or(1), measured.last().copied().unwrap_or(0));
    let span = (hi + 1).saturating_sub(lo) as usize;
    let mut last = vec![i64::MIN; span];
    let mut published = HashSet::new();
    for log in logs {
        r.unparsed += log.unparsed;
        r.errors += log.errors;
        r.closed_early += u64::from(log.closed_early);
        let mut reached = 0u64;
        for rec in &log.recs {
            let Some(h) = height(rec.key) else {
                r.unjoined += 1;
                continue;
            };
            if rec.recv_ns >= t0 && rec.recv_ns <= t1 {
                let w = blocks[&h];
                let lat = us(rec.recv_ns - w.last);
                r.frames += 1;
                all.record(lat).expect("record");
                if rec.sent_ns > 0 {
                    wire.record(us(rec.recv_ns - rec.sent_ns)).expect("record");
                }
                match rec.channel {
                    L2 => {
                        l2.record(lat).expect("record");
                        l2_diffs.record(us(rec.recv_ns - w.diffs)).expect("record");
                        if rec.node_ns > 0 {
                            l2_start.record(us(rec.recv_ns - rec.node_ns)).expect("record");
                        }
                    }
                    TRADES => {
                        trades.record(lat).expect("record");
                        trades_fills.record(us(rec.recv_ns - w.fills)).expect("record");
                        if rec.node_ns > 0 {
                            trades_start.record(us(rec.recv_ns - rec.node_ns)).expect("record");
                        }
                    }
                    USER_FILLS => {
                        users.record(lat).expect("record");
                        users_fills.record(us(rec.recv_ns - w.fills)).expect("record");
                        if rec.node_ns > 0 {
                            users_start.record(us(rec.recv_ns - rec.node_ns)).expect("record");
                        }
                    }
                    _ => {}
                }
            }
            if rec.channel != L2 {
                continue;
            }
            published.insert(h);
            // Every block in (reached, h] is first covered by this frame.
            let from = (reached + 1).max(lo);
            let to = h.min(hi);
            for b in from..=to {
                let slot = &mut last[(b - lo) as usize];
                *slot = (*slot).max(rec.recv_ns);
            }
            reached = reached.max(h);
        }
        if !log.timed {
            continue;
        }
        r.timed_conns += 1;
        r.never_caught_up += hi.saturating_sub(reached.max(lo - 1));
    }
    let mut last_sub = hist();
    for (i, &at) in last.iter().enumerate() {
        let h = lo + i as u64;
        if !blocks.contains_key(&h) {
            continue;
        }
        // A block merged into a later publish pass has no frame of its own: it counts until that later frame.
        r.blocks_without_l2 += u64::from(!published.contains(&h));
        if at != i64::MIN {
            last_sub.record(us(at - blocks[&h].last)).expect("record");
        }
    }
    (r.all, r.l2, r.trades, r.last_sub) = (Pct::of(&all), Pct::of(&l2), Pct::of(&trades), Pct::of(&last_sub));
    (r.l2_from_diffs, r.trades_from_fills) = (Pct::of(&l2_diffs), Pct::of(&trades_fills));
    r.wire = Pct::of(&wire);
    (r.l2_from_line_start, r.trades_from_line_start) = (Pct::of(&l2_start), Pct::of(&trades_start));
    (r.user_fills, r.user_fills_from_fills) = (Pct::of(&users), Pct::of(&users_fills));
    r.user_fills_from_line_start = Pct::of(&users_start);
    r
}
