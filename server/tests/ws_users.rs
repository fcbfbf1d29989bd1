//! orderUpdates, userFills and userEvents against hlsim's own files, with the real binaries: `hlsim` runs a
//! market with a small user pool (so every user places, fills, cancels and gets rejected often), `hlbook serve`
//! follows it, and one `?audit=1` connection per picked user follows three users. Afterwards the test derives
//! every user frame itself from the simulator's status and fills files and requires the server's frames to be
//! exactly those: one per block with events, nothing missing or extra, in block order, from the first block the
//! server serves to the last block written.

mod procs;
mod wsclient;

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::time::Duration;

use hlbook::node::Mode;
use hlbook::node::time::parse_node_time;
use procs::{start_serve, start_sim, wait_health};
use serde_json::{Value, json};
use wsclient::raw::{Read, audit_height, channel};

const BLOCKS: u64 = 500;
const FIRST_HEIGHT: u64 = 1_000_000_000;

/// Every line of a stream's hour files, oldest first.
fn lines(data: &Path, stream: &str, mode: Mode) -> Vec<Value> {
    let folder = if mode == Mode::Streaming { "streaming" } else { "by_block" };
    procs::node_json_lines(&data.join(format!("node_{stream}_{folder}")))
}

/// What the official feed sends for one node status event.
fn ws_order(ev: &Value) -> Value {
    let o = &ev["order"];
    let mut order = json!({
        "coin": o["coin"], "side": o["side"], "limitPx": o["limitPx"], "sz": o["sz"], "oid": o["oid"],
        "timestamp": o["timestamp"], "origSz": o["origSz"],
    });
    if !o["cloid"].is_null() {
        order["cloid"] = o["cloid"].clone();
    }
    if o["reduceOnly"] == true {
        order["reduceOnly"] = true.into();
    }
    let ms = parse_node_time(ev["time"].as_str().unwrap()).unwrap() / 1_000_000;
    json!({"order": order, "status": ev["status"], "statusTimestamp": ms})
}

/// Per user, per height: the expected orderUpdates data and fills; and every BTC trade id written.
struct Derived {
    orders: BTreeMap<(String, u64), Vec<Value>>,
    fills: BTreeMap<(String, u64), Vec<Value>>,
    tids: HashSet<u64>,
}

/// The trades subscription starts, right after its ack, with BTC's recent trades (the simulator has been trading
/// for seconds), and no trade comes twice in it and the live frames after it.
fn recent_trades_first(user: &str, frames: &[Value], written: &HashSet<u64>) {
    let ack = frames
        .iter()
        .position(|f| channel(f) == "subscriptionResponse" && f["data"]["subscription"]["type"] == "trades")
        .unwrap();
    let first = &frames[ack + 1];
    assert_eq!(channel(first), "trades", "{user}: recent trades right after the ack");
    assert!(!first["data"].as_array().unwrap().is_empty(), "{user}: {first}");
    let mut seen = HashSet::new();
    for f in frames.iter().filter(|f| channel(f) == "trades") {
        for t in f["data"].as_array().unwrap() {
            let tid = t["tid"].as_u64().unwrap();
            assert_eq!(t["coin"], "BTC");
            assert!(written.contains(&tid), "{user}: trade {tid} is in the files");
            assert!(seen.insert(tid), "{user}: trade {tid} sent twice");
        }
    }
}

fn derive(data: &Path, users: &HashSet<String>, mode: Mode) -> Derived {
    let mut d = Derived { orders: BTreeMap::new(), fills: BTreeMap::new(), tids: HashSet::new() };
    for l in lines(data, "order_statuses", mode) {
        let h = l["block_number"].as_u64().unwrap();
        for ev in l["events"].as_array().unwrap() {
            let u = ev["user"].as_str().unwrap().to_lowercase();
            if users.contains(&u) {
                d.orders.entry((u, h)).or_default().push(ws_order(ev));
            }
        }
    }
    for l in lines(data, "fills", mode) {
        let h = l["block_number"].as_u64().unwrap();
        for ev in l["events"].as_array().unwrap() {
            if ev[1]["coin"] == "BTC" {
                d.tids.insert(ev[1]["tid"].as_u64().unwrap());
            }
            let u = ev[0].as_str().unwrap().to_lowercase();
            if users.contains(&u) {
                d.fills.entry((u, h)).or_default().push(ev[1].clone());
            }
        }
    }
    d
}

