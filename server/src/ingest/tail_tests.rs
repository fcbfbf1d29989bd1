use std::fs::{self, OpenOptions};
use std::io::Write;

use super::*;
use crate::node::paths::hour_path;

fn line(h: u64) -> String {
    format!("{{\"local_time\":\"x\",\"block_time\":\"y\",\"block_number\":{h},\"events\":[]}}\n")
}

fn append(dir: &Path, date: u32, hour: u8, text: &str) {
    let p = hour_path(dir, Mode::ByBlock, Stream::Diffs, date, hour);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    OpenOptions::new().create(true).append(true).open(p).unwrap().write_all(text.as_bytes()).unwrap();
}

fn heights(t: &mut StreamTail) -> Vec<u64> {
    let mut out = Vec::new();
    t.poll(true, &mut |ev| {
        if let SourceEvent::Line(_, l) = ev {
            out.push(block_number(l).unwrap());
        }
    })
    .unwrap();
    out
}

#[test]
fn carries_partial_lines_until_their_newline() {
    let d = tempfile::tempdir().unwrap();
    let mut t = StreamTail::new(d.path(), Mode::ByBlock, Stream::Diffs, 0);
    assert_eq!(heights(&mut t), Vec::<u64>::new(), "no files yet");
    let l = line(1);
    append(d.path(), 20260505, 9, &l[..20]);
    assert_eq!(heights(&mut t), Vec::<u64>::new());
    append(d.path(), 20260505, 9, &l[20..]);
    append(d.path(), 20260505, 9, &line(2));
    assert_eq!(heights(&mut t), vec![1, 2]);
    assert_eq!(heights(&mut t), Vec::<u64>::new(), "nothing twice");
}

#[test]
fn rolls_over_in_numeric_hour_order_after_draining() {
    let d = tempfile::tempdir().unwrap();
    let mut t = StreamTail::new(d.path(), Mode::ByBlock, Stream::Diffs, 0);
    append(d.path(), 20260505, 9, &line(1));
    assert_eq!(heights(&mut t), vec![1]);
    // The node finishes hour 9 and starts 10 (which sorts before 9 as text), then a new day.
    append(d.path(), 20260505, 9, &line(2));
    append(d.path(), 20260505, 10, &line(3));
    append(d.path(), 20260506, 0, &line(4));
    assert_eq!(heights(&mut t), vec![2, 3, 4]);
    assert_eq!(t.counters().rollovers, 2);
}

#[test]
fn starts_from_the_snapshot_height_not_the_end_of_file() {
    let d = tempfile::tempdir().unwrap();
    append(d.path(), 20260505, 8, &(1..=5).map(line).collect::<String>());
    append(d.path(), 20260505, 9, &(6..=9).map(line).collect::<String>());
    // Snapshot at 4: block 5 is in hour 8, so the tail starts there and skips 1..=4.
    let mut t = StreamTail::new(d.path(), Mode::ByBlock, Stream::Diffs, 4);
    assert_eq!(heights(&mut t), vec![5, 6, 7, 8, 9]);
    // Snapshot at 7: hour 9 starts at 6, so the tail starts in hour 9.
    let mut t = StreamTail::new(d.path(), Mode::ByBlock, Stream::Diffs, 7);
    assert_eq!(heights(&mut t), vec![8, 9]);
    assert_eq!(t.counters().rollovers, 0);
}

#[test]
fn recreated_file_is_read_again_and_a_fragment_at_rollover_is_dropped() {
    let d = tempfile::tempdir().unwrap();
    let mut t = StreamTail::new(d.path(), Mode::ByBlock, Stream::Diffs, 0);
    append(d.path(), 20260505, 9, &line(1));
    assert_eq!(heights(&mut t), vec![1]);
    let p = hour_path(d.path(), Mode::ByBlock, Stream::Diffs, 20260505, 9);
    fs::remove_file(&p).unwrap();
    fs::write(&p, line(1) + &line(2)).unwrap();
    assert_eq!(heights(&mut t), vec![1, 2], "read again from the start; downstream drops height 1");
    assert_eq!(t.counters().reopened, 1);
    // The node stopped mid-line, then came back in a new hour.
    append(d.path(), 20260505, 9, &line(3)[..15]);
    append(d.path(), 20260505, 10, &line(4));
    assert_eq!(heights(&mut t), vec![4]);
    assert_eq!(t.counters().partial_lines_dropped, 1);
}

#[test]
fn pruned_file_is_finished_from_the_open_handle() {
    let d = tempfile::tempdir().unwrap();
    let mut t = StreamTail::new(d.path(), Mode::ByBlock, Stream::Diffs, 0);
    append(d.path(), 20260505, 9, &line(1));
    assert_eq!(heights(&mut t), vec![1]);
    append(d.path(), 20260505, 10, &line(2));
    fs::remove_file(hour_path(d.path(), Mode::ByBlock, Stream::Diffs, 20260505, 9)).unwrap();
    assert_eq!(heights(&mut t), vec![2]);
}

