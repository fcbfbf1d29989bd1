//! One WebSocket connection: one task that reads client requests and, on every publish, gathers everything due
//! and writes it with a single flush.
//!
//! L2, bbo and allMids are conflated: the connection sends the newest frame of each subscription, so a client
//! that was slow simply jumps ahead. Trades and l4Book are ordered: the connection walks the hub's feed with a
//! cursor per subscription, and one that falls more than `backlog_blocks` behind gets an error frame naming the
//! lost blocks (and, for l4Book, a fresh snapshot) and continues. Nothing is buffered per connection beyond one
//! batch, so a client that stops reading costs one blocked task and its socket buffers. The client's requests
//! (subscribe, unsubscribe, post) are answered in `requests`; what is due is gathered in `gather`, and written in
//! `write`.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use rustc_hash::FxHashMap;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::time::{Instant, sleep_until};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use super::WsContext;
use super::budget::{CONN_BYTES, Charge, ConnBudget};
use super::candle_stream::CandleState;
use super::protocol::Subscription;
use super::user_stream::{UserState, release_user};
use crate::node::Address;
use crate::publish::candles::keeper::CandleKey;
use crate::publish::users::UserChannel;
use crate::publish::{Frame, L4Snapshot, Slot, Want};

mod chain;
mod gather;
mod requests;
mod resume;
mod write;

use chain::{Chain, Link};

/// How a connection wants its frames.
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub deflate: bool,
    pub audit: bool,
    pub batch: bool,
    /// The client IP the per-IP user cap counts (`None`: uncapped, e.g. in-process tests).
    pub ip: Option<std::net::IpAddr>,
    /// Whom the subscription and message allowances count: the IP, or the named token it presented (`None`:
    /// uncapped).
    pub who: Option<super::ip_quota::Who>,
}

/// `post` requests of one connection in flight at once.
const MAX_POSTS: usize = 16;

/// How one subscription's frames reach this connection (the parsed request is a `Subscription`, the hub's key a
/// `Want`): where it stands on its feed or slot.
enum Delivery {
    /// L2, bbo, allMids: the newest frame of a slot; `sent` is the last frame sequence written.
    Conflated {
        slot: Arc<Slot>,
        sent: u64,
    },
    Trades {
        coin: crate::node::Coin,
        cursor: u64,
    },
    /// The market-wide liquidation fills: every tick's frame after `cursor`.
    Liquidations {
        cursor: u64,
    },
    L4 {
        coin: crate::node::Coin,
        state: L4State,
    },
    /// orderUpdates, userFills, userEvents of one user, from the first block that holds all of its events
    /// (parsed after the user was watched, at watch `generation` or later).
    User {
        user: Address,
        ch: UserChannel,
        generation: u64,
        state: UserState,
    },
    /// A candle (coin, interval): its current candle first, then the frame of every block the coin trades in.
    Candle {
        key: CandleKey,
        state: CandleState,
    },
    /// Resumed from a height the feed does not hold (trades, userFills, candle): caught up from the store to
    /// height `after`, its next page being read (`publish::store_replay`) or waiting for the connection's page in
    /// flight; the feed's ticks wait until it joins them. `coin`: the books' copy of its coin.
    FromStore {
        read: Option<crate::publish::store_replay::PageRead>,
        after: u64,
        coin: Option<crate::node::Coin>,
    },
}

impl Delivery {
    /// Where an ordered subscription stands on the feed (`None` while it waits for its first frame, or for a
    /// conflated one).
    fn cursor(&mut self) -> Option<&mut u64> {
        match self {
            Delivery::Trades { cursor, .. }
            | Delivery::Liquidations { cursor }
            | Delivery::L4 { state: L4State::Live { cursor }, .. }
            | Delivery::User { state: UserState::Pending { cursor, .. } | UserState::Live { cursor, .. }, .. }
            | Delivery::Candle { state: CandleState::Live { cursor }, .. } => Some(cursor),
            _ => None,
        }
    }
}

enum L4State {
    Waiting(oneshot::Receiver<L4Snapshot>),
    /// Received, charged to the budget, and waiting for room in a batch.
    Ready(L4Snapshot, Charge),
    Live {
        cursor: u64,
    },
}

/// A subscription as kept: the request (for acks, errors and notices) and what it is charged, its echo above all.
struct Kept {
    sub: Subscription,
    _charge: Charge,
}

impl std::ops::Deref for Kept {
    type Target = Subscription;
    fn deref(&self) -> &Subscription {
        &self.sub
    }
}

