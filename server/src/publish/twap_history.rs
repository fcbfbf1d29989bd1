//! userTwapHistory's snapshot: the user's TWAP history from the history store (`EntryKind::TwapHistory`, kept by
//! `store::misc_writer` from node_twap_statuses), read once per subscription on a blocking thread.
//!
//! Once and in order, with the live frames: the snapshot holds the entries of blocks up to `upto`, the highest
//! node_twap_statuses block the live reader had handed to the hub (or started after) when the subscription was
//! made, and the subscription's live frames skip ticks of blocks up to it. A block handed over before `upto` was
//! read is in a tick either before the subscription's cursor or skipped after it; any later block is above `upto`.
//! The read waits (briefly) for the store's writer, which follows the same files, to have committed `upto`.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use super::frame::{Audit, Frame};
use super::hub::Hub;
use super::twap_frames::{STREAM, user_twap_history};
use crate::node::Address;
use crate::store::follow::Follow;
use crate::store::user_events::EntryKind;

/// Entries a snapshot holds at most (the newest), as userFills' snapshot holds its newest 2000.
pub const SNAPSHOT_ENTRIES: usize = 2000;

/// How long a read waits for the store's writer to commit `upto`; past it, the read takes what the store has.
const CATCH_UP: Duration = Duration::from_secs(5);

/// The snapshot frame, and the notice of what it lacks.
pub type TwapSnapshot = (Arc<Frame>, Option<String>);

/// One subscription's snapshot read.
#[derive(Debug)]
pub struct TwapRead {
    user: Address,
    /// Blocks up to this height are the snapshot's; the live frames are those above.
    pub upto: u64,
    result: OnceLock<Result<TwapSnapshot, String>>,
}

impl TwapRead {
    /// The snapshot frame with the notice of what it lacks, or why there is none; `None` while the read runs.
    pub fn result(&self) -> Option<&Result<TwapSnapshot, String>> {
        self.result.get()
    }
}

/// Starts the snapshot read of `user` for a subscription made now (the user already followed).
pub fn start(hub: &Arc<Hub>, user: Address) -> Arc<TwapRead> {
    // The highest block the live reader handed to the hub (or the height it started after).
    let read = Arc::new(TwapRead { user, upto: hub.twaps_handed(), result: OnceLock::new() });
    let (hub, r) = (hub.clone(), read.clone());
    tokio::task::spawn_blocking(move || {
        let health = hub.shared().health();
        health.supervised("userTwapHistory snapshot task", || {
            let _ = r.result.set(snapshot(&hub, &r));
            hub.poke();
        });
    });
    read
}

fn snapshot(hub: &Hub, read: &TwapRead) -> Result<TwapSnapshot, String> {
    let frame =
        |entries: &[&[u8]]| Arc::new(Frame::new(0, user_twap_history(&read.user, entries, true), Audit::default()));
    let Some(store) = hub.store() else { return Ok((frame(&[]), None)) };
    // A store keeping followed users only keeps this one from now on (as misc_events' snapshots do).
    let note = follow_note(&read.user, &store.follow.follow(&read.user.0));
    let waited = Instant::now();
    while store.stream_height(STREAM) < read.upto && waited.elapsed() < CATCH_UP {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _turn = hub.history().turns.take()?;
    // The newest entries of blocks up to `upto`, oldest first.
    let mut list = store.user_entries_upto(&read.user.0, EntryKind::TwapHistory, read.upto, SNAPSHOT_ENTRIES)?;
    list.reverse();
    let entries: Vec<&[u8]> = list.iter().map(|e| &*e.bytes).collect();
    Ok((frame(&entries), note))
}

fn follow_note(user: &Address, f: &Follow) -> Option<String> {
    match f {
        Follow::Kept => None,
        Follow::New => Some(format!(
            "hlbook: the history store keeps followed users' history only (store.fills_users) and now follows \
             {user}: its TWAP statuses are kept from now on, none from before"
        )),
        Follow::Refused { max } => Some(format!(
            "hlbook: the history store follows at most {max} users (store.fills_follow_max) and cannot follow \
             {user}: this snapshot holds only what was stored before; live frames follow"
        )),
    }
}
