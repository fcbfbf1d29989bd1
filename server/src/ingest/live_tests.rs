use super::*;

#[test]
fn a_resync_waits_for_its_back_off_and_the_minimum_interval_since_the_last() {
    let (t0, s) = (Instant::now(), Duration::from_secs(1));
    let now = t0 + 10 * s;
    assert_eq!(retry_at(now, s / 2, None, 5 * s), now + s / 2, "the first sync only backs off");
    assert_eq!(retry_at(now, s / 2, Some(t0 + 9 * s), 5 * s), now + 4 * s, "a loop of losses waits");
    assert_eq!(retry_at(now, s / 2, Some(t0), 5 * s), now + s / 2, "long ago: the back-off");
}

/// A by-block node dir whose diffs stream runs to block `diffs_top` while fills and statuses stop at 101.
fn stream_ahead(dir: &std::path::Path, diffs_top: u64) -> usize {
    let line = |h: u64| {
        format!(
            r#"{{"local_time":"2026-05-05T09:00:00.1","block_time":"2026-05-05T09:00:00.1","block_number":{h},"events":[]}}"#
        )
    };
    for (stream, top) in [(Stream::Diffs, diffs_top), (Stream::Fills, 101), (Stream::Statuses, 101)] {
        let hourly = dir.join(stream.dir(Mode::ByBlock)).join("hourly/20260505");
        std::fs::create_dir_all(&hourly).unwrap();
        let text: String = (101..=top).map(|h| line(h) + "\n").collect();
        std::fs::write(hourly.join("9"), text).unwrap();
    }
    line(101).len()
}

#[test]
fn one_source_whose_stream_runs_ahead_holds_at_most_the_pending_bytes_then_resyncs() {
    let tmp = tempfile::tempdir().unwrap();
    let line = stream_ahead(tmp.path(), 2_000);
    let shared = Arc::new(Shared::new(crate::book::Books::new(100, []), Duration::from_secs(600)));
    let max = 50 * line;
    let cfg = LiveConfig {
        sources: vec![crate::config::Source::Files(tmp.path().to_path_buf())],
        mode: Mode::ByBlock,
        race_grace: Duration::from_secs(1),
        poll_interval: Duration::from_millis(10),
        stale_after: Duration::from_secs(600),
        snapshots: Vec::new(),
        stream_lines: true,
        resync_min_interval: Duration::from_secs(600),
        limits: super::super::limits::Limits { max_pending_bytes: max, ..Default::default() },
    };
    let mut ingest = Ingest::new(cfg, shared.clone());
    let full = || shared.health().counters().pending_bytes_full.get();
    for _ in 0..200 {
        ingest.step();
        assert!(ingest.assembler.pending_bytes() <= max, "never more than the bound is held");
        if full() > 0 {
            break;
        }
    }
    // On the old code nothing bounded one source: all 1,899 lines ahead stayed pending and this stays 0.
    assert_eq!(full(), 1, "the source counted as broken once");
    assert!(matches!(ingest.phase, Phase::Lost { .. }), "the books resync rather than hold more");
    let held = ingest.assembler.pending_bytes();
    assert!(held < max, "what it held is dropped (the rest of that read starts over)");
    ingest.step();
    assert_eq!((full(), ingest.assembler.pending_bytes()), (1, held), "waiting for the resync reads nothing more");
}
