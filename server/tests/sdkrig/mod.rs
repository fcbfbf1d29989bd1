//! What the real-client tests share: finding the installed client libraries (`make clients`, `HLBOOK_CLIENTS`),
//! running one as a child process whose stdout lines are JSON, and reading the simulator's files for a user.

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::livefeed::LiveRig;
use crate::wsclient::{self, Client, Event};

/// The client installs, or None (with the reason printed) when a test should skip.
pub fn clients_dir(what: &str, inside: &str) -> Option<PathBuf> {
    clients_dir_with(what, |d| d.join(inside).exists())
}

/// `clients_dir` for a library found by `installed` (given the clients folder).
pub fn clients_dir_with(what: &str, installed: impl Fn(&Path) -> bool) -> Option<PathBuf> {
    let dir = std::env::var_os("HLBOOK_CLIENTS").map(PathBuf::from);
    let found = dir.filter(|d| installed(d));
    if found.is_none() {
        skip(&format!("{what} is not installed (run `make clients`, then set HLBOOK_CLIENTS=build/clients)"));
    }
    found
}

/// Says why a test does not run; a failure under `HLBOOK_REQUIRE_CLIENTS=1`.
pub fn skip(why: &str) {
    assert!(std::env::var("HLBOOK_REQUIRE_CLIENTS").as_deref() != Ok("1"), "{why}");
    crate::procs::skip(why);
}

/// A library's run: its stdout lines arrive on a channel while our own client reads the server.
pub struct Run {
    pub child: Child,
    pub lines: mpsc::Receiver<String>,
}

impl Run {
    pub fn start(cmd: &mut Command) -> Run {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {cmd:?}: {e}"));
        let (tx, lines) = mpsc::channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        Run { child, lines }
    }

    pub fn stderr(&mut self) -> String {
        let mut s = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut s);
        }
        s
    }
}

/// The library needs Node 22 (global WebSocket); `make clients` installs it from the npm registry beside it.
pub fn node_binary(dir: &Path) -> PathBuf {
    let local = dir.join("node/node_modules/.bin/node");
    if local.exists() { local } else { PathBuf::from("node") }
}

/// ccxt installs no command of its own: it is there when a `py/lib/python3.*/site-packages/ccxt` is.
pub fn has_python_package(dir: &Path, package: &str) -> bool {
    let versions = std::fs::read_dir(dir.join("py/lib")).into_iter().flatten().flatten();
    versions.into_iter().any(|v| v.path().join("site-packages").join(package).is_dir())
}