#[test]
fn lines_longer_than_a_read_chunk() {
    let d = tempfile::tempdir().unwrap();
    let mut t = StreamTail::new(d.path(), Mode::ByBlock, Stream::Diffs, 0);
    let big = format!(
        "{{\"local_time\":\"x\",\"block_time\":\"y\",\"block_number\":7,\"events\":[{}]}}\n",
        vec!["{}"; 2_000_000].join(",")
    );
    append(d.path(), 20260505, 9, &big);
    let mut lens = Vec::new();
    t.poll(true, &mut |ev| {
        if let SourceEvent::Line(_, l) = ev {
            lens.push(l.len());
        }
    })
    .unwrap();
    assert_eq!(lens, vec![big.len() - 1]);
}

#[test]
fn block_number_without_parsing() {
    assert_eq!(block_number(line(985148182).as_bytes()), Some(985148182));
    assert_eq!(block_number(b"{\"oops\":1}"), None);
    assert_eq!(block_number(b""), None);
}

/// What a poll delivered: `Ok(height)` per line, `Err((height, bytes))` per refused line.
fn events(t: &mut StreamTail) -> Vec<Result<u64, (Option<u64>, u64)>> {
    let mut out = Vec::new();
    t.poll(true, &mut |ev| match ev {
        SourceEvent::Line(_, l) => out.push(Ok(block_number(l).unwrap())),
        SourceEvent::TooLong { height, bytes, .. } => out.push(Err((height, bytes))),
        _ => {}
    })
    .unwrap();
    out
}

#[test]
fn lines_over_the_cap_are_refused_and_skipped_whole_or_still_coming() {
    let d = tempfile::tempdir().unwrap();
    let cap = 4096;
    let mut t = StreamTail::new(d.path(), Mode::ByBlock, Stream::Diffs, 0).max_line(cap);
    let long = |h: u64, n: usize| {
        format!("{{\"local_time\":\"x\",\"block_time\":\"y\",\"block_number\":{h},\"events\":[\"{}\"]}}", "a".repeat(n))
    };
    // A whole line over the cap, between two that fit.
    let whole = long(2, cap);
    append(d.path(), 20260505, 9, &format!("{}{whole}\n{}", line(1), line(3)));
    assert_eq!(events(&mut t), [Ok(1), Err((Some(2), whole.len() as u64)), Ok(3)]);
    // A line that keeps growing without its newline: refused once it passes the cap, never buffered past it.
    let endless = long(4, 3 * cap);
    let (head, tail) = endless.split_at(cap / 2);
    append(d.path(), 20260505, 9, head);
    assert_eq!(events(&mut t), [], "under the cap: still waited for");
    append(d.path(), 20260505, 9, &tail[..tail.len() / 2]);
    let got = events(&mut t);
    assert!(matches!(got[..], [Err((Some(4), n))] if n > cap as u64), "{got:?}");
    for _ in 0..50 {
        append(d.path(), 20260505, 9, &"a".repeat(cap));
        assert_eq!(events(&mut t), [], "the rest of a refused line is skipped");
        assert!(t.data.len() - t.start <= cap, "nothing of it is kept");
    }
    append(d.path(), 20260505, 9, &format!("\"]}}\n{}", line(5)));
    assert_eq!(events(&mut t), [Ok(5)], "the next line is read as usual");
    assert_eq!(t.counters().lines_refused, 2);
}

#[test]
fn holds_lines_above_the_bound_across_hour_files_and_reads_on_when_it_moves() {
    let d = tempfile::tempdir().unwrap();
    append(d.path(), 20260505, 8, &(1..=5).map(line).collect::<String>());
    append(d.path(), 20260505, 9, &(6..=9).map(line).collect::<String>());
    let mut t = StreamTail::new(d.path(), Mode::ByBlock, Stream::Diffs, 0);
    t.hold_above(Some(3));
    assert_eq!((heights(&mut t), t.held()), (vec![1, 2, 3], Some(4)));
    assert_eq!((heights(&mut t), t.held()), (vec![], Some(4)), "nothing more while the bound stays");
    t.hold_above(Some(7));
    assert_eq!((heights(&mut t), t.held()), (vec![4, 5, 6, 7], Some(8)), "into the next hour file");
    assert_eq!(t.counters().partial_lines_dropped, 0);
    t.hold_above(None);
    append(d.path(), 20260505, 9, &line(10));
    assert_eq!((heights(&mut t), t.held()), (vec![8, 9, 10], None));
}
