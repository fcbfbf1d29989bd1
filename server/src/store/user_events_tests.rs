use std::sync::atomic::Ordering::Relaxed;

use super::*;
use crate::store::candle::DAY;

const A: [u8; 20] = [0xa1; 20];
const B: [u8; 20] = [0xb2; 20];
/// 2026-05-05 00:00 UTC.
const T0: i64 = 1_777_939_200_000;

fn entry(user: [u8; 20], kind: EntryKind, time_ms: i64, text: &str) -> NewEntry {
    NewEntry { user, kind, time_ms, bytes: text.as_bytes().to_vec() }
}

fn block(height: u64, time_ms: i64, entries: Vec<NewEntry>) -> EntryBlock {
    EntryBlock { height, time_ms, entries }
}

fn texts(v: &[Entry]) -> Vec<String> {
    v.iter().map(|e| String::from_utf8(e.bytes.to_vec()).unwrap()).collect()
}

fn commit(store: &Store, height: u64, blocks: &[EntryBlock]) -> u64 {
    store.commit_user_entries(&Commit { stream: "misc", height, blocks, ..Commit::default() }).unwrap()
}

#[test]
fn a_users_entries_read_back_by_kind_and_time_oldest_or_newest_first_across_days() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.stream_height("misc"), 0);
    let blocks = [
        block(10, T0 - 1, vec![entry(A, EntryKind::Funding, T0 - 1, "f1"), entry(B, EntryKind::Funding, T0 - 1, "b1")]),
        // Two entries of one user in one block are both kept, in the block's order.
        block(11, T0 + 5, vec![entry(A, EntryKind::Ledger, T0 + 5, "l1"), entry(A, EntryKind::Ledger, T0 + 5, "l2")]),
        block(12, T0 + DAY, vec![entry(A, EntryKind::Funding, T0 + DAY, "f2")]),
    ];
    assert_eq!(commit(&store, 12, &blocks), 5);
    assert_eq!((store.stream_height("misc"), store.stream_last_ms("misc")), (12, T0 + DAY));
    let all = (i64::MIN + 1, i64::MAX);
    let read = |kind, range, limit, newest| texts(&store.user_entries(&A, kind, range, limit, newest).unwrap());
    assert_eq!(read(EntryKind::Funding, all, 10, false), ["f1", "f2"], "two days, ascending");
    assert_eq!(read(EntryKind::Funding, all, 10, true), ["f2", "f1"]);
    assert_eq!(read(EntryKind::Funding, all, 1, false), ["f1"], "the oldest of the range");
    assert_eq!(read(EntryKind::Funding, all, 1, true), ["f2"], "the newest");
    assert_eq!(read(EntryKind::Ledger, all, 10, false), ["l1", "l2"]);
    assert_eq!(read(EntryKind::Funding, (T0, T0 + DAY), 10, false), ["f2"], "from startTime, endTime included");
    assert_eq!(read(EntryKind::Funding, (T0, T0 + DAY - 1), 10, false), Vec::<String>::new());
    assert!(read(EntryKind::TwapHistory, all, 10, false).is_empty());
    let b = store.user_entries(&B, EntryKind::Funding, all, 10, false).unwrap();
    assert_eq!((texts(&b), b[0].height, b[0].time_ms), (vec!["b1".to_string()], 10, T0 - 1));
    let upto = |h, limit| texts(&store.user_entries_upto(&A, EntryKind::Funding, h, limit).unwrap());
    assert_eq!(
        (upto(11, 10), upto(12, 10), upto(12, 1)),
        (vec!["f1".into()], vec!["f2".into(), "f1".into()], vec!["f2".into()])
    );
    // A later commit never moves the height back.
    commit(&store, 5, &[]);
    assert_eq!(store.stream_height("misc"), 12);
    assert_eq!(store.user_entries_table_bytes().unwrap()["entries"], 5);
}

#[test]
fn followed_mode_keeps_followed_users_from_when_they_were_followed_and_retention_cuts_old_days() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    store.follow_only(10).unwrap();
    store.status.retention_days.store(3, Relaxed);
    let keep: FxHashSet<[u8; 20]> = [A].into_iter().collect();
    let blocks = [
        block(1, T0 - 5 * DAY, vec![entry(A, EntryKind::Funding, T0 - 5 * DAY, "too old")]),
        block(2, T0, vec![entry(A, EntryKind::Funding, T0, "a"), entry(B, EntryKind::Funding, T0, "b")]),
    ];
    let c = Commit {
        stream: "misc",
        height: 2,
        blocks: &blocks,
        keep: Some(&keep),
        new_users: &[A],
        since_ms: T0 - 5 * DAY,
        cutoff_day: day_of(T0 - 3 * DAY),
        ..Commit::default()
    };
    assert_eq!(store.commit_user_entries(&c).unwrap(), 1);
    let all = (i64::MIN + 1, i64::MAX);
    assert_eq!(texts(&store.user_entries(&A, EntryKind::Funding, all, 10, false).unwrap()), ["a"]);
    assert!(store.user_entries(&B, EntryKind::Funding, all, 10, false).unwrap().is_empty());
    let now = T0 + 60_000;
    assert_eq!(store.user_entries_whole_from("misc", &A, now, now), Some(now - 3 * DAY), "retention");
    assert_eq!(store.user_entries_whole_from("misc", &B, now, now), None, "not followed");
    let later = Commit { stream: "misc", height: 3, new_users: &[B], since_ms: T0 + 1000, ..Commit::default() };
    store.commit_user_entries(&later).unwrap();
    assert_eq!(store.user_entries_whole_from("misc", &B, now, now), Some(T0 + 1000), "followed later: from then");
    // Dropped: not whole any more (its entries stay until retention).
    store.commit_user_entries(&Commit { stream: "misc", height: 3, dropped_users: &[A], ..Commit::default() }).unwrap();
    assert_eq!(store.user_entries_whole_from("misc", &A, now, now), None);
    assert_eq!(store.user_entries_since_users("misc").unwrap(), [B]);
}

#[test]
fn a_hole_or_the_retention_cut_moves_where_the_whole_history_starts() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.user_entries_whole_from("misc", &A, T0, T0), None, "no block yet");
    store.status.retention_days.store(30, Relaxed);
    commit(&store, 1, &[block(1, T0, vec![])]);
    let later = T0 + DAY;
    assert_eq!(store.user_entries_whole_from("misc", &A, later, later), Some(T0), "every user's, from the first");
    assert_eq!(store.user_entries_whole_from("misc", &A, later, T0 + 40 * DAY), Some(T0 + 10 * DAY), "retention");
    let gap = Commit { stream: "misc", height: 5, gap: Some((T0 + 10, T0 + 20)), ..Commit::default() };
    store.commit_user_entries(&gap).unwrap();
    assert_eq!(store.user_entries_whole_from("misc", &A, later, later), Some(T0 + 20), "after the hole");
    assert_eq!(store.user_entries_whole_from("misc", &A, T0 + 5, later), Some(T0), "a range ending before it");
    assert_eq!(store.user_entries_whole_from("twap", &A, later, later), None, "another stream");
}
