//! The JSON of single events (diff, status, fill) and of the status `order` object, written by hand in the
//! node's field order. Snapshot files reuse `order_object`, so statuses and snapshots cannot disagree.

use super::coins::CoinSpec;
use super::fmt::{decimal, signed_decimal, uint};
use super::orders::Order;

/// What a raw book diff does.
#[derive(Copy, Clone, Debug)]
pub enum DiffOp {
    New { sz: u64 },
    Update { orig_sz: u64, new_sz: u64 },
    Remove,
}

fn quoted_decimal(out: &mut Vec<u8>, units: u64, dec: u32) {
    out.push(b'"');
    decimal(out, units, dec);
    out.push(b'"');
}

fn cloid(out: &mut Vec<u8>, c: Option<u128>) {
    match c {
        Some(c) => {
            // By hand: a `format!` per event is measurable at 100k statuses a block.
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(b"\"0x");
            out.extend((0..32).rev().map(|i| HEX[(c >> (i * 4)) as usize & 0xf]));
            out.push(b'"');
        }
        None => out.extend_from_slice(b"null"),
    }
}

/// The status `order` object; `sz` is passed separately since a filled order reports `0.0`.
pub fn order_object(out: &mut Vec<u8>, coin: &CoinSpec, o: &Order, sz: u64) {
    out.extend_from_slice(b"{\"coin\":\"");
    out.extend_from_slice(coin.name.as_bytes());
    out.extend_from_slice(b"\",\"side\":\"");
    out.extend_from_slice(o.side.as_str().as_bytes());
    out.extend_from_slice(b"\",\"limitPx\":");
    quoted_decimal(out, o.px, coin.px_dec);
    out.extend_from_slice(b",\"sz\":");
    quoted_decimal(out, sz, coin.sz_dec);
    out.extend_from_slice(b",\"oid\":");
    uint(out, o.oid);
    out.extend_from_slice(b",\"timestamp\":");
    uint(out, o.timestamp);
    let Some(t) = o.trigger else {
        out.extend_from_slice(
            b",\"triggerCondition\":\"N/A\",\"isTrigger\":false,\"triggerPx\":\"0.0\",\"children\":[],\
              \"isPositionTpsl\":false,\"reduceOnly\":",
        );
        out.extend_from_slice(if o.reduce_only { b"true" } else { b"false" });
        out.extend_from_slice(b",\"orderType\":\"Limit\",\"origSz\":");
        return order_tail(out, coin, o, Some(o.tif.as_str()));
    };
    // A waiting trigger order: `isTrigger`, its condition and no tif; a triggered one `Triggered` and its tif
    // (as the capture's snapshot shows the triggered orders resting).
    out.extend_from_slice(b",\"triggerCondition\":\"");
    if t.waiting {
        out.extend_from_slice(if t.above(o.side) { b"Price above " } else { b"Price below " });
        let mut px = Vec::new();
        decimal(&mut px, t.px, coin.px_dec);
        out.extend_from_slice(px.strip_suffix(b".0").unwrap_or(&px[..]));
    } else {
        out.extend_from_slice(b"Triggered");
    }
    out.extend_from_slice(b"\",\"isTrigger\":");
    out.extend_from_slice(if t.waiting { b"true" } else { b"false" });
    // Once triggered the node writes `"triggerPx":"0.0"` (every triggered order of the capture's snapshot).
    out.extend_from_slice(b",\"triggerPx\":");
    quoted_decimal(out, if t.waiting { t.px } else { 0 }, coin.px_dec);
    out.extend_from_slice(b",\"children\":[],\"isPositionTpsl\":false,\"reduceOnly\":");
    out.extend_from_slice(if o.reduce_only { b"true" } else { b"false" });
    out.extend_from_slice(b",\"orderType\":\"");
    out.extend_from_slice(t.kind.order_type().as_bytes());
    out.extend_from_slice(b"\",\"origSz\":");
    order_tail(out, coin, o, (!t.waiting).then(|| o.tif.as_str()));
}

/// `origSz`'s value, `tif` and `cloid`, and the closing brace.
fn order_tail(out: &mut Vec<u8>, coin: &CoinSpec, o: &Order, tif: Option<&str>) {
    quoted_decimal(out, o.orig_sz, coin.sz_dec);
    match tif {
        Some(tif) => {
            out.extend_from_slice(b",\"tif\":\"");
            out.extend_from_slice(tif.as_bytes());
            out.extend_from_slice(b"\",\"cloid\":");
        }
        None => out.extend_from_slice(b",\"tif\":null,\"cloid\":"),
    }
    cloid(out, o.cloid);
    out.push(b'}');
}

/// An order status event. `time` is the block time already formatted; `hash` a formatted `0x…` or `None`.
#[allow(clippy::too_many_arguments)]
pub fn status(
    out: &mut Vec<u8>,
    time: &[u8],
    user: &str,
    hash: Option<&str>,
    status: &str,
    coin: &CoinSpec,
    o: &Order,
    sz: u64,
) {
    out.extend_from_slice(b"{\"time\":\"");
    out.extend_from_slice(time);
    out.extend_from_slice(b"\",\"user\":\"");
    out.extend_from_slice(user.as_bytes());
    out.extend_from_slice(b"\",\"hash\":");
    match hash {
        Some(h) => {
            out.push(b'"');
            out.extend_from_slice(h.as_bytes());
            out.push(b'"');
        }
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"builder\":null,\"status\":\"");
    out.extend_from_slice(status.as_bytes());
    out.extend_from_slice(b"\",\"order\":");
    order_object(out, coin, o, sz);
    out.push(b'}');
}

