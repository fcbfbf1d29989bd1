//! `userFunding` and `userNonFundingLedgerUpdates` answered from the history store (`store::user_events`, written
//! from the node's `misc_events` by `store::misc_writer`), each entry as the store keeps it: `{time, hash, delta}`.
//!
//! As the exchange (info endpoint, "Retrieve a user's funding history or non-funding ledger updates",
//! https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/info-endpoint/perpetuals): `user` and
//! `startTime` (ms, inclusive) required, `endTime` optional (now), entries ascending by time; and "responses that
//! take a time range will only return 500 elements or distinct blocks of data; to query larger ranges, use the last
//! returned timestamp as the next startTime for pagination" (info endpoint, "Pagination"), so at most the oldest
//! 500 of the range (`MAX_ENTRIES`). Answered here only when the store holds the user's whole range
//! (`Store::user_entries_whole_from`: kept user, after the store's first misc block, the retention's cut and any
//! hole) and has written what the live reader has read; otherwise upstream (or refused), never short. Each read
//! takes a history turn (`server.history_reads`).

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::info_gate::{Answer, Local, Place};
use super::user_info::user_of;
use crate::node::time::{nanos_to_millis, now_nanos};
use crate::publish::Hub;
use crate::publish::misc_frames::json_array;
use crate::store::Store;
use crate::store::misc_writer::STREAM;
use crate::store::user_events::EntryKind;

/// Entries one answer holds at most: the exchange's 500 elements a time-range response.
pub const MAX_ENTRIES: usize = 500;

/// How long an answer waits for the store to write the misc_events blocks the live reader has read.
const CATCH_UP: Duration = Duration::from_secs(2);

/// The info types answered here, with the entry kind each serves.
pub fn kind_of(kind: &str) -> Option<EntryKind> {
    match kind {
        "userFunding" => Some(EntryKind::Funding),
        "userNonFundingLedgerUpdates" => Some(EntryKind::Ledger),
        _ => None,
    }
}

fn bad(what: &str) -> Local {
    Local::Answer(Answer::text(422, &format!("Failed to deserialize the JSON body into the target type: {what}")))
}

/// (user, start, end) of a request.
fn parse(body: &Value) -> Result<(crate::node::Address, i64, i64), Local> {
    let user = user_of(body).map_err(Local::Answer)?;
    let start = body.get("startTime").and_then(Value::as_i64).ok_or_else(|| bad("startTime (ms) is required"))?;
    let end = match body.get("endTime") {
        None | Some(Value::Null) => i64::MAX,
        Some(v) => v.as_i64().ok_or_else(|| bad("endTime must be an integer (ms) or null"))?,
    };
    Ok((user, start, end))
}

/// Answers `userFunding` or `userNonFundingLedgerUpdates`, holding the client's `place` until the read ends.
pub(super) async fn answer(hub: &Arc<Hub>, kind: &'static str, body: &Value, place: Place) -> Local {
    let Some(entry_kind) = kind_of(kind) else { return Local::Unsure(format!("{kind} is not kept")) };
    let (user, start, end) = match parse(body) {
        Ok(r) => r,
        Err(refused) => return refused,
    };
    let Some(store) = hub.store() else {
        return Local::Unsure("hlbook keeps no history store here, so it has no fundings or ledger updates".into());
    };
    let now = nanos_to_millis(now_nanos());
    let Some(from) = store.user_entries_whole_from(STREAM, &user.0, end.min(now), now) else {
        return Local::Unsure(format!("the history store does not keep {user}'s misc_events (store.fills_users)"));
    };
    if start < from {
        return Local::Unsure(format!("the history store holds {user}'s entries from {from} ms on, after {start}"));
    }
    // What subscribers were given is in the answer too: wait (briefly) for the store's writer to reach it.
    let live = hub.shared().health().misc().height();
    if !store_reached(&store, STREAM, live).await {
        return Local::Unsure(format!("the history store has not written misc_events height {live} yet"));
    }
    let done = place
        .in_history_turn(hub, kind, move || {
            match store.user_entries(&user.0, entry_kind, (start, end), MAX_ENTRIES, false) {
                Ok(list) => {
                    Answer::json(String::from_utf8(json_array(list.iter().map(|e| &*e.bytes))).unwrap_or_default())
                }
                Err(e) => Answer::text(500, &format!("{kind}: {e}")),
            }
        })
        .await;
    Local::Answer(done)
}

/// Whether the store's writer of side stream `stream` reaches block `height` within `CATCH_UP` (an info answer
/// holds what subscribers were given).
pub(super) async fn store_reached(store: &Store, stream: &str, height: u64) -> bool {
    let waited = std::time::Instant::now();
    while store.stream_height(stream) < height {
        if waited.elapsed() > CATCH_UP {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_without_a_start_time_or_with_a_bad_end_are_the_exchanges_422() {
        let user = "0x0000000000000000000000000000000000000001";
        let ok = serde_json::json!({"type": "userFunding", "user": user, "startTime": 5});
        assert_eq!(parse(&ok).ok().map(|r| (r.1, r.2)), Some((5, i64::MAX)));
        for body in [
            serde_json::json!({"type": "userFunding", "user": user}),
            serde_json::json!({"type": "userFunding", "user": user, "startTime": 1, "endTime": "x"}),
            serde_json::json!({"type": "userFunding", "user": "0x01", "startTime": 1}),
        ] {
            assert!(matches!(parse(&body), Err(Local::Answer(a)) if a.status == 422), "{body}");
        }
        assert_eq!(kind_of("userNonFundingLedgerUpdates"), Some(EntryKind::Ledger));
        assert_eq!(kind_of("userFills"), None);
    }
}
