//! permessage-deflate against real clients, with the real binaries: `hlsim` writes a market and `hlbook serve`
//! follows it. Python's `websockets` library (the one most Python bots use) connects with and without compression;
//! a hand-built client over a plain TCP socket sends exactly the compressed frames a test needs, a decompression
//! bomb among them.
//!
//! Needs `/usr/bin/python3` with `websockets` (Debian: python3-websockets, installed by `make setup`); without it the
//! Python tests print why and pass without checking anything.

mod livefeed;
mod procs;

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress};
use livefeed::LiveRig;
use serde_json::{Value, json};

const PYTHON: &str = "/usr/bin/python3";
const TAIL: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

// ---- the Python client ----

/// Whether the Python client can run here; prints why not.
fn python_ready() -> bool {
    let ok = Command::new(PYTHON)
        .args(["-c", "import websockets"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        procs::skip(&format!("{PYTHON} with the websockets module is missing (apt-get install python3-websockets)"));
    }
    ok
}

/// One run of tests/py/ws_client.py.
#[derive(Debug)]
struct PyClient {
    child: Child,
    out: std::sync::mpsc::Receiver<String>,
    args: String,
}

/// What a Python client saw.
#[derive(Debug)]
struct PyRun {
    /// The negotiated `Sec-WebSocket-Extensions`, None when the server sent none.
    extensions: Option<String>,
    /// Every server message, as received.
    texts: Vec<String>,
    /// Its closing summary.
    done: Value,
}

impl PyClient {
    fn spawn(url: &str, subs: &Value, extra: &[&str]) -> PyClient {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/ws_client.py");
        let mut child = Command::new(PYTHON)
            .arg(script)
            .arg(url)
            .arg(subs.to_string())
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {PYTHON} {script}: {e}"));
        let stdout = child.stdout.take().unwrap();
        let (tx, out) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        PyClient { child, out, args: format!("{url} {subs} {extra:?}") }
    }

    /// Waits (bounded) for the client to finish and parses what it printed.
    fn finish(mut self, timeout: Duration) -> PyRun {
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("python client ({}) did not finish within {timeout:?}", self.args);
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stderr = String::new();
        let _ = self.child.stderr.take().unwrap().read_to_string(&mut stderr);
        assert!(status.success(), "python client ({}) failed: {status}\n{stderr}", self.args);
        let (mut extensions, mut texts, mut done) = (None, Vec::new(), Value::Null);
        // The reader thread ends with the child's stdout, so this drains everything it printed.
        for line in &self.out {
            let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("python printed {line:?}: {e}"));
            match v["event"].as_str() {
                Some("open") => extensions = v["extensions"].as_str().map(str::to_string),
                Some("recv") => texts.push(v["text"].as_str().expect("recv text").to_string()),
                Some("done") => done = v,
                _ => panic!("unexpected python line {line}"),
            }
        }
        assert!(done.is_object(), "python client ({}) printed no summary\n{stderr}", self.args);
        PyRun { extensions, texts, done }
    }
}

impl PyRun {
    fn parsed(&self) -> Vec<Value> {
        self.texts.iter().map(|t| serde_json::from_str(t).unwrap_or_else(|e| panic!("not JSON: {t}: {e}"))).collect()
    }

    /// Data frames by (channel, coin, block time or first trade id).
    /// Shared data frames by key. A coin's first trades frame is left out: it is that subscription's own recent
    /// trades (docs/api.md), which depend on when it subscribed, not a block's frame shared by everyone.
    fn by_key(&self) -> BTreeMap<(String, String, u64), Value> {
        let mut keyed = BTreeMap::new();
        let mut recent_seen = std::collections::BTreeSet::new();
        for v in self.parsed() {
            let Some(k) = frame_key(&v) else { continue };
            if k.0 == "trades" && recent_seen.insert(k.1.clone()) {
                continue;
            }
            if let Some(before) = keyed.insert(k.clone(), v.clone()) {
                assert_eq!(before, v, "one client got two different frames for {k:?}");
            }
        }
        keyed
    }

