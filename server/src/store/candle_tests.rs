use super::*;
use crate::node::time::parse_node_time;

fn ms(s: &str) -> i64 {
    parse_node_time(s).unwrap() / 1_000_000
}

/// (interval, a trade's time, the bucket's open, the next bucket's open): real UTC times, across minute, hour,
/// day, month, year and leap-day boundaries.
const BUCKETS: &[(Interval, &str, &str, &str)] = &[
    (Interval::M1, "2026-05-07T17:39:13.024", "2026-05-07T17:39:00", "2026-05-07T17:40:00"),
    (Interval::M1, "2024-12-31T23:59:59.999", "2024-12-31T23:59:00", "2025-01-01T00:00:00"),
    (Interval::M3, "2026-05-07T17:39:13", "2026-05-07T17:39:00", "2026-05-07T17:42:00"),
    (Interval::M3, "2026-05-07T23:59:00", "2026-05-07T23:57:00", "2026-05-08T00:00:00"),
    (Interval::M5, "2026-05-07T17:39:13", "2026-05-07T17:35:00", "2026-05-07T17:40:00"),
    (Interval::M15, "2026-05-07T17:39:13", "2026-05-07T17:30:00", "2026-05-07T17:45:00"),
    (Interval::M30, "2025-12-31T23:45:00", "2025-12-31T23:30:00", "2026-01-01T00:00:00"),
    (Interval::H1, "2024-02-29T23:00:00", "2024-02-29T23:00:00", "2024-03-01T00:00:00"),
    (Interval::H2, "2026-05-07T17:39:13", "2026-05-07T16:00:00", "2026-05-07T18:00:00"),
    (Interval::H4, "2026-05-07T17:39:13", "2026-05-07T16:00:00", "2026-05-07T20:00:00"),
    (Interval::H8, "2026-05-07T17:39:13", "2026-05-07T16:00:00", "2026-05-08T00:00:00"),
    (Interval::H12, "2026-05-07T11:59:59.999", "2026-05-07T00:00:00", "2026-05-07T12:00:00"),
    (Interval::D1, "2024-02-29T12:00:00", "2024-02-29T00:00:00", "2024-03-01T00:00:00"),
    (Interval::D1, "2025-12-31T23:59:59.999", "2025-12-31T00:00:00", "2026-01-01T00:00:00"),
    // 3d: multiples of 259,200,000 ms since the epoch (1970-01-01, -04, -07, …), across month and year ends.
    (Interval::D3, "2026-05-07T17:39:13", "2026-05-07T00:00:00", "2026-05-10T00:00:00"),
    (Interval::D3, "2024-02-29T10:00:00", "2024-02-29T00:00:00", "2024-03-03T00:00:00"),
    (Interval::D3, "2025-12-31T12:00:00", "2025-12-29T00:00:00", "2026-01-01T00:00:00"),
    (Interval::D3, "1970-01-03T23:59:59.999", "1970-01-01T00:00:00", "1970-01-04T00:00:00"),
    // 1w: epoch weeks, Thursday 00:00 UTC (2025-10-30 is the Thursday the exchange served; docs/api.md).
    (Interval::W1, "2025-10-30T00:00:00", "2025-10-30T00:00:00", "2025-11-06T00:00:00"),
    (Interval::W1, "2025-11-03T09:00:00", "2025-10-30T00:00:00", "2025-11-06T00:00:00"),
    (Interval::W1, "2026-05-07T17:39:13", "2026-05-07T00:00:00", "2026-05-14T00:00:00"),
    (Interval::W1, "2026-05-06T23:59:59.999", "2026-04-30T00:00:00", "2026-05-07T00:00:00"),
    (Interval::W1, "2025-12-31T12:00:00", "2025-12-25T00:00:00", "2026-01-01T00:00:00"),
    (Interval::W1, "2024-03-01T00:00:00", "2024-02-29T00:00:00", "2024-03-07T00:00:00"),
    (Interval::W1, "1970-01-07T23:59:59.999", "1970-01-01T00:00:00", "1970-01-08T00:00:00"),
    // 1M: UTC calendar months, 28 to 31 days.
    (Interval::Month, "2026-05-07T17:39:13", "2026-05-01T00:00:00", "2026-06-01T00:00:00"),
    (Interval::Month, "2024-02-29T23:59:59.999", "2024-02-01T00:00:00", "2024-03-01T00:00:00"),
    (Interval::Month, "2025-02-15T00:00:00", "2025-02-01T00:00:00", "2025-03-01T00:00:00"),
    (Interval::Month, "2026-12-31T23:59:59", "2026-12-01T00:00:00", "2027-01-01T00:00:00"),
    (Interval::Month, "2027-01-01T00:00:00", "2027-01-01T00:00:00", "2027-02-01T00:00:00"),
    (Interval::Month, "2026-04-30T12:00:00", "2026-04-01T00:00:00", "2026-05-01T00:00:00"),
];

