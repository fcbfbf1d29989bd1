//! The per-user subscriptions of one connection (orderUpdates, userFills, userEvents, userTwapSliceFills, and from misc_events
//! userFundings and userNonFundingLedgerUpdates): where each stands on the feed, the userFills snapshot read from
//! the node's files, and the per-IP user cap's release.
//!
//! A subscription skips feed ticks whose blocks were parsed before its user was watched (their user events may be
//! partial), then takes every block; userFills first waits for its snapshot of the fills before that block (from
//! the history store), and with `aggregateByTime: true` gets the merged frames (`store::fills`).

use std::sync::Arc;

use super::WsContext;
use super::protocol::Echo;
use crate::node::Address;
use crate::publish::history::{ReadOf, Waiter};
use crate::publish::twap_history::TwapRead;
use crate::publish::users::UserChannel;
use crate::publish::{Frame, Hub, Tick, Want};

pub(super) enum UserState {
    /// Skipping blocks parsed before the user was watched. `after`: the height of the first tick looked at, which
    /// may already have had ticks before the subscription (streaming sends a block's events in parts): the stream
    /// goes live at a later block's first tick, so it starts with whole blocks.
    Pending { cursor: u64, after: Option<u64> },
    /// userFills: the snapshot of fills before the first live block is being read from the store, by this
    /// subscription or shared with another of the same user (`publish::history`).
    Waiting { wait: Waiter, cursor: u64 },
    /// userTwapHistory: its snapshot (blocks up to `read.upto`) is being read from the store.
    TwapWaiting { read: Arc<TwapRead>, cursor: u64 },
    Live {
        cursor: u64,
        /// userFills with `aggregateByTime: true`.
        aggregate: bool,
        /// userFundings, userNonFundingLedgerUpdates, userTwapHistory: their side stream's blocks up to this height
        /// were in the snapshot, their frames are skipped (0: none).
        misc_after: u64,
    },
}

/// Where a new subscription of `ch` to `user` (followed already) starts. misc_events channels wait for their
/// snapshot from the history store (`publish::misc_history`): the blocks up to the highest handed to the publisher
/// (read after the feed's head), then live from the ticks after that head, whose blocks above it hold every event
/// of the user (a misc tick holds a user's whole block, built for every user followed when its pass took it).
/// The others wait until a block is whole for them.
pub(super) fn first_state(hub: &Arc<Hub>, user: Address, ch: UserChannel) -> UserState {
    let head = hub.feed_head();
    if ch == UserChannel::TwapHistory {
        // The same split on node_twap_statuses heights (`publish::twap_history`).
        return UserState::TwapWaiting { read: crate::publish::twap_history::start(hub, user), cursor: head };
    }
    let of = match ch {
        UserChannel::Fundings => ReadOf::Fundings,
        UserChannel::Ledger => ReadOf::Ledger,
        _ => return UserState::Pending { cursor: head, after: None },
    };
    let upto = hub.misc_pushed();
    UserState::Waiting { wait: hub.history().user_fills(hub, (user, of), upto + 1, head), cursor: head }
}

/// Frees a per-user subscription's place in its IP's user cap.
pub(super) fn release_user(ctx: &WsContext, ip: Option<std::net::IpAddr>, want: &Want) {
    if let (Want::User { user, .. }, Some(ip)) = (want, ip) {
        ctx.user_cap().remove(ip, *user);
    }
}

/// One tick for a per-user subscription: skipped until the first tick of a block complete for its user (after the
/// block of the first tick it saw); userFills then waits for its snapshot of earlier fills before it goes live at
/// that block.
/// A waiting userFills subscription's snapshot (or the notice why it has none) once its read is done, and the
/// feed tick it goes live after: the shared read's, which may be earlier than where this one waited.
/// The snapshot's notice (what it lacks) comes with it.
pub(super) type Taken = (Result<Arc<Frame>, String>, Option<String>);

pub(super) fn take_snapshot(state: &mut UserState, ch: UserChannel, echo: &Echo) -> Option<Taken> {
    if let UserState::TwapWaiting { read, cursor } = state {
        let out = match read.result()? {
            Ok((frame, note)) => (Ok(frame.clone()), note.clone()),
            Err(e) => (Err(format!("hlbook: no history for {echo}: {e}; its live entries follow")), None),
        };
        *state = UserState::Live { cursor: *cursor, aggregate: false, misc_after: read.upto };
        return Some(out);
    }
    let UserState::Waiting { wait, cursor } = state else { return None };
    let result = wait.result()?;
    // The echo is the client's own subscription: its `aggregateByTime` picks the frames.
    let aggregate = echo.value().get("aggregateByTime") == Some(&serde_json::Value::Bool(true));
    let misc_after = if crate::publish::feed::TickKind::of(ch).is_side() { wait.read().before - 1 } else { 0 };
    let out = match result {
        Ok(snapshot) => {
            *cursor = wait.read().after_seq.min(*cursor);
            // A userTwapSliceFills read's snapshot is its slices, one frame.
            let frame = snapshot.frame(aggregate && ch == UserChannel::Fills);
            (Ok(frame.clone()), snapshot.note.clone())
        }
        Err(e) => (Err(format!("hlbook: no history for {echo}: {e}; its live fills follow")), None),
    };
    *state = UserState::Live { cursor: *cursor, aggregate, misc_after };
    Some(out)
}

pub(super) fn take_user_tick(
    hub: &Arc<Hub>,
    tick: &Tick,
    user: Address,
    ch: UserChannel,
    generation: u64,
    state: &mut UserState,
) -> Option<Arc<Frame>> {
    if let UserState::Pending { cursor, after } = state {
        if tick.seq <= *cursor {
            return None;
        }
        // A misc tick carries another block's height and neither fills nor statuses: it does not start the stream,
        // but its frames are whole blocks for every user followed when it was built, so userEvents takes its
        // fundings already.
        if tick.kind.is_side() {
            *cursor = tick.seq;
            return tick.users.get(&user)?.get(ch).cloned();
        }
        let first = *after.get_or_insert(tick.height);
        if !tick.users_complete_since(generation) || tick.height <= first {
            *cursor = tick.seq;
            return None;
        }
        let cursor = tick.seq - 1;
        *state = match ch {
            UserChannel::Fills | UserChannel::TwapSlices => {
                let read = (user, if ch == UserChannel::TwapSlices { ReadOf::TwapSlices } else { ReadOf::Fills });
                UserState::Waiting { wait: hub.history().user_fills(hub, read, tick.height, cursor), cursor }
            }
            _ => UserState::Live { cursor, aggregate: false, misc_after: 0 },
        };
    }
    let UserState::Live { cursor, aggregate, misc_after } = state else { return None };
    if tick.seq <= *cursor {
        return None;
    }
    *cursor = tick.seq;
    if tick.kind.is_side() && tick.height <= *misc_after {
        return None;
    }
    let frames = tick.users.get(&user)?;
    match ch {
        UserChannel::Fills => frames.fills(*aggregate),
        _ => frames.get(ch),
    }
    .cloned()
}
