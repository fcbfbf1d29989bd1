//! An L2 oracle that shares nothing with hlbook's engine (issue #45): every l2Book frame the real server sends,
//! for every coin, all 7 (nSigFigs, mantissa) variants and nLevels 1, 7, 20 and 100, by-block and streaming, on
//! the mainnet capture and on an hlsim run, must equal what this file computes on its own.
//!
//! The oracle keeps its own L4 model (oid → coin, side, price, size; per coin and side, price → total and count),
//! loaded from the node-format snapshot and moved by the node's raw book diffs read from the files here, and
//! aggregates it by the protocol's rules (../shared/docs/hl-ws-api.md, "Aggregation"), written for this test:
//! a bucket is `mantissa × 10^(e + 1 − nSigFigs)` wide, `e` the power of ten of the price's leading digit (for a
//! price of 1 or more, its integer digits less one); bids round down, asks up; levels in one bucket merge (sizes
//! and counts add); aggregate from the whole book, then keep the best `nLevels`. All amounts are exact integers of
//! 10^-10. Nothing here imports hlbook's book, L2 or parsing code.
//!
//! Which state a frame shows: its `?audit=1` fields say the block (`height`) and the node's `local_time` of the
//! newest diffs line it was built from (`node_ns`), so the oracle replays the diffs lines in file order and checks
//! each frame against the state after that line (streaming mode publishes between a block's lines).

// Both bring the skip helper in; each test file is its own crate.
#[allow(clippy::duplicate_mod)]
mod common;
#[allow(clippy::duplicate_mod)]
mod procs;
mod wsclient;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use wsclient::raw::channel;

/// The (nSigFigs, mantissa) variants: full precision, 2 to 5 significant figures, and 5 with mantissa 2 and 5.
const VARIANTS: [Variant; 7] = [
    (None, None),
    (Some(2), None),
    (Some(3), None),
    (Some(4), None),
    (Some(5), None),
    (Some(5), Some(2)),
    (Some(5), Some(5)),
];
const DEPTHS: [usize; 4] = [1, 7, 20, 100];
/// 10^-10 units per 1.
const ONE: i128 = 10_000_000_000;

/// A decimal string as an exact count of 10^-10.
fn dec(s: &str) -> i128 {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    assert!(frac.len() <= 10, "more decimals than the oracle keeps: {s}");
    int.parse::<i128>().unwrap() * ONE + format!("{frac:0<10}").parse::<i128>().unwrap()
}

/// Days since 1970-01-01 of a proleptic Gregorian date (the civil-calendar formula).
fn days(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468
}

/// The node's `2026-05-05T17:39:13.394386432` (UTC) in Unix nanoseconds.
fn nanos(t: &str) -> i64 {
    let n = |a: usize, b: usize| t[a..b].parse::<i64>().unwrap();
    let secs = days(n(0, 4), n(5, 7), n(8, 10)) * 86_400 + n(11, 13) * 3600 + n(14, 16) * 60 + n(17, 19);
    let frac = t.get(20..).unwrap_or("");
    secs * 1_000_000_000 + format!("{frac:0<9}")[..9].parse::<i64>().unwrap()
}

/// One side's levels: price → (total size, orders).
type Side = BTreeMap<i128, (i128, u64)>;
/// An L2 answer: per side, best first, (price, size, orders).
type Levels = [Vec<(i128, i128, u64)>; 2];
/// (nSigFigs, mantissa); `None` for absent.
type Variant = (Option<u32>, Option<u32>);

/// The oracle's L4 model.
#[derive(Default)]
struct Model {
    orders: HashMap<u64, (String, usize, i128, i128)>,
    books: HashMap<String, [Side; 2]>,
}

