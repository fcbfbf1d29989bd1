//! One WebSocket connection: one task that reads client requests and, on every publish, gathers everything due
//! and writes it with a single flush.
//!
//! L2, bbo and allMids are conflated: the connection sends the newest frame of each subscription, so a client
//! that was slow simply jumps ahead. Trades and l4Book are ordered: the connection walks the hub's feed with a
//! cursor per subscription, and one that falls more than `backlog_blocks` behind gets an error frame naming the
//! lost blocks (and, for l4Book, a fresh snapshot) and continues. Nothing is buffered per connection beyond one
//! batch, so a client that stops reading costs one blocked task and its socket buffers.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use rustc_hash::FxHashMap;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Instant, sleep_until};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{CloseCode, Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::{Frame as WsFrame, FrameHeader};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use super::WsContext;
use super::deflate::deflate_message;
use super::protocol::{self, Request, Subscription};
use crate::node::time::now_nanos;
use crate::publish::{Frame, L4Snapshot, Slot, Tick, Want};

/// How a connection wants its frames.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    pub deflate: bool,
    pub audit: bool,
    pub batch: bool,
}

/// `post` requests of one connection in flight at once.
const MAX_POSTS: usize = 16;

/// A batch stops growing past this many bytes; the rest goes in the next one.
const BATCH_BYTES: usize = 4 << 20;

enum Sub {
    /// L2, bbo, allMids: the newest frame of a slot; `sent` is the last frame sequence written.
    Conflated {
        slot: Arc<Slot>,
        sent: u64,
    },
    Trades {
        coin: crate::node::Coin,
        cursor: u64,
    },
    L4 {
        coin: crate::node::Coin,
        state: L4State,
    },
}

enum L4State {
    Waiting(oneshot::Receiver<L4Snapshot>),
    Live { cursor: u64 },
}

/// What one gather produced.
#[derive(Default)]
struct Batch {
    frames: Vec<Out>,
    bytes: usize,
}

enum Out {
    Shared(Arc<Frame>),
    Text(String),
}

pub struct Conn<S> {
    ctx: Arc<WsContext>,
    ws: WebSocketStream<S>,
    opts: Options,
    subs: FxHashMap<Want, (Subscription, Sub)>,
    pending: Vec<String>,
    /// Answers of `post` requests, from their tasks; bounded, so a client cannot pile them up.
    posts: (mpsc::Sender<String>, mpsc::Receiver<String>),
    last_traffic: Instant,
    window: (Instant, u32),
}

