//! `candleSnapshot` (`POST /info` and the socket's `post`): a coin's candles of a time range, from the history
//! store.
//!
//! The request is the official one, `{"type":"candleSnapshot","req":{"coin","interval","startTime","endTime"?}}`.
//! The answer is every bucket with trades from the one holding `startTime` to the one holding `endTime` (now when
//! absent or null), ascending, at most the newest 5000 as the exchange (so ccxt's `startTime: 0` gets the newest).
//! A bucket the store holds only part of (it began inside it) is answered as counted; docs/api.md says when.

use std::sync::Arc;

use serde_json::Value;

use super::info_gate::{Answer, Local, Place};
use crate::publish::Hub;
use crate::publish::candles::{Interval, candle_object};

/// Candles a `candleSnapshot` returns at most (the newest), as the official API.
pub const MAX_SNAPSHOT_CANDLES: usize = 5000;

/// A valid request.
struct Req {
    coin: String,
    interval: Interval,
    start: i64,
    end: i64,
}

fn bad(what: &str) -> Answer {
    Answer::text(422, &format!("Failed to deserialize the JSON body into the target type: {what}"))
}

fn parse(body: &Value) -> Result<Req, Answer> {
    let req = body.get("req").and_then(Value::as_object).ok_or_else(|| bad("req must be an object"))?;
    let coin = req.get("coin").and_then(Value::as_str).filter(|c| !c.is_empty());
    let coin = coin.ok_or_else(|| bad("req.coin must be a coin name"))?.to_string();
    let names = Interval::ALL.map(Interval::as_str).join(" ");
    let interval = req.get("interval").and_then(Value::as_str).and_then(Interval::parse);
    let interval = interval.ok_or_else(|| bad(&format!("req.interval must be one of {names}")))?;
    let start = req.get("startTime").and_then(Value::as_i64);
    let start = start.ok_or_else(|| bad("req.startTime must be an integer (ms)"))?;
    let end = match req.get("endTime") {
        None | Some(Value::Null) => i64::MAX,
        Some(v) => v.as_i64().ok_or_else(|| bad("req.endTime must be an integer (ms) or null"))?,
    };
    Ok(Req { coin, interval, start, end })
}

/// Answers one `candleSnapshot` request; `place`, the client's at the info gate, is held until the read ends.
pub(super) async fn candle_snapshot(hub: &Arc<Hub>, body: &Value, place: Place) -> Local {
    let r = match parse(body) {
        Ok(r) => r,
        Err(a) => return Local::Answer(a),
    };
    if hub.shared().books().coin(&r.coin).is_none() {
        let coin = Value::String(r.coin.chars().take(100).collect());
        return Local::Answer(Answer::text(422, &format!("candleSnapshot: hlbook's books have no coin {coin}")));
    }
    let Some(store) = hub.store() else {
        return Local::Unsure("hlbook keeps no history store here, so it has no candles".into());
    };
    let done = place
        .in_history_turn(hub, "candleSnapshot", move || {
            let range = (r.interval.bucket(r.start).0, r.interval.bucket(r.end).0);
            let candles = match store.candles(&r.coin, r.interval, range, MAX_SNAPSHOT_CANDLES) {
                Ok(c) => c,
                Err(e) => return Answer::text(500, &format!("candleSnapshot: {e}")),
            };
            let json = Value::Array(candles.iter().map(|c| candle_object(&r.coin, r.interval, c)).collect());
            Answer::json(json.to_string())
        })
        .await;
    Local::Answer(done)
}
