//! Serde shapes of node JSON, parsed borrowed from the line buffer.
//!
//! These mirror the node's field names and are converted into `node::event` types straight away. Strings are
//! borrowed (`Cow` only allocates if the node ever escaped a character), numbers and hex go straight into fixed
//! types, and a rejected status skips its `order` object without building anything: rejections are over 95% of the
//! status bytes.

use std::borrow::Cow;
use std::fmt;

use compact_str::CompactString;
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::decimal::Fixed;
use super::event::{HexBytes, Side};
use super::time::{UnixNanos, parse_node_time};

/// The envelope fields every line carries.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct LineMeta {
    pub height: u64,
    pub block_time: UnixNanos,
    /// When the node wrote the line.
    pub local_time: UnixNanos,
}

impl<'de, const N: usize> Deserialize<'de> for HexBytes<N> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<const N: usize>;
        impl<const N: usize> Visitor<'_> for V<N> {
            type Value = HexBytes<N>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "0x and {} hex digits", 2 * N)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<HexBytes<N>, E> {
                HexBytes::parse(s)
                    .ok_or_else(|| E::custom(format_args!("expected 0x and {} hex digits, got {s:?}", 2 * N)))
            }
        }
        d.deserialize_str(V::<N>)
    }
}

impl<'de> Deserialize<'de> for Side {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Side;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("side \"B\" or \"A\"")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Side, E> {
                match s {
                    "B" => Ok(Side::Bid),
                    "A" => Ok(Side::Ask),
                    _ => Err(E::custom(format_args!("expected side \"B\" or \"A\", got {s:?}"))),
                }
            }
        }
        d.deserialize_str(V)
    }
}

/// A node timestamp string, parsed to nanoseconds.
#[derive(Debug, Clone, Copy)]
pub struct NodeTime(pub UnixNanos);

impl<'de> Deserialize<'de> for NodeTime {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = NodeTime;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a time like 2026-05-05T17:39:13.024084407")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<NodeTime, E> {
                parse_node_time(s).map(NodeTime).map_err(|e| E::custom(format_args!("bad time {s:?}: {e}")))
            }
        }
        d.deserialize_str(V)
    }
}

/// `{"local_time":…,"block_time":…,"block_number":…,"events":[…]}`: the line of every stream in both modes.
#[derive(Deserialize)]
#[serde(bound(deserialize = "E: Deserialize<'de>"))]
pub struct Envelope<E> {
    pub local_time: NodeTime,
    pub block_time: NodeTime,
    pub block_number: u64,
    pub events: Vec<E>,
}

impl<E> Envelope<E> {
    pub fn meta(&self) -> LineMeta {
        LineMeta { height: self.block_number, block_time: self.block_time.0, local_time: self.local_time.0 }
    }
}

#[derive(Deserialize)]
pub struct DiffWire<'a> {
    pub user: HexBytes<20>,
    pub oid: u64,
    #[serde(borrow)]
    pub coin: Cow<'a, str>,
    pub side: Side,
    pub px: Fixed,
    pub raw_book_diff: RawBookDiff,
}

/// `"remove"`, `{"new":{"sz":…}}` or `{"update":{"origSz":…,"newSz":…}}`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RawBookDiff {
    New {
        sz: Fixed,
        #[serde(default, rename = "insertBefore")]
        insert_before: Option<u64>,
    },
    Update {
        #[serde(rename = "origSz")]
        orig_sz: Fixed,
        #[serde(rename = "newSz")]
        new_sz: Fixed,
    },
    Remove,
}

/// The `order` object of statuses and snapshots. `C` is how `children` is held: borrowed in lines, boxed when
/// streaming a snapshot from a reader.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", bound(deserialize = "C: Deserialize<'de>"))]
pub struct OrderWire<C> {
    pub coin: CompactString,
    pub side: Side,
    pub limit_px: Fixed,
    pub sz: Fixed,
    pub oid: u64,
    pub timestamp: u64,
    #[serde(default = "na")]
    pub trigger_condition: CompactString,
    #[serde(default)]
    pub is_trigger: bool,
    #[serde(default)]
    pub trigger_px: Fixed,
    #[serde(default)]
    pub children: Option<C>,
    #[serde(default)]
    pub is_position_tpsl: bool,
    #[serde(default)]
    pub reduce_only: bool,
    #[serde(default = "limit")]
    pub order_type: CompactString,
    #[serde(default)]
    pub orig_sz: Option<Fixed>,
    #[serde(default)]
    pub tif: Option<CompactString>,
    #[serde(default)]
    pub cloid: Option<HexBytes<16>>,
}

fn na() -> CompactString {
    "N/A".into()
}

