//! What a resumed subscription reads from the store besides a coin's fills by block (`trades::coin_fills`): a
//! user's fills by block (userFills), and a candle as it stood after a height (candle), from which the blocks after
//! it replay as the live keeper counted them (`publish::store_replay`). Also the newest liquidation fills, with
//! which the `liquidations` snapshot starts after a restart.
//!
//! A candle after height h is its bucket (the one holding h's block time) up to h. The whole days, hours and
//! minutes of the bucket before h's minute are the stored 1d, 1h and 1m candles merged: every interval's buckets
//! begin on a minute, and those of a day or longer on a day, so the three tile it. The minute of h so far is its
//! blocks' trades. That is at most about 31 + 24 + 60 stored candles and one minute of blocks, whatever the
//! interval.

// redb's error is 160 bytes; these results come once per transaction, not per item.
#![allow(clippy::result_large_err)]

use super::Store;
use super::candle::{Candle, Interval, block_trades, push};
use super::fills_tables::{self, SomeFills};
use crate::node::{Address, Coin};

/// Blocks a liquidations read looks through at most (about half an hour of mainnet).
pub const LIQUIDATION_SCAN_BLOCKS: usize = 20_000;

impl Store {
    /// The fills with a `liquidation` object of the newest stored blocks below `before`, per block oldest first:
    /// at least `max` if the newest `LIQUIDATION_SCAN_BLOCKS` blocks hold them. `None` when the store keeps only
    /// followed users' fills (it would be some users' liquidations, not the market's).
    pub fn recent_liquidations(&self, before: u64, max: usize) -> Result<Option<Vec<SomeFills>>, String> {
        if self.follow.only() {
            return Ok(None);
        }
        let liquidation = |f: &str| crate::node::is_liquidation(f.as_bytes());
        let scan = (max, LIQUIDATION_SCAN_BLOCKS);
        let read = || fills_tables::newest_fills_where(&self.db.begin_read()?, before, scan, liquidation);
        read().map(Some).map_err(|e: redb::Error| format!("store read: {e}"))
    }

    /// The user's fills of each stored block of `lo..=hi` that has some, oldest first, as the node wrote them.
    pub fn user_fills_by_block(&self, user: &Address, lo: u64, hi: u64) -> Result<Vec<(u64, Vec<String>)>, String> {
        let read = || fills_tables::user_blocks(&self.db.begin_read()?, &user.0, lo, hi);
        read().map_err(|e: redb::Error| format!("store read: {e}"))
    }

