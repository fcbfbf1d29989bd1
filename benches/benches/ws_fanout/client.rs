//! The load generator: its own process (the bench binary run again with `CLIENT_ENV` set), a tokio runtime with
//! N connections, each subscribing l2Book + trades for its coins. The hot path stores only (key, channel, receive
//! time) per frame; latencies are joined with the simulator's timing CSV once the run is over (`stats`).

use std::io::Write;
use std::sync::Arc;
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
    pub threads: usize,
    /// The simulator's `--timing` CSV, read after the run.
    pub timing: String,
}

pub const L2: u8 = 0;
pub const TRADES: u8 = 1;

/// One data frame: its block key (height with audit, block time in ms without), channel and receive time.
#[derive(Clone, Copy, Debug)]
pub struct Rec {
    pub key: u64,
    pub recv_ns: i64,
    pub channel: u8,
}

/// What one connection saw.
#[derive(Debug, Default)]
pub struct ConnLog {
    pub recs: Vec<Rec>,
    pub bytes: u64,
    /// `error` channel frames (e.g. the notice of a connection that fell behind on trades).
    pub errors: u64,
    /// Data frames whose key could not be read.
    pub unparsed: u64,
    /// Whether the server closed the connection (or it failed) before the end.
    pub closed_early: bool,
}

/// Entry point of the client process: prints `ready`, `measuring <t0>`, `done <t1>` and then one JSON result line.
pub fn main(spec_json: &str) {
    let spec: Spec = serde_json::from_str(spec_json).expect("client spec");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(spec.threads.max(1))
        .enable_all()
        .build()
        .expect("client runtime");
    let (logs, t0, t1) = rt.block_on(run(&spec));
    drop(rt);
    let result = super::stats::summarize(&spec, &logs, t0, t1);
    println!("{}", serde_json::to_string(&result).expect("result json"));
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

async fn run(spec: &Spec) -> (Vec<ConnLog>, i64, i64) {
    let (stop_tx, stop) = watch::channel(false);
    let gate = Arc::new(Semaphore::new(CONNECT_AT_ONCE));
    let mut tasks = Vec::with_capacity(spec.conns);
    let mut ready = Vec::with_capacity(spec.conns);
    for _ in 0..spec.conns {
        let (tx, rx) = tokio::sync::oneshot::channel();
        ready.push(rx);
        let (spec, stop, gate) = (spec.clone(), stop.clone(), gate.clone());
        tasks.push(tokio::spawn(async move {
            let permit = gate.acquire_owned().await.expect("gate");
            let ws = connect(&spec).await;
            drop(permit);
            let _ = tx.send(());
            receive(ws, &spec, stop).await
        }));
    }
    for rx in ready {
        rx.await.expect("a connection task failed to connect");
    }
    say("ready");
    tokio::time::sleep(Duration::from_secs(spec.warmup_secs)).await;
    let t0 = now_nanos();
    say(&format!("measuring {t0}"));
    tokio::time::sleep(Duration::from_secs(spec.secs)).await;
    let t1 = now_nanos();
    say(&format!("done {t1}"));
    let _ = stop_tx.send(true);
    let mut logs = Vec::with_capacity(tasks.len());
    for t in tasks {
        logs.push(t.await.expect("connection task"));
    }
    (logs, t0, t1)
}

type Ws = WebSocketStream<InflateLayer<TcpStream>>;

/// Opens `/ws` by hand (so the inflating layer can go beneath tungstenite) and subscribes.
async fn connect(spec: &Spec) -> Ws {
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
    // The server promises no context takeover, so each message inflates on its own.
    let inflater = agreed.then(|| Inflater::new(true, 64 << 20));
    let config = WebSocketConfig::default().max_message_size(Some(64 << 20)).max_frame_size(Some(64 << 20));
    let mut ws = WebSocketStream::from_raw_socket(InflateLayer::new(tcp, inflater), Role::Client, Some(config)).await;
    for coin in &spec.coins {
        for kind in ["l2Book", "trades"] {
            let sub = serde_json::json!({"method": "subscribe", "subscription": {"type": kind, "coin": coin}});
            ws.send(Message::text(sub.to_string())).await.expect("subscribe");
        }
    }
    ws
}

/// Reads until told to stop, timing every frame right after it was read (and inflated).
async fn receive(mut ws: Ws, spec: &Spec, mut stop: watch::Receiver<bool>) -> ConnLog {
    let mut log = ConnLog::default();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            msg = ws.next() => {
                let recv_ns = now_nanos();
                match msg {
                    Some(Ok(Message::Text(t))) => on_text(t.as_bytes(), recv_ns, spec.audit, &mut log),
                    Some(Ok(Message::Close(_))) | Some(Err(_)) | None => {
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

fn on_text(t: &[u8], recv_ns: i64, audit: bool, log: &mut ConnLog) {
    log.bytes += t.len() as u64;
    let Some(rest) = t.strip_prefix(b"{\"channel\":\"") else { return };
    let channel = if rest.starts_with(b"l2Book\"") {
        L2
    } else if rest.starts_with(b"trades\"") {
        TRADES
    } else {
        if rest.starts_with(b"error\"") {
            log.errors += 1;
        }
        return;
    };
    let key = if audit { audit_height(t) } else { first_number_after(t, b"\"time\":") };
    match key {
        Some(key) => log.recs.push(Rec { key, recv_ns, channel }),
        None => log.unparsed += 1,
    }
}

/// `"audit":{"height":H` is the last top-level key, so it is near the end.
fn audit_height(t: &[u8]) -> Option<u64> {
    let tail = &t[t.len().saturating_sub(400)..];
    let needle = b"\"audit\":{\"height\":";
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
