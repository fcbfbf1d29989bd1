//! Candles read back from the fills files the node keeps: a coin's current candle for a new `candle`
//! subscription, and `candleSnapshot`'s range.
//!
//! hlbook keeps no candle history; the node's hour files are the history. Reading is bounded: newest file first, at
//! most `BACKFILL_FILES` / `SNAPSHOT_FILES` files, stopping as soon as the files read reach back before the bucket
//! (or range) asked for; lines that do not mention the coin are skipped without parsing, and memory is one line
//! plus one candle per bucket. A bucket is complete when the oldest file read begins before it; where the files
//! do not reach back that far, the caller is told (`covered_from_ms`). Runs on a blocking thread.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use rustc_hash::FxHashSet;
use serde::Deserialize;
use serde::de::IgnoredAny;

use super::candles::{Candle, Interval, Trade, push};
use super::user_history::FillsDir;
use crate::node::paths::hour_files;
use crate::node::time::parse_node_time;
use crate::node::{Fixed, Stream};

/// Hour files a subscription's backfill reads at most: a day and an hour, so every interval up to 1d starts
/// complete when the node kept them (3d, 1w and 1M start from where the files begin).
pub const BACKFILL_FILES: usize = 25;
/// Hour files a `candleSnapshot` reads at most.
pub const SNAPSHOT_FILES: usize = 25;
/// Candles a `candleSnapshot` returns at most (the newest), as the official API.
pub const MAX_SNAPSHOT_CANDLES: usize = 5000;

#[derive(Deserialize)]
struct Line<'a> {
    block_number: u64,
    #[serde(borrow)]
    events: Vec<(IgnoredAny, FillLite<'a>)>,
}

#[derive(Deserialize)]
struct FillLite<'a> {
    #[serde(borrow)]
    coin: std::borrow::Cow<'a, str>,
    px: Fixed,
    sz: Fixed,
    time: i64,
    tid: u64,
}

#[derive(Deserialize)]
struct Head<'a> {
    block_time: &'a str,
}

/// Calls `each` with `coin`'s trades (one per tid) of the file's blocks below `before`, in order; returns the
/// block time (ms) of the file's first line, `None` for a file without one. `partial`: of block `before - 1`,
/// only these trades (streaming publishes a block's trades as their lines come: the rest of that block is
/// counted live).
fn scan(
    path: &Path,
    coin: &str,
    before: u64,
    partial: Option<&FxHashSet<u64>>,
    stop: &dyn Fn() -> bool,
    mut each: impl FnMut(Trade),
) -> Option<i64> {
    let file = File::open(path).ok()?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let needle = format!("\"coin\":{}", serde_json::Value::from(coin));
    let finder = memchr::memmem::Finder::new(needle.as_bytes());
    let (mut line, mut first, mut tids) = (Vec::new(), None, FxHashSet::default());
    let mut block = None;
    loop {
        if stop() {
            break;
        }
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        // A last line still being written has no newline yet: it is not read.
        if line.last() != Some(&b'\n') {
            break;
        }
        if first.is_none() {
            let head = serde_json::from_slice::<Head<'_>>(line.trim_ascii_end()).ok();
            first = head.and_then(|h| parse_node_time(h.block_time).ok()).map(|ns| ns.div_euclid(1_000_000));
        }
        if finder.find(&line).is_none() {
            continue;
        }
        let Ok(parsed) = serde_json::from_slice::<Line<'_>>(line.trim_ascii_end()) else { continue };
        if parsed.block_number >= before {
            break;
        }
        // A trade's two sides share its tid: in one line by-block, in two lines of one block in streaming mode.
        if block != Some(parsed.block_number) {
            (block, tids) = (Some(parsed.block_number), FxHashSet::default());
        }
        let cut = partial.filter(|_| parsed.block_number + 1 == before);
        for (_, f) in parsed.events.iter().filter(|(_, f)| f.coin == coin) {
            if cut.is_some_and(|p| !p.contains(&f.tid)) {
                continue;
            }
            if tids.insert(f.tid) {
                each(Trade { time: f.time, px: f.px, sz: f.sz });
            }
        }
    }
    first
}

