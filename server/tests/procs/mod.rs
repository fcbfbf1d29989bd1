//! Running the project's real binaries in end-to-end tests: start, read what they print, stop with SIGTERM.
//! Every wait is bounded; a child left running is killed on drop.

#![allow(dead_code)]

#[path = "../skip/mod.rs"]
mod skip_impl;
#[allow(unused_imports)]
pub use skip_impl::skip;

pub mod fault_proxy;
pub mod held_port;
pub mod nats;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

pub const HLBOOK: &str = env!("CARGO_BIN_EXE_hlbook");
pub const HLSIM: &str = env!("CARGO_BIN_EXE_hlsim");

#[derive(Debug)]
pub struct Proc {
    pub name: String,
    child: Option<Child>,
    /// Closed (the child reads end-of-file) when the Proc is dropped.
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Proc {
    /// Starts `bin` with `args`; stderr goes to `log` (kept for the failure message).
    pub fn start(bin: &str, args: &[&str], log: &Path) -> Proc {
        Proc::start_env(bin, args, &[], log)
    }

    /// `start` with environment variables added.
    pub fn start_env(bin: &str, args: &[&str], env: &[(&str, &str)], log: &Path) -> Proc {
        let name = Path::new(bin).file_name().unwrap().to_string_lossy().into_owned();
        let err = std::fs::File::create(log).expect("log file");
        let mut child = Command::new(bin)
            .args(args)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {bin}: {e}"));
        let out = child.stdout.take().unwrap();
        let stdin = child.stdin.take();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Proc { name, child: Some(child), stdin, lines }
    }

    /// Writes `line` and a newline to the process's standard input (a program of ours that waits for a go).
    pub fn send_line(&mut self, line: &str) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{line}").unwrap_or_else(|e| panic!("{}: writing to stdin: {e}", self.name));
    }

