//! The README's client snippets, run unchanged against `hlbook serve` (fed by `hlsim`) with the real client
//! libraries: the official Python SDK, ccxt pro (Python), @nktkas/hyperliquid and hyperliquid_rust_sdk. Only
//! `HOST:8000` is replaced by the server's address; the Rust SDK cannot be given an address, so its test has the
//! server also listen on 127.0.0.1:3001, where the SDK's `BaseUrl::Localhost` points. Every l2Book message a library
//! hands to the snippet's callback (or channel) must equal, byte for byte as JSON, the frame of the same block time
//! that a plain WebSocket client of ours received from the same server; ccxt returns books of numbers instead, which
//! must hold the same levels as that frame, parsed.
//!
//! The libraries are installed by `make clients` (a Python venv, an npm folder and the Rust snippet built as a
//! program from server/tests/clients/rust_sdk, under `build/clients`, pinned versions, from the package registries)
//! and found through `HLBOOK_CLIENTS`. Without them the tests print why and pass, unless `HLBOOK_REQUIRE_CLIENTS=1`
//! (set by `make test`), which turns a missing library into a failure. The port the Rust SDK needs is bound by the
//! server itself, never probed first: when it is taken, the server cannot start and the test fails.

mod livefeed;
mod procs;
mod sdkrig;
mod wsclient;

use std::collections::HashMap;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use livefeed::LiveRig;
use sdkrig::{Run, busy_user, clients_dir, clients_dir_with, has_python_package, node_binary, skip, user_oids};
use serde_json::{Value, json};

/// Messages each library must hand over.
const WANT: usize = 5;
/// How long a library gets to deliver them (it starts with HTTP requests and a connect).
const LIMIT: Duration = Duration::from_secs(60);

/// The code of the README's fenced block whose first line contains `marker`.
fn readme_block(marker: &str) -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let mut blocks = readme.split("```").skip(1).step_by(2);
    let block = blocks
        .find(|b| b.lines().nth(1).is_some_and(|first| first.contains(marker)))
        .unwrap_or_else(|| panic!("README.md has no code block starting with {marker:?}"));
    block.split_once('\n').unwrap().1.to_string()
}

/// `readme_block` with `HOST:8000` set to `addr`.
fn readme_snippet(marker: &str, addr: &str) -> String {
    let code = readme_block(marker);
    assert!(code.contains("HOST:8000"), "the {marker} snippet has no HOST:8000 to point at the server");
    code.replace("HOST:8000", addr)
}

/// Subscribes our client to BTC's l2Book, runs the library until it exits, and returns what it printed and our
/// frames by block time.
fn run_beside_ours(feed: &LiveRig, library: impl FnMut() -> Run) -> (Vec<Value>, HashMap<u64, Value>) {
    let sub = json!({"type": "l2Book", "coin": "BTC"});
    let (printed, frames) = sdkrig::run_beside(feed, &[sub], LIMIT, library);
    let by_time = frames.into_iter().filter(|v| v["channel"] == "l2Book");
    (printed, by_time.map(|v| (v["data"]["time"].as_u64().unwrap(), v["data"].clone())).collect())
}

/// Each book the library delivered is one our client got for the same block time.
fn assert_same_books(books: &[&Value], ours: &HashMap<u64, Value>) {
    assert!(books.len() >= WANT, "{} books", books.len());
    for book in books {
        assert_eq!(book["coin"], "BTC");
        let levels = book["levels"].as_array().unwrap();
        assert!(!levels[0].as_array().unwrap().is_empty() && !levels[1].as_array().unwrap().is_empty(), "{book}");
        let time = book["time"].as_u64().unwrap();
        let mine = ours.get(&time).unwrap_or_else(|| panic!("no frame of ours at time {time}: {book}"));
        assert_eq!(*book, mine, "time {time}");
    }
}

/// Runs the README's Python block starting with `marker` through `harness` (in tests/clients) with the venv's
/// Python, beside our own client of a fresh feed.
fn run_python_snippet(dir: &Path, marker: &str, harness: &str) -> (Vec<Value>, HashMap<u64, Value>) {
    let feed = LiveRig::start("");
    let snippet = feed.dir.path().join("snippet.py");
    std::fs::write(&snippet, readme_snippet(marker, &feed.addr)).unwrap();
    let harness = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients").join(harness);
    run_beside_ours(&feed, || {
        Run::start(
            Command::new(dir.join("py/bin/python"))
                .arg(&harness)
                .arg(&snippet)
                .arg(WANT.to_string())
                .arg(LIMIT.as_secs().to_string()),
        )
    })
}

