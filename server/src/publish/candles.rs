//! Candles: the official intervals, UTC bucketing, one candle's OHLCV from trades, and its JSON.
//!
//! A trade is one `tid` (the node writes a fill per side, both sharing it), counted once: `o` is the bucket's
//! first trade price, `c` its last, `h`/`l` the extremes, `v` the summed size (base units), `n` the trade count.
//! Prices and sizes stay fixed-point (`Fixed`, `FixedSum`) and are written as the node writes decimals.
//!
//! Buckets are on UTC boundaries of the trade's `time`: minutes to days (and 3d) on multiples of their length
//! since the Unix epoch, weeks from Monday 00:00 UTC, months on calendar months. The official alignment of 3d, 1w
//! and 1M is not documented (../shared/docs/hl-user-channels.md §4); this is the documented choice (docs/api.md).

use rustc_hash::FxHashSet;
use serde::Serialize;

use crate::node::{Fill, Fixed, FixedSum};

const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;
/// About the year 8000: later times are taken as this one.
const LATEST_MS: i64 = 190_000_000_000_000;
/// 1970-01-05, the first Monday after the epoch (a Thursday).
const FIRST_MONDAY: i64 = 4 * DAY;

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
    fn fixed_ms(self) -> Option<i64> {
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
                let origin = if self == Interval::W1 { FIRST_MONDAY } else { 0 };
                let t = (ms - origin).div_euclid(len) * len + origin;
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
    let mut seen = FxHashSet::default();
    fills.filter(|f| seen.insert(f.tid)).map(|f| Trade { time: f.time, px: f.px, sz: f.sz }).collect()
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

/// The official candle object.
#[derive(Serialize)]
struct CandleOut<'a> {
    t: i64,
    #[serde(rename = "T")]
    close_time: i64,
    s: &'a str,
    i: &'static str,
    o: Fixed,
    c: Fixed,
    h: Fixed,
    l: Fixed,
    v: String,
    n: u64,
}

fn out<'a>(coin: &'a str, interval: Interval, c: &Candle) -> CandleOut<'a> {
    CandleOut {
        t: c.t,
        close_time: c.close_time,
        s: coin,
        i: interval.as_str(),
        o: c.o,
        c: c.c,
        h: c.h,
        l: c.l,
        v: c.v.to_string(),
        n: c.n,
    }
}

/// `{"t","T","s","i","o","c","h","l","v","n"}`: `s` is the coin as subscribed (the books' own name).
pub fn candle_object(coin: &str, interval: Interval, c: &Candle) -> serde_json::Value {
    serde_json::to_value(out(coin, interval, c)).unwrap_or_default()
}

/// `{"channel":"candle","data":{…}}`.
pub fn candle_frame(coin: &str, interval: Interval, c: &Candle) -> Vec<u8> {
    let mut bytes = b"{\"channel\":\"candle\",\"data\":".to_vec();
    // Serializing a plain struct into a Vec cannot fail.
    serde_json::to_writer(&mut bytes, &out(coin, interval, c)).expect("candle serialize");
    bytes.push(b'}');
    bytes
}

#[cfg(test)]
#[path = "candles_tests.rs"]
mod tests;