/// The busiest user of the simulator's fills so far (lower-case).
pub fn busy_user(data: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut counts: HashMap<String, usize> = HashMap::new();
        for day in std::fs::read_dir(data.join("node_fills_by_block/hourly")).into_iter().flatten().flatten() {
            for f in std::fs::read_dir(day.path()).unwrap().flatten() {
                for l in std::fs::read_to_string(f.path()).unwrap_or_default().lines() {
                    let Ok(v) = serde_json::from_str::<Value>(l) else { continue };
                    for ev in v["events"].as_array().into_iter().flatten() {
                        *counts.entry(ev[0].as_str().unwrap().to_lowercase()).or_default() += 1;
                    }
                }
            }
        }
        if let Some((u, n)) = counts.into_iter().max_by_key(|(u, n)| (*n, u.clone()))
            && n >= 3
        {
            return u;
        }
        assert!(Instant::now() < deadline, "the simulator wrote no fills");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Every fill's and status's oid of `user` in the simulator's files.
pub fn user_oids(data: &Path, user: &str) -> std::collections::HashSet<String> {
    let mut out = std::collections::HashSet::new();
    for stream in ["fills", "order_statuses"] {
        for day in
            std::fs::read_dir(data.join(format!("node_{stream}_by_block/hourly"))).into_iter().flatten().flatten()
        {
            for f in std::fs::read_dir(day.path()).unwrap().flatten() {
                for l in std::fs::read_to_string(f.path()).unwrap_or_default().lines() {
                    let Ok(v) = serde_json::from_str::<Value>(l) else { continue };
                    for ev in v["events"].as_array().into_iter().flatten() {
                        let (u, oid) = if stream == "fills" {
                            (ev[0].as_str(), &ev[1]["oid"])
                        } else {
                            (ev["user"].as_str(), &ev["order"]["oid"])
                        };
                        if u.map(str::to_lowercase).as_deref() == Some(user) {
                            out.insert(oid.to_string());
                        }
                    }
                }
            }
        }
    }
    out
}

/// Subscribes our own client to `subs`, runs the library until it exits (within `limit` and a margin), and
/// returns what it printed (JSON lines) and every data frame our client received meanwhile.
pub fn run_beside(
    feed: &LiveRig,
    subs: &[Value],
    limit: Duration,
    mut library: impl FnMut() -> Run,
) -> (Vec<Value>, Vec<Value>) {
    wsclient::run(async {
        let mut ours = Client::connect(&feed.ws_url()).await;
        for s in subs {
            ours.send_json(&json!({"method": "subscribe", "subscription": s})).await;
        }
        let mut run = library();
        let mut frames = Vec::new();
        let started = Instant::now();
        let data = |v: &Value| v["channel"] != "subscriptionResponse";
        let status = loop {
            if let Some(Event::Msg(v, _)) = ours.next_event(Duration::from_millis(50)).await
                && data(&v)
            {
                frames.push(v);
            }
            if let Some(status) = run.child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > limit + Duration::from_secs(30) {
                let _ = run.child.kill();
                panic!("the library did not exit; server log:\n{}", feed.server_log());
            }
        };
        // Frames of the last blocks the library saw may still be on their way to our client. They were published
        // before it exited, so the batch that carries our first pong gathered them; the second pong comes after
        // that whole batch.
        for _ in 0..2 {
            ours.send_json(&json!({"method": "ping"})).await;
            loop {
                match ours.next_event(Duration::from_secs(30)).await {
                    Some(Event::Msg(v, _)) if v["channel"] == "pong" => break,
                    Some(Event::Msg(v, _)) if data(&v) => frames.push(v),
                    Some(Event::Msg(..)) => {}
                    other => panic!("no pong from the server: {other:?}"),
                }
            }
        }
        let printed: Vec<Value> = run.lines.try_iter().map(|l| serde_json::from_str(&l).unwrap()).collect();
        assert!(status.success(), "library exited {status}: {}\nprinted {printed:?}", run.stderr());
        (printed, frames)
    })
}

/// Every parsed line of a stream's hour files (`fills`, `order_statuses`), oldest first.
pub fn stream_lines(data: &Path, stream: &str) -> Vec<Value> {
    let mut files: Vec<(u32, u8, PathBuf)> = Vec::new();
    for day in std::fs::read_dir(data.join(format!("node_{stream}_by_block/hourly"))).into_iter().flatten().flatten() {
        let date: u32 = day.file_name().to_string_lossy().parse().unwrap();
        for f in std::fs::read_dir(day.path()).unwrap().flatten() {
            files.push((date, f.file_name().to_string_lossy().parse().unwrap(), f.path()));
        }
    }
    files.sort();
    let text = files.iter().map(|f| std::fs::read_to_string(&f.2).unwrap_or_default()).collect::<Vec<_>>();
    text.iter().flat_map(|t| t.lines()).filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// Every fill object the simulator wrote for `user` (lower-case), verbatim.
pub fn user_fills(data: &Path, user: &str) -> Vec<Value> {
    let lines = stream_lines(data, "fills");
    let events = lines.iter().flat_map(|l| l["events"].as_array().unwrap().iter());
    events.filter(|ev| ev[0].as_str().map(str::to_lowercase).as_deref() == Some(user)).map(|ev| ev[1].clone()).collect()
}

/// Every (oid, status) the simulator wrote for `user`'s orders.
pub fn user_statuses(data: &Path, user: &str) -> std::collections::HashSet<(u64, String)> {
    let lines = stream_lines(data, "order_statuses");
    let events = lines.iter().flat_map(|l| l["events"].as_array().unwrap().iter());
    let mine = events.filter(|ev| ev["user"].as_str().map(str::to_lowercase).as_deref() == Some(user));
    mine.map(|ev| (ev["order"]["oid"].as_u64().unwrap(), ev["status"].as_str().unwrap().to_string())).collect()
}

/// Every BTC trade of the simulator's fills: tid → (px, sz).
pub fn btc_trades(data: &Path) -> HashMap<u64, (String, String)> {
    let lines = stream_lines(data, "fills");
    let fills = lines.iter().flat_map(|l| l["events"].as_array().unwrap().iter().map(|ev| &ev[1]));
    let btc = fills.filter(|f| f["coin"] == "BTC");
    btc.map(|f| (f["tid"].as_u64().unwrap(), (f["px"].as_str().unwrap().into(), f["sz"].as_str().unwrap().into())))
        .collect()
}
