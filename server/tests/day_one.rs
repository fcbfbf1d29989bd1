//! Issue #42's "day one bot" per client family: the official Python SDK, ccxt (Python), @nktkas/hyperliquid and
//! hyperliquid_rust_sdk, each pointed at `hlbook serve` with only the URL changed, make every read (info) call the
//! library offers (server/tests/clients/day_one_*: one JSON line per call). hlbook runs beside `hlsim`, whose
//! market freezes after `BLOCKS` blocks while its info servers keep answering, so the truth holds still: the
//! simulator's node info server (`--info-listen`), its public-API stand-in (`--exchange-listen`, used as
//! `server.upstream_info_url`) and the fills it wrote (read here, not through hlbook's parsers).
//!
//! What every bot must show, per hlbook's info contract (docs/api.md):
//! - no crash: every failure is the library's own documented error type (Python SDK ClientError/ServerError, ccxt
//!   BaseError, nktkas HyperliquidError, the Rust SDK's Error), never an exception from inside the library;
//! - the types hlbook serves and the ones it passes to the node answer, and what they answer is the truth:
//!   allMids against the exchange stand-in's (or the simulator's books'), userFills against the simulator's fill
//!   files, openOrders and clearinghouseState against the node info server's own answers;
//! - every other type is refused with a reason: without an upstream the text names `server.upstream_info_url`.
//!
//! The Rust SDK only reaches http://localhost:3001, so its server also listens on 127.0.0.1:3001 (the simulator's
//! info servers are on ports of their own). Libraries are found as in sdk_clients.rs (`make clients`,
//! `HLBOOK_CLIENTS`; missing ones skip, or fail under `HLBOOK_REQUIRE_CLIENTS=1`).

mod livefeed;
mod procs;
mod sdkrig;
mod wsclient;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use procs::{HLSIM, Proc, admin_base, start_serve, wait_health};
use sdkrig::{Run, clients_dir, clients_dir_with, has_python_package, node_binary, skip};
use serde_json::{Value, json};

/// Blocks the simulator writes before its market holds still.
const BLOCKS: u64 = 120;
const START_HEIGHT: u64 = 1_000_000_000;
/// A whole bot's run (ccxt paces its own requests: about half a second each).
const LIMIT: Duration = Duration::from_secs(120);
const SDK_LOCAL: &str = "127.0.0.1:3001";

/// Answered by hlbook itself.
const SERVED: &[&str] = &[
    "l2Book",
    "candleSnapshot",
    "openOrders",
    "frontendOpenOrders",
    "allMids",
    "recentTrades",
    "userFills",
    "userFillsByTime",
    "userTwapSliceFills",
    "orderStatus",
    // userFunding and userNonFundingLedgerUpdates from a time the store holds (a harness's own label: from
    // earlier, they are passed on or refused, as any type not served here).
    "userFunding:kept",
    "userNonFundingLedgerUpdates:kept",
];
/// Passed to the node's info server.
const NODE: &[&str] = &[
    "meta",
    "spotMeta",
    "clearinghouseState",
    "spotClearinghouseState",
    "exchangeStatus",
    "liquidatable",
    "activeAssetData",
    "maxMarketOrderNtls",
    "vaultSummaries",
    "userVaultEquities",
    "leadingVaults",
    "extraAgents",
    "subAccounts",
    "userFees",
    "userRateLimit",
    "spotDeployState",
    "perpDeployAuctionStatus",
    "delegations",
    "delegatorSummary",
    "maxBuilderFee",
    "userToMultiSigSigners",
    "userRole",
    "perpsAtOpenInterestCap",
    "validatorL1Votes",
    "marginTable",
    "perpDexs",
    "webData2",
];
/// What hlsim's public-API stand-in answers beyond the node's types.
const EXCHANGE_EXTRA: &[&str] =
    &["metaAndAssetCtxs", "spotMetaAndAssetCtxs", "candleSnapshot", "fundingHistory", "l2Book", "allMids"];