impl Model {
    /// From a node-format snapshot `[height, [[coin, [bids, asks]], …]]`.
    fn from_snapshot(v: &Value) -> Model {
        let mut m = Model::default();
        for book in v[1].as_array().unwrap() {
            let coin = book[0].as_str().unwrap();
            m.books.entry(coin.to_string()).or_default();
            for side in 0..2 {
                for entry in book[1][side].as_array().unwrap() {
                    let o = &entry[1];
                    let (px, sz) = (dec(o["limitPx"].as_str().unwrap()), dec(o["sz"].as_str().unwrap()));
                    m.add(o["oid"].as_u64().unwrap(), coin, side, px, sz);
                }
            }
        }
        m
    }

    fn add(&mut self, oid: u64, coin: &str, side: usize, px: i128, sz: i128) {
        assert!(self.orders.insert(oid, (coin.to_string(), side, px, sz)).is_none(), "oid {oid} twice");
        let level = self.books.entry(coin.to_string()).or_default()[side].entry(px).or_default();
        level.0 += sz;
        level.1 += 1;
    }

    /// Applies one raw book diff event.
    fn apply(&mut self, d: &Value) {
        let oid = d["oid"].as_u64().unwrap();
        let diff = &d["raw_book_diff"];
        if let Some(new) = diff.get("new") {
            let side = usize::from(d["side"] == "A");
            let (px, sz) = (dec(d["px"].as_str().unwrap()), dec(new["sz"].as_str().unwrap()));
            return self.add(oid, d["coin"].as_str().unwrap(), side, px, sz);
        }
        let (coin, side, px, sz) = self.orders.get(&oid).cloned().unwrap_or_else(|| panic!("unknown oid in {d}"));
        let levels = &mut self.books.get_mut(&coin).unwrap()[side];
        let level = levels.get_mut(&px).unwrap();
        if let Some(update) = diff.get("update") {
            let new = dec(update["newSz"].as_str().unwrap());
            level.0 += new - sz;
            self.orders.get_mut(&oid).unwrap().3 = new;
        } else {
            assert_eq!(diff, "remove", "{d}");
            level.0 -= sz;
            level.1 -= 1;
            if level.1 == 0 {
                levels.remove(&px);
            }
            self.orders.remove(&oid);
        }
    }

    /// `coin`'s L2 for one shape: per side (best first) (price, size, orders).
    fn l2(&self, coin: &str, (n_sig, mantissa): Variant, depth: usize) -> Levels {
        let sides = &self.books[coin];
        let one = |side: usize| {
            let levels: Box<dyn Iterator<Item = (&i128, &(i128, u64))>> =
                if side == 0 { Box::new(sides[0].iter().rev()) } else { Box::new(sides[1].iter()) };
            let mut out: Vec<(i128, i128, u64)> = Vec::new();
            for (&px, &(sz, n)) in levels {
                let px = n_sig.map_or(px, |s| bucket(px, s, mantissa.unwrap_or(1), side == 0));
                if let Some(last) = out.last_mut().filter(|l| l.0 == px) {
                    last.1 += sz;
                    last.2 += n;
                } else if out.len() == depth {
                    break;
                } else {
                    out.push((px, sz, n));
                }
            }
            out
        };
        [one(0), one(1)]
    }
}

/// The bucket of `px` for `n_sig` significant figures and `mantissa`: bids down, asks up.
fn bucket(px: i128, n_sig: u32, mantissa: u32, bid: bool) -> i128 {
    // The power of ten of the leading digit, in 10^-10 units: 10^(e + 10) <= px.
    let mut lead = 0u32;
    while 10i128.pow(lead + 1) <= px {
        lead += 1;
    }
    let exp = i64::from(lead) + 1 - i64::from(n_sig);
    if exp <= 0 {
        return px;
    }
    let width = i128::from(mantissa) * 10i128.pow(exp as u32);
    let down = px - px.rem_euclid(width);
    if bid || down == px { down } else { down + width }
}

/// One diffs line: block, the node's `local_time`, block time (ms) and events.
struct Line {
    height: u64,
    local_ns: i64,
    time_ms: i64,
    events: Vec<Value>,
}

