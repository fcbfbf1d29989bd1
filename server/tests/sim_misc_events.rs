//! misc_events end to end, with the real binaries: `hlsim --write-misc-events --write-liquidations` writes fundings
//! and ledger updates (liquidations among them), `hlbook serve` follows it, and one connection per user subscribes
//! userFundings, userNonFundingLedgerUpdates and userEvents for users the files name. Once the simulator is done, the test reads
//! the misc_events files itself (JSON values, its own decimal and time handling, none of hlbook's parsers) and
//! requires that every event of a block handed out after the subscriptions reached its user's subscriber exactly
//! once, in order, in the exchange's shape; and, since the history store keeps them from the first file on, that
//! userFundings' and userNonFundingLedgerUpdates' snapshot and live frames together are every entry of the
//! files, each once, in order. Without the folder, hlbook serves and says so on the admin /health.

mod nodetext;
mod procs;
mod wsclient;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use hlbook::node::Mode;
use nodetext::{millis, norm};
use procs::{admin_base, get_json, start_serve, start_sim, wait_health};
use serde_json::{Value, json};
use wsclient::raw::{self, channel};

const BLOCKS: u64 = 400;
/// Users followed (the exchange's per-IP cap is far above).
const USERS: usize = 4;
const KINDS: [&str; 3] = ["userFundings", "userNonFundingLedgerUpdates", "userEvents"];

#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ch {
    Fundings,
    Ledger,
    Events,
}

/// Each (user, channel)'s entries in the files, with their block heights, in order.
type Expected = BTreeMap<(String, Ch), Vec<(u64, Value)>>;

fn folder(mode: Mode) -> &'static str {
    if mode == Mode::Streaming { "misc_events_streaming" } else { "misc_events_by_block" }
}

/// A funding in the exchange's shape (`WsUserFunding`), decimals in one spelling.
fn funding(time: i64, coin: &Value, usdc: &Value, szi: &Value, rate: &Value, n_samples: &Value) -> Value {
    json!({"time": time, "coin": coin, "usdc": norm(usdc), "szi": norm(szi), "fundingRate": norm(rate),
        "nSamples": n_samples})
}

/// What the files say each user gets, through the last block hlbook can hand out: by-block every block written,
/// streaming all but the last (no later line completes it). Returns it with that block's height.
fn expected(data: &Path, mode: Mode) -> (Expected, u64) {
    let lines = procs::node_json_lines(&data.join(folder(mode)));
    let heights: BTreeSet<u64> = lines.iter().map(|l| l["block_number"].as_u64().unwrap()).collect();
    let mut top = heights.iter().rev();
    let last = *if mode == Mode::Streaming { top.nth(1) } else { top.next() }.expect("misc_events lines");
    let mut out = Expected::new();
    for l in lines.iter().filter(|l| l["block_number"].as_u64() <= Some(last)) {
        let h = l["block_number"].as_u64().unwrap();
        for ev in l["events"].as_array().unwrap() {
            let time = millis(&ev["time"]);
            let inner = &ev["inner"];
            for d in inner["Funding"]["deltas"].as_array().into_iter().flatten() {
                let user = d["user"].as_str().unwrap().to_lowercase();
                let f = funding(time, &d["coin"], &d["funding_amount"], &d["szi"], &d["funding_rate"], &Value::Null);
                out.entry((user.clone(), Ch::Fundings)).or_default().push((h, f.clone()));
                out.entry((user, Ch::Events)).or_default().push((h, f));
            }
            let update = &inner["LedgerUpdate"];
            let users: BTreeSet<String> =
                update["users"].as_array().into_iter().flatten().map(|u| u.as_str().unwrap().to_lowercase()).collect();
            for user in users {
                let entry = json!({"time": time, "hash": ev["hash"], "delta": update["delta"]});
                out.entry((user, Ch::Ledger)).or_default().push((h, entry));
            }
        }
    }
    (out, last)
}

