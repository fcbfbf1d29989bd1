//! WebSocket fan-out (issue #4): simulator line written → frame received, at many connections, plain and compressed.
//!
//! Three processes: the release `hlsim` (by-block, mainnet-like load, open loop, `--timing` records when each
//! line of each block was written), the release `hlbook serve`, and the load generator, which is this binary run
//! again (`client::CLIENT_ENV`) so its CPU is not the server's. The client opens N connections, each subscribing
//! l2Book + trades for its coins, stamps every frame as soon as it is read (and inflated), and joins the stamps
//! with the timing CSV after the run (`stats`); audit frames are also timed from their line's `local_time`
//! ("←start" rows), which a server thread that preempts the simulator after its write cannot shorten. The parent
//! samples the server's CPU (/proc) and blocks applied (the admin /health) over the measured window, which starts
//! after a warm-up once every connection is subscribed.
//!
//! Needs the release binaries beside this one (`make bench` builds them). `HLBOOK_BENCH_SECS` sets the measured
//! time per case (default 60 s), `HLBOOK_BENCH_CASES` picks cases by index (e.g. `0,1,2`),
//! `HLBOOK_BENCH_CLIENT_THREADS` the client's tokio workers (default 2), `HLBOOK_BENCH_SIM_ARGS` adds simulator
//! flags, `HLBOOK_BENCH_SERVER` names another build's `hlbook` to measure instead (old and new in one run;
//! `HLBOOK_BENCH_NO_ADMIN=1` for a build without the admin listener), `HLBOOK_BENCH_COINS` the coins each connection
//! subscribes in every picked case with any (the first N of `coins`). Results: docs/benchmarks.md, "Issue #4:
//! fan-out" and "Issue #16".

#[path = "ws_fanout/client.rs"]
mod client;
#[path = "ws_fanout/procs.rs"]
mod procs;
// The tests' process rig (server/tests/procs): how every test and bench starts hlsim and hlbook.
#[allow(clippy::duration_suboptimal_units)]
#[path = "../../server/tests/procs/mod.rs"]
mod rig;
#[path = "ws_fanout/stats.rs"]
mod stats;

use std::collections::BTreeMap;

use client::Spec;
use procs::Proc;
use stats::ClientResult;

/// The simulator's coin count in every case (its first ten coins: BTC, @107, xyz:GOLD, ETH, SOL, …).
const SIM_COINS: usize = 10;
const WARMUP_SECS: u64 = 5;

#[derive(Clone, Copy, Debug)]
struct Case {
    conns: usize,
    coins: usize,
    deflate: bool,
    /// `?audit=1`. An audit frame carries the connection's own send time, so a compressed audit connection
    /// deflates every frame itself; without audit every compressed subscriber shares one deflated copy.
    audit: bool,
    /// Connections that inflate, parse and time every frame; the rest only read and count (`client::sink`).
    timed: usize,
    /// The case this one is compared with (server CPU per block).
    versus: Option<usize>,
    /// Users whose userFills the connections follow (the simulator's busiest, spread over the connections).
    users: usize,
}

/// Inflating every frame of 1,000 compressed connections takes the client about two cores, more than the machine
/// has beside the server; the compressed cases and their plain references therefore time every 10th connection.
/// Case 5 follows 10 users' userFills on 4 connections, nothing else (issue #17).
const CASES: [Case; 6] = [
    Case { conns: 4, coins: 4, deflate: false, audit: true, timed: 4, versus: None, users: 0 },
    Case { conns: 1000, coins: 10, deflate: false, audit: true, timed: 1000, versus: None, users: 0 },
    Case { conns: 1000, coins: 10, deflate: true, audit: true, timed: 100, versus: Some(1), users: 0 },
    Case { conns: 1000, coins: 10, deflate: false, audit: false, timed: 100, versus: None, users: 0 },
    Case { conns: 1000, coins: 10, deflate: true, audit: false, timed: 100, versus: Some(3), users: 0 },
    Case { conns: 4, coins: 0, deflate: false, audit: true, timed: 4, versus: None, users: 10 },
];

/// What the parent measured about one case.
#[derive(Debug)]
struct Row {
    index: usize,
    case: Case,
    client: ClientResult,
    /// Server CPU over the window, µs, and blocks applied in it.
    server_cpu_us: u64,
    blocks: u64,
    client_cpu_us: u64,
    sim_cpu_us: u64,
    rss_kib: (u64, u64),
}

fn coins(n: usize) -> Vec<String> {
    // Case 0's four are the big perps; the ten are the simulator's whole universe.
    let all = ["BTC", "ETH", "SOL", "HYPE", "@107", "xyz:GOLD", "DOGE", "kPEPE", "@1", "XRP"];
    all.iter().take(n).map(std::string::ToString::to_string).collect()
}

struct Sample {
    server: u64,
    server_sys: u64,
    client: u64,
    sim: u64,
    health: serde_json::Value,
    load: String,
}

fn pid(p: &Proc) -> u32 {
    p.pid().expect("still running")
}

