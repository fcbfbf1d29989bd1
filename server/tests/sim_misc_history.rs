//! Fundings and ledger updates kept by the history store, end to end with the real binaries: `hlsim
//! --write-misc-events` writes them, `hlbook serve` keeps them (`store::misc_writer`), and the info types
//! `userFunding` and `userNonFundingLedgerUpdates` answer them from the store. Once the simulator is done and the
//! store has written its last block, the test reads the misc_events files itself (JSON values, its own decimal and
//! time handling, none of hlbook's parsers) and requires each busy user's answer to be exactly the files' entries
//! of the range, each once, ascending, in the exchange's shape; `endTime` ends the range; a `startTime` before
//! what the store holds is not answered short (no upstream here: refused). In followed mode
//! (`store.fills_users = "followed"`) a user nobody follows is not answered at all, and once a userFundings
//! subscription follows it, its entries are answered from when the store began keeping them, never before.

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
use wsclient::raw;

const BLOCKS: u64 = 300;
const USERS: usize = 3;

fn folder(mode: Mode) -> &'static str {
    if mode == Mode::Streaming { "misc_events_streaming" } else { "misc_events_by_block" }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Funding,
    Ledger,
}

/// Each (user, kind)'s info entries in the files, in order, normalized (`info_entry`).
type Expected = BTreeMap<(String, Kind), Vec<Value>>;

/// A funding's delta in one spelling (the exchange's info shape).
fn funding_delta(coin: &Value, usdc: &Value, szi: &Value, rate: &Value, n_samples: &Value) -> Value {
    json!({"type": "funding", "coin": coin, "usdc": norm(usdc), "szi": norm(szi), "fundingRate": norm(rate),
        "nSamples": n_samples})
}

/// An answer's entry in the same spelling as `expected`'s.
fn info_entry(kind: Kind, e: &Value) -> Value {
    assert_eq!(
        e.as_object().unwrap().keys().map(String::as_str).collect::<BTreeSet<_>>(),
        BTreeSet::from(["time", "hash", "delta"]),
        "the exchange's entry fields: {e}"
    );
    let d = &e["delta"];
    let delta = match kind {
        Kind::Funding => funding_delta(&d["coin"], &d["usdc"], &d["szi"], &d["fundingRate"], &d["nSamples"]),
        Kind::Ledger => d.clone(),
    };
    json!({"time": e["time"], "hash": e["hash"], "delta": delta})
}

/// What the files hold through the last block hlbook hands out (streaming: all but the last), that height, and
/// the first block's time.
fn expected(data: &Path, mode: Mode) -> (Expected, u64, i64) {
    let lines = procs::node_json_lines(&data.join(folder(mode)));
    let heights: BTreeSet<u64> = lines.iter().map(|l| l["block_number"].as_u64().unwrap()).collect();
    let mut top = heights.iter().rev();
    let last = *if mode == Mode::Streaming { top.nth(1) } else { top.next() }.expect("misc_events lines");
    let first_ms = lines.iter().map(|l| millis(&l["block_time"])).min().unwrap();
    let mut out = Expected::new();
    for l in lines.iter().filter(|l| l["block_number"].as_u64() <= Some(last)) {
        for ev in l["events"].as_array().unwrap() {
            let time = millis(&ev["time"]);
            let inner = &ev["inner"];
            for d in inner["Funding"]["deltas"].as_array().into_iter().flatten() {
                let user = d["user"].as_str().unwrap().to_lowercase();
                let delta =
                    funding_delta(&d["coin"], &d["funding_amount"], &d["szi"], &d["funding_rate"], &Value::Null);
                out.entry((user, Kind::Funding))
                    .or_default()
                    .push(json!({"time": time, "hash": ev["hash"], "delta": delta}));
            }
            let update = &inner["LedgerUpdate"];
            let users: BTreeSet<String> =
                update["users"].as_array().into_iter().flatten().map(|u| u.as_str().unwrap().to_lowercase()).collect();
            for user in users {
                let entry = json!({"time": time, "hash": ev["hash"], "delta": update["delta"]});
                out.entry((user, Kind::Ledger)).or_default().push(entry);
            }
        }
    }
    (out, last, first_ms)
}

