//! userTwapHistory and info twapHistory end to end (issue #47), with the real binaries: `hlsim --write-twaps`
//! writes TWAP starts and ends to node_twap_statuses, `hlbook serve` follows it, and one connection per user
//! subscribes userTwapHistory for the users the files name. Once the simulator is done, the test reads the
//! node_twap_statuses files itself (JSON values, its own decimal and time handling, none of hlbook's parsers) and
//! requires that the snapshot and the live frames together hold every status line of that user up to the last
//! block hlbook handed out, each once, in order, in the exchange's shape; and that the info type answers the same
//! list. Without the folder hlbook serves and says so; a malformed line and an unknown status are counted and
//! skipped.

mod nodetext;
mod procs;
mod wsclient;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use hlbook::node::Mode;
use nodetext::{millis, norm};
use procs::{admin_base, get_json, start_serve, start_sim, wait_health};
use serde_json::{Value, json};
use wsclient::raw::{self, channel};

const BLOCKS: u64 = 500;
const USERS: usize = 3;

fn folder(mode: Mode) -> &'static str {
    if mode == Mode::Streaming { "node_twap_statuses_streaming" } else { "node_twap_statuses_by_block" }
}

/// A TWAP state with its amounts in one spelling.
fn state(s: &Value) -> Value {
    let fields = ["coin", "user", "side", "sz", "executedSz", "executedNtl", "minutes", "reduceOnly", "randomize"];
    let keys: BTreeSet<&str> = s.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, fields.iter().copied().chain(["timestamp"]).collect(), "the exchange's TwapState fields: {s}");
    json!({"coin": s["coin"], "user": s["user"].as_str().unwrap().to_lowercase(), "side": s["side"],
        "sz": norm(&s["sz"]), "executedSz": norm(&s["executedSz"]), "executedNtl": norm(&s["executedNtl"]),
        "minutes": s["minutes"], "reduceOnly": s["reduceOnly"], "randomize": s["randomize"],
        "timestamp": s["timestamp"]})
}

/// One node event as the exchange's history entry: `{time (s), state, status: {status[, description]}, twapId}`.
fn from_node(ev: &Value) -> Value {
    let status = match &ev["status"] {
        Value::String(s) => json!({"status": s}),
        other => json!({"status": "error", "description": other["error"]}),
    };
    json!({"time": millis(&ev["time"]) / 1000, "state": state(&ev["state"]), "status": status, "twapId": ev["twap_id"]})
}

/// An entry hlbook sent, checking its shape, in the same spelling.
fn from_hlbook(e: &Value) -> Value {
    let keys: BTreeSet<&str> = e.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, BTreeSet::from(["time", "state", "status", "twapId"]), "an entry's fields: {e}");
    json!({"time": e["time"], "state": state(&e["state"]), "status": e["status"], "twapId": e["twapId"]})
}

/// Each user's entries in the files with their block heights, in order, through the last block hlbook can hand
/// out (streaming: all but the last, no later line completes it); and that block's height.
fn expected(data: &Path, mode: Mode) -> (BTreeMap<String, Vec<(u64, Value)>>, u64) {
    let lines = procs::node_json_lines(&data.join(folder(mode)));
    let heights: BTreeSet<u64> = lines.iter().map(|l| l["block_number"].as_u64().unwrap()).collect();
    let mut top = heights.iter().rev();
    let last = *if mode == Mode::Streaming { top.nth(1) } else { top.next() }.unwrap_or(&0);
    let mut out: BTreeMap<String, Vec<(u64, Value)>> = BTreeMap::new();
    for l in lines.iter().filter(|l| l["block_number"].as_u64() <= Some(last)) {
        let h = l["block_number"].as_u64().unwrap();
        for ev in l["events"].as_array().unwrap() {
            let user = ev["state"]["user"].as_str().unwrap().to_lowercase();
            out.entry(user).or_default().push((h, from_node(ev)));
        }
    }
    (out, last)
}

/// What one user's connection received: the snapshot's entries, then the live ones.
#[derive(Debug, Default)]
struct Got {
    acked: bool,
    snapshot: Option<Vec<Value>>,
    live: Vec<Value>,
}

fn take(got: &mut Got, user: &str, v: &Value) {
    if channel(v) == "subscriptionResponse" {
        got.acked = true;
        return;
    }
    assert_eq!(channel(v), "userTwapHistory", "{user}: an unexpected frame: {v}");
    let data = &v["data"];
    assert_eq!(data["user"], user, "{v}");
    let list: Vec<Value> = data["history"].as_array().unwrap().iter().map(from_hlbook).collect();
    if got.snapshot.is_none() {
        assert_eq!(data["isSnapshot"], true, "the first frame is the snapshot: {v}");
        got.snapshot = Some(list);
    } else {
        assert!(data.get("isSnapshot").is_none(), "only the first frame is a snapshot: {v}");
        assert!(!list.is_empty(), "a live frame holds entries: {v}");
        got.live.extend(list);
    }
}

fn all(got: &Got) -> Vec<Value> {
    got.snapshot.iter().flatten().chain(&got.live).cloned().collect()
}