/// How a connection ends.
enum End {
    /// The client sent a close frame.
    ByClient,
    /// We close it with this code and reason.
    ByUs(CloseCode, String),
    /// The transport is gone: nothing to say.
    Gone,
}

/// What one gather produced.
#[derive(Default)]
struct Batch {
    frames: Vec<Out>,
    bytes: usize,
    /// What the batch holds for this connection alone (answers, snapshots), given back once written.
    charges: Vec<Charge>,
}

enum Out {
    /// A published frame, with its place in its subscription's audit chain.
    Shared(Arc<Frame>, Link),
    Text(String),
}

pub struct Conn<S> {
    ctx: Arc<WsContext>,
    ws: WebSocketStream<S>,
    opts: Options,
    /// Each subscription by the hub's key: the request as the client sent it (for acks and errors; boxed, since
    /// every block walks these entries of every connection and a smaller entry misses the cache less), how its
    /// frames are delivered, and its audit chain.
    subs: FxHashMap<Want, (Box<Kept>, Delivery, Chain)>,
    /// Subscriptions made so far: the next one's number in the audit chain.
    subs_made: u32,
    pending: Vec<String>,
    /// The client's IP, for the per-IP limits of info requests.
    ip: IpAddr,
    /// Answers of `post` requests come back from their tasks here, charged to the budget.
    post_answers: mpsc::Receiver<(String, Charge)>,
    post_tx: mpsc::Sender<(String, Charge)>,
    /// What is held for this connection: its subscriptions, and what is not yet written.
    budget: Arc<ConnBudget>,
    /// The connection's own share of the budget, held for its life.
    _base: Charge,
    /// Pongs tungstenite queued for the client's pings and not yet written.
    pong_bytes: usize,
    pending_charges: Vec<Charge>,
    /// Places for `post` requests in flight; one more is refused at once, so a client cannot pile up tasks.
    post_places: Arc<Semaphore>,
    last_traffic: Instant,
    /// The rate window: when it began and the messages counted in it.
    window_start: Instant,
    window_messages: u32,
}

impl<S> std::fmt::Debug for Conn<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn").field("opts", &self.opts).field("subs", &self.subs.len()).finish_non_exhaustive()
    }
}

