//! L2 and trades go out before the block's status line is even written (issue #16): the simulator holds each
//! second block's status line (its last, as the node writes them) until the test releases it
//! (`--hold-last-line-until`). The test watches the node's files: once a held block's fills and diffs lines are
//! there, it waits for the frames they call for (BTC's l2Book when the diffs touch BTC, its trades when the fills
//! do), and only then releases the block. A server that waited for the status line would never send them, and the
//! test would stop at its deadline, which only guards against that hang: nothing here depends on speed. The timing
//! CSV (`--timing`) then shows every checked frame received before its status line reached the file.

mod auditkit;
mod livefeed;
mod procs;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use auditkit::{connect, recv, subscribe};
use hlbook::node::{Mode, Stream};
use livefeed::LiveRig;
use serde_json::{Value, json};

/// Held blocks whose frames are checked.
const HELD_BLOCKS: usize = 5;
/// Guards against a server that never sends a held block's frames (the failure this test is for), not a speed.
const HANG_GUARD: Duration = Duration::from_secs(120);

fn now_ns() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as i64
}

/// Height → when its status line was fully written (ns), from the simulator's timing CSV.
fn status_written(path: &Path) -> HashMap<u64, i64> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut rows = text.lines();
    let header: Vec<&str> = rows.next().unwrap_or_default().split(',').collect();
    let col = header.iter().position(|c| *c == "statuses_written_ns").expect("a statuses_written_ns column");
    rows.filter_map(|r| {
        let f: Vec<i64> = r.split(',').filter_map(|x| x.parse().ok()).collect();
        Some((u64::try_from(*f.first()?).ok()?, *f.get(col)?))
    })
    .collect()
}

/// Releases every held block up to `height`: the file is replaced whole, so the simulator never reads half a number.
fn release(gate: &Path, height: u64) {
    let tmp = gate.with_extension("tmp");
    std::fs::write(&tmp, height.to_string()).unwrap();
    std::fs::rename(&tmp, gate).unwrap();
}

/// A by-block stream's lines as the node writes them, read as they come, with nothing of hlbook's parsing:
/// height → whether any of the block's events is about BTC.
struct Written {
    root: PathBuf,
    offsets: HashMap<PathBuf, u64>,
    btc: BTreeMap<u64, bool>,
}

impl Written {
    fn new(data: &Path, stream: Stream) -> Written {
        Written {
            root: data.join(stream.dir(Mode::ByBlock)).join("hourly"),
            offsets: HashMap::new(),
            btc: BTreeMap::new(),
        }
    }

    /// Reads the whole lines written since the last call.
    fn update(&mut self) -> &BTreeMap<u64, bool> {
        use std::io::{Read, Seek, SeekFrom};
        for day in std::fs::read_dir(&self.root).into_iter().flatten().flatten() {
            for hour in std::fs::read_dir(day.path()).into_iter().flatten().flatten() {
                let offset = self.offsets.entry(hour.path()).or_default();
                let Ok(mut f) = std::fs::File::open(hour.path()) else { continue };
                let mut text = String::new();
                f.seek(SeekFrom::Start(*offset)).unwrap();
                f.read_to_string(&mut text).unwrap();
                let whole = text.rfind('\n').map_or(0, |i| i + 1);
                *offset += whole as u64;
                for line in text[..whole].lines() {
                    let v: Value = serde_json::from_str(line).expect("a node line");
                    // Diffs are `{coin, …}`, fills `[user, {coin, …}]`.
                    let events = v["events"].as_array().cloned().unwrap_or_default();
                    let btc = events.iter().any(|e| e["coin"] == "BTC" || e[1]["coin"] == "BTC");
                    self.btc.insert(v["block_number"].as_u64().expect("block_number"), btc);
                }
            }
        }
        &self.btc
    }
}