#[test]
fn python_sdk_snippet_gets_the_same_books() {
    let Some(dir) = clients_dir("the Python SDK", "py/bin/python") else { return };
    let (printed, ours) = run_python_snippet(&dir, "# Python SDK", "python_snippet.py");
    // The SDK hands over the whole message.
    assert!(printed.iter().all(|m| m["channel"] == "l2Book"), "{printed:?}");
    assert_same_books(&printed.iter().map(|m| &m["data"]).collect::<Vec<_>>(), &ours);
}

#[test]
fn nktkas_snippet_gets_the_same_books() {
    let Some(dir) = clients_dir("@nktkas/hyperliquid", "node/node_modules/@nktkas/hyperliquid") else { return };
    let feed = LiveRig::start("");
    // The snippet runs as an ES module beside node_modules; `console.log` prints JSON lines and ends the run.
    let prelude = format!(
        "const console = {{ n: 0, log(v) {{ process.stdout.write(JSON.stringify(v) + \"\\n\"); \
         if (++this.n >= {WANT}) process.exit(0); }} }};\nsetTimeout(() => process.exit(3), {});\n",
        LIMIT.as_millis()
    );
    let script = dir.join(format!("node/readme-{}.mjs", std::process::id()));
    std::fs::write(&script, prelude + &readme_snippet("// @nktkas/hyperliquid", &feed.addr)).unwrap();
    let node = node_binary(&dir);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_beside_ours(&feed, || Run::start(Command::new(&node).arg(&script)))
    }));
    let _ = std::fs::remove_file(&script);
    let (printed, ours) = result.unwrap_or_else(|e| std::panic::resume_unwind(e));
    assert_same_books(&printed.iter().collect::<Vec<_>>(), &ours);
}

/// The first line of README's Rust snippet (server/tests/clients/rust_sdk/build.rs looks for the same).
const RUST_MARKER: &str = "// hyperliquid_rust_sdk can only be pointed at";
/// Where the SDK's `BaseUrl::Localhost` (http://localhost:3001) leads; it takes no other address.
const SDK_LOCAL: &str = "127.0.0.1:3001";

#[test]
fn rust_sdk_snippet_gets_the_same_books() {
    // `make clients` builds the snippet as a program (server/tests/clients/rust_sdk) and copies it here.
    let Some(dir) = clients_dir("hyperliquid_rust_sdk", "rust_sdk_snippet") else { return };
    let program = dir.join("rust_sdk_snippet");
    let built = Command::new(&program).arg("--snippet").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&built.stdout),
        readme_block(RUST_MARKER),
        "{} was built from another README.md snippet: run `make clients`",
        program.display()
    );
    if let Some(why) = sdk_port_unusable() {
        return skip(&why);
    }
    let feed = LiveRig::start_also_on(&[SDK_LOCAL], "");
    let (printed, ours) = run_beside_ours(&feed, || {
        Run::start(Command::new(&program).arg(WANT.to_string()).arg(LIMIT.as_secs().to_string()))
    });
    assert_same_books(&printed.iter().collect::<Vec<_>>(), &ours);
}

/// Why the Rust SDK's localhost:3001 would not reach a server of ours listening on `SDK_LOCAL`, if so. Whether
/// `SDK_LOCAL` itself is free is not probed (a probe's port can be taken before the server binds it): the server's
/// own bind says, and a taken port fails the test with the server's error.
fn sdk_port_unusable() -> Option<String> {
    // The SDK tries the addresses `localhost` resolves to in order: none before ours may answer.
    let ours: SocketAddr = SDK_LOCAL.parse().unwrap();
    let addrs: Vec<SocketAddr> = ("localhost", 3001).to_socket_addrs().map(Iterator::collect).unwrap_or_default();
    let Some(at) = addrs.iter().position(|a| *a == ours) else {
        return Some(format!("localhost:3001 resolves to {addrs:?}, not {SDK_LOCAL}"));
    };
    let before = addrs[..at].iter().find(|a| TcpStream::connect_timeout(a, Duration::from_secs(1)).is_ok());
    before.map(|a| format!("{a} is taken; the Rust SDK's localhost:3001 would reach it before {SDK_LOCAL}"))
}