/// Every raw book diffs line of `node_dir` in `mode`'s folder, in file order (hour files by date and hour).
fn diff_lines(node_dir: &Path, mode: &str) -> Vec<Line> {
    let root = node_dir.join(format!("node_raw_book_diffs_{mode}/hourly"));
    let mut files: Vec<(u32, u32, PathBuf)> = Vec::new();
    for day in std::fs::read_dir(&root).into_iter().flatten().flatten() {
        let date: u32 = day.file_name().to_string_lossy().parse().unwrap();
        for f in std::fs::read_dir(day.path()).unwrap().flatten() {
            files.push((date, f.file_name().to_string_lossy().parse().unwrap(), f.path()));
        }
    }
    files.sort();
    let mut out = Vec::new();
    for (_, _, path) in files {
        for text in std::fs::read_to_string(path).unwrap().lines() {
            let v: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
            out.push(Line {
                height: v["block_number"].as_u64().unwrap(),
                local_ns: nanos(v["local_time"].as_str().unwrap()),
                time_ms: nanos(v["block_time"].as_str().unwrap()) / 1_000_000,
                events: v["events"].as_array().unwrap().clone(),
            });
        }
    }
    out
}

/// One subscription: coin, variant and depth, as subscribed (audit `sub` = its place in this list, from 1).
#[derive(Clone, Debug)]
struct Shape {
    coin: String,
    variant: Variant,
    depth: usize,
}

fn shapes(coins: &[&str]) -> Vec<Shape> {
    let mut out = Vec::new();
    for coin in coins {
        for variant in VARIANTS {
            for depth in DEPTHS {
                out.push(Shape { coin: (*coin).to_string(), variant, depth });
            }
        }
    }
    out
}

fn subscription(s: &Shape) -> Value {
    let mut v = json!({"type": "l2Book", "coin": s.coin, "nLevels": s.depth});
    if let Some(n) = s.variant.0 {
        v["nSigFigs"] = n.into();
    }
    if let Some(m) = s.variant.1 {
        v["mantissa"] = m.into();
    }
    v
}

/// A frame's levels as exact integers, best first.
fn levels_of(frame: &Value) -> Levels {
    let side = |i: usize| {
        let levels = frame["data"]["levels"][i].as_array().unwrap();
        let level =
            |l: &Value| (dec(l["px"].as_str().unwrap()), dec(l["sz"].as_str().unwrap()), l["n"].as_u64().unwrap());
        levels.iter().map(level).collect()
    };
    [side(0), side(1)]
}

/// `coin`'s L2 of a shape, as a frame's levels are compared.
fn want(model: &Model, s: &Shape) -> Levels {
    model.l2(&s.coin, s.variant, s.depth)
}

