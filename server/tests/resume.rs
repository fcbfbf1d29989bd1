//! Resume (issue #46, docs/api.md "Resume"): a client whose TCP connection is cut (a reset, not a close) comes back
//! with `since` on every subscription and ends up with exactly the frames of a client that was never cut.
//!
//! `hlsim` runs at mainnet rate; two `?audit=1` clients follow trades of every coin, orderUpdates and userFills of
//! busy users and BTC's l4Book. One keeps its connection; the other resets its own every two seconds and resumes
//! the way docs/api.md tells a client to: from the height before the newest it saw, dropping the frames of that
//! height it already has (streaming mode splits a height into several frames). Afterwards, per subscription, the
//! two hold the same frames, byte for byte once the replay mark and the connection's audit object are cut off.
//! The shorter tests cover a stream nobody else follows (it lingers for the resume window), a `since` the server
//! cannot serve (a notice naming the oldest height, then a fresh subscription) and snapshot channels.

mod procs;
mod wsclient;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use hlbook::node::Mode;
use procs::{start_sim, wait_health};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::Message;

/// hlsim's first eight coins (its default universe): every kind of coin the node writes.
const COINS: [&str; 8] = ["BTC", "@107", "xyz:GOLD", "ETH", "SOL", "HYPE", "DOGE", "kPEPE"];

/// A data frame as a client keeps it: which subscription, which height, and its bytes without what only this
/// connection has (the replay mark, the audit object).
#[derive(Debug, Clone)]
struct Got {
    sub: u64,
    height: u64,
    prev: Option<u64>,
    snapshot: bool,
    replayed: bool,
    frame: String,
}

/// The frame's own bytes: everything before `,"replayed":true` or `,"audit":{`, closed again.
fn own_bytes(text: &str) -> String {
    let cut = [",\"replayed\":true", ",\"audit\":{"].iter().filter_map(|m| text.find(m)).min();
    let cut = cut.unwrap_or_else(|| panic!("an audited data frame: {text}"));
    format!("{}}}", &text[..cut])
}

/// A data frame's `Got`, or the text of a notice; acks and pongs are `None`; an error fails the test.
fn read(text: &str) -> Option<Result<Got, String>> {
    let v: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("bad JSON {e}: {text}"));
    match v["channel"].as_str().unwrap_or_default() {
        "subscriptionResponse" | "pong" => None,
        "hlbookNotice" => Some(Err(v["data"].as_str().unwrap_or_default().to_string())),
        "error" => panic!("an error frame: {text}"),
        _ => {
            let a = &v["audit"];
            Some(Ok(Got {
                sub: a["sub"].as_u64().unwrap_or_else(|| panic!("no sub: {text}")),
                height: a["height"].as_u64().unwrap(),
                prev: a["prev"].as_u64(),
                snapshot: a["snapshot"] == true,
                replayed: v["replayed"] == true,
                frame: own_bytes(text),
            }))
        }
    }
}

/// What a client has seen: its frames and the newest height of a live one.
#[derive(Default)]
struct Seen {
    frames: Vec<Got>,
    newest: u64,
    notices: Vec<String>,
    cuts: usize,
    replayed: usize,
}

impl Seen {
    fn keep(&mut self, g: Got) {
        if !g.snapshot {
            self.newest = self.newest.max(g.height);
        }
        self.replayed += usize::from(g.replayed);
        self.frames.push(g);
    }
}

async fn connect(addr: &str) -> wsclient::raw::Ws {
    wsclient::raw::connect(addr, "audit=1", None).await
}

/// Subscribes to `subs` in order (so each keeps its audit `sub` number), each resuming after `since` if given.
async fn subscribe_all(ws: &mut wsclient::raw::Ws, subs: &[Value], since: Option<u64>) {
    for s in subs {
        let mut s = s.clone();
        if let Some(h) = since {
            s["since"] = h.into();
        }
        let text = json!({"method": "subscribe", "subscription": s}).to_string();
        ws.send(Message::Text(text.into())).await.unwrap();
    }
}

