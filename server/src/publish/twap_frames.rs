//! The official shapes built from `node_twap_statuses` events (`node::twap::TwapEvent`): the `userTwapHistory`
//! channel and the info answer `twapHistory`. One place builds the entry, so a live frame, a snapshot and an info
//! answer cannot drift apart.
//!
//! Shapes (read 2026-11):
//! - Official docs, websocket subscriptions: `WsUserTwapHistory {isSnapshot?, user, history: WsTwapHistory[]}`,
//!   `WsTwapHistory {state: TwapState, status: {status, description}, time}`, `TwapState {coin, user, side, sz,
//!   executedSz, executedNtl, minutes, reduceOnly, randomize, timestamp}` (/work/shared/docs/hl-ws-api.md).
//! - @nktkas/hyperliquid, `TwapHistoryResponse` (info `twapHistory`, and the `history` of its
//!   `UserTwapHistoryEvent`): `{time, state, status, twapId?}` with `time` in SECONDS since the epoch, `status`
//!   `{status: "finished"|"activated"|"terminated"}` or `{status: "error", description}`. A public client that
//!   checked live userTwapHistory messages notes that `description` comes only with errors, and that the amounts
//!   are decimal strings; both are followed here. `twapId` is written in every entry (the node has it).
//! - `time` is the event's own time (the node's `time`), truncated to seconds; `state.timestamp` stays the TWAP's
//!   start in ms, as the node writes it.

use serde::Serialize;

use crate::node::Address;
use crate::node::time::nanos_to_millis;
use crate::node::twap::{TwapBlock, TwapEvent, TwapOutcome};
use crate::store::user_events::{EntryBlock, EntryKind, NewEntry};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StateBody<'a> {
    coin: &'a str,
    user: String,
    side: &'static str,
    sz: String,
    executed_sz: String,
    executed_ntl: String,
    minutes: u32,
    reduce_only: bool,
    randomize: bool,
    timestamp: u64,
}

#[derive(Serialize)]
struct StatusBody<'a> {
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Entry<'a> {
    time: i64,
    state: StateBody<'a>,
    status: StatusBody<'a>,
    twap_id: u64,
}

fn entry(ev: &TwapEvent) -> Entry<'_> {
    let s = &ev.state;
    let description = match &ev.outcome {
        TwapOutcome::Error(why) => Some(why.as_str()),
        _ => None,
    };
    Entry {
        time: ev.time.div_euclid(1_000_000_000),
        state: StateBody {
            coin: &s.coin,
            user: s.user.to_string(),
            side: s.side.as_str(),
            sz: s.sz.to_string(),
            executed_sz: s.executed_sz.to_string(),
            executed_ntl: s.executed_ntl.to_string(),
            minutes: s.minutes,
            reduce_only: s.reduce_only,
            randomize: s.randomize,
            timestamp: s.timestamp,
        },
        status: StatusBody { status: ev.outcome.word(), description },
        twap_id: ev.twap_id,
    }
}

/// One history entry, `{time, state, status, twapId}`: what the store keeps per event.
pub fn history_entry(ev: &TwapEvent) -> Vec<u8> {
    serde_json::to_vec(&entry(ev)).expect("plain structs serialize")
}

/// The store's name of the node_twap_statuses stream (`store::misc_writer` keeps it).
pub const STREAM: &str = "twap";

/// A block's entries as the store keeps them (`EntryKind::TwapHistory`, under the TWAP owner), in line order.
pub fn entries_of(b: &TwapBlock) -> EntryBlock {
    let entries = b
        .events
        .iter()
        .map(|ev| NewEntry {
            user: ev.state.user.0,
            kind: EntryKind::TwapHistory,
            time_ms: nanos_to_millis(ev.time),
            bytes: history_entry(ev),
        })
        .collect();
    EntryBlock { height: b.height, time_ms: nanos_to_millis(b.block_time), entries }
}

/// `[entry, …]` from entries made by `history_entry`, in the order given.
fn array(out: &mut Vec<u8>, entries: &[&[u8]]) {
    out.push(b'[');
    for (i, e) in entries.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(e);
    }
    out.push(b']');
}

