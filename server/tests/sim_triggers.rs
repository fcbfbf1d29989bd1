//! Trigger orders end to end, with the real binaries: `hlsim` places, cancels and triggers stop and take-profit
//! orders, `hlbook serve` follows it (bootstrapping with `includeTriggerOrders`, and answering openOrders itself:
//! no info type goes to the node), and once the simulator has written its last block the test derives, from the
//! simulator's status and diff files alone (JSON values, none of hlbook's parsers), every trigger order still
//! waiting and every triggered order still resting. It requires:
//! - each coin's l4Book snapshot lists exactly the waiting ones, marked `"isTrigger": true`, each the very order
//!   object its placing status wrote, and lists every triggered one at its `new` diff's price;
//! - frontendOpenOrders and openOrders of each of their users list them the same way;
//! - l2Book's levels are the l4Book snapshot's resting orders summed by price (waiting orders in none of them), so
//!   each triggered order is in the level of its diff's price.

mod procs;
mod wsclient;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use hlbook::node::Mode;
use procs::{start_serve, start_sim, wait_health};
use serde_json::{Value, json};
use wsclient::raw::{Read, channel};

const BLOCKS: u64 = 300;
const FIRST_HEIGHT: u64 = 1_000_000_000;

/// What the files say at the last block.
#[derive(Debug, Default)]
struct Derived {
    /// oid → (coin, user, the order object of its placing status).
    waiting: BTreeMap<u64, (String, String, Value)>,
    /// A triggered order still resting: oid → (coin, user, its `new` diff's px, its size now).
    resting: BTreeMap<u64, (String, String, String, String)>,
    placed: usize,
    triggered: usize,
}

/// Every event of one stream, grouped by block in line order.
fn events_by_block(data: &Path, stream: &str, mode: Mode) -> BTreeMap<u64, Vec<Value>> {
    let folder = if mode == Mode::Streaming { "streaming" } else { "by_block" };
    let mut out: BTreeMap<u64, Vec<Value>> = BTreeMap::new();
    for l in procs::node_json_lines(&data.join(format!("node_{stream}_{folder}"))) {
        let h = l["block_number"].as_u64().unwrap();
        out.entry(h).or_default().extend(l["events"].as_array().unwrap().iter().cloned());
    }
    out
}

/// The state after block `last`, from the files.
fn derive(data: &Path, mode: Mode, last: u64) -> Derived {
    let statuses = events_by_block(data, "order_statuses", mode);
    let diffs = events_by_block(data, "raw_book_diffs", mode);
    let mut d = Derived::default();
    let heights: BTreeSet<u64> = statuses.keys().chain(diffs.keys()).copied().filter(|h| *h <= last).collect();
    for h in heights {
        let st = statuses.get(&h).map_or(&[][..], Vec::as_slice);
        let triggered: BTreeSet<u64> =
            st.iter().filter(|s| s["status"] == "triggered").map(|s| s["order"]["oid"].as_u64().unwrap()).collect();
        d.triggered += triggered.len();
        for diff in diffs.get(&h).map_or(&[][..], Vec::as_slice) {
            let oid = diff["oid"].as_u64().unwrap();
            let kind = &diff["raw_book_diff"];
            if let Some(sz) = kind["new"]["sz"].as_str().filter(|_| triggered.contains(&oid)) {
                let (coin, user, px) = (&diff["coin"], &diff["user"], &diff["px"]);
                let row = (str_of(coin), str_of(user).to_lowercase(), str_of(px), sz.to_string());
                d.resting.insert(oid, row);
            } else if let Some(sz) = kind["update"]["newSz"].as_str() {
                if let Some(r) = d.resting.get_mut(&oid) {
                    r.3 = sz.to_string();
                }
            } else if kind == "remove" {
                d.resting.remove(&oid);
            }
        }
        for s in st {
            let oid = s["order"]["oid"].as_u64().unwrap();
            if s["status"] == "open" && s["order"]["isTrigger"] == true {
                let row = (str_of(&s["order"]["coin"]), str_of(&s["user"]).to_lowercase(), s["order"].clone());
                d.waiting.insert(oid, row);
                d.placed += 1;
            } else {
                d.waiting.remove(&oid);
            }
        }
    }
    d
}

fn str_of(v: &Value) -> String {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}")).to_string()
}

/// Exact decimal string → (integer, scale) compared exactly: "81308.5" and "81308.50" are one price.
fn units(s: &str) -> u128 {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let frac = format!("{frac:0<12}");
    int.parse::<u128>().unwrap() * 10u128.pow(12) + frac.parse::<u128>().unwrap()
}

