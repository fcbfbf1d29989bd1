//! The history store keeping followed users' fills only (`store.fills_users = "followed"`), with the real
//! binaries against hlsim's own files:
//! - a userFills subscriber's user is followed, and its first frame still holds the fills the node wrote before
//!   (read back from the node's files), verbatim, with a notice saying where they came from;
//! - a user the store cannot follow (`store.fills_follow_max` reached while the followed user has a subscriber)
//!   has no fills stored, though the files hold some, and the notice says so;
//! - once that subscriber has left, the next new user takes the followed user's place (it is dropped), with its
//!   own history read back;
//! - the followed set survives a restart: the user is followed at once, its fills come from the store.

mod procs;
mod wsclient;

use std::path::Path;
use std::time::Duration;

use procs::{admin_base, get_json, start_serve, start_sim, wait_health};
use serde_json::{Value, json};
use wsclient::raw::channel;

const FIRST_HEIGHT: u64 = 1_000_000_000;

/// Every by-block fills line of the hour files under `data`, oldest first.
fn fills_lines(data: &Path) -> Vec<Value> {
    procs::node_json_lines(&data.join("node_fills_by_block"))
}

/// The user's fill objects in `lines`, in the node's order.
fn fills_of(lines: &[Value], user: &str) -> Vec<Value> {
    let events = lines.iter().flat_map(|l| l["events"].as_array().unwrap().clone());
    events.filter(|e| e[0] == user).map(|e| e[1].clone()).collect()
}