/// The users with the most events in the files so far.
fn busiest_users(data: &Path, mode: Mode) -> Vec<String> {
    let (exp, _) = expected(data, mode);
    let mut count: BTreeMap<&String, usize> = BTreeMap::new();
    for ((user, ch), list) in &exp {
        if *ch != Ch::Events {
            *count.entry(user).or_default() += list.len();
        }
    }
    let mut users: Vec<(&String, usize)> = count.into_iter().collect();
    users.sort_by_key(|u| std::cmp::Reverse(u.1));
    users.into_iter().take(USERS).map(|u| u.0.clone()).collect()
}

/// What one user's connection received.
#[derive(Debug, Default)]
struct Got {
    acks: usize,
    snapshots: BTreeSet<Ch>,
    lists: BTreeMap<Ch, Vec<Value>>,
}

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object().unwrap_or_else(|| panic!("not an object: {v}")).keys().map(String::as_str).collect()
}

fn funding_of(e: &Value) -> Value {
    let fields = BTreeSet::from(["time", "coin", "usdc", "szi", "fundingRate", "nSamples"]);
    assert_eq!(keys(e), fields, "the exchange's funding fields: {e}");
    funding(e["time"].as_i64().unwrap(), &e["coin"], &e["usdc"], &e["szi"], &e["fundingRate"], &e["nSamples"])
}

/// Files one frame of `user`'s connection.
fn take(got: &mut Got, user: &str, v: &Value) {
    let data = &v["data"];
    let (ch, entries) = match channel(v) {
        "subscriptionResponse" => {
            got.acks += 1;
            return;
        }
        // userEvents: its fills frames are not misc_events'.
        "user" if data.get("funding").is_none() => return,
        "user" => {
            got.lists.entry(Ch::Events).or_default().push(funding_of(&data["funding"]));
            return;
        }
        "userFundings" => (Ch::Fundings, data["fundings"].as_array().unwrap().iter().map(funding_of).collect()),
        "userNonFundingLedgerUpdates" => {
            let list = data["nonFundingLedgerUpdates"].as_array().unwrap();
            for e in list {
                assert_eq!(keys(e), BTreeSet::from(["time", "hash", "delta"]), "the exchange's entry fields: {e}");
            }
            (Ch::Ledger, list.clone())
        }
        _ => panic!("{user}: an unexpected frame: {v}"),
    };
    assert_eq!(data["user"], user, "{v}");
    let first = got.snapshots.insert(ch);
    assert_eq!(data["isSnapshot"] == true, first, "only the first frame of a channel is its snapshot: {v}");
    got.lists.entry(ch).or_default().extend(entries);
}

/// Whether every (user, channel) with events after `after` has received the last of them.
fn complete(users: &[String], got: &[Got], exp: &Expected, after: u64) -> bool {
    users.iter().zip(got).all(|(u, g)| {
        [Ch::Fundings, Ch::Ledger, Ch::Events].iter().all(|ch| match exp.get(&(u.clone(), *ch)) {
            Some(list) if list.last().is_some_and(|l| l.0 > after) => {
                g.lists.get(ch).and_then(|r| r.last()) == list.last().map(|l| &l.1)
            }
            _ => true,
        })
    })
}

/// Received is the files' list from some entry on, to its end, and starts no later than the first entry of a
/// block handed out after the subscriptions (`after`); with a snapshot from the store (userFundings,
/// userNonFundingLedgerUpdates, at most 500 entries), from the first entry (or the 500th before the end of the
/// snapshot's). Returns how many entries were checked.
fn check(user: &str, ch: Ch, exp: &[(u64, Value)], got: &[Value], after: u64) -> usize {
    let first_after = exp.iter().position(|e| e.0 > after).unwrap_or(exp.len());
    assert!(got.len() <= exp.len(), "{user} {ch:?}: {} received, the files hold {}", got.len(), exp.len());
    let k = exp.len() - got.len();
    let want: Vec<&Value> = exp[k..].iter().map(|e| &e.1).collect();
    assert_eq!(got.iter().collect::<Vec<_>>(), want, "{user} {ch:?}: received against the files' last entries");
    assert!(
        k <= first_after,
        "{user} {ch:?}: entries of blocks after {after} missing: {} of {}",
        first_after - k.min(first_after),
        exp.len() - first_after
    );
    if ch != Ch::Events {
        assert!(k <= first_after.saturating_sub(500), "{user} {ch:?}: the snapshot lacks the store's {k} oldest");
    }
    got.len()
}

