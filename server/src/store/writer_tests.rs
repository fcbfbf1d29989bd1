use std::path::Path;

use super::*;
use crate::node::{Address, Fill, Fixed, Side};
use crate::store::candle::MINUTE;

const A: &str = "0x5eaac7c475b1fad85701f02c4e9e796a53f94bd5";
const B: &str = "0x1624aac7c475b1fad85701f02c4e9e796a53f94b";
/// 2026-05-05T09:00:00 UTC.
const T0: i64 = 1_777_971_600_000;

fn addr(s: &str) -> Address {
    Address::parse(s).unwrap()
}

/// A fill object as the node writes it.
fn raw(tid: u64, time: i64, px: &str) -> String {
    format!(r#"{{"coin":"BTC","px":"{px}","sz":"0.5","side":"B","time":{time},"tid":{tid},"oid":{tid}}}"#)
}

/// A fills step of block `h` at `T0 + h` seconds with one trade (both sides: A buys from B) per tid.
fn step(h: u64, tids: &[u64]) -> Arc<Step> {
    let time = T0 + h as i64 * 1000;
    let mut fills = Vec::new();
    let mut users = Vec::new();
    for &tid in tids {
        for user in [A, B] {
            let px = Fixed::parse(&format!("{}.0", 100 + tid)).unwrap();
            fills.push(Fill {
                coin: "BTC".into(),
                user: addr(user),
                px,
                sz: Fixed::parse("0.5").unwrap(),
                side: Side::Bid,
                time,
                hash: Default::default(),
                oid: tid,
                crossed: user == A,
                tid,
            });
            users.push((addr(user), Arc::from(raw(tid, time, &format!("{}.0", 100 + tid)).as_str())));
        }
    }
    let data = StepData::Fills { fills, users, generation: None, liquidations: Vec::new() };
    Arc::new(Step { seq: h, height: h, block_time: time * 1_000_000, data })
}

/// The node's fills file line of the same block.
fn line(h: u64, tids: &[u64]) -> String {
    let time = T0 + h as i64 * 1000;
    let t = crate::node::time::format_node_time(time * 1_000_000);
    let ev: Vec<String> = tids
        .iter()
        .flat_map(|tid| [A, B].map(|u| format!(r#"["{u}",{}]"#, raw(*tid, time, &format!("{}.0", 100 + tid)))))
        .collect();
    format!(r#"{{"local_time":"{t}","block_time":"{t}","block_number":{h},"events":[{}]}}"#, ev.join(","))
}

fn write_files(dir: &Path, heights: std::ops::RangeInclusive<u64>) {
    let hourly = dir.join("node_fills_by_block/hourly/20260505");
    std::fs::create_dir_all(&hourly).unwrap();
    let text: String = heights.map(|h| line(h, &[h * 10, h * 10 + 1]) + "\n").collect();
    std::fs::write(hourly.join("9"), text).unwrap();
}

fn writer(dir: &Path, files: Option<&Path>) -> Writer {
    let store = Store::open(&dir.join("store")).unwrap();
    let files = files.map(|f| FillsDir { node_dir: f.to_path_buf(), mode: Mode::ByBlock, max_line_bytes: 1 << 20 });
    Writer::new(store, files, 30)
}

fn run(w: &mut Writer, msgs: Vec<StoreMsg>) {
    for m in msgs {
        w.take(m);
    }
    w.settle(&AtomicBool::new(false)).unwrap();
}

#[test]
fn live_blocks_become_candles_and_fills_once_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = writer(dir.path(), None);
    // The first step after a break is not trusted; with no files here its block is a hole before the store.
    run(
        &mut w,
        vec![
            StoreMsg::Gap,
            StoreMsg::Step(step(1, &[1])),
            StoreMsg::Step(step(2, &[2, 3])),
            StoreMsg::Step(step(3, &[4])),
        ],
    );
    assert_eq!(w.store.height(), 0, "nothing is whole yet");
    run(&mut w, vec![StoreMsg::Complete(2)]);
    assert_eq!(w.store.height(), 2);
    let n = w.store.newest("BTC", &[Interval::M1, Interval::W1]).unwrap();
    assert_eq!(n.height, 2);
    let c = n.candles[0].unwrap();
    assert_eq!((c.n, c.o, c.c, c.t), (2, Fixed::parse("102.0").unwrap(), Fixed::parse("103.0").unwrap(), T0));
    assert_eq!(n.candles[1].unwrap().t % (7 * 86_400_000), 0);
    assert_eq!(n.coverage.first_ms, T0 + 2000, "the store begins with block 2");
    run(&mut w, vec![StoreMsg::Complete(3)]);
    let fills = w.store.user_fills(&addr(A), u64::MAX, 10).unwrap();
    assert_eq!(fills.len(), 3, "{fills:?}");
    assert!(fills[2].contains(r#""tid":4"#), "oldest first");
    assert_eq!(w.store.user_fills(&addr(A), 3, 10).unwrap().len(), 2, "blocks below 3 only");
    assert_eq!(w.store.user_fills(&addr(A), u64::MAX, 1).unwrap().len(), 1);
}

#[test]
fn a_first_start_backfills_every_file_and_a_restart_catches_up_after_its_height() {
    let dir = tempfile::tempdir().unwrap();
    let node = dir.path().join("node");
    write_files(&node, 1..=50);
    {
        let mut w = writer(dir.path(), Some(&node));
        run(&mut w, vec![StoreMsg::Complete(30)]);
        assert_eq!(w.store.height(), 30);
    }
    // Reopened (as after a kill): the store goes on from 31 with the files, the live steps from 41.
    let mut w = writer(dir.path(), Some(&node));
    assert_eq!(w.store.height(), 30);
    run(
        &mut w,
        vec![
            StoreMsg::Gap,
            StoreMsg::Step(step(40, &[400, 401])),
            StoreMsg::Step(step(41, &[410, 411])),
            StoreMsg::Complete(41),
        ],
    );
    assert_eq!(w.store.height(), 41);
    let n = w.store.newest("BTC", &[Interval::H1]).unwrap();
    // Blocks 1..=41, two trades each, every one counted once: 82 trades in the hour.
    assert_eq!(n.candles[0].unwrap().n, 82);
    assert_eq!(n.coverage, crate::store::Coverage { first_ms: T0 + 1000, ..Default::default() });
    let m1 = w.store.candles("BTC", Interval::M1, (0, i64::MAX), 10).unwrap();
    assert_eq!(m1.len(), 1);
    assert_eq!(w.store.user_fills(&addr(B), u64::MAX, 1000).unwrap().len(), 82);
}

#[test]
fn blocks_nobody_can_read_back_are_a_gap_and_candles_over_it_are_partial() {
    let dir = tempfile::tempdir().unwrap();
    let node = dir.path().join("node");
    write_files(&node, 1..=10);
    let mut w = writer(dir.path(), Some(&node));
    run(&mut w, vec![StoreMsg::Complete(10)]);
    // The node's files lost 11..=69; live steps resume at 70.
    run(
        &mut w,
        vec![StoreMsg::Gap, StoreMsg::Step(step(69, &[690])), StoreMsg::Step(step(70, &[700])), StoreMsg::Complete(70)],
    );
    assert_eq!(w.store.height(), 70);
    let cov = w.store.coverage();
    assert_eq!(cov.gaps, vec![(T0 + 10_000, T0 + 70_000)]);
    let h1 = w.store.newest("BTC", &[Interval::H1, Interval::M1]).unwrap();
    assert_eq!(cov.partial_from(&h1.candles[0].unwrap()), Some(T0 + 1000), "the store began inside the hour");
    assert_eq!(cov.partial_from(&h1.candles[1].unwrap()), Some(T0 + 70_000), "the minute overlaps the hole");
    let before = w.store.candles("BTC", Interval::M1, (0, T0), 10).unwrap();
    assert_eq!(cov.partial_from(&before[0]), Some(T0 + 1000), "the store began inside the first minute");
    let later = Candle { t: T0 + 2 * MINUTE, close_time: T0 + 3 * MINUTE - 1, ..h1.candles[1].unwrap() };
    assert_eq!(cov.partial_from(&later), None);
}

#[test]
fn fills_past_the_retention_go_by_whole_days() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("store")).unwrap();
    let mut w = Writer::new(store, None, 1);
    w.live_from = Some(1);
    let day = 86_400_000;
    let mut at = |h: u64, ms: i64| {
        let mut s = Arc::try_unwrap(step(h, &[h])).unwrap();
        s.block_time = ms * 1_000_000;
        run(&mut w, vec![StoreMsg::Step(Arc::new(s)), StoreMsg::Complete(h)]);
    };
    at(1, T0);
    at(2, T0 + day);
    at(3, T0 + 2 * day + 1);
    let left = w.store.user_fills(&addr(A), u64::MAX, 10).unwrap();
    assert_eq!(left.len(), 2, "the first day is gone: {left:?}");
    assert!(left[0].contains(r#""tid":2"#), "{left:?}");
}

#[test]
fn followed_mode_keeps_followed_users_and_reads_a_new_one_back_from_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let node = dir.path().join("node");
    write_files(&node, 1..=8);
    let store = Store::open(&dir.path().join("store")).unwrap();
    store.follow_only(10).unwrap();
    assert_eq!(store.follow.follow(&addr(A).0), follow::Follow::New);
    let fd = FillsDir { node_dir: node.clone(), mode: Mode::ByBlock, max_line_bytes: 1 << 20 };
    let mut w = Writer::new(store.clone(), Some(fd.clone()), 30);
    run(&mut w, vec![StoreMsg::Complete(5)]);
    let fills = |u: &str| store.user_fills(&addr(u), u64::MAX, 1000).unwrap();
    assert_eq!(fills(A).len(), 10, "A's fills of blocks 1..=5, from the files");
    assert!(fills(B).is_empty(), "B is not followed");
    // B followed: live blocks from the next commit on hold B's, earlier ones are read back from the files.
    assert_eq!(store.follow.follow(&addr(B).0), follow::Follow::New);
    let steps = (6..=8).map(|h| StoreMsg::Step(step(h, &[h * 10, h * 10 + 1])));
    run(&mut w, [StoreMsg::Gap].into_iter().chain(steps).chain([StoreMsg::Complete(8)]).collect());
    assert_eq!(store.height(), 8);
    let live = fills(B).len();
    assert!(live > 0 && live < 16, "B's live fills only: {live}");
    follow::read_back(&store, &fd, (&[addr(B).0], 8), 30, &AtomicBool::new(false)).unwrap();
    let want: Vec<String> = (1..=8)
        .flat_map(|h| [h * 10, h * 10 + 1].map(|t| raw(t, T0 + h as i64 * 1000, &format!("{}.0", 100 + t))))
        .collect();
    assert_eq!(fills(B).iter().map(ToString::to_string).collect::<Vec<_>>(), want, "every B fill once, in order");
    assert_eq!(fills(A).len(), 16, "A's untouched by the merge");
    drop(w);
    // The followed set is the store's: a restart keeps following both.
    let stored = follow::stored(&store).unwrap();
    assert_eq!(stored.len(), 2, "{stored:?}");
}

#[test]
fn a_dropped_user_leaves_the_writers_filter_and_the_followed_table() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("store")).unwrap();
    store.follow_only(1).unwrap();
    assert_eq!(store.follow.follow(&addr(A).0), follow::Follow::New);
    let mut w = Writer::new(store.clone(), None, 30);
    run(&mut w, (1..=3).map(|h| StoreMsg::Step(step(h, &[h * 10]))).chain([StoreMsg::Complete(3)]).collect());
    let fills = |u: &str| store.user_fills(&addr(u), u64::MAX, 1000).unwrap().len();
    let kept = fills(A);
    assert!(kept > 0 && fills(B) == 0, "A followed, B not");
    // Nobody holds A (no subscriber, read back): B takes its place.
    assert_eq!(store.follow.follow(&addr(B).0), follow::Follow::New);
    run(&mut w, (4..=5).map(|h| StoreMsg::Step(step(h, &[h * 10]))).chain([StoreMsg::Complete(5)]).collect());
    assert_eq!((fills(A), fills(B)), (kept, 2), "A's fills up to its drop stay; B's from its follow on");
    let stored = follow::stored(&store).unwrap();
    assert_eq!(stored.iter().map(|s| s.user).collect::<Vec<_>>(), [addr(B).0], "{stored:?}");
    assert!(stored[0].seen_ms > 0, "when B was wanted is kept: {stored:?}");
    store.follow.subscribed(&addr(B).0);
    assert_eq!(store.follow.follow(&addr(A).0), follow::Follow::Refused { max: 1 }, "B has a subscriber");
}

#[test]
fn a_whole_block_waits_for_its_fills_lines_that_come_after_it_is_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = writer(dir.path(), None);
    run(&mut w, vec![StoreMsg::Step(step(1, &[10])), StoreMsg::Complete(1)]);
    // Streaming: block 3 is whole by its diffs and statuses while its second fills line is still unread.
    let second = step(3, &[31]);
    let msgs = vec![
        StoreMsg::Step(step(2, &[20])),
        StoreMsg::Step(step(3, &[30])),
        StoreMsg::FillsThrough(2),
        StoreMsg::Complete(3),
    ];
    run(&mut w, msgs);
    assert_eq!(w.store.height(), 2, "block 3 waits for its fills");
    run(&mut w, vec![StoreMsg::Step(second), StoreMsg::FillsThrough(3)]);
    assert_eq!(w.store.height(), 3);
    let tids: Vec<String> =
        w.store.user_fills(&addr(A), u64::MAX, 10).unwrap().iter().map(ToString::to_string).collect();
    assert!(tids.iter().any(|f| f.contains(r#""tid":31"#)), "the late line's fill is stored: {tids:?}");
    // Block 1 (the first step after start) is not trusted and there are no files: trades 20, 30 and 31 count.
    let c = w.store.newest("BTC", &[Interval::M1]).unwrap().candles[0].unwrap();
    assert_eq!((c.n, c.c), (3, Fixed::parse("131.0").unwrap()), "block 3's late trade counted, in order");
    assert_eq!(w.store.status.late_fills.load(Relaxed), 0);
    // A line of a block already written (here: past the wait) cannot join it: counted, not stored.
    run(&mut w, vec![StoreMsg::Step(step(2, &[21]))]);
    assert_eq!(w.store.status.late_fills.load(Relaxed), 1);
}

#[test]
fn only_the_newest_candles_of_each_fixed_interval_are_kept_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("store")).unwrap();
    let mut w = Writer::new(store, None, 30).keep_candles(3);
    w.live_from = Some(1);
    for h in 1..=6 {
        let mut s = Arc::try_unwrap(step(h, &[h])).unwrap();
        let at = T0 + h as i64 * MINUTE;
        s.block_time = at * 1_000_000;
        if let StepData::Fills { fills, .. } = &mut s.data {
            for f in fills.iter_mut() {
                f.time = at;
            }
        }
        run(&mut w, vec![StoreMsg::Step(Arc::new(s)), StoreMsg::Complete(h)]);
    }
    let m1 = w.store.candles("BTC", Interval::M1, (0, i64::MAX), 100).unwrap();
    assert_eq!(m1.iter().map(|c| c.t).collect::<Vec<_>>(), [4, 5, 6].map(|m| T0 + m * MINUTE), "the newest three");
    assert_eq!(w.store.candles("BTC", Interval::H1, (0, i64::MAX), 100).unwrap()[0].n, 6, "the hour keeps all");
}

#[test]
fn queued_read_backs_share_one_pass_and_mark_their_users_done() {
    let dir = tempfile::tempdir().unwrap();
    let node = dir.path().join("node");
    write_files(&node, 1..=5);
    let store = Store::open(&dir.path().join("store")).unwrap();
    store.follow_only(10).unwrap();
    let (tx, jobs) = follow::channel();
    tx.send((vec![addr(A).0], 3)).unwrap();
    tx.send((vec![addr(B).0], 5)).unwrap();
    drop(tx);
    let fd = FillsDir { node_dir: node, mode: Mode::ByBlock, max_line_bytes: 1 << 20 };
    follow::run_read_back(&store, Some(&fd), 30, &jobs, &AtomicBool::new(false));
    for u in [A, B] {
        assert_eq!(store.user_fills(&addr(u), u64::MAX, 100).unwrap().len(), 10, "{u}: blocks 1..=5");
    }
    let stored = follow::stored(&store).unwrap();
    assert_eq!(stored.iter().map(|s| s.to).collect::<Vec<_>>(), [5, 5], "read back up to 5: not again after a restart");
}
