//! Fan-out of one node's lines through NATS JetStream to many light consumers, at mainnet line rate (issue #36,
//! Benchmarks): does any consumer fall behind, what does the delivery cost in latency, and what do nats-server
//! and the publisher cost in CPU and memory.
//!
//! The real parts, through the tests' process rig: the release `hlsim` writes by-block files at `--rate`
//! (default 1.0: mainnet-like), `hlbook relay --nats` publishes every line into a local nats-server, and this
//! process runs each case's consumers: ordered pull consumers on the stream, from its newest message on, each
//! reading every line (statuses included) and doing nothing with it. A consumer's lag is the time from JetStream
//! storing a message (its `published` stamp, same clock) to the consumer holding it. "Behind" is what JetStream
//! says it still has to deliver to the consumer (`pending`). The cases run one after another on one stream, so 1
//! and 50 consumers are compared in one run.
//!
//! The hop: consumer 0 of each case also notes when it held each whole line (the last part of a long one), and
//! hlbook's own ingest follows the same node's files in this process (`Follower`, the file source as `hlbook
//! serve` runs it). Joined with the simulator's `--timing` (when it finished writing each line), that gives node
//! write → line in hand by NATS against node write → line read from the file, per line, in one run: what the
//! NATS hop adds over a file source on the node's host.
//!
//! `HLBOOK_BENCH_SECS` (default 60) measured per case after a 5 s warm-up; `HLBOOK_BENCH_CONSUMERS` (default
//! `1,1p,1s,50,50p,50s`: `p` for push consumers and `s` for plain subscriptions to the line subjects, against the
//! pull consumers hlbook's edges read the stream with; `1,3p,2s` under `--test`, as
//! `make smoke` runs it); `HLBOOK_BENCH_RATE` (default 1.0);
//! `HLBOOK_BENCH_SIM_ARGS` adds simulator flags; `HLBOOK_BENCH_COMPRESS_MIN` (default 32768) is the publisher's
//! `nats.compress_min_bytes`, 0 for uncompressed lines. Needs `nats-server` and `cargo build --release -p hlbook --bins`.

// The tests' rig, written for the `hlbook` package's MSRV (1.85), where `Duration::from_mins` is not yet stable.
#[allow(clippy::duration_suboptimal_units)]
#[path = "../../server/tests/procs/mod.rs"]
mod procs;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_nats::jetstream::{self, consumer};
use futures_util::StreamExt;
use hdrhistogram::Histogram;
use hlbook::ingest::nats::{H_ENC, H_HEIGHT, H_LEN, header_part, header_u64, word_stream};
use hlbook::node::{Mode, Stream};
use hlbook_benches::{Follower, written_times};
use procs::{HLBOOK, Proc, nats::NatsServer};

const WARMUP: Duration = Duration::from_secs(5);
const STREAM: &str = "HL";