    /// `coin`'s `interval` candle as it stood after block `height`: that of the bucket holding the last stored block
    /// at or below it, `None` when that bucket had no trade of the coin by then. A keeper may hold an older bucket's
    /// candle instead; either way the next trade, which is later, opens a new one, so the frames after are the same.
    pub fn candle_after(&self, coin: &Coin, interval: Interval, height: u64) -> Result<Option<Candle>, String> {
        let Some((_, t)) = self.block_near(height, false)? else { return Ok(None) };
        let (open, close) = interval.bucket(t);
        let mut candle: Option<Candle> = None;
        let mut from = open;
        let length = interval.fixed_ms().unwrap_or(i64::MAX);
        for unit in [Interval::D1, Interval::H1, Interval::M1] {
            if unit.fixed_ms().is_none_or(|u| u >= length) {
                continue;
            }
            // The units of the bucket that end before the one holding t.
            let to = unit.bucket(t).0;
            if to <= from {
                continue;
            }
            for c in self.candles(coin, unit, (from, to - 1), usize::MAX)? {
                candle = Some(match candle {
                    None => Candle { t: open, close_time: close, ..c },
                    Some(so_far) => so_far.merged(c),
                });
            }
            from = to;
        }
        let Some((lo, _)) = self.heights_of_times(from, t)? else { return Ok(candle) };
        for (_, fills) in self.coin_fills(coin, lo, height)? {
            for tr in block_trades(fills.iter()) {
                push(&mut candle, interval, tr);
            }
        }
        Ok(candle)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    use super::*;
    use crate::node::{Fill, Fixed, Side};
    use crate::state::{Step, StepData};
    use crate::store::candle::{MINUTE, Trade};
    use crate::store::{StoreMsg, Writer};

    const A: &str = "0x5eaac7c475b1fad85701f02c4e9e796a53f94bd5";
    const B: &str = "0x1624aac7c475b1fad85701f02c4e9e796a53f94b";
    /// 2026-05-05T22:57:00 UTC: the blocks cross a minute, an hour and a day.
    const T0: i64 = 1_778_021_820_000;

    /// Block `h`'s time: 7 s apart, so 300 blocks span 35 minutes.
    fn time(h: u64) -> i64 {
        T0 + h as i64 * 7_000
    }

    /// Block `h`'s trades: none every fifth block, else one or two, at prices that wander.
    fn trades(h: u64) -> Vec<(u64, Fixed)> {
        let n = [0, 1, 2, 1, 2][h as usize % 5];
        (0..n).map(|i| (h * 10 + i, Fixed::parse(&format!("{}.5", 100 + (h * 37 + i * 11) % 50)).unwrap())).collect()
    }

    /// The fills step of block `h`: both sides of each trade, A buying from B.
    fn step(h: u64) -> Arc<Step> {
        let (mut fills, mut users) = (Vec::new(), Vec::new());
        for (tid, px) in trades(h) {
            for user in [A, B] {
                let user = Address::parse(user).unwrap();
                let sz = Fixed::parse("0.25").unwrap();
                let (side, time) = (Side::Bid, time(h));
                let f = Fill {
                    coin: "BTC".into(),
                    user,
                    px,
                    sz,
                    side,
                    time,
                    hash: Default::default(),
                    oid: tid,
                    crossed: user.0[0] == 0x5e,
                    tid,
                };
                let raw = format!(
                    r#"{{"coin":"BTC","px":"{px}","sz":"0.25","side":"B","time":{time},"hash":"0x{:064x}","oid":{tid},"crossed":true,"tid":{tid}}}"#,
                    0
                );
                fills.push(f);
                users.push((user, Arc::from(raw.as_str())));
            }
        }
        let data = StepData::Fills { fills, users, generation: None, liquidations: Vec::new() };
        Arc::new(Step { seq: h, height: h, block_time: time(h) * 1_000_000, data })
    }

    fn store_of(last: u64) -> (tempfile::TempDir, Arc<Store>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("store")).unwrap();
        let mut w = Writer::new(store.clone(), None, 0);
        for h in 1..=last {
            w.take(StoreMsg::Step(step(h)));
        }
        w.take(StoreMsg::Complete(last));
        w.settle(&AtomicBool::new(false)).unwrap();
        (dir, store)
    }

    #[test]
    fn a_candle_after_a_height_counts_its_buckets_trades_up_to_that_height_only() {
        let (_dir, store) = store_of(300);
        // The writer does not trust the first step it is handed (it may be a block's tail): the store starts after.
        let oldest = store.oldest_height().unwrap().unwrap();
        assert!(oldest <= 2, "{oldest}");
        for interval in
            [Interval::M1, Interval::M5, Interval::H1, Interval::H4, Interval::D1, Interval::W1, Interval::Month]
        {
            for h in [0, 1, 2, 5, 9, 10, 57, 60, 61, 123, 180, 181, 250, 299, 300] {
                // What a keeper that counted every block up to h holds.
                let mut want = None;
                for b in oldest..=h {
                    for (_, px) in trades(b) {
                        push(&mut want, interval, Trade { time: time(b), px, sz: Fixed::parse("0.25").unwrap() });
                    }
                }
                // Every stored block here trades BTC, so the bucket of the last stored block at or below h is that of
                // the keeper's last trade.
                let got = store.candle_after(&"BTC".into(), interval, h).unwrap();
                assert_eq!(got, want, "{} after block {h}", interval.as_str());
            }
        }
        assert!(time(300) - T0 > 30 * MINUTE, "the blocks span many minutes");
    }

    #[test]
    fn a_users_fills_come_block_by_block_as_the_node_wrote_them() {
        let (_dir, store) = store_of(40);
        let a = Address::parse(A).unwrap();
        let got = store.user_fills_by_block(&a, 8, 16).unwrap();
        let heights: Vec<u64> = got.iter().map(|b| b.0).collect();
        assert_eq!(heights, [8, 9, 11, 12, 13, 14, 16], "blocks 10 and 15 have no trade");
        assert_eq!(got[1].1.len(), 2);
        assert!(got[1].1[0].starts_with(r#"{"coin":"BTC","#) && got[1].1[0].ends_with(r#""tid":90}"#), "{:?}", got[1]);
        assert_eq!(store.user_fills_by_block(&a, 16, 8).unwrap(), vec![]);
    }
}
