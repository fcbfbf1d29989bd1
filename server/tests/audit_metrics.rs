//! What the audit exports, read the way its consumers read it: `/metrics` through a Prometheus text-format parser
//! (every sample, a latency histogram per stage, the state gauge, the counters), the Grafana dashboard's queries
//! against a real scrape, the `audit` object on `/ws?audit=1` frames and nowhere else, and the server's log: one
//! line per health state change, JSON with `format = "json"`, nothing per block at info level.

mod auditkit;
mod livefeed;
mod procs;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use auditkit::{Reader, collect, connect, send, subscribe};
use hlbook::audit::STAGES;
use livefeed::LiveRig;
use procs::{get_bytes, get_json};
use prometheus_parse::{LineInfo, Scrape, Value as Prom};
use serde_json::{Value, json};

fn scrape(base: &str) -> String {
    String::from_utf8(get_bytes(&format!("{base}/metrics")).expect("/metrics answers")).expect("UTF-8")
}

/// Every line is a comment the format knows or a sample whose value is a number; returns the sample names.
fn check_lines(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        if let Some(c) = line.strip_prefix('#') {
            let word = c.split_whitespace().next().unwrap_or("");
            assert!(matches!(word, "HELP" | "TYPE" | "UNIT" | "EOF"), "unknown comment line: {line}");
            continue;
        }
        match LineInfo::parse(line) {
            LineInfo::Sample { metric_name, value, .. } => {
                assert!(value.parse::<f64>().is_ok(), "value of {line:?} is not a number");
                names.insert(metric_name.to_string());
            }
            other => panic!("{line:?} is not a sample: {other:?}"),
        }
    }
    names
}

fn value(scrape: &Scrape, metric: &str, label: Option<(&str, &str)>) -> f64 {
    value_of(scrape, metric, label.as_slice())
}

/// The value of `metric`'s sample with every one of `labels`.
fn value_of(scrape: &Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    let s = scrape
        .samples
        .iter()
        .find(|s| s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(v)))
        .unwrap_or_else(|| panic!("no sample {metric} {labels:?}"));
    match s.value {
        Prom::Counter(v) | Prom::Gauge(v) | Prom::Untyped(v) => v,
        _ => panic!("{metric} is not a single value"),
    }
}

/// The JSON log lines (with `format = "json"` every stderr line is one).
fn log_lines(feed: &LiveRig) -> Vec<Value> {
    feed.server_log()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("log line is not JSON ({e}): {l}")))
        .collect()
}

