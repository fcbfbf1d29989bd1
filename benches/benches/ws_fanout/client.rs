//! The load generator: its own process (the bench binary run again with `CLIENT_ENV` set), a tokio runtime with
//! N connections, each subscribing l2Book + trades for its coins. A timed connection stores (key, channel,
//! receive time) per frame and nothing else, and its latencies are joined with the simulator's timing CSV once
//! the run is over (`stats`); a sink only reads and counts frames, for when the client cannot inflate and parse
//! everything 1,000 connections receive without becoming the bottleneck on two cores.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use hlbook::node::time::now_nanos;
use hlbook::ws::deflate::{InflateLayer, Inflater};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{Semaphore, watch};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};

/// Set (to the JSON of a [`Spec`]) when the bench binary runs as the load generator.
pub const CLIENT_ENV: &str = "HLBOOK_WS_FANOUT_CLIENT";

/// Any 16 bytes in base64 will do as a handshake key.
const KEY: &str = "aGxib29rLWZhbm91dC1rZXk=";

/// Handshakes in flight at once while connecting.
const CONNECT_AT_ONCE: usize = 64;

/// What the parent asks the client to do.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Spec {
    /// The server's `host:port`.
    pub addr: String,
    pub conns: usize,
    pub coins: Vec<String>,
    pub deflate: bool,
    /// `?audit=1`: heights from the audit object; otherwise from the frame's block time (`time`, ms).
    pub audit: bool,
    pub warmup_secs: u64,
    pub secs: u64,
    /// Connections that inflate, parse and time every frame, spread evenly; the others are sinks.
    pub timed: usize,
    pub threads: usize,
    /// The simulator's `--timing` CSV, read after the run.
    pub timing: String,
    /// Users whose userFills the connections follow, spread round-robin over them (each followed once).
    #[serde(default)]
    pub users: Vec<String>,
}

pub const L2: u8 = 0;
pub const TRADES: u8 = 1;
pub const USER_FILLS: u8 = 2;

/// One data frame: its block key (height with audit, block time in ms without), channel and receive time.
#[derive(Clone, Copy, Debug)]
pub struct Rec {
    pub key: u64,
    pub recv_ns: i64,
    pub channel: u8,
    /// With audit: when the server wrote the frame to this socket (0 without).
    pub sent_ns: i64,
    /// With audit: the `local_time` of the line the frame was built from, which the simulator stamps before it
    /// writes the line (0 without).
    pub node_ns: i64,
}

/// What one connection saw.
#[derive(Debug, Default)]
pub struct ConnLog {
    /// A timed connection (not a sink).
    pub timed: bool,
    pub recs: Vec<Rec>,
    /// `error` channel frames (e.g. the notice of a connection that fell behind on trades).
    pub errors: u64,
    /// Data frames whose key could not be read.
    pub unparsed: u64,
    /// Whether the server closed the connection (or it failed) before the end.
    pub closed_early: bool,
}

/// Data frames read by sink connections so far (all of them, sampled by the main task at the window's ends).
static SINK_FRAMES: AtomicU64 = AtomicU64::new(0);