/// Checks every l2Book frame of one audit connection (subscriptions `shapes`, in order) against the model moved
/// from `start` (at `start_height`) by `lines`; returns how many frames were checked.
fn check(frames: &[Value], shapes: &[Shape], start: &Value, start_height: u64, lines: &[Line]) -> usize {
    // Which states a frame may show: the line(s) of its height and node time, and the block's end (a frame built
    // from a snapshot the server took carries the block, not a line); the start state for the start height.
    let mut at_line: HashMap<(u64, i64), Vec<usize>> = HashMap::new();
    let mut block_end: HashMap<u64, usize> = HashMap::new();
    for (i, l) in lines.iter().enumerate().filter(|(_, l)| l.height > start_height) {
        at_line.entry((l.height, l.local_ns)).or_default().push(i);
        block_end.insert(l.height, i);
    }
    const START: usize = usize::MAX;
    let mut due: HashMap<usize, Vec<usize>> = HashMap::new();
    let data: Vec<usize> = (0..frames.len()).filter(|&i| channel(&frames[i]) == "l2Book").collect();
    for &f in &data {
        let audit = &frames[f]["audit"];
        let h = audit["height"].as_u64().unwrap_or_else(|| panic!("no audit height: {}", frames[f]));
        let mut when: Vec<usize> =
            at_line.get(&(h, audit["node_ns"].as_i64().unwrap_or(0))).cloned().unwrap_or_default();
        when.extend(block_end.get(&h));
        if h == start_height {
            when.push(START);
        }
        assert!(!when.is_empty(), "a frame of a height the files do not hold: {}", frames[f]);
        for w in when {
            due.entry(w).or_default().push(f);
        }
    }
    let mut model = Model::from_snapshot(start);
    let mut passed = vec![false; frames.len()];
    let mut why: HashMap<usize, String> = HashMap::new();
    let mut try_frames = |model: &Model, idx: usize, time: Option<i64>| {
        // One aggregation per coin and variant at this line, at the deepest depth; a shallower one is its prefix.
        let mut deepest: HashMap<(&str, Variant), Levels> = HashMap::new();
        for &f in due.get(&idx).into_iter().flatten() {
            let frame = &frames[f];
            let sub = frame["audit"]["sub"].as_u64().unwrap() as usize;
            let shape = &shapes[sub - 1];
            assert_eq!(frame["data"]["coin"], shape.coin.as_str(), "{shape:?}: {frame}");
            let full = deepest
                .entry((shape.coin.as_str(), shape.variant))
                .or_insert_with(|| model.l2(&shape.coin, shape.variant, DEPTHS[DEPTHS.len() - 1]));
            let expected = full.clone().map(|mut side| {
                side.truncate(shape.depth);
                side
            });
            let got = levels_of(frame);
            let time_ok = time.is_none_or(|t| frame["data"]["time"].as_i64() == Some(t));
            if got == expected && time_ok {
                passed[f] = true;
            } else if !passed[f] {
                let a = &frame["audit"];
                let (h, node, n) = (&a["height"], &a["node_ns"], &a["n"]);
                let at = if idx == START { "the start".to_string() } else { format!("line {idx}") };
                why.insert(f, format!("{shape:?} at {at} (height {h}, node_ns {node}, n {n}): got {got:?}, the oracle says {expected:?}"));
            }
        }
    };
    try_frames(&model, START, None);
    for (i, line) in lines.iter().enumerate().filter(|(_, l)| l.height > start_height) {
        for e in &line.events {
            model.apply(e);
        }
        try_frames(&model, i, Some(line.time_ms));
    }
    let failed: Vec<String> = data.iter().filter(|&&f| !passed[f]).map(|f| why[f].clone()).take(3).collect();
    assert!(
        failed.is_empty(),
        "{} of {} frames differ from the oracle, e.g.:\n{}",
        data.iter().filter(|&&f| !passed[f]).count(),
        data.len(),
        failed.join("\n")
    );
    data.len()
}

/// The oracle's L2 of every shape once every line is applied: what each subscription's newest frame must show.
fn final_levels(shapes: &[Shape], start: &Value, start_height: u64, lines: &[Line]) -> Vec<Levels> {
    let mut model = Model::from_snapshot(start);
    for line in lines.iter().filter(|l| l.height > start_height) {
        for e in &line.events {
            model.apply(e);
        }
    }
    shapes.iter().map(|s| want(&model, s)).collect()
}

/// Whether every subscription's newest l2Book frame shows its final levels: a closure that reads each frame once
/// (the collector asks after every frame, so reading them all each time would be quadratic in the run).
fn caught_up() -> impl Fn(&[Value], &Vec<Levels>) -> bool {
    // Frames read so far, and per subscription whether its newest frame shows the final levels.
    let seen = std::cell::RefCell::new((0, HashMap::<u64, bool>::new()));
    move |frames, last| {
        let (read, newest) = &mut *seen.borrow_mut();
        for f in frames[*read..].iter().filter(|f| channel(f) == "l2Book") {
            let sub = f["audit"]["sub"].as_u64().unwrap();
            newest.insert(sub, levels_of(f) == last[sub as usize - 1]);
        }
        *read = frames.len();
        newest.len() == last.len() && newest.values().all(|&ok| ok)
    }
}

