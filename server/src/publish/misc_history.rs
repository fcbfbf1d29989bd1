//! The userFundings and userNonFundingLedgerUpdates snapshots (`isSnapshot: true`) read from the history store's
//! entries (`store::user_events`), for `history`'s snapshot reads.
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

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::frame::{Audit, Frame};
use super::history::{FillsHub, FillsRead, ReadOf, Snapshot};
use super::misc_frames::{fundings_snapshot, ledger_snapshot};
use crate::store::follow::Follow;
use crate::store::misc_writer::STREAM;
use crate::store::user_events::EntryKind;

/// A read's entries, oldest first, and the notice for what it lacks.
type Entries = (Vec<Box<[u8]>>, Option<String>);

/// Entries a snapshot holds at most, the newest.
pub const SNAPSHOT_ENTRIES: usize = 500;

/// How long a read waits for the store's misc_events writer to reach the subscription's height.
const STORE_WAIT: Duration = Duration::from_secs(10);

/// Reads the snapshot of `read` (a Fundings or Ledger read) and keeps it (or why there is none) for its subscriber.
pub(super) fn run_misc_read(hub: &impl FillsHub, read: &Arc<FillsRead>, gone: &dyn Fn() -> bool) {
    let history = hub.history();
    let upto = read.before.saturating_sub(1);
    let kind = if read.of == ReadOf::Fundings { EntryKind::Funding } else { EntryKind::Ledger };
    let entries = || -> Result<Entries, String> {
        let Some(store) = hub.history_store() else { return Ok((Vec::new(), None)) };
        let note = follow_note(&read.user, &store.follow.follow(&read.user.0));
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
        let _turn = history.turns.take()?;
        let mut list = store.user_entries_upto(&read.user.0, kind, upto, SNAPSHOT_ENTRIES)?;
        list.reverse();
        Ok((list.into_iter().map(|e| e.bytes).collect(), note))
    };
    let result = entries().map(|(list, note)| {
        let refs: Vec<&[u8]> = list.iter().map(|e| &**e).collect();
        let json = match kind {
            EntryKind::Funding => fundings_snapshot(&read.user, &refs),
            _ => ledger_snapshot(&read.user, &refs),
        };
        let frame = Arc::new(Frame::new(0, json, Audit::default()));
        Snapshot { plain: frame.clone(), aggregated: frame, note }
    });
    if let Err(e) = &result {
        let c = if gone() { &history.counters.reads_abandoned } else { &history.counters.reads_refused };
        c.inc();
        tracing::debug!(user = %read.user, "misc_events history read ended without a snapshot: {e}");
    }
    let _ = read.result.set(result);
    hub.poke();
}

/// The notice a snapshot gets when the store keeps followed users' entries only and did not keep this user's.
fn follow_note(user: &crate::node::Address, f: &Follow) -> Option<String> {
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
