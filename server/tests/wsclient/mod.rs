//! A WebSocket client for end-to-end protocol tests: connect, send, read the next JSON message with a bounded
//! wait, collect for a while. Every message read is checked against the one rule that holds for every
//! connection: data for a coin arrives only between that subscription's ack and its unsubscribe ack (so never
//! before the ack, and never for a coin the connection did not subscribe to).
//!
//! Socket tests start their server with `livefeed::LiveRig` (needs `mod procs;` and `mod livefeed;` beside it).
//! `raw` is the same client without the subscription bookkeeping, for tests that load or starve a server.

#![allow(dead_code)]

pub mod check;
pub mod http;
pub mod raw;

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream, connect_async};

/// How long any single wait for the server may take before a test fails.
pub const WAIT: Duration = Duration::from_secs(30);

pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// What a read produced.
#[derive(Debug)]
pub enum Event {
    /// One channel message and its exact text (a batch frame's element has its re-serialized text).
    Msg(Value, String),
    /// The server closed (with its close frame) or the stream ended or failed (None).
    Closed(Option<CloseFrame>),
}

#[derive(Debug)]
pub struct Client {
    pub name: String,
    ws: Ws,
    queue: VecDeque<(Value, String)>,
    /// Active subscriptions by (channel, coin) as the acks told; allMids has coin "".
    subs: HashMap<(String, String), usize>,
    /// Raw frames that were JSON arrays (`?batch=1`), and their element counts; and plain objects.
    pub array_frames: Vec<usize>,
    pub object_frames: usize,
    /// Data messages (any channel carrying market data) seen so far, and by coin ("" for allMids), including
    /// those read while waiting for something else.
    pub data_messages: usize,
    pub data_by_coin: HashMap<String, usize>,
}

/// Connects or returns the handshake error (an HTTP refusal is `WsError::Http`).
pub async fn try_connect(url: &str, bearer: Option<&str>) -> Result<Client, WsError> {
    let auth = bearer.map(|t| ("Authorization", format!("Bearer {t}")));
    try_connect_with(url, auth.as_slice()).await
}