/// What one consumer saw while measuring.
#[derive(Default)]
struct Seen {
    /// Messages (a line, or a part of a long one).
    lines: u64,
    bytes: u64,
    /// Storage → consumer, µs.
    lag: Option<Histogram<u64>>,
    /// The most JetStream still had to deliver to it at any message.
    max_pending: u64,
    /// What it had left at the end.
    end_pending: u64,
    /// Messages stamped later than they arrived (clock steps; counted as 0).
    early: u64,
    /// Consumer 0 only: (stream, height, ns since the epoch) when it held each whole line.
    lines_held: Vec<(Stream, u64, i64)>,
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

#[allow(clippy::float_arithmetic)] // CPU shares, not money
fn main() {
    // Through the tests' skip mechanism: counted in `$HLBOOK_SKIP_LOG`, a failure under `HLBOOK_NO_SKIPS=1`.
    if !procs::nats::available_or_skip() {
        return;
    }
    let secs: u64 = env_or("HLBOOK_BENCH_SECS", "60").parse().expect("HLBOOK_BENCH_SECS: seconds");
    // `--test` (make smoke): check that it runs, with a light load.
    let default_cases = if std::env::args().any(|a| a == "--test") { "1,3p,2s" } else { "1,1p,1s,50,50p,50s" };
    let cases: Vec<Case> = env_or("HLBOOK_BENCH_CONSUMERS", default_cases)
        .split(',')
        .map(|c| c.trim().parse().unwrap_or_else(|e| panic!("HLBOOK_BENCH_CONSUMERS: {e}")))
        .collect();
    let rate = env_or("HLBOOK_BENCH_RATE", "1.0");
    let tmp = tempfile::tempdir().expect("temp dir");
    let nats = NatsServer::start(&tmp.path().join("nats"), "");
    let data = tmp.path().join("data");
    let timing = tmp.path().join("timing.csv");
    let mut market = vec!["--rate", &rate, "--mode", "by-block", "--timing", timing.to_str().unwrap()];
    let extra = env_or("HLBOOK_BENCH_SIM_ARGS", "");
    market.extend(extra.split_whitespace());
    let (_sim, info) = procs::start_sim(&data, &market, &tmp.path().join("sim.log"));
    let files = Follower::start(&data, Mode::ByBlock, &info, &tmp.path().join("snapshots"));
    let relay_toml = tmp.path().join("relay.toml");
    // `HLBOOK_BENCH_COMPRESS_MIN`: the publisher's nats.compress_min_bytes (0: lines go uncompressed).
    let compress = env_or("HLBOOK_BENCH_COMPRESS_MIN", "32768");
    let relay_config = format!("[nats]\nmax_age_secs = 120\ncompress_min_bytes = {compress}\n");
    std::fs::write(&relay_toml, relay_config).expect("relay config");
    #[rustfmt::skip]
    let relay = Proc::start(HLBOOK, &[
        "relay", "--nats", &nats.url(), "--config", relay_toml.to_str().unwrap(),
        "--node-dir", data.to_str().unwrap(), "--mode", "by-block",
    ], &tmp.path().join("relay.log"));
    relay.wait_line("relay publishing to nats stream", Duration::from_mins(1));
    let pids = [("nats-server", nats.proc.pid().expect("running")), ("relay", relay.pid().expect("running"))];
    println!(
        "nats_fanout: hlsim --rate {rate}, by-block, compress_min_bytes {compress}; {secs} s measured per case after {WARMUP:?}"
    );
    println!(
        "| consumers | messages/s each | MB/s each | lag p50 / p99 / max (ms) | worst consumer p99 (ms) | max pending | left at end | nats-server CPU | relay CPU | nats-server RSS |"
    );
    println!("| ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mut hops = Vec::new();
    for &case in &cases {
        let cpu0 = pids.map(|(_, p)| cpu_secs(p));
        let seen = rt.block_on(run_case(&nats.url(), case, Duration::from_secs(secs)));
        let cpu = [0, 1].map(|i| (cpu_secs(pids[i].1) - cpu0[i]) / (secs as f64 + WARMUP.as_secs_f64()));
        report(case, secs, &seen, cpu, rss_mb(pids[0].1));
        hops.push((case, seen.into_iter().next().map(|s| s.lines_held).unwrap_or_default()));
    }
    let written = written_times(&timing);
    println!("\nnode write → line in hand (ms), consumer 0 by NATS against hlbook's file source, same lines:");
    println!(
        "| consumers | line | n | file p50 / p99 | NATS p50 / p99 | NATS − file, p50 of the per-line difference |"
    );
    println!("| ---: | --- | ---: | --- | --- | ---: |");
    for (case, held) in &hops {
        hop_report(*case, held, &written, &files);
    }
    files.finish();
}

/// Per stream: write → read by the file source, write → held by NATS consumer 0, and the per-line difference.
#[allow(clippy::float_arithmetic)] // milliseconds, not money
fn hop_report(n: Case, held: &[(Stream, u64, i64)], written: &HashMap<u64, [i64; 3]>, files: &Follower) {
    let (Some(lo), Some(hi)) = (held.iter().map(|h| h.1).min(), held.iter().map(|h| h.1).max()) else { return };
    let read: HashMap<(Stream, u64), i64> =
        files.shared.times_in(lo..=hi).into_iter().map(|t| ((t.line, t.height), t.read)).collect();
    for stream in Stream::ALL {
        let hist = || Histogram::<u64>::new(3).expect("histogram");
        let (mut file, mut nats, mut diff) = (hist(), hist(), Vec::new());
        for &(s, h, at) in held.iter().filter(|x| x.0 == stream) {
            let Some(&w) = written.get(&h).map(|w| &w[s.index()]).filter(|w| **w > 0) else { continue };
            let Some(&r) = read.get(&(s, h)) else { continue };
            file.record(((r - w).max(0) / 1000) as u64).expect("auto-resizing histogram");
            nats.record(((at - w).max(0) / 1000) as u64).expect("auto-resizing histogram");
            diff.push(at - r);
        }
        if diff.is_empty() {
            continue;
        }
        diff.sort_unstable();
        let ms = |h: &Histogram<u64>, q| h.value_at_quantile(q) as f64 / 1000.0;
        println!(
            "| {n} | {} | {} | {:.3} / {:.3} | {:.3} / {:.3} | {:.3} |",
            stream.short(),
            diff.len(),
            ms(&file, 0.5),
            ms(&file, 0.99),
            ms(&nats, 0.5),
            ms(&nats, 0.99),
            diff[diff.len() / 2] as f64 / 1e6,
        );
    }
}

/// How a case's consumers read: JetStream pull consumers (as hlbook's edges read the stream), push consumers, or
/// plain subscriptions to the line subjects (as edges take the next line, `nats.live_subjects`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Way {
    Pull,
    Push,
    Subject,
}

/// A case: how many consumers, and how they read.
#[derive(Clone, Copy, Debug)]
struct Case {
    n: usize,
    way: Way,
}

impl std::str::FromStr for Case {
    type Err = String;
    fn from_str(s: &str) -> Result<Case, String> {
        let (n, way) = match s.as_bytes().last() {
            Some(b'p') => (&s[..s.len() - 1], Way::Push),
            Some(b's') => (&s[..s.len() - 1], Way::Subject),
            _ => (s, Way::Pull),
        };
        let n = n.parse().map_err(|_| format!("{s:?}: a number of consumers, then `p` for push, `s` for subject"))?;
        Ok(Case { n, way })
    }
}

impl std::fmt::Display for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let way = match self.way {
            Way::Pull => "pull",
            Way::Push => "push",
            Way::Subject => "subject",
        };
        write!(f, "{} {way}", self.n)
    }
}

