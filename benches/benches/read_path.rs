//! Node write → line read: how long after a node line is fully written `FileSource` hands it to ingest, without
//! parsing or applying anything.
//!
//! A writer thread plays the node: every 20 ms it appends one block's three lines, fills (1 kB), diffs (4 kB) and
//! statuses (small: 2 kB; mainnet-size: 4 MB, what `hlsim` writes for the whole market at mainnet load), to their
//! hour files, in the node's order, either as one `write`
//! per line or in 64 kB pieces (as a buffered writer flushes), and records when its last `write` call started and
//! returned. The reader runs `FileSource` as `hlbook serve` does and records when each line came out. Optionally two
//! other processes burn CPU on the same cores for the whole case (a busy writer and a busy client). Per case it
//! prints, for each of the three lines, p50 / p99 / max from the start of the line's last `write` (a
//! reference the reader can never beat) and p50 / p99 from its return (which a reader scheduled ahead of the
//! writer, between the kernel's copy and the writer reading its clock, does beat: counted as 0). `HLBOOK_BENCH_SECS` sets the time per case
//! (default 10 s, 500 blocks), `HLBOOK_BENCH_CASES` picks cases by index.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

use hdrhistogram::Histogram;
use hlbook::ingest::file_source::FileSource;
use hlbook::ingest::line_source::{LineSource, SourceEvent};
use hlbook::ingest::tail::block_number;
use hlbook::node::paths::hour_path;
use hlbook::node::time::now_nanos;
use hlbook::node::{Mode, Stream};

const BLOCK_EVERY: Duration = Duration::from_millis(20);
const PIECE: usize = 64 << 10;

struct Case {
    status_bytes: usize,
    pieces: bool,
    busy: bool,
}

/// CPU burners in their own processes, stopped on drop.
struct Busy(Vec<Child>);

impl Busy {
    fn start(n: usize) -> Busy {
        let spawn = || Command::new("sh").args(["-c", "while :; do :; done"]).spawn().expect("start a CPU burner");
        Busy((0..n).map(|_| spawn()).collect())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A line of exactly `len` bytes (newline included) with a fixed-width block number to patch in.
fn template(len: usize) -> Vec<u8> {
    let head = br#"{"local_time":"2026-01-01T00:00:00.000000000","block_number":0000000000,"events":[""#;
    let mut line = head.to_vec();
    line.resize(len.max(head.len() + 4) - 3, b'x');
    line.extend_from_slice(b"\"]}\n");
    line
}

fn patch(line: &mut [u8], block: u64) {
    let at = memfind(line, b"\"block_number\":").expect("key") + 15;
    line[at..at + 10].copy_from_slice(format!("{block:010}").as_bytes());
}

fn memfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Appends blocks until `stop`; returns each (stream, block)'s last `write` call's start and return times.
fn write_blocks(dir: &Path, case: &Case, stop: &AtomicBool) -> HashMap<(Stream, u64), (i64, i64)> {
    let streams = [(Stream::Fills, 1 << 10), (Stream::Diffs, 4 << 10), (Stream::Statuses, case.status_bytes)];
    let mut files: Vec<(Stream, File, Vec<u8>)> = streams
        .iter()
        .map(|&(s, len)| {
            let f = OpenOptions::new().append(true).open(hour_path(dir, Mode::ByBlock, s, 20260101, 0)).unwrap();
            (s, f, template(len))
        })
        .collect();
    let mut written = HashMap::new();
    let mut block = 1;
    while !stop.load(Relaxed) {
        for (s, f, line) in &mut files {
            patch(line, block);
            let piece = if case.pieces { PIECE } else { line.len() };
            let mut started = 0;
            for part in line.chunks(piece) {
                started = now_nanos();
                f.write_all(part).unwrap();
            }
            written.insert((*s, block), (started, now_nanos()));
        }
        block += 1;
        std::thread::sleep(BLOCK_EVERY);
    }
    written
}

fn run(case: &Case, secs: u64) {
    let tmp = tempfile::tempdir().expect("temp dir");
    for s in [Stream::Fills, Stream::Diffs, Stream::Statuses] {
        let p = hour_path(tmp.path(), Mode::ByBlock, s, 20260101, 0);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        File::create(&p).unwrap();
    }
    let _busy = case.busy.then(|| Busy::start(2));
    let mut source = FileSource::new(tmp.path(), Mode::ByBlock, 0, hlbook::ingest::limits::MAX_LINE_BYTES);
    let stop = Arc::new(AtomicBool::new(false));
    let (dir, st) = (tmp.path().to_path_buf(), stop.clone());
    let status_bytes = case.status_bytes;
    let pieces = case.pieces;
    let writer = std::thread::spawn(move || write_blocks(&dir, &Case { status_bytes, pieces, busy: false }, &st));
    let mut read: Vec<(Stream, u64, i64)> = Vec::new();
    let end = std::time::Instant::now() + Duration::from_secs(secs);
    while std::time::Instant::now() < end {
        source
            .poll(Duration::from_millis(100), &mut |e| {
                if let SourceEvent::Line(s, line) = e {
                    read.push((s, block_number(line).unwrap_or(0), now_nanos()));
                }
            })
            .expect("reading");
    }
    stop.store(true, Relaxed);
    let written = writer.join().unwrap();
    let new = || Histogram::<u64>::new(3).unwrap();
    let mut hist = [[new(), new()], [new(), new()], [new(), new()]];
    // The first blocks are warm-up (the reader opening its files).
    for (s, b, t) in read.into_iter().filter(|r| r.1 > 10) {
        let i = match s {
            Stream::Fills => 0,
            Stream::Diffs => 1,
            Stream::Statuses => 2,
        };
        if let Some(&(started, returned)) = written.get(&(s, b)) {
            hist[i][0].record(((t - started).max(0) / 1000) as u64).unwrap();
            hist[i][1].record(((t - returned).max(0) / 1000) as u64).unwrap();
        }
    }
    for (name, [from_start, from_end]) in ["fills", "diffs", "statuses"].iter().zip(&hist) {
        println!(
            "status={:>7} B {:<9} busy={:<5} {name:<8} n={:<4} from write start: p50={:>6} p99={:>6} max={:>6} µs; \
             from return: p50={:>6} p99={:>6} µs",
            case.status_bytes,
            if case.pieces { "64kB-wr" } else { "one-write" },
            case.busy,
            from_start.len(),
            from_start.value_at_quantile(0.5),
            from_start.value_at_quantile(0.99),
            from_start.max(),
            from_end.value_at_quantile(0.5),
            from_end.value_at_quantile(0.99),
        );
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a test run of benches (`cargo test --benches`) must not take minutes.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let secs = std::env::var("HLBOOK_BENCH_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
    let mut cases = Vec::new();
    for busy in [false, true] {
        for status_bytes in [2 << 10, 4 << 20] {
            for pieces in [false, true] {
                cases.push(Case { status_bytes, pieces, busy });
            }
        }
    }
    let pick = std::env::var("HLBOOK_BENCH_CASES").ok();
    for (i, case) in cases.iter().enumerate() {
        if pick.as_ref().is_none_or(|p| p.split(',').any(|x| x.trim() == i.to_string())) {
            run(case, secs);
        }
    }
}
