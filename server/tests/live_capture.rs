//! Live ingest of the real capture, written into a temp node dir the way the node writes it: block by block,
//! fills first, each line split across two writes. The books must end exactly where `replay` ends.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use hlbook::book::snapshot::load_books;
use hlbook::config::Source;
use hlbook::ingest::live::{Ingest, LiveConfig};
use hlbook::node::{Mode, Stream};
use hlbook::state::Shared;
use hlbook::state::health::HealthState;

fn start(dst: &Path, mode: Mode, snapshot: &Path) -> (Arc<Shared>, Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let shared = Arc::new(Shared::new(load_books(snapshot).expect("snapshot"), Duration::from_secs(30)));
    let cfg = LiveConfig {
        sources: vec![Source::Files(dst.to_path_buf())],
        mode,
        race_grace: Duration::from_secs(1),
        poll_interval: Duration::from_millis(100),
        stale_after: Duration::from_secs(30),
        // No node to resync from: a lost line leaves the books where they were, flagged resyncing.
        snapshots: Vec::new(),

        stream_lines: true,
        resync_min_interval: Duration::from_secs(5),
        limits: hlbook::ingest::limits::Limits::default(),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let (s2, stop2) = (shared.clone(), stop.clone());
    let handle = std::thread::spawn(move || Ingest::new(cfg, s2).run(&stop2));
    (shared, stop, handle)
}

fn wait_for_height(shared: &Shared, height: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while shared.health().height() < height && Instant::now() < deadline {
        shared.wait_for_change(shared.change_seq(), Duration::from_millis(200));
    }
}

fn live_run(mode: Mode, last: u64) {
    let Some(cap) = common::unpack() else { return };
    let dst = tempfile::tempdir().unwrap();
    let (shared, stop, handle) = start(dst.path(), mode, &cap.snapshot);
    common::write_capture(&cap.node_dir, dst.path(), mode, None, Duration::from_millis(15));
    wait_for_height(&shared, last);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    handle.join().unwrap();

    let books = shared.books();
    assert_eq!(books.height(), last, "{mode:?}");
    // Streaming: the open last block's diffs are applied as their lines came (its statuses wait for a later line
    // that never comes), and the diffs alone place every order exactly.
    let shown = books.diffs_height();
    assert_eq!(shown, if mode == Mode::Streaming { last + 1 } else { last }, "{mode:?}");
    assert_eq!(
        common::l4_digest(&books),
        common::replay_digest(&cap, mode, shown),
        "{mode:?}: books differ from replay"
    );
    let c = &shared.health().counters();
    let load = hlbook::state::counter::Counter::get;
    assert_eq!((load(&c.malformed_lines), load(&c.inconsistencies), load(&c.gaps)), (0, 0, 0));
    // The capture's lines were written by the node months ago: applying them is catching up, not live.
    assert_eq!(shared.health().state(), HealthState::CatchingUp);
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
    common::write_capture(
        &cap.node_dir,
        dst.path(),
        Mode::ByBlock,
        Some((Stream::Statuses, 985148200)),
        Duration::from_millis(15),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while shared.health().state() != HealthState::Resyncing && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    // Until ingest has read a line of a later block: nothing past the broken block may be applied. Its diffs were
    // applied as soon as their line was read (they place every order exactly), but the block never completes, so
    // nothing that needs whole orders is served from these books. (Resyncing, ingest reads no further than that.)
    let read_to = || shared.health().sources().entries().iter().map(|s| s.height()).max().unwrap_or(0);
    while read_to() <= 985148200 {
        assert!(Instant::now() < deadline, "ingest read up to {} only", read_to());
        shared.wait_for_change(shared.change_seq(), Duration::from_millis(20));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    handle.join().unwrap();
    assert_eq!(shared.health().state(), HealthState::Resyncing);
    assert!(shared.complete_books(Duration::from_millis(100)).is_none(), "the broken block completed");
    let books = shared.books();
    assert_eq!((books.height(), books.diffs_height()), (985148199, 985148200));
    assert_eq!(common::l4_digest(&books), common::replay_digest(&cap, Mode::ByBlock, 985148200));
    let c = &shared.health().counters();
    let load = hlbook::state::counter::Counter::get;
    assert_eq!((load(&c.malformed_lines), load(&c.broken_blocks), load(&c.inconsistencies)), (1, 1, 0));
}

/// How the capture's streaming lines reach the node dir in `reader_order`.
#[derive(Clone, Copy, Debug)]
enum LiveRig {
    /// In the node's order, at the node's pace (each line at its `local_time`).
    Paced,
    /// In the node's order, all at once while ingest reads.
    Burst,
    /// All written before ingest starts.
    OnDisk,
}

/// Appends the capture's streaming lines to `dst` in the node's write order, at its pace when `paced`.
fn write_streaming(cap: &common::Capture, dst: &Path, paced: bool) {
    use std::io::Write;
    let mut files = std::collections::HashMap::new();
    let lines = common::lines_by_local_time(&cap.node_dir);
    let (t0, start) = (lines[0].1, Instant::now());
    for (stream, at, line) in lines {
        if paced && let Some(wait) = Duration::from_nanos((at - t0) as u64).checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
        let f = files.entry(stream).or_insert_with(|| {
            let p = dst.join(stream.dir(Mode::Streaming)).join(common::REL);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::File::create(p).unwrap()
        });
        f.write_all(line.as_bytes()).unwrap();
        f.write_all(b"\n").unwrap();
    }
}

#[test]
fn streaming_books_at_every_block_end_do_not_depend_on_how_the_lines_arrive() {
    let Some(cap) = common::unpack() else { return };
    let mut books = load_books(&cap.snapshot).expect("snapshot");
    let mut expected = Vec::new();
    hlbook::ingest::replay::replay(&mut books, &cap.node_dir, Mode::ByBlock, |step| {
        expected.push((step.block.height, common::l4_digest(step.books)));
    })
    .expect("by-block replays");
    // The last block stays open: no later line closes it.
    expected.pop();
    for feed in [LiveRig::Paced, LiveRig::Burst, LiveRig::OnDisk] {
        let dst = tempfile::tempdir().unwrap();
        if matches!(feed, LiveRig::OnDisk) {
            write_streaming(&cap, dst.path(), false);
        }
        let (shared, stop, handle) = start(dst.path(), Mode::Streaming, &cap.snapshot);
        let ends = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let seen = ends.clone();
        shared.on_complete(move |books| seen.lock().push((books.height(), common::l4_digest(books))));
        if !matches!(feed, LiveRig::OnDisk) {
            write_streaming(&cap, dst.path(), matches!(feed, LiveRig::Paced));
        }
        wait_for_height(&shared, 985148231);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        handle.join().unwrap();
        let got = ends.lock().clone();
        // Ingest may have applied blocks before the hook was set (on disk already): compare from where it starts.
        let skip = expected.len() - got.len();
        assert!(got.len() >= expected.len() - 2, "{feed:?}: only {} block ends seen", got.len());
        assert_eq!(got, expected[skip..], "{feed:?}: block ends differ from the by-block replay");
        let c = &shared.health().counters();
        let load = hlbook::state::counter::Counter::get;
        assert_eq!((load(&c.inconsistencies), load(&c.gaps), load(&c.malformed_lines)), (0, 0, 0), "{feed:?}");
        assert!(load(&c.diff_parts) > 0, "{feed:?}: no diffs applied before their block was whole");
    }
}