fn info_twap_history(addr: &str, user: &str) -> Vec<Value> {
    let ask = json!({"type": "twapHistory", "user": user});
    let resp = reqwest::blocking::Client::new().post(format!("http://{addr}/info")).json(&ask).send().unwrap();
    assert_eq!(resp.status().as_u16(), 200, "info twapHistory");
    resp.json::<Vec<Value>>().unwrap().iter().map(from_hlbook).collect()
}

fn run(mode: Mode) {
    let out = tempfile::tempdir().unwrap();
    let data = out.path().join("data");
    let n = BLOCKS.to_string();
    #[rustfmt::skip]
    let sim_args = [
        "--mode", mode.as_str(), "--coins", "3", "--btc-orders", "300", "--orders-per-coin", "100",
        "--block-ms", "40", "--users", "4", "--blocks", &n, "--write-twaps", "--exit-when-done",
    ];
    let (mut sim, info_url) = start_sim(&data, &sim_args, &out.path().join("sim.log"));
    #[rustfmt::skip]
    let serve_args = ["--mode", mode.as_str(), "--stale-after", "600", "--validate-interval", "0",
        "--set", "server.info_weight_per_minute=0"];
    let mut server =
        start_serve(&data, &info_url, &out.path().join("snaps"), &serve_args, &out.path().join("serve.log"));
    let addr = server.wait_line("hlbook listening on", Duration::from_secs(30));
    let admin = admin_base(&server);
    // Subscribed once some TWAPs were handed out: the snapshot then has entries to carry.
    wait_health(&admin, Duration::from_secs(120), |h| {
        h["twap_statuses"]["read"] == "read" && h["twap_statuses"]["counters"]["events"].as_u64() >= Some(6)
    });
    let (so_far, _) = expected(&data, mode);
    let mut users: Vec<(&String, usize)> = so_far.iter().map(|(u, l)| (u, l.len())).collect();
    users.sort_by_key(|u| std::cmp::Reverse(u.1));
    let users: Vec<String> = users.into_iter().take(USERS).map(|u| u.0.clone()).collect();
    assert!(!users.is_empty(), "no user has TWAP statuses yet");

    let rt = tokio::runtime::Runtime::new().unwrap();
    let subs = users.iter().map(|u| vec![json!({"type": "userTwapHistory", "user": u})]).collect();
    let rx = raw::fan_in(&rt, &addr, subs, Duration::from_secs(300));
    let mut got: Vec<Got> = users.iter().map(|_| Got::default()).collect();
    let receive = |got: &mut Vec<Got>, what: &str| {
        let (i, v) = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|e| panic!("{what}: {e}; got {got:?}"));
        take(&mut got[i], &users[i], &v);
    };
    while got.iter().any(|g| !g.acked || g.snapshot.is_none()) {
        receive(&mut got, "acks and snapshots");
    }

    assert!(sim.wait_exit(Duration::from_secs(180)).success(), "hlsim failed");
    let (exp, last) = expected(&data, mode);
    wait_health(&admin, Duration::from_secs(60), |h| h["twap_statuses"]["height"].as_u64() == Some(last));
    let want = |u: &String| -> Vec<Value> { exp.get(u).into_iter().flatten().map(|e| e.1.clone()).collect() };
    // Every entry hlsim wrote up to `last` is due: wait for the count, then compare the lists.
    while users.iter().zip(&got).any(|(u, g)| all(g).len() < want(u).len()) {
        receive(&mut got, "the files' last statuses");
    }
    let mut checked = (0, 0);
    for (user, g) in users.iter().zip(&got) {
        assert_eq!(all(g), want(user), "{user}: snapshot + live against the files through block {last}");
        checked.0 += g.snapshot.as_ref().map_or(0, Vec::len);
        checked.1 += g.live.len();
        // The info type, once the store has every block: the same list.
        let deadline = Instant::now() + Duration::from_secs(30);
        let answered = loop {
            let list = info_twap_history(&addr, user);
            if list.len() >= want(user).len() || Instant::now() > deadline {
                break list;
            }
            std::thread::sleep(Duration::from_millis(300));
        };
        assert_eq!(answered, want(user), "{user}: info twapHistory against the files");
    }
    let h = get_json(&format!("{admin}/health")).unwrap();
    let c = &h["twap_statuses"]["counters"];
    assert_eq!(
        (c["bad_lines"].as_u64(), c["gaps"].as_u64(), c["unknown_events"].as_u64()),
        (Some(0), Some(0), Some(0))
    );
    eprintln!(
        "{mode:?}: {} users through block {last}: {} entries in snapshots, {} live",
        users.len(),
        checked.0,
        checked.1
    );
    assert!(checked.0 >= 3 && checked.1 >= 3, "too few to test: {checked:?}");
    server.stop();
}

#[test]
fn twap_statuses_by_block_reach_each_user_once_in_order() {
    run(Mode::ByBlock);
}

#[test]
fn twap_statuses_streaming_reach_each_user_once_in_order() {
    run(Mode::Streaming);
}

