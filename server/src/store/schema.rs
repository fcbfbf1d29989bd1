//! The store's tables and how their keys and values are laid out.
//!
//! - `meta`: the last block committed (`height`), its block time (`last_ms`), and where the store begins
//!   (`first_height`, `first_ms`). They change in the same transaction as the data, so after any crash they say
//!   exactly which blocks the store holds.
//! - `candles`: (coin, interval, open time) → the candle, every bucket with trades of every coin and interval.
//!   Values are varints (o, h − o, o − l, c − l, v, n): about 18 bytes for a BTC candle.
//! - `gaps`: block-time ranges (after, before) the store missed (blocks it could neither get live nor read back
//!   from the node's files): a candle overlapping one is partial.
//! - `fill_blocks_YYYYMMDD`: one table per UTC day of block time, height → that block's fills (`blocks`: every
//!   user's fill objects, compressed, their bytes back exactly). Keyed by height, so the bulk is appended in order
//!   and B-tree leaves fill up (keyed by user, they ran half full).
//! - `fill_users_YYYYMMDD`: the same day's index, (user key, height) → nothing: which blocks hold a user's fills,
//!   so a user's newest fills are a reverse range per day, then one block read each. The user key is the
//!   address's first 8 bytes (a rare collision costs one block read: fills are matched on the whole address).
//!   Retention empties expired days' tables a bounded number of entries per commit.
//!
//! - `followed` (`follow`): the users whose fills a store in followed mode keeps, address → the height up to which
//!   their older fills were read back (0: not yet). A table added beside the others, which older versions do not
//!   open: the layout of the rest is unchanged, so `meta.schema` stays 2.
//!
//! - `user_events_YYYYMMDD` (`user_events`): one table per UTC day of the entry's time, (user, kind, time ms,
//!   height, seq) → an entry's bytes as an info answer serves it: funding payments and ledger updates from
//!   `misc_events` (kinds 0 and 1; 2 is a user's TWAP history), with the per-stream meta keys
//!   `<stream>_height` and `<stream>_first_ms`, and the tables `user_event_gaps` and `user_event_since`. Added
//!   beside the others as `followed` was: older versions never open them and their day tables' prefix is not a
//!   fills prefix, the rest of the layout is unchanged, so `meta.schema` stays 2 and a store written before them
//!   opens as it is (its entries start from what the node's files still hold).
//!
//! `meta.schema` is the layout's version: a store with fills in another layout is refused on open (`Store::open`).

use redb::TableDefinition;

use super::candle::{Candle, Interval};
use crate::node::{Fixed, FixedSum};

pub const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
pub const CANDLES: TableDefinition<(&str, u8, i64), &[u8]> = TableDefinition::new("candles");
pub const GAPS: TableDefinition<i64, i64> = TableDefinition::new("gaps");

/// The layout this version writes (`meta.schema`). 1 (never written down) kept fills per user, `fills_YYYYMMDD`.
pub const SCHEMA: u64 = 2;

/// Prefix of the fills tables of schema 1, to recognise a store written by an earlier version.
pub const OLD_FILLS_PREFIX: &str = "fills_";

/// Prefix of the per-day user entry tables (`user_events`).
pub const EVENTS_PREFIX: &str = "user_events_";

/// A day's blocks of fills: height → `blocks::encode` of the block's fills.
pub type BlocksDef<'a> = redb::TableDefinition<'a, u64, &'static [u8]>;
/// A day's user index: (user key, height) → ().
pub type UsersDef<'a> = redb::TableDefinition<'a, (u64, u64), ()>;

/// The two kinds of per-day fills tables.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FillsKind {
    Blocks,
    Users,
}

impl FillsKind {
    fn prefix(self) -> &'static str {
        match self {
            FillsKind::Blocks => "fill_blocks_",
            FillsKind::Users => "fill_users_",
        }
    }
}

/// The fills table of a kind and a UTC day (`YYYYMMDD`).
pub fn fills_table(kind: FillsKind, day: u32) -> String {
    format!("{}{day}", kind.prefix())
}