#[test]
fn buckets_are_the_exchanges() {
    for &(i, at, open, next) in BUCKETS {
        let (t, close) = i.bucket(ms(at));
        assert_eq!((t, close), (ms(open), ms(next) - 1), "{} at {at}", i.as_str());
        assert_eq!(i.next(t), ms(next), "{} after {open}", i.as_str());
        assert_eq!(i.bucket(t), (t, close), "{} holds its own open", i.as_str());
        assert_eq!(i.bucket(close + 1).0, close + 1, "{} ends at T", i.as_str());
    }
    // Every interval is in the table, at least once across a boundary of its own.
    for i in Interval::ALL {
        assert!(BUCKETS.iter().any(|b| b.0 == i), "{} untested", i.as_str());
        assert_eq!(Interval::parse(i.as_str()), Some(i));
    }
    assert_eq!(Interval::parse("1H"), None);
}

#[test]
fn fixed_intervals_are_epoch_multiples_and_weeks_open_on_thursday() {
    let week = 604_800_000;
    for at in ["2026-05-07T17:39:13", "2024-02-29T00:00:00", "2030-01-01T00:00:00", "1999-12-31T23:59:59.999"] {
        let t = Interval::W1.bucket(ms(at)).0;
        assert_eq!(t % week, 0, "{at}");
        let day = time::OffsetDateTime::from_unix_timestamp(t / 1000).unwrap().weekday();
        assert_eq!(day, time::Weekday::Thursday, "{at}");
        for i in Interval::ALL {
            if let Some(len) = i.fixed_ms() {
                assert_eq!(i.bucket(ms(at)).0 % len, 0, "{} at {at}", i.as_str());
            }
        }
    }
}

fn fill(tid: u64, time: i64, px: u64, sz: u64) -> Fill {
    Fill {
        coin: "BTC".into(),
        user: Default::default(),
        px: Fixed(px),
        sz: Fixed(sz),
        side: crate::node::Side::Bid,
        time,
        hash: Default::default(),
        oid: tid,
        crossed: true,
        tid,
    }
}

#[test]
fn one_trade_per_tid_and_a_new_bucket_starts_a_new_candle() {
    let t0 = ms("2026-05-07T17:39:00");
    // Both sides of each trade.
    let fills = [fill(1, t0 + 5, 300, 10), fill(1, t0 + 5, 300, 10), fill(2, t0 + 9, 100, 5), fill(2, t0 + 9, 100, 5)];
    let trades = block_trades(fills.iter());
    assert_eq!(trades.len(), 2);
    let mut c = None;
    for tr in trades {
        assert!(push(&mut c, Interval::M1, tr));
    }
    push(&mut c, Interval::M1, Trade { time: t0 + 20, px: Fixed(200), sz: Fixed(1) });
    let got = c.unwrap();
    let want = Candle {
        t: t0,
        close_time: t0 + MINUTE - 1,
        o: Fixed(300),
        c: Fixed(200),
        h: Fixed(300),
        l: Fixed(100),
        v: FixedSum(16),
        n: 3,
    };
    assert_eq!(got, want);
    // Split anywhere, the parts merge back to the whole.
    let first = Candle::first(Interval::M1, Trade { time: t0 + 5, px: Fixed(300), sz: Fixed(10) });
    let mut rest = None;
    for tr in
        [Trade { time: t0 + 9, px: Fixed(100), sz: Fixed(5) }, Trade { time: t0 + 20, px: Fixed(200), sz: Fixed(1) }]
    {
        push(&mut rest, Interval::M1, tr);
    }
    assert_eq!(first.merged(rest.unwrap()), want);
    assert!(!push(&mut c, Interval::M1, Trade { time: t0 - 1, px: Fixed(1), sz: Fixed(1) }), "an earlier bucket");
    push(&mut c, Interval::M1, Trade { time: t0 + MINUTE, px: Fixed(7), sz: Fixed(2) });
    assert_eq!(c.unwrap().t, t0 + MINUTE);
    assert_eq!(c.unwrap().n, 1);
}