    fn count(&self, channel: &str) -> usize {
        self.parsed().iter().filter(|v| v["channel"] == channel).count()
    }
}

/// What identifies a data frame across connections.
fn frame_key(v: &Value) -> Option<(String, String, u64)> {
    let channel = v["channel"].as_str()?;
    let d = &v["data"];
    let (coin, at) = match channel {
        "l2Book" | "bbo" => (d["coin"].as_str()?, d["time"].as_u64()?),
        "trades" => (d[0]["coin"].as_str()?, d[0]["tid"].as_u64()?),
        _ => return None,
    };
    Some((channel.to_string(), coin.to_string(), at))
}

fn subs_for(coins: &[&str], types: &[&str]) -> Value {
    Value::Array(coins.iter().flat_map(|c| types.iter().map(move |t| json!({"type": t, "coin": c}))).collect())
}

/// Every subscription got its ack echoing it, and the first message answered the ping.
fn assert_acked(run: &PyRun, subs: &Value, pinged: bool) {
    let msgs = run.parsed();
    if pinged {
        assert_eq!(msgs.first(), Some(&json!({"channel": "pong"})), "the ping is answered first");
    }
    for s in subs.as_array().unwrap() {
        let acked = msgs.iter().any(|m| {
            m["channel"] == "subscriptionResponse"
                && m["data"]["method"] == "subscribe"
                && m["data"]["subscription"]["type"] == s["type"]
                && m["data"]["subscription"]["coin"] == s["coin"]
        });
        assert!(acked, "no ack for {s}; got {} messages", msgs.len());
    }
    let errors: Vec<_> = msgs.iter().filter(|m| m["channel"] == "error").collect();
    assert!(errors.is_empty(), "error frames: {errors:?}");
}

#[test]
fn python_deflate_and_plain_clients_get_identical_frames() {
    if !python_ready() {
        return;
    }
    let feed = LiveRig::start("");
    let coins = ["BTC", "ETH"];
    let subs = subs_for(&coins, &["l2Book", "trades", "bbo"]);
    let url = feed.ws_url();
    // Both at once, so both see the same blocks; the deflate one also pings, and sends everything compressed.
    let deflate = PyClient::spawn(&url, &subs, &["--compression", "deflate", "--seconds", "6", "--ping"]);
    let plain = PyClient::spawn(&url, &subs, &["--compression", "none", "--seconds", "6", "--ping"]);
    let (deflate, plain) = (deflate.finish(Duration::from_secs(60)), plain.finish(Duration::from_secs(60)));

    let ext = deflate.extensions.clone().unwrap_or_default();
    assert!(ext.starts_with("permessage-deflate"), "deflate client negotiated {ext:?}");
    assert!(ext.contains("server_no_context_takeover"), "shared frames need server_no_context_takeover: {ext:?}");
    assert_eq!(plain.extensions, None, "the plain client offered nothing and must get nothing");
    let sent = deflate.done["sent"].as_u64().unwrap();
    assert_eq!(sent, 1 + 6, "{}", deflate.done);
    assert_eq!(deflate.done["sent_compressed"], sent, "every client message went out compressed: {}", deflate.done);
    assert_eq!(plain.done["sent_compressed"], 0, "{}", plain.done);
    // The library may have read ahead of what it handed on, so it can have decoded more than it delivered.
    let got = deflate.done["received"].as_u64().unwrap();
    assert!(
        got > 0 && deflate.done["received_compressed"].as_u64() >= Some(got),
        "every server message came compressed: {}",
        deflate.done
    );
    assert_eq!(plain.done["received_compressed"], 0, "{}", plain.done);
    assert_acked(&deflate, &subs, true);
    assert_acked(&plain, &subs, true);

    let (a, b) = (deflate.by_key(), plain.by_key());
    for (k, v) in a.iter().chain(b.iter()) {
        assert!(coins.contains(&k.1.as_str()), "a frame for a coin nobody subscribed to: {v}");
    }
    let mut common = BTreeMap::<&str, usize>::new();
    for (k, va) in &a {
        if let Some(vb) = b.get(k) {
            assert_eq!(va, vb, "compressed and plain clients got different frames for {k:?}");
            *common.entry(k.0.as_str()).or_default() += 1;
        }
    }
    let total: usize = common.values().sum();
    let summary =
        format!("common frames by channel {common:?}; deflate client {} frames, plain client {}", a.len(), b.len());
    assert!(total >= 20, "too few frames seen by both: {summary}");
    for coin in coins {
        assert!(
            a.keys().chain(b.keys()).any(|k| k.0 == "l2Book" && k.1 == coin && b.contains_key(k) && a.contains_key(k)),
            "no l2Book frame of {coin} seen by both: {summary}"
        );
    }
    assert!(common.get("l2Book").copied().unwrap_or(0) >= 10, "{summary}");
    assert!(deflate.count("l2Book") >= 10 && plain.count("l2Book") >= 10, "{summary}");
    eprintln!("{summary}");
}

