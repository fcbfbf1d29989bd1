//! Live ingest of the real capture, written into a temp node dir the way the node writes it: block by block,
//! fills first, each line split across two writes. The books must end exactly where `replay` ends.

mod common;

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use hlbook::book::snapshot::load_books;
use hlbook::ingest::health::State;
use hlbook::ingest::live::{Ingest, LiveConfig, Shared, SourceSpec};
use hlbook::ingest::replay::replay;
use hlbook::ingest::tail::block_number;
use hlbook::node::{Mode, Stream};

const REL: &str = "hourly/20260505/17";

/// Every line of the capture for `mode`, with its stream and block number, in the order the node writes them.
fn lines_in_write_order(src: &Path, mode: Mode) -> Vec<(Stream, u64, String)> {
    let mut all = Vec::new();
    for s in Stream::ALL {
        let text = std::fs::read_to_string(src.join(s.dir(mode)).join(REL)).expect("capture file");
        all.extend(text.lines().map(|l| (s, block_number(l.as_bytes()).expect("height"), l.to_string())));
    }
    // Stable: by block, then fills, diffs, statuses, then file order.
    all.sort_by_key(|(s, h, _)| (*h, *s));
    all
}

fn start(dst: &Path, mode: Mode, snapshot: &Path) -> (Arc<Shared>, Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let shared = Arc::new(Shared::new(load_books(snapshot).expect("snapshot"), Duration::from_secs(30)));
    let cfg = LiveConfig {
        source: SourceSpec::Files(dst.to_path_buf()),
        mode,
        poll_interval: Duration::from_millis(100),
        stale_after: Duration::from_secs(30),
        // No node to resync from: a lost line leaves the books where they were, flagged resyncing.
        snapshots: Vec::new(),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let (s2, stop2) = (shared.clone(), stop.clone());
    let handle = std::thread::spawn(move || Ingest::new(cfg, s2).run(&stop2));
    (shared, stop, handle)
}

fn wait_for_height(shared: &Shared, height: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while shared.health.height() < height && Instant::now() < deadline {
        shared.wait_applied(shared.applied_seq(), Duration::from_millis(200));
    }
}

/// The replay digest at `height`.
fn replay_digest(cap: &common::Capture, mode: Mode, height: u64) -> u64 {
    let mut books = load_books(&cap.snapshot).expect("snapshot");
    let mut digest = None;
    replay(&mut books, &cap.node_dir, mode, |step| {
        if step.block.height == height {
            digest = Some(common::l4_digest(step.books));
        }
    })
    .expect("replays");
    digest.expect("height reached")
}

/// Writes the capture into `dst` at a steady pace; `corrupt` replaces one (stream, height) line with garbage.
fn write_capture(src: &Path, dst: &Path, mode: Mode, corrupt: Option<(Stream, u64)>) {
    let mut files = std::collections::HashMap::new();
    let mut current = 0;
    for (stream, height, mut line) in lines_in_write_order(src, mode) {
        if corrupt == Some((stream, height)) {
            line = format!("{{\"block_number\":{height},\"events\":[{{\"oops");
        }
        if height != current {
            current = height;
            std::thread::sleep(Duration::from_millis(15));
        }
        let f = files.entry(stream).or_insert_with(|| {
            let p = dst.join(stream.dir(mode)).join(REL);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::File::create(p).unwrap()
        });
        // A reader may see the first half alone.
        let cut = line.len() / 2;
        f.write_all(&line.as_bytes()[..cut]).unwrap();
        f.flush().unwrap();
        f.write_all(&line.as_bytes()[cut..]).unwrap();
        f.write_all(b"\n").unwrap();
    }
}

fn live_run(mode: Mode, last: u64) {
    let Some(cap) = common::unpack() else { return };
    let dst = tempfile::tempdir().unwrap();
    let (shared, stop, handle) = start(dst.path(), mode, &cap.snapshot);
    write_capture(&cap.node_dir, dst.path(), mode, None);
    wait_for_height(&shared, last);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    handle.join().unwrap();

    let books = shared.books.read();
    assert_eq!(books.height(), last, "{mode:?}");
    assert_eq!(common::l4_digest(&books), replay_digest(&cap, mode, last), "{mode:?}: books differ from replay");
    let c = &shared.health.counters;
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!((load(&c.malformed_lines), load(&c.inconsistencies), load(&c.gaps)), (0, 0, 0));
    // The capture's lines were written by the node months ago: applying them is catching up, not live.
    assert_eq!(shared.health.state(), State::CatchingUp);
}

#[test]
fn by_block_live_ingest_matches_replay() {
    live_run(Mode::ByBlock, 985148232);
}

#[test]
fn streaming_live_ingest_matches_replay() {
    // The last block stays pending until a later block number appears, as on a live node.
    live_run(Mode::Streaming, 985148231);
}

#[test]
fn a_malformed_line_stops_the_books_before_it_and_asks_for_a_resync() {
    let Some(cap) = common::unpack() else { return };
    let dst = tempfile::tempdir().unwrap();
    let (shared, stop, handle) = start(dst.path(), Mode::ByBlock, &cap.snapshot);
    write_capture(&cap.node_dir, dst.path(), Mode::ByBlock, Some((Stream::Statuses, 985148200)));
    let deadline = Instant::now() + Duration::from_secs(60);
    while shared.health.state() != State::Resyncing && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    // Let the rest of the capture arrive: nothing past the lost block may be applied.
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    handle.join().unwrap();
    assert_eq!(shared.health.state(), State::Resyncing);
    let books = shared.books.read();
    assert_eq!(books.height(), 985148199);
    assert_eq!(common::l4_digest(&books), replay_digest(&cap, Mode::ByBlock, 985148199));
    let c = &shared.health.counters;
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!((load(&c.malformed_lines), load(&c.broken_blocks), load(&c.inconsistencies)), (1, 1, 0));
}
