//! Helpers for the audit tests: a blocking WebSocket client that records every text message with its receive
//! time, `/status?blocks=N` collection by height, and medians.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::stream::MaybeTlsStream;
use tokio_tungstenite::tungstenite::{self, Message, WebSocket};

use crate::procs::get_json;

pub type Ws = WebSocket<MaybeTlsStream<TcpStream>>;

/// Connects to `url` (`ws://…`), with reads that give up after 200 ms so loops can check their deadlines.
pub fn connect(url: &str) -> Ws {
    let (mut ws, _) = tungstenite::connect(url).unwrap_or_else(|e| panic!("connecting {url}: {e}"));
    if let MaybeTlsStream::Plain(s) = ws.get_mut() {
        s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    }
    ws
}

pub fn send(ws: &mut Ws, v: &Value) {
    ws.send(Message::text(v.to_string())).expect("sending");
}

pub fn subscribe(ws: &mut Ws, sub: Value) {
    send(ws, &json!({"method": "subscribe", "subscription": sub}));
}

/// The next text message as JSON, or None when nothing came within the read timeout.
pub fn recv(ws: &mut Ws) -> Option<Value> {
    match ws.read() {
        Ok(Message::Text(t)) => Some(serde_json::from_str(t.as_str()).expect("a JSON message")),
        Ok(_) => None,
        Err(tungstenite::Error::Io(e))
            if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) =>
        {
            None
        }
        Err(e) => panic!("websocket read: {e}"),
    }
}

/// Reads messages until `done` says enough (given all so far) or `timeout` passes; returns them all.
pub fn collect(ws: &mut Ws, timeout: Duration, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + timeout;
    let mut got = Vec::new();
    while Instant::now() < deadline && !done(&got) {
        if let Some(v) = recv(ws) {
            got.push(v);
        }
    }
    got
}

/// A connection read on its own thread until dropped, so the server always has someone to send to.
#[derive(Debug)]
pub struct Reader {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<usize>>,
}

impl Reader {
    pub fn start(url: &str, subs: &[Value]) -> Reader {
        let mut ws = connect(url);
        for s in subs {
            subscribe(&mut ws, s.clone());
        }
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut n = 0;
            while !st.load(Relaxed) {
                n += usize::from(recv(&mut ws).is_some());
            }
            n
        });
        Reader { stop, thread: Some(thread) }
    }

    /// Stops reading; the number of messages read.
    pub fn finish(mut self) -> usize {
        self.stop.store(true, Relaxed);
        self.thread.take().map_or(0, |t| t.join().expect("reader thread"))
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
    }
}

/// Settled blocks from `/status?blocks=N`, by height: each stage's value in ns (absent when it did not happen).
pub type Blocks = BTreeMap<u64, BTreeMap<String, i64>>;

/// Adds the blocks' `line` entries (`fills`, `diffs`, `statuses`) of one `/status?blocks=4096` answer to `into`;
/// returns the answer.
pub fn gather(base: &str, line: &str, into: &mut Blocks) -> Value {
    let doc = get_json(&format!("{base}/status?blocks=4096")).expect("/status answers JSON");
    for b in doc["last_blocks"].as_array().expect("last_blocks").iter().filter(|b| b["line"] == line) {
        let stages = b["stages_ns"]
            .as_object()
            .expect("stages_ns")
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.as_i64()?)))
            .collect();
        into.insert(b["height"].as_u64().expect("height"), stages);
    }
    doc
}

/// The median (mean of the middle two for an even count).
#[allow(clippy::float_arithmetic)]
pub fn median(mut v: Vec<f64>) -> f64 {
    assert!(!v.is_empty(), "median of nothing");
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { f64::midpoint(v[n / 2 - 1], v[n / 2]) }
}
