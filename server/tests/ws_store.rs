//! The history store against hlsim's own files, with the real binaries (issue #33's acceptance):
//! - weekly candles open on epoch weeks, and the final 1w, 3d, 1d and 1M candles of a coin that traded before the
//!   subscription count every trade of the node's files (one per tid), with o/h/l/c equal;
//! - history outlives the node's files: after a restart with the older hour files deleted, `candleSnapshot` 1m
//!   still answers every minute, and a userFills first frame still carries the older fills, verbatim;
//! - a server killed (SIGKILL) while it writes reopens its store, and every candle of the store equals a recount
//!   from the node's files.

mod procs;
mod wsclient;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use procs::{admin_base, get_json, start_serve, start_sim, start_sim_exchange, wait_health};
use serde_json::{Value, json};
use wsclient::raw::channel;

const FIRST_HEIGHT: u64 = 1_000_000_000;
const MINUTE: i64 = 60_000;
const DAY: i64 = 86_400_000;

/// A decimal string in 10^-8 units (the test's own parser).
fn units(s: &str) -> u128 {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    assert!(frac.len() <= 8, "{s}");
    format!("{int}{frac:0<8}").parse().unwrap()
}

/// Every fills line of the hour files under `data`, oldest first.
fn fills_lines(data: &Path) -> Vec<Value> {
    fills_lines_of(data, "by_block")
}

/// `fills_lines` of a mode's folder (`by_block` or `streaming`).
fn fills_lines_of(data: &Path, mode: &str) -> Vec<Value> {
    procs::node_json_lines(&data.join(format!("node_fills_{mode}")))
}

/// (time, price as written, size in units) of a coin's trades, one per tid of each block (streaming mode writes a
/// trade's two sides on two lines of one block).
fn trades(lines: &[Value], coin: &str) -> Vec<(i64, String, u128)> {
    let mut out = Vec::new();
    let (mut block, mut tids) = (None, HashSet::new());
    for l in lines {
        if block != l["block_number"].as_u64() {
            (block, tids) = (l["block_number"].as_u64(), HashSet::new());
        }
        for ev in l["events"].as_array().unwrap() {
            let f = &ev[1];
            if f["coin"] == coin && tids.insert(f["tid"].as_u64().unwrap()) {
                out.push((
                    f["time"].as_i64().unwrap(),
                    f["px"].as_str().unwrap().into(),
                    units(f["sz"].as_str().unwrap()),
                ));
            }
        }
    }
    out
}

/// The bucket (open, close) of `interval` holding `ms`: epoch multiples, UTC calendar months for 1M.
fn bucket(interval: &str, ms: i64) -> (i64, i64) {
    let len = match interval {
        "1m" => MINUTE,
        "5m" => 5 * MINUTE,
        "1h" => 60 * MINUTE,
        "1d" => DAY,
        "3d" => 3 * DAY,
        "1w" => 7 * DAY,
        "1M" => {
            let d = time::OffsetDateTime::from_unix_timestamp(ms / 1000).unwrap();
            let first = |y, m| time::Date::from_calendar_date(y, m, 1).unwrap().midnight().assume_utc();
            let open = first(d.year(), d.month());
            let (ny, nm) = if d.month() == time::Month::December {
                (d.year() + 1, time::Month::January)
            } else {
                (d.year(), d.month().next())
            };
            let next = first(ny, nm);
            return (open.unix_timestamp() * 1000, next.unix_timestamp() * 1000 - 1);
        }
        _ => panic!("{interval}"),
    };
    let t = ms - ms.rem_euclid(len);
    (t, t + len - 1)
}

/// Every candle of the trades, ascending, as the official object with `v` in units.
fn recount(coin: &str, interval: &str, trades: &[(i64, String, u128)]) -> Vec<Value> {
    let mut by: BTreeMap<i64, Vec<&(i64, String, u128)>> = BTreeMap::new();
    for tr in trades {
        by.entry(bucket(interval, tr.0).0).or_default().push(tr);
    }
    by.into_iter()
        .map(|(t, list)| {
            let hi = list.iter().max_by_key(|x| units(&x.1)).unwrap();
            let lo = list.iter().min_by_key(|x| units(&x.1)).unwrap();
            json!({"t": t, "T": bucket(interval, t).1, "s": coin, "i": interval, "o": list[0].1,
                "c": list.last().unwrap().1, "h": hi.1, "l": lo.1, "v": list.iter().map(|x| x.2).sum::<u128>().to_string(),
                "n": list.len()})
        })
        .collect()
}