// ---- a client built by hand on a TCP socket ----

/// A WebSocket client that writes and reads raw frames, so a test controls every bit.
#[derive(Debug)]
struct RawWs {
    stream: TcpStream,
    buf: Vec<u8>,
    /// The server's 101 response head.
    response: String,
}

#[derive(Debug)]
struct RawFrame {
    fin: bool,
    rsv1: bool,
    opcode: u8,
    payload: Vec<u8>,
}

/// How a read ended without a frame.
#[derive(Debug, PartialEq)]
enum Gone {
    Eof,
    Reset,
}

impl RawWs {
    /// Upgrades a fresh TCP connection, offering `extensions` when given.
    fn connect(addr: &str, extensions: Option<&str>) -> RawWs {
        let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        stream.set_nodelay(true).unwrap();
        let offer = extensions.map(|e| format!("Sec-WebSocket-Extensions: {e}\r\n")).unwrap_or_default();
        // The key and accept value are the example of RFC 6455 section 1.3.
        let req = format!(
            "GET /ws HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{offer}\r\n"
        );
        stream.write_all(req.as_bytes()).unwrap();
        let mut ws = RawWs { stream, buf: Vec::new(), response: String::new() };
        let deadline = Instant::now() + Duration::from_secs(10);
        let end = loop {
            if let Some(i) = ws.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            assert!(ws.fill(deadline).is_ok(), "connection closed during the handshake");
        };
        ws.response = String::from_utf8_lossy(&ws.buf[..end]).into_owned();
        ws.buf.drain(..end);
        assert!(ws.response.starts_with("HTTP/1.1 101"), "upgrade refused: {}", ws.response);
        assert!(ws.header("sec-websocket-accept") == Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), "{}", ws.response);
        ws
    }

    /// A response header's value (name in lower case).
    fn header(&self, name: &str) -> Option<&str> {
        self.response.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    /// Reads more bytes; Err when the server closed the connection. Panics at the deadline.
    fn fill(&mut self, deadline: Instant) -> Result<(), Gone> {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "no answer from the server in time");
        self.stream.set_read_timeout(Some(left)).unwrap();
        let mut chunk = vec![0u8; 64 << 10];
        match self.stream.read(&mut chunk) {
            Ok(0) => Err(Gone::Eof),
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                Ok(())
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                panic!("no answer from the server in time")
            }
            Err(e) if matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted) => Err(Gone::Reset),
            Err(e) => panic!("read: {e}"),
        }
    }

    /// Sends one masked frame.
    fn send(&mut self, fin: bool, rsv1: bool, opcode: u8, payload: &[u8]) {
        let key = [0x37u8, 0xfa, 0x21, 0x3d];
        let mut f = vec![u8::from(fin) << 7 | u8::from(rsv1) << 6 | opcode];
        match payload.len() {
            n @ 0..=125 => f.push(0x80 | n as u8),
            n @ 126..=0xffff => {
                f.push(0x80 | 126);
                f.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                f.push(0x80 | 127);
                f.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        f.extend_from_slice(&key);
        f.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
        self.stream.write_all(&f).unwrap();
    }

    /// A whole message in one frame, compressed with `c` when given.
    fn send_text(&mut self, text: &str, c: Option<&mut Compress>) {
        match c {
            Some(c) => self.send(true, true, 1, &deflate(c, text.as_bytes())),
            None => self.send(true, false, 1, text.as_bytes()),
        }
    }

    /// The next frame, or how the connection ended.
    fn recv(&mut self, deadline: Instant) -> Result<RawFrame, Gone> {
        loop {
            if let Some((frame, used)) = parse_frame(&self.buf) {
                self.buf.drain(..used);
                return Ok(frame);
            }
            self.fill(deadline)?;
        }
    }

    /// The next text message as JSON, inflated when compressed; skips nothing.
    fn recv_json(&mut self, deadline: Instant) -> Value {
        let f = self.recv(deadline).unwrap_or_else(|g| panic!("connection ended ({g:?}) while waiting for a message"));
        assert_eq!(f.opcode, 1, "expected a text frame, got {f:?}");
        assert!(f.fin, "the server sends every message in one frame");
        let bytes = if f.rsv1 { inflate(&f.payload) } else { f.payload };
        serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("not JSON: {}: {e}", String::from_utf8_lossy(&bytes)))
    }

    /// Reads until a message satisfies `pred` and returns it.
    fn wait_for(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            assert!(Instant::now() < deadline, "no {what} within 30 s");
            let v = self.recv_json(deadline);
            if pred(&v) {
                return v;
            }
        }
    }
}

