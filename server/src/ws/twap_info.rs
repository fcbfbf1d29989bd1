//! The info type `twapHistory` answered from the history store (`EntryKind::TwapHistory`, kept from the node's
//! node_twap_statuses by `store::misc_writer`): `[{time, state, status, twapId}]`, the entries userTwapHistory's
//! snapshot holds, built by `publish::twap_frames` (shape and sources there).
//!
//! The request is `{"type": "twapHistory", "user"}` with no time range (@nktkas/hyperliquid `TwapHistoryRequest`).
//! The exchange's order and cap are not documented; here the entries go oldest first, as the channel's, at most
//! the newest `SNAPSHOT_ENTRIES`. Answered here when the store keeps the user's entries (not a followed-only store
//! that does not follow it), after its writer has caught up with what the live reader handed out; otherwise
//! upstream (or refused). The store holds what the node's files held when it began reading, and what came since,
//! within `store.fills_retention_days`: older TWAPs are not in the answer (docs/api.md says so).

use std::sync::Arc;

use serde_json::Value;

use super::events_info::store_reached;
use super::info_gate::{Answer, Local, Place};
use super::user_info::user_of;
use crate::node::time::{nanos_to_millis, now_nanos};
use crate::publish::Hub;
use crate::publish::twap_frames::{STREAM, info_twap_history};
use crate::publish::twap_history::SNAPSHOT_ENTRIES;
use crate::store::user_events::EntryKind;

/// Answers `twapHistory`, holding the client's `place` until the read ends.
pub(super) async fn answer(hub: &Arc<Hub>, body: &Value, place: Place) -> Local {
    let user = match user_of(body) {
        Ok(u) => u,
        Err(refused) => return Local::Answer(refused),
    };
    let Some(store) = hub.store() else {
        return Local::Unsure("hlbook keeps no history store here, so it has no TWAP history".into());
    };
    let now = nanos_to_millis(now_nanos());
    if store.user_entries_whole_from(STREAM, &user.0, now, now).is_none() {
        return Local::Unsure(format!("the history store does not keep {user}'s TWAP statuses"));
    }
    // What subscribers were given is in the answer too.
    let live = hub.shared().health().twaps().height();
    if !store_reached(&store, STREAM, live).await {
        return Local::Unsure(format!("the history store has not written node_twap_statuses height {live} yet"));
    }
    let done = place
        .in_history_turn(hub, "twapHistory", move || {
            match store.user_entries(&user.0, EntryKind::TwapHistory, (0, i64::MAX), SNAPSHOT_ENTRIES, true) {
                Ok(list) => {
                    let entries: Vec<&[u8]> = list.iter().rev().map(|e| &*e.bytes).collect();
                    Answer::json(String::from_utf8(info_twap_history(&entries)).unwrap_or_default())
                }
                Err(e) => Answer::text(500, &format!("twapHistory: {e}")),
            }
        })
        .await;
    Local::Answer(done)
}
