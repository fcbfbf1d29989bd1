//! Several simulated nodes writing the same blocks (`--node DIR,key=value,...`, and `--write-delay` for the
//! `--out` node): what an operator running two nodes sees. Every node writes every produced block into its own
//! data dir, each after its own write delay (fixed, or drawn per block from the mainnet capture's node lag), and
//! with its own faults (pause, restart, a dropped, corrupt or differing line), so hlbook can race them.
//!
//! A delayed node has a writer thread of its own fed with the produced blocks in order; a node writes its blocks
//! in height order, so a short draw never overtakes a long one before it. A paused node's blocks queue up and
//! are written in a burst when it wakes, as a node that was cut off from its peers catches up.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use super::block::BlockOut;
use super::cli::DropStream;
use super::faults::Faults;
use super::writer::{HourClock, NodeFileWriter};
use crate::node::Mode;

/// `local_time − block_time` of each block's last line in the mainnet capture (by-block, 51 blocks), in ms: the
/// node lag that `capture` delays draw from.
pub const CAPTURE_LAG_MS: [u64; 51] = [
    370, 363, 366, 373, 375, 338, 324, 343, 346, 349, 368, 370, 393, 390, 392, 379, 353, 355, 358, 357, 361, 373, 377,
    385, 342, 332, 336, 345, 353, 360, 387, 377, 398, 400, 355, 343, 350, 364, 369, 378, 386, 440, 395, 362, 403, 398,
    388, 409, 406, 578, 539,
];

/// How long after a block is produced a node writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delay {
    Fixed(Duration),
    /// An independent draw per block from `CAPTURE_LAG_MS`.
    Capture,
}

impl Delay {
    /// `capture` or a number of milliseconds.
    pub fn parse(s: &str) -> Result<Delay, String> {
        if s == "capture" {
            return Ok(Delay::Capture);
        }
        let ms: u64 = s.parse().map_err(|_| format!("delay {s:?}: expected milliseconds or `capture`"))?;
        Ok(Delay::Fixed(Duration::from_millis(ms)))
    }

    fn draw(&self, rng: &mut Xoshiro256PlusPlus) -> Duration {
        match self {
            Delay::Fixed(d) => *d,
            Delay::Capture => Duration::from_millis(CAPTURE_LAG_MS[rng.random_range(0..CAPTURE_LAG_MS.len())]),
        }
    }
}

/// One more node: its data dir, write delay and faults.
#[derive(Clone, Debug)]
pub struct NodeSpec {
    pub dir: PathBuf,
    pub delay: Delay,
    pub faults: Faults,
    pub seed: u64,
}

impl NodeSpec {
    /// `DIR[,key=value...]` with keys `delay` (ms or `capture`), `seed` (of the delay draws), `pause_at`,
    /// `pause_secs`, `restart_at`, `restart_back`, `drop_block`, `drop_stream`, `corrupt_at`, `differ_at`.
    pub fn parse(s: &str, index: usize) -> Result<NodeSpec, String> {
        let mut parts = s.split(',');
        let dir = parts.next().filter(|d| !d.is_empty()).ok_or("--node needs a data dir first")?;
        let mut spec = NodeSpec {
            dir: dir.into(),
            delay: Delay::Fixed(Duration::ZERO),
            faults: Faults { restart_back: 5, delay_every: 1, pause: Duration::from_secs(2), ..Faults::default() },
            seed: 0x6e6f6465 + index as u64,
        };
        let mut drop_at = None;
        let mut drop_stream = DropStream::Diffs;
        for kv in parts {
            let (k, v) = kv.split_once('=').ok_or_else(|| format!("--node {s:?}: {kv:?} is not key=value"))?;
            let num = || v.parse::<u64>().map_err(|_| format!("--node {s:?}: {k} needs a number, not {v:?}"));
            let f = &mut spec.faults;
            match k {
                "delay" => spec.delay = Delay::parse(v)?,
                "seed" => spec.seed = num()?,
                "pause_at" => f.pause_at = Some(num()?),
                "pause_secs" => f.pause = Duration::from_secs(num()?),
                "restart_at" => f.restart_at = Some(num()?),
                "restart_back" => f.restart_back = num()?.max(1),
                "drop_block" => drop_at = Some(num()?),
                "drop_stream" => {
                    drop_stream = <DropStream as clap::ValueEnum>::from_str(v, true)
                        .map_err(|_| format!("--node {s:?}: drop_stream is diffs, statuses, fills or all"))?;
                }
                "corrupt_at" => f.corrupt_at = Some(num()?),
                "differ_at" => f.differ_at = Some(num()?),
                _ => return Err(format!("--node {s:?}: unknown key {k:?}")),
            }
        }
        spec.faults.drop = drop_at.map(|h| (h, drop_stream));
        Ok(spec)
    }
}