/// The next text message, `None` when the connection ends.
async fn next_text(ws: &mut wsclient::raw::Ws) -> Option<String> {
    loop {
        match tokio::time::timeout(Duration::from_secs(30), ws.next()).await.expect("a frame within 30 s")? {
            Ok(Message::Text(t)) => return Some(t.to_string()),
            Ok(Message::Close(_)) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}

/// The client that never drops: every frame until `stop`.
async fn steady(addr: String, subs: Vec<Value>, mut stop: watch::Receiver<bool>) -> Seen {
    let mut ws = connect(&addr).await;
    subscribe_all(&mut ws, &subs, None).await;
    let mut seen = Seen::default();
    loop {
        tokio::select! {
            _ = stop.changed() => return seen,
            t = next_text(&mut ws) => match read(&t.expect("the steady connection stays up")) {
                Some(Ok(g)) => seen.keep(g),
                Some(Err(notice)) => seen.notices.push(notice),
                None => {}
            },
        }
    }
}

/// The client that resets its connection every `every` and resumes each subscription from a height a little before
/// the newest of its own frames (1 to 3 blocks, varied so an off-by-one in the resume point shows; a subscription's
/// heights only rise, while another's may lag: streaming sends a block's orderUpdates after the next block's
/// trades), dropping the replayed frames it already holds, which must come again byte for byte, in the same order.
async fn resuming(addr: String, subs: Vec<Value>, every: Duration, mut stop: watch::Receiver<bool>) -> Seen {
    let mut seen = Seen::default();
    loop {
        let mut ws = connect(&addr).await;
        let newest = |sub: u64| seen.frames.iter().rev().find(|g| g.sub == sub && !g.snapshot).map(|g| g.height);
        // A subscription without a frame yet resumes from the oldest newest height of the others: it was
        // subscribed before any of those frames.
        let floor = (1..=subs.len() as u64).filter_map(newest).min();
        let back = seen.cuts as u64 % 3;
        let since: Vec<Option<u64>> =
            (1..=subs.len() as u64).map(|s| newest(s).or(floor).map(|h| h.saturating_sub(1 + back))).collect();
        for (s, since) in subs.iter().zip(&since) {
            let mut s = s.clone();
            if let Some(h) = since {
                s["since"] = (*h).into();
            }
            let text = json!({"method": "subscribe", "subscription": s}).to_string();
            ws.send(Message::Text(text.into())).await.unwrap();
        }
        let mut held: HashMap<u64, std::collections::VecDeque<Got>> = HashMap::new();
        for g in seen.frames.iter().filter(|g| !g.snapshot && since[g.sub as usize - 1].is_some_and(|s| g.height > s)) {
            held.entry(g.sub).or_default().push_back(g.clone());
        }
        let mut first: HashMap<u64, bool> = HashMap::new();
        let cut_at = tokio::time::Instant::now() + every;
        loop {
            tokio::select! {
                _ = stop.changed() => return seen,
                () = tokio::time::sleep_until(cut_at) => break,
                t = next_text(&mut ws) => match read(&t.expect("the server keeps the connection")) {
                    Some(Ok(g)) => {
                        let (sub, h) = (g.sub, g.height);
                        if let Some(s) = since[sub as usize - 1]
                            && first.insert(sub, true).is_none()
                        {
                            assert_eq!(g.prev, Some(s), "sub {sub}: a resumed chain continues from since (height {h})");
                        }
                        if let Some(had) = held.get_mut(&sub).and_then(std::collections::VecDeque::pop_front) {
                            assert!(g.replayed, "sub {sub}: height {h} came live, but it had been sent before");
                            assert_eq!((had.height, had.frame == g.frame), (h, true), "sub {sub}: a replay differs");
                            continue;
                        }
                        seen.keep(g);
                    }
                    Some(Err(notice)) => seen.notices.push(notice),
                    None => {}
                },
            }
        }
        // A reset, not a close: the server sees the connection fail mid-stream.
        ws.get_ref().set_zero_linger().unwrap();
        drop(ws);
        seen.cuts += 1;
        // Away for a few blocks, so the resume has frames to replay.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Per subscription, the frames of heights in (first, last], where `first` is the resuming client's first live
/// frame and `last` the newest height both clients had whole.
fn window(seen: &Seen, sub: u64, from: u64, to: u64) -> Vec<&str> {
    let live = seen.frames.iter().filter(|g| g.sub == sub && !g.snapshot);
    live.filter(|g| g.height > from && g.height <= to).map(|g| g.frame.as_str()).collect()
}

/// Users with fills in the simulator's first blocks, the busiest first.
fn busy_users(data: &Path, mode: Mode, n: usize) -> Vec<String> {
    let folder = if mode == Mode::Streaming { "streaming" } else { "by_block" };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let mut count: HashMap<String, usize> = HashMap::new();
        for l in procs::node_json_lines(&data.join(format!("node_fills_{folder}"))) {
            for ev in l["events"].as_array().unwrap() {
                *count.entry(ev[0].as_str().unwrap().to_lowercase()).or_default() += 1;
            }
        }
        let mut users: Vec<(usize, String)> = count.into_iter().map(|(u, c)| (c, u)).collect();
        users.sort_by(|a, b| b.cmp(a));
        if users.len() >= n {
            return users.into_iter().take(n).map(|(_, u)| u).collect();
        }
        assert!(std::time::Instant::now() < deadline, "the simulator wrote fills of fewer than {n} users");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// hlsim at mainnet rate in `mode` and a server following it (with `extra` flags): (sim, server, its address,
/// its admin base).
fn market(dir: &Path, mode: Mode, extra: &[&str]) -> (procs::Proc, procs::Proc, String, String) {
    market_with(dir, mode, &[], extra)
}

/// `market` with `sim_extra` flags for the simulator too.
fn market_with(
    dir: &Path,
    mode: Mode,
    sim_extra: &[&str],
    extra: &[&str],
) -> (procs::Proc, procs::Proc, String, String) {
    market_env(dir, mode, sim_extra, extra, &[])
}

/// `market_with` with environment variables for the server (its test hooks).
fn market_env(
    dir: &Path,
    mode: Mode,
    sim_extra: &[&str],
    extra: &[&str],
    env: &[(&str, &str)],
) -> (procs::Proc, procs::Proc, String, String) {
    let data = dir.join("data");
    #[rustfmt::skip]
    let mut sim_args = vec!["--mode", mode.as_str(), "--btc-orders", "4000", "--orders-per-coin", "300",
        "--reject-ratio", "2", "--users", "25"];
    sim_args.extend_from_slice(sim_extra);
    let (sim, info) = start_sim(&data, &sim_args, &dir.join("sim.log"));
    let mut serve_args = vec!["--mode", mode.as_str(), "--validate-interval", "0"];
    serve_args.extend_from_slice(extra);
    let server = procs::start_serve_env(&data, &info, &dir.join("snaps"), &serve_args, env, &dir.join("serve.log"));
    let addr = server.wait_line("hlbook listening on", Duration::from_secs(60));
    let admin = procs::admin_base(&server);
    wait_health(&admin, Duration::from_secs(60), |h| h["state"] == "live");
    (sim, server, addr, admin)
}

fn drop_and_resume(mode: Mode) {
    let dir = tempfile::tempdir().unwrap();
    let (mut sim, mut server, addr, _) = market(dir.path(), mode, &[]);
    let mut subs: Vec<Value> = COINS.iter().map(|c| json!({"type": "trades", "coin": c})).collect();
    for u in busy_users(&dir.path().join("data"), mode, 2) {
        subs.push(json!({"type": "orderUpdates", "user": u}));
        subs.push(json!({"type": "userFills", "user": u}));
    }
    subs.push(json!({"type": "l4Book", "coin": "BTC"}));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (stop_tx, stop) = watch::channel(false);
    let steady = rt.spawn(steady(addr.clone(), subs.clone(), stop.clone()));
    // The steady client subscribes first, so the resuming one's first live frames are the steady one's too.
    std::thread::sleep(Duration::from_secs(1));
    let resuming = rt.spawn(resuming(addr, subs.clone(), Duration::from_secs(2), stop));
    std::thread::sleep(Duration::from_secs(28));
    stop_tx.send(true).unwrap();
    let (steady, resumed) = (rt.block_on(steady).unwrap(), rt.block_on(resuming).unwrap());
    sim.stop();
    server.stop();

    assert!(resumed.cuts >= 6, "{} cuts", resumed.cuts);
    assert!(resumed.replayed > 0, "no frame was replayed: the cuts never fell mid-stream");
    assert_eq!(resumed.notices, Vec::<String>::new(), "every resume was served");
    assert_eq!(steady.notices, Vec::<String>::new());
    let last = steady.newest.min(resumed.newest) - 1;
    for (i, s) in subs.iter().enumerate() {
        let sub = i as u64 + 1;
        let from = resumed.frames.iter().find(|g| g.sub == sub && !g.snapshot).map_or(last, |g| g.height);
        let (want, got) = (window(&steady, sub, from, last), window(&resumed, sub, from, last));
        let differ = want.iter().zip(&got).position(|(a, b)| a != b);
        assert!(
            want.len() == got.len() && differ.is_none(),
            "{s}: {} frames steady, {} resumed over heights {from}..={last}; first difference at {differ:?}",
            want.len(),
            got.len()
        );
        eprintln!("{s}: {} frames equal over heights {}..={last}", want.len(), from + 1);
    }
    let replayed_subs = subs.len()
        - (1..=subs.len() as u64).filter(|s| !resumed.frames.iter().any(|g| g.sub == *s && g.replayed)).count();
    eprintln!(
        "{} cuts, {} frames replayed, on {replayed_subs} of {} subscriptions",
        resumed.cuts,
        resumed.replayed,
        subs.len()
    );
}

#[test]
fn by_block_a_client_cut_every_two_seconds_resumes_to_the_frames_of_one_never_cut() {
    drop_and_resume(Mode::ByBlock);
}

#[test]
fn streaming_a_client_cut_every_two_seconds_resumes_to_the_frames_of_one_never_cut() {
    drop_and_resume(Mode::Streaming);
}

/// Frames and notices on `ws` until `done` holds of them or `until`; whether `done` held.
async fn read_frames(ws: &mut wsclient::raw::Ws, until: Duration, done: impl Fn(&Seen) -> bool) -> (Seen, bool) {
    let mut seen = Seen::default();
    let until = tokio::time::Instant::now() + until;
    while !done(&seen) {
        tokio::select! {
            () = tokio::time::sleep_until(until) => return (seen, false),
            t = next_text(ws) => match read(&t.expect("the server keeps the connection")) {
                Some(Ok(g)) => seen.keep(g),
                Some(Err(notice)) => seen.notices.push(notice),
                None => {}
            },
        }
    }
    (seen, true)
}

/// Frames and notices on `ws` for `secs`.
async fn read_for(ws: &mut wsclient::raw::Ws, secs: f64) -> Seen {
    read_frames(ws, Duration::from_secs_f64(secs), |_| false).await.0
}

/// Frames and notices on `ws` until `done` holds of them (at most 60 s, then the test fails naming `what`).
async fn read_until(ws: &mut wsclient::raw::Ws, what: &str, done: impl Fn(&Seen) -> bool) -> Seen {
    let (seen, held) = read_frames(ws, Duration::from_secs(60), done).await;
    assert!(held, "{what}: not within 60 s: {:?}", seen.notices);
    seen
}

/// Whether `seen` holds a frame of each of subscriptions `subs`.
fn has_each(seen: &Seen, subs: &[u64]) -> bool {
    subs.iter().all(|s| seen.frames.iter().any(|g| g.sub == *s))
}

/// Resets `ws` (no close frame).
fn cut(ws: wsclient::raw::Ws) {
    ws.get_ref().set_zero_linger().unwrap();
    drop(ws);
}

#[test]
fn a_stream_nobody_else_follows_lingers_for_the_resume_window_then_only_the_store_has_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("hlbook.toml");
    std::fs::write(&config, "[server]\nresume_window_secs = 3\n").unwrap();
    let (mut sim, mut server, addr, _) = market(dir.path(), Mode::ByBlock, &["--config", config.to_str().unwrap()]);
    let subs = [json!({"type": "trades", "coin": "BTC"}), json!({"type": "l4Book", "coin": "BTC"})];
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut ws = connect(&addr).await;
        subscribe_all(&mut ws, &subs, None).await;
        let before = read_for(&mut ws, 2.0).await;
        cut(ws);
        // Within the window: nobody else follows these streams, yet every frame since is still there.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let since = before.newest;
        let mut ws = connect(&addr).await;
        subscribe_all(&mut ws, &subs, Some(since)).await;
        let back = read_until(&mut ws, "frames of both after the resume", |s| has_each(s, &[1, 2])).await;
        assert_eq!(back.notices, Vec::<String>::new(), "resumed within the window");
        assert!(back.replayed > 0, "the blocks while away came again");
        for sub in [1, 2] {
            let first = back.frames.iter().find(|g| g.sub == sub).expect("frames after the resume");
            assert_eq!((first.prev, first.snapshot), (Some(since), false), "sub {sub} continues from {since}");
        }
        cut(ws);
        // Past the window the streams stopped being built: l4Book's resume is refused and a fresh snapshot follows;
        // trades, all of which the history store keeps, catch up from it instead.
        tokio::time::sleep(Duration::from_secs(6)).await;
        let mut ws = connect(&addr).await;
        subscribe_all(&mut ws, &subs, Some(back.newest)).await;
        let late =
            read_until(&mut ws, "the notice and frames of both", |s| !s.notices.is_empty() && has_each(s, &[1, 2]))
                .await;
        assert_eq!(late.notices.len(), 1, "{:?}", late.notices);
        assert!(late.notices[0].contains(r#"cannot resume {"type":"l4Book""#), "{}", late.notices[0]);
        assert!(late.notices[0].contains("nobody was subscribed"), "{}", late.notices[0]);
        let l4 = late.frames.iter().find(|g| g.sub == 2).expect("l4Book frames");
        assert!(l4.snapshot && l4.frame.contains("\"snapshot\""), "a fresh l4Book snapshot: {}", &l4.frame[..80]);
        let trades = late.frames.iter().find(|g| g.sub == 1).expect("trades frames");
        assert_eq!((trades.prev, trades.replayed), (Some(back.newest), true), "trades continue from the store");
    });
    sim.stop();
    server.stop();
}

#[test]
fn a_since_the_feed_does_not_hold_gets_a_notice_and_a_fresh_subscription() {
    let dir = tempfile::tempdir().unwrap();
    let (mut sim, mut server, addr, _) = market(dir.path(), Mode::ByBlock, &[]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let mut ws = connect(&addr).await;
        let l4 = [json!({"type": "l4Book", "coin": "BTC"})];
        subscribe_all(&mut ws, &l4, Some(1)).await;
        let old =
            read_until(&mut ws, "the notice and an l4Book frame", |s| !s.notices.is_empty() && has_each(s, &[1])).await;
        assert_eq!(old.notices.len(), 1, "{:?}", old.notices);
        let oldest: u64 = old.notices[0]
            .split("the oldest height it can resume from is ")
            .nth(1)
            .and_then(|t| t.split(';').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("names the oldest height: {}", old.notices[0]));
        let first = old.frames.first().expect("an l4Book frame");
        assert!(first.snapshot && first.height >= oldest, "a fresh snapshot follows the notice");
        // Ahead of the server: the same, naming its newest height.
        let mut ws = connect(&addr).await;
        let trades = [json!({"type": "trades", "coin": "BTC"})];
        subscribe_all(&mut ws, &trades, Some(first.height + 1_000_000)).await;
        let ahead = read_until(&mut ws, "the notice", |s| !s.notices.is_empty()).await;
        assert_eq!(ahead.notices.len(), 1, "{:?}", ahead.notices);
        assert!(ahead.notices[0].contains("its newest height is"), "{}", ahead.notices[0]);
        // Snapshot channels take `since` and send their current frame, as always.
        let mut ws = connect(&addr).await;
        subscribe_all(&mut ws, &[json!({"type": "l2Book", "coin": "BTC"})], Some(1)).await;
        let l2 = read_until(&mut ws, "an l2Book frame", |s| has_each(s, &[1])).await;
        assert_eq!(l2.notices, Vec::<String>::new());
        assert!(l2.frames.first().is_some_and(|g| g.snapshot && g.frame.starts_with("{\"channel\":\"l2Book\"")));
    });
    sim.stop();
    server.stop();
}

/// The Python client of docs/api.md "Resume", with `HOST:8000` made `addr`.
fn docs_client(addr: &str) -> String {
    let api = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/api.md")).unwrap();
    let start = api.find("# Resume with since (Python, websockets)").expect("the example in docs/api.md");
    let end = start + api[start..].find("\n```").expect("the example's end");
    api[start..end].replace("HOST:8000", addr)
}

/// A frame's JSON without what only its connection has (`replayed`, `audit`).
fn official(v: &Value) -> Value {
    let mut v = v.clone();
    let o = v.as_object_mut().unwrap();
    o.remove("replayed");
    o.remove("audit");
    v
}

#[test]
fn the_docs_python_client_cut_by_a_proxy_gets_every_frame_once() {
    const PYTHON: &str = "/usr/bin/python3";
    let ok =
        std::process::Command::new(PYTHON).args(["-c", "import websockets"]).output().is_ok_and(|o| o.status.success());
    if !ok {
        procs::skip(&format!("{PYTHON} with the websockets module is missing (apt-get install python3-websockets)"));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (mut sim, mut server, addr, _) = market(dir.path(), Mode::ByBlock, &[]);
    let proxy = procs::fault_proxy::FaultProxy::start(&addr, Duration::from_secs(2));
    let script = dir.path().join("resume.py");
    std::fs::write(&script, docs_client(&proxy.addr)).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (stop_tx, stop) = watch::channel(false);
    let steady = rt.spawn(steady(addr.clone(), vec![json!({"type": "trades", "coin": "BTC"})], stop));
    let out = std::fs::File::create(dir.path().join("resume.out")).unwrap();
    let mut py = std::process::Command::new(PYTHON).arg(&script).stdout(out).spawn().unwrap();
    std::thread::sleep(Duration::from_secs(15));
    py.kill().unwrap();
    py.wait().unwrap();
    stop_tx.send(true).unwrap();
    let steady = rt.block_on(steady).unwrap();
    let cuts = proxy.cuts();
    drop(proxy);
    sim.stop();
    server.stop();

    let printed: Vec<Value> = std::fs::read_to_string(dir.path().join("resume.out"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(cuts >= 5, "{cuts} cuts");
    let height = |v: &Value| v["audit"]["height"].as_u64().unwrap();
    let live: Vec<&Value> = printed.iter().filter(|v| v["audit"]["snapshot"] != true).collect();
    let (from, to) = (height(live.first().expect("frames")), height(live.last().unwrap()) - 1);
    let want: Vec<Value> = steady
        .frames
        .iter()
        .filter(|g| g.height > from && g.height <= to)
        .map(|g| serde_json::from_str(&g.frame).unwrap())
        .collect();
    let got: Vec<Value> = live.iter().filter(|v| height(v) > from && height(v) <= to).map(|v| official(v)).collect();
    let replayed = printed.iter().filter(|v| v["replayed"] == true).count();
    eprintln!("{cuts} cuts, {} frames over heights {}..={to}, {replayed} of them replayed", got.len(), from + 1);
    assert!(replayed > 0, "the cuts replayed nothing");
    assert_eq!(got.len(), want.len(), "the docs client got {} frames, a client never cut {}", got.len(), want.len());
    assert!(got == want, "the docs client's frames differ from those of a client never cut");
}

#[test]
fn fills_made_streams_older_than_the_feed_catch_up_from_the_store_then_join_the_feed() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("hlbook.toml");
    // A feed of 20 ticks (plus the server's margin): a few seconds of blocks, so a resume from ten seconds back
    // needs the store.
    std::fs::write(&config, "[server]\nbacklog_blocks = 20\n").unwrap();
    let config = ["--config", config.to_str().unwrap()];
    // A wake on which subscriptions join the feed from the store stalls 300 ms (test-hooks builds), as a descheduled
    // task on a loaded machine does: the blocks published meanwhile must not count them as fallen behind.
    let pause = [("HLBOOK_TEST_JOIN_PAUSE_MS", "300")];
    let (mut sim, mut server, addr, admin) = market_env(dir.path(), Mode::ByBlock, &["--write-twaps"], &config, &pause);
    let user = busy_users(&dir.path().join("data"), Mode::ByBlock, 1).remove(0);
    let twap_users = twap_users(&dir.path().join("data"), 6);
    let subs = [
        json!({"type": "trades", "coin": "BTC"}),
        json!({"type": "trades", "coin": "ETH"}),
        json!({"type": "userFills", "user": user}),
        json!({"type": "userFills", "user": user, "aggregateByTime": true}),
        json!({"type": "candle", "coin": "BTC", "interval": "1m"}),
        json!({"type": "candle", "coin": "ETH", "interval": "1h"}),
    ];
    // TWAPs live a few blocks: of six users who ran one, some run one in the resumed heights.
    let subs: Vec<Value> =
        subs.into_iter().chain(twap_users.iter().map(|u| json!({"type": "userTwapSliceFills", "user": u}))).collect();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (stop_tx, stop) = watch::channel(false);
    let steady = rt.spawn(steady(addr.clone(), subs.clone(), stop));
    std::thread::sleep(Duration::from_secs(12));
    let (since, back) = rt.block_on(async {
        let head = connect_and_read(&addr, &subs, None, 1.0).await.newest;
        let since = head - 100;
        let mut ws = connect(&addr).await;
        subscribe_all(&mut ws, &subs, Some(since)).await;
        // Read until every catch-up went live, then two seconds of live frames: a loaded machine reads the store's
        // pages at its own pace.
        let live_since = caught_up_watch(&admin, subs.len() as u64);
        let done = |_: &Seen| live_since.lock().unwrap().is_some_and(|t| t.elapsed() > Duration::from_secs(2));
        (since, read_until(&mut ws, "every subscription caught up from the store, then 2 s", done).await)
    });
    stop_tx.send(true).unwrap();
    let steady = rt.block_on(steady).unwrap();
    let ws = procs::get_json(&format!("{admin}/health")).unwrap()["ws"].clone();
    sim.stop();
    server.stop();

    assert_eq!(back.notices, Vec::<String>::new());
    assert!(ws["resumes_from_store"].as_u64() >= Some(subs.len() as u64), "each caught up from the store: {ws}");
    assert_eq!(ws["resumes_caught_up"], ws["resumes_from_store"], "each catch-up went live: {ws}");
    let last = back.newest.min(steady.newest) - 1;
    let mut twap_frames = 0;
    for sub in 1..=subs.len() as u64 {
        let name = &subs[sub as usize - 1];
        let (want, got) = (window(&steady, sub, since, last), window(&back, sub, since, last));
        // A TWAP user may have run none in these heights; every other stream has frames in them.
        let first = back.frames.iter().find(|g| g.sub == sub);
        if first.is_none() && name["type"] == "userTwapSliceFills" {
            assert!(want.is_empty(), "{name}: the steady client had frames, the resumed one none");
            continue;
        }
        let first = first.unwrap_or_else(|| panic!("{name}: frames"));
        assert_eq!(first.prev, Some(since), "{name} continues from {since}");
        // Sparse streams (a TWAP user's) may have had nothing to replay: their first frame is then a live one.
        assert!(first.replayed || name["type"] == "userTwapSliceFills", "{name}: its first frame is a replay");
        twap_frames += if name["type"] == "userTwapSliceFills" { got.len() } else { 0 };
        assert_eq!(got.len(), want.len(), "{name}: frames over heights {}..={last}", since + 1);
        assert!(got == want, "{name}: the store's and the feed's replays are the live frames, byte for byte");
        eprintln!("{name}: {} frames equal over heights {}..={last}", got.len(), since + 1);
    }
    assert!(twap_frames > 0, "no TWAP slice in the resumed heights: the userTwapSliceFills catch-up went unchecked");
}

/// When the server's `resumes_caught_up` first reached `n` (polled on a thread, for at most 60 s).
fn caught_up_watch(admin: &str, n: u64) -> std::sync::Arc<std::sync::Mutex<Option<std::time::Instant>>> {
    let at = std::sync::Arc::new(std::sync::Mutex::new(None));
    let (url, out) = (format!("{admin}/health"), at.clone());
    std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while std::time::Instant::now() < deadline {
            if procs::get_json(&url).is_some_and(|h| h["ws"]["resumes_caught_up"].as_u64() >= Some(n)) {
                *out.lock().unwrap() = Some(std::time::Instant::now());
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    at
}

/// Up to `n` users with TWAP slice fills so far (a `twapId` on their side), the most first, once `n` have one.
fn twap_users(data: &Path, n: usize) -> Vec<String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let mut count: HashMap<String, usize> = HashMap::new();
        for l in procs::node_json_lines(&data.join("node_fills_by_block")) {
            for ev in l["events"].as_array().unwrap() {
                if ev[1]["twapId"].is_u64() {
                    *count.entry(ev[0].as_str().unwrap().to_lowercase()).or_default() += 1;
                }
            }
        }
        if count.len() >= n {
            let mut users: Vec<(usize, String)> = count.into_iter().map(|(u, c)| (c, u)).collect();
            users.sort_by(|a, b| b.cmp(a));
            return users.into_iter().take(n).map(|(_, u)| u).collect();
        }
        assert!(std::time::Instant::now() < deadline, "hlsim ran TWAPs of fewer than {n} users in 60 s");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Connects, subscribes to `subs` (resuming after `since`) and reads for `secs`.
async fn connect_and_read(addr: &str, subs: &[Value], since: Option<u64>, secs: f64) -> Seen {
    let mut ws = connect(addr).await;
    subscribe_all(&mut ws, subs, since).await;
    read_for(&mut ws, secs).await
}

/// userEvents carries fills and misc_events fundings, whose heights lag the fills': a client cut every two seconds
/// that resumes from the newest height of its fills frames (docs/api.md "Resume") misses no funding published
/// while it was away, and once the replays it already held are dropped, its frames are a never-cut client's.
#[test]
fn user_events_resumed_from_the_fills_height_lose_no_funding() {
    let dir = tempfile::tempdir().unwrap();
    let sim_extra = ["--write-misc-events", "--funding-every-blocks", "3"];
    let (mut sim, mut server, addr, _) = market_with(dir.path(), Mode::ByBlock, &sim_extra, &[]);
    let user = busy_users(&dir.path().join("data"), Mode::ByBlock, 1).remove(0);
    let subs = vec![json!({"type": "userEvents", "user": user})];
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (stop_tx, stop) = watch::channel(false);
    let steady = rt.spawn(steady(addr.clone(), subs.clone(), stop));
    std::thread::sleep(Duration::from_secs(1));
    let (mut kept, mut replayed_fundings) = (Vec::<String>::new(), 0);
    rt.block_on(async {
        let mut since = None;
        for _ in 0..6 {
            let mut ws = connect(&addr).await;
            subscribe_all(&mut ws, &subs, since).await;
            let seen = read_for(&mut ws, 2.0).await;
            cut(ws);
            assert_eq!(seen.notices, Vec::<String>::new());
            for g in seen.frames {
                let funding = g.frame.contains("\"funding\"");
                if g.replayed && kept.contains(&g.frame) {
                    continue;
                }
                replayed_fundings += usize::from(g.replayed && funding);
                if !funding {
                    since = Some(since.unwrap_or(0).max(g.height));
                }
                kept.push(g.frame);
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    stop_tx.send(true).unwrap();
    let steady = rt.block_on(steady).unwrap();
    sim.stop();
    server.stop();

    let all: Vec<&str> = steady.frames.iter().filter(|g| !g.snapshot).map(|g| g.frame.as_str()).collect();
    let start = all.iter().position(|f| *f == kept[0]).expect("the resuming client's first frame, steady too");
    let want = &all[start..(start + kept.len()).min(all.len())];
    let differ = want.iter().zip(&kept).position(|(a, b)| a != b);
    if let Some(d) = differ {
        for i in d.saturating_sub(3)..(d + 4).min(kept.len()) {
            eprintln!(
                "{i}\n  steady {}\n  kept   {}",
                &want[i][..want[i].len().min(160)],
                &kept[i][..kept[i].len().min(160)]
            );
        }
    }
    assert!(
        differ.is_none() && want.len() == kept.len(),
        "{} frames kept, {} steady; first difference at {differ:?}",
        kept.len(),
        want.len()
    );
    assert!(replayed_fundings > 0, "no funding was published while the client was away");
    eprintln!("{} userEvents frames equal, {replayed_fundings} fundings replayed", kept.len());
}
