use super::*;
use crate::node::Mode;
use crate::node::time::format_node_time;

const T0: i64 = 1_778_000_000_000 - 1_778_000_000_000 % 60_000;

/// A fills line of block `h` at `ms`, with both sides of each `(tid, coin, px, sz)`.
fn line(h: u64, ms: i64, trades: &[(u64, &str, &str, &str)]) -> String {
    let mut ev = Vec::new();
    for (tid, coin, px, sz) in trades {
        for side in ["B", "A"] {
            ev.push(format!(
                r#"["0x5eaac7c475b1fad85701f02c4e9e796a53f94bd5",{{"coin":"{coin}","px":"{px}","sz":"{sz}","side":"{side}","time":{ms},"tid":{tid},"oid":1}}]"#
            ));
        }
    }
    let t = format_node_time(ms * 1_000_000);
    format!(r#"{{"local_time":"{t}","block_time":"{t}","block_number":{h},"events":[{}]}}"#, ev.join(","))
}

fn dir_with(files: &[(&str, Vec<String>)]) -> (tempfile::TempDir, FillsDir) {
    let dir = tempfile::tempdir().unwrap();
    let hourly = dir.path().join("node_fills_by_block/hourly/20260505");
    std::fs::create_dir_all(&hourly).unwrap();
    for (name, lines) in files {
        std::fs::write(hourly.join(name), lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    }
    let fd = FillsDir { node_dir: dir.path().to_path_buf(), mode: Mode::ByBlock };
    (dir, fd)
}

fn c(t: i64, len: i64, ohlc: [u64; 4], v: u128, n: u64) -> Candle {
    let f = |x: u64| Fixed(x * 100_000_000);
    Candle {
        t,
        close_time: t + len - 1,
        o: f(ohlc[0]),
        c: f(ohlc[3]),
        h: f(ohlc[1]),
        l: f(ohlc[2]),
        v: crate::node::FixedSum(v * 100_000_000),
        n,
    }
}

#[test]
fn the_newest_candle_across_files_complete_where_they_reach_back() {
    let m = 60_000;
    let (_d, fd) = dir_with(&[
        (
            "9",
            vec![
                line(1, T0 - 5, &[(1, "BTC", "9", "1")]),
                line(2, T0 + 10, &[(2, "BTC", "10", "1"), (3, "ETH", "1", "1")]),
            ],
        ),
        (
            "10",
            vec![
                line(3, T0 + 20, &[(4, "BTC", "12", "2")]),
                line(4, T0 + 30, &[(5, "BTC", "11", "1")]),
                line(5, T0 + m, &[(6, "BTC", "50", "1")]),
            ],
        ),
    ]);
    // Below block 5: the bucket at T0 spans both files; the older one begins before it.
    let got = latest(&fd, "BTC", &[Interval::M1, Interval::H1], 5, None);
    assert_eq!(got[0].candle, Some(c(T0, m, [10, 12, 10, 11], 4, 3)));
    assert!(got[0].covered_from_ms < T0);
    let h = Interval::H1.bucket(T0).0;
    assert!(got[1].candle.is_some_and(|c| c.t == h));
    // Every block: the newest minute holds one trade, and the newest file alone reaches back before it.
    let got = latest(&fd, "BTC", &[Interval::M1], u64::MAX, None);
    assert_eq!(got[0].candle, Some(c(T0 + m, m, [50, 50, 50, 50], 1, 1)));
    assert_eq!(got[0].covered_from_ms, T0 + 20);
    // Files that begin inside the bucket: the candle is what they hold, and says where they begin.
    let (_d, fd) = dir_with(&[("10", vec![line(3, T0 + 20, &[(4, "BTC", "12", "2")])])]);
    let got = latest(&fd, "BTC", &[Interval::M1], u64::MAX, None);
    assert_eq!((got[0].candle.unwrap().n, got[0].covered_from_ms), (1, T0 + 20));
    assert_eq!(latest(&fd, "SOL", &[Interval::M1], u64::MAX, None)[0].candle, None);
}

#[test]
fn a_range_of_complete_candles_newest_first_when_clamped() {
    let m = 60_000;
    let (_d, fd) = dir_with(&[
        ("9", vec![line(1, T0 + 5, &[(1, "BTC", "9", "1")]), line(2, T0 + m + 1, &[(2, "BTC", "10", "1")])]),
        ("10", vec![line(3, T0 + m + 2, &[(3, "BTC", "12", "2")]), line(4, T0 + 3 * m, &[(4, "BTC", "11", "1")])]),
    ]);
    // The files begin inside the bucket at T0: it is left out; the minute without trades has no candle.
    let go = || false;
    let between = |interval, range, max| between(&fd, "BTC", interval, range, max, &go).unwrap();
    let all = between(Interval::M1, (0, i64::MAX), MAX_SNAPSHOT_CANDLES);
    assert_eq!(all, vec![c(T0 + m, m, [10, 12, 10, 12], 3, 2), c(T0 + 3 * m, m, [11, 11, 11, 11], 1, 1)]);
    assert_eq!(between(Interval::M1, (0, i64::MAX), 1), all[1..].to_vec());
    assert_eq!(between(Interval::M1, (T0 + m + 30, T0 + 2 * m), 10), all[..1].to_vec());
    assert!(between(Interval::M1, (T0 + 4 * m, i64::MAX), 10).is_empty());
    assert_eq!(super::between(&fd, "BTC", Interval::M1, (0, i64::MAX), 10, &|| true), None, "nobody wants it");
}

#[test]
fn a_trade_whose_sides_are_two_lines_counts_once_and_a_block_cut_counts_what_was_published() {
    // Streaming-like: each side of a trade on its own line of the same block.
    let split = |h: u64, ms: i64, tid: u64, px: &str| {
        let both = line(h, ms, &[(tid, "BTC", px, "1")]);
        let (head, events) = both.split_once("\"events\":[").unwrap();
        let events = events.strip_suffix("]}").unwrap();
        let (b, a) = events.split_once("],[").unwrap();
        [format!("{head}\"events\":[{b}]]}}"), format!("{head}\"events\":[[{a}]}}")]
    };
    let mut lines = Vec::new();
    lines.extend(split(1, T0 + 1, 1, "10"));
    lines.extend(split(2, T0 + 2, 2, "11"));
    lines.extend(split(2, T0 + 3, 3, "12"));
    let (_d, fd) = dir_with(&[("9", lines)]);
    let got = latest(&fd, "BTC", &[Interval::M1], u64::MAX, None);
    assert_eq!(got[0].candle, Some(c(T0, 60_000, [10, 12, 10, 12], 3, 3)), "three trades, once each");
    // Below block 3 with only trade 2 of block 2 published: trade 3 is counted live, not here.
    let published: FxHashSet<u64> = [2].into_iter().collect();
    let got = latest(&fd, "BTC", &[Interval::M1], 3, Some(&published));
    assert_eq!(got[0].candle, Some(c(T0, 60_000, [10, 11, 10, 11], 2, 2)));
}