/// Entry point of the client process: prints `ready`, waits for a line on stdin, warms up, prints `measuring <t0>`
/// and `done <t1>`, then one JSON result line.
pub fn main(spec_json: &str) {
    let spec: Spec = serde_json::from_str(spec_json).expect("client spec");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(spec.threads.max(1))
        .enable_all()
        .build()
        .expect("client runtime");
    let (logs, t0, t1, sink_frames) = rt.block_on(run(&spec));
    drop(rt);
    let result = super::stats::summarize(&spec, &logs, t0, t1, sink_frames);
    println!("{}", serde_json::to_string(&result).expect("result json"));
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Connects every connection first, then subscribes them all at once, so no data flows while connecting.
async fn run(spec: &Spec) -> (Vec<ConnLog>, i64, i64, u64) {
    let (stop_tx, stop) = watch::channel(false);
    let (go_tx, go) = watch::channel(false);
    let gate = Arc::new(Semaphore::new(CONNECT_AT_ONCE));
    let every = (spec.conns / spec.timed.max(1)).max(1);
    let (mut tasks, mut connected, mut subscribed) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..spec.conns {
        let (conn_tx, conn_rx) = tokio::sync::oneshot::channel();
        let (sub_tx, sub_rx) = tokio::sync::oneshot::channel();
        connected.push(conn_rx);
        subscribed.push(sub_rx);
        let (spec, stop, mut go, gate) = (spec.clone(), stop.clone(), go.clone(), gate.clone());
        tasks.push(tokio::spawn(async move {
            let permit = gate.acquire_owned().await.expect("gate");
            let (tcp, agreed) = handshake(&spec).await;
            drop(permit);
            let _ = conn_tx.send(());
            let _ = go.wait_for(|go| *go).await;
            if i % every == 0 {
                let ws = subscribe_timed(tcp, agreed, &spec, i).await;
                let _ = sub_tx.send(());
                receive(ws, &spec, stop).await
            } else {
                sink(tcp, &spec, i, sub_tx, stop).await
            }
        }));
    }
    for rx in connected {
        rx.await.expect("a connection task failed to connect");
    }
    let _ = go_tx.send(true);
    for rx in subscribed {
        rx.await.expect("a connection task failed to subscribe");
    }
    say("ready");
    // The parent answers once the server has taken every subscription (its admin /health says so).
    let go = tokio::task::spawn_blocking(|| std::io::stdin().read_line(&mut String::new()));
    go.await.expect("stdin task").expect("parent's go");
    tokio::time::sleep(Duration::from_secs(spec.warmup_secs)).await;
    let (t0, s0) = (now_nanos(), SINK_FRAMES.load(Relaxed));
    say(&format!("measuring {t0}"));
    tokio::time::sleep(Duration::from_secs(spec.secs)).await;
    let (t1, s1) = (now_nanos(), SINK_FRAMES.load(Relaxed));
    say(&format!("done {t1}"));
    let _ = stop_tx.send(true);
    let mut logs = Vec::with_capacity(tasks.len());
    for t in tasks {
        logs.push(t.await.expect("connection task"));
    }
    (logs, t0, t1, s1 - s0)
}

type Ws = WebSocketStream<InflateLayer<TcpStream>>;

/// Opens `/ws` by hand, so that a timed connection can put the inflating layer beneath tungstenite and a sink
/// can read raw bytes; returns whether compression was agreed.
async fn handshake(spec: &Spec) -> (TcpStream, bool) {
    let mut tcp = TcpStream::connect(&spec.addr).await.expect("connect");
    tcp.set_nodelay(true).expect("nodelay");
    let query = if spec.audit { "?audit=1" } else { "" };
    let ext =
        if spec.deflate { "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n" } else { "" };
    let request = format!(
        "GET /ws{query} HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n{ext}\r\n",
        spec.addr
    );
    tcp.write_all(request.as_bytes()).await.expect("send upgrade request");
    // The server sends nothing after its 101 until we subscribe, so reading up to the blank line reads no frame.
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 256];
        let n = tcp.read(&mut byte).await.expect("read upgrade response");
        assert!(n > 0, "server closed during the handshake");
        head.extend_from_slice(&byte[..n]);
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 101"), "upgrade refused: {head}");
    let accept = derive_accept_key(KEY.as_bytes()).to_ascii_lowercase();
    assert!(head.contains(&format!("sec-websocket-accept: {accept}")), "bad accept key: {head}");
    let agreed = head.lines().any(|l| l.starts_with("sec-websocket-extensions:") && l.contains("permessage-deflate"));
    assert_eq!(agreed, spec.deflate, "compression negotiated {agreed}, wanted {}: {head}", spec.deflate);
    (tcp, agreed)
}

/// Connection `conn`'s subscriptions: l2Book and trades of every coin, and userFills of its share of the users.
fn subscriptions(spec: &Spec, conn: usize) -> impl Iterator<Item = String> + '_ {
    let books = spec.coins.iter().flat_map(|coin| {
        ["l2Book", "trades"].map(|kind| {
            serde_json::json!({"method": "subscribe", "subscription": {"type": kind, "coin": coin}}).to_string()
        })
    });
    let users = spec.users.iter().enumerate().filter(move |(k, _)| k % spec.conns == conn);
    books.chain(users.map(|(_, u)| {
        serde_json::json!({"method": "subscribe", "subscription": {"type": "userFills", "user": u}}).to_string()
    }))
}

async fn subscribe_timed(tcp: TcpStream, agreed: bool, spec: &Spec, conn: usize) -> Ws {
    // The server promises no context takeover, so each message inflates on its own.
    let inflater = agreed.then(|| Inflater::new(true, 64 << 20));
    let config = WebSocketConfig::default().max_message_size(Some(64 << 20)).max_frame_size(Some(64 << 20));
    let mut ws = WebSocketStream::from_raw_socket(InflateLayer::new(tcp, inflater), Role::Client, Some(config)).await;
    for sub in subscriptions(spec, conn) {
        ws.send(Message::text(sub)).await.expect("subscribe");
    }
    ws
}

/// Reads until told to stop, timing every frame right after it was read (and inflated).
async fn receive(mut ws: Ws, spec: &Spec, mut stop: watch::Receiver<bool>) -> ConnLog {
    let mut log = ConnLog { timed: true, ..ConnLog::default() };
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            msg = ws.next() => {
                let recv_ns = now_nanos();
                match msg {
                    Some(Ok(Message::Text(t))) => on_text(t.as_bytes(), recv_ns, spec.audit, &mut log),
                    Some(Ok(Message::Close(_)) | Err(_)) | None => {
                        log.closed_early = true;
                        break;
                    }
                    Some(Ok(_)) => {}
                }
            }
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), ws.close(None)).await;
    log
}