fn admin_json(admin: &str) -> Value {
    get_json(&format!("{admin}/health")).expect("admin /health")
}

fn run(mode: Mode) {
    let out = tempfile::tempdir().unwrap();
    let data = out.path().join("data");
    let n = BLOCKS.to_string();
    #[rustfmt::skip]
    let sim_args = [
        "--mode", mode.as_str(), "--coins", "3", "--btc-orders", "300", "--orders-per-coin", "100",
        "--block-ms", "40", "--users", "6", "--blocks", &n, "--write-misc-events", "--funding-every-blocks", "3",
        "--write-liquidations", "--exit-when-done",
    ];
    let (mut sim, info_url) = start_sim(&data, &sim_args, &out.path().join("sim.log"));
    // The simulator's info server goes when it is done: no periodic validation against it.
    let serve_args = ["--mode", mode.as_str(), "--stale-after", "600", "--validate-interval", "0"];
    let mut server =
        start_serve(&data, &info_url, &out.path().join("snaps"), &serve_args, &out.path().join("serve.log"));
    let addr = server.wait_line("hlbook listening on", Duration::from_secs(30));
    let admin = admin_base(&server);
    wait_health(&admin, Duration::from_secs(120), |h| {
        h["misc_events"]["read"] == "read" && h["misc_events"]["counters"]["events"].as_u64() >= Some(10)
    });
    let users = busiest_users(&data, mode);
    assert!(!users.is_empty(), "no user has misc events yet");

    let rt = tokio::runtime::Runtime::new().unwrap();
    let subs = users.iter().map(|u| KINDS.iter().map(|k| json!({"type": k, "user": u})).collect()).collect();
    let rx = raw::fan_in(&rt, &addr, subs, Duration::from_secs(300));
    let mut got: Vec<Got> = users.iter().map(|_| Got::default()).collect();
    let receive = |got: &mut Vec<Got>, what: &str| {
        let (i, v) = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|e| panic!("{what}: {e}; got {got:?}"));
        take(&mut got[i], &users[i], &v);
    };
    while got.iter().any(|g| g.acks < KINDS.len() || g.snapshots.len() < 2) {
        receive(&mut got, "acks and snapshots");
    }
    // Blocks handed out after this were read after every subscription was made.
    let after = admin_json(&admin)["misc_events"]["height"].as_u64().unwrap();

    assert!(sim.wait_exit(Duration::from_secs(180)).success(), "hlsim failed");
    let (exp, last) = expected(&data, mode);
    wait_health(&admin, Duration::from_secs(60), |h| h["misc_events"]["height"].as_u64() == Some(last));
    while !complete(&users, &got, &exp, after) {
        receive(&mut got, "the files' last events");
    }
    let mut checked = BTreeMap::new();
    for (user, g) in users.iter().zip(&got) {
        for ch in [Ch::Fundings, Ch::Ledger, Ch::Events] {
            let list = exp.get(&(user.clone(), ch)).map_or(&[][..], Vec::as_slice);
            let received = g.lists.get(&ch).map_or(&[][..], Vec::as_slice);
            *checked.entry(ch).or_insert(0) += check(user, ch, list, received, after);
        }
    }
    let h = admin_json(&admin);
    let counters = &h["misc_events"]["counters"];
    assert_eq!((counters["bad_lines"].as_u64(), counters["gaps"].as_u64()), (Some(0), Some(0)), "{h}");
    eprintln!("{mode:?}: {} users from block {after} to {last}: {checked:?} entries checked", users.len());
    assert!(checked[&Ch::Fundings] >= 5 && checked[&Ch::Ledger] >= 3, "too few to test: {checked:?}");
    // userFundings: the store's snapshot and the live frames, every funding of the files (below 500 a user);
    // userEvents (no snapshot): those of the blocks after the subscriptions, checked above.
    let whole: usize = users.iter().map(|u| exp.get(&(u.clone(), Ch::Fundings)).map_or(0, Vec::len)).sum();
    assert_eq!(checked[&Ch::Fundings], whole, "userFundings: snapshot and live frames hold every funding");
    assert!(checked[&Ch::Events] > 0 && checked[&Ch::Events] <= whole, "{checked:?}");
    server.stop();
}