/// The kind and day of a fills table's name.
pub fn fills_day(name: &str) -> Option<(FillsKind, u32)> {
    [FillsKind::Blocks, FillsKind::Users]
        .into_iter()
        .find_map(|k| Some((k, name.strip_prefix(k.prefix())?.parse().ok()?)))
}

/// Whether a table is a schema-1 fills table (`fills_YYYYMMDD`).
pub fn old_fills_table(name: &str) -> bool {
    name.strip_prefix(OLD_FILLS_PREFIX).is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// A user's key in the index: the address's first 8 bytes.
pub fn user_key(user: &[u8; 20]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&user[..8]);
    u64::from_be_bytes(b)
}

/// `YYYYMMDD` of a block time (ms, UTC).
pub fn day_of(ms: i64) -> u32 {
    let Ok(t) = time::OffsetDateTime::from_unix_timestamp(ms.div_euclid(1000)) else { return 0 };
    t.year().max(0) as u32 * 10_000 + u32::from(u8::from(t.month())) * 100 + u32::from(t.day())
}

/// The interval's byte in candle keys (its place in `Interval::ALL`).
pub fn interval_byte(i: Interval) -> u8 {
    Interval::ALL.iter().position(|x| *x == i).unwrap_or(0) as u8
}

pub fn put_varint(out: &mut Vec<u8>, mut v: u128) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub fn get_varint(b: &mut &[u8]) -> Option<u128> {
    let mut v: u128 = 0;
    for shift in (0..128).step_by(7) {
        let (&byte, rest) = b.split_first()?;
        *b = rest;
        v |= u128::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(v);
        }
    }
    None
}

/// A candle's value (its open time is in the key).
pub fn encode_candle(c: &Candle) -> Vec<u8> {
    let mut out = Vec::with_capacity(24);
    for v in [c.o.0, c.h.0.saturating_sub(c.o.0), c.o.0.saturating_sub(c.l.0), c.c.0.saturating_sub(c.l.0)] {
        put_varint(&mut out, u128::from(v));
    }
    put_varint(&mut out, c.v.0);
    put_varint(&mut out, u128::from(c.n));
    out
}

/// The candle of `interval` opening at `t` from its value; `None` for a value this version did not write.
pub fn decode_candle(interval: Interval, t: i64, mut b: &[u8]) -> Option<Candle> {
    let mut next = || get_varint(&mut b).and_then(|v| u64::try_from(v).ok());
    let (o, up, down, from_low) = (next()?, next()?, next()?, next()?);
    let v = get_varint(&mut b)?;
    let n = u64::try_from(get_varint(&mut b)?).ok()?;
    let l = o.checked_sub(down)?;
    Some(Candle {
        t,
        close_time: interval.bucket(t).1,
        o: Fixed(o),
        h: Fixed(o.checked_add(up)?),
        l: Fixed(l),
        c: Fixed(l.checked_add(from_low)?),
        v: FixedSum(v),
        n,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candles_round_trip_and_days_name_tables() {
        let c = Candle {
            t: 1_778_000_040_000,
            close_time: 1_778_000_099_999,
            o: Fixed(8_130_800_000_000),
            c: Fixed(8_130_750_000_000),
            h: Fixed(8_131_100_000_000),
            l: Fixed(8_130_500_000_000),
            v: FixedSum(1_427_847_000),
            n: 114,
        };
        let bytes = encode_candle(&c);
        assert!(bytes.len() <= 28, "{} bytes", bytes.len());
        assert_eq!(decode_candle(Interval::M1, c.t, &bytes), Some(c));
        assert_eq!(decode_candle(Interval::M1, c.t, &bytes[..3]), None);
        assert_eq!(day_of(1_709_251_199_999), 20_240_229, "the leap day's last ms");
        for k in [FillsKind::Blocks, FillsKind::Users] {
            assert_eq!(fills_day(&fills_table(k, 20_260_505)), Some((k, 20_260_505)));
        }
        assert_eq!(fills_day("candles"), None);
        assert!(old_fills_table("fills_20260505") && !old_fills_table("fill_blocks_20260505"));
    }
}
