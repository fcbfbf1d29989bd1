//! Fault injection: the ways a real node's output goes wrong, as pure decisions and byte edits the writer and
//! producer apply at chosen heights.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::cli::{DropStream, SimArgs};
use crate::node::Stream;

#[derive(Clone, Debug, Default)]
pub struct Faults {
    pub stop_mid_line_at: Option<u64>,
    pub pause_at: Option<u64>,
    pub pause: Duration,
    pub restart_at: Option<u64>,
    pub restart_back: u64,
    pub drop: Option<(u64, DropStream)>,
    pub corrupt_at: Option<u64>,
    /// Write this block's diffs line with one price changed: a node whose events differ from the others'.
    pub differ_at: Option<u64>,
    /// Held between stamping a delayed block's last line and writing it.
    pub delay_last_line: Duration,
    pub delay_every: u64,
    /// `--hold-last-line-until`: the file whose height releases a delayed block's last line.
    pub hold_until: Option<PathBuf>,
}

impl Faults {
    pub fn from_args(a: &SimArgs) -> Faults {
        Faults {
            stop_mid_line_at: a.stop_mid_line_at,
            pause_at: a.pause_at,
            pause: Duration::from_secs(a.pause_secs),
            restart_at: a.restart_at,
            restart_back: a.restart_back.max(1),
            drop: a.drop_block.map(|h| (h, a.drop_stream)),
            corrupt_at: a.corrupt_at,
            differ_at: a.differ_at,
            delay_last_line: Duration::try_from_secs_f64(a.delay_last_line_ms).unwrap_or_default() / 1000,
            delay_every: a.delay_every.max(1),
            hold_until: a.hold_last_line_until.clone(),
        }
    }

    /// How long block `height`'s last line is held after its `local_time` was stamped.
    pub fn last_line_delay(&self, height: u64) -> Option<Duration> {
        (!self.delay_last_line.is_zero() && height % self.delay_every == 0).then_some(self.delay_last_line)
    }

    /// The file that releases block `height`'s last line, when it is a delayed block and there is one.
    pub fn last_line_gate(&self, height: u64) -> Option<&Path> {
        self.hold_until.as_deref().filter(|_| height % self.delay_every == 0)
    }

    pub fn drops(&self, height: u64, stream: Stream) -> bool {
        self.drop.is_some_and(|(h, d)| h == height && d.covers(stream))
    }

    /// Whether block `height`'s lines must be kept for a later re-emission.
    pub fn records(&self, height: u64) -> bool {
        self.restart_at.is_some_and(|r| height <= r && height + self.restart_back > r)
    }
}

/// Waits `d` precisely: sleeps all but the last millisecond and spins that, so the delay is the one asked for, not
/// the sleep's timer slack on top of it.
pub fn hold(d: Duration) {
    let deadline = std::time::Instant::now() + d;
    if let Some(coarse) = d.checked_sub(Duration::from_millis(1)) {
        std::thread::sleep(coarse);
    }
    while std::time::Instant::now() < deadline {
        std::hint::spin_loop();
    }
}

/// Waits until `gate` holds a height at or above `height` (read every millisecond); a missing file holds nothing.
pub fn wait_released(gate: &Path, height: u64) {
    loop {
        match std::fs::read_to_string(gate) {
            Err(_) => return,
            Ok(s) if s.trim().parse::<u64>().is_ok_and(|r| r >= height) => return,
            Ok(_) => std::thread::sleep(Duration::from_millis(1)),
        }
    }
}

/// Corrupts a line in place, keeping its trailing newline: drops one `}` and garbles bytes in the middle.
pub fn corrupt(line: &mut Vec<u8>) {
    let body = line.len().saturating_sub(1);
    if let Some(i) = line[..body].iter().rposition(|&b| b == b'}') {
        line.remove(i);
    }
    let mid = line.len() / 2;
    let end = (mid + 8).min(line.len().saturating_sub(1));
    for b in &mut line[mid..end] {
        *b = b'#';
    }
}

/// Changes the first digit of the line's first `"px"` value (1→2, …, 9→1): still valid JSON and a valid price, but
/// not the event the other nodes wrote.
pub fn differ(line: &mut [u8]) {
    const KEY: &[u8] = b"\"px\":\"";
    if let Some(at) = memchr::memmem::find(line, KEY)
        && let Some(d) = line.get_mut(at + KEY.len()).filter(|d| d.is_ascii_digit())
    {
        *d = b'1' + (*d - b'0') % 9;
    }
}

/// The first half of a line: what a node killed mid-write leaves behind (never its newline).
pub fn fragment(line: &[u8]) -> &[u8] {
    &line[..line.len() / 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corrupt_line_stays_a_line_but_is_not_json() {
        let mut line = br#"{"a":{"b":[1,2,3,4,5,6,7,8,9,10,11,12]}}"#.to_vec();
        line.push(b'\n');
        corrupt(&mut line);
        assert_eq!(line.last(), Some(&b'\n'));
        assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
        assert!(serde_json::from_slice::<serde_json::Value>(&line).is_err());
        assert_eq!(fragment(b"abcdef"), b"abc");
        let mut line = br#"{"events":[{"coin":"BTC","px":"91000.0"},{"px":"5.0"}]}"#.to_vec();
        differ(&mut line);
        assert_eq!(line, br#"{"events":[{"coin":"BTC","px":"11000.0"},{"px":"5.0"}]}"#.to_vec());
    }
}