/// `admin`: the admin listener, whose /health has the counters.
fn sample(server: &Proc, client: &Proc, sim: &Proc, admin: &str) -> Sample {
    Sample {
        server: procs::cpu_us(pid(server)),
        server_sys: procs::cpu_split_us(pid(server)).1,
        client: procs::cpu_us(pid(client)),
        sim: procs::cpu_us(pid(sim)),
        health: procs::health(admin).unwrap_or_default(),
        load: std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_string(),
    }
}

/// Changes of the admin /health counters in `group` between two samples, the ones that moved.
fn deltas(a: &serde_json::Value, b: &serde_json::Value, group: &str) -> BTreeMap<String, i64> {
    let Some(after) = b[group].as_object() else { return BTreeMap::new() };
    after
        .iter()
        .map(|(k, v)| (k.clone(), v.as_i64().unwrap_or(0) - a[group][k].as_i64().unwrap_or(0)))
        .filter(|(_, d)| *d != 0)
        .collect()
}

fn run(index: usize, case: Case, secs: u64, threads: usize) -> Row {
    let dir = tempfile::tempdir().expect("temp dir");
    let (sim, info) = procs::start_sim(dir.path(), SIM_COINS);
    let (server, addr, admin) = procs::start_server(dir.path(), &info);
    let spec = Spec {
        addr,
        conns: case.conns,
        coins: coins(case.coins),
        deflate: case.deflate,
        audit: case.audit,
        warmup_secs: WARMUP_SECS,
        secs,
        timed: case.timed,
        threads,
        timing: dir.path().join("timing.csv").to_str().unwrap().to_string(),
        users: if case.users > 0 { procs::busiest_users(dir.path(), case.users) } else { Vec::new() },
    };
    let started = std::time::Instant::now();
    let mut client = procs::start_client(dir.path(), &serde_json::to_string(&spec).unwrap());
    procs::client_line(&client, "ready");
    let connecting = started.elapsed();
    let taking = procs::wait_subscribed(&admin, (case.conns * case.coins) as u64);
    let connected = procs::health(&admin).unwrap_or_default();
    client.send_line("go");
    procs::client_line(&client, "measuring ");
    let s0 = sample(&server, &client, &sim, &admin);
    procs::client_line(&client, "done ");
    let s1 = sample(&server, &client, &sim, &admin);
    let rss_kib = procs::rss_kib(pid(&server));
    let status = procs::get_json(&admin, "/status").unwrap_or_default();
    let json = procs::client_line(&client, "{");
    let result: ClientResult = serde_json::from_str(&format!("{{{json}")).expect("client result");
    let _ = client.stop();
    let blocks = (s1.health["counters"]["blocks_applied"].as_u64().unwrap_or(0))
        .saturating_sub(s0.health["counters"]["blocks_applied"].as_u64().unwrap_or(0));
    println!(
        "\ncase {index}: {} connections × {} coins × (l2Book + trades), {} users' userFills, {}, audit {}; \
         load before/after: {} / {}",
        case.conns,
        case.coins,
        case.users,
        if case.deflate { "compressed" } else { "plain" },
        case.audit,
        s0.load,
        s1.load,
    );
    println!(
        "  connected and subscribed in {:.1?}, all subscriptions taken {:.1?} later: {} connections, \
         subscriptions {}, lag_ms {}",
        connecting, taking, connected["connections"], connected["subscriptions"], connected["lag_ms"]
    );
    println!("  ws counters moved in the window: {:?}", deltas(&s0.health, &s1.health, "ws"));
    println!("  ws counters since start: {}", s1.health["ws"]);
    println!("  lag_ms at the end: {}", s1.health["lag_ms"]);
    println!("  ingest counters moved: {:?}", deltas(&s0.health, &s1.health, "counters"));
    let per = blocks.max(1);
    let writes = deltas(&s0.health, &s1.health, "ws").get("writes").copied().unwrap_or(0);
    let (cpu, sys) = (s1.server - s0.server, s1.server_sys - s0.server_sys);
    println!(
        "  server CPU per block: {} µs, of it in the kernel {} µs; socket writes per block per connection {}",
        cpu / per,
        sys / per,
        ratio(writes as u64, per * case.conns.max(1) as u64).trim_end_matches('×')
    );
    let c = &result;
    println!(
        "  client: {} frames ({} by sinks), {} timed connections, {} MB on the wire, errors {}, closed early {}, \
         unparsed {}, unjoined {}, never caught up {}, blocks without own l2 frame {}",
        c.frames,
        c.sink_frames,
        c.timed_conns,
        deltas(&s0.health, &s1.health, "ws").get("bytes_sent").copied().unwrap_or(0) >> 20,
        c.errors,
        c.closed_early,
        c.unparsed,
        c.unjoined,
        c.never_caught_up,
        c.blocks_without_l2
    );
    // From the block's last (status) line's write, and from the line each channel is built from.
    for (what, p) in [
        ("all", c.all),
        ("l2Book", c.l2),
        ("trades", c.trades),
        ("last-subscriber", c.last_sub),
        ("l2Book←diffs", c.l2_from_diffs),
        ("trades←fills", c.trades_from_fills),
        ("l2Book←start", c.l2_from_line_start),
        ("trades←start", c.trades_from_line_start),
        ("socket→client", c.wire),
        ("userFills", c.user_fills),
        ("userFills←fills", c.user_fills_from_fills),
        ("userFills←start", c.user_fills_from_line_start),
    ] {
        println!(
            "  {what:<15} n={:<9} p50={:>8} p99={:>8} p99.9={:>8} max={:>8} ms",
            p.n,
            ms(p.p50),
            ms(p.p99),
            ms(p.p999),
            ms(p.max)
        );
    }
    // The server's own split of each block's time (its audit stages, over its last minute), per line: the diffs
    // line's are the l2Book frames', the fills line's the trades' (the status line's have no writes without l4Book).
    for line in ["diffs", "fills"] {
        println!("  server stages of the {line} line over its last {} s (p50 / p99 ms):", status["window_s"]);
        for st in status["stages_by_line"][line].as_array().into_iter().flatten() {
            let at = |k: &str| ms(st[k].as_u64().unwrap_or(0));
            println!(
                "    {:<25} n={:<6} {:>8} / {:>8}",
                st["stage"].as_str().unwrap_or("?"),
                st["count"],
                at("p50_us"),
                at("p99_us")
            );
        }
    }
    let problems = procs::log_problems(dir.path());
    println!("  server log: {} WARN/ERROR lines", problems.len());
    for l in problems.iter().take(5) {
        println!("    {l}");
    }
    Row {
        index,
        case,
        client: result,
        server_cpu_us: s1.server - s0.server,
        blocks,
        client_cpu_us: s1.client - s0.client,
        sim_cpu_us: s1.sim - s0.sim,
        rss_kib,
    }
}

