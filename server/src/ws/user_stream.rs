//! The per-user subscriptions of one connection (orderUpdates, userFills, userEvents): where each stands on the
//! feed, the userFills snapshot read from the node's files, and the per-IP user cap's release.
//!
//! A subscription skips feed ticks whose blocks were parsed before its user was watched (their user events may be
//! partial), then takes every block; userFills first waits for its snapshot of the fills before that block.

use std::sync::Arc;

use tokio::sync::oneshot;

use super::WsContext;
use crate::node::Address;
use crate::publish::users::UserChannel;
use crate::publish::{Audit, Frame, Hub, Tick, Want};

pub(super) enum UserState {
    /// Skipping blocks parsed before the user was watched. `after`: the height of the first tick looked at, which
    /// may already have had ticks before the subscription (streaming sends a block's events in parts): the stream
    /// goes live at a later block's first tick, so it starts with whole blocks.
    Pending {
        cursor: u64,
        after: Option<u64>,
    },
    /// userFills: the snapshot of fills before the first live block is being read from the node's files.
    Waiting {
        rx: oneshot::Receiver<Arc<Frame>>,
        cursor: u64,
    },
    Live {
        cursor: u64,
    },
}

/// Frees a per-user subscription's place in its IP's user cap.
pub(super) fn release_user(ctx: &WsContext, ip: Option<std::net::IpAddr>, want: &Want) {
    if let (Want::User { user, .. }, Some(ip)) = (want, ip) {
        ctx.user_cap.remove(ip, *user);
    }
}

/// One tick for a per-user subscription: skipped until the first tick of a block complete for its user (after the
/// block of the first tick it saw); userFills then waits for its snapshot of earlier fills before it goes live at
/// that block.
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
        let first = *after.get_or_insert(tick.height);
        if !tick.users_complete_since(generation) || tick.height <= first {
            *cursor = tick.seq;
            return None;
        }
        let cursor = tick.seq - 1;
        *state = match ch {
            UserChannel::Fills => UserState::Waiting { rx: fills_snapshot(hub, user, tick.height), cursor },
            _ => UserState::Live { cursor },
        };
    }
    let UserState::Live { cursor } = state else { return None };
    if tick.seq <= *cursor {
        return None;
    }
    *cursor = tick.seq;
    tick.users.get(&user).and_then(|f| f.get(ch)).cloned()
}

/// Most fills a userFills snapshot carries (the official REST `userFills` returns at most 2000).
const SNAPSHOT_FILLS: usize = 2000;

/// Reads the user's fills of blocks below `before` from the node's files on a blocking thread.
fn fills_snapshot(hub: &Arc<Hub>, user: Address, before: u64) -> oneshot::Receiver<Arc<Frame>> {
    let (tx, rx) = oneshot::channel();
    let hub = hub.clone();
    tokio::task::spawn_blocking(move || {
        let health = hub.shared.health();
        health.supervised("userFills snapshot task", || snapshot(&hub, user, before, tx));
    });
    rx
}

/// The userFills snapshot: the user's fills below `before`, from the node's files.
fn snapshot(hub: &Arc<Hub>, user: Address, before: u64, tx: oneshot::Sender<Arc<Frame>>) {
    let test = crate::state::test_panic("user_fills");
    assert!(!test, "HLBOOK_TEST_PANIC asked the userFills snapshot task to panic");
    let dir = hub.fills_dir.get().cloned();
    let fills =
        dir.map(|d| crate::publish::user_history::recent_fills(&d, user, before, SNAPSHOT_FILLS)).unwrap_or_default();
    let refs: Vec<&str> = fills.iter().map(String::as_str).collect();
    let json = crate::publish::users::user_fills(&user, &refs, true);
    let _ = tx.send(Arc::new(Frame::new(0, json, Audit::default())));
    hub.poke();
}