/// A subscription's starting candle of one interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backfill {
    /// The coin's newest candle with trades in the files read, `None` if they hold none.
    pub candle: Option<Candle>,
    /// The files read hold every block from this time (ms) on: a bucket that opened before it may miss trades.
    pub covered_from_ms: i64,
}

/// Per interval, `coin`'s newest candle in blocks below `before`, read from the newest hour files back until they
/// begin before that candle's bucket.
pub fn latest(
    dir: &FillsDir,
    coin: &str,
    intervals: &[Interval],
    before: u64,
    partial: Option<&FxHashSet<u64>>,
) -> Vec<Backfill> {
    let files = hour_files(&dir.node_dir, dir.mode, Stream::Fills).unwrap_or_default();
    let mut out: Vec<Backfill> =
        intervals.iter().map(|_| Backfill { candle: None, covered_from_ms: i64::MAX }).collect();
    let mut done = vec![false; intervals.len()];
    for f in files.iter().rev().take(BACKFILL_FILES) {
        let mut parts: Vec<Option<Candle>> = vec![None; intervals.len()];
        let first = scan(&f.path, coin, before, partial, &|| false, |tr| {
            for (k, i) in intervals.iter().enumerate().filter(|(k, _)| !done[*k]) {
                match out[k].candle {
                    // The bucket is known (found in a newer file): only its own trades count.
                    Some(later) if i.bucket(tr.time).0 == later.t => {
                        push(&mut parts[k], *i, tr);
                    }
                    Some(_) => {}
                    // The newest bucket of this file: a later one replaces the running candle.
                    None => {
                        push(&mut parts[k], *i, tr);
                    }
                }
            }
        });
        let first = first.unwrap_or(i64::MAX);
        for k in 0..intervals.len() {
            if done[k] {
                continue;
            }
            let b = &mut out[k];
            b.candle = match (parts[k], b.candle) {
                (Some(p), Some(later)) => Some(p.merged(later)),
                (p, later) => later.or(p),
            };
            b.covered_from_ms = b.covered_from_ms.min(first);
            done[k] = b.candle.is_some_and(|c| first < c.t);
        }
        if done.iter().all(|d| *d) {
            break;
        }
    }
    out
}

/// `coin`'s candles of the buckets from the one holding `start_ms` to the one holding `end_ms`, ascending, the
/// newest `max` of them, each complete: a bucket that opened before the files read begin is left out. `None`
/// once `stop` says nobody wants them any more (asked every line).
pub fn between(
    dir: &FillsDir,
    coin: &str,
    interval: Interval,
    (start_ms, end_ms): (i64, i64),
    max: usize,
    stop: &dyn Fn() -> bool,
) -> Option<Vec<Candle>> {
    let files = hour_files(&dir.node_dir, dir.mode, Stream::Fills).unwrap_or_default();
    let (lo, hi) = (interval.bucket(start_ms).0, interval.bucket(end_ms).0);
    let mut acc: BTreeMap<i64, Candle> = BTreeMap::new();
    let mut covered_from = i64::MAX;
    for f in files.iter().rev().take(SNAPSHOT_FILES) {
        let mut part: BTreeMap<i64, Option<Candle>> = BTreeMap::new();
        let first = scan(&f.path, coin, u64::MAX, None, stop, |tr| {
            let t = interval.bucket(tr.time).0;
            if (lo..=hi).contains(&t) {
                push(part.entry(t).or_default(), interval, tr);
            }
        });
        if stop() {
            return None;
        }
        for (t, c) in part.into_iter().filter_map(|(t, c)| Some((t, c?))) {
            let whole = acc.get(&t).map_or(c, |later| c.merged(*later));
            acc.insert(t, whole);
        }
        covered_from = covered_from.min(first.unwrap_or(i64::MAX));
        // Done once the files reach back before the range, or before the oldest of the newest `max` buckets.
        let oldest_needed = acc.keys().rev().nth(max.saturating_sub(1)).copied().unwrap_or(lo).max(lo);
        if covered_from < oldest_needed {
            break;
        }
    }
    let complete: Vec<Candle> = acc.into_values().filter(|c| covered_from < c.t).collect();
    let cut = complete.len().saturating_sub(max);
    Some(complete[cut..].to_vec())
}

#[cfg(test)]
#[path = "candle_history_tests.rs"]
mod tests;
