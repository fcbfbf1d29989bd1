//! The plain WebSocket client of the end-to-end serving tests (load, slow and hostile clients): connect
//! (optionally with a small receive buffer, so a client that stops reading fills its socket quickly), send
//! requests, read JSON frames with bounded waits.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

pub type Ws = WebSocketStream<TcpStream>;

/// Opens `/ws?{query}` on `addr` (`HOST:PORT`). `recv_buf` sets SO_RCVBUF before connecting. Frames up to
/// 512 MB are accepted: an l4Book snapshot of a big book is one large message.
pub async fn connect(addr: &str, query: &str, recv_buf: Option<u32>) -> Ws {
    let sock_addr = addr.parse().expect("a socket address");
    let socket = TcpSocket::new_v4().expect("socket");
    if let Some(n) = recv_buf {
        socket.set_recv_buffer_size(n).expect("SO_RCVBUF");
    }
    let tcp = tokio::time::timeout(Duration::from_secs(10), socket.connect(sock_addr))
        .await
        .expect("connect within 10 s")
        .expect("connect");
    let url = format!("ws://{addr}/ws?{query}");
    let config = WebSocketConfig::default().max_frame_size(Some(512 << 20)).max_message_size(Some(512 << 20));
    let (ws, _) = tokio::time::timeout(
        Duration::from_secs(10),
        tokio_tungstenite::client_async_with_config(url, tcp, Some(config)),
    )
    .await
    .expect("handshake within 10 s")
    .expect("handshake");
    ws
}

/// Opens `/ws?{query}` on `addr` from the local address `from` (any of 127/8 is loopback on Linux, so one host
/// plays many client IPs). Err: the HTTP status of a refused upgrade (`"429"`), or why it failed.
pub async fn try_connect_from(addr: &str, query: &str, from: std::net::IpAddr) -> Result<Ws, String> {
    let socket = TcpSocket::new_v4().map_err(|e| e.to_string())?;
    socket.bind(std::net::SocketAddr::new(from, 0)).map_err(|e| format!("bind {from}: {e}"))?;
    let tcp = tokio::time::timeout(Duration::from_secs(10), socket.connect(addr.parse().expect("a socket address")))
        .await
        .map_err(|_| "connect timed out".to_string())?
        .map_err(|e| e.to_string())?;
    let url = format!("ws://{addr}/ws?{query}");
    match tokio::time::timeout(Duration::from_secs(10), tokio_tungstenite::client_async(url, tcp)).await {
        Err(_) => Err("handshake timed out".into()),
        Ok(Ok((ws, _))) => Ok(ws),
        Ok(Err(tokio_tungstenite::tungstenite::Error::Http(r))) => Err(r.status().as_u16().to_string()),
        Ok(Err(e)) => Err(e.to_string()),
    }
}

pub async fn send(ws: &mut Ws, v: &Value) {
    tokio::time::timeout(Duration::from_secs(10), ws.send(Message::Text(v.to_string().into())))
        .await
        .expect("send within 10 s")
        .expect("send");
}

/// `{"method":"subscribe","subscription":sub}`.
pub async fn subscribe(ws: &mut Ws, sub: Value) {
    send(ws, &serde_json::json!({"method": "subscribe", "subscription": sub})).await;
}

/// What reading one frame gave.
#[derive(Debug)]
pub enum Read {
    Json(Value),
    Timeout,
    /// The connection closed or failed (with the reason).
    Closed(String),
}

/// The next text frame as JSON; control frames are skipped.
pub async fn next_json(ws: &mut Ws, timeout: Duration) -> Read {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match tokio::time::timeout_at(deadline, ws.next()).await {
            Err(_) => return Read::Timeout,
            Ok(None) => return Read::Closed("end of stream".into()),
            Ok(Some(Err(e))) => return Read::Closed(e.to_string()),
            Ok(Some(Ok(Message::Text(t)))) => {
                return Read::Json(serde_json::from_str(t.as_str()).unwrap_or_else(|e| panic!("bad JSON {e}: {t}")));
            }
            Ok(Some(Ok(Message::Close(c)))) => return Read::Closed(format!("close frame {c:?}")),
            Ok(Some(Ok(_))) => {}
        }
    }
}