fn limit() -> CompactString {
    "Limit".into()
}

/// A status event, or the fact that it was a rejection (and its order was skipped).
pub enum StatusWire<'a> {
    Rejected,
    Kept {
        time: NodeTime,
        user: HexBytes<20>,
        hash: Option<HexBytes<32>>,
        builder: Option<&'a RawValue>,
        status: &'a str,
        order: Box<OrderWire<&'a RawValue>>,
    },
}

pub fn is_rejection(status: &str) -> bool {
    status.ends_with("Rejected")
}

impl<'de: 'a, 'a> Deserialize<'de> for StatusWire<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(StatusVisitor)
    }
}

struct StatusVisitor;

impl<'de> Visitor<'de> for StatusVisitor {
    type Value = StatusWire<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an order status object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<StatusWire<'de>, A::Error> {
        let (mut time, mut user, mut hash, mut builder, mut status, mut order) = (None, None, None, None, None, None);
        while let Some(key) = m.next_key::<Cow<'de, str>>()? {
            match &*key {
                "status" => status = Some(m.next_value::<&'de str>()?),
                // The node writes `status` before `order`, so a rejection's order is skipped unparsed.
                "order" if status.is_some_and(is_rejection) => {
                    m.next_value::<IgnoredAny>()?;
                }
                "order" => order = Some(m.next_value::<Box<OrderWire<&'de RawValue>>>()?),
                // Borrowed now, decoded only if the status is kept.
                "time" => time = Some(m.next_value::<&'de str>()?),
                "user" => user = Some(m.next_value::<&'de str>()?),
                "hash" => hash = m.next_value::<Option<&'de str>>()?,
                "builder" => builder = m.next_value::<Option<&'de RawValue>>()?,
                _ => {
                    m.next_value::<IgnoredAny>()?;
                }
            }
        }
        let status = status.ok_or_else(|| de::Error::missing_field("status"))?;
        if is_rejection(status) {
            return Ok(StatusWire::Rejected);
        }
        let time = time.ok_or_else(|| de::Error::missing_field("time"))?;
        let user = user.ok_or_else(|| de::Error::missing_field("user"))?;
        Ok(StatusWire::Kept {
            time: NodeTime(
                parse_node_time(time).map_err(|e| de::Error::custom(format_args!("bad time {time:?}: {e}")))?,
            ),
            user: HexBytes::parse(user).ok_or_else(|| de::Error::custom(format_args!("bad user {user:?}")))?,
            hash: match hash {
                None => None,
                Some(h) => Some(HexBytes::parse(h).ok_or_else(|| de::Error::custom(format_args!("bad hash {h:?}")))?),
            },
            builder: builder.filter(|b| b.get() != "null"),
            status,
            order: order.ok_or_else(|| de::Error::missing_field("order"))?,
        })
    }
}

/// One side of a fill: `[user, {…}]`.
#[derive(Deserialize)]
pub struct FillWire<'a>(pub HexBytes<20>, #[serde(borrow)] pub FillBody<'a>);

#[derive(Deserialize)]
pub struct FillBody<'a> {
    #[serde(borrow)]
    pub coin: Cow<'a, str>,
    pub px: Fixed,
    pub sz: Fixed,
    pub side: Side,
    pub time: i64,
    pub hash: HexBytes<32>,
    pub oid: u64,
    pub crossed: bool,
    pub tid: u64,
}

impl FillBody<'_> {
    /// The fill of `user`, its coin named by `coin` (the parser's interned copy, or the caller's).
    pub fn into_fill(self, coin: super::Coin, user: super::Address) -> super::Fill {
        let FillBody { px, sz, side, time, hash, oid, crossed, tid, .. } = self;
        super::Fill { coin, user, px, sz, side, time, hash, oid, crossed, tid }
    }
}

/// The fields of a fill that make its trade, and nothing else: what the history store reads of every fill
/// (a fill missing any other field is still a trade to it).
#[derive(Deserialize)]
pub struct FillTradeWire<'a> {
    #[serde(borrow)]
    pub coin: Cow<'a, str>,
    pub px: Fixed,
    pub sz: Fixed,
    pub time: i64,
    pub tid: u64,
}

/// A status event read whole, order included, whatever its status.
#[derive(Deserialize)]
pub(crate) struct AnyStatusWire<'a> {
    pub time: NodeTime,
    pub user: HexBytes<20>,
    #[serde(default)]
    pub hash: Option<HexBytes<32>>,
    #[serde(default, borrow)]
    pub builder: Option<&'a RawValue>,
    #[serde(borrow)]
    pub status: Cow<'a, str>,
    #[serde(borrow)]
    pub order: OrderWire<&'a RawValue>,
}
