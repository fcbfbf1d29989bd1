use super::*;

#[test]
fn digest_ignores_local_time_only() {
    let a = br#"{"local_time":"2026-05-05T17:39:13.394386432","block_time":"2026-05-05T17:39:13.02","block_number":7,"events":[1]}"#;
    let b = br#"{"local_time":"2026-05-05T17:39:13.512000001","block_time":"2026-05-05T17:39:13.02","block_number":7,"events":[1]}"#;
    let c = br#"{"local_time":"2026-05-05T17:39:13.394386432","block_time":"2026-05-05T17:39:13.02","block_number":7,"events":[2]}"#;
    assert_eq!(digest(a), digest(b));
    assert_ne!(digest(a), digest(c));
}

/// A by-block diffs line of block `height` with one BTC diff of size `sz`.
fn diffs_line(height: u64, local: &str, sz: &str) -> Vec<u8> {
    format!(
        r#"{{"local_time":"2026-05-05T17:39:13.{local}","block_time":"2026-05-05T17:39:13.02","block_number":{height},"events":[{{"user":"0x0fd468a73084daa6ea77a9261e40fdec3e67e0c7","oid":1,"coin":"BTC","side":"A","px":"81311.0","raw_book_diff":{{"new":{{"sz":"{sz}"}}}}}}]}}"#
    )
    .into_bytes()
}

/// What reader `src` would hand over for `bytes`, read at `read_at`.
fn raced(bytes: &[u8], read_at: i64) -> Raced {
    let line = NodeParser::new().parse_bytes(Stream::Diffs, bytes).unwrap();
    Raced {
        stream: Stream::Diffs,
        height: line.meta.height,
        digest: digest(bytes),
        read_at,
        parsed: Parsed::Line(line),
        off_layout: false,
        bytes: bytes.len(),
    }
}

/// Two racing sources whose readers are never positioned (the test hands lines in itself).
fn two_sources(tmp: &std::path::Path, health: &Health) -> Race {
    let specs = [Source::Files(tmp.join("a")), Source::Files(tmp.join("b"))];
    let watched = Arc::new(crate::node::Watched::new());
    let (poll, grace) = (Duration::from_millis(10), Duration::from_secs(1));
    Race::start(&specs, Mode::ByBlock, poll, grace, Limits::default(), health, &watched)
}

#[test]
fn wins_and_leads_are_counted_per_source_once_per_line() {
    let tmp = tempfile::tempdir().unwrap();
    let health = Health::new(Duration::from_secs(5));
    let mut race = two_sources(tmp.path(), &health);
    let mut applied = Vec::new();
    let mut feed = |race: &mut Race, src: usize, l: Raced| {
        race.on_line(src, l, 9, &health, &mut |w| applied.push(w.line.meta.height));
    };
    const MS: i64 = 1_000_000;
    // Block 10: a first, b 30 ms later, then b again (a re-read after a restart): one lead, for a.
    feed(&mut race, 0, raced(&diffs_line(10, "1", "1.0"), 1_000 * MS));
    feed(&mut race, 1, raced(&diffs_line(10, "2", "1.0"), 1_030 * MS));
    feed(&mut race, 1, raced(&diffs_line(10, "3", "1.0"), 1_500 * MS));
    // Block 11: b first by 5 ms.
    feed(&mut race, 1, raced(&diffs_line(11, "4", "1.0"), 2_000 * MS));
    feed(&mut race, 0, raced(&diffs_line(11, "5", "1.0"), 2_005 * MS));
    // Block 12: only a delivers (b dropped it): a wins, no lead is known.
    feed(&mut race, 0, raced(&diffs_line(12, "6", "1.0"), 3_000 * MS));
    assert_eq!(applied, [10, 11, 12], "each line applied once, from its winner");

    let [a, b] = [&race.entries[0], &race.entries[1]];
    assert_eq!((a.wins(Stream::Diffs), b.wins(Stream::Diffs)), (2, 1));
    assert_eq!((a.wins(Stream::Fills), b.wins(Stream::Statuses)), (0, 0));
    let (la, lb) = (&a.leads()[Stream::Diffs.index()], &b.leads()[Stream::Diffs.index()]);
    assert_eq!((la.len(), lb.len()), (1, 1), "one lead per line that had a copy");
    assert!(la.equivalent(la.max(), (30 * MS) as u64), "a led by 30 ms: {}", la.max());
    assert!(lb.equivalent(lb.max(), (5 * MS) as u64), "b led by 5 ms: {}", lb.max());
    assert_eq!((a.copies.get(), b.copies.get()), (1, 2));
    assert_eq!(health.counters().disagreements.get(), 0);

    let recent = race.board.recent();
    let heights: Vec<u64> = recent.iter().map(|r| r.height).collect();
    assert_eq!(heights, [10, 11, 12]);
    let d = Stream::Diffs.index();
    assert_eq!(recent[0].lines[d], Some((0, Some(30 * MS))));
    assert_eq!(recent[1].lines[d], Some((1, Some(5 * MS))));
    assert_eq!(recent[2].lines[d], Some((0, None)));
}