/// The first l4Book snapshot frame of `coin`.
async fn l4_snapshot(addr: &str, coin: &str) -> Value {
    let mut ws = wsclient::raw::connect(addr, "", None).await;
    wsclient::raw::subscribe(&mut ws, json!({"type": "l4Book", "coin": coin})).await;
    loop {
        match wsclient::raw::next_json(&mut ws, Duration::from_secs(30)).await {
            Read::Json(v) if channel(&v) == "l4Book" && v["data"]["type"] == "snapshot" => return v["data"].clone(),
            Read::Json(_) => {}
            other => panic!("{coin}: no l4Book snapshot: {other:?}"),
        }
    }
}

fn post(base: &str, body: &Value) -> Value {
    let resp = reqwest::blocking::Client::new().post(format!("{base}/info")).json(body).send().unwrap();
    assert_eq!(resp.status().as_u16(), 200, "{body}");
    resp.json().unwrap()
}

/// The l4Book snapshot against the files: waiting orders exactly, triggered ones at their diff's price; and
/// l2Book's levels against the snapshot's resting orders.
fn check_coin(base: &str, coin: &str, snap: &Value, d: &Derived) -> usize {
    let mut listed: BTreeMap<u64, (String, Value)> = BTreeMap::new();
    let mut by_px: [BTreeMap<u128, (u128, u64)>; 2] = [BTreeMap::new(), BTreeMap::new()];
    for (side, orders) in snap["levels"].as_array().unwrap().iter().enumerate() {
        for pair in orders.as_array().unwrap() {
            let (user, o) = (str_of(&pair[0]), &pair[1]);
            let oid = o["oid"].as_u64().unwrap();
            if o["isTrigger"] == true {
                listed.insert(oid, (user, o.clone()));
                continue;
            }
            let level = by_px[side].entry(units(o["limitPx"].as_str().unwrap())).or_default();
            level.0 += units(o["sz"].as_str().unwrap());
            level.1 += 1;
            if let Some((_, u, px, sz)) = d.resting.get(&oid) {
                assert_eq!((&user, o["limitPx"].as_str().unwrap(), o["sz"].as_str().unwrap()), (u, &**px, &**sz));
                assert_eq!((&o["triggerCondition"], &o["tif"]), (&json!("Triggered"), &json!("Gtc")), "{o}");
            }
        }
    }
    let want: BTreeMap<u64, (String, Value)> =
        d.waiting.iter().filter(|w| w.1.0 == coin).map(|(oid, w)| (*oid, (w.1.clone(), w.2.clone()))).collect();
    assert_eq!(listed, want, "{coin}: the waiting trigger orders of the l4Book snapshot");
    let resting: Vec<&u64> = d.resting.iter().filter(|r| r.1.0 == coin).map(|r| r.0).collect();
    let found = snap["levels"].to_string();
    for oid in &resting {
        assert!(found.contains(&format!("\"oid\":{oid},")), "{coin}: triggered order {oid} is not resting");
    }
    // l2Book: each level is the snapshot's resting orders at that price, summed.
    let l2 = post(base, &json!({"type": "l2Book", "coin": coin}));
    for (side, levels) in l2["levels"].as_array().unwrap().iter().enumerate() {
        for l in levels.as_array().unwrap() {
            let px = units(l["px"].as_str().unwrap());
            let got = (units(l["sz"].as_str().unwrap()), l["n"].as_u64().unwrap());
            assert_eq!(Some(&got), by_px[side].get(&px), "{coin} side {side}: l2Book level {l}");
        }
    }
    resting.len()
}

/// A user's open orders of every dex (`""`: the main perps and spot; `xyz`: its `xyz:COIN` books).
fn open_orders(base: &str, kind: &str, user: &str, d: &Derived) -> Vec<Value> {
    let coins = d.waiting.values().map(|w| &w.0).chain(d.resting.values().map(|r| &r.0));
    let dexes: BTreeSet<&str> = coins.map(|c| c.split_once(':').map_or("", |(dex, _)| dex)).collect();
    let ask = |dex: &str| post(base, &json!({"type": kind, "user": user, "dex": dex}));
    dexes.into_iter().flat_map(|dex| ask(dex).as_array().unwrap().clone()).collect()
}

