use std::io::Write;
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;

use super::*;
use crate::ingest::side::MiscReader;
use crate::node::Address;
use crate::store::misc_writer::STREAM;
use crate::store::user_events::EntryKind;

const ALICE: &str = "0x00000000000000000000000000000000000000a1";
const BOB: &str = "0x00000000000000000000000000000000000000b2";

/// A by-block line of block `h` (second `h` of 2026-11-28 10:00 UTC): a funding of Alice and a deposit of Bob.
fn line(h: u64) -> String {
    let t = format!("2026-11-28T10:00:{:02}.000000000", h % 60);
    format!(
        r#"{{"local_time":"{t}","block_time":"{t}","block_number":{h},"events":[{{"time":"{t}","hash":"0x{z}","inner":{{"Funding":{{"deltas":[{{"user":"{ALICE}","coin":"BTC","funding_amount":"-1.{h}","szi":"2","funding_rate":"0.0000125"}}]}}}}}},{{"time":"{t}","hash":"0x{z}","inner":{{"LedgerUpdate":{{"users":["{BOB}"],"delta":{{"type":"deposit","usdc":"{h}.0"}}}}}}}}]}}"#,
        z = "0".repeat(64)
    )
}

fn append(dir: &Path, heights: impl IntoIterator<Item = u64>) {
    let folder = dir.join("misc_events_by_block/hourly/20261128");
    std::fs::create_dir_all(&folder).unwrap();
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(folder.join("10")).unwrap();
    for h in heights {
        writeln!(f, "{}", line(h)).unwrap();
    }
}

/// Reads what the files hold after the store's height and writes it, as `run` does once after a (re)start.
fn pass(store: &Store, dir: &Path) -> u64 {
    let mut w = MiscWriter::new(store, Mode::ByBlock, 36_500).unwrap();
    let mut r = MiscReader::new(dir, Mode::ByBlock, w.height());
    super::pass(&mut r, &mut w, crate::publish::misc_frames::entries_of).unwrap()
}

fn usdc(store: &Store, user: &str, kind: EntryKind) -> Vec<String> {
    let user = Address::parse(user).unwrap().0;
    let list = store.user_entries(&user, kind, (0, i64::MAX), 100, false).unwrap();
    list.iter()
        .map(|e| {
            let v: serde_json::Value = serde_json::from_slice(&e.bytes).unwrap();
            v["delta"]["usdc"].as_str().unwrap().to_string()
        })
        .collect()
}

#[test]
fn misc_files_are_stored_once_and_a_restart_continues_after_the_last_commit() {
    let (node, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = Store::open(state.path()).unwrap();
    append(node.path(), 1..=3);
    assert_eq!(pass(&store, node.path()), 6, "a funding and a deposit a block");
    assert_eq!(store.stream_height(STREAM), 3);
    assert_eq!(usdc(&store, ALICE, EntryKind::Funding), ["-1.1", "-1.2", "-1.3"]);
    assert_eq!(usdc(&store, BOB, EntryKind::Ledger), ["1.0", "2.0", "3.0"]);
    assert!(usdc(&store, BOB, EntryKind::Funding).is_empty());
    // A restart reads after height 3 only: nothing twice.
    append(node.path(), 4..=5);
    assert_eq!(pass(&store, node.path()), 4);
    assert_eq!(usdc(&store, ALICE, EntryKind::Funding), ["-1.1", "-1.2", "-1.3", "-1.4", "-1.5"]);
    let alice = Address::parse(ALICE).unwrap().0;
    let first = store.user_entries(&alice, EntryKind::Funding, (0, i64::MAX), 1, false).unwrap();
    let text = String::from_utf8(first[0].bytes.to_vec()).unwrap();
    assert!(text.starts_with(r#"{"time":1795860001000,"hash":"0x000"#), "{text}");
    assert!(text.ends_with(r#""delta":{"type":"funding","coin":"BTC","usdc":"-1.1","szi":"2.0","fundingRate":"0.0000125","nSamples":null}}"#), "{text}");
    assert_eq!(store.status.entries_written.load(Relaxed), 10);
}

#[test]
fn a_by_block_hole_is_recorded_and_followed_mode_keeps_followed_users_only() {
    let (node, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = Store::open(state.path()).unwrap();
    store.status.retention_days.store(36_500, Relaxed);
    store.follow_only(10).unwrap();
    let alice = Address::parse(ALICE).unwrap().0;
    store.follow.follow(&alice);
    append(node.path(), [1, 2, 5, 6]);
    assert_eq!(pass(&store, node.path()), 4, "Alice's fundings only");
    assert!(usdc(&store, BOB, EntryKind::Ledger).is_empty());
    let end = 1_795_860_010_000;
    // Blocks 3 and 4 are missing: whole only from block 5 on.
    assert_eq!(store.user_entries_whole_from(STREAM, &alice, end, end), Some(1_795_860_005_000));
    let bob = Address::parse(BOB).unwrap().0;
    assert_eq!(store.user_entries_whole_from(STREAM, &bob, end, end), None, "not followed");
}

#[test]
fn a_pass_over_more_than_a_batch_commits_every_block_once() {
    let (node, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = Store::open(state.path()).unwrap();
    // Two entries a block: the batch fills inside the run, and the rest is committed at its end.
    let n = (COMMIT_ENTRIES / 2 + 7) as u64;
    append(node.path(), 1..=n);
    assert_eq!(pass(&store, node.path()), 2 * n);
    assert_eq!(store.stream_height(STREAM), n);
    let bob = usdc(&store, BOB, EntryKind::Ledger);
    assert_eq!(bob.len(), 100, "the read's limit");
    let user = Address::parse(ALICE).unwrap().0;
    let all = store.user_entries(&user, EntryKind::Funding, (0, i64::MAX), usize::MAX, false).unwrap();
    // Read in time order (this file's block times wrap each minute): sorted, every block once.
    let mut heights: Vec<u64> = all.iter().map(|e| e.height).collect();
    heights.sort_unstable();
    assert!(heights == (1..=n).collect::<Vec<_>>(), "each block once across the batch boundary");
}
