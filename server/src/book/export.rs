//! Our books written in the node's snapshot format.
//!
//! The same `[height, [[coin, [bids, asks]], …]]` document the node's `fileSnapshot` writes, so an operator (or a
//! test) can diff our state against the node's with the tools that read node snapshots, and so `l4Book` snapshot
//! frames reuse one writer. Orders carry the status `order` schema, best level first, time priority within a level;
//! each side's untriggered trigger orders follow its resting orders, marked as the node marks them
//! (`"isTrigger": true`), oldest oid first.

use std::io::{self, Write};

use serde::Serialize;
use serde::ser::{SerializeSeq, Serializer};

use super::{Books, CoinBook, RestingOrder, TriggerOrder};
use crate::node::{Coin, Fixed, Side};

/// The `order` object of a resting order, in the node's field order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct OrderOut<'a> {
    coin: &'a str,
    side: &'static str,
    limit_px: Fixed,
    sz: Fixed,
    oid: u64,
    timestamp: u64,
    trigger_condition: &'a str,
    is_trigger: bool,
    trigger_px: Fixed,
    children: Children<'a>,
    is_position_tpsl: bool,
    reduce_only: bool,
    order_type: &'a str,
    orig_sz: Fixed,
    tif: Option<&'a str>,
    cloid: Option<String>,
}

pub(crate) fn order_out<'a>(book: &'a CoinBook, o: &'a RestingOrder) -> OrderOut<'a> {
    let children = Children(book.children(o.oid));
    OrderOut {
        coin: book.coin(),
        side: o.side.as_str(),
        // Where it rests: a triggered order rests at its `new` diff's px, which its status's limitPx need not be,
        // and the node's snapshot lists every order in price order by this field.
        limit_px: o.px,
        sz: o.sz,
        oid: o.oid,
        timestamp: o.timestamp,
        trigger_condition: &o.flavor.trigger_condition,
        // A resting order waits for no trigger: `true` marks only the waiting ones (after each side), as in the
        // node's snapshot, whose triggered resting orders all say `false` whatever their status said.
        is_trigger: false,
        trigger_px: o.trigger_px,
        children,
        is_position_tpsl: o.flavor.is_position_tpsl,
        reduce_only: o.flavor.reduce_only,
        order_type: &o.flavor.order_type,
        orig_sz: o.orig_sz,
        tif: o.flavor.tif.as_deref(),
        cloid: o.cloid.map(|c| c.to_string()),
    }
}

/// The `order` object of an untriggered trigger order: the fields its placing status (or snapshot) wrote.
pub(crate) fn trigger_out<'a>(coin: &'a str, t: &'a TriggerOrder) -> OrderOut<'a> {
    let o = &t.order;
    OrderOut {
        coin,
        side: o.side.as_str(),
        limit_px: o.limit_px,
        sz: o.sz,
        oid: o.oid,
        timestamp: o.timestamp,
        trigger_condition: &o.flavor.trigger_condition,
        is_trigger: o.flavor.is_trigger,
        trigger_px: o.trigger_px,
        children: Children(o.children.as_deref()),
        is_position_tpsl: o.flavor.is_position_tpsl,
        reduce_only: o.flavor.reduce_only,
        order_type: &o.flavor.order_type,
        orig_sz: o.orig_sz,
        tif: o.flavor.tif.as_deref(),
        cloid: o.cloid.map(|c| c.to_string()),
    }
}

/// The raw `children` JSON the node wrote (kept only when non-empty), or `[]`.
struct Children<'a>(Option<&'a str>);

impl Serialize for Children<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            // Rare (a few percent of orders): the copy into a `RawValue` is not worth avoiding.
            Some(raw) => serde_json::value::RawValue::from_string(raw.to_owned())
                .map_err(serde::ser::Error::custom)?
                .serialize(s),
            None => s.serialize_seq(Some(0))?.end(),
        }
    }
}

/// One side of a book as `[[user, order], …]`.
struct SideOut<'a>(&'a CoinBook, Side);