type Job = (Arc<BlockOut>, Instant);

/// A node written by a thread of its own.
#[derive(Debug)]
pub struct NodeThread {
    tx: Option<mpsc::Sender<Job>>,
    handle: Option<std::thread::JoinHandle<std::io::Result<()>>>,
}

impl NodeThread {
    /// Starts the node's writer thread (`writer` already carries its faults).
    pub fn start(writer: NodeFileWriter, faults: Faults, delay: Delay, seed: u64, name: String) -> NodeThread {
        let (tx, rx) = mpsc::channel::<Job>();
        let handle = std::thread::Builder::new()
            .name(name)
            .spawn(move || write_loop(writer, &faults, &delay, seed, &rx))
            .expect("spawning a thread");
        NodeThread { tx: Some(tx), handle: Some(handle) }
    }

    /// Hands a produced block to the node.
    pub fn send(&self, block: Arc<BlockOut>, produced: Instant) {
        if let Some(tx) = &self.tx {
            let _ = tx.send((block, produced));
        }
    }

    /// Waits until the node has written every block handed to it.
    pub fn finish(&mut self) -> std::io::Result<()> {
        self.tx = None;
        match self.handle.take().map(std::thread::JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(std::io::Error::other("a node writer thread panicked")),
            None => Ok(()),
        }
    }
}

/// A writer for `dir` with `faults`, as the `--out` node's.
pub fn writer(
    dir: &std::path::Path,
    mode: Mode,
    rollover_secs: Option<u64>,
    prune: usize,
    f: &Faults,
) -> NodeFileWriter {
    NodeFileWriter::new(dir, mode, HourClock::new(rollover_secs), prune, f.clone())
}

fn write_loop(
    mut writer: NodeFileWriter,
    faults: &Faults,
    delay: &Delay,
    seed: u64,
    rx: &mpsc::Receiver<Job>,
) -> std::io::Result<()> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut not_before = Instant::now();
    for (block, produced) in rx {
        let h = block.height;
        if faults.pause_at == Some(h) {
            tracing::info!(height = h, secs = faults.pause.as_secs(), "node pausing before block");
            std::thread::sleep(faults.pause);
        }
        let due = (produced + delay.draw(&mut rng)).max(not_before);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        writer.write_block(&block)?;
        if faults.restart_at == Some(h) {
            tracing::info!(height = h, back = faults.restart_back, "node re-emitting blocks as if restarted");
            writer.reemit()?;
        }
        not_before = Instant::now();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::Stream;

    #[test]
    fn node_specs_parse() {
        let n =
            NodeSpec::parse("/tmp/b,delay=capture,pause_at=7,pause_secs=10,drop_block=9,drop_stream=fills", 1).unwrap();
        assert_eq!((n.dir.to_str(), &n.delay), (Some("/tmp/b"), &Delay::Capture));
        assert_eq!((n.faults.pause_at, n.faults.pause), (Some(7), Duration::from_secs(10)));
        assert_eq!(n.faults.drop, Some((9, DropStream::Fills)));
        assert!(n.faults.drops(9, Stream::Fills) && !n.faults.drops(9, Stream::Diffs));
        let n = NodeSpec::parse("/tmp/b,drop_block=9,drop_stream=all", 1).unwrap();
        assert!(Stream::ALL.into_iter().all(|s| n.faults.drops(9, s)) && !n.faults.drops(10, Stream::Fills));
        let n = NodeSpec::parse("/tmp/c,delay=25,differ_at=5,corrupt_at=6", 2).unwrap();
        assert_eq!(
            (n.delay, n.faults.differ_at, n.faults.corrupt_at),
            (Delay::Fixed(Duration::from_millis(25)), Some(5), Some(6))
        );
        for bad in ["", ",delay=1", "/x,delay=soon", "/x,colour=red", "/x,pause_at"] {
            assert!(NodeSpec::parse(bad, 1).is_err(), "{bad}");
        }
    }

    #[test]
    fn capture_draws_stay_in_the_capture() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        for _ in 0..1000 {
            let d = Delay::Capture.draw(&mut rng).as_millis() as u64;
            assert!((324..=578).contains(&d));
        }
    }
}
