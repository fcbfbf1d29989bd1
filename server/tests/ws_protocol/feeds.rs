//! The data feeds: l2Book precisions, trades, l4Book kept exactly, batch and audit frames, and shutdown.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::procs::wait_health;
use crate::rig;
use crate::wsclient::check;
use crate::wsclient::http::get_json;
use crate::wsclient::{Client, Event, run};

#[test]
fn precisions_of_one_coin_on_one_connection() {
    let rig = rig("");
    run(async {
        // Three shapes of BTC on one connection, told apart by their depths; ETH and SOL on another, so a frame
        // crossing connections would show.
        let mut c = Client::connect(&rig.ws("")).await;
        c.subscribe(json!({"type": "l2Book", "coin": "BTC"})).await;
        c.subscribe(json!({"type": "l2Book", "coin": "BTC", "nSigFigs": 5, "nLevels": 10})).await;
        c.subscribe(json!({"type": "l2Book", "coin": "BTC", "nSigFigs": 3, "nLevels": 5})).await;
        let mut other = Client::connect(&rig.ws("")).await;
        other.subscribe(json!({"type": "l2Book", "coin": "ETH", "nSigFigs": 2})).await;
        other.subscribe(json!({"type": "trades", "coin": "SOL"})).await;

        let mut seen: HashMap<usize, usize> = HashMap::new();
        let frames = c
            .collect_until(Duration::from_secs(2), |m| {
                let depth =
                    |d: usize| m.iter().filter(|v| v["data"]["levels"][0].as_array().map(Vec::len) == Some(d)).count();
                depth(20) >= 2 && depth(10) >= 2 && depth(5) >= 2
            })
            .await;
        for v in frames.iter().filter(|v| v["channel"] == "l2Book") {
            let data = &v["data"];
            let deepest = data["levels"].as_array().unwrap().iter().map(|s| s.as_array().unwrap().len()).max().unwrap();
            match deepest {
                20 => _ = check::l2_book(data, "BTC", 20, None),
                10 => _ = check::l2_book(data, "BTC", 10, Some((5, 1))),
                5 => _ = check::l2_book(data, "BTC", 5, Some((3, 1))),
                d => panic!("a BTC frame {d} levels deep matches no subscription (the book is deep): {v}"),
            }
            *seen.entry(deepest).or_default() += 1;
        }
        assert!(seen.len() == 3, "every shape got frames: {seen:?}");
        let books = |m: &[Value]| m.iter().filter(|v| v["channel"] == "l2Book").count();
        let others = other.collect_until(Duration::from_secs(1), |m| books(m) >= 1).await;
        for v in others.iter().filter(|v| v["channel"] == "l2Book") {
            check::l2_book(&v["data"], "ETH", 20, Some((2, 1)));
        }
    });
}

#[test]
fn trades_are_complete_unique_and_oldest_first() {
    let rig = rig("");
    run(async {
        let mut c = Client::connect(&rig.ws("")).await;
        for coin in ["BTC", "ETH", "SOL"] {
            c.subscribe(json!({"type": "trades", "coin": coin})).await;
        }
        let count = |m: &[Value]| m.iter().filter(|v| v["channel"] == "trades").count();
        let frames = c.collect_until(Duration::from_secs(1), |m| count(m) >= 10).await;
        let mut tids = HashSet::new();
        for v in frames.iter().filter(|v| v["channel"] == "trades") {
            let list = v["data"].as_array().unwrap();
            assert!(!list.is_empty(), "no empty trades frames: {v}");
            let coin = list[0]["coin"].as_str().unwrap();
            let mut last = 0;
            for t in list {
                check::trade(t, coin);
                let time = t["time"].as_u64().unwrap();
                assert!(time >= last, "oldest first within a frame: {v}");
                last = time;
                assert!(tids.insert(t["tid"].as_u64().unwrap()), "tid repeated: {t}");
            }
        }
    });
}

/// A resting order as the tests compare them: price, size, side.
type Resting = (String, String, String);

/// `[[user, order], …]` bids and asks into oid → (px, sz, side).
fn resting(levels: &Value) -> HashMap<u64, Resting> {
    let mut out = HashMap::new();
    for side in levels.as_array().unwrap() {
        for entry in side.as_array().unwrap() {
            assert!(check::is_address(&entry[0]), "[user, order]: {entry}");
            let o = &entry[1];
            let s = |k: &str| o[k].as_str().unwrap_or_else(|| panic!("order without {k}: {o}")).to_string();
            // A trigger order waiting for its trigger is listed after its side's resting orders (docs/api.md).
            let side = if o["isTrigger"] == true { format!("waiting {}", s("side")) } else { s("side") };
            assert!(out.insert(o["oid"].as_u64().unwrap(), (s("limitPx"), s("sz"), side)).is_none(), "{o}");
        }
    }
    out
}