/// The case's consumers from the stream's newest message on; after the warm-up, `measure` of recording each.
async fn run_case(url: &str, case: Case, measure: Duration) -> Vec<Seen> {
    let client = async_nats::connect(url).await.expect("connect to nats-server");
    let js = jetstream::new(client.clone());
    let stream = js.get_stream(STREAM).await.expect("the publisher's stream");
    let recording = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for i in 0..case.n {
        let (recording, stop) = (recording.clone(), stop.clone());
        let new = consumer::DeliverPolicy::New;
        let task = if case.way == Way::Subject {
            let subs = client.subscribe("hl.by-block.*").await.expect("a subscription to the line subjects");
            tokio::spawn(async move { consume_subject(subs, i == 0, &recording, &stop).await })
        } else if case.way == Way::Push {
            let config = consumer::push::OrderedConfig {
                deliver_subject: client.new_inbox(),
                deliver_policy: new,
                ..Default::default()
            };
            let c = stream.create_consumer(config).await.expect("an ordered push consumer");
            let msgs = c.messages().await.expect("consumer messages");
            tokio::spawn(async move { consume(msgs, i == 0, &recording, &stop).await })
        } else {
            let config = consumer::pull::OrderedConfig { deliver_policy: new, ..Default::default() };
            let c = with_retries(|| stream.create_consumer(config.clone())).await;
            let msgs = c.messages().await.expect("consumer messages");
            tokio::spawn(async move { consume(msgs, i == 0, &recording, &stop).await })
        };
        tasks.push(task);
    }
    tokio::time::sleep(WARMUP).await;
    recording.store(true, Relaxed);
    tokio::time::sleep(measure).await;
    stop.store(true, Relaxed);
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.expect("consumer task"));
    }
    out
}

