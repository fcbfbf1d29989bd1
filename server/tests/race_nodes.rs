//! Racing two nodes, with the real binaries: one `hlsim` writes the same blocks as two nodes into two data dirs
//! (`--out` and `--node`), each with its own faults, and `hlbook serve` reads both (`--source file:A --source
//! file:B`, or NATS for one of them). Whatever one node does (pause 10 s, drop or corrupt a line, write events
//! that differ, lose its NATS publisher), the books must stay `live` on the other one, never resync, apply every block
//! once, and end equal to the simulator's own books order by order. A block that no node delivers (both lose it,
//! or one stopped and the other loses it) makes the books resync, go live again and end equal all the same.

mod procs;

use std::path::{Path, PathBuf};
use std::time::Duration;

use procs::{
    CHECKED_MARKET, Proc, assert_same_books, books_from_snapshot, counter, get_bytes, get_json, sim_books_at,
    start_serve, start_sim, wait_health,
};

const START: u64 = 1_000_000_000;

struct Run {
    sim: Proc,
    server: Proc,
    /// The admin listener: `/health` with the counters and sources, `/status`, `/l4snapshot`.
    admin: String,
    info_url: String,
    tmp: tempfile::TempDir,
    last: u64,
}

impl Run {
    fn dir(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    fn serve_log(&self) -> String {
        std::fs::read_to_string(self.dir("serve.log")).unwrap_or_default()
    }
}

/// Starts the simulator for `blocks` blocks as node `a` (with `sim_extra` flags) and node `b` (`--node` spec
/// `b_spec` after its dir), and the server reading `sources` (`{a}` and `{b}` are replaced by the dirs).
fn start(blocks: u64, sim_extra: &[&str], b_spec: &str, sources: &[&str], serve_extra: &[&str]) -> Run {
    start_in(None, blocks, sim_extra, b_spec, sources, serve_extra)
}

/// `start`, with node b's data dir given (or in the run's temp dir).
fn start_in(b: Option<&Path>, blocks: u64, sim_extra: &[&str], b_spec: &str, sources: &[&str], extra: &[&str]) -> Run {
    let serve_extra = extra;
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    let b = b.map_or_else(|| tmp.path().join("b"), Path::to_path_buf);
    let node_b = format!("{}{b_spec}", b.display());
    let n = blocks.to_string();
    let mut args = vec!["--node", &node_b, "--blocks", &n];
    args.extend_from_slice(&CHECKED_MARKET);
    args.extend_from_slice(sim_extra);
    let (sim, info_url) = start_sim(&a, &args, &tmp.path().join("sim.log"));
    let sources: Vec<String> =
        sources.iter().map(|s| s.replace("{a}", a.to_str().unwrap()).replace("{b}", b.to_str().unwrap())).collect();
    let mut extra: Vec<&str> = Vec::new();
    for s in &sources {
        extra.extend(["--source", s]);
    }
    extra.extend_from_slice(serve_extra);
    let server = start_serve(&a, &info_url, &tmp.path().join("snapshots"), &extra, &tmp.path().join("serve.log"));
    server.wait_line("hlbook listening on", Duration::from_secs(30));
    let admin = procs::admin_base(&server);
    Run { sim, server, admin, info_url, tmp, last: START + blocks - 1 }
}

/// Waits until the server has applied `until`, then returns every health state change the server logged after
/// it first went live. The server logs each change once, when it happens (stale included: it is checked after every
/// block and every idle poll), so this misses none, where sampling `/health` could.
fn changes_after_live(run: &Run, until: u64) -> Vec<String> {
    wait_health(&run.admin, Duration::from_secs(180), |h| h["height"].as_u64() >= Some(until));
    let log = run.serve_log();
    let changes = log.lines().filter(|l| l.contains("health state changed"));
    let mut after = changes.skip_while(|l| !l.contains("to=live"));
    assert!(after.next().is_some(), "the server never went live:\n{log}");
    after.map(str::to_string).collect()
}

/// Waits for the last block, compares every order with the simulator's books, and checks that every block after
/// the bootstrap snapshot was applied exactly once. Returns the final `/health`.
fn finish(mut run: Run) -> serde_json::Value {
    let theirs = sim_books_at(&run.info_url, &run.dir(""), run.last);
    let h = wait_health(&run.admin, Duration::from_secs(60), |h| h["height"].as_u64() >= Some(run.last));
    let ours = books_from_snapshot(&get_bytes(&format!("{}/l4snapshot", run.admin)).unwrap());
    assert_eq!(ours.height(), run.last);
    assert_same_books(&ours, &theirs);
    let boot = bootstrap_height(&run.serve_log());
    assert_eq!(counter(&h, "blocks_applied"), run.last - boot, "every block after {boot} applied once: {h}");
    for zero in ["gaps", "broken_blocks", "blocks_already_applied"] {
        assert_eq!(counter(&h, zero), 0, "{zero}: {h}");
    }
    assert_eq!(counter(&h, "books_loaded"), 1, "the bootstrap only: {h}");
    assert!(run.server.running(), "the server never exits on a failing source");
    assert!(run.server.stop().success(), "SIGTERM exits 0");
    run.sim.stop();
    h
}

/// The height of the snapshot the server bootstrapped from, from its log.
fn bootstrap_height(log: &str) -> u64 {
    let at = log.find("snapshot at height ").expect("the log names the bootstrap snapshot");
    let digits: String = log[at + 19..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap()
}

/// The `/health` entry of the source whose name ends with `suffix`.
fn source<'a>(h: &'a serde_json::Value, suffix: &str) -> &'a serde_json::Value {
    let list = h["sources"].as_array().expect("sources");
    list.iter().find(|s| s["name"].as_str().is_some_and(|n| n.ends_with(suffix))).unwrap_or_else(|| panic!("{h}"))
}