/// Applies one `updates` frame's raw diffs, checking each against the copy.
fn apply(book: &mut HashMap<u64, Resting>, data: &Value) {
    let diffs = data["book_diffs"].as_array().unwrap();
    let statuses = data["order_statuses"].as_array().unwrap();
    assert!(
        !diffs.is_empty() || !statuses.is_empty(),
        "an updates frame is sent for a block that changed the coin: {data}"
    );
    let oids: HashSet<u64> = diffs.iter().map(|d| d["oid"].as_u64().unwrap()).collect();
    for s in statuses {
        let o = &s["order"];
        let oid = o["oid"].as_u64().unwrap();
        let trigger = o["isTrigger"] == true || s["status"] == "triggered";
        assert!(o["coin"] == data["coin"] && (trigger || oids.contains(&oid)), "status of another order: {s}");
        // A trigger order's placement holds it as waiting; any other status of a waiting oid ends it.
        if s["status"] == "open" && o["isTrigger"] == true {
            let f = |k: &str| o[k].as_str().unwrap().to_string();
            book.insert(oid, (f("limitPx"), f("sz"), format!("waiting {}", f("side"))));
        } else if book.get(&oid).is_some_and(|r| r.2.starts_with("waiting")) {
            book.remove(&oid);
        }
    }
    for d in diffs {
        assert_eq!(d["coin"], data["coin"], "{d}");
        let oid = d["oid"].as_u64().unwrap();
        let s = |k: &str| d[k].as_str().unwrap().to_string();
        let raw = &d["raw_book_diff"];
        if raw == "remove" {
            assert!(book.remove(&oid).is_some(), "remove of an order not in the book: {d}");
        } else if let Some(new) = raw.get("new") {
            let sz = new["sz"].as_str().unwrap().to_string();
            assert!(book.insert(oid, (s("px"), sz, s("side"))).is_none(), "new order already in the book: {d}");
        } else if let Some(up) = raw.get("update") {
            let o = book.get_mut(&oid).unwrap_or_else(|| panic!("update of an order not in the book: {d}"));
            assert_eq!(check::units(&o.1), check::units(up["origSz"].as_str().unwrap()), "origSz is the size: {d}");
            o.1 = up["newSz"].as_str().unwrap().to_string();
        } else {
            panic!("unknown raw diff: {d}");
        }
    }
}

/// The last block in the simulator's by-block diffs files, and the last one with a diff of `coin`.
fn last_blocks(data: &std::path::Path, coin: &str) -> (u64, u64) {
    let (mut last, mut last_coin) = (0, 0);
    for day in std::fs::read_dir(data.join("node_raw_book_diffs_by_block/hourly")).unwrap().flatten() {
        for f in std::fs::read_dir(day.path()).unwrap().flatten() {
            for l in std::fs::read_to_string(f.path()).unwrap().lines() {
                let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
                let h = v["block_number"].as_u64().unwrap();
                last = last.max(h);
                if v["events"].as_array().unwrap().iter().any(|e| e["coin"] == coin) {
                    last_coin = last_coin.max(h);
                }
            }
        }
    }
    (last, last_coin)
}

/// Our resting set equals the server's book of `coin` at the same height (sizes compared as numbers).
fn assert_same(ours: &HashMap<u64, Resting>, theirs: &HashMap<u64, Resting>, what: &str) {
    let norm = |m: &HashMap<u64, Resting>| -> HashMap<u64, (u128, u128, String)> {
        m.iter().map(|(k, (p, s, d))| (*k, (check::units(p), check::units(s), d.clone()))).collect()
    };
    let (a, b) = (norm(ours), norm(theirs));
    let missing = b.keys().filter(|k| !a.contains_key(k)).count();
    let extra = a.keys().filter(|k| !b.contains_key(k)).count();
    let differ = a.iter().filter(|(k, v)| b.get(k).is_some_and(|w| w != *v)).count();
    assert!(
        missing + extra + differ == 0,
        "{what}: {missing} missing, {extra} extra, {differ} different of {}",
        b.len()
    );
}