/// A JetStream API call retried a few times: a server busy storing a 5 MB status line can miss the client's
/// 5 s API timeout while fifty consumers are created.
async fn with_retries<T, E: std::fmt::Debug, F: std::future::Future<Output = Result<T, E>>>(
    mut call: impl FnMut() -> F,
) -> T {
    let mut tries = 0;
    loop {
        match call().await {
            Ok(v) => return v,
            Err(e) if tries < 5 => {
                tries += 1;
                eprintln!("nats_fanout: retrying a JetStream call ({e:?})");
            }
            Err(e) => panic!("a JetStream call failed 6 times: {e:?}"),
        }
    }
}

async fn consume<E: std::fmt::Debug>(
    mut msgs: impl futures_util::Stream<Item = Result<jetstream::Message, E>> + Unpin,
    note_lines: bool,
    recording: &AtomicBool,
    stop: &AtomicBool,
) -> Seen {
    let mut seen = Seen { lag: Some(Histogram::new(3).expect("histogram")), ..Seen::default() };
    let mut joiner = Joiner::default();
    let start = Instant::now();
    while !stop.load(Relaxed) {
        let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(200), msgs.next()).await else { continue };
        let m = m.expect("a message");
        let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_nanos() as i128;
        let info = m.info().expect("JetStream message info");
        seen.end_pending = info.pending;
        if !recording.load(Relaxed) {
            continue;
        }
        let lag_ns = now - info.published.unix_timestamp_nanos();
        seen.early += u64::from(lag_ns < 0);
        let lag_us = lag_ns.max(0) / 1000;
        seen.lag.as_mut().expect("histogram").record(lag_us as u64).expect("auto-resizing histogram");
        seen.lines += 1;
        seen.bytes += m.payload.len() as u64;
        seen.max_pending = seen.max_pending.max(info.pending);
        if note_lines && let Some(held) = joiner.whole_line(&m) {
            seen.lines_held.push(held);
        }
    }
    if seen.lines == 0 {
        eprintln!("nats_fanout: a consumer received nothing while measuring ({:?} in all)", start.elapsed());
    }
    seen
}

/// A plain subscription's consumer: counts what it gets and, for consumer 0, when it held each whole line (no
/// storage stamp: these messages never went through the stream).
async fn consume_subject(
    mut subs: async_nats::Subscriber,
    note_lines: bool,
    recording: &AtomicBool,
    stop: &AtomicBool,
) -> Seen {
    let mut seen = Seen { lag: Some(Histogram::new(3).expect("histogram")), ..Seen::default() };
    let mut joiner = Joiner::default();
    while !stop.load(Relaxed) {
        let Ok(Some(m)) = tokio::time::timeout(Duration::from_millis(200), subs.next()).await else { continue };
        if !recording.load(Relaxed) {
            continue;
        }
        seen.lines += 1;
        seen.bytes += m.payload.len() as u64;
        if note_lines && let Some(held) = joiner.whole_line(&m) {
            seen.lines_held.push(held);
        }
    }
    if seen.lines == 0 {
        eprintln!("nats_fanout: a subscriber received nothing while measuring");
    }
    seen
}