/// µs as milliseconds with two decimals.
fn ms(us: u64) -> String {
    format!("{}.{:02}", us / 1000, us % 1000 / 10)
}

/// a / b with two decimals.
fn ratio(a: u64, b: u64) -> String {
    if b == 0 {
        return "-".into();
    }
    let r = a * 100 / b;
    format!("{}.{:02}×", r / 100, r % 100)
}

fn per_block_us(r: &Row) -> u64 {
    r.server_cpu_us / r.blocks.max(1)
}

fn table(rows: &[Row]) {
    println!(
        "\n| case | conns (timed) | coins | mode | frames/s | p50 | p99 | p99.9 | max | last-sub p50 | last-sub p99 | \
         server CPU/block | vs | server RSS (peak) | client CPU | sim CPU |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for r in rows {
        let c = &r.client;
        let window_us = (c.window_ns / 1000).max(1) as u64;
        let versus = r.case.versus.and_then(|v| rows.iter().find(|o| o.index == v));
        println!(
            "| {} | {} ({}) | {} | {}{} | {} | {} | {} | {} | {} | {} | {} | {} ms ({} blocks) | {} | {} MB ({} MB) | {}% | {}% |",
            r.index,
            r.case.conns,
            r.case.timed,
            r.case.coins,
            if r.case.deflate { "deflate" } else { "plain" },
            if r.case.audit { "+audit" } else { "" },
            c.frames * 1_000_000 / window_us,
            ms(c.all.p50),
            ms(c.all.p99),
            ms(c.all.p999),
            ms(c.all.max),
            ms(c.last_sub.p50),
            ms(c.last_sub.p99),
            ms(per_block_us(r)),
            r.blocks,
            versus.map_or("-".into(), |v| format!("{} case {}", ratio(per_block_us(r), per_block_us(v)), v.index)),
            r.rss_kib.0 >> 10,
            r.rss_kib.1 >> 10,
            r.client_cpu_us * 100 / window_us,
            r.sim_cpu_us * 100 / window_us,
        );
    }
}

fn main() {
    if let Ok(spec) = std::env::var(client::CLIENT_ENV) {
        return client::main(&spec);
    }
    // `cargo bench` passes `--bench`; a test run of benches (`cargo test --benches`) must not take minutes.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let env = |k: &str, d: u64| std::env::var(k).ok().and_then(|s| s.parse().ok()).unwrap_or(d);
    let secs = env("HLBOOK_BENCH_SECS", 60);
    let threads = env("HLBOOK_BENCH_CLIENT_THREADS", 2) as usize;
    let pick = std::env::var("HLBOOK_BENCH_CASES").ok();
    let coins = std::env::var("HLBOOK_BENCH_COINS").ok().and_then(|s| s.parse::<usize>().ok());
    let mut rows = Vec::new();
    for (i, &case) in CASES.iter().enumerate() {
        // Fewer watched coins, a smaller share of each diffs line: what the watched coins' first part is worth.
        let case = match coins {
            Some(n) if case.coins > 0 => Case { coins: n.clamp(1, SIM_COINS), ..case },
            _ => case,
        };
        if pick.as_ref().is_none_or(|p| p.split(',').any(|x| x.trim() == i.to_string())) {
            rows.push(run(i, case, secs, threads));
        }
    }
    table(&rows);
}
