//! The `liquidations` channel end to end (issue #47): `hlsim --write-liquidations` closes open positions with
//! market orders whose fills carry a `liquidation` object, `hlbook serve` follows it, and a client subscribes to
//! `liquidations` once the server is live and a few liquidations have been written. The test reads the fills files
//! itself (JSON values, none of hlbook's parsers) and requires that the snapshot and the live frames together are
//! a run of the files' liquidation fills, each once, in order, verbatim, reaching back over every one written
//! after the server went live and on to the last one written before the simulator stopped; in both node modes.
//! The same client follows every user's userEvents: the `liquidatedCanceled` statuses the simulator writes for a
//! liquidated user's resting orders reach it as `nonUserCancel` `[{coin, oid}]`, each once, in order.

mod procs;
mod wsclient;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use procs::{start_serve, start_sim, wait_health};
use serde_json::{Value, json};
use wsclient::raw::{self, Read, channel};

/// Every fill with a `liquidation` object in the fills files, in stream order: (height, user lower case, fill).
fn liquidations_in_files(data: &Path, mode: &str) -> Vec<(u64, String, Value)> {
    let dir = match mode {
        "by-block" => "node_fills_by_block",
        _ => "node_fills_streaming",
    };
    let mut out = Vec::new();
    for line in procs::node_json_lines(&data.join(dir)) {
        let h = line["block_number"].as_u64().unwrap();
        for ev in line["events"].as_array().unwrap() {
            if ev[1]["liquidation"].is_object() {
                out.push((h, ev[0].as_str().unwrap().to_lowercase(), ev[1].clone()));
            }
        }
    }
    out
}

/// Every `…Canceled` status other than the user's own in the statuses files, per user: (height, coin, oid).
fn non_user_cancels_in_files(data: &Path, mode: &str) -> BTreeMap<String, Vec<(u64, Value)>> {
    let dir = if mode == "by-block" { "node_order_statuses_by_block" } else { "node_order_statuses_streaming" };
    let mut out: BTreeMap<String, Vec<(u64, Value)>> = BTreeMap::new();
    for line in procs::node_json_lines(&data.join(dir)) {
        let h = line["block_number"].as_u64().unwrap();
        for ev in line["events"].as_array().unwrap() {
            let status = ev["status"].as_str().unwrap();
            if status.ends_with("Canceled") {
                let entry = json!({"coin": ev["order"]["coin"], "oid": ev["order"]["oid"]});
                out.entry(ev["user"].as_str().unwrap().to_lowercase()).or_default().push((h, entry));
            }
        }
    }
    out
}

/// The users with any event in the statuses files so far.
fn users_in_files(data: &Path, mode: &str) -> Vec<String> {
    let dir = if mode == "by-block" { "node_order_statuses_by_block" } else { "node_order_statuses_streaming" };
    let mut users: Vec<String> = procs::node_json_lines(&data.join(dir))
        .iter()
        .flat_map(|l| l["events"].as_array().unwrap().iter().map(|e| e["user"].as_str().unwrap().to_lowercase()))
        .collect();
    users.sort();
    users.dedup();
    users
}

fn newest_height(data: &Path, mode: &str) -> u64 {
    let dir = if mode == "by-block" { "node_fills_by_block" } else { "node_fills_streaming" };
    procs::node_json_lines(&data.join(dir)).iter().filter_map(|l| l["block_number"].as_u64()).max().unwrap_or(0)
}

/// The `{user, fill}` entries of a frame, checking its shape.
fn entries(frame: &Value) -> Vec<(String, Value)> {
    let list = frame["data"]["liquidations"].as_array().unwrap_or_else(|| panic!("liquidations: {frame}"));
    list.iter()
        .map(|e| {
            let keys: Vec<&String> = e.as_object().unwrap().keys().collect();
            assert_eq!(keys, ["user", "fill"], "each entry is {{user, fill}}: {e}");
            (e["user"].as_str().unwrap().to_string(), e["fill"].clone())
        })
        .collect()
}

