//! Each fault flag does what it says, checked on the files (and on snapshot answers).

use std::path::Path;

use super::info::copy_books;
use super::tests::small_args;
use super::*;
use crate::node::paths::hour_files;
use crate::node::{Mode, NodeParser, Stream};

const H0: u64 = 1_000_000_000;

/// The raw text of a stream's hour files, in order.
fn text(out: &Path, mode: Mode, s: Stream) -> String {
    hour_files(out, mode, s).unwrap().iter().map(|f| std::fs::read_to_string(&f.path).unwrap()).collect()
}

/// Every `block_number` of a stream's lines, in order.
fn heights(out: &Path, mode: Mode, s: Stream) -> Vec<u64> {
    text(out, mode, s)
        .lines()
        .map(|l| l.split("\"block_number\":").nth(1).unwrap().split(',').next().unwrap().parse().unwrap())
        .collect()
}

fn run(args: &SimArgs, blocks: u64) -> Sim {
    let mut sim = Sim::new(args).unwrap();
    for _ in 0..blocks {
        sim.step().unwrap();
    }
    sim
}

fn light(out: &Path, mode: Mode) -> SimArgs {
    let mut a = small_args(out, mode);
    a.rate = 0.1;
    a
}

#[test]
fn by_block_lines_are_written_fills_diffs_statuses_as_the_node_does() {
    let tmp = tempfile::tempdir().unwrap();
    let mut a = light(tmp.path(), Mode::ByBlock);
    a.timing = Some(tmp.path().join("timing.csv"));
    run(&a, 6);
    let csv = std::fs::read_to_string(tmp.path().join("timing.csv")).unwrap();
    for row in csv.lines().skip(1) {
        let v: Vec<i64> = row.split(',').map(|x| x.parse().unwrap()).collect();
        let (fills, statuses, diffs, last) = (v[2], v[3], v[4], v[5]);
        assert!(fills > 0 && fills <= diffs && diffs <= statuses, "{row}");
        assert_eq!(last, statuses, "the status line is the block's last: {row}");
    }
}

#[test]
fn drop_block_loses_exactly_that_line() {
    let tmp = tempfile::tempdir().unwrap();
    let mut a = light(tmp.path(), Mode::ByBlock);
    a.drop_block = Some(H0 + 4);
    a.timing = Some(tmp.path().join("timing.csv"));
    run(&a, 8);
    let all: Vec<u64> = (H0..H0 + 8).collect();
    let without: Vec<u64> = all.iter().copied().filter(|&h| h != H0 + 4).collect();
    assert_eq!(heights(tmp.path(), Mode::ByBlock, Stream::Diffs), without);
    assert_eq!(heights(tmp.path(), Mode::ByBlock, Stream::Statuses), all);
    assert_eq!(heights(tmp.path(), Mode::ByBlock, Stream::Fills), all);
    let csv = std::fs::read_to_string(tmp.path().join("timing.csv")).unwrap();
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows[0], "height,block_time_ns,fills_written_ns,statuses_written_ns,diffs_written_ns,last_written_ns");
    assert_eq!(rows.len(), 9);
    let row: Vec<&str> = rows[5].split(',').collect();
    assert_eq!((row[0], row[4]), ("1000000004", "0"));
    assert_eq!(row[5], row[3], "without diffs the block's last line is its statuses");
    assert!(rows[4].split(',').all(|v| v != "0"));
}

#[test]
fn drop_statuses_in_streaming_mode() {
    let tmp = tempfile::tempdir().unwrap();
    let mut a = light(tmp.path(), Mode::Streaming);
    a.drop_block = Some(H0 + 2);
    a.drop_stream = cli::DropStream::Statuses;
    run(&a, 5);
    let hs = heights(tmp.path(), Mode::Streaming, Stream::Statuses);
    assert!(!hs.contains(&(H0 + 2)) && hs.contains(&(H0 + 1)) && hs.contains(&(H0 + 3)));
    assert!(heights(tmp.path(), Mode::Streaming, Stream::Diffs).contains(&(H0 + 2)));
}