/// A by-block node_twap_statuses line of block `h` with `events`.
fn twap_line(h: u64, events: &[String]) -> String {
    let t = "2026-05-05T09:00:00.250000001";
    format!(r#"{{"local_time":"{t}","block_time":"{t}","block_number":{h},"events":[{}]}}"#, events.join(","))
}

fn twap_event(user: &str, id: u64, status: &str) -> String {
    format!(
        r#"{{"time":"2026-05-05T09:00:00.250000001","twap_id":{id},"state":{{"coin":"BTC","user":"{user}","side":"B","sz":"0.5","executedSz":"0.25","executedNtl":"25000.0","minutes":5,"reduceOnly":false,"randomize":true,"timestamp":1778000000000}},"status":{status}}}"#
    )
}

fn append_twaps(data: &Path, lines: &[String]) {
    use std::io::Write;
    let p = data.join("node_twap_statuses_by_block/hourly/20260505/9");
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(p).unwrap();
    for l in lines {
        f.write_all(format!("{l}\n").as_bytes()).unwrap();
    }
}

/// Without `--write-twaps` the node writes no folder: hlbook serves and says so on the admin /health and in the
/// metrics. Then the stream appears (a node restarted with the flag) with a malformed line and an unknown status
/// between good ones: both are counted and skipped, and the good entries reach the subscriber.
#[test]
fn without_the_stream_hlbook_serves_and_bad_twap_lines_are_counted_and_skipped() {
    let out = tempfile::tempdir().unwrap();
    let data = out.path().join("data");
    let (mut sim, info_url) = start_sim(&data, &["--coins", "3", "--block-ms", "40"], &out.path().join("sim.log"));
    let mut server = start_serve(&data, &info_url, &out.path().join("snaps"), &[], &out.path().join("serve.log"));
    let addr = server.wait_line("hlbook listening on", Duration::from_secs(30));
    let admin = admin_base(&server);
    let h = wait_health(&admin, Duration::from_secs(120), |h| {
        h["twap_statuses"]["read"] == "absent" && h["state"] == "live"
    });
    let metrics = procs::get_bytes(&format!("{admin}/metrics")).unwrap();
    assert!(String::from_utf8_lossy(&metrics).contains("hlbook_twap_read 0"), "metrics say it is not read");
    let user = "0x00000000000000000000000000000000000000a1";
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut ws = rt.block_on(async {
        let mut ws = raw::connect(&addr, "", None).await;
        raw::subscribe(&mut ws, json!({"type": "userTwapHistory", "user": user})).await;
        assert_eq!(channel(&raw::expect_json(&mut ws, Duration::from_secs(30)).await), "subscriptionResponse");
        let snapshot = raw::expect_json(&mut ws, Duration::from_secs(30)).await;
        assert_eq!(
            snapshot,
            json!({"channel": "userTwapHistory", "data": {"isSnapshot": true, "user": user, "history": []}})
        );
        ws
    });
    // Far ahead of the books' height: the reader, which starts there, takes every one.
    let base = h["height"].as_u64().unwrap() + 1000;
    append_twaps(&data, &[]);
    wait_health(&admin, Duration::from_secs(60), |h| h["twap_statuses"]["read"] == "read");
    let lines = [
        twap_line(base, &[twap_event(user, 7, r#""activated""#)]),
        format!(r#"{{"local_time":"2026-05-05T09:00:00","block_number":{},"events":[{{"#, base + 1),
        twap_line(base + 2, &[twap_event(user, 8, r#""paused""#), twap_event(user, 7, r#""terminated""#)]),
        twap_line(base + 3, &[twap_event(user, 9, r#"{"error":"Insufficient margin to place order."}"#)]),
    ];
    append_twaps(&data, &lines);
    let frames = rt.block_on(async {
        let mut frames = Vec::new();
        while frames.len() < 3 {
            frames.push(raw::expect_json(&mut ws, Duration::from_secs(60)).await);
        }
        frames
    });
    let entries: Vec<Value> = frames.iter().flat_map(|f| f["data"]["history"].as_array().unwrap().clone()).collect();
    let ids: Vec<(u64, &str)> =
        entries.iter().map(|e| (e["twapId"].as_u64().unwrap(), e["status"]["status"].as_str().unwrap())).collect();
    assert_eq!(ids, [(7, "activated"), (7, "terminated"), (9, "error")], "the good entries, in order");
    assert_eq!(entries[2]["status"]["description"], "Insufficient margin to place order.");
    let c = &get_json(&format!("{admin}/health")).unwrap()["twap_statuses"]["counters"];
    assert_eq!(
        (c["bad_lines"].as_u64(), c["unknown_events"].as_u64(), c["blocks"].as_u64()),
        (Some(1), Some(1), Some(3))
    );
    // The books kept following the node meanwhile.
    let later = h["height"].as_u64().unwrap() + 5;
    wait_health(&admin, Duration::from_secs(60), |h| h["state"] == "live" && h["height"].as_u64() >= Some(later));
    server.stop();
    sim.stop();
}
