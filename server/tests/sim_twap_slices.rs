//! userTwapSliceFills end to end (issue #47): `hlsim --write-twaps` runs TWAP orders whose slice fills carry a
//! `twapId` on the owner's side, `hlbook serve` follows it, and a client subscribes userTwapSliceFills for the user
//! with the most slices so far. The test reads the fills files itself (JSON values, none of hlbook's parsers) and
//! requires that the snapshot and the live frames together hold every slice of that user up to the last live
//! frame, each once, in order, in the exchange's shape: `{fill, twapId}` with the node's fill object as written.
//! Once the simulator stops, the info type `userTwapSliceFills` answers every slice of that user, newest first.

mod procs;
mod wsclient;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use procs::{start_serve, start_sim, wait_health};
use serde_json::{Value, json};
use wsclient::raw::{self, Read, audit_height, channel};

/// Every TWAP slice fill in the by-block fills files, per user (lower case): (height, fill object, twapId).
fn slices_in_files(data: &Path) -> BTreeMap<String, Vec<(u64, Value, u64)>> {
    let mut out: BTreeMap<String, Vec<(u64, Value, u64)>> = BTreeMap::new();
    for line in procs::node_json_lines(&data.join("node_fills_by_block")) {
        let h = line["block_number"].as_u64().unwrap();
        for ev in line["events"].as_array().unwrap() {
            let (user, fill) = (ev[0].as_str().unwrap().to_lowercase(), &ev[1]);
            if let Some(id) = fill["twapId"].as_u64() {
                out.entry(user).or_default().push((h, fill.clone(), id));
            }
        }
    }
    out
}

/// One `{fill, twapId}` entry, checking its shape.
fn entry(p: &Value) -> (Value, u64) {
    let keys: Vec<&String> = p.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["fill", "twapId"], "each entry is {{fill, twapId}}: {p}");
    (p["fill"].clone(), p["twapId"].as_u64().unwrap())
}

/// The (fill, twapId) pairs of a frame, checking its shape.
fn pairs(frame: &Value, user: &str) -> Vec<(Value, u64)> {
    let data = &frame["data"];
    assert_eq!(data["user"], user, "{frame}");
    let list = data["twapSliceFills"].as_array().unwrap_or_else(|| panic!("twapSliceFills: {frame}"));
    list.iter().map(entry).collect()
}

#[test]
fn twap_slice_fills_reach_their_user_once_in_order_with_a_snapshot_first() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    #[rustfmt::skip]
    let sim_args = ["--mode", "by-block", "--coins", "3", "--btc-orders", "300", "--orders-per-coin", "100",
        "--block-ms", "40", "--users", "3", "--write-twaps"];
    let (mut sim, info) = start_sim(&data, &sim_args, &dir.path().join("sim.log"));
    // The test polls the info type past the exchange's per-IP weight.
    let serve_args = ["--set", "server.info_weight_per_minute=0"];
    let mut server = start_serve(&data, &info, &dir.path().join("snaps"), &serve_args, &dir.path().join("serve.log"));
    let addr = server.wait_line("hlbook listening on", Duration::from_secs(60));
    wait_health(&procs::admin_base(&server), Duration::from_secs(60), |h| h["state"] == "live");

    // The user with the most slices once a few have been written: the snapshot then has some to carry.
    let deadline = Instant::now() + Duration::from_secs(60);
    let user = loop {
        let slices = slices_in_files(&data);
        if let Some((u, s)) = slices.iter().max_by_key(|(_, s)| s.len())
            && s.len() >= 3
        {
            break u.clone();
        }
        assert!(Instant::now() < deadline, "hlsim wrote fewer than 3 slices of any user in 60 s");
        std::thread::sleep(Duration::from_millis(300));
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let frames = rt.block_on(async {
        let mut ws = raw::connect(&addr, "audit=1", None).await;
        raw::subscribe(&mut ws, json!({"type": "userTwapSliceFills", "user": user})).await;
        let mut frames = Vec::new();
        let until = tokio::time::Instant::now() + Duration::from_secs(8);
        loop {
            match raw::next_json(&mut ws, until.saturating_duration_since(tokio::time::Instant::now())).await {
                Read::Json(v) if channel(&v) == "userTwapSliceFills" => frames.push(v),
                Read::Json(v) => assert!(channel(&v) == "subscriptionResponse", "{v}"),
                Read::Timeout => break frames,
                Read::Closed(why) => panic!("closed: {why}"),
            }
        }
    });
    sim.stop();
    // The info type, once the store holds every block the files do: the same slices, newest first.
    let files: Vec<(Value, u64)> = slices_in_files(&data)[&user].iter().map(|(_, f, id)| (f.clone(), *id)).collect();
    let ask = json!({"type": "userTwapSliceFills", "user": user});
    let deadline = Instant::now() + Duration::from_secs(30);
    let answered = loop {
        let resp = reqwest::blocking::Client::new().post(format!("http://{addr}/info")).json(&ask).send().unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        let list: Vec<(Value, u64)> = resp.json::<Vec<Value>>().unwrap().iter().rev().map(entry).collect();
        if list.len() >= files.len() || Instant::now() > deadline {
            break list;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    server.stop();
    assert!(answered == files, "info userTwapSliceFills: {} slices, the files {}", answered.len(), files.len());

    let (snapshot, live) = frames.split_first().expect("a snapshot frame");
    assert_eq!(snapshot["data"]["isSnapshot"], true, "the first frame is the snapshot: {snapshot}");
    assert!(live.iter().all(|f| f["data"].get("isSnapshot").is_none()), "later frames are not snapshots");
    assert!(!live.is_empty(), "no live slice in 8 s");
    let last = live.iter().filter_map(audit_height).max().unwrap();
    let mut got = pairs(snapshot, &user);
    let had = got.len();
    for f in live {
        let h = audit_height(f).unwrap();
        let want: Vec<(Value, u64)> = slices_in_files(&data)[&user]
            .iter()
            .filter(|(height, ..)| *height == h)
            .map(|(_, fill, id)| (fill.clone(), *id))
            .collect();
        assert_eq!(pairs(f, &user), want, "block {h}'s frame holds that block's slices of {user}");
        got.extend(want);
    }
    let want: Vec<(Value, u64)> = slices_in_files(&data)[&user]
        .iter()
        .filter(|(h, ..)| *h <= last)
        .map(|(_, fill, id)| (fill.clone(), *id))
        .collect();
    assert!(had > 0, "the snapshot carries the slices before the subscription");
    assert_eq!(got.len(), want.len(), "snapshot + live against the files up to height {last}");
    assert!(got == want, "every slice of {user} once, in order, verbatim");
    eprintln!("{user}: {had} slices in the snapshot, {} live over {} frames", want.len() - had, live.len());
}
