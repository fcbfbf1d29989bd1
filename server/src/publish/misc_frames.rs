//! The official shapes built from `misc_events` blocks (`node::misc::MiscBlock`): the `userFundings` and
//! `userNonFundingLedgerUpdates` channels, the `funding` kind of `userEvents` (channel `user`), and the info answers
//! `userFunding` and `userNonFundingLedgerUpdates`. One place builds each shape, so a live frame, a snapshot and an
//! info answer cannot drift apart.
//!
//! Shapes: the official docs (websocket subscriptions: `WsUserFundings {isSnapshot?, user, fundings}`,
//! `WsUserNonFundingLedgerUpdates {isSnapshot?, user, nonFundingLedgerUpdates: [{time, hash, delta}]}`,
//! `WsUserEvent` `{"funding": WsUserFunding}`; info endpoint "Retrieve a user's funding history or non-funding
//! ledger updates": `[{time, hash, delta: {type: "funding", coin, usdc, szi, fundingRate, nSamples}}]`), with
//! `nSamples` from the @nktkas/hyperliquid schemas (docs/hl-user-channels.md §3); `null` when the node's line has
//! none (inferred: nktkas types it nullable). A ledger delta is passed through as the node wrote it.
//! The `liquidation` kind of userEvents (`lid`, `liquidator`) is not in the ledger delta and is not built.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::node::Address;
use crate::node::misc::{Funding, LedgerUpdate, MiscBlock, MiscEvent, MiscKind};
use crate::node::time::nanos_to_millis;
use crate::store::user_events::{EntryBlock, EntryKind, NewEntry};

/// One user's share of a block, in event order.
#[derive(Debug, Default)]
pub struct UserMisc<'a> {
    pub fundings: Vec<(&'a MiscEvent, &'a Funding)>,
    pub ledger: Vec<(&'a MiscEvent, &'a LedgerUpdate)>,
}

/// A block's events by user; a ledger update goes to each user it names, once.
pub fn by_user(block: &MiscBlock) -> BTreeMap<Address, UserMisc<'_>> {
    let mut out: BTreeMap<Address, UserMisc<'_>> = BTreeMap::new();
    for ev in &block.events {
        match &ev.kind {
            MiscKind::Fundings(fs) => {
                for f in fs {
                    out.entry(f.user).or_default().fundings.push((ev, f));
                }
            }
            MiscKind::Ledger(u) => {
                for (i, user) in u.users.iter().enumerate() {
                    if !u.users[..i].contains(user) {
                        out.entry(*user).or_default().ledger.push((ev, u));
                    }
                }
            }
            MiscKind::Ignored(_) => {}
        }
    }
    out
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FundingBody<'a> {
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    time: Option<i64>,
    coin: &'a str,
    usdc: String,
    szi: String,
    funding_rate: &'a str,
    n_samples: Option<u64>,
}

fn funding_body<'a>(ev: &MiscEvent, f: &'a Funding, as_delta: bool) -> FundingBody<'a> {
    FundingBody {
        kind: as_delta.then_some("funding"),
        time: (!as_delta).then(|| nanos_to_millis(ev.time)),
        coin: &f.coin,
        usdc: f.usdc.to_string(),
        szi: f.szi.to_string(),
        funding_rate: &f.funding_rate,
        n_samples: f.n_samples,
    }
}

fn head(channel: &str, user: &Address, snapshot: bool) -> Vec<u8> {
    let snap = if snapshot { "\"isSnapshot\":true," } else { "" };
    format!("{{\"channel\":\"{channel}\",\"data\":{{{snap}\"user\":\"{user}\",").into_bytes()
}

/// `{"channel":"userFundings","data":{["isSnapshot":true,]"user":…,"fundings":[{time,coin,usdc,szi,fundingRate,nSamples}…]}}`.
pub fn user_fundings(user: &Address, list: &[(&MiscEvent, &Funding)], snapshot: bool) -> Vec<u8> {
    let mut out = head("userFundings", user, snapshot);
    out.extend_from_slice(b"\"fundings\":");
    let body: Vec<FundingBody<'_>> = list.iter().map(|(ev, f)| funding_body(ev, f, false)).collect();
    serde_json::to_writer(&mut out, &body).expect("plain structs serialize");
    out.extend_from_slice(b"}}");
    out
}

/// `{"channel":"user","data":{"funding":{time,coin,usdc,szi,fundingRate,nSamples}}}`: one payment a frame.
pub fn user_event_funding(ev: &MiscEvent, f: &Funding) -> Vec<u8> {
    let mut out = b"{\"channel\":\"user\",\"data\":{\"funding\":".to_vec();
    serde_json::to_writer(&mut out, &funding_body(ev, f, false)).expect("plain structs serialize");
    out.extend_from_slice(b"}}");
    out
}

/// `{"time":ms,"hash":…,"delta":{…}}`: an entry of the ledger channel and of both info answers.
fn entry(out: &mut Vec<u8>, ev: &MiscEvent, delta: &[u8]) {
    out.extend_from_slice(
        format!("{{\"time\":{},\"hash\":\"{}\",\"delta\":", nanos_to_millis(ev.time), ev.hash).as_bytes(),
    );
    out.extend_from_slice(delta);
    out.push(b'}');
}