/// hlsim and hlbook beside it, the market frozen at `last`, and the truth of one busy user.
struct Stack {
    _sim: Proc,
    server: Proc,
    base: String,
    node_info: String,
    exchange_info: Option<String>,
    data: PathBuf,
    dir: tempfile::TempDir,
    user: String,
    oid: u64,
    /// The user's first fill (ms): the bots ask `userFillsByTime` from here, a time hlbook's store covers (from 0 it
    /// does not: hlbook passes that on, or refuses it, rather than answer short).
    since_ms: i64,
}

fn sim_has_exchange_server() -> bool {
    let help = Command::new(HLSIM).arg("--help").output().unwrap();
    String::from_utf8_lossy(&help.stdout).contains("--exchange-listen")
}

impl Stack {
    /// `upstream`: hlbook's `server.upstream_info_url` is the simulator's exchange stand-in. `also_listen`: fixed
    /// addresses the server listens on too.
    fn start(upstream: bool, also_listen: &[&str]) -> Stack {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let blocks = BLOCKS.to_string();
        let exchange = sim_has_exchange_server();
        assert!(exchange || !upstream, "hlsim has no --exchange-listen (branch sim-info) to play the upstream");
        #[rustfmt::skip]
        let mut args = vec![
            "--out", data.to_str().unwrap(), "--info-listen", "127.0.0.1:0", "--coins", "4", "--btc-orders", "2000",
            "--orders-per-coin", "200", "--block-ms", "40", "--rate", "0.3", "--reject-ratio", "2", "--users", "5",
            "--blocks", &blocks, "--write-misc-events", "--funding-every-blocks", "3",
        ];
        if exchange {
            args.extend(["--exchange-listen", "127.0.0.1:0"]);
        }
        let sim = Proc::start(HLSIM, &args, &dir.path().join("sim.log"));
        // Both listeners print a line; in whichever order.
        let (mut node_info, mut exchange_info) = (None, None);
        while node_info.is_none() || (exchange && exchange_info.is_none()) {
            let line = sim.wait_line("", Duration::from_secs(60));
            let url = |prefix: &str| line.strip_prefix(prefix).map(|a| format!("http://{}/info", a.trim()));
            node_info = node_info.or_else(|| url("info listening on"));
            exchange_info = exchange_info.or_else(|| url("exchange listening on"));
        }
        let node_info = node_info.unwrap();
        // The sweeps weigh more than the exchange's 1200 a minute (nktkas alone ~1500): limits are not tested here.
        let mut toml = String::from("[server]\ninfo_weight_per_minute = 0\nupstream_weight_per_minute = 1000000\n");
        if upstream {
            toml += &format!("upstream_info_url = \"{}\"\n", exchange_info.as_ref().unwrap());
        }
        let config = dir.path().join("hlbook.toml");
        std::fs::write(&config, toml).unwrap();
        let mut extra = vec!["--config", config.to_str().unwrap()];
        for a in also_listen {
            extra.extend(["--listen", a]);
        }
        let snaps = dir.path().join("snapshots");
        let server = start_serve(&data, &node_info, &snaps, &extra, &dir.path().join("serve.log"));
        let addr = server.wait_line("hlbook listening on", Duration::from_secs(60));
        for _ in also_listen {
            server.wait_line("hlbook listening on", Duration::from_secs(60));
        }
        admin_base(&server);
        let base = format!("http://{addr}");
        let last = START_HEIGHT + BLOCKS - 1;
        wait_health(&base, Duration::from_secs(180), |h| h["height"].as_u64() == Some(last));
        let books = procs::sim_books_at(&node_info, dir.path(), last);
        let (user, oid) = busy_resting_user(&data, &books);
        let times = sdkrig::user_fills(&data, &user).into_iter().filter_map(|f| f["time"].as_i64());
        let since_ms = times.min().expect("the busy user has fills");
        Stack { _sim: sim, server, base, node_info, exchange_info, data, dir, user, oid, since_ms }
    }