/// Subscribes every shape on one `?audit=1` connection, then collects until `done` carries the final levels and
/// every subscription's newest frame shows them (Err: what came before the connection went quiet, and why).
async fn collect(
    addr: String,
    shapes: Vec<Shape>,
    mut done: tokio::sync::watch::Receiver<Option<Vec<Levels>>>,
    subscribed: tokio::sync::oneshot::Sender<()>,
) -> Result<Vec<Value>, (Vec<Value>, String)> {
    let mut ws = wsclient::raw::connect(&addr, "audit=1", None).await;
    for s in &shapes {
        wsclient::raw::subscribe(&mut ws, subscription(s)).await;
    }
    let _ = subscribed.send(());
    wsclient::raw::collect_until_complete_or_quiet(&mut ws, &mut done, caught_up()).await
}

/// Runs `collect` for `shapes` beside whatever feeds the server: `feed` runs once the subscriptions are sent and
/// returns the oracle's lines, start snapshot and start height once the node's files are whole.
fn run(addr: &str, shapes: &[Shape], feed: impl FnOnce() -> (Vec<Line>, Value, u64)) -> usize {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (tx, rx) = tokio::sync::watch::channel(None);
    let (sub_tx, sub_rx) = tokio::sync::oneshot::channel();
    let task = rt.spawn(collect(addr.to_string(), shapes.to_vec(), rx, sub_tx));
    rt.block_on(sub_rx).expect("subscribed");
    let (lines, start, start_height) = feed();
    tx.send(Some(final_levels(shapes, &start, start_height, &lines))).unwrap();
    // Frames that never reach the final levels are checked all the same: the failure then names the wrong ones.
    let (frames, incomplete) = match rt.block_on(task).expect("the collecting task") {
        Ok(frames) => (frames, None),
        Err((frames, why)) => (frames, Some(why)),
    };
    let acks = frames.iter().filter(|f| channel(f) == "subscriptionResponse").count();
    assert_eq!(acks, shapes.len(), "one ack per subscription");
    let checked = check(&frames, shapes, &start, start_height, &lines);
    assert!(incomplete.is_none(), "every frame equals the oracle, but the final levels never came: {incomplete:?}");
    checked
}

/// The mainnet capture written into a node dir as the node writes it, with the server following it from the
/// capture's snapshot: every BTC frame of every shape equals the oracle.
fn capture(mode: &str) {
    let Some(cap) = common::unpack() else { return };
    let dst = tempfile::tempdir().unwrap();
    let log = dst.path().join("serve.log");
    let snapshot = cap.snapshot.to_str().unwrap();
    #[rustfmt::skip]
    let args = ["serve", "--source", &format!("file:{}", dst.path().join("data").display()), "--mode", mode,
        "--snapshot-file", snapshot, "--info-url", "", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
        "--validate-interval", "0"];
    let mut server = procs::Proc::start(procs::HLBOOK, &args, &log);
    let addr = server.wait_line("hlbook listening on", Duration::from_secs(60));
    let start: Value = {
        let gz = flate2::read::GzDecoder::new(std::fs::File::open(&cap.snapshot).unwrap());
        serde_json::from_reader(std::io::BufReader::new(gz)).unwrap()
    };
    let start_height = start[0].as_u64().unwrap();
    let node_mode = if mode == "streaming" { hlbook::node::Mode::Streaming } else { hlbook::node::Mode::ByBlock };
    let checked = run(&addr, &shapes(&["BTC"]), || {
        common::write_capture(&cap.node_dir, &dst.path().join("data"), node_mode, None, Duration::from_millis(10));
        (diff_lines(&cap.node_dir, if mode == "streaming" { "streaming" } else { "by_block" }), start, start_height)
    });
    assert!(server.running(), "the server is still up");
    server.stop();
    eprintln!("{mode}: {checked} frames of the capture equal the oracle");
}

