//! The store's tables and how their keys and values are laid out.
//!
//! - `meta`: the last block committed (`height`), its block time (`last_ms`), and where the store begins
//!   (`first_height`, `first_ms`). They change in the same transaction as the data, so after any crash they say
//!   exactly which blocks the store holds.
//! - `candles`: (coin, interval, open time) → the candle, every bucket with trades of every coin and interval.
//!   Values are varints (o, h − o, o − l, c − l, v, n): about 18 bytes for a BTC candle.
//! - `gaps`: block-time ranges (after, before) the store missed (blocks it could neither get live nor read back
//!   from the node's files): a candle overlapping one is partial.
//! - `fills_YYYYMMDD`: one table per UTC day of block time, (user, height, index in the block) → the node's fill
//!   object in its stored form (`compact`: its bytes back exactly). A user's newest fills are a reverse range per
//!   day, and retention drops whole days.

use redb::TableDefinition;

use super::candle::{Candle, Interval};
use crate::node::{Fixed, FixedSum};

pub const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
pub const CANDLES: TableDefinition<(&str, u8, i64), &[u8]> = TableDefinition::new("candles");
pub const GAPS: TableDefinition<i64, i64> = TableDefinition::new("gaps");

/// A user's fill: (user, height, index among the block's fills) → the fill object as the node wrote it.
pub type FillKey<'a> = (&'a [u8; 20], u64, u32);

/// Prefix of the per-day fills tables.
pub const FILLS_PREFIX: &str = "fills_";

/// The fills table of a UTC day (`YYYYMMDD`).
pub fn fills_table(day: u32) -> String {
    format!("{FILLS_PREFIX}{day}")
}

/// The day of a fills table's name.
pub fn fills_day(name: &str) -> Option<u32> {
    name.strip_prefix(FILLS_PREFIX)?.parse().ok()
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

fn put_varint(out: &mut Vec<u8>, mut v: u128) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(b: &mut &[u8]) -> Option<u128> {
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
        assert_eq!(fills_day(&fills_table(20_260_505)), Some(20_260_505));
        assert_eq!(fills_day("candles"), None);
    }
}