impl<S> std::fmt::Debug for Conn<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn").field("opts", &self.opts).field("subs", &self.subs.len()).finish_non_exhaustive()
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Conn<S> {
    pub fn new(ctx: Arc<WsContext>, ws: WebSocketStream<S>, opts: Options) -> Conn<S> {
        let now = Instant::now();
        let posts = mpsc::channel(MAX_POSTS);
        Conn {
            ctx,
            ws,
            opts,
            subs: FxHashMap::default(),
            pending: Vec::new(),
            posts,
            last_traffic: now,
            window: (now, 0),
        }
    }

    /// Serves the connection until the client leaves, misbehaves, goes idle, or the server shuts down.
    pub async fn run(mut self) {
        let mut published = self.ctx.hub.watch();
        let mut closing = self.ctx.closing.clone();
        let idle = Duration::from_secs(self.ctx.cfg.idle_timeout_secs);
        let why = loop {
            let deadline = self.last_traffic + idle;
            tokio::select! {
                biased;
                _ = closing.changed() => break Some((CloseCode::Away, "server shutting down".to_string())),
                msg = self.ws.next() => match msg {
                    Some(Ok(m)) => {
                        if let Err(close) = self.on_message(m) {
                            break Some(close);
                        }
                    }
                    Some(Err(WsError::Capacity(e))) => break Some((CloseCode::Size, format!("frame too large: {e}"))),
                    // The inflate layer refuses a compressed message over the cap or a malformed compressed frame.
                    Some(Err(WsError::Io(e))) if e.kind() == std::io::ErrorKind::InvalidData => {
                        let inflate = e.get_ref().and_then(|i| i.downcast_ref::<super::deflate::InflateError>());
                        let too_large = matches!(inflate, Some(super::deflate::InflateError::TooLarge { .. }));
                        let code = if too_large { CloseCode::Size } else { CloseCode::Protocol };
                        break Some((code, e.to_string()));
                    }
                    Some(Err(e)) => {
                        tracing::debug!("connection read error: {e}");
                        break None;
                    }
                    None => break None,
                },
                changed = published.changed() => if changed.is_err() { break None },
                Some(answer) = self.posts.1.recv() => self.pending.push(answer),
                _ = sleep_until(deadline) => {
                    self.ctx.counters.closed_idle.fetch_add(1, Relaxed);
                    break Some((CloseCode::Normal, format!("idle for {} s", idle.as_secs())));
                }
            }
            if let Err(e) = self.flush_due(idle).await {
                tracing::debug!("connection write error: {e}");
                break None;
            }
        };
        if let Some((code, reason)) = why {
            let frame = CloseFrame { code, reason: reason.into() };
            let _ = tokio::time::timeout(Duration::from_secs(1), self.ws.close(Some(frame))).await;
        }
        for (_, (s, _)) in self.subs.drain() {
            self.ctx.hub.remove(&s.want);
            self.ctx.counters.subscription_delta(s.channel(), -1);
        }
    }

    /// Handles one client message; Err closes the connection with that code and reason.
    fn on_message(&mut self, m: Message) -> Result<(), (CloseCode, String)> {
        self.last_traffic = Instant::now();
        let text = match m {
            Message::Text(t) => t.to_string(),
            Message::Binary(b) => String::from_utf8_lossy(&b).into_owned(),
            Message::Close(_) => return Err((CloseCode::Normal, String::new())),
            _ => return Ok(()),
        };
        self.count_message()?;
        self.ctx.counters.messages_received.fetch_add(1, Relaxed);
        match protocol::parse(&text) {
            Ok(Request::Ping) => self.pending.push(protocol::PONG.to_string()),
            Ok(Request::Subscribe(s)) => self.subscribe(s),
            Ok(Request::Unsubscribe(s)) => self.unsubscribe(s),
            Ok(Request::Post { id, request }) => self.post(id, request),
            Err(e) => {
                self.ctx.counters.protocol_errors.fetch_add(1, Relaxed);
                self.pending.push(protocol::error(&e));
            }
        }
        Ok(())
    }

    fn count_message(&mut self) -> Result<(), (CloseCode, String)> {
        let now = Instant::now();
        if now.duration_since(self.window.0) >= Duration::from_secs(60) {
            self.window = (now, 0);
        }
        self.window.1 += 1;
        let max = self.ctx.cfg.max_messages_per_minute;
        if self.window.1 > max {
            self.ctx.counters.closed_abuse.fetch_add(1, Relaxed);
            return Err((CloseCode::Policy, format!("more than {max} messages a minute")));
        }
        Ok(())
    }

    fn subscribe(&mut self, s: Subscription) {
        if self.subs.contains_key(&s.want) {
            self.pending.push(protocol::already_subscribed(&s.echo));
            return;
        }
        let max = self.ctx.cfg.max_subscriptions;
        if self.subs.len() >= max {
            self.ctx.counters.protocol_errors.fetch_add(1, Relaxed);
            self.pending.push(protocol::error(&format!("Too many subscriptions: at most {max} per connection")));
            return;
        }
        let hub = &self.ctx.hub;
        let slot = hub.add(&s.want);
        let sub = match (&s.want, slot) {
            (Want::Trades(c), _) => Sub::Trades { coin: c.clone(), cursor: hub.feed_head() },
            (Want::L4(c), _) => Sub::L4 { coin: c.clone(), state: L4State::Waiting(hub.request_snapshot(c.clone())) },
            (_, Some(slot)) => Sub::Conflated { slot, sent: 0 },
            (_, None) => return,
        };
        self.pending.push(protocol::ack("subscribe", &s.echo));
        self.ctx.counters.subscription_delta(s.channel(), 1);
        self.subs.insert(s.want.clone(), (s, sub));
    }

    fn unsubscribe(&mut self, s: Subscription) {
        match self.subs.remove(&s.want) {
            Some((mine, _)) => {
                self.ctx.hub.remove(&mine.want);
                self.ctx.counters.subscription_delta(mine.channel(), -1);
                self.pending.push(protocol::ack("unsubscribe", &s.echo));
            }
            None => self.pending.push(protocol::already_unsubscribed(&s.echo)),
        }
    }

    /// `post` info requests are answered inline: l2Book from our books, the rest through the node.
    fn post(&mut self, id: serde_json::Value, request: serde_json::Value) {
        let is_info = request.get("type").and_then(|t| t.as_str()) == Some("info");
        let Some(payload) = request.get("payload").filter(|_| is_info) else {
            let text = "hlbook serves market data: only info requests can be posted";
            self.pending.push(protocol::post_error(&id, text));
            return;
        };
        let (ctx, payload, tx) = (self.ctx.clone(), payload.clone(), self.posts.0.clone());
        // Answered on its own task so a slow node never stalls this connection's data; the answer comes back
        // through the connection's small post queue.
        tokio::spawn(async move {
            let (status, body) = super::info::answer(&ctx.hub.shared, ctx.passthrough.as_ref(), &payload).await;
            let text = if status == 200 {
                let kind = payload.get("type").cloned().unwrap_or_default();
                protocol::post_response(
                    &id,
                    serde_json::json!({"type": "info", "payload": {"type": kind, "data": body}}),
                )
            } else {
                protocol::post_error(&id, &body.as_str().map_or_else(|| body.to_string(), str::to_string))
            };
            let _ = tx.send(text).await;
        });
    }

    /// Writes acks, errors and every due data frame, in that order, with one flush per batch.
    async fn flush_due(&mut self, idle: Duration) -> Result<(), WsError> {
        loop {
            let mut batch = Batch::default();
            for text in self.pending.drain(..) {
                batch.bytes += text.len();
                batch.frames.push(Out::Text(text));
            }
            let full = self.gather(&mut batch);
            if batch.frames.is_empty() {
                return Ok(());
            }
            match tokio::time::timeout(idle, self.write(batch)).await {
                Ok(r) => r?,
                Err(_) => return Err(WsError::Io(std::io::Error::other("client stopped reading"))),
            }
            self.last_traffic = Instant::now();
            if !full {
                return Ok(());
            }
        }
    }

    /// Adds due frames to `batch`; true when it stopped at the size cap with more due.
    fn gather(&mut self, batch: &mut Batch) -> bool {
        let hub = self.ctx.hub.clone();
        let backlog = self.ctx.cfg.backlog_blocks as u64;
        let head = hub.feed_head();
        let mut from = u64::MAX;
        let mut lost = Vec::new();
        for (s, sub) in self.subs.values_mut() {
            if let Sub::L4 { state: L4State::Waiting(rx), coin } = sub {
                match rx.try_recv() {
                    Ok(snap) => {
                        batch.push(Out::Shared(snap.frame));
                        *sub = Sub::L4 { coin: coin.clone(), state: L4State::Live { cursor: snap.after_seq } };
                    }
                    Err(oneshot::error::TryRecvError::Empty) => continue,
                    Err(oneshot::error::TryRecvError::Closed) => {
                        *rx = hub.request_snapshot(coin.clone());
                        continue;
                    }
                }
            }
            let (Sub::Trades { cursor, .. } | Sub::L4 { state: L4State::Live { cursor }, .. }) = sub else { continue };
            if head.saturating_sub(*cursor) <= backlog {
                from = from.min(*cursor);
                continue;
            }
            *cursor = head - backlog;
            lost.push(loss_notice(&s.echo, hub.tick_height(*cursor + 1)));
            let at = *cursor;
            match sub {
                Sub::L4 { state, coin } => *state = L4State::Waiting(hub.request_snapshot(coin.clone())),
                _ => from = from.min(at),
            }
        }
        let mut ticks = Vec::new();
        if from != u64::MAX {
            let first = hub.ticks_after(from, &mut ticks);
            for (s, sub) in self.subs.values_mut() {
                if let Sub::Trades { cursor, .. } | Sub::L4 { state: L4State::Live { cursor }, .. } = sub
                    && *cursor + 1 < first
                {
                    *cursor = first - 1;
                    lost.push(loss_notice(&s.echo, hub.tick_height(first)));
                }
            }
        }
        for text in lost {
            self.ctx.counters.overflows.fetch_add(1, Relaxed);
            batch.push(Out::Text(protocol::error(&text)));
        }
        let mut full = false;
        for tick in &ticks {
            if batch.bytes > BATCH_BYTES {
                full = true;
                break;
            }
            self.take_tick(tick, batch);
        }
        self.take_conflated(batch);
        full
    }

    fn take_tick(&mut self, tick: &Tick, batch: &mut Batch) {
        let hub = &self.ctx.hub;
        for (_, sub) in self.subs.values_mut() {
            match sub {
                Sub::Trades { coin, cursor } if tick.seq > *cursor => {
                    if let Some(f) = tick.trades.get(coin) {
                        batch.push(Out::Shared(f.clone()));
                    }
                    *cursor = tick.seq;
                }
                Sub::L4 { coin, state } => {
                    let L4State::Live { cursor } = state else { continue };
                    if tick.seq <= *cursor {
                        continue;
                    }
                    if tick.all_reset || tick.l4_reset.contains(coin) {
                        *state = L4State::Waiting(hub.request_snapshot(coin.clone()));
                        continue;
                    }
                    if let Some(f) = tick.l4.get(coin) {
                        batch.push(Out::Shared(f.clone()));
                    }
                    *cursor = tick.seq;
                }
                _ => {}
            }
        }
    }

    fn take_conflated(&mut self, batch: &mut Batch) {
        for (_, sub) in self.subs.values_mut() {
            if let Sub::Conflated { slot, sent } = sub
                && let Some(f) = slot.frame.load_full()
                && f.seq != *sent
            {
                if *sent != 0 && f.seq > *sent + 1 {
                    self.ctx.counters.conflated.fetch_add(f.seq - *sent - 1, Relaxed);
                }
                *sent = f.seq;
                batch.push(Out::Shared(f));
            }
        }
    }

    /// Feeds the batch to the socket and flushes once.
    async fn write(&mut self, batch: Batch) -> Result<(), WsError> {
        let sent_ns = now_nanos();
        let (n, level) = (batch.frames.len() as u64, self.ctx.cfg.compression_level);
        let mut bytes = 0u64;
        if self.opts.batch {
            let mut joined = Vec::with_capacity(batch.bytes + batch.frames.len() + 2);
            joined.push(b'[');
            for (i, f) in batch.frames.iter().enumerate() {
                if i > 0 {
                    joined.push(b',');
                }
                joined.extend_from_slice(&self.plain(f, sent_ns));
            }
            joined.push(b']');
            let msg = self.message(Bytes::from(joined), None, level);
            bytes += msg.len() as u64;
            self.ws.feed(msg).await?;
        } else {
            for f in &batch.frames {
                let msg = match f {
                    Out::Shared(fr) if !self.opts.audit => self.message(fr.json.clone(), Some(fr), level),
                    _ => self.message(Bytes::from(self.plain(f, sent_ns)), None, level),
                };
                bytes += msg.len() as u64;
                self.ws.feed(msg).await?;
            }
        }
        self.ws.flush().await?;
        let stages = &self.ctx.hub.stages;
        let written = now_nanos();
        for f in &batch.frames {
            if let Out::Shared(fr) = f
                && fr.audit.height > 0
            {
                stages.sent(fr.audit.height, fr.audit.line, written);
            }
        }
        let c = &self.ctx.counters;
        c.frames_sent.fetch_add(n, Relaxed);
        c.bytes_sent.fetch_add(bytes, Relaxed);
        Ok(())
    }

    /// A frame's JSON as this connection wants it (with audit fields when asked).
    fn plain(&self, f: &Out, sent_ns: i64) -> Vec<u8> {
        match f {
            Out::Shared(fr) if self.opts.audit => fr.with_audit(sent_ns),
            Out::Shared(fr) => fr.json.to_vec(),
            Out::Text(t) => t.clone().into_bytes(),
        }
    }

    /// A text message, compressed when negotiated: shared frames reuse their one compressed copy.
    fn message(&self, json: Bytes, shared: Option<&Arc<Frame>>, level: u32) -> Message {
        let (payload, rsv1) = match (self.opts.deflate, shared) {
            (true, Some(fr)) => (fr.deflated(level).clone(), true),
            (true, None) => (deflate_message(&json, level), true),
            (false, Some(fr)) => (fr.json.clone(), false),
            (false, None) => (json, false),
        };
        let header = FrameHeader { is_final: true, rsv1, opcode: OpCode::Data(Data::Text), ..FrameHeader::default() };
        Message::Frame(WsFrame::from_payload(header, payload))
    }
}

/// The error text for an ordered stream that lost blocks: names the subscription and the first height it gets again.
fn loss_notice(echo: &serde_json::Value, resumes_at: Option<u64>) -> String {
    match resumes_at {
        Some(h) => {
            format!("hlbook: this connection fell behind; {echo} lost blocks before height {h} and continues from it")
        }
        None => format!("hlbook: this connection fell behind; {echo} lost blocks and continues from the newest"),
    }
}

impl Batch {
    fn push(&mut self, o: Out) {
        self.bytes += match &o {
            Out::Shared(f) => f.json.len(),
            Out::Text(t) => t.len(),
        };
        self.frames.push(o);
    }
}