#[test]
fn l2book_and_trades_frames_leave_before_the_status_line_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, gate) = (dir.path().join("timing.csv"), dir.path().join("release"));
    let feed = LiveRig::start_with(
        &[
            ("--delay-every", "2"),
            ("--hold-last-line-until", gate.to_str().unwrap()),
            ("--timing", csv.to_str().unwrap()),
            ("--rate", "1"),
        ],
        "\n[ingest]\nvalidate_interval_secs = 0\n",
    );
    let data = feed.dir.path().join("data");
    let (mut diffs, mut fills) = (Written::new(&data, Stream::Diffs), Written::new(&data, Stream::Fills));
    let mut ws = connect(&format!("{}?audit=1", feed.ws_url()));
    subscribe(&mut ws, json!({"type": "l2Book", "coin": "BTC"}));
    subscribe(&mut ws, json!({"type": "trades", "coin": "BTC"}));
    let deadline = Instant::now() + HANG_GUARD;
    let mut acks = 0;
    while acks < 2 {
        assert!(Instant::now() < deadline, "the subscriptions were not answered");
        acks += usize::from(recv(&mut ws).is_some_and(|v| v["channel"] == "subscriptionResponse"));
    }
    // Blocks not written yet were published after both subscriptions: each gets its frames. From the first even
    // one, each even block's status line waits for its release.
    let newest = diffs.update().keys().last().copied().expect("blocks written before going live");
    release(&gate, newest);
    let mut next = newest + 1 + (newest + 1) % 2;
    // (channel, height, received ns) of every frame of those blocks.
    let mut frames: Vec<(String, u64, i64)> = Vec::new();
    // Released block → (its frames: l2Book, trades; when it was released, ns).
    let mut released = BTreeMap::<u64, (bool, bool, i64)>::new();
    let enough = |r: &BTreeMap<u64, (bool, bool, i64)>| {
        r.values().filter(|b| b.0).count() >= HELD_BLOCKS + 2 && r.values().filter(|b| b.1).count() >= 2
    };
    while !enough(&released) {
        assert!(Instant::now() < deadline, "a held block's frames never came: released {released:?}");
        if let Some(v) = recv(&mut ws)
            && let (Some(channel), Some(h)) = (v["channel"].as_str(), v["audit"]["height"].as_u64())
            && h > newest
        {
            frames.push((channel.to_string(), h, now_ns()));
        }
        // Block `next` is held once its diffs line is there (and its fills line, written before it): the frames
        // they call for, then its release.
        let Some(&wants_l2) = diffs.update().get(&next) else { continue };
        let wants_trades = fills.update().get(&next).copied().unwrap_or(false);
        let got = |c: &str| frames.iter().any(|f| f.0 == c && f.1 == next);
        if (!wants_l2 || got("l2Book")) && (!wants_trades || got("trades")) {
            released.insert(next, (wants_l2, wants_trades, now_ns()));
            release(&gate, next);
            next += 2;
        }
    }
    // The released status lines reach the file.
    let written = loop {
        let w = status_written(&csv);
        if released.keys().all(|h| w.contains_key(h)) {
            break w;
        }
        assert!(Instant::now() < deadline, "released status lines not in the timing CSV: {released:?}");
        std::thread::sleep(Duration::from_millis(20));
    };

    // A block was held when its status line was written after its release (the first may have been written before
    // the gate took hold); the frames it was released for came before that line.
    let mut checked = HashMap::<&str, usize>::new();
    for (channel, h, at) in &frames {
        let Some(&(_, _, released_at)) = released.get(h).filter(|r| written[h] > r.2) else { continue };
        if *at <= released_at {
            let w = written[h];
            assert!(*at < w, "{channel} frame of block {h} received {} µs after its status line", (at - w) / 1_000);
            *checked.entry(channel).or_default() += 1;
        }
    }
    assert!(checked.get("l2Book").copied().unwrap_or(0) >= HELD_BLOCKS, "checked {checked:?}");
    assert!(checked.get("trades").copied().unwrap_or(0) >= 1, "no trades frame of a held block: {checked:?}");
}
