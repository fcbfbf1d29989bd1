//! `userFills`, `userFillsByTime` and `userTwapSliceFills` answered from the history store, fills verbatim as the
//! node wrote them (the node writes fills in the API's format).
//!
//! As the exchange: `userFills` is the user's 2000 most recent fills, newest first; `userFillsByTime` the fills
//! from `startTime` to `endTime` (now when absent), oldest first, at most 2000, out of the 10000 most recent;
//! `aggregateByTime` merges one order's partial fills of one time; `userTwapSliceFills` the user's 2000 most
//! recent slices (fills with a `twapId`), newest first, each as `{fill, twapId}`, looked for among their 100,000
//! most recent fills (`store::TWAP_SCAN_FILLS`). The store holds a user's fills only while it
//! keeps that user (`store.fills_users`) and for `store.fills_retention_days`: a user it does not keep, or a
//! `startTime` before what it holds, is not answered here (upstream, or refused), never answered short as if whole.
//! Each read takes a history turn (`server.history_reads`), like the userFills channel's snapshots.

use std::sync::Arc;

use serde_json::Value;

use super::info_gate::{Answer, Local, Place};
use super::user_info::user_of;
use crate::node::time::{nanos_to_millis, now_nanos};
use crate::publish::Hub;
use crate::publish::history::SNAPSHOT_FILLS;

/// Fills `userFillsByTime` looks through, the newest: the exchange serves "only the 10000 most recent".
const BY_TIME_WINDOW: usize = 10_000;

/// What was asked.
struct Ask {
    user: crate::node::Address,
    aggregate: bool,
    /// `userFillsByTime`'s (start, end) in ms; `None` for `userFills`.
    range: Option<(i64, i64)>,
    /// `userTwapSliceFills`.
    twap: bool,
}

fn bad(what: &str) -> Local {
    Local::Answer(Answer::text(422, &format!("Failed to deserialize the JSON body into the target type: {what}")))
}

fn parse(kind: &str, body: &Value) -> Result<Ask, Local> {
    let user = user_of(body).map_err(Local::Answer)?;
    let aggregate = match body.get("aggregateByTime") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(bad("aggregateByTime must be a boolean")),
    };
    let range = if kind == "userFillsByTime" {
        let start = body.get("startTime").and_then(Value::as_i64).ok_or_else(|| bad("startTime (ms) is required"))?;
        let end = match body.get("endTime") {
            None | Some(Value::Null) => i64::MAX,
            Some(v) => v.as_i64().ok_or_else(|| bad("endTime must be an integer (ms) or null"))?,
        };
        Some((start, end))
    } else {
        None
    };
    Ok(Ask { user, aggregate, range, twap: kind == "userTwapSliceFills" })
}

/// Answers `userFills`, `userFillsByTime` or `userTwapSliceFills`, holding the client's `place` until the read ends.
pub(super) async fn answer(hub: &Arc<Hub>, kind: &str, body: &Value, place: Place) -> Local {
    let ask = match parse(kind, body) {
        Ok(a) => a,
        Err(refused) => return refused,
    };
    let Some(store) = hub.store() else {
        return Local::Unsure("hlbook keeps no history store here, so it has no fills".into());
    };
    if !store.follow.keeps(&ask.user.0) {
        return Local::Unsure(format!(
            "the history store keeps followed users' fills only (store.fills_users) and does not hold {}'s",
            ask.user
        ));
    }
    if let Some((start, _)) = ask.range {
        let from = store.fills_kept_from_ms(nanos_to_millis(now_nanos()));
        if start < from {
            return Local::Unsure(format!("the history store holds fills from {from} ms on, after startTime {start}"));
        }
    }
    let hub = hub.clone();
    let done = place
        .blocking(kind, move || {
            let turn = match hub.history().turns.take() {
                Ok(t) => t,
                Err(e) => return Answer::text(503, &e),
            };
            let max = if ask.range.is_some() { BY_TIME_WINDOW } else { SNAPSHOT_FILLS };
            let fills = if ask.twap {
                store.user_twap_slices(&ask.user, u64::MAX, SNAPSHOT_FILLS)
            } else {
                store.user_fills(&ask.user, u64::MAX, max)
            };
            drop(turn);
            match fills {
                Ok(fills) => Answer::json(shape(&fills, &ask)),
                Err(e) => Answer::text(500, &e),
            }
        })
        .await;
    Local::Answer(done.unwrap_or_else(|a| a))
}