#[test]
fn restart_reemits_recent_lines_byte_identical() {
    for mode in [Mode::ByBlock, Mode::Streaming] {
        let tmp = tempfile::tempdir().unwrap();
        let mut a = light(tmp.path(), mode);
        a.restart_at = Some(H0 + 6);
        a.restart_back = 3;
        run(&a, 9);
        for s in Stream::ALL {
            let text = text(tmp.path(), mode, s);
            let lines: Vec<&str> = text.lines().collect();
            let at = |h: u64| -> Vec<&str> {
                lines.iter().copied().filter(|l| l.contains(&format!("\"block_number\":{h},"))).collect()
            };
            for h in H0 + 4..=H0 + 6 {
                let ls = at(h);
                assert!(ls.len() % 2 == 0 && !ls.is_empty() || (mode == Mode::Streaming && ls.is_empty()), "{s}");
                let (first, again) = ls.split_at(ls.len() / 2);
                assert_eq!(first, again, "{mode:?} {s} block {h} not re-emitted identically");
            }
            for h in [H0 + 3, H0 + 7] {
                let ls = at(h);
                assert_eq!(ls.iter().collect::<std::collections::HashSet<_>>().len(), ls.len(), "{s} {h} repeated");
            }
            if mode == Mode::ByBlock {
                let hs: Vec<u64> = heights(tmp.path(), mode, s);
                let want: Vec<u64> = (0..7).chain(4..9).map(|i| H0 + i).collect();
                assert_eq!(hs, want, "{s}");
            }
        }
    }
}

#[test]
fn stop_mid_line_glues_a_fragment_to_the_next_block() {
    for mode in [Mode::ByBlock, Mode::Streaming] {
        let tmp = tempfile::tempdir().unwrap();
        let mut a = light(tmp.path(), mode);
        a.stop_mid_line_at = Some(H0 + 3);
        let sim = run(&a, 6);
        assert_eq!(sim.shared.state.lock().height, H0 + 5);
        let text = text(tmp.path(), mode, Stream::Diffs);
        let glued: Vec<&str> = text.lines().filter(|l| l.contains("\"block_number\":1000000003,")).collect();
        assert_eq!(glued.len(), 1, "{mode:?}: block 3 leaves exactly one (glued) line");
        let line = glued[0];
        assert_eq!(line.matches("{\"local_time\"").count(), 2, "{mode:?}: fragment glued to the next line");
        assert!(line.contains("\"block_number\":1000000004,"));
        let mut p = NodeParser::new();
        assert!(p.parse(Stream::Diffs, line).is_err());
        assert!(text.ends_with('\n'));
        for other in text.lines().filter(|l| *l != line) {
            p.parse(Stream::Diffs, other).unwrap();
        }
        // Other streams keep block 3.
        assert!(heights(tmp.path(), mode, Stream::Statuses).contains(&(H0 + 3)));
    }
}

#[test]
fn corrupt_statuses_line_is_a_bad_line() {
    for mode in [Mode::ByBlock, Mode::Streaming] {
        let tmp = tempfile::tempdir().unwrap();
        let mut a = light(tmp.path(), mode);
        a.corrupt_at = Some(H0 + 2);
        run(&a, 4);
        let text = text(tmp.path(), mode, Stream::Statuses);
        let mut p = NodeParser::new();
        let bad: Vec<&str> = text.lines().filter(|l| p.parse(Stream::Statuses, l).is_err()).collect();
        assert_eq!(bad.len(), 1, "{mode:?}");
        assert!(bad[0].contains("\"block_number\":1000000002,") || bad[0].contains("1000000002"));
        assert!(text.ends_with('\n'));
    }
}

#[test]
fn pause_at_delays_the_block_and_its_time() {
    let tmp = tempfile::tempdir().unwrap();
    let mut a = light(tmp.path(), Mode::ByBlock);
    a.pause_at = Some(H0 + 2);
    a.pause_secs = 1;
    a.timing = Some(tmp.path().join("t.csv"));
    run(&a, 4);
    let csv = std::fs::read_to_string(tmp.path().join("t.csv")).unwrap();
    let times: Vec<i64> = csv.lines().skip(1).map(|r| r.split(',').nth(1).unwrap().parse().unwrap()).collect();
    assert!(times[2] - times[1] >= 1_000_000_000, "{times:?}");
    assert!(times[3] - times[2] < 1_000_000_000, "{times:?}");
    assert_eq!(heights(tmp.path(), Mode::ByBlock, Stream::Diffs), (H0..H0 + 4).collect::<Vec<_>>());
}

