//! The JSON of every published channel, written once per frame.
//!
//! l2Book and bbo follow the official API byte for byte in shape; trades pair the two fills of each match by
//! `tid`; l4Book (our extension, docs/api.md) carries a coin's raw diffs and the statuses that explain them, in
//! the node's own field names, so a client can keep an exact copy of the book.

use serde::Serialize;
use serde::ser::Serializer;
use serde_json::value::RawValue;

use crate::book::CoinBook;
use crate::book::export::SidesOut;
use crate::book::l2::{LevelAgg, write_l2_book_json};
use crate::node::matches::pair_by_tid;
use crate::node::time::nanos_to_millis;
use crate::node::{Address, Diff, DiffKind, Fill, Fixed, OrderStatus, Side, TxHash, UnixNanos};

/// `{"channel":"l2Book","data":{…}}`.
pub fn l2_book(coin: &str, time_ms: i64, bids: &[LevelAgg], asks: &[LevelAgg]) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + 48 * (bids.len() + asks.len()));
    out.extend_from_slice(b"{\"channel\":\"l2Book\",\"data\":");
    write_l2_book_json(&mut out, coin, time_ms, bids, asks);
    out.push(b'}');
    out
}

/// The `post` answer's payload data: the same object as an l2Book frame's `data`.
pub fn l2_book_data(coin: &str, time_ms: i64, bids: &[LevelAgg], asks: &[LevelAgg]) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + 48 * (bids.len() + asks.len()));
    write_l2_book_json(&mut out, coin, time_ms, bids, asks);
    out
}

/// Best level of each side, or none.
pub type Bbo = [Option<LevelAgg>; 2];

/// `{"channel":"bbo","data":{"coin":…,"time":…,"bbo":[bid|null, ask|null]}}`.
pub fn bbo(coin: &str, time_ms: i64, bbo: &Bbo) -> Vec<u8> {
    let side = |l: &Option<LevelAgg>| l.map(|l| serde_json::json!({"px": l.px, "sz": l.sz, "n": l.n}));
    let v = serde_json::json!({"channel": "bbo", "data": {"coin": coin, "time": time_ms, "bbo": [side(&bbo[0]), side(&bbo[1])]}});
    v.to_string().into_bytes()
}

/// The mid of a best bid and ask, exact: half a 10^-8 unit is written as a ninth decimal.
pub fn mid_text(bid: Fixed, ask: Fixed) -> String {
    let nanos = (u128::from(bid.0) + u128::from(ask.0)) * 5;
    let (int, frac) = (nanos / 1_000_000_000, nanos % 1_000_000_000);
    let frac = format!("{frac:09}");
    let frac = frac.trim_end_matches('0');
    format!("{int}.{}", if frac.is_empty() { "0" } else { frac })
}

/// `{"channel":"allMids","data":{"mids":{…}}}`, with `"dex"` only for a builder dex.
pub fn all_mids<'a>(dex: Option<&str>, mids: impl Iterator<Item = (&'a str, &'a str)>) -> Vec<u8> {
    let mut map = serde_json::Map::new();
    for (coin, mid) in mids {
        map.insert(coin.to_owned(), mid.into());
    }
    let mut data = serde_json::json!({ "mids": map });
    if let Some(d) = dex {
        data["dex"] = d.into();
    }
    serde_json::json!({"channel": "allMids", "data": data}).to_string().into_bytes()
}

/// One match: the taker's side, both users.
#[derive(Serialize)]
struct Trade<'a> {
    coin: &'a str,
    side: &'static str,
    px: Fixed,
    sz: Fixed,
    time: i64,
    hash: TxHash,
    tid: u64,
    /// [buyer, seller]; the zero address stands for a side the node did not write.
    users: [Address; 2],
}

/// One coin's fills (of a block, or of the recent ones) as official trades, paired by `node::matches`.
pub fn trades<'a>(fills: impl Iterator<Item = &'a Fill>) -> Vec<u8> {
    let mut out = b"{\"channel\":\"trades\",\"data\":".to_vec();
    write_trades(&mut out, fills);
    out.push(b'}');
    out
}

/// The trades of `fills` as the `data` array of a trades frame (the recentTrades info answer is this alone).
pub fn trades_data<'a>(fills: impl Iterator<Item = &'a Fill>) -> Vec<u8> {
    let mut out = Vec::new();
    write_trades(&mut out, fills);
    out
}

fn write_trades<'a>(out: &mut Vec<u8>, fills: impl Iterator<Item = &'a Fill>) {
    let zero = Address::default();
    let list: Vec<Trade<'_>> = pair_by_tid(fills, |f| f.tid)
        .iter()
        .map(|m| {
            let (mut buyer, mut seller, mut taker) = (zero, zero, None);
            for f in m.fills() {
                match f.side {
                    Side::Bid => buyer = f.user,
                    Side::Ask => seller = f.user,
                }
                if f.crossed {
                    taker = Some(f.side);
                }
            }
            let f = m.first;
            // Without the taker's fill, the taker is the other side of the maker we saw.
            let side = taker.unwrap_or(if f.crossed { f.side } else { opposite(f.side) });
            Trade {
                coin: &f.coin,
                side: side.as_str(),
                px: f.px,
                sz: f.sz,
                time: f.time,
                hash: f.hash,
                tid: m.tid,
                users: [buyer, seller],
            }
        })
        .collect();
    // About 260 bytes a trade (two addresses and a hash): reserved once rather than grown while writing.
    out.reserve(32 + 280 * list.len());
    let _ = serde_json::to_writer(&mut *out, &list);
}