fn info(addr: &str, body: &Value) -> (u16, String) {
    let resp = reqwest::blocking::Client::new().post(format!("http://{addr}/info")).json(body).send().unwrap();
    (resp.status().as_u16(), resp.text().unwrap())
}

fn ask(addr: &str, kind: Kind, user: &str, start: i64, end: Option<i64>) -> Vec<Value> {
    let ty = if kind == Kind::Funding { "userFunding" } else { "userNonFundingLedgerUpdates" };
    let mut body = json!({"type": ty, "user": user, "startTime": start});
    if let Some(e) = end {
        body["endTime"] = json!(e);
    }
    let (status, text) = info(addr, &body);
    assert_eq!(status, 200, "{body}: {text}");
    let list: Vec<Value> = serde_json::from_str(&text).unwrap();
    list.iter().map(|e| info_entry(kind, e)).collect()
}

fn run(mode: Mode) {
    let out = tempfile::tempdir().unwrap();
    let data = out.path().join("data");
    let n = BLOCKS.to_string();
    #[rustfmt::skip]
    let sim_args = [
        "--mode", mode.as_str(), "--coins", "3", "--btc-orders", "300", "--orders-per-coin", "100",
        "--block-ms", "40", "--users", "6", "--blocks", &n, "--write-misc-events", "--funding-every-blocks", "3",
        "--exit-when-done",
    ];
    let (mut sim, info_url) = start_sim(&data, &sim_args, &out.path().join("sim.log"));
    let serve_args = ["--mode", mode.as_str(), "--stale-after", "600", "--validate-interval", "0"];
    let mut server =
        start_serve(&data, &info_url, &out.path().join("snaps"), &serve_args, &out.path().join("serve.log"));
    let addr = server.wait_line("hlbook listening on", Duration::from_secs(30));
    let admin = admin_base(&server);
    assert!(sim.wait_exit(Duration::from_secs(180)).success(), "hlsim failed");
    let (exp, last, first_ms) = expected(&data, mode);
    // The store has written every block the files hold.
    let deadline = Instant::now() + Duration::from_secs(60);
    while get_json(&format!("{admin}/status")).and_then(|s| s["store"]["misc_height"].as_u64()) != Some(last) {
        assert!(Instant::now() < deadline, "the store never wrote misc_events height {last}");
        std::thread::sleep(Duration::from_millis(200));
    }
    wait_health(&admin, Duration::from_secs(60), |h| h["misc_events"]["height"].as_u64() == Some(last));

    let mut busy: Vec<(&String, usize)> =
        exp.iter().filter(|((_, k), _)| *k == Kind::Funding).map(|((u, _), l)| (u, l.len())).collect();
    busy.sort_by_key(|u| std::cmp::Reverse(u.1));
    let mut checked = BTreeMap::new();
    for (user, _) in busy.into_iter().take(USERS) {
        for kind in [Kind::Funding, Kind::Ledger] {
            let want = exp.get(&(user.clone(), kind)).cloned().unwrap_or_default();
            let got = ask(&addr, kind, user, first_ms, None);
            let n = want.len().min(500);
            assert_eq!(got, want[..n], "{user} {kind:?} from {first_ms}: the files' entries, once, ascending");
            *checked.entry(kind).or_insert(0) += got.len();
            // endTime ends the range (inclusive), startTime begins it.
            if let Some(mid) = want.get(want.len() / 2) {
                let t = mid["time"].as_i64().unwrap();
                let upto: Vec<Value> = want.iter().filter(|e| e["time"].as_i64() <= Some(t)).cloned().collect();
                assert_eq!(ask(&addr, kind, user, first_ms, Some(t)), upto, "{user} {kind:?} to {t}");
                let from: Vec<Value> = want.iter().filter(|e| e["time"].as_i64() >= Some(t)).cloned().collect();
                assert_eq!(ask(&addr, kind, user, t, None), from, "{user} {kind:?} from {t}");
            }
        }
        // Before what the store holds: not answered short (no upstream here, so refused).
        let (status, text) = info(&addr, &json!({"type": "userFunding", "user": user, "startTime": first_ms - 1}));
        assert_eq!(status, 422, "{text}");
        assert!(text.contains("holds") && text.contains("upstream_info_url"), "{text}");
    }
    eprintln!("{mode:?}: blocks to {last}: {checked:?} entries checked");
    assert!(checked[&Kind::Funding] >= 5 && checked[&Kind::Ledger] >= 3, "too few to test: {checked:?}");
    server.stop();
}