#[test]
fn rollover_makes_new_hour_files_and_prune_deletes_old_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let mut a = light(tmp.path(), Mode::ByBlock);
    a.rollover_secs = Some(1);
    a.prune_keep = 2;
    let mut sim = Sim::new(&a).unwrap();
    // Blocks until the third hour file appears (the clock gains an hour a second), however slow the machine.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let mut seen = std::collections::BTreeSet::new();
    while seen.len() < 3 {
        assert!(std::time::Instant::now() < deadline, "no third hour file within 120 s: {seen:?}");
        sim.step().unwrap();
        for f in hour_files(tmp.path(), Mode::ByBlock, Stream::Diffs).unwrap() {
            seen.insert((f.date, f.hour));
        }
        // Pacing, a few blocks per hour of the simulated clock.
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // 22:00, 23:00, then 0:00 of the next day.
    let hours: Vec<u8> = seen.iter().map(|(_, h)| *h).collect();
    assert_eq!(hours, [22, 23, 0].iter().copied().filter(|h| seen.iter().any(|s| s.1 == *h)).collect::<Vec<_>>());
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert_eq!(seen.iter().map(|s| s.0).collect::<std::collections::BTreeSet<_>>().len(), 2, "new date folder");
    for s in Stream::ALL {
        let left: Vec<(u32, u8)> =
            hour_files(tmp.path(), Mode::ByBlock, s).unwrap().iter().map(|f| (f.date, f.hour)).collect();
        assert_eq!(left, seen.iter().copied().skip(1).collect::<Vec<_>>(), "{s}: oldest hour pruned");
    }
    // Every block is in exactly one file, in order.
    let hs = heights(tmp.path(), Mode::ByBlock, Stream::Fills);
    assert!(hs.windows(2).all(|w| w[1] == w[0] + 1));
}

#[test]
fn snapshot_mismatch_is_wrong_first_then_right() {
    let tmp = tempfile::tempdir().unwrap();
    let mut a = light(tmp.path(), Mode::ByBlock);
    a.snapshot_mismatch = Some("ETH".into());
    let sim = run(&a, 2);
    let first = copy_books(&sim.shared);
    let second = copy_books(&sim.shared);
    let third = copy_books(&sim.shared);
    let coin = |s: &super::info::SnapshotCopy, name: &str| s.coins.iter().find(|c| c.0.name == name).cloned().unwrap();
    let (_, wb, wa) = coin(&first, "ETH");
    let (_, rb, ra) = coin(&second, "ETH");
    assert_eq!(wb[..], rb[1..], "best bid order left out");
    assert_eq!(wa[0].sz, (ra[0].sz / 2).max(1), "best ask halved");
    assert_eq!(wa[1..], ra[1..]);
    assert_eq!(coin(&first, "BTC").1, coin(&second, "BTC").1);
    // Later answers equal the state.
    let st = sim.shared.state.lock();
    let eth = st.market.coins.iter().position(|c| c.name == "ETH").unwrap();
    let state_bids: Vec<_> = st.market.books[eth].orders(crate::node::Side::Bid).cloned().collect();
    assert_eq!(rb, state_bids);
    assert_eq!(coin(&third, "ETH").2, ra);
}

#[test]
fn delay_last_line_holds_the_stamped_last_line_of_every_kth_block() {
    for mode in [Mode::ByBlock, Mode::Streaming] {
        let tmp = tempfile::tempdir().unwrap();
        let mut a = light(tmp.path(), mode);
        a.delay_last_line_ms = 30.0;
        a.delay_every = 2;
        a.timing = Some(tmp.path().join("t.csv"));
        run(&a, 6);
        // The newest local_time each block's lines carry: its last line's stamp.
        let mut stamped = std::collections::BTreeMap::<u64, i64>::new();
        for s in Stream::ALL {
            for l in text(tmp.path(), mode, s).lines() {
                let h: u64 = l.split("\"block_number\":").nth(1).unwrap().split(',').next().unwrap().parse().unwrap();
                let t = l.split("\"local_time\":\"").nth(1).unwrap().split('"').next().unwrap();
                let t = crate::node::time::parse_node_time(t).unwrap();
                let e = stamped.entry(h).or_insert(t);
                *e = (*e).max(t);
            }
        }
        let csv = std::fs::read_to_string(tmp.path().join("t.csv")).unwrap();
        for row in csv.lines().skip(1) {
            let v: Vec<i64> = row.split(',').map(|x| x.parse().unwrap()).collect();
            let h = v[0] as u64;
            let written = v[5];
            if h % 2 == 0 {
                assert!(written - stamped[&h] >= 30_000_000, "{mode:?}: block {h} written too soon: {row}");
            }
        }
        assert_eq!(stamped.len(), 6, "{mode:?}");
    }
}