/// The answer's JSON array from the store's fills (oldest first).
fn shape(fills: &[Box<str>], ask: &Ask) -> String {
    let mut list: Vec<&str> = fills.iter().map(|f| &**f).collect();
    if ask.twap {
        list.reverse();
        return String::from_utf8(crate::publish::users::twap_slice_entries(&list)).unwrap_or_default();
    }
    if let Some((start, end)) = ask.range {
        let time = |f: &str| serde_json::from_str::<Value>(f).ok().and_then(|v| v.get("time")?.as_i64());
        list.retain(|f| time(f).is_some_and(|t| (start..=end).contains(&t)));
    }
    let merged =
        if ask.aggregate { crate::store::fills::aggregate(&list) } else { list.into_iter().map(Into::into).collect() };
    let mut out: Vec<&str> = merged.iter().map(|f| &**f).collect();
    match ask.range {
        Some(_) => out.truncate(SNAPSHOT_FILLS),
        None => out.reverse(),
    }
    format!("[{}]", out.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(time: i64, oid: u64, sz: &str) -> Box<str> {
        format!(r#"{{"coin":"BTC","px":"100.0","sz":"{sz}","side":"B","time":{time},"oid":{oid},"tid":{time}{oid},"crossed":true,"hash":"0x00","startPosition":"0.0","dir":"Open Long","closedPnl":"0.0","fee":"0.0","feeToken":"USDC"}}"#)
            .into_boxed_str()
    }

    fn times(json: &str) -> Vec<(i64, String)> {
        let v: Vec<Value> = serde_json::from_str(json).unwrap();
        v.iter().map(|f| (f["time"].as_i64().unwrap(), f["sz"].as_str().unwrap().to_string())).collect()
    }

    #[test]
    fn user_fills_newest_first_and_by_time_oldest_first_within_the_range() {
        let user = crate::node::Address::default();
        let fills = [fill(10, 1, "1.0"), fill(20, 2, "1.0"), fill(20, 2, "2.0"), fill(30, 3, "1.0")];
        let all = Ask { user, aggregate: false, range: None, twap: false };
        assert_eq!(times(&shape(&fills, &all)).iter().map(|t| t.0).collect::<Vec<_>>(), vec![30, 20, 20, 10]);
        let merged = Ask { user, aggregate: true, range: None, twap: false };
        assert_eq!(times(&shape(&fills, &merged)), vec![(30, "1.0".into()), (20, "3.0".into()), (10, "1.0".into())]);
        let range = Ask { user, aggregate: false, range: Some((15, 25)), twap: false };
        assert_eq!(times(&shape(&fills, &range)), vec![(20, "1.0".into()), (20, "2.0".into())]);
        let open = Ask { user, aggregate: true, range: Some((20, i64::MAX)), twap: false };
        assert_eq!(times(&shape(&fills, &open)), vec![(20, "3.0".into()), (30, "1.0".into())]);
    }

    #[test]
    fn bad_fields_are_the_exchanges_422() {
        let body = serde_json::json!({"type": "userFillsByTime", "user": "0x0000000000000000000000000000000000000001"});
        assert!(matches!(parse("userFillsByTime", &body), Err(Local::Answer(a)) if a.status == 422 && a.text));
        let body = serde_json::json!({"type": "userFills", "user": "0x01"});
        assert!(matches!(parse("userFills", &body), Err(Local::Answer(a)) if a.status == 422));
    }
}
