//! What a source may feed ingest, and what happens to a line past a limit: how long a line may be, how far ahead of
//! the books its height may be, and how many later blocks racing may park while it waits for an earlier one.
//!
//! Each limit bounds what a broken or hostile source (a node writing garbage, a NATS stream or anything publishing into it)
//! can make hlbook buffer or do; each default sits far above anything a healthy node writes. A line past a limit is
//! refused, counted and logged with its source; nothing is guessed: a refused line a block needed is a lost line,
//! and the books resync from a snapshot (or another racing source supplies it).

use crate::node::Stream;

/// Longest line taken from any source. The mainnet capture's longest is 0.9 MB (a BTC-only status line); whole-market
/// status lines reach several MB (7.7 MB observed).
pub const MAX_LINE_BYTES: usize = 64 << 20;
/// How far past the last block handed out a line's height may be. Blocks are 70-100 ms apart, so 10,000 is a
/// quarter of an hour of blocks: no source that follows the chain jumps that far.
pub const MAX_HEIGHT_JUMP: u64 = 10_000;
/// Racing: later blocks that may wait for a missing earlier one before it is given up (about 20 s of blocks).
pub const RACE_MAX_PARKED_BLOCKS: usize = 256;
/// Bytes of lines held for blocks not whole yet. A healthy node's streams are within a block or two of each other
/// (tens of MB with whole-market status lines), and so is a NATS stream's history, which the relay publishes in
/// step (`nats::publish::MAX_LEAD_BLOCKS`); a stream that runs `max_height_jump` blocks ahead of another would
/// otherwise park every line it wrote meanwhile.
pub const MAX_PENDING_BYTES: usize = 1 << 30;

/// The limits ingest applies to its sources (`ingest.max_line_bytes`, `ingest.max_height_jump`,
/// `ingest.race_max_parked_blocks`, `ingest.max_pending_bytes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_line_bytes: usize,
    pub max_height_jump: u64,
    pub race_max_parked_blocks: usize,
    pub max_pending_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_line_bytes: MAX_LINE_BYTES,
            max_height_jump: MAX_HEIGHT_JUMP,
            race_max_parked_blocks: RACE_MAX_PARKED_BLOCKS,
            max_pending_bytes: MAX_PENDING_BYTES,
        }
    }
}

impl Limits {
    /// A line of block `height` is implausibly far ahead of `emitted`, the last block handed out.
    pub fn too_far_ahead(&self, height: u64, emitted: u64) -> bool {
        height > emitted.saturating_add(self.max_height_jump)
    }

    /// Logs a line refused for its length (`bytes`: its length, or what of it had come when it was refused).
    pub fn log_too_long(&self, source: &str, stream: Stream, height: Option<u64>, bytes: u64) {
        tracing::error!(
            source,
            %stream,
            height,
            bytes,
            "a line of {bytes} bytes, over ingest.max_line_bytes ({}); refused",
            self.max_line_bytes
        );
    }

    /// Logs a line refused for its height.
    pub fn log_too_far(&self, source: &str, stream: Stream, height: u64, emitted: u64) {
        tracing::error!(
            source,
            %stream,
            height,
            "a line of block {height}, {} blocks past block {emitted}, over ingest.max_height_jump ({}); refused",
            height - emitted,
            self.max_height_jump
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_height_is_too_far_only_past_the_jump() {
        let l = Limits { max_height_jump: 10, ..Limits::default() };
        assert!(!l.too_far_ahead(110, 100));
        assert!(l.too_far_ahead(111, 100));
        assert!(!l.too_far_ahead(5, 100), "behind is not ahead");
        assert!(!Limits { max_height_jump: u64::MAX, ..l }.too_far_ahead(u64::MAX, 100), "no overflow");
    }
}
