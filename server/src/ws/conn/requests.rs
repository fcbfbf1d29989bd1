//! A connection's requests: subscribe, unsubscribe and post, each answered into the connection's pending messages
//! (written ahead of the data in its next batch), and the cap on messages a minute.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use super::resume::resumed_delivery;
use super::{Chain, Conn, Delivery, End, Kept, L4State, MAX_POSTS};
use crate::publish::Want;
use crate::ws::budget::SUB_BYTES;
use crate::ws::candle_stream::CandleState;
use crate::ws::protocol::{self, Request, Subscription};
use crate::ws::user_stream::{first_state, release_user};

/// A pong's frame header, written ahead of the ping's payload.
const PONG_HEADER: usize = 2;

/// Bytes of `serde_json::Value` per byte of JSON text, at most: an array of one-digit numbers (`0,` is two bytes,
/// its `Value` 32).
const VALUE_PER_BYTE: usize = 16;

impl<S: AsyncRead + AsyncWrite + Unpin> Conn<S> {
    /// Handles one client message; Err ends the connection.
    pub(super) fn on_message(&mut self, m: Message) -> Result<(), End> {
        self.last_traffic = Instant::now();
        let text = match m {
            Message::Text(t) => t.to_string(),
            Message::Binary(b) => String::from_utf8_lossy(&b).into_owned(),
            Message::Close(_) => return Err(End::ByClient),
            // A ping is a message like any other (the exchange counts it), and its pong is charged until written.
            Message::Ping(p) => {
                self.count_message()?;
                self.pong_bytes += p.len() + PONG_HEADER;
                return Ok(());
            }
            Message::Pong(_) => return self.count_message(),
            Message::Frame(_) => return Ok(()),
        };
        self.count_message()?;
        match protocol::parse(&text) {
            Ok(Request::Ping) => self.pending.push(protocol::PONG.to_string()),
            Ok(Request::Subscribe(s)) => self.subscribe(s),
            Ok(Request::Unsubscribe(s)) => self.unsubscribe(s),
            Ok(Request::Post { id, request }) => self.post(id, request, text.len()),
            Err(e) => {
                self.ctx.counters().protocol_errors.inc();
                self.pending.push(protocol::error(&e));
            }
        }
        Ok(())
    }

    /// Counts a message on this connection and for its IP; over either allowance the connection is closed.
    fn count_message(&mut self) -> Result<(), End> {
        self.ctx.counters().messages_received.inc();
        let now = Instant::now();
        if now.duration_since(self.window_start) >= Duration::from_secs(60) {
            (self.window_start, self.window_messages) = (now, 0);
        }
        self.window_messages += 1;
        let max = self.ctx.cfg().max_messages_per_minute;
        let why = if self.window_messages > max {
            format!("more than {max} messages a minute")
        } else if let Some(who) = &self.opts.who
            && !self.ctx.ip_quota().message(who)
        {
            self.ctx.ip_quota().messages_refusal(who)
        } else {
            return Ok(());
        };
        self.ctx.counters().closed_abuse.inc();
        Err(End::ByUs(CloseCode::Policy, why))
    }

    fn subscribe(&mut self, s: Subscription) {
        if !self.exists(&s.want) {
            // Nothing is kept for a name the books do not have, so made-up names cost no memory.
            self.ctx.counters().protocol_errors.inc();
            self.pending.push(protocol::unknown_subject(&s.echo));
            return;
        }
        if self.subs.contains_key(&s.want) {
            self.pending.push(protocol::already_subscribed(&s.echo));
            return;
        }
        let max = self.ctx.cfg().max_subscriptions;
        if self.subs.len() >= max {
            self.ctx.counters().protocol_errors.inc();
            let text = format!("Too many subscriptions: at most {max} per connection: {}", s.echo);
            self.pending.push(protocol::error(&text));
            return;
        }
        // What it will hold: refused, nothing kept, when the global budget has no room (a hard bound).
        let bytes = SUB_BYTES + s.echo.len();
        if !self.budget.room(bytes) {
            self.ctx.counters().protocol_errors.inc();
            let text = format!(
                "hlbook: the server's byte budget for all connections is exhausted (server.global_budget_bytes); \
                 nothing was kept: {}",
                s.echo
            );
            self.pending.push(protocol::error(&text));
            return;
        }
        if let Some(who) = &self.opts.who
            && !self.ctx.ip_quota().try_subscribe(who)
        {
            self.ctx.counters().protocol_errors.inc();
            self.pending.push(protocol::error(&self.ctx.ip_quota().refusal(who, &s.echo)));
            return;
        }
        // Gives the IP's (or token's) place back on every way out below that keeps nothing.
        let give_back = |ctx: &crate::ws::WsContext, who: Option<&crate::ws::ip_quota::Who>| {
            if let Some(who) = who {
                ctx.ip_quota().unsubscribe(who);
            }
        };
        if let (Want::User { user, .. }, Some(ip)) = (&s.want, self.opts.ip) {
            let (users, subs) = (self.ctx.cfg().max_users_per_ip, self.ctx.cfg().max_user_subscriptions_per_ip);
            if let Err(why) = self.ctx.user_cap().try_add(ip, *user, users, subs) {
                self.ctx.counters().protocol_errors.inc();
                let max = if why == crate::ws::user_cap::Refused::Users { users } else { subs };
                self.pending.push(protocol::error(&crate::ws::user_cap::refusal(why, max, &s.echo)));
                give_back(&self.ctx, self.opts.who.as_ref());
                return;
            }
        }
        let hub = self.ctx.hub();
        let slot = hub.add(&s.want);
        let mut chain = Chain::new(self.subs_made + 1);
        let (resumed, refusal) = self.resume(&s, &mut chain);
        // trades: the coin's recent trades right after the ack, as the official feed sends them (userFundings and
        // userNonFundingLedgerUpdates: their snapshot comes from the store). A resumed subscription continues.
        let mut recent = None;
        let sub = match (&s.want, slot) {
            (want, _) if let Some(r) = resumed => resumed_delivery(want, r, self.shared_coin_of(want)),
            (Want::Trades(c), _) => {
                let cursor = hub.feed_head();
                recent = hub.recent_trades_frame(c, cursor);
                Delivery::Trades { coin: self.shared_coin(c), cursor }
            }
            (Want::L4(c), _) => {
                let coin = self.shared_coin(c);
                Delivery::L4 { state: L4State::Waiting(hub.request_snapshot(coin.clone())), coin }
            }
            (Want::User { user, channel: ch, .. }, _) => Delivery::User {
                user: *user,
                ch: *ch,
                generation: self.ctx.shared().watched().view().generation,
                state: first_state(hub, *user, *ch),
            },
            (Want::Candle(c, i), _) => Delivery::Candle { key: (self.shared_coin(c), *i), state: CandleState::Waiting },
            (_, Some(slot)) => Delivery::Conflated { slot, sent: 0 },
            (_, None) => {
                give_back(&self.ctx, self.opts.who.as_ref());
                return;
            }
        };
        self.pending.push(protocol::ack("subscribe", &s.echo));
        if let Some(text) = refusal {
            self.pending.push(protocol::notice(&text));
        }
        // Not on `?audit=1` connections: each of their frames describes one block, and this one spans many.
        if let Some(json) = recent.filter(|_| !self.opts.audit) {
            self.pending.push(String::from_utf8_lossy(&json).into_owned());
        }
        self.ctx.counters().subscription_delta(s.channel(), 1);
        self.subs_made += 1;
        let kept = Kept { _charge: self.budget.charge(bytes), sub: s };
        self.subs.insert(kept.want.clone(), (Box::new(kept), sub, chain));
    }