/// One unmasked server frame at the start of `b`, and its length.
fn parse_frame(b: &[u8]) -> Option<(RawFrame, usize)> {
    let (b0, b1) = (*b.first()?, *b.get(1)?);
    assert_eq!(b1 & 0x80, 0, "server frames are never masked");
    let (len, at) = match b1 & 0x7f {
        126 => (u16::from_be_bytes(b.get(2..4)?.try_into().unwrap()) as usize, 4),
        127 => (u64::from_be_bytes(b.get(2..10)?.try_into().unwrap()) as usize, 10),
        n => (n as usize, 2),
    };
    let payload = b.get(at..at + len)?.to_vec();
    Some((RawFrame { fin: b0 & 0x80 != 0, rsv1: b0 & 0x40 != 0, opcode: b0 & 0x0f, payload }, at + len))
}

/// Raw deflate of one message as RFC 7692 sends it: sync flush, trailing 00 00 ff ff removed. `c` keeps its
/// window across calls (context takeover) unless the caller resets it.
fn deflate(c: &mut Compress, data: &[u8]) -> Vec<u8> {
    let start = c.total_in();
    let mut out = Vec::new();
    loop {
        let used = (c.total_in() - start) as usize;
        out.reserve(64 << 10);
        c.compress_vec(&data[used..], &mut out, FlushCompress::Sync).unwrap();
        if (c.total_in() - start) as usize == data.len() && out.len() < out.capacity() {
            break;
        }
    }
    assert!(out.ends_with(&TAIL), "a sync flush ends with 00 00 ff ff");
    out.truncate(out.len() - TAIL.len());
    out
}

/// Inflates one server message (the server promises no context takeover, so each starts afresh).
fn inflate(payload: &[u8]) -> Vec<u8> {
    let mut d = Decompress::new(false);
    let input = [payload, &TAIL].concat();
    let mut out = Vec::with_capacity(payload.len() * 8 + 1024);
    loop {
        let used = d.total_in() as usize;
        d.decompress_vec(&input[used..], &mut out, FlushDecompress::Sync).expect("valid deflate from the server");
        if d.total_in() as usize == input.len() && out.len() < out.capacity() {
            return out;
        }
        out.reserve(out.capacity());
    }
}

fn compressor() -> Compress {
    Compress::new(Compression::default(), false)
}