fn wait_blocks(base: &str, more: u64) {
    let start = get_json(&format!("{base}/health")).expect("health")["height"].as_u64().unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    while get_json(&format!("{base}/health")).expect("health")["height"].as_u64().unwrap() < start + more {
        assert!(Instant::now() < deadline, "fewer than {more} blocks in 90 s");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn logs_state_changes_once_and_blocks_never() {
    let feed = LiveRig::start("\n[log]\nformat = \"json\"\n");
    let lines = log_lines(&feed);
    let changes: Vec<&Value> = lines.iter().filter(|l| l["fields"]["message"] == "health state changed").collect();
    assert!(
        changes.iter().any(|l| l["fields"]["to"] == "live" && l["level"] == "INFO"),
        "no transition to live in the log:\n{}",
        feed.server_log()
    );
    // Each line is a real change, and they chain: starting -> … -> live.
    assert_eq!(changes[0]["fields"]["from"], "starting", "{changes:?}");
    for c in &changes {
        assert_ne!(c["fields"]["from"], c["fields"]["to"], "{c}");
    }
    for w in changes.windows(2) {
        assert_eq!(w[0]["fields"]["to"], w[1]["fields"]["from"], "{changes:?}");
    }
    let info = |lines: &[Value]| lines.iter().filter(|l| l["level"] == "INFO").count();
    // The history store says once how its start-up went (backfilling, catching up, live), and the misc_events
    // reader whether it reads the stream, each on its own thread and after the books are live: counted from there.
    let deadline = Instant::now() + Duration::from_secs(90);
    let said = |lines: &[Value], what: &str| lines.iter().any(|l| l["fields"]["message"].as_str() == Some(what));
    let started = |lines: &[Value]| {
        said(lines, "history store: live")
            && (said(lines, "reading misc_events")
                || said(lines, "no misc_events: userFundings and ledger updates get no events"))
    };
    let mut lines = lines;
    while !started(&lines) {
        assert!(
            Instant::now() < deadline,
            "the store or misc reader never said how it started:\n{}",
            feed.server_log()
        );
        std::thread::sleep(Duration::from_millis(100));
        lines = log_lines(&feed);
    }
    let before = info(&lines);
    wait_blocks(&feed.base, 50);
    let after = log_lines(&feed);
    assert_eq!(info(&after), before, "info lines grew with blocks:\n{}", feed.server_log());
}

#[test]
#[allow(clippy::float_arithmetic)]
fn metrics_parse_and_the_dashboard_asks_only_for_them() {
    let feed = LiveRig::start("");
    // Something to send to, so the write stages have samples too.
    let reader = Reader::start(&feed.ws_url(), &[json!({"type": "allMids"}), json!({"type": "l2Book", "coin": "BTC"})]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let text = loop {
        let text = scrape(&feed.admin);
        let written = text
            .lines()
            .find(|l| l.starts_with("hlbook_stage_latency_seconds_count{stage=\"block_to_last_write\",line=\"diffs\"}"))
            .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .unwrap_or(0);
        if written >= 10 {
            break text;
        }
        assert!(Instant::now() < deadline, "no written blocks in the histograms within 60 s:\n{text}");
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(reader.finish() > 0);
    let names = check_lines(&text);
    let parsed = Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).expect("parses");

    // Stages are kept per source line; the l2Book and allMids frames the reader gets come from the diffs line.
    for stage in STAGES {
        let labels = [("stage", stage), ("line", "diffs")];
        let h = parsed
            .samples
            .iter()
            .find(|s| {
                s.metric == "hlbook_stage_latency_seconds" && labels.iter().all(|(k, v)| s.labels.get(k) == Some(v))
            })
            .unwrap_or_else(|| panic!("no histogram for {stage}"));
        let Prom::Histogram(buckets) = &h.value else { panic!("{stage}: not a histogram: {h:?}") };
        assert!(buckets.len() > 10, "{stage}: {buckets:?}");
        assert!(buckets.windows(2).all(|w| w[0].less_than < w[1].less_than && w[0].count <= w[1].count), "{stage}");
        let last = buckets.last().unwrap();
        assert!(last.less_than.is_infinite(), "{stage}: no +Inf bucket");
        let count = value_of(&parsed, "hlbook_stage_latency_seconds_count", &labels);
        assert_eq!(last.count, count, "{stage}: +Inf bucket holds every sample");
        assert!(count > 0.0, "{stage}: no samples");
        assert!(value_of(&parsed, "hlbook_stage_latency_seconds_sum", &labels) > 0.0);
    }
    assert_eq!(value(&parsed, "hlbook_state", Some(("state", "live"))), 1.0);
    for s in ["starting", "catching_up", "stale", "resyncing"] {
        assert_eq!(value(&parsed, "hlbook_state", Some(("state", s))), 0.0, "{s}");
    }
    assert!(value(&parsed, "hlbook_height", None) > 0.0);
    for c in [
        "hlbook_ingest_blocks_applied_total",
        "hlbook_ingest_lines_total",
        "hlbook_publish_passes_total",
        "hlbook_ws_frames_sent_total",
        "hlbook_ws_bytes_sent_total",
        "hlbook_ws_connections_accepted_total",
    ] {
        assert!(value(&parsed, c, None) > 0.0, "{c} is zero");
    }
    for c in ["hlbook_ingest_gaps_total", "hlbook_ingest_malformed_lines_total", "hlbook_ws_overflows_total"] {
        assert_eq!(value(&parsed, c, None), 0.0, "{c}");
    }
    let counters: Vec<&String> = names.iter().filter(|n| n.ends_with("_total")).collect();
    assert!(counters.len() >= 30, "{counters:?}");
    for c in counters {
        let family = c.trim_end_matches("_total");
        assert!(text.contains(&format!("# TYPE {family} counter\n")), "{c} is not typed a counter");
    }

    // Every metric the dashboard queries is in the scrape.
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/grafana/hlbook.json");
    let dash: Value = serde_json::from_slice(&std::fs::read(&path).expect("deploy/grafana/hlbook.json")).unwrap();
    let mut exprs = Vec::new();
    exprs_in(&dash, &mut exprs);
    assert!(exprs.len() >= 10, "too few queries: {exprs:?}");
    let mut asked = BTreeSet::new();
    for e in &exprs {
        let found = metric_names(e);
        assert!(!found.is_empty(), "query names no hlbook metric: {e}");
        asked.extend(found);
    }
    // The relay's own metrics and nats-server's (through the relay) are checked against a running relay
    // (server/tests/nats_recipe.rs).
    let relay = |m: &&String| m.starts_with("hlbook_relay_") || m.starts_with("hlbook_nats_server_");
    let missing: Vec<&String> = asked.iter().filter(|m| !relay(m) && !names.contains(*m)).collect();
    assert!(missing.is_empty(), "the dashboard asks for metrics /metrics does not have: {missing:?}");
    for must in ["hlbook_stage_latency_seconds_bucket", "hlbook_ingest_blocks_applied_total", "hlbook_state"] {
        assert!(asked.contains(must), "the dashboard does not chart {must}");
    }
}

/// Every `expr` string in a dashboard (panels, rows' panels, templating queries).
fn exprs_in(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("expr", Value::String(s)) => out.push(s.clone()),
                    _ => exprs_in(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| exprs_in(x, out)),
        _ => {}
    }
}

/// The `hlbook_…` identifiers in a PromQL expression.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = expr;
    while let Some(at) = rest.find("hlbook_") {
        let tail = &rest[at..];
        let end = tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(tail.len());
        out.insert(tail[..end].to_string());
        rest = &tail[end..];
    }
    out
}

const AUDIT_KEYS: [&str; 7] = ["height", "block_ns", "node_ns", "read_ns", "applied_ns", "published_ns", "sent_ns"];
const DATA: [&str; 5] = ["l2Book", "trades", "bbo", "allMids", "l4Book"];

fn subscriptions() -> Vec<Value> {
    vec![
        json!({"type": "l2Book", "coin": "BTC"}),
        json!({"type": "bbo", "coin": "BTC"}),
        json!({"type": "trades", "coin": "BTC"}),
        json!({"type": "trades", "coin": "ETH"}),
        json!({"type": "allMids"}),
        json!({"type": "l4Book", "coin": "ETH"}),
    ]
}

/// Enough of every data channel (and the acks and the pong) to judge.
fn enough(got: &[Value]) -> bool {
    let n = |ch: &str| got.iter().filter(|m| m["channel"] == ch).count();
    n("subscriptionResponse") == 6 && n("pong") == 1 && DATA.iter().all(|c| n(c) >= 3)
}

#[test]
fn audit_fields_come_only_when_asked() {
    let feed = LiveRig::start("");
    let url = feed.ws_url();
    let (mut audited, mut plain) = (connect(&format!("{url}?audit=1")), connect(&url));
    for ws in [&mut audited, &mut plain] {
        for s in subscriptions() {
            subscribe(ws, s);
        }
        send(ws, &json!({"method": "ping"}));
    }
    let a = collect(&mut audited, Duration::from_secs(60), enough);
    let p = collect(&mut plain, Duration::from_secs(60), enough);
    let count = |got: &[Value]| -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for v in got {
            *m.entry(v["channel"].as_str().unwrap_or("?").to_string()).or_default() += 1;
        }
        m
    };
    assert!(enough(&a), "audited connection got only {:?}", count(&a));
    assert!(enough(&p), "plain connection got only {:?}", count(&p));

    for m in &p {
        assert!(m.get("audit").is_none(), "plain connection got audit fields: {m}");
    }
    let mut checked = BTreeMap::<&str, usize>::new();
    for m in &a {
        let channel = m["channel"].as_str().unwrap();
        if !DATA.contains(&channel) {
            assert!(m.get("audit").is_none(), "{channel} message has audit fields: {m}");
            continue;
        }
        let audit = m["audit"].as_object().unwrap_or_else(|| panic!("{channel} frame without audit: {m}"));
        let keys: Vec<&str> = audit.keys().map(String::as_str).collect();
        // The stage stamps, then the subscription's chain (docs/api.md).
        assert_eq!(keys[..AUDIT_KEYS.len()], AUDIT_KEYS, "{m}");
        let chain = &keys[AUDIT_KEYS.len()..];
        assert!(chain.starts_with(&["sub", "n"]), "{m}");
        assert!(chain.iter().all(|k| ["sub", "n", "prev", "snapshot", "conflated", "lost"].contains(k)), "{m}");
        let t: Vec<i64> = AUDIT_KEYS.iter().map(|k| audit[*k].as_i64().expect("an integer")).collect();
        assert!(t.iter().all(|&x| x > 0), "{channel}: a stage time is missing: {audit:?}");
        // All stamped with this machine's clock: block ≤ node write ≤ read ≤ applied ≤ published ≤ sent.
        assert!(t[1..].windows(2).all(|w| w[0] <= w[1]), "{channel}: stage times out of order: {audit:?}");
        *checked.entry(channel).or_default() += 1;
    }
    assert_eq!(checked.len(), DATA.len(), "{checked:?}");
}