/// A connection gives its subscriptions back to the hub and its users to the per-IP count however it ends: at the
/// end of `run`, or while unwinding from a panic in its task (which ends only this connection).
impl<S> Drop for Conn<S> {
    fn drop(&mut self) {
        for (_, (s, _, _)) in self.subs.drain() {
            self.ctx.hub().remove(&s.want, self.opts.ip);
            release_user(&self.ctx, self.opts.ip, &s.want);
            if let Some(who) = &self.opts.who {
                self.ctx.ip_quota().unsubscribe(who);
            }
            self.ctx.counters().subscription_delta(s.channel(), -1);
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Conn<S> {
    pub fn new(ctx: Arc<WsContext>, ws: WebSocketStream<S>, opts: Options, ip: IpAddr) -> Conn<S> {
        let now = Instant::now();
        let (post_tx, post_answers) = mpsc::channel(MAX_POSTS);
        let budget = ctx.budgets().connection();
        let base = budget.charge(CONN_BYTES);
        Conn {
            ctx,
            ws,
            opts,
            subs: FxHashMap::default(),
            subs_made: 0,
            pending: Vec::new(),
            ip,
            post_answers,
            post_tx,
            budget,
            _base: base,
            pong_bytes: 0,
            pending_charges: Vec::new(),
            post_places: Arc::new(Semaphore::new(MAX_POSTS)),
            last_traffic: now,
            window_start: now,
            window_messages: 0,
        }
    }

    /// Serves the connection until the client leaves, misbehaves, goes idle, or the server shuts down.
    pub async fn run(mut self) {
        let mut published = self.ctx.hub().watch();
        let mut closing = self.ctx.closing().clone();
        let idle = Duration::from_secs(self.ctx.cfg().idle_timeout_secs);
        let budget = self.budget.clone();
        let end = loop {
            let deadline = self.last_traffic + idle;
            tokio::select! {
                biased;
                _ = closing.changed() => break End::ByUs(CloseCode::Away, "server shutting down".to_string()),
                msg = self.ws.next() => match msg {
                    Some(Ok(m)) => {
                        if let Err(end) = self.on_message(m) {
                            break end;
                        }
                    }
                    Some(Err(WsError::Capacity(e))) => break End::ByUs(CloseCode::Size, format!("frame too large: {e}")),
                    // The inflate layer refuses a compressed message over the cap or a malformed compressed frame.
                    Some(Err(WsError::Io(e))) if e.kind() == std::io::ErrorKind::InvalidData => {
                        let inflate = e.get_ref().and_then(|i| i.downcast_ref::<super::deflate::InflateError>());
                        let too_large = matches!(inflate, Some(super::deflate::InflateError::TooLarge { .. }));
                        let code = if too_large { CloseCode::Size } else { CloseCode::Protocol };
                        break End::ByUs(code, e.to_string());
                    }
                    Some(Err(e)) => {
                        tracing::debug!("connection read error: {e}");
                        break End::Gone;
                    }
                    None => break End::Gone,
                },
                changed = published.changed() => if changed.is_err() { break End::Gone },
                // Picked to free the exhausted global budget while waiting for its client.
                () = budget.went_over() => if let Some(reason) = budget.over() {
                    self.ctx.counters().closed_budget.inc();
                    break End::ByUs(CloseCode::Policy, reason);
                },
                Some((answer, charge)) = self.post_answers.recv() => {
                    self.pending.push(answer);
                    self.pending_charges.push(charge);
                }
                () = sleep_until(deadline) => {
                    self.ctx.counters().closed_idle.inc();
                    break End::ByUs(CloseCode::Normal, format!("idle for {} s", idle.as_secs()));
                }
            }
            if let Err(end) = self.flush_due(idle).await {
                break end;
            }
        };
        self.close(end).await;
        // The subscriptions are given back by `Drop`.
    }

    /// Ends the connection as RFC 6455 asks: a client's close frame is answered at once, and nothing still due
    /// is sent after it (the client will not read it); our own close waits briefly for the client's answer.
    async fn close(&mut self, end: End) {
        const HANDSHAKE: Duration = Duration::from_secs(1);
        match end {
            // tungstenite queued the answer when it read the client's frame; closing the sink writes it out.
            End::ByClient => {
                let _ = tokio::time::timeout(HANDSHAKE, SinkExt::close(&mut self.ws)).await;
            }
            End::ByUs(code, reason) => {
                let frame = CloseFrame { code, reason: reason.into() };
                let answered = async {
                    self.ws.send(Message::Close(Some(frame))).await?;
                    while self.ws.next().await.is_some_and(|m| m.is_ok()) {}
                    Ok::<(), WsError>(())
                };
                let _ = tokio::time::timeout(HANDSHAKE, answered).await;
            }
            End::Gone => {}
        }
    }

    /// Writes acks, errors and every due data frame, in that order, with one flush per batch. Err: how the
    /// connection ends (the client stopped reading, the socket failed, or it went over its byte budget).
    async fn flush_due(&mut self, idle: Duration) -> Result<(), End> {
        loop {
            let mut batch = Batch::default();
            for text in self.pending.drain(..) {
                batch.bytes += text.len();
                batch.frames.push(Out::Text(text));
            }
            batch.charges.append(&mut self.pending_charges);
            // Pongs for the client's pings are written (tungstenite's buffer flushed) like any message, so a
            // client that pings and never reads is held to one socket's worth, not to tungstenite's buffer cap.
            let pongs = std::mem::take(&mut self.pong_bytes);
            if pongs > 0 {
                batch.charges.push(self.budget.charge(pongs));
            }
            let full = self.gather(&mut batch);
            self.check_budget()?;
            if batch.frames.is_empty() && pongs == 0 {
                return Ok(());
            }
            let (budget, ctx) = (self.budget.clone(), self.ctx.clone());
            let written = {
                let write = tokio::time::timeout(idle, self.write(batch));
                tokio::pin!(write);
                loop {
                    tokio::select! {
                        r = &mut write => break r,
                        // A post answer charged while the client does not read: close now, not after the timeout.
                        () = budget.went_over() => if let Some(reason) = budget.over() {
                            ctx.counters().closed_budget.inc();
                            return Err(End::ByUs(CloseCode::Policy, reason));
                        },
                    }
                }
            };
            match written {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::debug!("connection write error: {e}");
                    return Err(End::Gone);
                }
                Err(_) => {
                    ctx.counters().closed_slow.inc();
                    tracing::debug!("client stopped reading for {} s", idle.as_secs());
                    return Err(End::Gone);
                }
            }
            self.last_traffic = Instant::now();
            if !full {
                return Ok(());
            }
        }
    }

    /// Closes the connection with 1008 when what it holds is over its budget or the global one is gone.
    fn check_budget(&self) -> Result<(), End> {
        match self.budget.over() {
            Some(reason) => {
                self.ctx.counters().closed_budget.inc();
                Err(End::ByUs(CloseCode::Policy, reason))
            }
            None => Ok(()),
        }
    }
}