#[test]
fn a_differing_copy_names_both_sources_and_blames_neither() {
    let tmp = tempfile::tempdir().unwrap();
    let health = Health::new(Duration::from_secs(5));
    let mut race = two_sources(tmp.path(), &health);
    let mut applied = 0;
    race.on_line(0, raced(&diffs_line(10, "1", "1.0"), 1_000), 9, &health, &mut |_| applied += 1);
    race.on_line(1, raced(&diffs_line(10, "2", "2.0"), 2_000), 9, &health, &mut |_| applied += 1);
    assert_eq!(applied, 1, "the differing copy is not applied");
    // The first copy is as likely to be the wrong one: both sources count it, and both are named.
    assert_eq!(race.entries[1].disagreements.get(), 1);
    assert_eq!(race.entries[0].disagreements.get(), 1);
    assert_eq!(health.counters().disagreements.get(), 1);
    let d = race.board.disagreements();
    let names = [race.entries[0].name.clone(), race.entries[1].name.clone()];
    assert_eq!((d.len(), d[0].height, d[0].stream, &d[0].sources), (1, 10, Stream::Diffs, &names));
    let coins: Vec<String> = race.take_distrusted().iter().map(std::string::ToString::to_string).collect();
    assert_eq!(coins, ["BTC"]);
    assert_eq!(race.entries[0].leads()[Stream::Diffs.index()].len(), 1, "a disagreeing copy still times the lead");
}

#[test]
fn a_block_lost_whole_by_the_only_live_source_is_given_up_after_one_grace() {
    let tmp = tempfile::tempdir().unwrap();
    let health = Health::new(Duration::from_secs(5));
    let mut race = two_sources(tmp.path(), &health);
    // Source a stopped for good at block 9; source b moved past block 10 in every stream without writing it.
    race.seen = vec![[9; 3], [11; 3]];
    let start = std::time::Instant::now();
    let lost = loop {
        let lost = race.lost(10, [false; 3], 1, &health);
        if !lost.is_empty() || start.elapsed() > Duration::from_secs(30) {
            break lost;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // Each missing stream used to restart the one timer, so it never ran out and the books stayed stale.
    assert_eq!(lost, Stream::ALL.to_vec(), "all three streams given up together");
    assert!(start.elapsed() >= race.grace, "not before the grace");
}

#[test]
fn a_line_too_far_ahead_is_refused_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let health = Health::new(Duration::from_secs(5));
    let mut race = two_sources(tmp.path(), &health);
    let jump = race.limits.max_height_jump;
    let mut applied = Vec::new();
    race.on_line(1, raced(&diffs_line(9 + jump + 1, "1", "1.0"), 1_000), 9, &health, &mut |w| {
        applied.push(w.line.meta.height);
    });
    assert!(applied.is_empty(), "not applied");
    assert_eq!(race.seen[1], [0; 3], "the source is not taken to have moved past every block up to it");
    assert_eq!(health.counters().lines_too_far_ahead.get(), 1);
    assert_eq!(race.entries[1].refused.get(), 1);
    assert!(race.lost(10, [false; 3], 0, &health).is_empty(), "nothing is lost for it");
    race.on_line(1, raced(&diffs_line(9 + jump, "2", "1.0"), 2_000), 9, &health, &mut |w| {
        applied.push(w.line.meta.height);
    });
    assert_eq!(applied, [9 + jump], "a line at the limit is taken");
}

#[test]
fn a_missing_block_is_lost_once_the_parked_blocks_reach_the_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let health = Health::new(Duration::from_secs(5));
    let mut race = two_sources(tmp.path(), &health);
    // Neither source has moved past block 10's statuses line: within the grace, it is waited for...
    race.seen = vec![[9; 3], [9; 3]];
    let max = race.limits.race_max_parked_blocks;
    let have = [true, true, false];
    assert!(race.lost(10, have, max - 1, &health).is_empty());
    assert_eq!(health.counters().parked_blocks_full.get(), 0);
    // ...until as many later blocks wait for it as the bound allows: then it is lost at once, not parked further.
    assert_eq!(race.lost(10, have, max, &health), [Stream::Statuses]);
    assert_eq!(health.counters().parked_blocks_full.get(), 1);
}

#[test]
fn a_line_refused_as_too_long_is_taken_from_the_other_source() {
    let tmp = tempfile::tempdir().unwrap();
    let health = Health::new(Duration::from_secs(5));
    let mut race = two_sources(tmp.path(), &health);
    let refused = Raced {
        stream: Stream::Diffs,
        height: 10,
        digest: 0,
        read_at: 1_000,
        parsed: Parsed::TooLong,
        off_layout: false,
        bytes: 0,
    };
    let mut applied = Vec::new();
    race.on_line(0, refused, 9, &health, &mut |w| applied.push(w.line.meta.height));
    assert_eq!(health.counters().lines_too_long.get(), 1);
    assert_eq!(race.seen[0][Stream::Diffs.index()], 10, "source a moved past it");
    assert!(race.lost(10, [true, false, true], 0, &health).is_empty(), "b may still deliver it, within the grace");
    race.on_line(1, raced(&diffs_line(10, "2", "1.0"), 2_000), 9, &health, &mut |w| applied.push(w.line.meta.height));
    assert_eq!(applied, [10], "b's copy is applied");
}
