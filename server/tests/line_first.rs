//! L2 and trades go out before the block's status line is even written (issue #16): the simulator holds each
//! second block's status line (its last, as the node writes them) for a second after stamping it
//! (`--delay-last-line-ms`) and records when it reached the file (`--timing`). Every l2Book and trades frame of a
//! held block must be received before that write. The hold is far longer than any read and publish, so the test
//! does not depend on speed: a server that waited for the status line could not pass it at all.

mod auditkit;
mod livefeed;
mod procs;

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use auditkit::{connect, recv, subscribe};
use livefeed::Feed;
use serde_json::json;

const HOLD_MS: &str = "1000";
/// Held blocks whose l2Book frames are checked.
const HELD_FRAMES: usize = 5;

fn now_ns() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as i64
}

/// Height → when its status line was fully written (ns), from the simulator's timing CSV.
fn status_written(path: &std::path::Path) -> HashMap<u64, i64> {
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

#[test]
fn l2book_and_trades_frames_leave_before_the_status_line_is_written() {
    let timing = tempfile::tempdir().unwrap();
    let csv = timing.path().join("timing.csv");
    let feed = Feed::start_with(
        &[
            ("--delay-last-line-ms", HOLD_MS),
            ("--delay-every", "2"),
            ("--timing", csv.to_str().unwrap()),
            ("--rate", "1"),
        ],
        "\n[ingest]\nvalidate_interval_secs = 0\n",
    );
    let mut ws = connect(&format!("{}?audit=1", feed.ws_url()));
    subscribe(&mut ws, json!({"type": "l2Book", "coin": "BTC"}));
    subscribe(&mut ws, json!({"type": "trades", "coin": "BTC"}));
    // Blocks written before now may have been read late (at start-up), long after their status line.
    let health = procs::get_json(&format!("{}/health", feed.base)).expect("health");
    let live_from = health["height"].as_u64().expect("height") + 2;
    // (channel, height, received ns) of every frame.
    let mut frames: Vec<(String, u64, i64)> = Vec::new();
    let held_l2 = |frames: &[(String, u64, i64)]| frames.iter().filter(|f| f.0 == "l2Book" && f.1 % 2 == 0).count();
    let deadline = Instant::now() + Duration::from_secs(120);
    while held_l2(&frames) < HELD_FRAMES + 2 {
        assert!(Instant::now() < deadline, "only {} held l2Book frames within 120 s", held_l2(&frames));
        let Some(v) = recv(&mut ws) else { continue };
        let at = now_ns();
        let (Some(channel), Some(h)) = (v["channel"].as_str(), v["audit"]["height"].as_u64()) else { continue };
        frames.push((channel.to_string(), h, at));
    }
    // Let the last held status lines reach the file.
    std::thread::sleep(Duration::from_millis(1500));
    let written = status_written(&csv);

    let mut checked = HashMap::<&str, usize>::new();
    let mut first = HashMap::<&str, u64>::new();
    for (channel, h, at) in &frames {
        // A channel's first frame may show the books as they were at subscription, not a block as it is published.
        if *first.entry(channel).or_insert(*h) == *h {
            continue;
        }
        let Some(&w) = written.get(h).filter(|_| h % 2 == 0 && *h >= live_from) else { continue };
        assert!(w > 0, "block {h}: no status line written");
        assert!(
            *at < w,
            "{channel} frame of block {h} received {} µs after its status line was written: it waited for it",
            (at - w) / 1_000
        );
        *checked.entry(channel).or_default() += 1;
    }
    assert!(checked.get("l2Book").copied().unwrap_or(0) >= HELD_FRAMES, "checked {checked:?}");
    assert!(checked.get("trades").copied().unwrap_or(0) >= 1, "no trades frame of a held block: {checked:?}");
}
