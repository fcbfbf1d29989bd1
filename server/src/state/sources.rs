//! What operators see of each source ingest reads, and of the race between them: the `SourceBoard` behind the
//! per-source part of `/health`, `/status` and `/metrics` (height, lag behind the leading source, state, lines,
//! and, when several sources race, which one won each line and by how much it led the next).
//!
//! It lives in the state because ingest writes it and audit reads it. Written with relaxed atomics by whichever
//! thread reads the source (its reader thread, or the ingest thread itself with one source) and read by anyone;
//! the lead histograms and the per-block record sit behind short mutexes touched once per line.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use serde_json::{Value, json};

use super::counter::Counter;
use crate::node::Stream;
use crate::node::time::now_nanos;

/// A source that gave no line for this long is `silent`.
const SILENT_NS: i64 = 2_000_000_000;
/// A source more than this many blocks below the leading one is `behind`.
const BEHIND_BLOCKS: u64 = 2;
/// Blocks whose race outcome `/status` shows.
pub const RACE_BLOCKS: usize = 64;
/// Disagreements `/status` shows (the last ones).
pub const DISAGREEMENTS_KEPT: usize = 16;

/// One source as operators see it.
#[derive(Debug)]
pub struct SourceEntry {
    pub name: String,
    /// Highest block height it delivered a line of.
    height: AtomicU64,
    last_line_at: AtomicI64,
    pub lines: Counter,
    pub malformed: Counter,
    /// Lines refused: longer than `ingest.max_line_bytes`, or further ahead than `ingest.max_height_jump`.
    pub refused: Counter,
    /// Lines another source had already delivered: compared and dropped.
    pub copies: Counter,
    /// Lines whose copies from this source and another differed (counted on both: neither is known to be wrong).
    pub disagreements: Counter,
    pub restarts: Counter,
    /// Lines of each stream (`Stream::index`) this source delivered first.
    wins: [AtomicU64; 3],
    /// Per stream: how long before the next source this source delivered the lines it won (ns).
    leads: Mutex<[Histogram<u64>; 3]>,
    problem: Mutex<Option<String>>,
}

fn lead_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1_000, 600_000_000_000, 2).unwrap_or_else(|_| Histogram::new(2).expect("histogram"))
}

impl SourceEntry {
    fn new(name: String) -> SourceEntry {
        SourceEntry {
            name,
            height: AtomicU64::new(0),
            last_line_at: AtomicI64::new(0),
            lines: Counter::default(),
            malformed: Counter::default(),
            refused: Counter::default(),
            copies: Counter::default(),
            disagreements: Counter::default(),
            restarts: Counter::default(),
            wins: Default::default(),
            leads: Mutex::new([lead_histogram(), lead_histogram(), lead_histogram()]),
            problem: Mutex::new(None),
        }
    }

    /// A line of block `height` arrived.
    pub fn line(&self, height: u64) {
        self.lines.inc();
        self.height.fetch_max(height, Relaxed);
    }

    /// Lines arrived at `at` (once per read, not per line: streaming blocks have thousands).
    pub fn touch(&self, at: i64) {
        self.last_line_at.store(at, Relaxed);
    }

    pub fn height(&self) -> u64 {
        self.height.load(Relaxed)
    }

    /// After a restart or a resync the source is re-read from `height`.
    pub fn reset_height(&self, height: u64) {
        self.height.store(height, Relaxed);
    }

    pub fn wins(&self, stream: Stream) -> u64 {
        self.wins[stream.index()].load(Relaxed)
    }

    pub fn won(&self, stream: Stream) {
        self.wins[stream.index()].fetch_add(1, Relaxed);
    }

    pub fn led(&self, stream: Stream, lead_ns: i64) {
        let _ = self.leads.lock()[stream.index()].record(lead_ns.max(1_000) as u64);
    }