fn normalized(d: &Value) -> Value {
    let mut d = d.clone();
    d["v"] = units(d["v"].as_str().unwrap()).to_string().into();
    d
}

fn snapshot(base: &str, coin: &str, interval: &str) -> Vec<Value> {
    let body = json!({"type": "candleSnapshot", "req": {"coin": coin, "interval": interval, "startTime": 0}});
    let r = reqwest::blocking::Client::new().post(format!("{base}/info")).json(&body).send().unwrap();
    assert_eq!(r.status().as_u16(), 200);
    r.json::<Vec<Value>>().unwrap().iter().map(normalized).collect()
}

/// Waits until the store holds every block up to `height` (its state on `/status`).
fn wait_store(admin: &str, height: u64) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    loop {
        let s = get_json(&format!("{admin}/status")).map_or(Value::Null, |s| s["store"].clone());
        if s["height"].as_u64() >= Some(height) && s["state"] == "live" {
            return s;
        }
        assert!(std::time::Instant::now() < deadline, "the store never reached {height}: {s}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `hlbook serve` on `data`, its store beside `snaps`; the public and admin bases.
fn serve(data: &Path, info: &str, out: &Path, log: &str) -> (procs::Proc, String, String) {
    let server = start_serve(data, info, &out.join("snaps"), &[], &out.join(log));
    let base = format!("http://{}", server.wait_line("hlbook listening on", Duration::from_secs(30)));
    let admin = admin_base(&server);
    wait_health(&base, Duration::from_secs(60), |h| h["state"] == "live");
    (server, base, admin)
}

#[test]
fn long_candles_count_every_trade_the_node_traded_before_the_subscription() {
    let out = tempfile::tempdir().unwrap();
    let data = out.path().join("data");
    let blocks = 600;
    #[rustfmt::skip]
    let sim_args = ["--coins", "3", "--btc-orders", "1000", "--orders-per-coin", "200", "--block-ms", "40",
        "--rate", "0.1", "--reject-ratio", "1", "--users", "25", "--blocks", "600", "--time-scale", "60"];
    let (mut sim, info) = start_sim(&data, &sim_args, &out.path().join("sim.log"));
    let (mut server, base, admin) = serve(&data, &info, out.path(), "serve.log");
    // A third of the blocks, with their trades, before anyone subscribes.
    wait_health(&base, Duration::from_secs(60), |h| h["height"].as_u64() >= Some(FIRST_HEIGHT + 200));
    let intervals = ["1w", "3d", "1d", "1M", "1h"];
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let addr = base.trim_start_matches("http://").to_string();
    let task = rt.spawn(async move {
        let mut ws = wsclient::raw::connect(&addr, "", None).await;
        for i in intervals {
            wsclient::raw::subscribe(&mut ws, json!({"type": "candle", "coin": "BTC", "interval": i})).await;
        }
        wsclient::raw::collect_until(&mut ws, &mut stop_rx, "candles").await
    });
    let last = FIRST_HEIGHT + blocks - 1;
    let store = wait_store(&admin, last);
    // The last block's frame went out before the store wrote it; the collector reads what is queued.
    let snaps: Vec<Vec<Value>> = intervals.iter().map(|i| snapshot(&base, "BTC", i)).collect();
    stop_tx.send(true).unwrap();
    let got = rt.block_on(task).unwrap();
    sim.stop();
    server.stop();

    let btc = trades(&fills_lines(&data), "BTC");
    assert!(btc.len() > 100, "{} BTC trades", btc.len());
    for (i, snap) in intervals.iter().zip(&snaps) {
        let frames: Vec<&Value> = got.iter().filter(|f| channel(f) == "candle" && f["data"]["i"] == *i).collect();
        let last = normalized(&frames.last().unwrap_or_else(|| panic!("{i}: no frame"))["data"]);
        let want = recount("BTC", i, &btc);
        assert_eq!(&last, want.last().unwrap(), "{i}: the final candle counts every trade of the files");
        assert_eq!(snap, &want, "{i}: candleSnapshot");
        let t = last["t"].as_i64().unwrap();
        match *i {
            "1w" => assert_eq!(t % 604_800_000, 0, "epoch weeks"),
            "3d" => assert_eq!(t % (3 * DAY), 0),
            "1d" => assert_eq!(t % DAY, 0),
            _ => {}
        }
        eprintln!("{i}: {} trades in the final candle, {} frames", last["n"], frames.len());
    }
    // A first frame whose bucket began no later than the store's first block says the store began inside it;
    // which buckets those are depends on the wall clock the simulator starts from (a day may begin mid-run).
    let first_ms = store["first_block_ms"].as_i64().expect("the store's first block time");
    for i in intervals {
        let first = got.iter().find(|f| channel(f) == "candle" && f["data"]["i"] == i).expect("a first frame");
        let began_inside = first["data"]["t"].as_i64().unwrap() <= first_ms;
        let noticed = got.iter().any(|f| {
            channel(f) == "hlbookNotice" && f["data"].as_str().is_some_and(|t| t.contains(&format!("\"{i}\"")))
        });
        assert_eq!(noticed, began_inside, "{i}: a notice iff the store began inside the first frame's bucket");
    }
}

/// Moves every hour file but each stream's newest from `data` to `aside` (as an operator pruning the node).
fn prune_all_but_newest(data: &Path, aside: &Path) -> usize {
    let mut moved = 0;
    for stream in ["node_fills_by_block", "node_order_statuses_by_block", "node_raw_book_diffs_by_block"] {
        let mut files: Vec<(u32, u8, PathBuf)> = Vec::new();
        for day in std::fs::read_dir(data.join(stream).join("hourly")).unwrap().flatten() {
            let date: u32 = day.file_name().to_string_lossy().parse().unwrap();
            for f in std::fs::read_dir(day.path()).unwrap().flatten() {
                files.push((date, f.file_name().to_string_lossy().parse().unwrap(), f.path()));
            }
        }
        files.sort();
        files.pop();
        for (date, hour, p) in files {
            let to = aside.join(stream).join("hourly").join(date.to_string());
            std::fs::create_dir_all(&to).unwrap();
            std::fs::rename(&p, to.join(hour.to_string())).unwrap();
            moved += 1;
        }
    }
    moved
}

#[test]
fn history_outlives_the_nodes_files() {
    let out = tempfile::tempdir().unwrap();
    let (data, aside) = (out.path().join("data"), out.path().join("pruned"));
    let paused = FIRST_HEIGHT + 500;
    #[rustfmt::skip]
    let sim_args = ["--coins", "3", "--btc-orders", "1000", "--orders-per-coin", "200", "--block-ms", "40",
        "--rate", "0.1", "--reject-ratio", "1", "--users", "25", "--blocks", "1000", "--time-scale", "60",
        "--rollover-secs", "4", "--pause-at", &paused.to_string(), "--pause-secs", "30"];
    let (mut sim, info) = start_sim(&data, &sim_args, &out.path().join("sim.log"));
    let (mut first, base, admin) = serve(&data, &info, out.path(), "serve1.log");
    wait_store(&admin, paused - 1);
    let before = snapshot(&base, "BTC", "1m");
    first.stop();
    let moved = prune_all_but_newest(&data, &aside);
    assert!(moved >= 6, "{moved} hour files pruned");

    // The node keeps only its newest hour files; the restarted server still has every minute.
    let (mut second, base, admin) = serve(&data, &info, out.path(), "serve2.log");
    let kept = fills_lines(&data);
    assert!(kept.first().unwrap()["block_number"].as_u64().unwrap() > FIRST_HEIGHT + 50, "older files are gone");
    // The blocks before the simulator's pause (it may resume meanwhile: those are compared to themselves).
    let all_lines: Vec<Value> = fills_lines(&aside).into_iter().chain(kept).collect();
    let all_lines: Vec<Value> = all_lines.into_iter().filter(|l| l["block_number"].as_u64() < Some(paused)).collect();
    let want = recount("BTC", "1m", &trades(&all_lines, "BTC"));
    assert!(want.len() >= 20, "{} minutes", want.len());
    assert_eq!(before, want, "before the restart");
    let until = want.last().unwrap()["t"].as_i64();
    let after: Vec<Value> = snapshot(&base, "BTC", "1m").into_iter().filter(|c| c["t"].as_i64() <= until).collect();
    assert_eq!(after, want, "every minute of the pruned files, from the store");

    // A user with fills in the pruned files: the userFills first frame carries them, verbatim.
    let fills_of = |lines: &[Value], u: &str| -> Vec<Value> {
        lines
            .iter()
            .flat_map(|l| l["events"].as_array().unwrap().clone())
            .filter(|e| e[0] == u)
            .map(|e| e[1].clone())
            .collect()
    };
    let pruned = fills_lines(&aside);
    let users: Vec<String> = pruned
        .iter()
        .flat_map(|l| l["events"].as_array().unwrap().iter().map(|e| e[0].as_str().unwrap().to_string()))
        .collect();
    let user = users.iter().find(|u| fills_of(&all_lines, u).len() < 1500).expect("a user with a few fills").clone();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let addr = base.trim_start_matches("http://").to_string();
    let u = user.clone();
    let first_frame = rt.block_on(async move {
        let mut ws = wsclient::raw::connect(&addr, "", None).await;
        wsclient::raw::subscribe(&mut ws, json!({"type": "userFills", "user": u})).await;
        // The subscription goes live at the first block after the simulator's pause.
        loop {
            let f = wsclient::raw::expect_json(&mut ws, Duration::from_secs(120)).await;
            if channel(&f) == "userFills" {
                return f;
            }
        }
    });
    assert_eq!(first_frame["data"]["isSnapshot"], true);
    let got = first_frame["data"]["fills"].as_array().unwrap().clone();
    let older = fills_of(&pruned, &user);
    let everything = fills_of(&fills_lines(&aside).into_iter().chain(fills_lines(&data)).collect::<Vec<_>>(), &user);
    assert!(!older.is_empty() && got.len() >= older.len(), "{} fills, {} in pruned files", got.len(), older.len());
    assert_eq!(got[..], everything[..got.len()], "the user's fills from the first on, as the node wrote them");
    // The store's series on /metrics, read after /status: counters only grow.
    let status = wait_store(&admin, paused);
    let metrics = reqwest::blocking::get(format!("{admin}/metrics")).unwrap().text().unwrap();
    let series = |name: &str| {
        let v = metrics.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse::<u64>().ok());
        v.unwrap_or_else(|| panic!("{name} not on /metrics:\n{metrics}"))
    };
    assert!(series("hlbook_store_height") >= paused, "{status}");
    assert!(series("hlbook_store_fills_written_total") >= status["fills_written"].as_u64().unwrap());
    assert!(series("hlbook_store_commits_total") >= status["commits"].as_u64().unwrap().max(1));
    assert!(series("hlbook_store_file_bytes") > 0);
    assert_eq!(series("hlbook_store_live"), 1);
    sim.stop();
    second.stop();
}

#[test]
fn a_killed_server_reopens_its_store_and_it_agrees_with_the_files() {
    killed_and_reopened("by-block");
}

#[test]
fn a_killed_streaming_server_reopens_its_store_and_it_agrees_with_the_files() {
    killed_and_reopened("streaming");
}

fn killed_and_reopened(mode: &str) {
    let out = tempfile::tempdir().unwrap();
    let data = out.path().join("data");
    let blocks = 1500;
    #[rustfmt::skip]
    let sim_args = ["--mode", mode, "--coins", "4", "--btc-orders", "1000", "--orders-per-coin", "200",
        "--block-ms", "20", "--rate", "0.3", "--reject-ratio", "1", "--users", "50", "--blocks", "1500",
        "--time-scale", "60"];
    let (mut sim, info) = start_sim(&data, &sim_args, &out.path().join("sim.log"));
    let serve = |log: &str| {
        let server = start_serve(&data, &info, &out.path().join("snaps"), &["--mode", mode], &out.path().join(log));
        let base = format!("http://{}", server.wait_line("hlbook listening on", Duration::from_secs(30)));
        let admin = admin_base(&server);
        wait_health(&base, Duration::from_secs(60), |h| h["state"] == "live");
        (server, base, admin)
    };
    let (mut first, _, admin) = serve("serve1.log");
    // Killed while it writes a block every 20 ms.
    let before = wait_store(&admin, FIRST_HEIGHT + 300);
    first.kill();
    // Streaming: every fills line joined its block, even those read after the block was whole.
    assert_eq!(before["late_fills"], 0, "{before}");
    let (mut second, base, admin) = serve("serve2.log");
    // Streaming: the simulator's last block never completes (no later line).
    let last = FIRST_HEIGHT + blocks - 1 - u64::from(mode == "streaming");
    let status = wait_store(&admin, last);
    assert_eq!((&status["gaps"], &status["late_fills"]), (&json!(0), &json!(0)), "{status}");
    let folder = if mode == "streaming" { "streaming" } else { "by_block" };
    let lines: Vec<Value> =
        fills_lines_of(&data, folder).into_iter().filter(|l| l["block_number"].as_u64() <= Some(last)).collect();
    for coin in ["BTC", "@107"] {
        let list = trades(&lines, coin);
        for i in ["1m", "5m", "1h", "1d"] {
            let want = recount(coin, i, &list);
            assert_eq!(snapshot(&base, coin, i), want, "{coin} {i}: the store agrees with a recount of the files");
        }
    }
    sim.stop();
    second.stop();
}

#[test]
fn candles_older_than_the_store_are_seeded_from_an_info_server() {
    let out = tempfile::tempdir().unwrap();
    let data = out.path().join("data");
    #[rustfmt::skip]
    let sim_args = ["--coins", "3", "--btc-orders", "1000", "--orders-per-coin", "200", "--block-ms", "40",
        "--rate", "0.1", "--reject-ratio", "1", "--users", "25", "--blocks", "300"];
    let (mut sim, info, exchange) = start_sim_exchange(&data, &sim_args, &out.path().join("sim.log"));
    // hlsim's exchange server plays the official API: it answers candleSnapshot for the time before it began (its
    // node server, like a real node, does not).
    let seed = [
        "--set",
        &format!("store.seed_url=\"{exchange}\""),
        "--set",
        "store.seed_coins=[\"BTC\"]",
        "--set",
        "store.seed_pause_ms=0",
    ];
    let mut server = start_serve(&data, &info, &out.path().join("snaps"), &seed, &out.path().join("serve.log"));
    let base = format!("http://{}", server.wait_line("hlbook listening on", Duration::from_secs(30)));
    let admin = admin_base(&server);
    // 13 intervals (1M has no past candles here) of 100 candles each.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let store = loop {
        let s = get_json(&format!("{admin}/status")).map_or(Value::Null, |s| s["store"].clone());
        if s["seeded_candles"].as_u64() >= Some(1300) {
            break s;
        }
        assert!(std::time::Instant::now() < deadline, "not seeded: {s}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let first_ms = store["first_block_ms"].as_i64().unwrap();
    let hours = snapshot(&base, "BTC", "1h");
    let seeded: Vec<&Value> = hours.iter().filter(|c| c["T"].as_i64() < Some(first_ms)).collect();
    assert_eq!(seeded.len(), 100, "the hours before the store began, from the info server");
    assert!(seeded.iter().all(|c| c["n"] == 1 && c["o"] == "100.0"), "{:?}", seeded.last());
    let own = &hours[seeded.len()..];
    assert!(!own.is_empty() && own.iter().all(|c| c["T"].as_i64() >= Some(first_ms)), "then the store's own");
    assert_eq!(snapshot(&base, "@107", "1h").iter().filter(|c| c["T"].as_i64() < Some(first_ms)).count(), 0);
    sim.stop();
    server.stop();
}