fn opposite(s: Side) -> Side {
    match s {
        Side::Bid => Side::Ask,
        Side::Ask => Side::Bid,
    }
}

/// `{"channel":"l4Book","data":{"type":"snapshot","coin":…,"height":…,"time":…,"levels":[bids, asks]}}`, each
/// side `[[user, order], …]` best first and in queue order, as one coin of the node's snapshot.
pub fn l4_snapshot(book: &CoinBook, height: u64, time: UnixNanos) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 + 300 * book.len());
    out.extend_from_slice(b"{\"channel\":\"l4Book\",\"data\":{\"type\":\"snapshot\",\"coin\":");
    let _ = serde_json::to_writer(&mut out, &**book.coin());
    write_height_time(&mut out, height, time);
    out.extend_from_slice(b",\"levels\":");
    let _ = serde_json::to_writer(&mut out, &SidesOut(book));
    out.extend_from_slice(b"}}");
    out
}

/// `{"channel":"l4Book","data":{"type":"updates","coin":…,"height":…,"time":…,"book_diffs":[…],
/// "order_statuses":[…]}}`: one block's diffs of the coin, and its statuses for the oids they touch.
pub fn l4_updates(coin: &str, height: u64, time: UnixNanos, diffs: &[&Diff], statuses: &[&OrderStatus]) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 + 200 * diffs.len() + 400 * statuses.len());
    out.extend_from_slice(b"{\"channel\":\"l4Book\",\"data\":{\"type\":\"updates\",\"coin\":");
    let _ = serde_json::to_writer(&mut out, coin);
    write_height_time(&mut out, height, time);
    out.extend_from_slice(b",\"book_diffs\":");
    let _ = serde_json::to_writer(&mut out, &diffs.iter().map(|d| DiffOut(d)).collect::<Vec<_>>());
    out.extend_from_slice(b",\"order_statuses\":");
    let _ = serde_json::to_writer(&mut out, &statuses.iter().map(|s| StatusOut(s)).collect::<Vec<_>>());
    out.extend_from_slice(b"}}");
    out
}

fn write_height_time(out: &mut Vec<u8>, height: u64, time: UnixNanos) {
    let mut b = itoa::Buffer::new();
    out.extend_from_slice(b",\"height\":");
    out.extend_from_slice(b.format(height).as_bytes());
    out.extend_from_slice(b",\"time\":");
    out.extend_from_slice(b.format(nanos_to_millis(time)).as_bytes());
}

/// A raw diff in the node's shape.
struct DiffOut<'a>(&'a Diff);

impl Serialize for DiffOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let d = self.0;
        let raw = match d.kind {
            DiffKind::New { sz, insert_before: None } => serde_json::json!({"new": {"sz": sz}}),
            DiffKind::New { sz, insert_before: Some(b) } => serde_json::json!({"new": {"sz": sz, "insertBefore": b}}),
            DiffKind::Update { orig_sz, new_sz } => serde_json::json!({"update": {"origSz": orig_sz, "newSz": new_sz}}),
            DiffKind::Remove => serde_json::json!("remove"),
        };
        serde_json::json!({"user": d.user, "oid": d.oid, "coin": &*d.coin, "side": d.side.as_str(), "px": d.px, "raw_book_diff": raw})
            .serialize(s)
    }
}

/// An order status in the node's shape (time as the node writes it).
struct StatusOut<'a>(&'a OrderStatus);

impl Serialize for StatusOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let st = self.0;
        let o = &st.order;
        let raw = |r: &Option<Box<str>>| r.as_deref().and_then(|t| RawValue::from_string(t.to_owned()).ok());
        let order = serde_json::json!({
            "coin": &*st.coin, "side": o.side.as_str(), "limitPx": o.limit_px, "sz": o.sz, "oid": o.oid,
            "timestamp": o.timestamp, "triggerCondition": &*o.flavor.trigger_condition,
            "isTrigger": o.flavor.is_trigger, "triggerPx": o.trigger_px,
            "children": raw(&o.children).map_or(serde_json::json!([]), |r| serde_json::to_value(r).unwrap_or_default()),
            "isPositionTpsl": o.flavor.is_position_tpsl, "reduceOnly": o.flavor.reduce_only,
            "orderType": &*o.flavor.order_type, "origSz": o.orig_sz, "tif": o.flavor.tif.as_deref(),
            "cloid": o.cloid,
        });
        serde_json::json!({
            "time": crate::node::time::format_node_time(st.time), "user": st.user, "hash": st.hash,
            "builder": raw(&st.builder), "status": &*st.status, "order": order,
        })
        .serialize(s)
    }
}

#[cfg(test)]
#[path = "json_tests.rs"]
mod tests;
