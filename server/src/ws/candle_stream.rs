//! The candle subscriptions of one connection: the first frame (the key's current candle, whole) right after the
//! ack, then the key's frame of every later feed tick.
//!
//! The first frame is the key's newest (`CandleFrames::latest`), which belongs to feed tick `seq`; the connection
//! goes on from `max(seq, head)` where `head` was read before it, so no frame is missed or sent twice: every tick
//! up to `head` was pushed after its frames were kept as the newest. Until the key has a frame (its candle is being
//! read from the store, or the coin has never traded there) the subscription waits.

use std::sync::Arc;

use crate::node::time::format_node_time;
use crate::publish::candles::keeper::CandleKey;
use crate::publish::{Frame, Hub, Tick};

pub(super) enum CandleState {
    Waiting,
    Live { cursor: u64 },
}

/// A waiting subscription's first frame, and a notice when the history store does not hold its whole bucket.
pub(super) fn first_frame(
    hub: &Hub,
    key: &CandleKey,
    head: u64,
    echo: &super::protocol::Echo,
    state: &mut CandleState,
) -> Option<(Arc<Frame>, Option<String>)> {
    let CandleState::Waiting = state else { return None };
    let latest = hub.latest_candle(key)?;
    *state = CandleState::Live { cursor: head.max(latest.frame.seq) };
    let notice = latest.partial_from.map(|from_ms| {
        if from_ms >= i64::MAX - 1 {
            return format!(
                "hlbook: no history store: the first candle of {echo} counts only the trades since it was subscribed"
            );
        }
        let from = format_node_time(from_ms.saturating_mul(1_000_000));
        format!(
            "hlbook: the history store does not hold every block of this candle's bucket: the first candle of \
             {echo} counts the trades from {from} UTC on"
        )
    });
    Some((latest.frame, notice))
}

/// The key's frame of `tick`, if the subscription is live and has not had it.
pub(super) fn take_candle_tick(tick: &Tick, key: &CandleKey, state: &mut CandleState) -> Option<Arc<Frame>> {
    let CandleState::Live { cursor } = state else { return None };
    if tick.seq <= *cursor {
        return None;
    }
    *cursor = tick.seq;
    tick.candles.get(key).cloned()
}