    /// The rest of the first stdout line starting with `prefix`.
    pub fn wait_line(&self, prefix: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.starts_with(prefix) => return l[prefix.len()..].trim().to_string(),
                Ok(_) => {}
                Err(e) => panic!("{}: no line starting {prefix:?} within {timeout:?} ({e})", self.name),
            }
        }
    }

    /// The process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The exit status once the process has exited (None while it runs).
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        let status = self.child.as_mut()?.try_wait().ok().flatten()?;
        self.child = None;
        Some(status)
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        self.child.as_mut().is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// Waits (at most `timeout`) for a process that ends on its own (hlsim `--exit-when-done`); panics after.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.try_status() {
                return s;
            }
            assert!(Instant::now() < deadline, "{} did not exit within {timeout:?}", self.name);
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM, then wait (bounded) for the exit status.
    pub fn stop(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(s) = child.try_wait().unwrap() {
                return s;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("{} did not stop within 20 s of SIGTERM", self.name);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL: a crash, not a shutdown.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Runs `hlbook` with `args` to completion (a command such as `replay`, not a server), its output captured.
pub fn hlbook(args: &[&str]) -> std::process::Output {
    Command::new(HLBOOK).args(args).output().unwrap_or_else(|e| panic!("running hlbook {args:?}: {e}"))
}

/// GET `url` and parse JSON (None on any failure).
pub fn get_json(url: &str) -> Option<serde_json::Value> {
    reqwest::blocking::get(url).ok()?.json().ok()
}

/// GET bytes.
pub fn get_bytes(url: &str) -> Option<Vec<u8>> {
    Some(reqwest::blocking::get(url).ok()?.bytes().ok()?.to_vec())
}

/// The simulated market of the tests that check books against the simulator's (faults, racing nodes): five coins,
/// a 4,000-order BTC book, 40 ms blocks, two rejections per kept status.
pub const CHECKED_MARKET: [&str; 10] =
    ["--coins", "5", "--btc-orders", "4000", "--orders-per-coin", "300", "--block-ms", "40", "--reject-ratio", "2"];

/// Starts `hlsim` writing into `data` with the test's `market` flags, its info server on a port it picks; returns
/// it and that server's `http://HOST:PORT/info`.
pub fn start_sim(data: &Path, market: &[&str], log: &Path) -> (Proc, String) {
    let mut args = vec!["--out", data.to_str().expect("utf-8 path"), "--info-listen", "127.0.0.1:0"];
    args.extend_from_slice(market);
    let sim = Proc::start(HLSIM, &args, log);
    let info = sim.wait_line("info listening on", Duration::from_secs(60));
    (sim, format!("http://{info}/info"))
}

/// `start_sim` with hlsim also playing the public API (`--exchange-listen`, on a port it picks): returns it, the
/// node's `http://HOST:PORT/info` and the exchange's. The node server answers only what a real node answers
/// (no asset contexts, l2Book or history); tests of what hlbook asks the official API point it at the exchange.
pub fn start_sim_exchange(data: &Path, market: &[&str], log: &Path) -> (Proc, String, String) {
    let mut args = vec!["--out", data.to_str().expect("utf-8 path"), "--info-listen", "127.0.0.1:0"];
    args.extend_from_slice(&["--exchange-listen", "127.0.0.1:0"]);
    args.extend_from_slice(market);
    let sim = Proc::start(HLSIM, &args, log);
    let info = sim.wait_line("info listening on", Duration::from_secs(60));
    let exchange = sim.wait_line("exchange listening on", Duration::from_secs(60));
    (sim, format!("http://{info}/info"), format!("http://{exchange}/info"))
}

/// Starts `hlbook serve` following `node_dir`, asking `info_url` for snapshots written to `snapshots`, on ports
/// it picks (read them with `wait_line("hlbook listening on", …)`, then `admin_base`), with `extra` flags after
/// those.
pub fn start_serve(node_dir: &Path, info_url: &str, snapshots: &Path, extra: &[&str], log: &Path) -> Proc {
    start_serve_env(node_dir, info_url, snapshots, extra, &[], log)
}

/// `start_serve` with environment variables added.
pub fn start_serve_env(
    node_dir: &Path,
    info_url: &str,
    snapshots: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
    log: &Path,
) -> Proc {
    start_serve_at("127.0.0.1:0", node_dir, info_url, snapshots, extra, env, log)
}

/// `start_serve_env` listening on `listen` (a restarted server taking its predecessor's address).
pub fn start_serve_at(
    listen: &str,
    node_dir: &Path,
    info_url: &str,
    snapshots: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
    log: &Path,
) -> Proc {
    let mut args = vec![
        "serve",
        "--node-dir",
        node_dir.to_str().unwrap(),
        "--info-url",
        info_url,
        "--snapshot-dir",
        snapshots.to_str().unwrap(),
        "--listen",
        listen,
        "--admin-listen",
        "127.0.0.1:0",
    ];
    args.extend_from_slice(extra);
    Proc::start_env(HLBOOK, &args, env, log)
}

/// An edge: `hlbook serve` reading only `source` (`nats://…`) in `mode`, bootstrapped from `snapshot`,
/// with no info server and no validation; returns it with its public and admin bases.
pub fn start_edge(source: &str, mode: &str, snapshot: &Path, log: &Path) -> (Proc, String, String) {
    let snapshot = snapshot.to_str().expect("utf-8 path");
    #[rustfmt::skip]
    let args = [
        "serve", "--source", source, "--mode", mode, "--snapshot-file", snapshot, "--info-url", "",
        "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--validate-interval", "0",
    ];
    let p = Proc::start(HLBOOK, &args, log);
    let base = format!("http://{}", p.wait_line("hlbook listening on", Duration::from_secs(20)));
    let admin = admin_base(&p);
    (p, base, admin)
}

/// An edge that asks the node's info server `info_url` for snapshots (written under `snapshots`, created here) and
/// has no node dir; `extra` names its `--source` and any other flags. Returns it with its public and admin bases.
pub fn start_info_edge(info_url: &str, snapshots: &Path, extra: &[&str], log: &Path) -> (Proc, String, String) {
    std::fs::create_dir_all(snapshots).unwrap();
    let p = start_serve(Path::new("/nonexistent"), info_url, snapshots, extra, log);
    let base = format!("http://{}", p.wait_line("hlbook listening on", Duration::from_secs(20)));
    let admin = admin_base(&p);
    (p, base, admin)
}

/// `http://HOST:PORT` of a started server's admin listener (`/status`, `/metrics`, `/l4snapshot`); call it after
/// reading every `hlbook listening on` line, which come first.
pub fn admin_base(server: &Proc) -> String {
    format!("http://{}", server.wait_line("hlbook admin listening on", Duration::from_secs(60)))
}

/// Polls `/health` until `pred` holds; panics with the last answer after `timeout`.
pub fn wait_health(base: &str, timeout: Duration, pred: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let deadline = Instant::now() + timeout;
    let mut last = serde_json::Value::Null;
    while Instant::now() < deadline {
        if let Some(h) = get_json(&format!("{base}/health")) {
            if pred(&h) {
                return h;
            }
            last = h;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("health never matched within {timeout:?}; last: {last}");
}

/// Books from a node-format snapshot document.
pub fn books_from_snapshot(bytes: &[u8]) -> hlbook::book::Books {
    let mut coins = Vec::new();
    let h = hlbook::node::snapshot::read_snapshot_slice(bytes, |c| coins.push(hlbook::book::snapshot::coin_book(c)))
        .expect("a node-format snapshot");
    hlbook::book::Books::new(h, coins)
}

pub fn counter(h: &serde_json::Value, name: &str) -> u64 {
    h["counters"][name].as_u64().unwrap_or_else(|| panic!("no counter {name} in {h}"))
}

/// The simulator's books once it has written its last block `last`: its own `fileSnapshot` (written under `dir`),
/// asked until it reaches that height (at most 120 s).
/// Every JSON line of one node stream's hour files under `dir` (`dir/hourly/<yyyymmdd>/<hour>`), oldest file
/// first; a line that does not parse (one still being written) is left out.
pub fn node_json_lines(dir: &Path) -> Vec<serde_json::Value> {
    let mut files: Vec<(u32, u8, std::path::PathBuf)> = Vec::new();
    for day in std::fs::read_dir(dir.join("hourly")).into_iter().flatten().flatten() {
        let date: u32 = day.file_name().to_string_lossy().parse().unwrap();
        for f in std::fs::read_dir(day.path()).unwrap().flatten() {
            files.push((date, f.file_name().to_string_lossy().parse().unwrap(), f.path()));
        }
    }
    files.sort();
    let text: Vec<String> = files.iter().map(|(_, _, p)| std::fs::read_to_string(p).unwrap()).collect();
    text.iter().flat_map(|t| t.lines()).filter_map(|l| serde_json::from_str(l).ok()).collect()
}

pub fn sim_books_at(info_url: &str, dir: &Path, last: u64) -> hlbook::book::Books {
    let deadline = Instant::now() + Duration::from_secs(120);
    let path = dir.join("sim-books.json");
    loop {
        let books = sim_snapshot(info_url, &path);
        let _ = std::fs::remove_file(&path);
        if books.height() == last {
            return books;
        }
        assert!(Instant::now() < deadline, "simulator stuck at {}", books.height());
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The simulator's `fileSnapshot` now, written to `path` (kept there), as books.
pub fn sim_snapshot(info_url: &str, path: &Path) -> hlbook::book::Books {
    let body = serde_json::json!({
        "type": "fileSnapshot",
        "request": {"type": "l4Snapshots", "includeUsers": true, "includeTriggerOrders": false},
        "outPath": path, "includeHeightInOutput": true,
    });
    let resp = reqwest::blocking::Client::new().post(info_url).json(&body).send().unwrap();
    assert!(resp.status().is_success(), "fileSnapshot: {}", resp.status());
    books_from_snapshot(&std::fs::read(path).unwrap())
}

/// The books of the server whose admin listener is `admin` once it reaches block `last`, with its admin /health,
/// after checking that no block was missing, broken, inconsistent, malformed or applied twice, and that `applied`
/// blocks were applied (each once).
pub fn clean_books_at(
    admin: &str,
    last: u64,
    applied: u64,
    timeout: Duration,
) -> (hlbook::book::Books, serde_json::Value) {
    let h = wait_health(admin, timeout, |h| h["height"].as_u64() == Some(last));
    let books = books_from_snapshot(&get_bytes(&format!("{admin}/l4snapshot")).expect("snapshot"));
    for zero in ["gaps", "inconsistencies", "malformed_lines", "broken_blocks", "blocks_already_applied"] {
        assert_eq!(counter(&h, zero), 0, "{zero}: {h}");
    }
    assert_eq!(counter(&h, "blocks_applied"), applied, "each block applied exactly once: {h}");
    (books, h)
}

/// Every coin, level and order (oid, user, side, price, size, place in its level) equal.
pub fn assert_same_books(ours: &hlbook::book::Books, theirs: &hlbook::book::Books) {
    assert_eq!(ours.coin_names(), theirs.coin_names());
    for coin in theirs.coin_names() {
        let (a, b) = (ours.coin(&coin).unwrap(), theirs.coin(&coin).unwrap());
        for side in [hlbook::node::Side::Bid, hlbook::node::Side::Ask] {
            let key = |o: &hlbook::book::RestingOrder| (o.oid, o.user, o.side, o.px, o.sz);
            let (x, y): (Vec<_>, Vec<_>) = (a.orders(side).map(key).collect(), b.orders(side).map(key).collect());
            if x != y {
                let at = x.iter().zip(&y).position(|(p, q)| p != q).unwrap_or(x.len().min(y.len()));
                panic!("{coin} {side:?}: {} vs {} orders, first difference at #{at}", x.len(), y.len());
            }
        }
    }
}