/// Three users with fills in the simulator's first blocks.
fn pick_users(data: &Path, mode: Mode) -> Vec<String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let mut seen: Vec<String> = Vec::new();
        for l in lines(data, "fills", mode) {
            for ev in l["events"].as_array().unwrap() {
                let u = ev[0].as_str().unwrap().to_lowercase();
                if !seen.contains(&u) {
                    seen.push(u);
                }
            }
        }
        if seen.len() >= 3 {
            return seen[..3].to_vec();
        }
        assert!(std::time::Instant::now() < deadline, "the simulator wrote fills of fewer than 3 users");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Per (channel, height), how many events the user's frames of that height hold, from the node's files.
type Expect = BTreeMap<(&'static str, u64), usize>;

/// The events one live (not snapshot) frame holds.
fn events_in(f: &Value) -> usize {
    let d = &f["data"];
    d.as_array().or_else(|| d["fills"].as_array()).map_or(0, Vec::len)
}

/// Whether `frames` hold every event `expect` names from each channel's first live frame on.
fn complete(frames: &[Value], expect: &Expect) -> bool {
    let mut got: BTreeMap<(&str, u64), usize> = BTreeMap::new();
    for f in frames.iter().filter(|f| f["data"]["isSnapshot"].is_null()) {
        if let Some(h) = audit_height(f) {
            *got.entry((channel(f), h)).or_default() += events_in(f);
        }
    }
    ["orderUpdates", "userFills", "user"].into_iter().all(|ch| {
        let Some(first) = got.keys().find(|(c, _)| *c == ch).map(|k| k.1) else { return false };
        expect.iter().filter(|((c, h), _)| *c == ch && *h >= first).all(|(k, n)| got.get(k).copied().unwrap_or(0) >= *n)
    })
}

/// Everything one connection received, after following `user` on the three channels (the address sent
/// upper-cased, which must not matter), until `done` says what to expect and every event of it has arrived.
async fn collect(addr: String, user: String, mut done: tokio::sync::watch::Receiver<Option<Expect>>) -> Vec<Value> {
    let mut ws = wsclient::raw::connect(&addr, "audit=1", None).await;
    let shouted = format!("0x{}", user[2..].to_uppercase());
    wsclient::raw::subscribe(&mut ws, json!({"type": "orderUpdates", "user": shouted})).await;
    wsclient::raw::subscribe(&mut ws, json!({"type": "userFills", "user": user})).await;
    wsclient::raw::subscribe(&mut ws, json!({"type": "userEvents", "user": user})).await;
    // trades on a plain connection: `?audit=1` connections get per-block frames only, no recent trades.
    let mut plain = wsclient::raw::connect(&addr, "", None).await;
    wsclient::raw::subscribe(&mut plain, json!({"type": "trades", "coin": "BTC"})).await;
    let mut got = vec![wsclient::raw::expect_json(&mut plain, Duration::from_secs(10)).await];
    got.push(wsclient::raw::expect_json(&mut plain, Duration::from_secs(10)).await);
    for _ in 0..3 {
        got.push(wsclient::raw::expect_json(&mut plain, Duration::from_secs(10)).await);
    }
    loop {
        if let Some(expect) = done.borrow().as_ref()
            && complete(&got, expect)
        {
            return got;
        }
        tokio::select! {
            _ = done.changed() => {}
            r = wsclient::raw::next_json(&mut ws, Duration::from_secs(30)) => match r {
                Read::Json(v) => got.push(v),
                other => panic!("{user}: connection ended early, or no frame for 30 s: {other:?}"),
            },
        }
    }
}

/// Frames of one channel by audit height. By-block each height comes at most once; streaming at line speed sends
/// a block's events as their lines are read, so the frames of one height are joined in order (`merge`).
fn by_height(frames: &[Value], ch: &str, user: &str, merge: bool) -> BTreeMap<u64, Value> {
    let mut out: BTreeMap<u64, Value> = BTreeMap::new();
    let mut last = 0;
    for f in frames.iter().filter(|f| channel(f) == ch && f["data"]["isSnapshot"].is_null()) {
        let h = audit_height(f).unwrap_or_else(|| panic!("{user} {ch}: no audit height: {f}"));
        assert!(h > last || (merge && h == last), "{user} {ch}: heights not increasing ({last} then {h})");
        last = h;
        let data = f["data"].clone();
        match out.get_mut(&h) {
            Some(Value::Array(have)) => have.extend(data.as_array().unwrap().iter().cloned()),
            Some(have) => {
                let more = data["fills"].as_array().unwrap().clone();
                have["fills"].as_array_mut().unwrap().extend(more);
            }
            None => {
                out.insert(h, data);
            }
        }
    }
    out
}

/// The expected frames of heights `from..=to` equal the received ones, both ways.
fn same_blocks(user: &str, ch: &str, got: &BTreeMap<u64, Value>, want: BTreeMap<u64, Value>, from: u64, to: u64) {
    let want: BTreeMap<u64, Value> = want.into_iter().filter(|(h, _)| (from..=to).contains(h)).collect();
    for (h, data) in &want {
        assert_eq!(got.get(h), Some(data), "{user} {ch} at height {h}");
    }
    for h in got.keys().filter(|h| **h <= to) {
        assert!(want.contains_key(h), "{user} {ch}: a frame at {h} for a block without events");
    }
    assert!(want.len() >= 5, "{user} {ch}: only {} blocks compared", want.len());
    eprintln!("{user} {ch}: {} blocks equal the files", want.len());
}

#[test]
fn user_frames_equal_what_the_simulators_files_say() {
    user_frames(Mode::ByBlock);
}

#[test]
fn streaming_user_frames_go_out_as_their_lines_land_and_equal_the_files() {
    user_frames(Mode::Streaming);
}

fn user_frames(mode: Mode) {
    let out = tempfile::tempdir().unwrap();
    let data = out.path().join("data");
    let n = BLOCKS.to_string();
    #[rustfmt::skip]
    let sim_args = [
        "--mode", mode.as_str(), "--coins", "3", "--btc-orders", "1000", "--orders-per-coin", "200",
        "--block-ms", "60", "--rate", "0.1", "--reject-ratio", "3", "--users", "25", "--blocks", &n,
    ];
    let (mut sim, info_url) = start_sim(&data, &sim_args, &out.path().join("sim.log"));
    let serve_args = ["--mode", mode.as_str()];
    let mut server =
        start_serve(&data, &info_url, &out.path().join("snaps"), &serve_args, &out.path().join("serve.log"));
    let addr = server.wait_line("hlbook listening on", Duration::from_secs(30));
    let admin = procs::admin_base(&server);
    let live = wait_health(&admin, Duration::from_secs(60), |h| h["state"] == "live")["height"].as_u64().unwrap();
    // Fifty blocks of fills (3 s) pile up first, so userFills' first frame has history to carry.
    wait_health(&admin, Duration::from_secs(60), |h| h["height"].as_u64() >= Some(live + 50));
    let users = pick_users(&data, mode);

    let rt = tokio::runtime::Runtime::new().unwrap();
    let (done, tasks): (Vec<_>, Vec<_>) = users
        .iter()
        .map(|u| {
            let (tx, rx) = tokio::sync::watch::channel(None);
            (tx, rt.spawn(collect(addr.clone(), u.clone(), rx)))
        })
        .unzip();
    // Every user channel is counted (/health, /metrics): three users, each on the three channels.
    wait_health(&admin, Duration::from_secs(60), |h| {
        ["orderUpdates", "userFills", "userEvents"].iter().all(|c| h["subscriptions"][c] == users.len())
    });
    // Streaming: the simulator's last block never completes (no later line), but its lines' frames went out.
    let streaming = mode == Mode::Streaming;
    let last = FIRST_HEIGHT + BLOCKS - 1 - u64::from(streaming);
    wait_health(&admin, Duration::from_secs(120), |h| h["height"].as_u64() >= Some(last));
    // The files are complete up to `last`: each collector reads until it has every event they name.
    let derived = derive(&data, &users.iter().cloned().collect(), mode);
    let of = |m: &BTreeMap<(String, u64), Vec<Value>>, u: &str| -> BTreeMap<u64, Vec<Value>> {
        m.iter().filter(|((x, _), _)| x == u).map(|((_, h), v)| (*h, v.clone())).collect()
    };
    let expect = |u: &str| -> Expect {
        let mut e = Expect::new();
        for (h, v) in of(&derived.orders, u).range(..=last) {
            e.insert(("orderUpdates", *h), v.len());
        }
        for (h, v) in of(&derived.fills, u).range(..=last) {
            e.insert(("userFills", *h), v.len());
            e.insert(("user", *h), v.len());
        }
        e
    };
    for (tx, u) in done.iter().zip(&users) {
        tx.send(Some(expect(u))).unwrap();
    }
    let got: Vec<Vec<Value>> = tasks.into_iter().map(|t| rt.block_on(t).expect("a collecting task")).collect();
    assert!(server.running(), "the server is still up");
    sim.stop();
    server.stop();
    for (user, frames) in users.iter().zip(&got) {
        for f in frames {
            let ok = matches!(channel(f), "subscriptionResponse" | "orderUpdates" | "userFills" | "user" | "trades");
            assert!(channel(f) != "trades" || f.get("audit").is_none(), "{user}: trades on the plain connection");
            assert!(ok, "{user}: unexpected frame {f}");
        }
        assert_eq!(frames.iter().filter(|f| channel(f) == "subscriptionResponse").count(), 4);
        recent_trades_first(user, frames, &derived.tids);

        // orderUpdates: every block from the first served one on.
        let orders = by_height(frames, "orderUpdates", user, streaming);
        let from = *orders.keys().next().unwrap_or_else(|| panic!("{user}: no orderUpdates frame"));
        let want = of(&derived.orders, user).into_iter().map(|(h, v)| (h, Value::Array(v))).collect();
        same_blocks(user, "orderUpdates", &orders, want, from, last);

        // userFills: the snapshot holds every fill before the first live frame, then every block.
        let first = frames.iter().find(|f| channel(f) == "userFills").expect("a userFills frame");
        assert_eq!(first["data"]["isSnapshot"], true, "{user}: userFills starts with a snapshot");
        assert_eq!(first["data"]["user"], user.as_str());
        let live = by_height(frames, "userFills", user, streaming);
        let from = *live.keys().next().unwrap_or_else(|| panic!("{user}: no live userFills frame"));
        let fills = of(&derived.fills, user);
        let before: Vec<Value> = fills.range(..from).flat_map(|(_, v)| v.clone()).collect();
        assert_eq!(first["data"]["fills"], Value::Array(before.clone()), "{user}: the snapshot");
        assert!(!before.is_empty(), "{user}: the snapshot carries the fills made before subscribing");
        let want = fills.iter().map(|(h, v)| (*h, json!({"user": user, "fills": v}))).collect();
        same_blocks(user, "userFills", &live, want, from, last);

        // userEvents: the fills variant on channel `user`.
        let events = by_height(frames, "user", user, streaming);
        let from = *events.keys().next().unwrap_or_else(|| panic!("{user}: no user frame"));
        let want = fills.iter().map(|(h, v)| (*h, json!({"fills": v}))).collect();
        same_blocks(user, "user", &events, want, from, last);
    }
}