fn ledger_array(out: &mut Vec<u8>, list: &[(&MiscEvent, &LedgerUpdate)]) {
    out.push(b'[');
    for (i, (ev, u)) in list.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        entry(out, ev, u.delta.as_bytes());
    }
    out.push(b']');
}

/// `{"channel":"userNonFundingLedgerUpdates","data":{["isSnapshot":true,]"user":…,"nonFundingLedgerUpdates":[…]}}`.
pub fn user_ledger_updates(user: &Address, list: &[(&MiscEvent, &LedgerUpdate)], snapshot: bool) -> Vec<u8> {
    let mut out = head("userNonFundingLedgerUpdates", user, snapshot);
    out.extend_from_slice(b"\"nonFundingLedgerUpdates\":");
    ledger_array(&mut out, list);
    out.extend_from_slice(b"}}");
    out
}

/// One ledger update as the info answer and the channel hold it: `{time, hash, delta}` (what the store keeps).
pub fn ledger_entry(ev: &MiscEvent, u: &LedgerUpdate) -> Vec<u8> {
    let mut out = Vec::new();
    entry(&mut out, ev, u.delta.as_bytes());
    out
}

/// One funding as the info `userFunding` answer holds it: `{time, hash, delta: {type: "funding", …}}` (what the
/// store keeps).
pub fn funding_entry(ev: &MiscEvent, f: &Funding) -> Vec<u8> {
    let mut out = Vec::new();
    let delta = serde_json::to_vec(&funding_body(ev, f, true)).expect("plain structs serialize");
    entry(&mut out, ev, &delta);
    out
}

/// The info `userNonFundingLedgerUpdates` answer: the entries as a bare array.
pub fn info_ledger_updates(list: &[(&MiscEvent, &LedgerUpdate)]) -> Vec<u8> {
    let mut out = Vec::new();
    ledger_array(&mut out, list);
    out
}

/// The info `userFunding` answer: `[{time, hash, delta:{type:"funding",…}}…]`.
pub fn info_user_funding(list: &[(&MiscEvent, &Funding)]) -> Vec<u8> {
    let entries: Vec<Vec<u8>> = list.iter().map(|(ev, f)| funding_entry(ev, f)).collect();
    json_array(entries.iter().map(Vec::as_slice))
}

/// The userNonFundingLedgerUpdates snapshot from the store's entries (`{time, hash, delta}`, oldest first).
pub fn ledger_snapshot(user: &Address, entries: &[&[u8]]) -> Vec<u8> {
    let mut out = head("userNonFundingLedgerUpdates", user, true);
    out.extend_from_slice(b"\"nonFundingLedgerUpdates\":");
    out.extend(json_array(entries.iter().copied()));
    out.extend_from_slice(b"}}");
    out
}

/// The userFundings snapshot from the store's funding entries (`funding_entry`, oldest first), each in the
/// channel's shape `{time, coin, usdc, szi, fundingRate, nSamples}`; an entry this version did not write is left out.
pub fn fundings_snapshot(user: &Address, entries: &[&[u8]]) -> Vec<u8> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Delta<'a> {
        coin: &'a str,
        usdc: &'a str,
        szi: &'a str,
        funding_rate: &'a str,
        n_samples: Option<u64>,
    }
    #[derive(serde::Deserialize)]
    struct Stored<'a> {
        time: i64,
        #[serde(borrow)]
        delta: Delta<'a>,
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Channel<'a> {
        time: i64,
        coin: &'a str,
        usdc: &'a str,
        szi: &'a str,
        funding_rate: &'a str,
        n_samples: Option<u64>,
    }
    let stored: Vec<Stored<'_>> = entries.iter().filter_map(|e| serde_json::from_slice(e).ok()).collect();
    let body: Vec<Channel<'_>> = stored
        .iter()
        .map(|s| Channel {
            time: s.time,
            coin: s.delta.coin,
            usdc: s.delta.usdc,
            szi: s.delta.szi,
            funding_rate: s.delta.funding_rate,
            n_samples: s.delta.n_samples,
        })
        .collect();
    let mut out = head("userFundings", user, true);
    out.extend_from_slice(b"\"fundings\":");
    serde_json::to_writer(&mut out, &body).expect("plain structs serialize");
    out.extend_from_slice(b"}}");
    out
}

/// A block's entries for the history store (`store::misc_writer`), user by user, each user's in the block's
/// order: the same `{time, hash, delta}` the info answers and the ledger channel hold.
pub fn entries_of(b: &MiscBlock) -> EntryBlock {
    let mut entries = Vec::new();
    for (user, m) in by_user(b) {
        for (ev, f) in &m.fundings {
            let (kind, time_ms) = (EntryKind::Funding, nanos_to_millis(ev.time));
            entries.push(NewEntry { user: user.0, kind, time_ms, bytes: funding_entry(ev, f) });
        }
        for (ev, u) in &m.ledger {
            let (kind, time_ms) = (EntryKind::Ledger, nanos_to_millis(ev.time));
            entries.push(NewEntry { user: user.0, kind, time_ms, bytes: ledger_entry(ev, u) });
        }
    }
    EntryBlock { height: b.height, time_ms: nanos_to_millis(b.block_time), entries }
}

/// `[a,b,…]` of JSON values' bytes.
pub fn json_array<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = vec![b'['];
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(item);
    }
    out.push(b']');
    out
}

#[cfg(test)]
#[path = "misc_frames_tests.rs"]
mod tests;
