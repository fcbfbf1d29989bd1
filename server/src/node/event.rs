//! The typed, compact events of the three node streams, as the rest of the server sees them.
//!
//! Everything here is owned but allocation-light: numbers are `Fixed`, addresses and hashes are byte arrays,
//! and short repeated strings (coins, statuses, order flavours) are shared `Arc`s from an interner
//! (`node::intern`). The serde wire shapes that produce them live in `node::wire`.

use std::fmt;
use std::sync::Arc;

use super::decimal::Fixed;
use super::time::UnixNanos;

/// A coin name exactly as the node writes it (`BTC`, `@107`, `PURR/USDC`, `dex:COIN`), interned.
pub type Coin = Arc<str>;

/// Spot books are named `@N` or `BASE/QUOTE`.
pub fn is_spot(coin: &str) -> bool {
    coin.starts_with('@') || coin.contains('/')
}

/// Book side: `B` (bid) or `A` (ask) on the wire.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Side {
    Bid,
    Ask,
}

impl Side {
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Bid => "B",
            Side::Ask => "A",
        }
    }

    pub fn index(self) -> usize {
        match self {
            Side::Bid => 0,
            Side::Ask => 1,
        }
    }
}

/// Fixed-size byte strings written as `0x` + lowercase hex: addresses, cloids, hashes.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HexBytes<const N: usize>(pub [u8; N]);

/// A 20-byte user address.
pub type Address = HexBytes<20>;
/// A 16-byte client order id.
pub type Cloid = HexBytes<16>;
/// A 32-byte transaction hash.
pub type TxHash = HexBytes<32>;

impl<const N: usize> HexBytes<N> {
    /// Parses `0x` followed by exactly `2N` hex digits.
    pub fn parse(s: &str) -> Option<Self> {
        Self::parse_bytes(s.as_bytes())
    }

    /// `parse` of bytes: a fast reader takes the digits straight from the line.
    pub fn parse_bytes(s: &[u8]) -> Option<Self> {
        let hex = s.strip_prefix(b"0x")?;
        if hex.len() != 2 * N {
            return None;
        }
        let mut out = [0u8; N];
        // Every diff, fill and kept status carries at least one address: `faster_hex` decodes them several times
        // faster than `hex`, which was a sixth of a diffs line's parse.
        faster_hex::hex_decode(hex, &mut out).ok()?;
        Some(HexBytes(out))
    }

    /// `0x` and lower-case hex, written into `buf` (large enough for the 32-byte hashes).
    fn encode<'b>(&self, buf: &'b mut [u8; 66]) -> &'b str {
        const { assert!(N <= 32, "HexBytes::encode's buffer holds at most 32 bytes") };
        buf[..2].copy_from_slice(b"0x");
        let digits = &mut buf[2..2 + 2 * N];
        faster_hex::hex_encode(&self.0, digits).expect("the buffer holds two digits a byte");
        std::str::from_utf8(&buf[..2 + 2 * N]).expect("hex digits are ASCII")
    }
}

impl<const N: usize> Default for HexBytes<N> {
    /// All zero bytes (the zero address).
    fn default() -> Self {
        HexBytes([0; N])
    }
}

impl<const N: usize> fmt::Display for HexBytes<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.encode(&mut [0; 66]))
    }
}

impl<const N: usize> fmt::Debug for HexBytes<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl<const N: usize> serde::Serialize for HexBytes<N> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.encode(&mut [0; 66]))
    }
}

/// The system addresses that place orders without any status line (HIP-2 liquidity, protocol orders).
pub const SYSTEM_USERS: [Address; 2] = [HexBytes([0xff; 20]), HexBytes([0xfe; 20])];

/// A raw book diff: the venue's post-match change to one resting order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diff {
    pub coin: Coin,
    pub user: Address,
    pub oid: u64,
    pub side: Side,
    pub px: Fixed,
    pub kind: DiffKind,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum DiffKind {
    /// Rest a new order; `insert_before` places it ahead of that oid in its level.
    New {
        sz: Fixed,
        insert_before: Option<u64>,
    },
    Update {
        orig_sz: Fixed,
        new_sz: Fixed,
    },
    Remove,
}