/// Consumer 0's lines put back together as an edge does: parts joined, compressed lines inflated. A line counts
/// as held once it is whole and readable.
#[derive(Default)]
struct Joiner {
    parts: HashMap<Stream, Vec<u8>>,
}

impl Joiner {
    /// The line a message completes (a line sent whole, or the last part of a long one), and when it was held.
    fn whole_line(&mut self, m: &async_nats::Message) -> Option<(Stream, u64, i64)> {
        let stream = word_stream(m.subject.rsplit('.').next()?)?;
        let h = m.headers.as_ref()?;
        let (part, parts) = header_part(h)?;
        let buf = self.parts.entry(stream).or_default();
        if part == 0 {
            buf.clear();
        }
        buf.extend_from_slice(&m.payload);
        if part + 1 < parts {
            return None;
        }
        if h.get(H_ENC).is_some() {
            let len = header_u64(h, H_LEN)? as usize;
            let line = zstd::bulk::decompress(buf, len).expect("a compressed line inflates");
            assert_eq!(line.len(), len, "a compressed line inflates to its Hl-Len");
        }
        buf.clear();
        let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_nanos() as i64;
        Some((stream, header_u64(h, H_HEIGHT)?, now))
    }
}

#[allow(clippy::float_arithmetic)] // rates and milliseconds, not money
fn report(case: Case, secs: u64, seen: &[Seen], cpu: [f64; 2], rss_mb: f64) {
    let n = case.n;
    let mut all = Histogram::<u64>::new(3).expect("histogram");
    let mut worst_p99 = 0;
    for s in seen {
        let h = s.lag.as_ref().expect("histogram");
        all.add(h).expect("same bounds");
        worst_p99 = worst_p99.max(h.value_at_quantile(0.99));
    }
    let msgs = seen.iter().map(|s| s.lines).sum::<u64>() as f64 / n as f64 / secs as f64;
    let mb = seen.iter().map(|s| s.bytes).sum::<u64>() as f64 / n as f64 / secs as f64 / 1e6;
    let ms = |us: u64| us as f64 / 1000.0;
    println!(
        "| {case} | {msgs:.1} | {mb:.2} | {:.3} / {:.3} / {:.1} | {:.3} | {} | {} | {:.0}% | {:.0}% | {rss_mb:.0} MB |",
        ms(all.value_at_quantile(0.5)),
        ms(all.value_at_quantile(0.99)),
        ms(all.max()),
        ms(worst_p99),
        seen.iter().map(|s| s.max_pending).max().unwrap_or(0),
        seen.iter().map(|s| s.end_pending).max().unwrap_or(0),
        cpu[0] * 100.0,
        cpu[1] * 100.0,
    );
    let starved = seen.iter().filter(|s| s.lines == 0).count();
    if starved > 0 {
        println!("  ({starved} of {n} consumers received nothing while measuring: they fell behind for good)");
    }
    let early: u64 = seen.iter().map(|s| s.early).sum();
    if early > 0 {
        println!("  ({early} messages arrived before their `published` stamp: counted as 0 ms)");
    }
}

/// A process's user + system CPU seconds so far (`/proc/PID/stat`, fields 14 and 15, in clock ticks of 1/100 s
/// on Linux).
#[allow(clippy::float_arithmetic)]
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name (field 2) may hold spaces; the fields after it start past its closing parenthesis.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest.split_whitespace().filter_map(|x| x.parse().ok()).collect();
    // After ")" come field 3 (state, not a number, skipped by the filter) then 4…: utime is field 14.
    f.get(10).zip(f.get(11)).map_or(0.0, |(u, s)| (u + s) / 100.0)
}

/// Resident memory, MB (`/proc/PID/status` VmRSS).
#[allow(clippy::float_arithmetic)]
fn rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.split_whitespace().next());
    kb.and_then(|k| k.parse::<f64>().ok()).unwrap_or(0.0) / 1000.0
}