fn every_liquidation_once_in_order(mode: &str) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // Three users, all followed: every rejection of theirs is decoded, so the rejection noise is cut to a tenth
    // of mainnet's (at mainnet's, 40 ms blocks write 100 MB/s of statuses, past what this rig parses watched).
    #[rustfmt::skip]
    let sim_args = ["--mode", mode, "--coins", "3", "--btc-orders", "300", "--orders-per-coin", "100",
        "--block-ms", "40", "--users", "3", "--reject-ratio", "2", "--write-liquidations"];
    let (mut sim, info) = start_sim(&data, &sim_args, &dir.path().join("sim.log"));
    let serve_args = ["--mode", mode];
    let mut server = start_serve(&data, &info, &dir.path().join("snaps"), &serve_args, &dir.path().join("serve.log"));
    let addr = server.wait_line("hlbook listening on", Duration::from_secs(60));
    wait_health(&procs::admin_base(&server), Duration::from_secs(60), |h| h["state"] == "live");
    // Every liquidation above this height was read by a live server: the snapshot must reach back over them.
    let live_from = newest_height(&data, mode) + 1;
    let deadline = Instant::now() + Duration::from_secs(60);
    while liquidations_in_files(&data, mode).iter().filter(|l| l.0 > live_from).count() < 2 {
        assert!(Instant::now() < deadline, "hlsim wrote fewer than 2 liquidation fills in 60 s");
        std::thread::sleep(Duration::from_millis(300));
    }
    let users = users_in_files(&data, mode);
    assert_eq!(users.len(), 3, "the simulator's three users have all had orders");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (frames, cancels) = rt.block_on(async {
        let mut ws = raw::connect(&addr, "", None).await;
        raw::subscribe(&mut ws, json!({"type": "liquidations"})).await;
        for u in &users {
            raw::subscribe(&mut ws, json!({"type": "userEvents", "user": u})).await;
        }
        let (mut frames, mut cancels) = (Vec::new(), Vec::new());
        let stop_at = tokio::time::Instant::now() + Duration::from_secs(6);
        let mut stopped = false;
        loop {
            // Once the simulator is stopped, everything it wrote arrives within a few quiet seconds.
            let wait = if stopped { Duration::from_secs(4) } else { stop_at - tokio::time::Instant::now() };
            match raw::next_json(&mut ws, wait).await {
                Read::Json(v) if channel(&v) == "liquidations" => frames.push(v),
                Read::Json(v) if channel(&v) == "user" && v["data"].get("nonUserCancel").is_some() => cancels.push(v),
                Read::Json(v) if channel(&v) == "user" => assert!(v["data"].get("fills").is_some(), "{v}"),
                Read::Json(v) => assert!(channel(&v) == "subscriptionResponse", "{v}"),
                Read::Timeout if !stopped => {
                    sim.stop();
                    stopped = true;
                }
                Read::Timeout => break (frames, cancels),
                Read::Closed(why) => panic!("closed: {why}"),
            }
        }
    });
    server.stop();
    let files = liquidations_in_files(&data, mode);
    let (snapshot, live) = frames.split_first().expect("a snapshot frame");
    assert_eq!(snapshot["data"]["isSnapshot"], true, "the first frame is the snapshot: {snapshot}");
    assert!(live.iter().all(|f| f["data"].get("isSnapshot").is_none()), "later frames are not snapshots");
    let mut got = entries(snapshot);
    let had = got.len();
    for f in live {
        got.extend(entries(f));
    }
    assert!(
        had > 0 && got.len() > had,
        "{had} in the snapshot, {} live; {} in the files",
        got.len() - had,
        files.len()
    );
    for (user, fill) in &got {
        let l = &fill["liquidation"];
        assert!(l["liquidatedUser"].is_string() && l["markPx"].is_string() && l["method"] == "market", "{fill}");
        assert_eq!(user, &user.to_lowercase());
    }
    // A run of the files' list: from wherever the snapshot begins to the last one written.
    let start =
        files.iter().position(|(_, u, f)| (u, f) == (&got[0].0, &got[0].1)).expect("the first entry is in the files");
    let want: Vec<(String, Value)> = files[start..].iter().map(|(_, u, f)| (u.clone(), f.clone())).collect();
    assert_eq!(got.len(), want.len(), "snapshot + live against the files' liquidation fills from the first one sent");
    assert!(got == want, "every liquidation fill once, in order, verbatim");
    // Unless it is full: the server keeps the newest 100 fills, dropping whole blocks' (at most 40 each here).
    let before = &files[..start];
    assert!(
        before.iter().all(|l| l.0 < live_from) || had > 60,
        "the snapshot reaches back over every one written since the server went live at {live_from}; it starts at \
         {} ({had} in it), after {} others",
        files[start].0,
        before.len()
    );
    eprintln!(
        "{mode}: {had} liquidation fills in the snapshot, {} live; {} in the files; {} nonUserCancel frames",
        got.len() - had,
        files.len(),
        cancels.len()
    );
    non_user_cancels_arrive(&cancels, &non_user_cancels_in_files(&data, mode));
}

#[test]
fn liquidations_by_block_reach_a_subscriber_once_in_order_with_a_snapshot_first() {
    every_liquidation_once_in_order("by-block");
}

#[test]
fn liquidations_streaming_reach_a_subscriber_once_in_order_with_a_snapshot_first() {
    every_liquidation_once_in_order("streaming");
}