/// The rarely varying descriptive fields of an order, interned and shared by every order that has them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OrderFlavor {
    pub tif: Option<compact_str::CompactString>,
    pub order_type: compact_str::CompactString,
    pub trigger_condition: compact_str::CompactString,
    pub is_trigger: bool,
    pub reduce_only: bool,
    pub is_position_tpsl: bool,
}

impl OrderFlavor {
    /// What a statusless system order gets.
    pub fn system_default() -> OrderFlavor {
        OrderFlavor {
            tif: Some("Gtc".into()),
            order_type: "Limit".into(),
            trigger_condition: "N/A".into(),
            is_trigger: false,
            reduce_only: false,
            is_position_tpsl: false,
        }
    }

    /// The same flavor resting as Gtc: an `Ioc` order that the node reports `open` and rests.
    #[must_use]
    pub fn as_gtc(&self) -> OrderFlavor {
        OrderFlavor { tif: Some("Gtc".into()), ..self.clone() }
    }
}

/// An order as the status stream and the snapshot describe it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderInfo {
    pub side: Side,
    pub limit_px: Fixed,
    pub sz: Fixed,
    pub orig_sz: Fixed,
    pub oid: u64,
    pub timestamp: u64,
    pub trigger_px: Fixed,
    pub cloid: Option<Cloid>,
    pub flavor: Arc<OrderFlavor>,
    /// Raw JSON of a non-empty `children` array (TP/SL orders attached to this one).
    pub children: Option<Box<str>>,
}

/// A non-rejected order status. Rejections are counted but never built: they cannot touch the book.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderStatus {
    pub coin: Coin,
    pub user: Address,
    /// Status time as the node writes it, parsed.
    pub time: UnixNanos,
    pub status: Arc<str>,
    pub hash: Option<TxHash>,
    /// Raw JSON of a non-null `builder` object.
    pub builder: Option<Box<str>>,
    pub order: OrderInfo,
}

impl OrderStatus {
    /// Whether this status puts its order on the book when the same block has a `new` diff for it.
    pub fn is_opening(&self) -> bool {
        match &*self.status {
            "open" => !self.order.flavor.is_trigger,
            "triggered" => true,
            _ => false,
        }
    }
}

/// One side of a trade.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fill {
    pub coin: Coin,
    pub user: Address,
    pub px: Fixed,
    pub sz: Fixed,
    pub side: Side,
    /// Milliseconds, as the node writes it.
    pub time: i64,
    pub hash: TxHash,
    pub oid: u64,
    pub crossed: bool,
    pub tid: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip() {
        let s = "0x5eaac7c475b1fad85701f02c4e9e796a53f94bd5";
        let a = Address::parse(s).unwrap();
        assert_eq!(a.to_string(), s);
        assert_eq!(serde_json::to_string(&a).unwrap(), format!("\"{s}\""));
        assert!(Address::parse("5eaac7c475b1fad85701f02c4e9e796a53f94bd5").is_none());
        assert!(Address::parse("0x5eaa").is_none());
        assert!(Address::parse("0xzzaac7c475b1fad85701f02c4e9e796a53f94bd5").is_none());
        assert!(Address::parse("0x5eaac7c475b1fad85701f02c4e9e796a53f94bd500").is_none(), "two digits too many");
        assert!(Address::parse("0x5eaac7c475b1fad85701f02c4e9e796a53f94bd").is_none(), "an odd digit count");
        assert_eq!(Address::parse("0x5EAAC7C475B1FAD85701F02C4E9E796A53F94BD5"), Some(a), "upper case is read too");
        assert_eq!(SYSTEM_USERS[0].to_string(), format!("0x{}", "f".repeat(40)));
    }

    #[test]
    fn spot_names() {
        assert!(is_spot("@107"));
        assert!(is_spot("PURR/USDC"));
        assert!(!is_spot("BTC"));
        assert!(!is_spot("dex:COIN"));
    }
}