/// Each user's frontendOpenOrders and openOrders against the files.
fn check_user(base: &str, user: &str, d: &Derived) {
    let front = open_orders(base, "frontendOpenOrders", user, d);
    let waiting: BTreeMap<u64, &Value> =
        front.iter().filter(|o| o["isTrigger"] == true).map(|o| (o["oid"].as_u64().unwrap(), o)).collect();
    let want: BTreeMap<u64, &Value> = d.waiting.iter().filter(|w| w.1.1 == user).map(|(oid, w)| (*oid, &w.2)).collect();
    assert_eq!(waiting, want, "{user}: the waiting trigger orders of frontendOpenOrders");
    for (oid, (_, _, px, sz)) in d.resting.iter().filter(|r| r.1.1 == user) {
        let o = front.iter().find(|o| o["oid"] == *oid).unwrap_or_else(|| panic!("{user}: {oid} not open"));
        assert_eq!((o["limitPx"].as_str().unwrap(), o["sz"].as_str().unwrap()), (&**px, &**sz), "{o}");
        assert_eq!((&o["isTrigger"], &o["triggerCondition"]), (&json!(false), &json!("Triggered")), "{o}");
    }
    let plain = open_orders(base, "openOrders", user, d);
    for (oid, w) in want {
        let o = plain.iter().find(|o| o["oid"] == oid).unwrap_or_else(|| panic!("{user}: {oid} not in openOrders"));
        let fields = ["coin", "side", "limitPx", "sz", "timestamp", "origSz"];
        assert!(fields.iter().all(|f| o[f] == w[f]), "{user}: openOrders {o} against the status's {w}");
        assert_eq!(o["reduceOnly"], w["reduceOnly"], "{o}");
    }
}

fn run(mode: Mode) {
    let out = tempfile::tempdir().unwrap();
    let data = out.path().join("data");
    let n = BLOCKS.to_string();
    #[rustfmt::skip]
    let sim_args = [
        "--mode", mode.as_str(), "--coins", "3", "--btc-orders", "1000", "--orders-per-coin", "200",
        "--block-ms", "40", "--rate", "0.1", "--reject-ratio", "1", "--users", "25", "--blocks", &n,
    ];
    let (mut sim, info_url) = start_sim(&data, &sim_args, &out.path().join("sim.log"));
    // No info type goes to the node: hlbook answers openOrders and frontendOpenOrders from its own state. Blocks
    // apply whole (not line by line), so the books rest complete at the last complete block. The test asks more
    // than the exchange's per-IP weight allows.
    #[rustfmt::skip]
    let serve_args = ["--mode", mode.as_str(), "--set", "server.info_types=[\"meta\"]",
        "--set", "ingest.stream_lines=false", "--stale-after", "600", "--set", "server.info_weight_per_minute=0"];
    let mut server =
        start_serve(&data, &info_url, &out.path().join("snaps"), &serve_args, &out.path().join("serve.log"));
    let addr = server.wait_line("hlbook listening on", Duration::from_secs(30));
    let base = format!("http://{addr}");
    // Streaming: the simulator's last block never completes (no later line).
    let last = FIRST_HEIGHT + BLOCKS - 1 - u64::from(mode == Mode::Streaming);
    wait_health(&base, Duration::from_secs(120), |h| h["height"].as_u64() == Some(last));

    let d = derive(&data, mode, last);
    assert!(d.placed >= 20 && d.triggered >= 5, "too few to test: {} placed, {} triggered", d.placed, d.triggered);
    assert!(d.waiting.len() >= 5, "only {} waiting at the end", d.waiting.len());
    let coins: BTreeSet<String> =
        d.waiting.values().map(|w| w.0.clone()).chain(d.resting.values().map(|r| r.0.clone())).collect();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut resting = 0;
    for coin in &coins {
        let snap = rt.block_on(l4_snapshot(&addr, coin));
        assert_eq!(snap["height"], last, "{coin}: the snapshot is of the last block");
        resting += check_coin(&base, coin, &snap, &d);
    }
    assert!(resting >= 1, "no triggered order still rests: {} triggered", d.triggered);
    let users: BTreeSet<&String> = d.waiting.values().map(|w| &w.1).chain(d.resting.values().map(|r| &r.1)).collect();
    for user in &users {
        check_user(&base, user, &d);
    }
    let health = procs::get_json(&format!("{}/health", procs::admin_base(&server))).unwrap();
    assert_eq!(health["books"]["trigger_orders"], d.waiting.len(), "/health counts the trigger orders waiting");
    eprintln!(
        "{mode:?}: {} placed, {} triggered; {} waiting and {resting} triggered resting checked over {} coins, {} users",
        d.placed,
        d.triggered,
        d.waiting.len(),
        coins.len(),
        users.len()
    );
    sim.stop();
    server.stop();
}

#[test]
fn trigger_orders_by_block_are_served_as_the_files_say() {
    run(Mode::ByBlock);
}

#[test]
fn trigger_orders_streaming_are_served_as_the_files_say() {
    run(Mode::Streaming);
}
