use super::*;
use crate::node::time::parse_node_time;

fn ms(s: &str) -> i64 {
    parse_node_time(s).unwrap() / 1_000_000
}

#[test]
fn buckets_on_utc_boundaries() {
    let at = ms("2026-05-07T17:39:13.024");
    let b = |i: Interval| i.bucket(at);
    assert_eq!(b(Interval::M1), (ms("2026-05-07T17:39:00"), ms("2026-05-07T17:40:00") - 1));
    assert_eq!(b(Interval::M15).0, ms("2026-05-07T17:30:00"));
    assert_eq!(b(Interval::H4), (ms("2026-05-07T16:00:00"), ms("2026-05-07T20:00:00") - 1));
    assert_eq!(b(Interval::H12).0, ms("2026-05-07T12:00:00"));
    assert_eq!(b(Interval::D1).0, ms("2026-05-07T00:00:00"));
    // 3d on multiples of three days since 1970-01-01; weeks from Monday (2026-05-04 is one).
    assert_eq!(b(Interval::D3).0 % (3 * DAY), 0);
    assert_eq!(b(Interval::W1), (ms("2026-05-04T00:00:00"), ms("2026-05-11T00:00:00") - 1));
    assert_eq!(Interval::W1.bucket(ms("2026-05-04T00:00:00")).0, ms("2026-05-04T00:00:00"));
    assert_eq!(Interval::W1.bucket(ms("2026-05-03T23:59:59.999")).0, ms("2026-04-27T00:00:00"));
    assert_eq!(b(Interval::Month), (ms("2026-05-01T00:00:00"), ms("2026-06-01T00:00:00") - 1));
    assert_eq!(Interval::Month.bucket(ms("2026-12-31T23:59:59")).1, ms("2027-01-01T00:00:00") - 1);
    assert_eq!(Interval::Month.next(ms("2026-02-01T00:00:00")), ms("2026-03-01T00:00:00"));
    for i in Interval::ALL {
        assert_eq!(Interval::parse(i.as_str()), Some(i));
        let (t, end) = i.bucket(at);
        assert!(t <= at && at <= end && i.bucket(end + 1).0 == end + 1, "{i:?}");
    }
    assert_eq!(Interval::parse("1H"), None);
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
    let json: serde_json::Value = serde_json::from_slice(&candle_frame("@107", Interval::M1, &got)).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"channel": "candle", "data": {"t": t0, "T": t0 + MINUTE - 1, "s": "@107", "i": "1m",
            "o": "0.000003", "c": "0.000002", "h": "0.000003", "l": "0.000001", "v": "0.00000016", "n": 3}})
    );
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