    fn server_log(&self) -> String {
        let _ = &self.server;
        std::fs::read_to_string(self.dir.path().join("serve.log")).unwrap_or_default()
    }
}

/// The user with the most fills among those with a resting order, and one such order's oid.
fn busy_resting_user(data: &Path, books: &hlbook::book::Books) -> (String, u64) {
    let mut resting: BTreeMap<String, u64> = BTreeMap::new();
    for coin in books.coin_names() {
        for side in [hlbook::node::Side::Bid, hlbook::node::Side::Ask] {
            for o in books.coin(&coin).unwrap().orders(side) {
                resting.entry(o.user.to_string().to_lowercase()).or_insert(o.oid);
            }
        }
    }
    let fills = |u: &str| sdkrig::user_fills(data, u).len();
    let best = resting.iter().max_by_key(|(u, _)| fills(u)).expect("no resting order in the simulator's books");
    assert!(fills(best.0) > 0, "no user with a resting order has fills");
    (best.0.clone(), *best.1)
}

/// POST `body` to an info server: status and body (JSON when it parses, else the text).
fn post(url: &str, body: &Value) -> (u16, Value) {
    let resp = reqwest::blocking::Client::new().post(url).json(body).send().unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// The node info server's answer, which must be a success.
fn node_truth(s: &Stack, body: &Value) -> Value {
    let (status, v) = post(&s.node_info, body);
    assert_eq!(status, 200, "the simulator's node info server on {body}: {v}");
    v
}

/// Runs a bot to its end (bounded) and returns its JSON lines.
fn run_bot(s: &Stack, mut cmd: Command) -> Vec<Value> {
    cmd.env("DAY_ONE_SINCE_MS", s.since_ms.to_string());
    let mut run = Run::start(&mut cmd);
    let started = Instant::now();
    let status = loop {
        if let Some(status) = run.child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > LIMIT + Duration::from_secs(30) {
            let _ = run.child.kill();
            panic!("{cmd:?} did not end; server log:\n{}", s.server_log());
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let lines: Vec<Value> = run.lines.try_iter().map(|l| serde_json::from_str(&l).unwrap()).collect();
    assert!(status.success(), "{cmd:?} exited {status}: {}\nprinted {lines:?}", run.stderr());
    lines
}

/// One bot's calls by name, after the checks every bot shares: it ran to the end, called every read its library
/// offers, nothing crashed, and each call answered or was refused as the contract says.
fn check_calls(s: &Stack, lines: &[Value], upstream: bool) -> HashMap<String, Value> {
    let done = lines.iter().find(|l| l["done"] == true).unwrap_or_else(|| panic!("no end line: {lines:?}"));
    assert_eq!(done["uncovered"], json!([]), "reads the bot does not call");
    let calls: Vec<&Value> = lines.iter().filter(|l| l.get("call").is_some()).collect();
    let crashes: Vec<&&Value> = calls.iter().filter(|l| l["crash"] == true).collect();
    let mut wrong = Vec::new();
    for c in &calls {
        let types: Vec<&str> = c["types"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
        let answerable =
            |t: &str| SERVED.contains(&t) || NODE.contains(&t) || (upstream && EXCHANGE_EXTRA.contains(&t));
        let ok = c.get("ok").is_some();
        // ccxt asks `userAbstraction` before a balance and goes on without it when it is refused (hlsim's stand-in
        // for the public API does not answer it): the balance must still come from the node's answer.
        let tolerated = |t: &&&str| ok && **t == "userAbstraction" && types.len() > 1;
        let refused = types.iter().find(|t| !answerable(t) && !tolerated(t));
        let message = c["message"].as_str().unwrap_or_default();
        let right = match refused {
            None => ok || types.is_empty(),
            Some(_) if !upstream => !ok && message.contains("server.upstream_info_url"),
            Some(t) => !ok && message.contains(t.trim_end_matches(":unknown")),
        };
        if !right {
            wrong.push(format!("{} {types:?}: {}", c["call"], &c.to_string()[..c.to_string().len().min(400)]));
        }
    }
    assert!(crashes.is_empty(), "crashes inside the library:\n{crashes:#?}");
    assert!(wrong.is_empty(), "{} calls against the contract:\n{}", wrong.len(), wrong.join("\n"));
    let _ = s;
    calls.into_iter().map(|c| (c["call"].as_str().unwrap().to_string(), c["ok"].clone())).collect()
}

/// allMids as numbers: the exchange stand-in's, else the mid of each simulated book's best prices.
#[allow(clippy::float_arithmetic)]
fn truth_mids(s: &Stack) -> BTreeMap<String, f64> {
    let num = |v: &Value| v.as_str().unwrap().parse::<f64>().unwrap();
    if let Some(ex) = &s.exchange_info {
        let (status, v) = post(ex, &json!({"type": "allMids"}));
        assert_eq!(status, 200, "allMids of the exchange stand-in: {v}");
        return v.as_object().unwrap().iter().map(|(k, v)| (k.clone(), num(v))).collect();
    }
    let books = procs::sim_books_at(&s.node_info, s.dir.path(), START_HEIGHT + BLOCKS - 1);
    let mut out = BTreeMap::new();
    for coin in books.coin_names() {
        let book = books.coin(&coin).unwrap();
        let px = |o: &hlbook::book::RestingOrder| o.px.0 as f64 / 1e8;
        let bid = book.orders(hlbook::node::Side::Bid).map(px).fold(f64::MIN, f64::max);
        let ask = book.orders(hlbook::node::Side::Ask).map(px).fold(f64::MAX, f64::min);
        if bid > f64::MIN && ask < f64::MAX {
            out.insert(coin.to_string(), f64::midpoint(bid, ask));
        }
    }
    out
}

#[allow(clippy::float_arithmetic)]
fn assert_mids(s: &Stack, got: &Value) {
    let got: BTreeMap<String, f64> = got
        .as_object()
        .unwrap_or_else(|| panic!("allMids: {got}"))
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().parse().unwrap()))
        .collect();
    let want = truth_mids(s);
    assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "allMids coins");
    for (coin, w) in &want {
        assert!((got[coin] - w).abs() <= w.abs() * 1e-9, "allMids {coin}: {} vs {w}", got[coin]);
    }
}

/// The simulator's fills of the user, newest first, at most the 2000 the official API returns; `keep` picks
/// the fields a library hands over (None: every field, verbatim).
fn truth_fills(s: &Stack, keep: Option<&[&str]>) -> Vec<Value> {
    let mut fills = sdkrig::user_fills(&s.data, &s.user);
    fills.reverse();
    fills.truncate(2000);
    let pick = |f: Value| match keep {
        None => f,
        Some(k) => Value::Object(k.iter().map(|key| ((*key).to_string(), f[*key].clone())).collect()),
    };
    fills.into_iter().map(pick).collect()
}

/// Fills equal as sets and in newest-first time order.
fn assert_fills(what: &str, got: &Value, want: &[Value]) {
    let got = got.as_array().unwrap_or_else(|| panic!("{what}: {got}"));
    assert!(got.windows(2).all(|w| w[0]["time"].as_u64() >= w[1]["time"].as_u64()), "{what}: not newest first");
    // Keys sorted: a library may hand fields back in another order (the Rust SDK rebuilds each fill).
    let key = |f: &Value| serde_json::to_string(&f.as_object().map(|o| o.iter().collect::<BTreeMap<_, _>>())).unwrap();
    let (g, w): (BTreeSet<String>, BTreeSet<String>) = (got.iter().map(key).collect(), want.iter().map(key).collect());
    assert_eq!(got.len(), want.len(), "{what}: {} fills, the simulator wrote {}", got.len(), want.len());
    assert_eq!(g, w, "{what}: fills differ from the simulator's");
}

/// Open orders equal to the node's, order by order (sorted by oid), `keep` fields or all.
fn assert_open_orders(s: &Stack, got: &Value, keep: Option<&[&str]>) {
    let want = node_truth(s, &json!({"type": "openOrders", "user": s.user}));
    let norm = |v: &Value| {
        let mut list: Vec<Value> = v.as_array().unwrap_or_else(|| panic!("openOrders: {v}")).clone();
        if let Some(k) = keep {
            list = list.iter().map(|o| k.iter().map(|f| ((*f).to_string(), o[*f].clone())).collect()).collect();
        }
        list.sort_by_key(|o| o["oid"].as_u64());
        list
    };
    assert_eq!(norm(got), norm(&want), "openOrders of {}", s.user);
}

/// clearinghouseState equal to the node's, but for its `time` (when it was asked).
fn assert_user_state(s: &Stack, got: &Value, project: impl Fn(&Value) -> Value) {
    let mut want = node_truth(s, &json!({"type": "clearinghouseState", "user": s.user}));
    let mut got = got.clone();
    for v in [&mut want, &mut got] {
        if let Some(o) = v.as_object_mut() {
            o.remove("time");
        }
    }
    assert_eq!(got, project(&want), "clearinghouseState of {}", s.user);
}

fn harness(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients").join(name)
}

fn python_bot(s: &Stack, dir: &Path, script: &str, extra: &[&str]) -> Vec<Value> {
    let mut cmd = Command::new(dir.join("py/bin/python"));
    cmd.arg(harness(script)).arg(&s.base).arg(&s.user).arg(s.oid.to_string()).arg(LIMIT.as_secs().to_string());
    cmd.args(extra);
    run_bot(s, cmd)
}

#[test]
fn python_sdk_day_one_bot() {
    let Some(dir) = clients_dir("the Python SDK", "py/bin/python") else { return };
    let s = Stack::start(false, &[]);
    let calls = check_calls(&s, &python_bot(&s, &dir, "day_one_python_sdk.py", &[]), false);
    assert_mids(&s, &calls["all_mids"]);
    assert_fills("user_fills", &calls["user_fills"], &truth_fills(&s, None));
    assert_open_orders(&s, &calls["open_orders"], None);
    assert_user_state(&s, &calls["user_state"], Clone::clone);
    let (fundings, ledger) = truth_misc(&s);
    assert!(!fundings.is_empty(), "the busy user has no funding in the simulator's files");
    assert_eq!(misc_entries(&calls["user_funding_history(since)"]), fundings, "user_funding_history");
    assert_eq!(misc_entries(&calls["user_non_funding_ledger_updates(since)"]), ledger, "ledger updates");
}

/// Milliseconds (truncated) of a node time `YYYY-MM-DDTHH:MM:SS[.fraction]`, UTC.
fn node_millis(t: &str) -> i64 {
    let (date, time) = t.split_once('T').unwrap();
    let d: Vec<i64> = date.split('-').map(|x| x.parse().unwrap()).collect();
    let (y, m) = (d[0], d[1] as usize);
    let leap = |y: i64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let months = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let years: i64 = (1970..y).map(|y| if leap(y) { 366 } else { 365 }).sum();
    let days = years + months[..m - 1].iter().sum::<i64>() + i64::from(m > 2 && leap(y)) + d[2] - 1;
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let c: Vec<i64> = hms.split(':').map(|x| x.parse().unwrap()).collect();
    let ms: i64 = format!("{:0<3}", &frac[..frac.len().min(3)]).parse().unwrap();
    ((days * 24 + c[0]) * 60 + c[1]) * 60_000 + c[2] * 1000 + ms
}

/// The busy user's fundings and ledger updates from `since_ms` in the simulator's misc_events files, each as
/// (time, hash, the delta with decimals in one spelling), in order.
fn truth_misc(s: &Stack) -> (Vec<Value>, Vec<Value>) {
    let (mut fundings, mut ledger) = (Vec::new(), Vec::new());
    for l in procs::node_json_lines(&s.data.join("misc_events_by_block")) {
        for ev in l["events"].as_array().unwrap() {
            let time = node_millis(ev["time"].as_str().unwrap());
            if time < s.since_ms {
                continue;
            }
            for d in ev["inner"]["Funding"]["deltas"].as_array().into_iter().flatten() {
                if d["user"].as_str().map(str::to_lowercase).as_deref() == Some(s.user.as_str()) {
                    let delta = json!({"type": "funding", "coin": d["coin"], "usdc": decimal(&d["funding_amount"]),
                        "szi": decimal(&d["szi"]), "fundingRate": decimal(&d["funding_rate"]), "nSamples": null});
                    fundings.push(json!([time, ev["hash"], delta]));
                }
            }
            let update = &ev["inner"]["LedgerUpdate"];
            let users = update["users"].as_array().into_iter().flatten();
            if users.filter_map(Value::as_str).any(|u| u.to_lowercase() == s.user) {
                ledger.push(json!([time, ev["hash"], update["delta"]]));
            }
        }
    }
    (fundings, ledger)
}

/// An info answer's entries as `truth_misc`'s.
fn misc_entries(got: &Value) -> Vec<Value> {
    let list = got.as_array().unwrap_or_else(|| panic!("not a list: {got}"));
    let one = |d: &Value| match d["type"].as_str() {
        Some("funding") => json!({"type": "funding", "coin": d["coin"], "usdc": decimal(&d["usdc"]),
            "szi": decimal(&d["szi"]), "fundingRate": decimal(&d["fundingRate"]), "nSamples": d["nSamples"]}),
        _ => d.clone(),
    };
    list.iter().map(|e| json!([e["time"], e["hash"], one(&e["delta"])])).collect()
}

#[test]
fn nktkas_day_one_bot() {
    let Some(dir) = clients_dir("@nktkas/hyperliquid", "node/node_modules/@nktkas/hyperliquid") else { return };
    let s = Stack::start(false, &[]);
    let mut cmd = Command::new(node_binary(&dir));
    cmd.arg(harness("day_one_nktkas.mjs")).arg(&dir).arg(&s.base).arg(&s.user).arg(s.oid.to_string());
    cmd.arg(LIMIT.as_secs().to_string());
    let calls = check_calls(&s, &run_bot(&s, cmd), false);
    assert_mids(&s, &calls["allMids"]);
    assert_fills("userFills", &calls["userFills"], &truth_fills(&s, None));
    assert_open_orders(&s, &calls["openOrders"], None);
    assert_user_state(&s, &calls["clearinghouseState"], Clone::clone);
}

#[test]
fn rust_sdk_day_one_bot() {
    let Some(dir) = clients_dir("hyperliquid_rust_sdk's day-one bot", "rust_sdk_day_one") else { return };
    // The server binds SDK_LOCAL itself (not probed first: a probed port can be taken before the bind); when it is
    // taken, the server cannot start and the test fails.
    let s = Stack::start(false, &[SDK_LOCAL]);
    let mut cmd = Command::new(dir.join("rust_sdk_day_one"));
    cmd.arg(&s.user).arg(s.oid.to_string()).arg(LIMIT.as_secs().to_string());
    let calls = check_calls(&s, &run_bot(&s, cmd), false);
    assert_mids(&s, &calls["all_mids"]);
    #[rustfmt::skip]
    let fill_fields = ["coin", "px", "sz", "side", "time", "oid", "startPosition", "dir", "closedPnl", "hash",
        "crossed", "fee"];
    assert_fills("user_fills", &calls["user_fills"], &truth_fills(&s, Some(&fill_fields)));
    assert_open_orders(&s, &calls["open_orders"], Some(&["coin", "limitPx", "oid", "side", "sz", "timestamp"]));
    // The SDK keeps these fields of the state.
    assert_user_state(&s, &calls["user_state"], |w| {
        let summary = |m: &Value| {
            json!({"accountValue": m["accountValue"], "totalMarginUsed": m["totalMarginUsed"],
                   "totalNtlPos": m["totalNtlPos"], "totalRawUsd": m["totalRawUsd"]})
        };
        let positions: Vec<Value> = w["assetPositions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| json!({"type": p["type"], "position": {"coin": p["position"]["coin"], "szi": p["position"]["szi"]}}))
            .collect();
        json!({"assetPositions": positions, "marginSummary": summary(&w["marginSummary"]),
               "crossMarginSummary": summary(&w["crossMarginSummary"]), "withdrawable": w["withdrawable"]})
    });
}

#[test]
fn ccxt_day_one_bot_with_an_upstream() {
    let Some(dir) = clients_dir_with("ccxt", |d| has_python_package(d, "ccxt")) else { return };
    let s = Stack::start(true, &[]);
    let calls = check_calls(&s, &python_bot(&s, &dir, "day_one_ccxt.py", &[]), true);
    let symbols = &calls["load_markets"]["symbols"];
    assert!(symbols.as_array().is_some_and(|a| a.contains(&json!("BTC/USDC:USDC"))), "markets: {symbols}");
    // ccxt's orders and trades carry the exchange's ids: the node's open orders, the simulator's fills.
    let ids = |v: &Value, field: &str| -> BTreeSet<String> {
        v.as_array().unwrap_or_else(|| panic!("{v}")).iter().map(|o| o[field].as_str().unwrap().to_string()).collect()
    };
    let open = node_truth(&s, &json!({"type": "openOrders", "user": s.user}));
    let open_oids: BTreeSet<String> = open.as_array().unwrap().iter().map(|o| o["oid"].to_string()).collect();
    assert_eq!(ids(&calls["fetch_open_orders(openOrders)"], "id"), open_oids, "fetch_open_orders");
    let tids: BTreeSet<String> = truth_fills(&s, None).iter().map(|f| f["tid"].to_string()).collect();
    assert_eq!(ids(&calls["fetch_my_trades"], "id"), tids, "fetch_my_trades");
    // ccxt's funding history and its ledger, answered by hlbook's store: each item's `info` is the entry. ccxt
    // asks `userFunding` without a coin and keeps every coin's payment, whatever the symbol.
    let (fundings, ledger) = truth_misc(&s);
    assert!(fundings.iter().any(|f| f[2]["coin"] == "BTC"), "the busy user has no BTC funding in the files");
    let infos = |v: &Value| -> Value {
        Value::Array(v.as_array().unwrap_or_else(|| panic!("{v}")).iter().map(|i| i["info"].clone()).collect())
    };
    assert_eq!(misc_entries(&infos(&calls["fetch_funding_history(since)"])), fundings, "fetch_funding_history");
    assert_eq!(misc_entries(&infos(&calls["fetch_ledger(since)"])), ledger, "fetch_ledger");
}

#[test]
fn ccxt_load_markets_without_an_upstream_names_the_setting() {
    let Some(dir) = clients_dir_with("ccxt", |d| has_python_package(d, "ccxt")) else { return };
    let s = Stack::start(false, &[]);
    let lines = python_bot(&s, &dir, "day_one_ccxt.py", &["load_markets"]);
    let load = lines.iter().find(|l| l["call"] == "load_markets").unwrap_or_else(|| panic!("{lines:?}"));
    assert!(load.get("ok").is_none() && load["crash"].is_null(), "{load}");
    let message = load["message"].as_str().unwrap_or_default();
    assert!(message.contains("server.upstream_info_url"), "ccxt's {}: {message}", load["error"]);
}

/// A decimal string without trailing zeros (`"3342.50"` and `"3342.5"` are one price).
fn decimal(v: &Value) -> String {
    let t = v.as_str().unwrap_or_else(|| panic!("not a decimal string: {v}"));
    if t.contains('.') { t.trim_end_matches('0').trim_end_matches('.').to_string() } else { t.to_string() }
}

/// The trades of `coin` in the simulator's fills files, in the order written: each tid's two fills as one trade,
/// built here from the fills (not by hlbook's code): taker's side, users [buyer, seller].
fn file_trades(data: &Path, coin: &str) -> Vec<Value> {
    let lines = sdkrig::stream_lines(data, "fills");
    let mut by_tid: BTreeMap<u64, Vec<(String, Value)>> = BTreeMap::new();
    let mut order = Vec::new();
    for ev in lines.iter().flat_map(|l| l["events"].as_array().unwrap().iter()) {
        let (user, fill) = (ev[0].as_str().unwrap().to_lowercase(), ev[1].clone());
        if fill["coin"] != coin {
            continue;
        }
        let tid = fill["tid"].as_u64().unwrap();
        if !by_tid.contains_key(&tid) {
            order.push(tid);
        }
        by_tid.entry(tid).or_default().push((user, fill));
    }
    let trade = |tid: &u64| {
        let sides = &by_tid[tid];
        let user_of = |side: &str| sides.iter().find(|(_, f)| f["side"] == side).map(|(u, _)| u.clone()).unwrap();
        let taker = sides.iter().find(|(_, f)| f["crossed"] == true).map_or(&sides[0].1, |(_, f)| f);
        json!({"coin": coin, "side": taker["side"], "px": taker["px"], "sz": taker["sz"], "time": taker["time"],
            "hash": taker["hash"], "tid": tid, "users": [user_of("B"), user_of("A")]})
    };
    order.iter().filter(|t| by_tid[*t].len() == 2).map(trade).collect()
}

/// What hlbook answers itself equals what the simulator wrote or holds, read here without hlbook's code: allMids
/// (to the digit) against the simulator's own, recentTrades against the trades paired from the fills files,
/// userFills and userFillsByTime against the user's fills, verbatim, in the exchange's orders.
#[test]
fn local_answers_match_the_files() {
    if !sim_has_exchange_server() {
        return skip("hlsim has no --exchange-listen");
    }
    let s = Stack::start(true, &[]);
    let info = format!("{}/info", s.base);
    let (status, ours) = post(&info, &json!({"type": "allMids"}));
    let (_, theirs) = post(s.exchange_info.as_ref().unwrap(), &json!({"type": "allMids"}));
    assert_eq!(status, 200, "{ours}");
    let exact = |v: &Value| -> BTreeMap<String, String> {
        v.as_object().unwrap().iter().map(|(k, v)| (k.clone(), decimal(v))).collect()
    };
    assert_eq!(exact(&ours), exact(&theirs), "allMids");
    assert!(!exact(&ours).is_empty());

    let (status, trades) = post(&info, &json!({"type": "recentTrades", "coin": "BTC"}));
    assert_eq!(status, 200, "{trades}");
    let trades = trades.as_array().unwrap().clone();
    let want = file_trades(&s.data, "BTC");
    assert!(!trades.is_empty() && trades.len() <= want.len(), "{} trades of {}", trades.len(), want.len());
    let norm = |t: &Value| {
        let mut t = t.clone();
        for k in ["px", "sz"] {
            t[k] = Value::String(decimal(&t[k]));
        }
        t
    };
    let last: Vec<Value> = want[want.len() - trades.len()..].iter().map(norm).collect();
    assert_eq!(trades.iter().map(norm).collect::<Vec<_>>(), last, "recentTrades: the newest trades, oldest first");

    let mut fills = sdkrig::user_fills(&s.data, &s.user);
    let (status, got) = post(&info, &json!({"type": "userFillsByTime", "user": s.user, "startTime": s.since_ms}));
    assert_eq!(status, 200, "{got}");
    assert_eq!(got.as_array().unwrap(), &fills, "userFillsByTime: every fill since the first, oldest first");
    fills.reverse();
    let (status, got) = post(&info, &json!({"type": "userFills", "user": s.user}));
    assert_eq!(status, 200, "{got}");
    assert_eq!(got.as_array().unwrap(), &fills, "userFills: newest first, verbatim");
    // From 0 the store cannot say it holds everything: passed upstream (the stand-in refuses it, naming it).
    let (status, got) = post(&info, &json!({"type": "userFillsByTime", "user": s.user, "startTime": 0}));
    assert_eq!(status, 422, "{got}");
}