/// A subscriber that reads everything as fast as it comes but only counts frames: the server cannot tell it from
/// a timed one, and it costs the client almost nothing (no inflating, no parsing, no timestamps).
async fn sink(
    mut tcp: TcpStream,
    spec: &Spec,
    conn: usize,
    subscribed: tokio::sync::oneshot::Sender<()>,
    mut stop: watch::Receiver<bool>,
) -> ConnLog {
    for sub in subscriptions(spec, conn) {
        tcp.write_all(&client_frame(sub.as_bytes())).await.expect("subscribe");
    }
    let _ = subscribed.send(());
    let mut log = ConnLog::default();
    let (mut buf, mut counter) = (vec![0u8; 64 << 10], FrameCounter::default());
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            r = tcp.read(&mut buf) => match r {
                Ok(n) if n > 0 => {
                    SINK_FRAMES.fetch_add(counter.feed(&buf[..n]), Relaxed);
                }
                _ => {
                    log.closed_early = true;
                    break;
                }
            }
        }
    }
    log
}

/// A whole masked text frame; the all-zero mask key leaves the payload as is.
fn client_frame(payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x81];
    match payload.len() {
        n @ 0..=125 => f.push(0x80 | n as u8),
        n => {
            f.push(0x80 | 126);
            f.extend_from_slice(&(n as u16).to_be_bytes());
        }
    }
    f.extend_from_slice(&[0; 4]);
    f.extend_from_slice(payload);
    f
}

/// Counts the data frames in a stream of server frames, skipping payloads.
#[derive(Default)]
struct FrameCounter {
    /// Payload bytes of the current frame still to skip.
    skip: u64,
    /// An incomplete header.
    header: Vec<u8>,
}

impl FrameCounter {
    fn feed(&mut self, mut b: &[u8]) -> u64 {
        let mut frames = 0;
        loop {
            let k = self.skip.min(b.len() as u64);
            (b, self.skip) = (&b[k as usize..], self.skip - k);
            let Some((&byte, rest)) = b.split_first() else { return frames };
            b = rest;
            self.header.push(byte);
            if let Some(len) = payload_len(&self.header) {
                frames += u64::from(matches!(self.header[0] & 0x0f, 1 | 2));
                (self.skip, self.header) = (len, Vec::new());
            }
        }
    }
}

/// The payload length once `h` holds a whole header.
fn payload_len(h: &[u8]) -> Option<u64> {
    let b1 = *h.get(1)?;
    let (len, size) = match b1 & 0x7f {
        126 => (u64::from(u16::from_be_bytes(h.get(2..4)?.try_into().ok()?)), 4),
        127 => (u64::from_be_bytes(h.get(2..10)?.try_into().ok()?), 10),
        n => (u64::from(n), 2),
    };
    let size = size + if b1 & 0x80 != 0 { 4 } else { 0 };
    (h.len() == size).then_some(len)
}

fn on_text(t: &[u8], recv_ns: i64, audit: bool, log: &mut ConnLog) {
    let Some(rest) = t.strip_prefix(b"{\"channel\":\"") else { return };
    let channel = if rest.starts_with(b"l2Book\"") {
        L2
    } else if rest.starts_with(b"trades\"") {
        TRADES
    } else if rest.starts_with(b"userFills\"") {
        // The first frame, the user's recent fills, describes no one block.
        if rest.starts_with(b"userFills\",\"data\":{\"isSnapshot\"") {
            return;
        }
        USER_FILLS
    } else {
        if rest.starts_with(b"error\"") {
            log.errors += 1;
        }
        return;
    };
    let key = if audit { audit_height(t) } else { first_number_after(t, b"\"time\":") };
    match key {
        Some(key) => {
            let stamp = |name: &[u8]| if audit { audit_number(t, name).unwrap_or(0) as i64 } else { 0 };
            let (sent_ns, node_ns) = (stamp(b"\"sent_ns\":"), stamp(b"\"node_ns\":"));
            log.recs.push(Rec { key, recv_ns, channel, sent_ns, node_ns });
        }
        None => log.unparsed += 1,
    }
}

/// `"audit":{"height":H` is the last top-level key, so it is near the end.
fn audit_height(t: &[u8]) -> Option<u64> {
    audit_number(t, b"\"audit\":{\"height\":")
}

/// The number after the last `needle` in the audit object at the frame's end.
fn audit_number(t: &[u8], needle: &[u8]) -> Option<u64> {
    let tail = &t[t.len().saturating_sub(400)..];
    let at = tail.windows(needle.len()).rposition(|w| w == needle)?;
    digits(&tail[at + needle.len()..])
}

/// The first `needle` is near the start (l2Book `data.time`, or the first trade's `time`).
fn first_number_after(t: &[u8], needle: &[u8]) -> Option<u64> {
    let at = t.windows(needle.len()).position(|w| w == needle)?;
    digits(&t[at + needle.len()..])
}

fn digits(b: &[u8]) -> Option<u64> {
    let n = b.iter().take_while(|c| c.is_ascii_digit()).count();
    std::str::from_utf8(&b[..n]).ok()?.parse().ok()
}