/// An hlsim market of four coins (a perp, a spot pair, a perp with a decimal tick, a builder-dex perp), the
/// server beside it: every frame of every coin and shape equals the oracle, started from a simulator snapshot
/// taken before the server.
fn simulated(mode: &str) {
    let out = tempfile::tempdir().unwrap();
    let data = out.path().join("data");
    let blocks: u64 = 150;
    let n = blocks.to_string();
    #[rustfmt::skip]
    let sim_args = ["--mode", mode, "--coins", "4", "--btc-orders", "2000", "--orders-per-coin", "300",
        "--block-ms", "60", "--rate", "0.3", "--reject-ratio", "1", "--blocks", &n];
    let sim_log = out.path().join("sim.log");
    let (mut sim, info_url) = procs::start_sim(&data, &sim_args, &sim_log);
    let start_file = out.path().join("start.json");
    // Written by the simulator's fileSnapshot, read here as JSON (the height is its first element).
    procs::sim_snapshot(&info_url, &start_file);
    let start: Value = serde_json::from_slice(&std::fs::read(&start_file).unwrap()).unwrap();
    let start_height = start[0].as_u64().unwrap();
    let coins: Vec<String> = start[1].as_array().unwrap().iter().map(|b| b[0].as_str().unwrap().to_string()).collect();
    let coins: Vec<&str> = coins.iter().map(String::as_str).collect();
    let mut server = procs::start_serve(
        &data,
        &info_url,
        &out.path().join("snaps"),
        &["--mode", mode],
        &out.path().join("serve.log"),
    );
    let addr = server.wait_line("hlbook listening on", Duration::from_secs(60));
    let base = format!("http://{addr}");
    procs::wait_health(&base, Duration::from_secs(60), |h| h["state"] == "live");
    let checked = run(&addr, &shapes(&coins), || {
        // The simulator says when its files are whole; the oracle reads them only then (a block the server has
        // read may still be being written, and the oracle would stop part way through it).
        procs::nats::wait_log(&sim_log, "all blocks produced", Duration::from_secs(120));
        (diff_lines(&data, if mode == "streaming" { "streaming" } else { "by_block" }), start, start_height)
    });
    assert!(server.running(), "the server is still up");
    sim.stop();
    server.stop();
    eprintln!("hlsim {mode}: {checked} frames of {} coins equal the oracle", coins.len());
}

#[test]
fn capture_by_block_every_frame_equals_the_plain_oracle() {
    capture("by-block");
}

#[test]
fn capture_streaming_every_frame_equals_the_plain_oracle() {
    capture("streaming");
}

#[test]
fn hlsim_by_block_every_frame_equals_the_plain_oracle() {
    simulated("by-block");
}

#[test]
fn hlsim_streaming_every_frame_equals_the_plain_oracle() {
    simulated("streaming");
}

#[test]
fn the_plain_aggregation_follows_the_documented_rules() {
    // 81307.5 at 2 significant figures: a bucket 1000 wide; bids down, asks up.
    assert_eq!(bucket(dec("81307.5"), 2, 1, true), dec("81000"));
    assert_eq!(bucket(dec("81307.5"), 2, 1, false), dec("82000"));
    // At 5 with mantissa 5: 5 wide; a price on a boundary stays.
    assert_eq!(bucket(dec("81307.5"), 5, 5, false), dec("81310"));
    assert_eq!(bucket(dec("81310"), 5, 5, false), dec("81310"));
    // The width changes across a power of ten, and below 1 it counts from the leading digit.
    assert_eq!(bucket(dec("99.95"), 3, 1, true), dec("99.9"));
    assert_eq!(bucket(dec("100.05"), 3, 1, true), dec("100"));
    assert_eq!(bucket(dec("0.012345"), 2, 1, false), dec("0.013"));
    assert_eq!(nanos("1970-01-02T00:00:01.5"), 86_401_500_000_000);
}