/// One connection per entry of `subs`, subscribed to that entry's subscriptions; every JSON frame any of them
/// receives comes out of the returned channel as (entry index, frame), until its connection closes or is silent
/// for `quiet`.
pub fn fan_in(
    rt: &tokio::runtime::Runtime,
    addr: &str,
    subs: Vec<Vec<Value>>,
    quiet: Duration,
) -> std::sync::mpsc::Receiver<(usize, Value)> {
    let (tx, rx) = std::sync::mpsc::channel();
    for (i, subs) in subs.into_iter().enumerate() {
        let mut ws = rt.block_on(async {
            let mut ws = connect(addr, "", None).await;
            for sub in subs {
                subscribe(&mut ws, sub).await;
            }
            ws
        });
        let tx = tx.clone();
        rt.spawn(async move {
            while let Read::Json(v) = next_json(&mut ws, quiet).await {
                if tx.send((i, v)).is_err() {
                    return;
                }
            }
        });
    }
    rx
}

/// Every JSON frame `ws` receives until `stop` changes; panics (naming `what`) if the connection ends first or is
/// silent for 30 s.
pub async fn collect_until(ws: &mut Ws, stop: &mut tokio::sync::watch::Receiver<bool>, what: &str) -> Vec<Value> {
    let mut got = Vec::new();
    loop {
        tokio::select! {
            _ = stop.changed() => return got,
            r = next_json(ws, Duration::from_secs(30)) => match r {
                Read::Json(v) => got.push(v),
                other => panic!("{what}: connection ended early: {other:?}"),
            },
        }
    }
}

/// Every frame until `done` holds what the caller waits for and `complete(frames, it)` says it has all arrived (a
/// condition, where a stop after a pause would hope the last frames came). A connection that goes quiet for 30 s
/// (or that the server closes as idle) fails the test unless every frame the caller wants is already here: it may
/// still be working out what that is (an oracle over the whole run) when the last frame came.
pub async fn collect_until_complete<T>(
    ws: &mut Ws,
    done: &mut tokio::sync::watch::Receiver<Option<T>>,
    complete: impl Fn(&[Value], &T) -> bool,
    what: &str,
) -> Vec<Value> {
    match collect_until_complete_or_quiet(ws, done, complete).await {
        Ok(got) => got,
        Err((_, why)) => panic!("{what}: {why}"),
    }
}

/// `collect_until_complete`, giving back what came when the connection went quiet or ended first (with why), so
/// the caller can say which frames were wrong rather than that the right ones never came.
pub async fn collect_until_complete_or_quiet<T>(
    ws: &mut Ws,
    done: &mut tokio::sync::watch::Receiver<Option<T>>,
    complete: impl Fn(&[Value], &T) -> bool,
) -> Result<Vec<Value>, (Vec<Value>, String)> {
    let mut got = Vec::new();
    loop {
        if done.borrow().as_ref().is_some_and(|want| complete(&got, want)) {
            return Ok(got);
        }
        tokio::select! {
            _ = done.changed() => {}
            r = next_json(ws, Duration::from_secs(30)) => match r {
                Read::Json(v) => got.push(v),
                other => {
                    let waiting = done.borrow().is_none();
                    if waiting {
                        let _ = done.wait_for(Option::is_some).await;
                    }
                    if done.borrow().as_ref().is_some_and(|want| complete(&got, want)) {
                        return Ok(got);
                    }
                    return Err((got, format!("connection ended early, or no frame for 30 s: {other:?}")));
                }
            },
        }
    }
}

/// The next text frame; panics on a timeout or a closed connection.
pub async fn expect_json(ws: &mut Ws, timeout: Duration) -> Value {
    match next_json(ws, timeout).await {
        Read::Json(v) => v,
        other => panic!("expected a frame within {timeout:?}, got {other:?}"),
    }
}

/// The frame's channel (`""` when absent).
pub fn channel(v: &Value) -> &str {
    v["channel"].as_str().unwrap_or("")
}

/// The audit height of a data frame (`?audit=1`).
pub fn audit_height(v: &Value) -> Option<u64> {
    v["audit"]["height"].as_u64()
}

/// VmRSS of a process in bytes, from /proc.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
