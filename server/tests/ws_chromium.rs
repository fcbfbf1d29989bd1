//! A real browser as the client: headless Chromium loads a small page whose script opens a WebSocket to the server
//! (fed by `hlsim`), subscribes to BTC's l2Book and writes what it received into the page, which Chromium then
//! dumps. Chromium always offers permessage-deflate, so one test runs against the default server (compression
//! negotiated) and one against a server with `compression = false` (nothing negotiated); the page reports the
//! browser's `WebSocket.extensions` so the test sees which one it got.
//!
//! Needs `chromium` on PATH (Debian: chromium, installed by `make setup`); without it the tests print why and pass
//! without checking anything.

mod livefeed;
mod procs;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use livefeed::LiveRig;
use serde_json::Value;

/// The page. `--dump-dom` prints the DOM once the load event fired, and the iframe `/hold` keeps the load event
/// back until the script has its result (it fetches `/done`), or until the page server gives up.
const PAGE: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>hlbook l2Book</title></head>
<body>
<pre id="result">pending</pre>
<script>
const out = { extensions: null, order: [], ack: null, books: [], other: [], error: null, closed: null };
let finished = false;
function finish() {
  if (finished) return;
  finished = true;
  document.getElementById("result").textContent = "RESULT" + JSON.stringify(out) + "END";
  try { ws.close(); } catch (e) {}
  fetch("/done");
}
const ws = new WebSocket("ws://WS_ADDR/ws");
ws.onopen = () => {
  out.extensions = ws.extensions;
  ws.send(JSON.stringify({ method: "subscribe", subscription: { type: "l2Book", coin: "BTC" } }));
};
ws.onmessage = (e) => {
  const m = JSON.parse(e.data);
  out.order.push(m.channel);
  if (m.channel === "subscriptionResponse") out.ack = m;
  else if (m.channel === "l2Book") out.books.push(m.data);
  else out.other.push(m);
  if (out.books.length >= 3) finish();
};
ws.onerror = () => { out.error = "websocket error"; };
ws.onclose = (e) => { out.closed = e.code; finish(); };
</script>
<iframe src="/hold"></iframe>
</body></html>
"#;

/// How long the page server holds `/hold` when the page never reports.
const HOLD: Duration = Duration::from_secs(45);

/// The first `chromium` on PATH.
fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join("chromium")).find(|p| p.is_file())
}

/// Serves the page on a loopback port until dropped.
#[derive(Debug)]
struct PageServer {
    addr: String,
    stop: Arc<AtomicBool>,
    done: Arc<(Mutex<bool>, Condvar)>,
}

impl PageServer {
    fn start(page: String) -> PageServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new((Mutex::new(false), Condvar::new()));
        let (page, stopping, done2) = (Arc::new(page), stop.clone(), done.clone());
        std::thread::spawn(move || {
            while !stopping.load(SeqCst) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        let (page, done) = (page.clone(), done2.clone());
                        std::thread::spawn(move || serve_one(conn, &page, &done));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        PageServer { addr, stop, done }
    }

    fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

impl Drop for PageServer {
    fn drop(&mut self) {
        self.stop.store(true, SeqCst);
        let (lock, cv) = &*self.done;
        *lock.lock().unwrap() = true;
        cv.notify_all();
    }
}

/// One HTTP/1.1 request: `/` is the page, `/done` releases `/hold`, `/hold` answers once released.
fn serve_one(mut conn: TcpStream, page: &str, done: &(Mutex<bool>, Condvar)) {
    conn.set_nonblocking(false).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match conn.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&head);
    let path = head.split_whitespace().nth(1).unwrap_or("/");
    let (status, kind, body) = match path {
        "/" => ("200 OK", "text/html; charset=utf-8", page.to_string()),
        "/done" => {
            let (lock, cv) = done;
            *lock.lock().unwrap() = true;
            cv.notify_all();
            ("200 OK", "text/plain", "done".to_string())
        }
        "/hold" => {
            let (lock, cv) = done;
            let guard = lock.lock().unwrap();
            let _ = cv.wait_timeout_while(guard, HOLD, |released| !*released).unwrap();
            ("200 OK", "text/plain", "released".to_string())
        }
        _ => ("404 Not Found", "text/plain", "not here".to_string()),
    };
    let resp = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = conn.write_all(resp.as_bytes());
}

/// Loads the page in headless Chromium and returns the page's result object.
fn run_page(chromium: &PathBuf, feed: &LiveRig) -> Value {
    let server = PageServer::start(PAGE.replace("WS_ADDR", &feed.addr));
    let tmp = tempfile::tempdir().unwrap();
    let stderr = std::fs::File::create(tmp.path().join("chromium.log")).unwrap();
    let mut child = Command::new(chromium)
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
        ])
        .arg(format!("--user-data-dir={}", tmp.path().join("profile").display()))
        .arg("--dump-dom")
        .arg(server.url())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", chromium.display()));
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let log = || std::fs::read_to_string(tmp.path().join("chromium.log")).unwrap_or_default();
    let deadline = Instant::now() + HOLD + Duration::from_secs(45);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within {:?}; its log:\n{}", HOLD + Duration::from_secs(45), log());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let dom = reader.join().unwrap();
    assert!(status.success(), "chromium failed: {status}; its log:\n{}", log());
    let Some(start) = dom.find("RESULT{") else {
        panic!("the page never wrote its result; dumped DOM:\n{dom}\nchromium log:\n{}", log());
    };
    let rest = &dom[start + "RESULT".len()..];
    let json = &rest[..rest.find("END").expect("result end marker")];
    let json = json.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&");
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("page result is not JSON ({e}): {json}"))
}