/// `{"channel":"userTwapHistory","data":{["isSnapshot":true,]"user":…,"history":[entry…]}}`.
pub fn user_twap_history(user: &Address, entries: &[&[u8]], snapshot: bool) -> Vec<u8> {
    let snap = if snapshot { "\"isSnapshot\":true," } else { "" };
    let mut out =
        format!("{{\"channel\":\"userTwapHistory\",\"data\":{{{snap}\"user\":\"{user}\",\"history\":").into_bytes();
    array(&mut out, entries);
    out.extend_from_slice(b"}}");
    out
}

/// The info `twapHistory` answer: the entries as a bare array.
pub fn info_twap_history(entries: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    array(&mut out, entries);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::twap::parse_twap_line;

    const USER: &str = "0x9d6a5ab97a8eed617bde9968d9ab6fcf72fde1b8";

    fn events() -> Vec<TwapEvent> {
        let state = format!(
            r#"{{"coin":"HYPE","user":"{USER}","side":"A","sz":"108.36","executedSz":"12.5","executedNtl":"0.0","minutes":10,"reduceOnly":false,"randomize":true,"timestamp":1764867622417}}"#
        );
        let ev = |status: &str| {
            format!(r#"{{"time":"2025-12-04T17:00:22.917074898","twap_id":1430699,"state":{state},"status":{status}}}"#)
        };
        let line = format!(
            r#"{{"local_time":"2025-12-04T17:00:22.590883578","block_time":"2025-12-04T17:00:22.417074898","block_number":817824346,"events":[{},{}]}}"#,
            ev(r#""activated""#),
            ev(r#"{"error":"Insufficient margin to place order."}"#)
        );
        let l = parse_twap_line(&line).unwrap();
        assert!(l.skipped.is_empty(), "{:?}", l.skipped);
        l.events
    }

    #[test]
    fn an_entry_has_the_exchange_fields_time_in_seconds_and_a_description_only_for_errors() {
        let evs = events();
        let a: serde_json::Value = serde_json::from_slice(&history_entry(&evs[0])).unwrap();
        assert_eq!(
            a,
            serde_json::json!({"time": 1764867622, "twapId": 1430699, "status": {"status": "activated"},
                "state": {"coin": "HYPE", "user": USER, "side": "A", "sz": "108.36", "executedSz": "12.5",
                    "executedNtl": "0.0", "minutes": 10, "reduceOnly": false, "randomize": true,
                    "timestamp": 1764867622417u64}})
        );
        let e: serde_json::Value = serde_json::from_slice(&history_entry(&evs[1])).unwrap();
        assert_eq!(
            e["status"],
            serde_json::json!({"status": "error", "description": "Insufficient margin to place order."})
        );
    }

    #[test]
    fn the_channel_frame_and_the_info_answer_hold_the_same_entries() {
        let evs = events();
        let made: Vec<Vec<u8>> = evs.iter().map(history_entry).collect();
        let entries: Vec<&[u8]> = made.iter().map(Vec::as_slice).collect();
        let user = Address::parse(USER).unwrap();
        let frame: serde_json::Value = serde_json::from_slice(&user_twap_history(&user, &entries, true)).unwrap();
        assert_eq!(
            (frame["channel"].as_str(), frame["data"]["isSnapshot"].as_bool()),
            (Some("userTwapHistory"), Some(true))
        );
        assert_eq!(frame["data"]["user"], USER);
        let info: serde_json::Value = serde_json::from_slice(&info_twap_history(&entries)).unwrap();
        assert_eq!(frame["data"]["history"], info);
        let live: serde_json::Value = serde_json::from_slice(&user_twap_history(&user, &entries[..1], false)).unwrap();
        assert!(live["data"].get("isSnapshot").is_none());
        assert_eq!(live["data"]["history"].as_array().unwrap().len(), 1);
        assert_eq!(info_twap_history(&[]), b"[]");
    }
}
