//! Candle arithmetic: the official intervals, the exchange's buckets, one candle's OHLCV from trades, and a block's
//! fills as the trades candles count (one per `tid`, paired by `node::matches`).
//!
//! A trade is one `tid` (the node writes a fill per side, both sharing it), counted once: `o` is the bucket's
//! first trade price, `c` its last, `h`/`l` the extremes, `v` the summed size (base units), `n` the trade count.
//! Prices and sizes stay fixed-point (`Fixed`, `FixedSum`).
//!
//! Buckets: every fixed-length interval, 1m to 1w, on multiples of its length since 1970-01-01 00:00 UTC, as the
//! exchange serves them (its weekly candles open on Thursday, the epoch's weekday); months on UTC calendar months.
//! The evidence and the choices are in docs/api.md ("candle").

use crate::node::matches::pair_by_tid;
use crate::node::{Fill, Fixed, FixedSum};

pub const MINUTE: i64 = 60_000;
pub const HOUR: i64 = 60 * MINUTE;
pub const DAY: i64 = 24 * HOUR;
/// About the year 8000: later times are taken as this one.
const LATEST_MS: i64 = 190_000_000_000_000;

/// The official candle intervals.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Interval {
    M1,
    M3,
    M5,
    M15,
    M30,
    H1,
    H2,
    H4,
    H8,
    H12,
    D1,
    D3,
    W1,
    Month,
}

impl Interval {
    pub const ALL: [Interval; 14] = [
        Interval::M1,
        Interval::M3,
        Interval::M5,
        Interval::M15,
        Interval::M30,
        Interval::H1,
        Interval::H2,
        Interval::H4,
        Interval::H8,
        Interval::H12,
        Interval::D1,
        Interval::D3,
        Interval::W1,
        Interval::Month,
    ];

    /// The official name (`1m` … `1M`), exactly as clients send it.
    pub fn as_str(self) -> &'static str {
        match self {
            Interval::M1 => "1m",
            Interval::M3 => "3m",
            Interval::M5 => "5m",
            Interval::M15 => "15m",
            Interval::M30 => "30m",
            Interval::H1 => "1h",
            Interval::H2 => "2h",
            Interval::H4 => "4h",
            Interval::H8 => "8h",
            Interval::H12 => "12h",
            Interval::D1 => "1d",
            Interval::D3 => "3d",
            Interval::W1 => "1w",
            Interval::Month => "1M",
        }
    }

    pub fn parse(s: &str) -> Option<Interval> {
        Interval::ALL.into_iter().find(|i| i.as_str() == s)
    }

    /// The fixed length in ms (`None` for months).
    pub fn fixed_ms(self) -> Option<i64> {
        Some(match self {
            Interval::M1 => MINUTE,
            Interval::M3 => 3 * MINUTE,
            Interval::M5 => 5 * MINUTE,
            Interval::M15 => 15 * MINUTE,
            Interval::M30 => 30 * MINUTE,
            Interval::H1 => HOUR,
            Interval::H2 => 2 * HOUR,
            Interval::H4 => 4 * HOUR,
            Interval::H8 => 8 * HOUR,
            Interval::H12 => 12 * HOUR,
            Interval::D1 => DAY,
            Interval::D3 => 3 * DAY,
            Interval::W1 => 7 * DAY,
            Interval::Month => return None,
        })
    }

    /// The bucket holding `ms`: its open time and close time (`T`, the last ms inside it). Times are clamped to
    /// 1970..8000, so a client's far-off `startTime` or `endTime` cannot overflow.
    pub fn bucket(self, ms: i64) -> (i64, i64) {
        let ms = ms.clamp(0, LATEST_MS);
        match self.fixed_ms() {
            Some(len) => {
                let t = ms.div_euclid(len) * len;
                (t, t + len - 1)
            }
            None => month_bucket(ms),
        }
    }

    /// The open time of the bucket after the one opening at `t`.
    pub fn next(self, t: i64) -> i64 {
        self.bucket(t).1 + 1
    }
}

/// The calendar month (UTC) holding `ms`.
fn month_bucket(ms: i64) -> (i64, i64) {
    let start_of = |y: i32, m: time::Month| {
        let d = time::Date::from_calendar_date(y, m, 1).unwrap_or(time::Date::MIN);
        d.midnight().assume_utc().unix_timestamp() * 1000
    };
    let Ok(dt) = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000) else { return (ms, ms) };
    let (y, m) = (dt.year(), dt.month());
    let (ny, nm) = if m == time::Month::December { (y + 1, time::Month::January) } else { (y, m.next()) };
    (start_of(y, m), start_of(ny, nm) - 1)
}

/// One trade as candles count it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Trade {
    pub time: i64,
    pub px: Fixed,
    pub sz: Fixed,
}

/// One coin's trades of one block, one per `tid`, in first-appearance order.
pub fn block_trades<'a>(fills: impl Iterator<Item = &'a Fill>) -> Vec<Trade> {
    one_per_tid(fills.map(|f| (f.tid, Trade { time: f.time, px: f.px, sz: f.sz })))
}

/// A block's (tid, trade) pairs, one trade per match (`node::matches` pairs them: both sides of a trade share its
/// `tid`, in one line by-block, in two lines of one block in streaming mode).
pub fn one_per_tid(fills: impl Iterator<Item = (u64, Trade)>) -> Vec<Trade> {
    pair_by_tid(fills, |f| f.0).into_iter().map(|m| m.first.1).collect()
}

/// One bucket's OHLCV.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Candle {
    pub t: i64,
    pub close_time: i64,
    pub o: Fixed,
    pub c: Fixed,
    pub h: Fixed,
    pub l: Fixed,
    pub v: FixedSum,
    pub n: u64,
}

impl Candle {
    /// A candle of one trade.
    pub fn first(interval: Interval, tr: Trade) -> Candle {
        let (t, close_time) = interval.bucket(tr.time);
        Candle { t, close_time, o: tr.px, c: tr.px, h: tr.px, l: tr.px, v: FixedSum::from(tr.sz), n: 1 }
    }

    fn add(&mut self, tr: Trade) {
        self.c = tr.px;
        self.h = self.h.max(tr.px);
        self.l = self.l.min(tr.px);
        self.v.add(tr.sz);
        self.n += 1;
    }

    /// This candle (of the same bucket) followed by `later`.
    #[must_use]
    pub fn merged(self, later: Candle) -> Candle {
        Candle {
            c: later.c,
            h: self.h.max(later.h),
            l: self.l.min(later.l),
            v: FixedSum(self.v.0 + later.v.0),
            n: self.n + later.n,
            ..self
        }
    }
}

/// Adds `tr` to the running candle: a trade of a later bucket starts a new one, one of an earlier bucket (never
/// seen: the node's times do not go back) is left out. Returns whether it counted.
pub fn push(candle: &mut Option<Candle>, interval: Interval, tr: Trade) -> bool {
    match candle {
        Some(c) if interval.bucket(tr.time).0 == c.t => c.add(tr),
        Some(c) if tr.time < c.t => return false,
        _ => *candle = Some(Candle::first(interval, tr)),
    }
    true
}

#[cfg(test)]
#[path = "candle_tests.rs"]
mod tests;