const PING: &str = r#"{"method":"ping"}"#;

#[test]
fn raw_compressed_client_frames_are_inflated() {
    let feed = LiveRig::start("");
    let mut ws = RawWs::connect(&feed.addr, Some("permessage-deflate; client_max_window_bits"));
    let ext = ws.header("sec-websocket-extensions").unwrap_or_default().to_string();
    assert!(ext.starts_with("permessage-deflate") && ext.contains("server_no_context_takeover"), "{}", ws.response);
    let deadline = || Instant::now() + Duration::from_secs(30);

    // A compressed ping; the pong comes back compressed.
    let mut c = compressor();
    let first = deflate(&mut c, PING.as_bytes());
    ws.send(true, true, 1, &first);
    let f = ws.recv(deadline()).expect("an answer to the compressed ping");
    assert!(f.rsv1 && f.opcode == 1 && f.fin, "the pong is one compressed text frame: {f:?}");
    assert_eq!(String::from_utf8(inflate(&f.payload)).unwrap(), r#"{"channel":"pong"}"#);

    // The same ping again with the window kept (the client offered no client_no_context_takeover): it now encodes
    // as a back-reference to the first, which the server can only read if it kept its inflate window too.
    let second = deflate(&mut c, PING.as_bytes());
    assert_ne!(first, second, "the second ping refers back to the first");
    ws.send(true, true, 1, &second);
    assert_eq!(ws.recv_json(deadline()), json!({"channel": "pong"}));

    // A plain message on the same connection: RSV1 is per message.
    ws.send_text(PING, None);
    assert_eq!(ws.recv_json(deadline()), json!({"channel": "pong"}));

    // A compressed subscribe split over two frames (RSV1 on the first only): ack, then the book.
    let sub = deflate(&mut c, br#"{"method":"subscribe","subscription":{"type":"l2Book","coin":"BTC"}}"#);
    let (head, rest) = sub.split_at(sub.len() / 2);
    ws.send(false, true, 1, head);
    ws.send(true, false, 0, rest);
    let ack = ws.recv_json(deadline());
    assert_eq!(ack["channel"], "subscriptionResponse", "{ack}");
    assert_eq!(ack["data"]["subscription"]["coin"], "BTC", "{ack}");
    let book = ws.recv_json(deadline());
    assert_eq!(book["channel"], "l2Book", "the first book follows the ack: {book}");
    assert_eq!(book["data"]["coin"], "BTC");
    let levels = book["data"]["levels"].as_array().unwrap();
    assert!(!levels[0].as_array().unwrap().is_empty() && !levels[1].as_array().unwrap().is_empty(), "{book}");
}

/// The process's resident set in kB: the peak since `clear_refs` was last written when `peak`.
fn rss_kb(pid: u32, peak: bool) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = if peak { "VmHWM:" } else { "VmRSS:" };
    let line = status.lines().find(|l| l.starts_with(field)).unwrap_or_else(|| panic!("no {field} in {status}"));
    line[field.len()..].trim().trim_end_matches("kB").trim().parse().unwrap()
}

#[test]
fn decompression_bomb_closes_only_that_connection() {
    const MAX: usize = 65536;
    let feed = LiveRig::start(&format!("max_frame_bytes = {MAX}"));
    let pid = feed.server.pid().expect("server running");
    let deadline = || Instant::now() + Duration::from_secs(30);

    // A bystander, plain, subscribed before the bomb.
    let mut bystander = RawWs::connect(&feed.addr, None);
    bystander.send_text(r#"{"method":"subscribe","subscription":{"type":"l2Book","coin":"BTC"}}"#, None);
    bystander.wait_for("l2Book frame before the bomb", |v| v["channel"] == "l2Book");

    // 50 MB of spaces deflate to about 50 KB: under the limit on the wire, 800 times over it once inflated.
    let inflated = 50usize << 20;
    let mut c = Compress::new(Compression::best(), false);
    let bomb = deflate(&mut c, &vec![b' '; inflated]);
    assert!(bomb.len() < MAX, "the bomb itself must pass the wire limit: {} bytes", bomb.len());

    // Measure the peak resident set from here on (writing 5 to clear_refs resets VmHWM; VmRSS if it cannot).
    let peak = std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok();
    let before = rss_kb(pid, false);

    let mut bomber = RawWs::connect(&feed.addr, Some("permessage-deflate"));
    assert!(bomber.header("sec-websocket-extensions").is_some(), "{}", bomber.response);
    bomber.send(true, true, 1, &bomb);
    let end = loop {
        match bomber.recv(deadline()) {
            Ok(f) if f.opcode == 8 => break format!("close frame {:?}", f.payload.get(..2)),
            Ok(f) => assert_ne!(f.opcode, 1, "the server answered the bomb with data: {f:?}"),
            Err(g) => break format!("{g:?}"),
        }
    };
    eprintln!("bomb connection ended with {end}");

    // The server is up and healthy, and the bystander still gets its book and its pong.
    let health = reqwest::blocking::get(format!("{}/health", feed.base)).expect("health after the bomb");
    assert_eq!(health.status(), 200, "{:?}", health.text());
    bystander.send_text(PING, None);
    bystander.wait_for("pong on the bystander after the bomb", |v| *v == json!({"channel": "pong"}));
    bystander.wait_for("l2Book frame after the bomb", |v| v["channel"] == "l2Book");

    // A new compressed connection works too.
    let mut next = RawWs::connect(&feed.addr, Some("permessage-deflate"));
    next.send(true, true, 1, &deflate(&mut compressor(), PING.as_bytes()));
    assert_eq!(next.recv_json(deadline()), json!({"channel": "pong"}));

    let after = rss_kb(pid, peak);
    let grew_kb = after.saturating_sub(before);
    eprintln!("server resident set: {before} kB before the bomb, {after} kB {} after", if peak { "peak" } else { "" });
    assert!(
        grew_kb < (inflated as u64 >> 10) / 2,
        "the server's memory grew by {grew_kb} kB for a {} kB bomb: it inflated past the limit",
        inflated >> 10
    );
    assert!(feed.server_log().lines().all(|l| !l.contains("panicked")), "{}", feed.server_log());
}

#[test]
fn compression_switched_off_server_wide() {
    let feed = LiveRig::start("compression = false");

    // A raw client that offers deflate gets no extension, and a compressed frame is then a protocol error.
    let mut raw = RawWs::connect(&feed.addr, Some("permessage-deflate; client_max_window_bits"));
    assert_eq!(raw.header("sec-websocket-extensions"), None, "{}", raw.response);
    raw.send_text(PING, None);
    assert_eq!(raw.recv_json(Instant::now() + Duration::from_secs(30)), json!({"channel": "pong"}));
    raw.send(true, true, 1, &deflate(&mut compressor(), PING.as_bytes()));
    // The next thing from the server is a close frame or the end of the connection.
    if let Ok(f) = raw.recv(Instant::now() + Duration::from_secs(30)) {
        assert_eq!(f.opcode, 8, "RSV1 without the extension must fail the connection, got {f:?}");
    }

    if !python_ready() {
        return;
    }
    let subs = subs_for(&["BTC"], &["l2Book"]);
    let run = PyClient::spawn(
        &feed.ws_url(),
        &subs,
        &["--compression", "deflate", "--ping", "--frames", "3", "--seconds", "30"],
    )
    .finish(Duration::from_secs(60));
    assert_eq!(run.extensions, None, "compression is off: nothing may be negotiated");
    assert_eq!(run.done["sent_compressed"], 0, "{}", run.done);
    assert_eq!(run.done["received_compressed"], 0, "{}", run.done);
    assert_eq!(run.done["reason"], "frames", "three l2Book frames arrive: {}", run.done);
    assert_acked(&run, &subs, true);
    assert!(run.count("l2Book") >= 3, "{:?}", run.texts);
}