#[test]
fn ccxt_snippet_gets_the_same_books() {
    let Some(dir) = clients_dir_with("ccxt", |d| has_python_package(d, "ccxt")) else { return };
    let (printed, ours) = run_python_snippet(&dir, "# ccxt pro", "ccxt_snippet.py");
    assert!(printed.len() >= WANT, "{} books: {printed:?}", printed.len());
    // ccxt turns a frame into numbers, keeping every level it was sent: our frame of the same block, parsed.
    for book in &printed {
        assert_eq!(book["symbol"], "BTC/USDC:USDC", "{book}");
        let time = book["timestamp"].as_u64().unwrap_or_else(|| panic!("no timestamp: {book}"));
        let mine = ours.get(&time).unwrap_or_else(|| panic!("no frame of ours at time {time}: {book}"));
        assert_eq!(mine["coin"], "BTC");
        for (i, side) in ["bids", "asks"].into_iter().enumerate() {
            let levels = mine["levels"][i].as_array().unwrap();
            assert!(!levels.is_empty(), "{mine}");
            let num = |v: &Value| v.as_str().unwrap().parse::<f64>().unwrap();
            let want: Vec<(f64, f64)> = levels.iter().map(|l| (num(&l["px"]), num(&l["sz"]))).collect();
            let got: Vec<(f64, f64)> = book[side]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| (l[0].as_f64().unwrap(), l[1].as_f64().unwrap()))
                .collect();
            assert_eq!(got, want, "{side} at time {time}");
        }
    }
}

/// ccxt pro rejects every pending future of a connection on an error frame (docs/api.md): a watch_order_book
/// waiting while an unserved type is subscribed on the same connection raises our error once, and the next call
/// gets a book again, because hlbook keeps the connection and its subscriptions.
#[test]
fn ccxt_error_rejects_a_pending_book_once_and_books_go_on() {
    let Some(dir) = clients_dir_with("ccxt", |d| has_python_package(d, "ccxt")) else { return };
    let feed = LiveRig::start("");
    let snippet = feed.dir.path().join("snippet.py");
    std::fs::write(&snippet, readme_snippet("# ccxt pro", &feed.addr)).unwrap();
    let harness = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/ccxt_error_harness.py");
    let (printed, _) = run_beside_ours(&feed, || {
        Run::start(Command::new(dir.join("py/bin/python")).arg(&harness).arg(&snippet).arg(LIMIT.as_secs().to_string()))
    });
    let out = printed.last().unwrap_or_else(|| panic!("the harness printed nothing"));
    let last = out["attempts"].as_array().unwrap().last().unwrap();
    let book = last["book"].as_str().unwrap();
    assert!(book.starts_with("ExchangeError") && book.contains("webData2 is not served by hlbook"), "{out}");
    assert!(last["unserved"].as_str().unwrap().contains("not served"), "{out}");
    assert_eq!(out["after"]["symbol"], "BTC/USDC:USDC", "{out}");
    assert!(out["after"]["bids"].as_u64() > Some(0) && out["after"]["asks"].as_u64() > Some(0), "{out}");
}