/// The nonUserCancel frames (channel `user`, which names no user: each is matched to the one user whose files
/// hold its entries) against the files: per user a run of its cancels, once, in order, to the last one written.
fn non_user_cancels_arrive(frames: &[Value], files: &BTreeMap<String, Vec<(u64, Value)>>) {
    assert!(!frames.is_empty(), "no nonUserCancel frame: the liquidated users' resting orders are canceled");
    let mut got: BTreeMap<&String, Vec<Value>> = BTreeMap::new();
    for f in frames {
        let list = f["data"]["nonUserCancel"].as_array().unwrap();
        let owner = files
            .iter()
            .find(|(_, l)| l.iter().any(|(_, e)| *e == list[0]))
            .unwrap_or_else(|| panic!("a nonUserCancel of no file's cancel: {f}"))
            .0;
        got.entry(owner).or_default().extend(list.iter().cloned());
    }
    for (user, list) in got {
        let want: Vec<&Value> = files[user].iter().map(|(_, e)| e).collect();
        let start = want.iter().position(|e| **e == list[0]).unwrap();
        let want: Vec<Value> = want[start..].iter().map(|e| (*e).clone()).collect();
        assert!(list == want, "{user}: nonUserCancel {list:?}, the files from there {want:?}");
    }
}

/// The first frame of a fresh `liquidations` subscription: the snapshot's entries.
fn snapshot_of(addr: &str) -> Vec<(String, Value)> {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut ws = raw::connect(addr, "", None).await;
        raw::subscribe(&mut ws, json!({"type": "liquidations"})).await;
        loop {
            match raw::next_json(&mut ws, Duration::from_secs(10)).await {
                Read::Json(v) if channel(&v) == "liquidations" => break entries(&v),
                Read::Json(v) => assert!(channel(&v) == "subscriptionResponse", "{v}"),
                other => panic!("no snapshot: {other:?}"),
            }
        }
    })
}

/// A restarted server's snapshot starts with the liquidations of the blocks before it came back, read from the
/// history store: a run of the files' liquidation fills that reaches back to one written before the restart.
#[test]
fn after_a_restart_the_liquidations_snapshot_reaches_back_into_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    #[rustfmt::skip]
    let sim_args = ["--mode", "by-block", "--coins", "3", "--btc-orders", "300", "--orders-per-coin", "100",
        "--block-ms", "40", "--users", "20", "--reject-ratio", "2", "--write-liquidations"];
    let (mut sim, info) = start_sim(&data, &sim_args, &dir.path().join("sim.log"));
    let (snaps, serve_args) = (dir.path().join("snaps"), ["--mode", "by-block"]);
    let mut first = start_serve(&data, &info, &snaps, &serve_args, &dir.path().join("serve1.log"));
    first.wait_line("hlbook listening on", Duration::from_secs(60));
    let admin = procs::admin_base(&first);
    wait_health(&admin, Duration::from_secs(60), |h| h["state"] == "live");
    let deadline = Instant::now() + Duration::from_secs(60);
    let before = loop {
        if let Some(l) = liquidations_in_files(&data, "by-block").first() {
            break l.clone();
        }
        assert!(Instant::now() < deadline, "hlsim liquidated nobody in 60 s");
        std::thread::sleep(Duration::from_millis(200));
    };
    // Stopped once its store holds that block: the restarted server must find it there.
    let stored = |s: &Value| s["store"]["height"].as_u64().is_some_and(|h| h >= before.0);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !procs::get_json(&format!("{admin}/status")).is_some_and(|s| stored(&s)) {
        assert!(Instant::now() < deadline, "the store never reached height {}", before.0);
        std::thread::sleep(Duration::from_millis(200));
    }
    first.stop();
    let mut second = start_serve(&data, &info, &snaps, &serve_args, &dir.path().join("serve2.log"));
    let addr = second.wait_line("hlbook listening on", Duration::from_secs(60));
    // The seed comes once the store has caught up to the restarted server's first block.
    let target = (before.1.clone(), before.2.clone());
    let deadline = Instant::now() + Duration::from_secs(90);
    let snapshot = loop {
        let s = snapshot_of(&addr);
        if s.contains(&target) {
            break s;
        }
        assert!(Instant::now() < deadline, "no snapshot reached back to block {}: {} entries", before.0, s.len());
        std::thread::sleep(Duration::from_millis(500));
    };
    second.stop();
    sim.stop();
    let log = std::fs::read_to_string(dir.path().join("serve2.log")).unwrap();
    assert!(log.contains("liquidations snapshot: the newest fills from the history store"), "it came from the store");
    let files: Vec<(String, Value)> =
        liquidations_in_files(&data, "by-block").into_iter().map(|(_, u, f)| (u, f)).collect();
    let start = files.iter().position(|e| *e == snapshot[0]).expect("the snapshot's first entry is in the files");
    assert_eq!(snapshot[..], files[start..start + snapshot.len()], "a run of the files' liquidation fills, in order");
}
