//! The processes of a run: the release `hlsim` and `hlbook serve` beside the bench binary, the client (this
//! binary again), and what /proc and /health say about them.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

pub use super::rig::Proc;
use super::rig::{self, HLBOOK};

/// Starts the simulator (by-block, mainnet-like defaults plus `HLBOOK_BENCH_SIM_ARGS`); returns its info address.
pub fn start_sim(dir: &Path, coins: usize) -> (Proc, String) {
    let (coins, timing) = (coins.to_string(), dir.join("timing.csv"));
    let mut market = vec!["--mode", "by-block", "--coins", &coins, "--timing", timing.to_str().unwrap()];
    let extra = std::env::var("HLBOOK_BENCH_SIM_ARGS").unwrap_or_default();
    market.extend(extra.split_whitespace());
    let (sim, info_url) = rig::start_sim(&dir.join("data"), &market, &dir.join("sim.log"));
    let addr = info_url.trim_start_matches("http://").trim_end_matches("/info").to_string();
    (sim, addr)
}

/// Starts `hlbook serve` on a free port with limits raised for many local connections and validation off;
/// its log goes to `dir/server.log`. Returns once /health says `live`, with its public and admin `HOST:PORT`.
// `{:?}` quotes the paths as TOML strings.
#[allow(clippy::unnecessary_debug_formatting)]
pub fn start_server(dir: &Path, sim_info: &str) -> (Proc, String, String) {
    let snaps = dir.join("snapshots");
    std::fs::create_dir_all(&snaps).expect("snapshot dir");
    // HLBOOK_BENCH_SERVER: another build's hlbook, so two servers are compared under one harness and simulator.
    // HLBOOK_BENCH_NO_ADMIN: that build predates the admin listener (before 463234d): /status is on the public one.
    let legacy = std::env::var_os("HLBOOK_BENCH_NO_ADMIN").is_some();
    let admin_listen = if legacy { "" } else { "admin_listen = [\"127.0.0.1:0\"]\n" };
    // HLBOOK_BENCH_NO_IP_QUOTA: that build predates the per-IP subscription and message allowances (issue #43).
    // Every bench client is one IP: the allowances are lifted, as an operator would for a trusted fan-out.
    let ip_quota = if std::env::var_os("HLBOOK_BENCH_NO_IP_QUOTA").is_some() {
        ""
    } else {
        "max_subscriptions_per_ip = 100000000\nmax_messages_per_minute_per_ip = 100000000\n\
         max_http_connections_per_ip = 100000\n"
    };
    let config = format!(
        "[ingest]\nnode_dir = {:?}\nmode = \"by-block\"\ninfo_url = \"http://{sim_info}/info\"\nsnapshot_dir = {:?}\n\
         [server]\nlisten = [\"127.0.0.1:0\"]\n{admin_listen}compression = true\nmax_connections = 100000\n\
         max_connections_per_ip = 100000\nnew_connections_per_minute_per_ip = 100000\n{ip_quota}",
        dir.join("data"),
        snaps,
    );
    let path = dir.join("hlbook.toml");
    std::fs::write(&path, config).expect("server config");
    let server = std::env::var("HLBOOK_BENCH_SERVER").unwrap_or_else(|_| HLBOOK.to_string());
    // HLBOOK_BENCH_SERVER_NICE: the server's nice value (e.g. -5, as deploy/systemd/hlbook.service runs it;
    // below 0 needs root), against the simulator and client at 0.
    let nice = std::env::var("HLBOOK_BENCH_SERVER_NICE").unwrap_or_else(|_| "0".into());
    #[rustfmt::skip]
    let args = ["-n", &nice, &server, "serve", "--config", path.to_str().unwrap(), "--validate-interval", "0"];
    let server = Proc::start("nice", &args, &dir.join("server.log"));
    let addr = server.wait_line("hlbook listening on", Duration::from_mins(1));
    let admin =
        if legacy { addr.clone() } else { server.wait_line("hlbook admin listening on", Duration::from_mins(1)) };
    let start = Instant::now();
    while health(&addr).and_then(|h| h["state"].as_str().map(str::to_string)).as_deref() != Some("live") {
        assert!(start.elapsed() < Duration::from_mins(2), "server not live after 120 s");
        std::thread::sleep(Duration::from_millis(200));
    }
    (server, addr, admin)
}