/// ccxt pro's watch_orders and watch_my_trades, with only the URL changed, return the user's own orders and fills:
/// every order id and every trade's order id is one the simulator wrote for that user.
#[test]
fn ccxt_watches_a_users_orders_and_trades() {
    let Some(dir) = clients_dir_with("ccxt", |d| has_python_package(d, "ccxt")) else { return };
    let feed = LiveRig::start_with(&[("--users", "5"), ("--block-ms", "50")], "");
    let data = feed.dir.path().join("data");
    let user = busy_user(&data);
    let harness = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/ccxt_user_harness.py");
    let mut run =
        Run::start(Command::new(dir.join("py/bin/python")).arg(&harness).arg(&feed.addr).arg(&user).arg("3").arg("60"));
    let status = run.child.wait().unwrap();
    let printed: Vec<Value> = run.lines.try_iter().map(|l| serde_json::from_str(&l).unwrap()).collect();
    assert!(status.success(), "ccxt exited {status}: {}\nprinted {printed:?}", run.stderr());
    // Read after ccxt is done, so every order it was sent is on disk.
    let oids = user_oids(&data, &user);
    for kind in ["orders", "myTrades"] {
        let results: Vec<&Value> = printed.iter().filter(|p| p["kind"] == kind).collect();
        assert_eq!(results.len(), 3, "{kind}: {printed:?}");
        for r in results {
            let items = r["items"].as_array().unwrap();
            assert!(!items.is_empty(), "{kind}: {r}");
            for i in items {
                let oid = if kind == "orders" { &i["id"] } else { &i["order"] };
                let oid = oid.as_str().unwrap_or_else(|| panic!("{kind}: no id in {i}"));
                assert!(oids.contains(oid), "{kind}: {oid} is not an order of {user}: {i}");
                // ccxt names a coin it maps (BTC → BTC/USDC:USDC) and keeps the raw coin otherwise (hlsim's
                // spot `@107`): either way the symbol comes from the frame.
                assert!(i["symbol"].as_str().is_some_and(|s| !s.is_empty()), "{kind}: {i}");
            }
        }
    }
}

/// ccxt pro's watch_my_liquidations, with only the URL changed, returns the user's liquidations: ccxt keeps the
/// userFills fills whose `liquidation.liquidatedUser` is the user, so each result it gives is a fill the simulator
/// wrote for that user as the liquidated side (`hlsim --write-liquidations`), the first from the userFills snapshot.
#[test]
fn ccxt_watches_a_users_liquidations() {
    let Some(dir) = clients_dir_with("ccxt", |d| has_python_package(d, "ccxt")) else { return };
    let feed = LiveRig::start_with(&[("--users", "5"), ("--block-ms", "50"), ("--write-liquidations", "")], "");
    let data = feed.dir.path().join("data");
    let user = liquidated_user(&data);
    let harness = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/ccxt_liquidations_harness.py");
    let mut run =
        Run::start(Command::new(dir.join("py/bin/python")).arg(&harness).arg(&feed.addr).arg(&user).arg("2").arg("60"));
    let status = run.child.wait().unwrap();
    let printed: Vec<Value> = run.lines.try_iter().map(|l| serde_json::from_str(&l).unwrap()).collect();
    assert!(status.success(), "ccxt exited {status}: {}\nprinted {printed:?}", run.stderr());
    let tids = liquidation_tids(&data, &user);
    assert_eq!(printed.len(), 2, "{printed:?}");
    for r in &printed {
        let items = r["items"].as_array().unwrap();
        assert!(!items.is_empty(), "{r}");
        for i in items {
            assert!(tids.contains(&i["tid"].as_u64().unwrap()), "not a liquidation fill of {user}: {i}");
            assert!(i["price"].as_f64().is_some_and(|p| p > 0.0) && i["contracts"].as_f64().is_some(), "{i}");
        }
    }
}

/// The tids of `user`'s fills as the liquidated side.
fn liquidation_tids(data: &Path, user: &str) -> std::collections::HashSet<u64> {
    let mut out = std::collections::HashSet::new();
    for line in procs::node_json_lines(&data.join("node_fills_by_block")) {
        for ev in line["events"].as_array().unwrap() {
            let liquidated = ev[1]["liquidation"]["liquidatedUser"].as_str().map(str::to_lowercase);
            if ev[0].as_str().map(str::to_lowercase).as_deref() == Some(user) && liquidated.as_deref() == Some(user) {
                out.insert(ev[1]["tid"].as_u64().unwrap());
            }
        }
    }
    out
}

/// A user the simulator has liquidated, once it has.
fn liquidated_user(data: &Path) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        for line in procs::node_json_lines(&data.join("node_fills_by_block")) {
            for ev in line["events"].as_array().unwrap() {
                if let Some(u) = ev[1]["liquidation"]["liquidatedUser"].as_str() {
                    return u.to_lowercase();
                }
            }
        }
        assert!(std::time::Instant::now() < deadline, "the simulator liquidated nobody in 60 s");
        std::thread::sleep(Duration::from_millis(200));
    }
}