    /// The books' own copy of a coin's name, the one the publisher keys its ticks with. Every block, each
    /// connection hashes its coins' names to find their frames: one shared copy stays in cache, where a thousand
    /// connections' own copies miss it (a fifth of the time spent gathering frames, docs/benchmarks.md).
    pub(super) fn shared_coin(&self, coin: &crate::node::Coin) -> crate::node::Coin {
        let books = self.ctx.shared().books();
        books.coin(coin).map_or_else(|| coin.clone(), |b| b.coin().clone())
    }

    /// Whether the books have the subscription's coin (or, for allMids, a coin of its dex): every coin of the
    /// node's snapshot is in the books, and any coin that has had an order since.
    fn exists(&self, want: &Want) -> bool {
        let books = self.ctx.shared().books();
        match want {
            Want::L2(k) => books.coin(&k.coin).is_some(),
            Want::Bbo(c) | Want::Trades(c) | Want::L4(c) | Want::Candle(c, _) => books.coin(c).is_some(),
            // Any well-formed address may be followed: a user with nothing yet simply gets nothing yet.
            Want::Mids(None) | Want::User { .. } => true,
            Want::Mids(Some(dex)) => books.books().any(|b| b.coin().split_once(':').is_some_and(|(d, _)| d == &**dex)),
        }
    }

    fn unsubscribe(&mut self, s: Subscription) {
        match self.subs.remove(&s.want) {
            Some((mine, _, _)) => {
                self.ctx.hub().remove(&mine.want, self.opts.ip);
                release_user(&self.ctx, self.opts.ip, &mine.want);
                if let Some(who) = &self.opts.who {
                    self.ctx.ip_quota().unsubscribe(who);
                }
                self.ctx.counters().subscription_delta(mine.channel(), -1);
                self.pending.push(protocol::ack("unsubscribe", &s.echo));
            }
            None => self.pending.push(protocol::already_unsubscribed(&s.echo)),
        }
    }

    /// `post` info requests are answered as `POST /info` would: l2Book from our books, the allowed market types
    /// through the node, anything else refused.
    fn post(&mut self, id: serde_json::Value, request: serde_json::Value, message_bytes: usize) {
        let is_info = request.get("type").and_then(|t| t.as_str()) == Some("info");
        let Some(payload) = request.get("payload").filter(|_| is_info) else {
            let text = "hlbook serves market data: only info requests can be posted";
            self.pending.push(protocol::post_error(&id, text));
            return;
        };
        let Ok(place) = self.post_places.clone().try_acquire_owned() else {
            let text = format!("too many post requests in flight on this connection (at most {MAX_POSTS})");
            self.pending.push(protocol::post_error(&id, &text));
            return;
        };
        let (ctx, payload, tx, ip) = (self.ctx.clone(), payload.clone(), self.post_tx.clone(), self.ip);
        let budget = self.budget.clone();
        // The parsed payload lives in the task until answered: charged as what a parsed message of small values
        // costs at most, so sixteen large posts from a client cost it its budget, not the server its memory.
        let held = budget.charge(message_bytes.saturating_mul(VALUE_PER_BYTE));
        // Answered on its own task so a slow node never stalls this connection's data; the answer comes back
        // through the connection's post queue.
        tokio::spawn(async move {
            let (_place, _held) = (place, held);
            let a = crate::ws::info::answer(&ctx, ip, &payload).await;
            let text = if a.status == 200 {
                protocol::post_info_response(&id, payload.get("type").unwrap_or(&serde_json::Value::Null), &a.body)
            } else {
                protocol::post_error(&id, &a.message())
            };
            // Charged before it queues: a client that posts and never reads pays for what waits for it.
            let charge = budget.charge(text.len());
            let _ = tx.send((text, charge)).await;
        });
    }
}
