//! A connection's gather: on each wake, everything due to it in one batch, in order. Snapshots that became ready
//! (l4Book, userFills, candles) first, then the feed's ticks each ordered subscription has not had (with a loss
//! notice for one that fell past its backlog), then the newest frame of each conflated one. Kept apart from the
//! connection's loop so what goes out, and in what order, reads in one place.

use std::sync::Arc;

use tokio::sync::oneshot;

use super::chain::{Chain, Replay};
use super::{Batch, Conn, Delivery, L4State, Link, Out};
use crate::publish::feed::TickKind;
use crate::publish::users::UserChannel;
use crate::publish::{Frame, Hub, Tick};
use crate::ws::candle_stream::{first_frame, take_candle_tick};
use crate::ws::protocol;
use crate::ws::user_stream::{UserState, take_snapshot, take_user_tick};

/// A batch stops growing past this many bytes; the rest goes in the next one.
const BATCH_BYTES: usize = 4 << 20;

impl<S> Conn<S> {
    /// Adds due frames to `batch`; true when it stopped at the size cap with more due.
    pub(super) fn gather(&mut self, batch: &mut Batch) -> bool {
        self.catch_up(batch);
        let hub = self.ctx.hub().clone();
        let backlog = self.ctx.cfg().backlog_blocks as u64;
        let head = hub.feed_head();
        let mut from = u64::MAX;
        let mut lost = Vec::new();
        for (s, sub, chain) in self.subs.values_mut() {
            if let Delivery::User {
                state: state @ (UserState::Waiting { .. } | UserState::TwapWaiting { .. }),
                ch,
                ..
            } = sub
            {
                let Some((taken, note)) = take_snapshot(state, *ch, &s.echo) else { continue };
                if let Some(text) = note {
                    batch.push(Out::Text(protocol::notice(&text)));
                }
                match taken {
                    Ok(snap) => batch.push_frame(snap, chain, true, 0),
                    Err(text) => batch.push(Out::Text(protocol::notice(&text))),
                }
            }
            if let Delivery::L4 { state, coin } = sub {
                if let L4State::Waiting(rx) = state {
                    match rx.try_recv() {
                        Ok(snap) => {
                            let charge = self.budget.charge(snap.frame.json.len());
                            *state = L4State::Ready(snap, charge);
                        }
                        Err(oneshot::error::TryRecvError::Empty) => continue,
                        Err(oneshot::error::TryRecvError::Closed) => {
                            *rx = hub.request_snapshot(coin.clone());
                            continue;
                        }
                    }
                }
                // Whole books go out as the batch has room; the rest wait, charged, for the next one.
                if matches!(state, L4State::Ready(..)) {
                    if batch.bytes > BATCH_BYTES {
                        continue;
                    }
                    let live = L4State::Live { cursor: 0 };
                    let L4State::Ready(snap, charge) = std::mem::replace(state, live) else { unreachable!() };
                    batch.push_frame(snap.frame, chain, true, 0);
                    batch.charges.push(charge);
                    *state = L4State::Live { cursor: snap.after_seq };
                }
            }
            if let Delivery::Candle { key, state } = sub
                && let Some((frame, notice)) = first_frame(&hub, key, head, &s.echo, state)
            {
                batch.push_frame(frame, chain, true, 0);
                if let Some(text) = notice {
                    batch.push(Out::Text(protocol::notice(&text)));
                }
            }
            let Some(cursor) = sub.cursor() else { continue };
            if head.saturating_sub(*cursor) <= backlog {
                from = from.min(*cursor);
                continue;
            }
            let skipped = (*cursor + 1, head - backlog);
            *cursor = head - backlog;
            chain_drop(&hub, chain, skipped);
            lost.push(loss_notice(&s.echo, hub.tick_height(*cursor + 1)));
            let at = *cursor;
            match sub {
                Delivery::L4 { state, coin } => *state = L4State::Waiting(hub.request_snapshot(coin.clone())),
                _ => from = from.min(at),
            }
        }
        let mut ticks = Vec::new();
        if from != u64::MAX {
            let first = hub.ticks_after(from, &mut ticks);
            for (s, sub, chain) in self.subs.values_mut() {
                if let Some(cursor) = sub.cursor()
                    && *cursor + 1 < first
                {
                    chain_drop(&hub, chain, (*cursor + 1, first - 1));
                    *cursor = first - 1;
                    lost.push(loss_notice(&s.echo, hub.tick_height(first)));
                }
            }
        }
        for text in lost {
            self.ctx.counters().overflows.inc();
            batch.push(Out::Text(protocol::notice(&text)));
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
        let hub = self.ctx.hub();
        for (_, sub, chain) in self.subs.values_mut() {
            // A tick may hold several frames of one subscription (a user's fundings in a misc_events block).
            let mut more: &[Arc<Frame>] = &[];
            // userEvents mixes fills, by block height, with misc_events fundings, whose heights lag: `since` names
            // the fills, and a funding is new to a resumed client if its tick came after them, whatever its height.
            let by_order = tick.kind == TickKind::Misc && matches!(sub, Delivery::User { ch: UserChannel::Events, .. });
            let frame = match sub {
                Delivery::Trades { coin, cursor, .. } if tick.seq > *cursor => {
                    *cursor = tick.seq;
                    tick.trades.get(coin).cloned()
                }
                Delivery::Liquidations { cursor } if tick.seq > *cursor => {
                    *cursor = tick.seq;
                    tick.liquidations.clone()
                }
                Delivery::L4 { coin, state } => {
                    let L4State::Live { cursor } = state else { continue };
                    if tick.seq <= *cursor {
                        continue;
                    }
                    if tick.all_reset || tick.l4_reset.contains(coin) {
                        *state = L4State::Waiting(hub.request_snapshot(coin.clone()));
                        continue;
                    }
                    *cursor = tick.seq;
                    tick.l4.get(coin).cloned()
                }
                Delivery::User { user, ch, generation, state } => {
                    let f = take_user_tick(hub, tick, *user, *ch, *generation, state);
                    if f.is_some() {
                        more = tick.users.get(user).map_or(&[][..], |u| u.more(*ch));
                    }
                    f
                }
                Delivery::Candle { key, state } => take_candle_tick(tick, key, state),
                _ => None,
            };
            for f in frame.into_iter().chain(more.iter().cloned()) {
                match chain.replay_of(tick.seq, if by_order { u64::MAX } else { f.audit.height() }) {
                    Replay::Had => {}
                    Replay::Again => batch.push_replayed(f, chain),
                    Replay::Live => batch.push_frame(f, chain, false, 0),
                }
            }
        }
    }

    fn take_conflated(&mut self, batch: &mut Batch) {
        for (_, sub, chain) in self.subs.values_mut() {
            if let Delivery::Conflated { slot, sent } = sub
                && let Some(f) = slot.load_full()
                && f.seq != *sent
            {
                let conflated = if *sent != 0 && f.seq > *sent + 1 { f.seq - *sent - 1 } else { 0 };
                self.ctx.counters().conflated.add(conflated);
                // A subscription's first frame is the slot's current state, which may be older than it.
                let first = *sent == 0;
                *sent = f.seq;
                batch.push_frame(f, chain, first, conflated);
            }
        }
    }
}

/// The error text for an ordered stream that lost blocks: names the subscription and the first height it gets again.
fn loss_notice(echo: &protocol::Echo, resumes_at: Option<u64>) -> String {
    match resumes_at {
        Some(h) => {
            format!("hlbook: this connection fell behind; {echo} lost blocks before height {h} and continues from it")
        }
        None => format!("hlbook: this connection fell behind; {echo} lost blocks and continues from the newest"),
    }
}

/// The subscription's frames of feed ticks `skipped.0..=skipped.1` were dropped: its chain names their heights
/// (from the first skipped tick still in the feed, else from the height after its last frame).
fn chain_drop(hub: &Hub, chain: &mut Chain, skipped: (u64, u64)) {
    let last = hub.tick_height(skipped.1).unwrap_or(0);
    let first = hub.tick_height(skipped.0).unwrap_or(chain.prev() + 1).min(last.max(chain.prev() + 1));
    chain.dropped(first, last.max(first));
}

impl Batch {
    pub(super) fn push(&mut self, o: Out) {
        self.bytes += match &o {
            Out::Shared(f, _) => f.json.len(),
            Out::Text(t) => t.len(),
        };
        self.frames.push(o);
    }

    /// A subscription's next frame: it takes its place in the subscription's chain.
    fn push_frame(&mut self, f: Arc<Frame>, chain: &mut Chain, snapshot: bool, conflated: u64) {
        let link = chain.next(f.audit.height(), snapshot, conflated);
        self.push(Out::Shared(f, link));
    }

    /// A resumed subscription's frame sent again: its place in the chain, marked as a replay.
    pub(super) fn push_replayed(&mut self, f: Arc<Frame>, chain: &mut Chain) {
        let link = Link { replayed: true, ..chain.next(f.audit.height(), false, 0) };
        self.push(Out::Shared(f, link));
    }
}
