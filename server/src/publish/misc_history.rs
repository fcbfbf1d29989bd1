//! The userFundings and userNonFundingLedgerUpdates snapshots (`isSnapshot: true`) read from the history store's
//! entries (`store::user_events`): the pieces of `history`'s snapshot reads of them.
//!
//! A subscription's split between snapshot and live frames is a misc_events height, `H` (`Hub::misc_pushed`,
//! read once its user is followed): blocks up to `H` are in the snapshot, blocks above it come live (frames of
//! blocks up to `H` are skipped, `ws::user_stream`), so each entry reaches it exactly once. The read waits for the
//! store's misc_events writer to have committed `H` (at most `STORE_WAIT`), then takes a history turn.
//!
//! How many entries: the official docs do not say how many the exchange's snapshots hold (websocket
//! subscriptions page: `WsUserFundings`, `WsUserNonFundingLedgerUpdates` carry `isSnapshot`); hlbook sends the
//! user's newest `SNAPSHOT_ENTRIES`, oldest first, the size of the exchange's time-range info answers (info
//! endpoint, "Pagination": 500 elements). Inferred, not established.

use std::time::{Duration, Instant};

use super::misc_frames::{fundings_snapshot, ledger_snapshot};
use crate::node::Address;
use crate::store::Store;
use crate::store::follow::Follow;
use crate::store::misc_writer::STREAM;
use crate::store::user_events::EntryKind;

/// Entries a snapshot holds at most, the newest.
pub const SNAPSHOT_ENTRIES: usize = 500;

/// How long a read waits for the store's misc_events writer to reach the subscription's height.
const STORE_WAIT: Duration = Duration::from_secs(10);

/// Waits until the store has written misc_events block `upto`; Err: why not (everyone left, or too long).
pub(super) fn wait_for_store(store: &Store, upto: u64, gone: &dyn Fn() -> bool) -> Result<(), String> {
    let deadline = Instant::now() + STORE_WAIT;
    while store.stream_height(STREAM) < upto {
        if gone() {
            return Err("every subscriber waiting for it left".into());
        }
        if Instant::now() > deadline {
            return Err(format!("the history store has not written misc_events height {upto}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// The snapshot frame's JSON: the user's newest `SNAPSHOT_ENTRIES` of `kind` of blocks up to `upto`, oldest first.
pub(super) fn snapshot_json(store: &Store, user: &Address, kind: EntryKind, upto: u64) -> Result<Vec<u8>, String> {
    let mut list = store.user_entries_upto(&user.0, kind, upto, SNAPSHOT_ENTRIES)?;
    list.reverse();
    let refs: Vec<&[u8]> = list.iter().map(|e| &*e.bytes).collect();
    Ok(match kind {
        EntryKind::Funding => fundings_snapshot(user, &refs),
        _ => ledger_snapshot(user, &refs),
    })
}

/// The snapshot frame's JSON without a store: no entries.
pub(super) fn snapshot_json_empty(user: &Address, kind: EntryKind) -> Vec<u8> {
    match kind {
        EntryKind::Funding => fundings_snapshot(user, &[]),
        _ => ledger_snapshot(user, &[]),
    }
}

/// The notice a snapshot gets when the store keeps followed users' entries only and did not keep this user's.
pub(super) fn follow_note(user: &Address, f: &Follow) -> Option<String> {
    match f {
        Follow::Kept => None,
        Follow::New => Some(format!(
            "hlbook: the history store keeps followed users' history only (store.fills_users) and now follows \
             {user}: its fundings and ledger updates are kept from now on, none from before"
        )),
        Follow::Refused { max } => Some(format!(
            "hlbook: the history store follows at most {max} users (store.fills_follow_max) and cannot follow \
             {user}: this snapshot holds only what was stored before; live frames follow"
        )),
    }
}