#[test]
fn misc_history_by_block_is_answered_from_the_store_once_in_order() {
    run(Mode::ByBlock);
}

#[test]
fn misc_history_streaming_is_answered_from_the_store_once_in_order() {
    run(Mode::Streaming);
}

/// Followed mode: a user is kept from when a subscription follows it, and answered from then on only.
#[test]
fn followed_mode_answers_a_user_from_when_it_was_followed() {
    let out = tempfile::tempdir().unwrap();
    let data = out.path().join("data");
    #[rustfmt::skip]
    let sim_args = [
        "--mode", "by-block", "--coins", "3", "--btc-orders", "300", "--orders-per-coin", "100", "--block-ms", "40",
        "--users", "6", "--blocks", "400", "--write-misc-events", "--funding-every-blocks", "3", "--exit-when-done",
    ];
    let (mut sim, info_url) = start_sim(&data, &sim_args, &out.path().join("sim.log"));
    #[rustfmt::skip]
    let serve_args = ["--stale-after", "600", "--validate-interval", "0",
        "--set", "store.fills_users=\"followed\"", "--set", "store.fills_follow_max=4"];
    let mut server =
        start_serve(&data, &info_url, &out.path().join("snaps"), &serve_args, &out.path().join("serve.log"));
    let addr = server.wait_line("hlbook listening on", Duration::from_secs(30));
    let admin = admin_base(&server);
    wait_health(&admin, Duration::from_secs(120), |h| h["misc_events"]["counters"]["events"].as_u64() >= Some(10));
    let (early, _, first_ms) = expected(&data, Mode::ByBlock);
    let user = early.keys().find(|(_, k)| *k == Kind::Funding).map(|(u, _)| u.clone()).expect("a funded user");
    let (status, text) = info(&addr, &json!({"type": "userFunding", "user": user, "startTime": first_ms}));
    assert!(status == 422 && text.contains("does not keep"), "not followed yet: {status} {text}");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let _ws = rt.block_on(async {
        let mut ws = raw::connect(&addr, "", None).await;
        raw::subscribe(&mut ws, json!({"type": "userFundings", "user": user})).await;
        ws
    });
    assert!(sim.wait_exit(Duration::from_secs(180)).success(), "hlsim failed");
    let (exp, last, _) = expected(&data, Mode::ByBlock);
    let deadline = Instant::now() + Duration::from_secs(60);
    while get_json(&format!("{admin}/status")).and_then(|s| s["store"]["misc_height"].as_u64()) != Some(last) {
        assert!(Instant::now() < deadline, "the store never wrote misc_events height {last}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let want = &exp[&(user.clone(), Kind::Funding)];
    // The first of the user's funding times answered: after its first, since it was followed later.
    let ask_from = |t: i64| info(&addr, &json!({"type": "userFunding", "user": user, "startTime": t}));
    let times: Vec<i64> = want.iter().map(|e| e["time"].as_i64().unwrap()).collect();
    let from = times.iter().copied().find(|t| ask_from(*t).0 == 200).expect("answered once followed");
    assert!(from > times[0], "answered from {from}, before the user was followed (its first funding {})", times[0]);
    assert_eq!(ask_from(first_ms).0, 422, "from the start: not answered short");
    let got = ask(&addr, Kind::Funding, &user, from, None);
    let tail: Vec<Value> = want.iter().filter(|e| e["time"].as_i64() >= Some(from)).cloned().collect();
    assert_eq!(got, tail, "{user}: every funding since it was followed, once, in order");
    assert!(tail.len() >= 3, "too few to test: {}", tail.len());
    server.stop();
}
