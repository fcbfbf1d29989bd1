//! How long the node takes to write one block's lines: its processing span.
//!
//! A real node writes a block's streaming lines as it executes the block, spread over the span, then waits for the
//! next block (the gap). On the mainnet capture (`local_time` of every line of 51 blocks, all three streams) the
//! span's deciles are below, in ms (a block with one line has a span of 0): p50 14.7, max 43.0. The gap after
//! it is what is left of the block interval. The simulator draws each block's span from these deciles, writes
//! streaming runs of lines spread over it, and writes by-block lines at its end, so the two modes can be compared
//! on one workload.

use std::time::{Duration, Instant};

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

/// Deciles (p0, p10, ..., p100) of the capture's block spans, in µs.
const SPAN_DECILES_US: [u64; 11] = [0, 9_000, 10_500, 11_600, 12_800, 14_700, 16_900, 18_300, 24_200, 28_800, 43_000];

/// Draws block spans; `None` spans nothing (`--block-ms 0`, or `--burst`).
#[derive(Debug)]
pub struct Spans {
    rng: Xoshiro256PlusPlus,
    /// A span never takes more than this share of the block interval, so blocks keep their cadence.
    cap: Duration,
}

impl Spans {
    /// Spans for blocks `block_ms` apart (at most 60% of it).
    pub fn new(block_ms: u64, seed: u64) -> Option<Spans> {
        (block_ms > 0).then(|| Spans {
            rng: Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x5ba2),
            cap: Duration::from_micros(block_ms * 600),
        })
    }

    /// The next block's span: a uniform draw between two neighbouring deciles.
    pub fn draw(&mut self) -> Duration {
        let at: u64 = self.rng.random_range(0..10_000);
        let (i, within) = ((at / 1000) as usize, at % 1000);
        let (lo, hi) = (SPAN_DECILES_US[i], SPAN_DECILES_US[i + 1]);
        Duration::from_micros(lo + (hi - lo) * within / 1000).min(self.cap)
    }
}

/// Sleeps until `start + span * part / parts`: the moment the `part`-th of `parts` pieces of a block is written.
pub fn wait_for_part(start: Instant, span: Duration, part: usize, parts: usize) {
    if parts == 0 {
        return;
    }
    let due = start + span * part as u32 / parts as u32;
    if let Some(wait) = due.checked_duration_since(Instant::now()) {
        std::thread::sleep(wait);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_follow_the_captures_deciles_and_the_cap() {
        let mut s = Spans::new(80, 7).unwrap();
        let mut v: Vec<u128> = (0..2000).map(|_| s.draw().as_micros()).collect();
        v.sort_unstable();
        let (p50, max) = (v[1000], v[1999]);
        assert!((12_800..=16_900).contains(&p50), "p50 {p50} µs");
        assert!(max <= 43_000 && max > 28_800, "max {max} µs");
        let mut short = Spans::new(20, 7).unwrap();
        assert!((0..200).all(|_| short.draw() <= Duration::from_millis(12)), "capped at 60% of 20 ms");
        assert!(Spans::new(0, 7).is_none());
    }
}