/// `try_connect` with these request headers added.
pub async fn try_connect_with(url: &str, headers: &[(&'static str, String)]) -> Result<Client, WsError> {
    let mut req = url.into_client_request()?;
    for (name, value) in headers {
        req.headers_mut().append(*name, HeaderValue::from_str(value).unwrap());
    }
    let (ws, _) = timeout(WAIT, connect_async(req)).await.unwrap_or_else(|_| panic!("connecting {url}: timed out"))?;
    Ok(Client::new(url, ws))
}

/// The HTTP status of a refused upgrade; panics when the upgrade succeeds or fails otherwise.
pub async fn refused_status(url: &str, bearer: Option<&str>) -> u16 {
    match try_connect(url, bearer).await {
        Ok(_) => panic!("{url}: upgrade accepted, expected a refusal"),
        Err(WsError::Http(resp)) => resp.status().as_u16(),
        Err(e) => panic!("{url}: expected an HTTP refusal, got {e}"),
    }
}

impl Client {
    fn new(url: &str, ws: Ws) -> Client {
        Client {
            name: url.to_string(),
            ws,
            queue: VecDeque::new(),
            subs: HashMap::new(),
            array_frames: Vec::new(),
            object_frames: 0,
            data_messages: 0,
            data_by_coin: HashMap::new(),
        }
    }

    pub async fn connect(url: &str) -> Client {
        try_connect(url, None).await.unwrap_or_else(|e| panic!("connecting {url}: {e}"))
    }

    /// Sends one text frame exactly as given.
    pub async fn send(&mut self, text: &str) {
        let sent = timeout(WAIT, self.ws.send(Message::text(text))).await;
        sent.unwrap_or_else(|_| panic!("{}: send timed out", self.name))
            .unwrap_or_else(|e| panic!("{}: send failed: {e}", self.name));
    }

    pub async fn send_json(&mut self, v: &Value) {
        self.send(&v.to_string()).await;
    }

    /// Sends and ignores failures (the server may already have closed).
    pub async fn send_lossy(&mut self, text: &str) {
        let _ = timeout(WAIT, self.ws.send(Message::text(text))).await;
    }

    /// The next message or close within `wait`; None when nothing came.
    pub async fn next_event(&mut self, wait: Duration) -> Option<Event> {
        let deadline = Instant::now() + wait;
        loop {
            if let Some((v, t)) = self.queue.pop_front() {
                self.observe(&v);
                return Some(Event::Msg(v, t));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let msg = match timeout(left, self.ws.next()).await {
                Err(_) => return None,
                Ok(None | Some(Err(_))) => return Some(Event::Closed(None)),
                Ok(Some(Ok(m))) => m,
            };
            let text = match msg {
                Message::Text(t) => t.to_string(),
                Message::Binary(b) => panic!("{}: binary frame of {} bytes; the protocol is text", self.name, b.len()),
                Message::Close(f) => return Some(Event::Closed(f)),
                _ => continue,
            };
            let v: Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{}: a frame that is not JSON ({e}): {text}", self.name));
            match v {
                Value::Array(items) => {
                    self.array_frames.push(items.len());
                    self.queue.extend(items.into_iter().map(|i| {
                        let t = i.to_string();
                        (i, t)
                    }));
                }
                v => {
                    self.object_frames += 1;
                    self.queue.push_back((v, text));
                }
            }
        }
    }

    /// The next message; panics on a close or after `WAIT`.
    pub async fn next(&mut self) -> Value {
        self.next_text().await.0
    }

    /// The next message and its exact text.
    pub async fn next_text(&mut self) -> (Value, String) {
        match self.next_event(WAIT).await {
            Some(Event::Msg(v, t)) => (v, t),
            Some(Event::Closed(f)) => panic!("{}: closed while a message was expected: {f:?}", self.name),
            None => panic!("{}: no message within {WAIT:?}", self.name),
        }
    }

    /// The first message matching `pred` (others are read and checked, then dropped).
    pub async fn next_where(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_event(left).await {
                Some(Event::Msg(v, _)) if pred(&v) => return v,
                Some(Event::Msg(..)) => {}
                Some(Event::Closed(f)) => panic!("{}: closed while waiting for {what}: {f:?}", self.name),
                None => panic!("{}: no {what} within {WAIT:?}", self.name),
            }
        }
    }

    /// Every message for `dur`; panics if the connection closes.
    pub async fn collect(&mut self, dur: Duration) -> Vec<Value> {
        self.collect_until(dur, |_| true).await
    }

    /// Messages for at least `min` and until `enough` holds of them (at most `WAIT` more).
    pub async fn collect_until(&mut self, min: Duration, enough: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let start = Instant::now();
        let mut out = Vec::new();
        loop {
            let elapsed = start.elapsed();
            if elapsed >= min && enough(&out) {
                return out;
            }
            assert!(
                elapsed < min + WAIT,
                "{}: collected {} messages, never enough within {WAIT:?}",
                self.name,
                out.len()
            );
            let wait = if elapsed < min { min.checked_sub(elapsed).unwrap() } else { Duration::from_millis(200) };
            match self.next_event(wait).await {
                Some(Event::Msg(v, _)) => out.push(v),
                Some(Event::Closed(f)) => panic!("{}: closed while collecting: {f:?}", self.name),
                None => {}
            }
        }
    }

    /// Reads until the server closes (within `wait`); returns its close frame, None when the stream just ended.
    pub async fn closed(&mut self, wait: Duration) -> Option<CloseFrame> {
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_event(left).await {
                Some(Event::Msg(..)) => {}
                Some(Event::Closed(f)) => return f,
                None => panic!("{}: still open after {wait:?}", self.name),
            }
        }
    }

    /// Sends a subscribe request and returns its ack (data before it is checked and dropped).
    pub async fn subscribe(&mut self, sub: Value) -> Value {
        self.send_json(&serde_json::json!({"method": "subscribe", "subscription": sub})).await;
        self.next_where("subscribe ack", |v| v["channel"] == "subscriptionResponse").await
    }

    /// `{"method":"ping"}` → exactly `{"channel":"pong"}` (data frames in between are read and checked).
    pub async fn ping_pong(&mut self) {
        self.send(r#"{"method":"ping"}"#).await;
        let pong = self.next_where("pong", |v| !check::is_data(v)).await;
        assert_eq!(pong, serde_json::json!({"channel": "pong"}), "{}", self.name);
    }

    /// Closes politely (errors ignored: the test is over for this connection).
    pub async fn close(mut self) {
        let _ = timeout(Duration::from_secs(5), self.ws.close(None)).await;
    }

    /// Whether (channel, coin) is subscribed as far as the acks told.
    pub fn subscribed(&self, channel: &str, coin: &str) -> bool {
        self.subs.get(&(channel.to_string(), coin.to_string())).is_some_and(|n| *n > 0)
    }

    /// The per-connection rule: acks update the subscriptions, data must belong to one.
    fn observe(&mut self, v: &Value) {
        let channel =
            v["channel"].as_str().unwrap_or_else(|| panic!("{}: a message without a channel: {v}", self.name));
        match channel {
            "subscriptionResponse" => {
                let sub = &v["data"]["subscription"];
                let key = sub_key(sub);
                let n = self.subs.entry(key).or_default();
                match v["data"]["method"].as_str() {
                    Some("subscribe") => *n += 1,
                    Some("unsubscribe") => {
                        assert!(*n > 0, "{}: unsubscribe ack for nothing subscribed: {v}", self.name);
                        *n -= 1;
                    }
                    _ => panic!("{}: ack without a method: {v}", self.name),
                }
            }
            "pong" | "error" | "post" | "hlbookNotice" => {}
            "l2Book" | "bbo" | "l4Book" => {
                self.data_messages += 1;
                let coin = v["data"]["coin"].as_str().unwrap_or_else(|| panic!("{}: no coin: {v}", self.name));
                assert!(
                    self.subscribed(channel, coin),
                    "{}: {channel} data for {coin}, not subscribed: {v}",
                    self.name
                );
                *self.data_by_coin.entry(coin.to_string()).or_default() += 1;
            }
            "trades" => {
                self.data_messages += 1;
                let list =
                    v["data"].as_array().unwrap_or_else(|| panic!("{}: trades data is not a list: {v}", self.name));
                for t in list {
                    let coin =
                        t["coin"].as_str().unwrap_or_else(|| panic!("{}: a trade without a coin: {v}", self.name));
                    assert!(self.subscribed("trades", coin), "{}: trades for {coin}, not subscribed: {v}", self.name);
                    *self.data_by_coin.entry(coin.to_string()).or_default() += 1;
                }
            }
            "candle" => {
                self.data_messages += 1;
                let coin = v["data"]["s"].as_str().unwrap_or_else(|| panic!("{}: a candle without s: {v}", self.name));
                assert!(self.subscribed("candle", coin), "{}: candle for {coin}, not subscribed: {v}", self.name);
                *self.data_by_coin.entry(coin.to_string()).or_default() += 1;
            }
            "allMids" => {
                self.data_messages += 1;
                assert!(self.subscribed("allMids", ""), "{}: allMids, not subscribed: {v}", self.name);
                *self.data_by_coin.entry(String::new()).or_default() += 1;
            }
            "liquidations" => {
                self.data_messages += 1;
                assert!(self.subscribed("liquidations", ""), "{}: liquidations, not subscribed: {v}", self.name);
                assert!(v["data"]["liquidations"].is_array(), "{}: liquidations without a list: {v}", self.name);
            }
            other => panic!("{}: unknown channel {other:?}: {v}", self.name),
        }
    }
}

/// (type, coin) of a subscription object; coin "" for allMids.
fn sub_key(sub: &Value) -> (String, String) {
    let kind = sub["type"].as_str().unwrap_or_else(|| panic!("subscription without a type: {sub}"));
    (kind.to_string(), sub["coin"].as_str().unwrap_or("").to_string())
}

/// Runs a test body on a small multi-thread runtime (so blocking helpers can use `block_in_place`).
pub fn run<F: std::future::Future>(f: F) -> F::Output {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(f)
}
