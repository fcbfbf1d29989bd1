//! Each coin's last trades, so a `trades` subscription starts with them as the official feed does (and
//! `watch_trades` on a quiet coin returns at once).
//!
//! Kept for every coin, wanted or not (fills are a few dozen a block), per block and tagged with the feed tick of
//! that block, so a new subscriber takes exactly the trades of the ticks it will not read from the feed.

use std::collections::VecDeque;

use parking_lot::Mutex;
use rustc_hash::FxHashMap;

use super::json;
use crate::node::{Coin, Fill};

/// Fills kept per coin (both sides of a trade count); whole blocks are dropped, oldest first.
pub const FILLS_PER_COIN: usize = 100;

/// One coin's blocks with fills: (feed tick, the coin's fills of that block), oldest first.
type Ring = VecDeque<(u64, Vec<Fill>)>;

/// Per coin, its recent blocks with fills.
#[derive(Debug, Default)]
pub struct RecentTrades {
    coins: Mutex<FxHashMap<Coin, Ring>>,
}

impl RecentTrades {
    /// Remembers one block's fills (before its tick is pushed to the feed).
    pub fn remember(&self, seq: u64, fills: &[Fill]) {
        if fills.is_empty() {
            return;
        }
        // Counted first, so each coin's list is allocated once: grown fill by fill, its reallocations were most of
        // this function's time in a profile of the publisher (which runs it before the block's trades go out).
        let mut counts: FxHashMap<&Coin, usize> = FxHashMap::default();
        for f in fills {
            *counts.entry(&f.coin).or_default() += 1;
        }
        let mut by_coin: FxHashMap<&Coin, Vec<Fill>> =
            counts.into_iter().map(|(c, n)| (c, Vec::with_capacity(n))).collect();
        for f in fills {
            if let Some(list) = by_coin.get_mut(&f.coin) {
                list.push(f.clone());
            }
        }
        let mut coins = self.coins.lock();
        for (coin, list) in by_coin {
            let ring = coins.entry(coin.clone()).or_default();
            ring.push_back((seq, list));
            let mut n: usize = ring.iter().map(|b| b.1.len()).sum();
            while n > FILLS_PER_COIN && ring.len() > 1 {
                n -= ring.pop_front().map_or(0, |b| b.1.len());
            }
        }
    }

    /// A trades frame of `coin`'s remembered trades up to feed tick `seq`, oldest first; `None` without any.
    pub fn frame(&self, coin: &Coin, seq: u64) -> Option<Vec<u8>> {
        self.with_fills(coin, seq, |fills| json::trades(fills))
    }

    /// The recentTrades info answer of `coin`: the same trades, as the bare list.
    pub fn data(&self, coin: &Coin) -> Option<Vec<u8>> {
        self.with_fills(coin, u64::MAX, |fills| json::trades_data(fills))
    }

    /// `write` over the kept fills of `coin` up to feed tick `seq`, if there are any.
    fn with_fills(
        &self,
        coin: &Coin,
        seq: u64,
        write: impl FnOnce(&mut dyn Iterator<Item = &Fill>) -> Vec<u8>,
    ) -> Option<Vec<u8>> {
        let coins = self.coins.lock();
        let mut fills = coins.get(coin)?.iter().filter(|b| b.0 <= seq).flat_map(|b| b.1.iter()).peekable();
        fills.peek()?;
        Some(write(&mut fills))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::{Address, Fixed, Side, TxHash};

    fn fill(coin: &str, tid: u64) -> Fill {
        Fill {
            coin: coin.into(),
            user: Address::default(),
            px: Fixed(100),
            sz: Fixed(1),
            side: Side::Bid,
            time: 1,
            hash: TxHash::default(),
            oid: tid,
            crossed: true,
            tid,
        }
    }

    #[test]
    fn per_coin_up_to_a_tick_and_bounded() {
        let r = RecentTrades::default();
        r.remember(1, &[fill("BTC", 1), fill("ETH", 2)]);
        r.remember(2, &[fill("BTC", 3)]);
        let tids = |f: Option<Vec<u8>>| -> Vec<u64> {
            let v: serde_json::Value = serde_json::from_slice(&f.unwrap()).unwrap();
            v["data"].as_array().unwrap().iter().map(|t| t["tid"].as_u64().unwrap()).collect()
        };
        assert_eq!(tids(r.frame(&"BTC".into(), 2)), vec![1, 3]);
        assert_eq!(tids(r.frame(&"BTC".into(), 1)), vec![1]);
        assert!(r.frame(&"SOL".into(), 2).is_none());
        for s in 3..200 {
            r.remember(s, &[fill("BTC", s)]);
        }
        assert_eq!(tids(r.frame(&"BTC".into(), 200)).len(), FILLS_PER_COIN);
    }
}
