//! `hlbook replay` as an operator runs it: output shape, mode agreement, and exit status on bad captures.

// Both helpers carry the (stateless) skip module.
#[allow(clippy::duplicate_mod)]
mod common;
mod plain_book;
#[allow(clippy::duplicate_mod)]
mod procs;

use std::path::Path;
use std::process::Output;

use procs::hlbook;

fn replay(snapshot: &Path, node_dir: &Path, extra: &[&str]) -> Output {
    let (s, d) = (snapshot.to_str().unwrap(), node_dir.to_str().unwrap());
    let mut args = vec!["replay", "--snapshot", s, "--node-dir", d];
    args.extend_from_slice(extra);
    hlbook(&args)
}

fn json_lines(out: &Output) -> Vec<serde_json::Value> {
    assert!(out.status.success(), "failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout.clone()).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn prints_one_l2_line_per_block_identical_in_both_modes() {
    let Some(cap) = common::unpack() else { return };
    let by_block = json_lines(&replay(&cap.snapshot, &cap.node_dir, &["--print", "l2", "--coin", "BTC"]));
    let streaming =
        json_lines(&replay(&cap.snapshot, &cap.node_dir, &["--print", "l2", "--coin", "BTC", "--mode", "streaming"]));
    assert_eq!((by_block.len(), streaming.len()), (51, 51));
    for (b, s) in by_block.iter().zip(&streaming) {
        assert_eq!(b["height"], s["height"]);
        assert_eq!(b["l2Book"]["levels"], s["l2Book"]["levels"], "height {}", b["height"]);
        let h = b["height"].as_u64().unwrap();
        // The BTC-only streaming capture has no line at all for these two heights, so nothing dates them: they
        // carry the previous block's time.
        if h == 985148193 || h == 985148228 {
            assert!(s["l2Book"]["time"].as_u64() < b["l2Book"]["time"].as_u64());
        } else {
            assert_eq!(b["l2Book"]["time"], s["l2Book"]["time"], "height {h}");
        }
    }
    let heights: Vec<u64> = by_block.iter().map(|v| v["height"].as_u64().unwrap()).collect();
    assert_eq!(heights, (985148182..=985148232).collect::<Vec<_>>());
    let last = &by_block[50]["l2Book"];
    assert_eq!(last["coin"], "BTC");
    // The best bid from the test's own rebuild of the book from the files (plain_book.rs).
    let (px, sz, n) = plain_book::PlainBook::at_end(&cap.snapshot, &cap.node_dir).best_bid();
    assert_eq!(last["levels"][0][0], serde_json::json!({"px": px, "sz": sz, "n": n}));
    assert_eq!(last["levels"][0].as_array().unwrap().len(), 20);
    // time is the block time in ms: the first line's `block_time` is 2026-05-05T17:39:13.024084407 (UTC).
    assert_eq!(by_block[0]["l2Book"]["time"], 1_778_002_753_024u64);
}

#[test]
fn aggregated_bbo_and_summary_views() {
    let Some(cap) = common::unpack() else { return };
    let agg = json_lines(&replay(
        &cap.snapshot,
        &cap.node_dir,
        &["--print", "l2", "--n-sig-figs", "5", "--mantissa", "2", "--n-levels", "3"],
    ));
    let levels = &agg[50]["l2Book"]["levels"];
    assert_eq!(levels[0].as_array().unwrap().len(), 3);
    // BTC at 81307 with 5 figures and mantissa 2: a grid of 2, bids rounded down.
    assert_eq!(levels[0][0]["px"], "81306.0");
    // The best bid and the order count from the test's own rebuild of the book from the files (plain_book.rs).
    let plain = plain_book::PlainBook::at_end(&cap.snapshot, &cap.node_dir);
    let (px, sz, n) = plain.best_bid();
    let bbo = json_lines(&replay(&cap.snapshot, &cap.node_dir, &["--print", "bbo"]));
    assert_eq!(bbo[50]["bbo"]["bbo"][0], serde_json::json!({"px": px, "sz": sz, "n": n}));
    let summary = json_lines(&replay(&cap.snapshot, &cap.node_dir, &["--mode", "streaming"]));
    assert_eq!(summary[50]["orders"], plain.len());
    assert_eq!(summary[50]["totals"]["inconsistencies"], 0);
}

const HEAD: &str = r#""local_time":"2026-05-05T17:39:13.394386432","block_time":"2026-05-05T17:39:13.024084407""#;

/// A one-order snapshot at height 10 and a by-block node dir with the given lines per stream.
fn tiny_capture(dir: &Path, diffs: &[&str], statuses: &[&str]) {
    let snap = r#"[10,[["BTC",[[["0x1c1c270b573d55b68b3d14722b5d5d401511bed0",{"coin":"BTC","side":"B","limitPx":"100.0","sz":"1.0","oid":1,"timestamp":1,"triggerCondition":"N/A","isTrigger":false,"triggerPx":"0.0","children":[],"isPositionTpsl":false,"reduceOnly":false,"orderType":"Limit","origSz":"1.0","tif":"Gtc","cloid":null}]],[]]]]]"#;
    std::fs::write(dir.join("snap.json"), snap).unwrap();
    let line = |h: usize, events: &str| format!("{{{HEAD},\"block_number\":{},\"events\":[{events}]}}\n", 11 + h);
    for (name, events) in
        [("raw_book_diffs", diffs), ("order_statuses", statuses), ("fills", &vec![""; diffs.len()][..])]
    {
        let d = dir.join(format!("node_{name}_by_block/hourly/20260505"));
        std::fs::create_dir_all(&d).unwrap();
        let text: String = events.iter().enumerate().map(|(h, e)| line(h, e)).collect();
        std::fs::write(d.join("17"), text).unwrap();
    }
}

#[test]
fn exits_non_zero_on_an_inconsistency() {
    let dir = tempfile::tempdir().unwrap();
    let remove_unknown = r#"{"user":"0x1c1c270b573d55b68b3d14722b5d5d401511bed0","oid":99,"coin":"BTC","side":"B","px":"100.0","raw_book_diff":"remove"}"#;
    tiny_capture(dir.path(), &[remove_unknown, ""], &["", ""]);
    let out = replay(&dir.path().join("snap.json"), dir.path(), &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("1 inconsistencies; untrusted coins: BTC"), "{err}");
    assert!(err.contains("oid 99"), "{err}");
    // Both blocks were still printed.
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 2);
}

#[test]
fn exits_non_zero_on_a_lost_line_or_a_malformed_line() {
    let dir = tempfile::tempdir().unwrap();
    tiny_capture(dir.path(), &["", ""], &[""]);
    let out = replay(&dir.path().join("snap.json"), dir.path(), &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("block 12 is incomplete: no line from order_statuses"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    tiny_capture(dir.path(), &["", r#"{"oops""#], &["", ""]);
    let out = replay(&dir.path().join("snap.json"), dir.path(), &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("hourly/20260505/17:2: malformed raw_book_diffs line"), "{err}");
}

#[test]
fn refuses_bad_arguments_with_a_clear_error() {
    let out = hlbook(&["replay", "--snapshot", "x", "--node-dir", "y", "--n-sig-figs", "7"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nSigFigs must be 2, 3, 4, 5 or null, got 7"));
    let out = hlbook(&["replay", "--snapshot", "/nonexistent.json", "--node-dir", "/tmp"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot open snapshot /nonexistent.json"));
}