impl Serialize for SideOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(None)?;
        for o in self.0.orders(self.1) {
            seq.serialize_element(&(o.user, order_out(self.0, o)))?;
        }
        for t in self.0.triggers().of_side(self.1) {
            seq.serialize_element(&(t.user, trigger_out(self.0.coin(), t)))?;
        }
        seq.end()
    }
}

/// A coin's two sides as `[bids, asks]` (the `l4Book` snapshot frame's `levels`).
#[derive(Debug)]
pub struct SidesOut<'a>(pub &'a CoinBook);

impl Serialize for SidesOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (SideOut(self.0, Side::Bid), SideOut(self.0, Side::Ask)).serialize(s)
    }
}

/// One coin as `[coin, [bids, asks]]`.
#[derive(Debug)]
pub struct CoinOut<'a>(pub &'a CoinBook);

impl Serialize for CoinOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (&**self.0.coin(), SidesOut(self.0)).serialize(s)
    }
}

struct CoinsOut<'a>(&'a Books, &'a [Coin]);

impl Serialize for CoinsOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.1.len()))?;
        for coin in self.1 {
            if let Some(book) = self.0.coin(coin) {
                seq.serialize_element(&CoinOut(book))?;
            }
        }
        seq.end()
    }
}

/// Writes `[height, [[coin, [bids, asks]], …]]` for `coins` (all coins, sorted, when `None`).
pub fn write_snapshot(books: &Books, coins: Option<&[Coin]>, out: impl Write) -> io::Result<()> {
    let all;
    let coins = if let Some(c) = coins {
        c
    } else {
        all = books.coin_names();
        &all
    };
    serde_json::to_writer(out, &(books.height(), CoinsOut(books, coins))).map_err(io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::book::snapshot::coin_book;
    use crate::node::snapshot::read_snapshot_slice;

    const SNAP: &str = r#"[7,[["BTC",[[["0x0000000000000000000000000000000000000001",{"coin":"BTC","side":"B","limitPx":"100.5","sz":"1.25","oid":11,"timestamp":1,"triggerCondition":"N/A","isTrigger":false,"triggerPx":"0.0","children":[],"isPositionTpsl":false,"reduceOnly":false,"orderType":"Limit","origSz":"2.0","tif":"Alo","cloid":null}],["0x0000000000000000000000000000000000000002",{"coin":"BTC","side":"B","limitPx":"100.5","sz":"3.0","oid":12,"timestamp":2,"triggerCondition":"N/A","isTrigger":false,"triggerPx":"0.0","children":[{"x":1}],"isPositionTpsl":false,"reduceOnly":true,"orderType":"Limit","origSz":"3.0","tif":null,"cloid":"0x000102030405060708090a0b0c0d0e0f"}]],[]]]]]"#;

    fn load(text: &str) -> Books {
        let mut coins = Vec::new();
        let h = read_snapshot_slice(text.as_bytes(), |c| coins.push(coin_book(c))).unwrap();
        Books::new(h, coins)
    }

    #[test]
    fn round_trips_the_node_format() {
        let books = load(SNAP);
        let mut out = Vec::new();
        write_snapshot(&books, None, &mut out).unwrap();
        assert_eq!(std::str::from_utf8(&out).unwrap(), SNAP);
    }

    #[test]
    fn untriggered_orders_follow_their_side_marked_as_the_node_marks_them() {
        let stop = r#"["0x0000000000000000000000000000000000000003",{"coin":"BTC","side":"A","limitPx":"90.0","sz":"0.5","oid":13,"timestamp":3,"triggerCondition":"Price below 95","isTrigger":true,"triggerPx":"95.0","children":[],"isPositionTpsl":true,"reduceOnly":true,"orderType":"Stop Market","origSz":"0.5","tif":null,"cloid":null}]"#;
        let text = SNAP.replacen("],[]]]]]", &format!("],[{stop}]]]]]"), 1);
        let books = load(&text);
        let book = books.coin("BTC").unwrap();
        assert_eq!((book.len(), book.triggers().len()), (2, 1), "held beside the book, not resting");
        assert!(book.levels_after(Side::Ask, None).next().is_none(), "no ask level");
        let mut out = Vec::new();
        write_snapshot(&books, None, &mut out).unwrap();
        assert_eq!(std::str::from_utf8(&out).unwrap(), text);
    }
}