#[test]
fn misc_events_by_block_reach_each_user_once_in_order() {
    run(Mode::ByBlock);
}

#[test]
fn misc_events_streaming_reach_each_user_once_in_order() {
    run(Mode::Streaming);
}

/// hlsim without `--write-misc-events` in `dir/data` and hlbook beside it: (sim, server, its address, admin base).
fn without_misc_flag(dir: &Path) -> (procs::Proc, procs::Proc, String, String) {
    let data = dir.join("data");
    let (sim, info_url) = start_sim(&data, &["--coins", "3", "--block-ms", "40"], &dir.join("sim.log"));
    let server = start_serve(&data, &info_url, &dir.join("snaps"), &[], &dir.join("serve.log"));
    let addr = server.wait_line("hlbook listening on", Duration::from_secs(30));
    let admin = admin_base(&server);
    (sim, server, addr, admin)
}

/// Without `--write-misc-events` the node writes no folder: hlbook serves, says on the admin /health that the
/// stream is absent, and userFundings still answers with its (empty) snapshot.
#[test]
fn without_misc_events_hlbook_serves_and_says_so() {
    let out = tempfile::tempdir().unwrap();
    let (mut sim, mut server, addr, admin) = without_misc_flag(out.path());
    wait_health(&admin, Duration::from_secs(120), |h| h["misc_events"]["read"] == "absent" && h["state"] == "live");
    let public = get_json(&format!("http://{addr}/health")).unwrap();
    assert!(public.get("misc_events").is_none(), "the public /health stays lean: {public}");
    let metrics = procs::get_bytes(&format!("{admin}/metrics")).unwrap();
    assert!(String::from_utf8_lossy(&metrics).contains("hlbook_misc_read 0"), "metrics say it is not read");
    let user = "0x00000000000000000000000000000000000000a1";
    let rt = tokio::runtime::Runtime::new().unwrap();
    let snapshot = rt.block_on(async {
        let mut ws = raw::connect(&addr, "", None).await;
        raw::subscribe(&mut ws, json!({"type": "userFundings", "user": user})).await;
        let ack = raw::expect_json(&mut ws, Duration::from_secs(30)).await;
        assert_eq!(channel(&ack), "subscriptionResponse", "{ack}");
        raw::expect_json(&mut ws, Duration::from_secs(30)).await
    });
    assert_eq!(
        snapshot,
        json!({"channel": "userFundings", "data": {"isSnapshot": true, "user": user, "fundings": []}})
    );
    server.stop();
    sim.stop();
}

/// Appends whole lines to a by-block misc_events hour file of `data` (the test's own, beside hlsim's book streams).
fn append_misc(data: &Path, lines: &[String]) {
    use std::io::Write;
    let p = data.join("misc_events_by_block/hourly/20260505/9");
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(p).unwrap();
    for l in lines {
        f.write_all(format!("{l}\n").as_bytes()).unwrap();
    }
}