/// Ack first, then at least three BTC books with sane levels.
fn assert_books(out: &Value) {
    assert!(out["error"].is_null() && out["other"].as_array().is_some_and(Vec::is_empty), "{out}");
    assert_eq!(out["order"][0], "subscriptionResponse", "the ack comes before any data: {out}");
    let ack = &out["ack"]["data"];
    assert_eq!(ack["method"], "subscribe", "{out}");
    assert_eq!(ack["subscription"]["type"], "l2Book", "{out}");
    assert_eq!(ack["subscription"]["coin"], "BTC", "{out}");
    let books = out["books"].as_array().unwrap();
    assert!(books.len() >= 3, "at least three l2Book frames: {out}");
    for b in books {
        assert_eq!(b["coin"], "BTC", "{b}");
        assert!(b["time"].as_u64().is_some(), "{b}");
        let side = |i: usize| -> Vec<f64> {
            let levels = b["levels"][i].as_array().unwrap_or_else(|| panic!("levels[{i}] in {b}"));
            assert!(!levels.is_empty(), "the simulated BTC book has both sides: {b}");
            levels
                .iter()
                .map(|l| {
                    assert!(l["n"].as_u64().is_some_and(|n| n > 0), "{l}");
                    assert!(l["sz"].as_str().and_then(|s| s.parse::<f64>().ok()).is_some(), "{l}");
                    l["px"].as_str().and_then(|s| s.parse::<f64>().ok()).unwrap_or_else(|| panic!("px in {l}"))
                })
                .collect()
        };
        let (bids, asks) = (side(0), side(1));
        assert!(bids.windows(2).all(|w| w[0] > w[1]), "bids best first: {b}");
        assert!(asks.windows(2).all(|w| w[0] < w[1]), "asks best first: {b}");
        assert!(bids[0] < asks[0], "the book is not crossed: {b}");
    }
}

#[test]
fn chromium_gets_l2book_with_compression() {
    let Some(chromium) = chromium() else {
        procs::skip("no chromium on PATH (apt-get install chromium)");
        return;
    };
    let feed = LiveRig::start("");
    let out = run_page(&chromium, &feed);
    assert_books(&out);
    let ext = out["extensions"].as_str().unwrap_or_default();
    assert!(ext.starts_with("permessage-deflate"), "Chromium offers deflate and the server accepts: {out}");
    assert!(ext.contains("server_no_context_takeover"), "{out}");
    eprintln!("chromium negotiated {ext:?} and got {} l2Book frames", out["books"].as_array().map_or(0, Vec::len));
}

#[test]
fn chromium_gets_l2book_without_compression() {
    let Some(chromium) = chromium() else {
        procs::skip("no chromium on PATH (apt-get install chromium)");
        return;
    };
    let feed = LiveRig::start("compression = false");
    let out = run_page(&chromium, &feed);
    assert_books(&out);
    assert_eq!(out["extensions"], "", "compression is off server-wide: nothing negotiated: {out}");
    eprintln!("chromium negotiated nothing and got {} l2Book frames", out["books"].as_array().map_or(0, Vec::len));
}
