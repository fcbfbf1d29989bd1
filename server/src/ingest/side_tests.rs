use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;

use super::*;

const HASH: &str = "0x4a3367a1c546233d4bad042ee5d5ba020b2a00876049420fedfc12f48449fd27";
const USER: &str = "0x025a744111554e57c66ba2069a8081249fbe5e11";

fn deposit(usdc: &str) -> String {
    format!(
        r#"{{"time":"2026-05-05T09:00:00.000000001","hash":"{HASH}","inner":{{"LedgerUpdate":{{"users":["{USER}"],"delta":{{"type":"deposit","usdc":"{usdc}"}}}}}}}}"#
    )
}

fn line(height: u64, events: &[String]) -> String {
    format!(
        "{{\"local_time\":\"2026-05-05T09:00:00.5\",\"block_time\":\"2026-05-05T09:00:00.000000001\",\"block_number\":{height},\"events\":[{}]}}\n",
        events.join(",")
    )
}

fn append(dir: &Path, mode: Mode, text: &str) {
    let p = dir.join(misc_dir(mode)).join("hourly").join("20260505").join("9");
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    OpenOptions::new().create(true).append(true).open(p).unwrap().write_all(text.as_bytes()).unwrap();
}

fn poll(r: &mut MiscReader) -> Vec<(u64, usize)> {
    let mut out = Vec::new();
    r.poll(&mut |b| out.push((b.height, b.events.len()))).unwrap();
    out
}

#[test]
fn by_block_counts_bad_lines_gaps_unknown_kinds_and_restarts_and_carries_on() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    assert!(!present::<MiscEvents>(d, Mode::ByBlock));
    let mut r = MiscReader::new(d, Mode::ByBlock, 0);
    assert!(poll(&mut r).is_empty(), "no stream: nothing read, nothing fails");
    let unknown = format!(r#"{{"time":"2026-05-05T09:00:00.1","hash":"{HASH}","inner":{{"Teleport":{{}}}}}}"#);
    append(d, Mode::ByBlock, &line(1, &[deposit("1.0")]));
    append(d, Mode::ByBlock, &line(2, &[]));
    append(d, Mode::ByBlock, "{\"local_time\":\"garbage\n");
    append(d, Mode::ByBlock, &line(4, &[deposit("2.0"), deposit("3.0")]));
    let five = line(5, &[unknown, deposit("4.0")]);
    append(d, Mode::ByBlock, &five[..20]);
    assert!(present::<MiscEvents>(d, Mode::ByBlock));
    assert_eq!(poll(&mut r), vec![(1, 1), (2, 0), (4, 2)], "a partial line waits for its newline");
    append(d, Mode::ByBlock, &five[20..]);
    // A restarted node writes recent blocks again.
    append(d, Mode::ByBlock, &line(4, &[deposit("2.0"), deposit("3.0")]));
    append(d, Mode::ByBlock, &line(6, &[deposit("5.0")]));
    assert_eq!(poll(&mut r), vec![(5, 1), (6, 1)]);
    let c = r.counters();
    assert_eq!((c.bad_lines, c.gaps, c.unknown_events, c.duplicates), (1, 1, 1, 1), "{c:?}");
    assert_eq!((c.blocks, c.events, c.malformed_events), (5, 5, 0));
}

#[test]
fn streaming_completes_a_block_when_a_later_one_appears_and_drops_repeats() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let mut r = MiscReader::new(d, Mode::Streaming, 0);
    append(d, Mode::Streaming, &line(10, &[deposit("1.0")]));
    append(d, Mode::Streaming, &line(10, &[deposit("2.0")]));
    assert!(poll(&mut r).is_empty(), "block 10 may still grow");
    append(d, Mode::Streaming, &line(13, &[deposit("3.0")]));
    append(d, Mode::Streaming, &line(10, &[deposit("1.0")]));
    append(d, Mode::Streaming, &line(14, &[deposit("4.0")]));
    assert_eq!(poll(&mut r), vec![(10, 2), (13, 1)]);
    let c = r.counters();
    assert_eq!((c.duplicates, c.gaps), (1, 0), "blocks skip in a streaming file: no gap");
}

#[test]
fn a_resumed_reader_starts_after_its_height() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    for h in 1..=4 {
        append(d, Mode::ByBlock, &line(h, &[deposit("1.0")]));
    }
    let mut r = MiscReader::new(d, Mode::ByBlock, 2);
    assert_eq!(poll(&mut r), vec![(3, 1), (4, 1)]);
    assert_eq!(r.counters().gaps, 0);
}