/// A by-block misc_events line of block `h` with `events`.
fn misc_line(h: u64, events: &[String]) -> String {
    let t = "2026-05-05T09:00:00.250000001";
    format!(r#"{{"local_time":"{t}","block_time":"{t}","block_number":{h},"events":[{}]}}"#, events.join(","))
}

fn misc_event(inner: &str) -> String {
    format!(r#"{{"time":"2026-05-05T09:00:00.250000001","hash":"0x{}","inner":{inner}}}"#, "ab".repeat(32))
}

/// Bad input: a malformed line and an event of an unknown kind in a misc_events file are counted and skipped; the
/// events around them still reach the subscriber, and the books keep following the node.
#[test]
fn a_malformed_misc_line_and_an_unknown_kind_are_counted_and_skipped() {
    let out = tempfile::tempdir().unwrap();
    let data = out.path().join("data");
    let (mut sim, mut server, addr, admin) = without_misc_flag(out.path());
    let h =
        wait_health(&admin, Duration::from_secs(120), |h| h["misc_events"]["read"] == "absent" && h["state"] == "live");
    // The stream appears once the node "restarts with the flag"; its blocks are far ahead of the books', so the
    // reader, which starts after the books' height, takes every one.
    append_misc(&data, &[]);
    wait_health(&admin, Duration::from_secs(60), |h| h["misc_events"]["read"] == "read");
    let user = "0x00000000000000000000000000000000000000a1";
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut ws = rt.block_on(async {
        let mut ws = raw::connect(&addr, "", None).await;
        for kind in ["userNonFundingLedgerUpdates", "userFundings"] {
            raw::subscribe(&mut ws, json!({"type": kind, "user": user})).await;
            assert_eq!(channel(&raw::expect_json(&mut ws, Duration::from_secs(30)).await), "subscriptionResponse");
            assert_eq!(raw::expect_json(&mut ws, Duration::from_secs(30)).await["data"]["isSnapshot"], true);
        }
        ws
    });
    let base = h["height"].as_u64().unwrap() + 1000;
    let deposit = |usdc: &str| {
        let delta = format!(r#"{{"type":"deposit","usdc":"{usdc}"}}"#);
        misc_event(&format!(r#"{{"LedgerUpdate":{{"users":["{user}"],"delta":{delta}}}}}"#))
    };
    let payment = misc_event(&format!(
        r#"{{"Funding":{{"deltas":[{{"user":"{user}","coin":"BTC","funding_amount":"-0.5","szi":"2.0","funding_rate":"0.0000125"}}]}}}}"#
    ));
    append_misc(
        &data,
        &[
            misc_line(base, &[deposit("1.0")]),
            format!(r#"{{"local_time":"2026-05-05T09:00:00","block_number":{},"events":[{{"#, base + 1),
            misc_line(base + 2, &[misc_event(r#"{"SomethingNew":{"x":1}}"#), deposit("2.0")]),
            misc_line(base + 3, &[payment]),
        ],
    );
    let frames = rt.block_on(async {
        let mut frames = Vec::new();
        while frames.len() < 3 {
            frames.push(raw::expect_json(&mut ws, Duration::from_secs(60)).await);
        }
        frames
    });
    let time = millis(&json!("2026-05-05T09:00:00.250000001"));
    let ledger = |usdc: &str| {
        json!({"channel": "userNonFundingLedgerUpdates", "data": {"user": user, "nonFundingLedgerUpdates": [
            {"time": time, "hash": format!("0x{}", "ab".repeat(32)), "delta": {"type": "deposit", "usdc": usdc}}]}})
    };
    assert_eq!(frames[..2], [ledger("1.0"), ledger("2.0")], "the deposits around the bad line and the unknown kind");
    assert_eq!(channel(&frames[2]), "userFundings", "{}", frames[2]);
    let f = funding_of(&frames[2]["data"]["fundings"][0]);
    assert_eq!(f, funding(time, &json!("BTC"), &json!("-0.5"), &json!("2"), &json!("0.0000125"), &Value::Null));
    let h = admin_json(&admin);
    let c = &h["misc_events"]["counters"];
    assert_eq!(
        (c["bad_lines"].as_u64(), c["unknown_events"].as_u64(), c["blocks"].as_u64()),
        (Some(1), Some(1), Some(3)),
        "{h}"
    );
    let later = h["height"].as_u64().unwrap() + 5;
    wait_health(&admin, Duration::from_secs(60), |h| h["state"] == "live" && h["height"].as_u64() >= Some(later));
    server.stop();
    sim.stop();
}