/// A raw book diff event for resting order `o` (user given formatted).
pub fn diff(out: &mut Vec<u8>, user: &str, coin: &CoinSpec, o: &Order, op: DiffOp) {
    out.extend_from_slice(b"{\"user\":\"");
    out.extend_from_slice(user.as_bytes());
    out.extend_from_slice(b"\",\"oid\":");
    uint(out, o.oid);
    out.extend_from_slice(b",\"coin\":\"");
    out.extend_from_slice(coin.name.as_bytes());
    out.extend_from_slice(b"\",\"side\":\"");
    out.extend_from_slice(o.side.as_str().as_bytes());
    out.extend_from_slice(b"\",\"px\":");
    quoted_decimal(out, o.px, coin.px_dec);
    out.extend_from_slice(b",\"raw_book_diff\":");
    match op {
        DiffOp::New { sz } => {
            out.extend_from_slice(b"{\"new\":{\"sz\":");
            quoted_decimal(out, sz, coin.sz_dec);
            out.extend_from_slice(b"}}");
        }
        DiffOp::Update { orig_sz, new_sz } => {
            out.extend_from_slice(b"{\"update\":{\"origSz\":");
            quoted_decimal(out, orig_sz, coin.sz_dec);
            out.extend_from_slice(b",\"newSz\":");
            quoted_decimal(out, new_sz, coin.sz_dec);
            out.extend_from_slice(b"}}");
        }
        DiffOp::Remove => out.extend_from_slice(b"\"remove\""),
    }
    out.push(b'}');
}

/// One side of a trade.
#[derive(Clone, Debug)]
pub struct FillSide<'a> {
    pub user: &'a str,
    pub order: &'a Order,
    pub px: u64,
    pub sz: u64,
    /// This side's direction (`B` buys).
    pub side: crate::node::Side,
    pub time_ms: u64,
    /// Position before the fill, in lots (signed).
    pub start_position: i64,
    pub dir: &'static str,
    /// Micro-USDC.
    pub closed_pnl: i64,
    pub hash: &'a str,
    pub crossed: bool,
    /// Micro-USDC, negative for a maker rebate.
    pub fee: i64,
    pub tid: u64,
    /// The TWAP this fill is a slice of (its owner's side only; `null` otherwise).
    pub twap_id: Option<u64>,
    /// A liquidation's mark, on both sides of each of its fills.
    pub liquidation: Option<&'a LiquidationMark>,
}

/// A fill's `liquidation` object `{liquidatedUser, markPx, method}`, last in the fill as on mainnet (shape in
/// docs/hl-user-channels.md §2, GoldRush's `HypercoreLiquidation`, Bitquery's liquidation pages: `method` is
/// `market` for an open-market liquidation, `backstop` when the backstop vault takes over).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiquidationMark {
    pub liquidated_user: String,
    /// At the coin's price decimals.
    pub mark_px: u64,
    pub method: &'static str,
}

/// A fill event: `[user, {…}]`.
pub fn fill(out: &mut Vec<u8>, coin: &CoinSpec, f: &FillSide<'_>) {
    out.extend_from_slice(b"[\"");
    out.extend_from_slice(f.user.as_bytes());
    out.extend_from_slice(b"\",{\"coin\":\"");
    out.extend_from_slice(coin.name.as_bytes());
    out.extend_from_slice(b"\",\"px\":");
    quoted_decimal(out, f.px, coin.px_dec);
    out.extend_from_slice(b",\"sz\":");
    quoted_decimal(out, f.sz, coin.sz_dec);
    out.extend_from_slice(b",\"side\":\"");
    out.extend_from_slice(f.side.as_str().as_bytes());
    out.extend_from_slice(b"\",\"time\":");
    uint(out, f.time_ms);
    out.extend_from_slice(b",\"startPosition\":\"");
    signed_decimal(out, f.start_position, coin.sz_dec);
    out.extend_from_slice(b"\",\"dir\":\"");
    out.extend_from_slice(f.dir.as_bytes());
    out.extend_from_slice(b"\",\"closedPnl\":\"");
    signed_decimal(out, f.closed_pnl, 6);
    out.extend_from_slice(b"\",\"hash\":\"");
    out.extend_from_slice(f.hash.as_bytes());
    out.extend_from_slice(b"\",\"oid\":");
    uint(out, f.order.oid);
    out.extend_from_slice(b",\"crossed\":");
    out.extend_from_slice(if f.crossed { b"true" } else { b"false" });
    out.extend_from_slice(b",\"fee\":\"");
    signed_decimal(out, f.fee, 6);
    out.extend_from_slice(b"\",\"tid\":");
    uint(out, f.tid);
    if f.order.cloid.is_some() {
        out.extend_from_slice(b",\"cloid\":");
        cloid(out, f.order.cloid);
    }
    out.extend_from_slice(b",\"feeToken\":\"USDC\",\"twapId\":");
    match f.twap_id {
        Some(id) => uint(out, id),
        None => out.extend_from_slice(b"null"),
    }
    if let Some(l) = f.liquidation {
        out.extend_from_slice(b",\"liquidation\":{\"liquidatedUser\":\"");
        out.extend_from_slice(l.liquidated_user.as_bytes());
        out.extend_from_slice(b"\",\"markPx\":");
        quoted_decimal(out, l.mark_px, coin.px_dec);
        out.extend_from_slice(b",\"method\":\"");
        out.extend_from_slice(l.method.as_bytes());
        out.extend_from_slice(b"\"}");
    }
    out.extend_from_slice(b"}]");
}