/// The store's object on `/status`, once `pred` holds.
fn wait_store(admin: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    loop {
        let s = get_json(&format!("{admin}/status")).map_or(Value::Null, |s| s["store"].clone());
        if pred(&s) {
            return s;
        }
        assert!(std::time::Instant::now() < deadline, "the store never got there: {s}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `hlbook serve` on `data` keeping followed users' fills only, at most one; its public and admin bases.
fn serve(data: &Path, info: &str, out: &Path, log: &str) -> (procs::Proc, String, String) {
    let set = ["--set", "store.fills_users=\"followed\"", "--set", "store.fills_follow_max=1"];
    let server = start_serve(data, info, &out.join("snaps"), &set, &out.join(log));
    let base = format!("http://{}", server.wait_line("hlbook listening on", Duration::from_secs(30)));
    let admin = admin_base(&server);
    wait_health(&base, Duration::from_secs(60), |h| h["state"] == "live");
    (server, base, admin)
}

/// A userFills subscription to `user`, held open: its connection, the hlbookNotice frames and the first userFills
/// frame.
fn subscribe(rt: &tokio::runtime::Runtime, base: &str, user: &str) -> (wsclient::raw::Ws, Vec<String>, Value) {
    let addr = base.trim_start_matches("http://").to_string();
    let u = user.to_string();
    rt.block_on(async move {
        let mut ws = wsclient::raw::connect(&addr, "", None).await;
        wsclient::raw::subscribe(&mut ws, json!({"type": "userFills", "user": u})).await;
        let mut notices = Vec::new();
        loop {
            let f = wsclient::raw::expect_json(&mut ws, Duration::from_secs(120)).await;
            match channel(&f) {
                "userFills" => return (ws, notices, f),
                "hlbookNotice" => notices.push(f["data"].to_string()),
                _ => {}
            }
        }
    })
}

/// The same, closed once the first userFills frame is in.
fn first_frame(base: &str, user: &str) -> (Vec<String>, Value) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (_, notices, frame) = subscribe(&rt, base, user);
    (notices, frame)
}

/// Waits until the server counts no userFills subscription.
fn wait_no_user_fills(admin: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let s = get_json(&format!("{admin}/status")).unwrap_or(Value::Null);
        if s["subscriptions_by_channel"]["userFills"] == 0 {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "userFills subscriptions still open: {s}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn followed_mode_stores_subscribers_fills_with_their_history_and_remembers_them() {
    let out = tempfile::tempdir().unwrap();
    let data = out.path().join("data");
    #[rustfmt::skip]
    let sim_args = ["--coins", "3", "--btc-orders", "1000", "--orders-per-coin", "200", "--block-ms", "40",
        "--rate", "0.1", "--reject-ratio", "1", "--users", "25", "--time-scale", "60"];
    let (mut sim, info) = start_sim(&data, &sim_args, &out.path().join("sim.log"));
    let (mut first, base, admin) = serve(&data, &info, out.path(), "serve1.log");
    let height = |s: &Value| s["height"].as_u64().unwrap_or(0);
    wait_store(&admin, |s| height(s) >= FIRST_HEIGHT + 200 && s["state"] == "live");

    // Two users with fills in the files already, neither followed yet.
    let early = fills_lines(&data);
    let mut users: Vec<String> = Vec::new();
    for l in &early {
        for e in l["events"].as_array().unwrap() {
            let u = e[0].as_str().unwrap().to_string();
            if !users.contains(&u) && fills_of(&early, &u).len() < 1000 {
                users.push(u);
            }
        }
    }
    assert!(users.len() >= 2, "users with a few fills: {users:?}");
    let (followed, refused) = (users[0].clone(), users[1].clone());

    // The first subscriber's user is followed; its earlier fills are read back from the files.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (held, notices, frame) = subscribe(&rt, &base, &followed);
    assert!(notices.iter().any(|n| n.contains("now follows")), "{notices:?}");
    assert_eq!(frame["data"]["isSnapshot"], true);
    let got = frame["data"]["fills"].as_array().unwrap().clone();
    let everything = fills_of(&fills_lines(&data), &followed);
    let before = fills_of(&early, &followed).len();
    assert!(got.len() >= before && before > 0, "{} fills, {before} in the files before it subscribed", got.len());
    assert_eq!(got[..], everything[..got.len()], "the user's fills from the first on, as the node wrote them");

    // The set is full and its one user has a subscriber: the next user is not followed, and none of its fills are
    // in the store.
    let (notices, frame) = first_frame(&base, &refused);
    assert!(notices.iter().any(|n| n.contains("store.fills_follow_max")), "{notices:?}");
    assert!(!fills_of(&fills_lines(&data), &refused).is_empty(), "it has fills in the files");
    assert_eq!(frame["data"]["fills"], json!([]), "none stored");
    let s = wait_store(&admin, |s| s["followed_users"] == 1);
    assert_eq!(s["fills_users"], "followed");
    // Every fill the writer stored is the followed user's.
    let written = s["fills_written"].as_u64().unwrap();
    let all = fills_lines(&data);
    let all_fills: usize = all.iter().map(|l| l["events"].as_array().unwrap().len()).sum();
    assert!(written as usize <= fills_of(&all, &followed).len(), "{written} fills written, {all_fills} in all");

    // Its subscriber gone, the followed user gives way to the next new one, whose history is read back.
    drop(held);
    wait_no_user_fills(&admin);
    let (notices, frame) = first_frame(&base, &refused);
    assert!(notices.iter().any(|n| n.contains("now follows")), "{notices:?}");
    let got = frame["data"]["fills"].as_array().unwrap().clone();
    let everything = fills_of(&fills_lines(&data), &refused);
    assert!(!got.is_empty(), "its fills from the files");
    assert_eq!(got[..], everything[..got.len()], "the new user's fills from the first on");
    let s = wait_store(&admin, |s| s["follow_dropped"] == 1);
    assert_eq!(s["followed_users"], 1, "{s}");
    first.stop();

    // Restarted: the store still follows the user that took the place; its snapshot comes from the store, with no
    // notice.
    let (mut second, base, admin) = serve(&data, &info, out.path(), "serve2.log");
    let s = wait_store(&admin, |s| s["state"] == "live");
    assert_eq!(s["followed_users"], 1, "{s}");
    let (notices, frame) = first_frame(&base, &refused);
    assert!(notices.is_empty(), "{notices:?}");
    let got = frame["data"]["fills"].as_array().unwrap().clone();
    let everything = fills_of(&fills_lines(&data), &refused);
    assert!(!got.is_empty(), "{} fills", got.len());
    assert_eq!(got[..], everything[..got.len()]);
    let metrics = reqwest::blocking::get(format!("{admin}/metrics")).unwrap().text().unwrap();
    assert!(metrics.lines().any(|l| l == "hlbook_store_followed_users 1"), "{metrics}");
    sim.stop();
    second.stop();
}