#[test]
fn l4book_snapshot_and_updates_rebuild_the_servers_book() {
    let mut rig = rig("");
    run(async {
        let mut c = Client::connect(&rig.ws("")).await;
        c.subscribe(json!({"type": "l4Book", "coin": "BTC"})).await;
        let snap = c.next().await;
        assert_eq!((&snap["channel"], &snap["data"]["type"]), (&json!("l4Book"), &json!("snapshot")), "{snap}");
        let height = std::cell::Cell::new(snap["data"]["height"].as_u64().unwrap());
        let mut book = resting(&snap["data"]["levels"]);
        let mut updates = 0;
        let mut take = |v: &Value, book: &mut HashMap<u64, Resting>| {
            let data = &v["data"];
            assert_eq!((&data["type"], &data["coin"]), (&json!("updates"), &json!("BTC")), "{v}");
            let (h, after) = (data["height"].as_u64().unwrap(), height.get());
            assert!(h > after, "updates in height order, after the snapshot: {h} after {after}");
            height.set(h);
            apply(book, data);
            updates += 1;
        };
        for v in c.collect_until(Duration::from_secs(1), |m| m.len() >= 10).await {
            take(&v, &mut book);
        }

        // Stop the market; the simulator's files then say the last block and the last one that changed BTC: the
        // server reaches the first, and this client gets the update of the second.
        let status = tokio::task::block_in_place(|| rig.sim.stop());
        assert!(status.success(), "hlsim exits 0 on SIGTERM");
        let (final_height, last_btc) = last_blocks(&rig.dir.path().join("data"), "BTC");
        tokio::task::block_in_place(|| {
            wait_health(&rig.base, Duration::from_secs(60), |h| h["height"].as_u64() >= Some(final_height))
        });
        while height.get() < last_btc {
            match c.next_event(Duration::from_secs(30)).await {
                Some(Event::Msg(v, _)) => take(&v, &mut book),
                other => panic!("no update of BTC's last block {last_btc} (at {}): {other:?}", height.get()),
            }
        }
        let height = height.get();
        assert!(updates > 0 && height <= final_height, "{updates} updates, last at {height} of {final_height}");
        let doc = get_json(&format!("{}/l4snapshot?coins=BTC", rig.admin)).await;
        assert_eq!(doc[0].as_u64(), Some(final_height), "snapshot height");
        assert_eq!(doc[1][0][0], "BTC");
        let theirs = resting(&doc[1][0][1]);
        assert_same(&book, &theirs, "snapshot + updates vs /l4snapshot");

        // With the node quiet, a new subscriber still gets its snapshot, at the final height.
        let mut late = Client::connect(&rig.ws("")).await;
        late.subscribe(json!({"type": "l4Book", "coin": "BTC"})).await;
        let snap = late.next().await;
        assert_eq!((&snap["data"]["type"], snap["data"]["height"].as_u64()), (&json!("snapshot"), Some(final_height)));
        assert_same(&resting(&snap["data"]["levels"]), &theirs, "late snapshot vs /l4snapshot");
    });
}

#[test]
fn batch_frames_are_arrays_of_messages() {
    let rig = rig("");
    run(async {
        let mut c = Client::connect(&rig.ws("batch=1")).await;
        c.subscribe(json!({"type": "l2Book", "coin": "BTC"})).await;
        c.subscribe(json!({"type": "allMids"})).await;
        c.collect_until(Duration::from_secs(1), |m| m.iter().filter(|v| check::is_data(v)).count() >= 5).await;
        c.ping_pong().await;
        assert_eq!(c.object_frames, 0, "with batch=1 every frame is an array");
        assert!(c.array_frames.len() >= 3 && c.array_frames.iter().all(|n| *n > 0), "{:?}", c.array_frames);
    });
}

#[test]
fn audit_adds_a_last_key_to_data_frames() {
    let rig = rig("");
    run(async {
        let mut c = Client::connect(&rig.ws("audit=1")).await;
        let ack = c.subscribe(json!({"type": "l2Book", "coin": "BTC"})).await;
        assert!(ack.get("audit").is_none(), "acks are not data: {ack}");
        let frames = c.collect_until(Duration::from_secs(1), |m| m.len() >= 3).await;
        let mut last = 0;
        for (i, v) in frames.iter().enumerate() {
            // The subscription's chain (docs/api.md): numbered frames, each naming the previous one's height; the
            // first is the slot's current book, a snapshot.
            let a = &v["audit"];
            assert_eq!((&a["sub"], a["n"].as_u64()), (&json!(1), Some(i as u64 + 1)), "{v}");
            if i == 0 {
                assert_eq!((&a["snapshot"], &a["prev"]), (&json!(true), &Value::Null), "{v}");
            } else {
                assert_eq!((&a["snapshot"], a["prev"].as_u64()), (&Value::Null, Some(last)), "{v}");
            }
            let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
            assert_eq!(keys, ["channel", "data", "audit"], "{v}");
            let a = &v["audit"];
            let h = a["height"].as_u64().unwrap_or_else(|| panic!("audit height: {v}"));
            assert!(h >= last, "heights never go back: {v}");
            last = h;
            for k in ["block_ns", "node_ns", "read_ns", "applied_ns", "published_ns", "sent_ns"] {
                assert!(a[k].is_i64(), "audit.{k}: {v}");
            }
            check::l2_book(&v["data"], "BTC", 20, None);
        }
    });
}

#[test]
fn sigterm_closes_connections_going_away_and_exits_0() {
    let mut rig = rig("");
    run(async {
        let mut c = Client::connect(&rig.ws("")).await;
        c.subscribe(json!({"type": "l2Book", "coin": "BTC"})).await;
        c.next_where("a book", |v| v["channel"] == "l2Book").await;
        let reader = tokio::spawn(async move { c.closed(Duration::from_secs(30)).await });
        let status = tokio::task::block_in_place(|| rig.server.stop());
        let close = reader.await.unwrap();
        assert_eq!(close.map(|f| f.code), Some(CloseCode::Away), "a close frame with 1001");
        assert!(status.success(), "the server exits 0: {status:?}");
    });
}