    /// Copies of the lead histograms (stream-indexed), for `/metrics`.
    pub fn leads(&self) -> [Histogram<u64>; 3] {
        self.leads.lock().clone()
    }

    /// Records what the source lacks (`None`: nothing), logging each change once.
    pub fn set_problem(&self, problem: Option<String>) {
        let mut p = self.problem.lock();
        if *p == problem {
            return;
        }
        if let Some(why) = &problem {
            tracing::warn!(source = %self.name, "source gives no lines: {why}");
        } else {
            tracing::info!(source = %self.name, "source delivers lines again");
        }
        *p = problem;
    }

    pub fn problem(&self) -> Option<String> {
        self.problem.lock().clone()
    }

    /// `reading`, `behind` (more than two blocks below the leader), `silent` (no line for 2 s) or `unavailable`
    /// (it says what is missing).
    pub fn state(&self, leader: u64, now: i64) -> &'static str {
        let silent = now - self.last_line_at.load(Relaxed) > SILENT_NS;
        if silent && self.problem.lock().is_some() {
            "unavailable"
        } else if silent {
            "silent"
        } else if leader.saturating_sub(self.height()) > BEHIND_BLOCKS {
            "behind"
        } else {
            "reading"
        }
    }
}

/// One block's race: per line, the winning source (index) and its lead over the next one (ns), once known.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RaceRecord {
    pub height: u64,
    pub lines: [Option<(usize, Option<i64>)>; 3],
}

/// Two sources' copies of one line differed: both are named, neither is blamed (the coins are repaired from a
/// node snapshot, which says who was right).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Disagreement {
    pub height: u64,
    pub stream: Stream,
    /// The source whose copy was applied first, and the one whose copy differed.
    pub sources: [String; 2],
    pub coins: Vec<String>,
}

/// Every source's entry, the race record of the last blocks, and the last disagreements.
#[derive(Debug, Default)]
pub struct SourceBoard {
    entries: Mutex<Vec<Arc<SourceEntry>>>,
    recent: Mutex<VecDeque<RaceRecord>>,
    disagreements: Mutex<VecDeque<Disagreement>>,
}

impl SourceBoard {
    /// Adds a source; returns its entry (its index is its place in `entries`).
    pub fn add(&self, name: String) -> Arc<SourceEntry> {
        let e = Arc::new(SourceEntry::new(name));
        self.entries.lock().push(e.clone());
        e
    }

    pub fn entries(&self) -> Vec<Arc<SourceEntry>> {
        self.entries.lock().clone()
    }

    /// Whether several sources race.
    pub fn racing(&self) -> bool {
        self.entries.lock().len() > 1
    }

    /// Source `src` delivered line `stream` of block `height` first.
    pub fn record_win(&self, height: u64, stream: Stream, src: usize) {
        let mut r = self.recent.lock();
        if r.back().is_none_or(|b| b.height < height) {
            if r.len() == RACE_BLOCKS {
                r.pop_front();
            }
            r.push_back(RaceRecord { height, ..RaceRecord::default() });
        }
        if let Some(rec) = r.iter_mut().rev().find(|b| b.height == height) {
            rec.lines[stream.index()] = Some((src, None));
        }
    }

    /// The first copy of a won line arrived `lead_ns` after the winner's.
    pub fn record_lead(&self, height: u64, stream: Stream, lead_ns: i64) {
        let mut r = self.recent.lock();
        if let Some(rec) = r.iter_mut().rev().find(|b| b.height == height)
            && let Some((_, lead)) = &mut rec.lines[stream.index()]
        {
            lead.get_or_insert(lead_ns);
        }
    }

    pub fn record_disagreement(&self, d: Disagreement) {
        let mut q = self.disagreements.lock();
        if q.len() == DISAGREEMENTS_KEPT {
            q.pop_front();
        }
        q.push_back(d);
    }

    pub fn disagreements(&self) -> Vec<Disagreement> {
        self.disagreements.lock().iter().cloned().collect()
    }