fn n(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

#[test]
fn one_node_pausing_10s_never_stops_the_books() {
    let pause_at = (START + 60).to_string();
    let spec = format!(",pause_at={pause_at},pause_secs=10");
    let run = start(360, &[], &spec, &["file:{a}", "file:{b}"], &["--stale-after", "2"]);
    let changes = changes_after_live(&run, START + 340);
    assert!(changes.is_empty(), "live throughout, but: {changes:?}");
    // Node b wakes after its pause and writes its backlog: its lines are compared with the applied ones.
    let h = wait_health(&run.admin, Duration::from_secs(60), |h| n(&source(h, "/b")["height"]) >= START + 359);
    let b = source(&h, "/b");
    assert!(n(&b["copies"]) > 0 && n(&b["disagreements"]) == 0, "{b}");
    let a = source(&h, "/a");
    assert!(n(&a["wins"]["statuses"]) > 0, "{a}");
    let h = finish(run);
    assert_eq!(counter(&h, "disagreements"), 0, "{h}");
}

#[test]
fn a_dropped_and_a_corrupt_line_come_from_the_other_node() {
    // Node a is the fast one and loses a diffs line and garbles a status line; node b writes 30 ms later.
    let (drop, corrupt) = ((START + 50).to_string(), (START + 70).to_string());
    let run =
        start(150, &["--drop-block", &drop, "--corrupt-at", &corrupt], ",delay=30", &["file:{a}", "file:{b}"], &[]);
    // Every line is won once the last block is applied: the scrape's wins are final.
    wait_health(&run.admin, Duration::from_secs(60), |h| h["height"].as_u64() >= Some(run.last));
    let metrics = scrape(&run.admin);
    let h = finish(run);
    assert_eq!(counter(&h, "malformed_lines"), 1, "{h}");
    let (a, b) = (source(&h, "/a"), source(&h, "/b"));
    assert_eq!(n(&a["malformed_lines"]), 1, "{a}");
    assert!(n(&b["wins"]["diffs"]) >= 1 && n(&b["wins"]["statuses"]) >= 1, "b filled both holes: {b}");
    assert_eq!(counter(&h, "disagreements"), 0, "{h}");
    // /metrics says the same per source: a won the rest, each by about b's 30 ms; b's wins had no copy to time.
    for (who, entry) in [("/a", a), ("/b", b)] {
        for line in ["fills", "diffs", "statuses"] {
            let wins = metric(&metrics, "hlbook_source_wins_total", who, line);
            assert_eq!(wins, Some(n(&entry["wins"][line]) as f64), "{who} {line}:\n{metrics}");
        }
    }
    let led = metric(&metrics, "hlbook_source_lead_seconds_count", "/a", "statuses").unwrap();
    assert!(led > 100.0, "a's leads are timed:\n{metrics}");
    let b_led = metric(&metrics, "hlbook_source_lead_seconds_count", "/b", "diffs");
    assert_eq!(b_led, Some(0.0), "b's histogram is there, empty:\n{metrics}");
}

#[test]
fn two_nodes_drawing_from_the_capture_each_win_and_lead() {
    // Independent draws of the mainnet node lag per node and block: each node is ahead on some blocks.
    let run = start(150, &["--write-delay", "capture"], ",delay=capture", &["file:{a}", "file:{b}"], &[]);
    wait_health(&run.admin, Duration::from_secs(60), |h| h["height"].as_u64() >= Some(run.last));
    // Wins are final once the last block is applied; a copy (and so a lead) may still come in between the two.
    let status = get_json(&format!("{}/status", run.admin)).expect("status answers");
    let metrics = scrape(&run.admin);
    for who in ["/a", "/b"] {
        let wins = metric(&metrics, "hlbook_source_wins_total", who, "diffs").unwrap();
        let leads = metric(&metrics, "hlbook_source_lead_seconds_count", who, "diffs").unwrap();
        assert!(wins > 0.0 && leads > 0.0, "{who} won and led some diffs lines:\n{metrics}");
        assert!(leads <= wins, "one lead per won line at most: {who}");
        let sum = metric(&metrics, "hlbook_source_lead_seconds_sum", who, "diffs").unwrap();
        assert!(sum > 0.0, "{who}");
        let st = source(&status, who);
        assert_eq!(n(&st["wins"]["diffs"]) as f64, wins, "/status agrees: {st}");
        assert!(n(&st["lead_ms"]["diffs"]["count"]) as f64 <= leads, "/status agrees: {st}");
    }
    let race = status["race"].as_array().expect("the last blocks' race");
    assert!(!race.is_empty() && race.iter().all(|b| b["diffs"]["source"].is_string()), "{status}");
    let h = finish(run);
    assert_eq!(counter(&h, "disagreements"), 0, "{h}");
}

fn scrape(admin: &str) -> String {
    String::from_utf8(get_bytes(&format!("{admin}/metrics")).expect("/metrics answers")).expect("UTF-8")
}

/// The value of `name{source="…suffix",line="line"}` in a scrape.
fn metric(text: &str, name: &str, suffix: &str, line: &str) -> Option<f64> {
    let want_line = format!("line=\"{line}\"");
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .find(|l| {
            let labels = &l[..l.find('}').unwrap_or(l.len())];
            labels.contains(&want_line)
                && labels
                    .split("source=\"")
                    .nth(1)
                    .is_some_and(|s| s.split('"').next().is_some_and(|s| s.ends_with(suffix)))
        })
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

#[test]
fn differing_events_name_both_nodes_and_are_repaired_at_once() {
    // Validation once an hour: the repair must come from the disagreement itself.
    differing_events_with_validation_every("3600");
}

#[test]
fn differing_events_are_repaired_with_periodic_validation_off() {
    differing_events_with_validation_every("0");
}

/// Node a, the faster one, writes one diffs line with a price changed: its wrong copy is the one applied. Both nodes
/// are named, neither blamed, and the coins repaired from a snapshot however seldom (if ever) validation runs.
fn differing_events_with_validation_every(secs: &str) {
    let differ = START + 60;
    let d = differ.to_string();
    let validate = ["--validate-interval", secs];
    let run = start(200, &["--differ-at", &d], ",delay=30", &["file:{a}", "file:{b}"], &validate);
    let h = wait_health(&run.admin, Duration::from_secs(60), |h| counter(h, "repairs") >= 1);
    assert_eq!(counter(&h, "disagreements"), 1, "{h}");
    for who in ["/a", "/b"] {
        assert_eq!(n(&source(&h, who)["disagreements"]), 1, "both counted, neither blamed: {h}");
    }
    let (a, b) = (format!("file:{}", run.dir("a").display()), format!("file:{}", run.dir("b").display()));
    let status = get_json(&format!("{}/status", run.admin)).expect("status answers");
    let seen = &status["disagreements"][0];
    assert_eq!((seen["height"].as_u64(), seen["line"].as_str()), (Some(differ), Some("diffs")), "{status}");
    let mut named: Vec<&str> = seen["sources"].as_array().unwrap().iter().filter_map(|s| s.as_str()).collect();
    named.sort_unstable();
    assert_eq!(named, [a.as_str(), b.as_str()], "{status}");
    let log = run.serve_log();
    let line = log.lines().find(|l| l.contains("two sources wrote this line differently")).expect("logged");
    assert!(line.contains(&a) && line.contains(&b) && line.contains("neither is blamed"), "{line}");
    // Every order of every coin equals the simulator's at the end.
    finish(run);
}

/// The end of a run in which a block was lost by every source: the books resynced once after the bootstrap, went
/// live again, applied no block twice, and end equal to the simulator's order by order.
fn finish_after_losing(mut run: Run, lost: u64) {
    let h = wait_health(&run.admin, Duration::from_secs(90), |h| {
        counter(h, "books_loaded") >= 2 && h["state"] == "live" && h["height"].as_u64() > Some(lost)
    });
    assert_eq!(counter(&h, "broken_blocks"), 1, "{h}");
    let theirs = sim_books_at(&run.info_url, &run.dir(""), run.last);
    let h = wait_health(&run.admin, Duration::from_secs(60), |h| h["height"].as_u64() >= Some(run.last));
    let ours = books_from_snapshot(&get_bytes(&format!("{}/l4snapshot", run.admin)).unwrap());
    assert_eq!(ours.height(), run.last);
    assert_same_books(&ours, &theirs);
    for zero in ["gaps", "blocks_already_applied", "inconsistencies"] {
        assert_eq!(counter(&h, zero), 0, "{zero}: {h}");
    }
    assert_eq!(counter(&h, "books_loaded"), 2, "the bootstrap and one resync: {h}");
    assert!(run.serve_log().contains(&format!("block {lost} lost its line")), "the log names the lost block");
    assert!(run.server.running(), "the server never exits on a lost block");
    assert!(run.server.stop().success(), "SIGTERM exits 0");
    run.sim.stop();
}

#[test]
fn a_block_both_nodes_lose_resyncs_while_racing() {
    let lost = START + 80;
    let l = lost.to_string();
    let b_spec = format!(",delay=30,drop_block={l},drop_stream=all");
    let run = start(400, &["--drop-block", &l, "--drop-stream", "all"], &b_spec, &["file:{a}", "file:{b}"], &[]);
    finish_after_losing(run, lost);
}

#[test]
fn one_node_stopped_for_good_and_the_other_losing_a_block_resyncs_after_the_grace() {
    // Node b stops writing for good at block START + 40; node a, alone from there, loses all three lines of a later
    // block. Nobody else can deliver them: the block is given up after one grace (not one per missing line), the
    // books resync from a snapshot and go on with node a.
    let (stop, lost) = (START + 40, START + 80);
    let l = lost.to_string();
    let b_spec = format!(",pause_at={stop},pause_secs=3600");
    let run = start(400, &["--drop-block", &l, "--drop-stream", "all"], &b_spec, &["file:{a}", "file:{b}"], &[]);
    finish_after_losing(run, lost);
}

#[test]
fn a_killed_publisher_beside_a_local_node_changes_nothing() {
    if !procs::nats::available_or_skip() {
        return;
    }
    let side = tempfile::tempdir().unwrap();
    let nats = procs::nats::NatsServer::start(&side.path().join("nats"), "");
    let config = procs::nats::relay_config(side.path(), "");
    // Node b (published into NATS) is the faster one, so NATS carries most lines until its publisher dies.
    let run_dir = tempfile::tempdir().unwrap();
    let b = run_dir.path().join("published");
    let publisher =
        |n: u32| procs::nats::publisher(&nats.url(), &b, "by-block", &config, &side.path().join(format!("pub{n}.log")));
    let mut pub1 = publisher(1);
    let src = nats.source();
    let run = start_in(Some(&b), 300, &["--write-delay", "20"], "", &["file:{a}", &src], &[]);
    wait_health(&run.admin, Duration::from_secs(60), |h| h["state"] == "live");
    let mid = START + 120;
    wait_health(&run.admin, Duration::from_secs(60), |h| h["height"].as_u64() >= Some(mid));
    pub1.kill();
    wait_health(&run.admin, Duration::from_secs(60), |h| h["height"].as_u64() >= Some(mid + 40));
    let _pub2 = publisher(2);
    let changes = changes_after_live(&run, START + 290);
    assert!(changes.is_empty(), "live throughout, but: {changes:?}");
    let h = finish(run);
    let published = source(&h, "/HL");
    assert!(n(&published["wins"]["statuses"]) > 0, "{published}");
    assert!(counter(&h, "disagreements") == 0, "{h}");
}

#[test]
fn each_source_says_what_it_is_missing() {
    let side = tempfile::tempdir().unwrap();
    let absent = side.path().join("absent");
    // A node that writes streaming output, read as by-block: its folders say so.
    let streaming = side.path().join("streaming");
    std::fs::create_dir_all(streaming.join("node_fills_streaming")).unwrap();
    std::fs::create_dir_all(streaming.join("node_raw_book_diffs_by_block")).unwrap();
    // A NATS server nobody listens for (a port just given back).
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let nats = format!("nats://127.0.0.1:{port}/HL");
    let sources = [format!("file:{}", absent.display()), format!("file:{}", streaming.display()), nats.clone()];
    let mut all = vec!["file:{a}"];
    all.extend(sources.iter().map(String::as_str));
    let run = start(400, &[], "", &all, &[]);
    let h = wait_health(&run.admin, Duration::from_secs(60), |h| {
        h["state"] == "live" && h["sources"].as_array().is_some_and(|l| l[1..].iter().all(|s| s["missing"].is_string()))
    });
    let missing = |suffix: &str| source(&h, suffix)["missing"].as_str().unwrap().to_string();
    assert!(missing("/absent").contains("does not exist"), "{h}");
    let why = missing("/streaming");
    assert!(why.contains("--write-order-statuses") && why.contains("set --mode streaming"), "{why}");
    assert!(!why.contains("--write-raw-book-diffs"), "the diffs folder is there: {why}");
    assert!(missing(&format!("{port}/HL")).contains("connecting to NATS"), "{h}");
    assert_eq!(source(&h, "/absent")["state"], "unavailable", "{h}");
    assert_eq!(source(&h, "/a")["state"], "reading", "{h}");
    let log = run.serve_log();
    let said = format!("data dir {} does not exist", absent.display());
    assert_eq!(log.matches(&said).count(), 1, "said once in the log:\n{log}");
}