/// Starts this binary again as the load generator (its log: `dir/client.log`).
pub fn start_client(dir: &Path, spec_json: &str) -> Proc {
    let exe = std::env::current_exe().expect("bench path");
    let env = [(super::client::CLIENT_ENV, spec_json)];
    Proc::start_env(exe.to_str().expect("utf-8 path"), &["--bench"], &env, &dir.join("client.log"))
}

/// Waits until the server (its admin listener `admin`, whose /health counts subscriptions) holds `want` l2Book and
/// `want` trades subscriptions; the time it took.
pub fn wait_subscribed(admin: &str, want: u64) -> Duration {
    let start = Instant::now();
    loop {
        let h = health(admin).unwrap_or_default();
        let subs = &h["subscriptions"];
        if subs["l2Book"].as_u64() >= Some(want) && subs["trades"].as_u64() >= Some(want) {
            return start.elapsed();
        }
        assert!(start.elapsed() < Duration::from_mins(5), "subscriptions not all taken after 300 s: {subs}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The `n` users with the most fills in the simulator's files so far (waiting until it wrote some).
pub fn busiest_users(dir: &Path, n: usize) -> Vec<String> {
    let hourly = dir.join("data/node_fills_by_block/hourly");
    let start = Instant::now();
    loop {
        let mut counts: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        for day in std::fs::read_dir(&hourly).into_iter().flatten().flatten() {
            for f in std::fs::read_dir(day.path()).into_iter().flatten().flatten() {
                for l in std::fs::read_to_string(f.path()).unwrap_or_default().lines() {
                    let Ok(v) = serde_json::from_str::<serde_json::Value>(l) else { continue };
                    for ev in v["events"].as_array().into_iter().flatten() {
                        *counts.entry(ev[0].as_str().unwrap_or_default().to_lowercase()).or_default() += 1;
                    }
                }
            }
        }
        let mut by: Vec<(usize, String)> = counts.into_iter().map(|(u, c)| (c, u)).collect();
        by.sort_unstable_by(|a, b| b.cmp(a));
        if by.len() >= n {
            return by.into_iter().take(n).map(|(_, u)| u).collect();
        }
        assert!(start.elapsed() < Duration::from_mins(2), "the simulator wrote fills of fewer than {n} users");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Waits for the client's line starting with `prefix` and returns the rest (the client runs for the measured
/// time and its warm-up between its lines).
pub fn client_line(client: &Proc, prefix: &str) -> String {
    client.wait_line(prefix, Duration::from_hours(1))
}

/// `GET /health`, parsed; None when the server does not answer.
pub fn health(addr: &str) -> Option<serde_json::Value> {
    get_json(addr, "/health")
}

/// `GET path`, parsed as JSON; None when the server does not answer.
pub fn get_json(addr: &str, path: &str) -> Option<serde_json::Value> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let body = text.split_once("\r\n\r\n")?.1;
    let (start, end) = (body.find('{')?, body.rfind('}')?);
    serde_json::from_str(&body[start..=end]).ok()
}

/// CPU time (user + system) of a process so far, in µs.
pub fn cpu_us(pid: u32) -> u64 {
    let (user, sys) = cpu_split_us(pid);
    user + sys
}

/// User and kernel CPU of a process so far, µs.
pub fn cpu_split_us(pid: u32) -> (u64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at field 3; utime and stime are 14 and 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest.split_whitespace().skip(11).take(2).filter_map(|x| x.parse().ok()).collect();
    let us = |i: usize| f.get(i).copied().unwrap_or(0) * 1_000_000 / clock_ticks();
    (us(0), us(1))
}

fn clock_ticks() -> u64 {
    static TICKS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        let out = Command::new("getconf").arg("CLK_TCK").output().ok();
        out.and_then(|o| String::from_utf8(o.stdout).ok()).and_then(|s| s.trim().parse().ok()).unwrap_or(100)
    })
}

/// (resident, peak resident) memory of a process in KiB.
pub fn rss_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Lines of the server log at WARN or ERROR level.
pub fn log_problems(dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
    text.lines().filter(|l| l.contains("WARN") || l.contains("ERROR")).map(str::to_string).collect()
}