    /// The last disagreements, for `/status`.
    pub fn disagreements_json(&self) -> Value {
        self.disagreements()
            .iter()
            .map(|d| json!({"height": d.height, "line": d.stream.short(), "sources": d.sources, "coins": d.coins}))
            .collect()
    }

    pub fn recent(&self) -> Vec<RaceRecord> {
        self.recent.lock().iter().cloned().collect()
    }

    /// The per-source part of `/health` and `/status`.
    pub fn to_json(&self) -> Value {
        let entries = self.entries();
        let leader = entries.iter().map(|e| e.height()).max().unwrap_or(0);
        let now = now_nanos();
        entries
            .iter()
            .map(|e| {
                let wins: serde_json::Map<String, Value> =
                    Stream::ALL.into_iter().map(|s| (s.short().to_string(), json!(e.wins(s)))).collect();
                let leads = e.leads();
                let lead_ms: serde_json::Map<String, Value> = Stream::ALL
                    .into_iter()
                    .map(|s| {
                        let h = &leads[s.index()];
                        let ms = |q: f64| h.value_at_quantile(q) / 1_000_000;
                        let v = if h.is_empty() {
                            Value::Null
                        } else {
                            json!({"count": h.len(), "p50": ms(0.5), "p90": ms(0.9), "p99": ms(0.99), "max": h.max() / 1_000_000})
                        };
                        (s.short().to_string(), v)
                    })
                    .collect();
                let last = e.last_line_at.load(Relaxed);
                json!({
                    "name": e.name,
                    "state": e.state(leader, now),
                    "height": e.height(),
                    "lag_blocks": leader.saturating_sub(e.height()),
                    "last_line_age_ms": (last > 0).then(|| (now - last) / 1_000_000),
                    "missing": e.problem(),
                    "lines": e.lines.get(),
                    "malformed_lines": e.malformed.get(),
                    "refused_lines": e.refused.get(),
                    "copies": e.copies.get(),
                    "disagreements": e.disagreements.get(),
                    "restarts": e.restarts.get(),
                    "wins": wins,
                    "lead_ms": lead_ms,
                })
            })
            .collect()
    }

    /// The race record of the last blocks, for `/status`: per block and line, the winner's name and its lead.
    pub fn recent_json(&self) -> Value {
        let names: Vec<String> = self.entries().iter().map(|e| e.name.clone()).collect();
        self.recent()
            .iter()
            .map(|r| {
                let mut o = serde_json::Map::new();
                o.insert("height".into(), json!(r.height));
                for s in Stream::ALL {
                    if let Some((src, lead)) = r.lines[s.index()] {
                        let lead_us = lead.map(|ns| ns / 1_000);
                        o.insert(s.short().into(), json!({"source": names.get(src), "lead_us": lead_us}));
                    }
                }
                Value::Object(o)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_and_race_records() {
        let board = SourceBoard::default();
        let (a, b) = (board.add("file:a".into()), board.add("file:b".into()));
        let now = now_nanos();
        a.line(10);
        b.line(6);
        a.touch(now);
        b.touch(now);
        assert_eq!((a.state(10, now), b.state(10, now)), ("reading", "behind"));
        assert_eq!(b.state(10, now + 3 * SILENT_NS), "silent");
        b.set_problem(Some("NATS out of reach".into()));
        assert_eq!(b.state(10, now + 3 * SILENT_NS), "unavailable");
        board.record_win(10, Stream::Fills, 0);
        board.record_win(10, Stream::Diffs, 1);
        board.record_lead(10, Stream::Fills, 5_000_000);
        board.record_lead(10, Stream::Fills, 9_000_000);
        let r = board.recent();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].lines, [Some((0, Some(5_000_000))), Some((1, None)), None]);
        assert_eq!(board.to_json()[1]["missing"], "NATS out of reach");
    }
}
