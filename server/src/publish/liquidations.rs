//! The `liquidations` channel, hlbook's own (the official API has none: one would follow every wallet): every
//! fill the node writes with a `liquidation` object, market-wide, as `{user, fill}` with the fill object verbatim
//! (its `liquidation` names the liquidated user, the mark price and the method). Both sides of a liquidation's
//! trades carry the object (ccxt 4.5.90's hyperliquid `handle_my_liquidations`: "liquidator fills carry the
//! liquidated counterparty here"; GoldRush sells such a stream, `liquidationFills`,
//! https://goldrush.dev/docs/api-reference/hyperliquid-websocket/liquidation-fills), so an entry whose `user` is
//! `fill.liquidation.liquidatedUser` is the liquidated side.
//!
//! A new subscriber first gets the recent ones (`isSnapshot: true`, up to `KEPT` fills, oldest first, possibly
//! none), kept in memory and tagged with the feed tick that carried them, so it takes exactly those of the ticks it
//! will not read from the feed. After a restart the history store (when it keeps every user's fills) gives those
//! of the blocks just before the first one published, once it holds them all (`seed_from_store`). Liquidations are
//! rare, so their frames are built whether anybody is subscribed or not: a `since` resume always finds them on the
//! feed.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::node::Address;
use crate::node::event::HexBytes;
use crate::store::Store;

/// Liquidation fills kept for snapshots; whole ticks are dropped, oldest first.
pub const KEPT: usize = 100;

/// A liquidation fill: whose side, and the fill object as written.
pub type LiquidationFill = (Address, Arc<str>);

/// The recent liquidation fills, per feed tick (seeded ones: tick 0), oldest first, with their block heights.
#[derive(Debug, Default)]
pub struct RecentLiquidations {
    ticks: Mutex<VecDeque<Kept>>,
    /// The height of the first fills step published (0: none yet): seeds come from the blocks below it.
    first_height: AtomicU64,
}

#[derive(Debug)]
struct Kept {
    seq: u64,
    height: u64,
    list: Vec<LiquidationFill>,
}

impl RecentLiquidations {
    /// Remembers one fills step's liquidation fills, if any (before its tick is pushed to the feed).
    pub fn remember(&self, seq: u64, height: u64, list: &[LiquidationFill]) {
        let _ = self.first_height.compare_exchange(0, height, Relaxed, Relaxed);
        if list.is_empty() {
            return;
        }
        let mut ticks = self.ticks.lock();
        ticks.push_back(Kept { seq, height, list: list.to_vec() });
        trim(&mut ticks);
    }

    /// Puts the fills of blocks below everything remembered before it, oldest first.
    fn seed(&self, blocks: Vec<(u64, Vec<LiquidationFill>)>) -> usize {
        let mut ticks = self.ticks.lock();
        let below = ticks.front().map_or(u64::MAX, |k| k.height);
        let mut n = 0;
        for (height, list) in blocks.into_iter().rev().filter(|b| b.0 < below) {
            n += list.len();
            ticks.push_front(Kept { seq: 0, height, list });
        }
        trim(&mut ticks);
        n
    }

    /// The snapshot frame of the fills remembered up to feed tick `seq`.
    pub fn snapshot(&self, seq: u64) -> Vec<u8> {
        let ticks = self.ticks.lock();
        let list: Vec<&LiquidationFill> = ticks.iter().filter(|k| k.seq <= seq).flat_map(|k| k.list.iter()).collect();
        frame(list.into_iter(), true)
    }
}

/// Drops whole blocks, oldest first, while more than `KEPT` fills are kept.
fn trim(ticks: &mut VecDeque<Kept>) {
    let mut n: usize = ticks.iter().map(|k| k.list.len()).sum();
    while n > KEPT && ticks.len() > 1 {
        n -= ticks.pop_front().map_or(0, |k| k.list.len());
    }
}

/// After a restart: once the store holds every block below the first one published (waiting `timeout` at most),
/// its newest liquidation fills below it go before those remembered live. Nothing when the store is new, keeps only
/// followed users' fills, or cannot catch up in time (the snapshot never skips blocks). Returns the fills seeded.
pub fn seed_from_store(recent: &RecentLiquidations, store: &Store, timeout: Duration) -> Result<usize, String> {
    if store.height() == 0 {
        return Ok(0);
    }
    let deadline = Instant::now() + timeout;
    let first = loop {
        match recent.first_height.load(Relaxed) {
            0 if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(200)),
            0 => return Err("nothing was published in time".into()),
            h => break h,
        }
    };
    if !store.wait_for(first - 1, deadline.saturating_duration_since(Instant::now())) {
        return Err(format!("the store did not reach height {} in time", first - 1));
    }
    let Some(blocks) = store.recent_liquidations(first, KEPT)? else { return Ok(0) };
    let blocks =
        blocks.into_iter().map(|(h, l)| (h, l.into_iter().map(|(u, f)| (HexBytes(u), Arc::from(f))).collect()));
    Ok(recent.seed(blocks.collect()))
}

/// `{"channel":"liquidations","data":{["isSnapshot":true,]"liquidations":[{"user":…,"fill":{…}}…]}}`.
pub fn frame<'a>(list: impl Iterator<Item = &'a LiquidationFill>, snapshot: bool) -> Vec<u8> {
    let mut out = b"{\"channel\":\"liquidations\",\"data\":{".to_vec();
    if snapshot {
        out.extend_from_slice(b"\"isSnapshot\":true,");
    }
    out.extend_from_slice(b"\"liquidations\":[");
    for (i, (user, fill)) in list.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(format!("{{\"user\":\"{user}\",\"fill\":").as_bytes());
        out.extend_from_slice(fill.as_bytes());
        out.push(b'}');
    }
    out.extend_from_slice(b"]}}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(n: u8) -> LiquidationFill {
        let user = Address::parse(&format!("0x{}", format!("{n:02x}").repeat(20))).unwrap();
        (
            user,
            Arc::from(format!(
                r#"{{"tid":{n},"liquidation":{{"liquidatedUser":"{user}","markPx":"1.0","method":"market"}}}}"#
            )),
        )
    }

    fn parsed(bytes: &[u8]) -> serde_json::Value {
        serde_json::from_slice(bytes).expect("valid JSON")
    }

    #[test]
    fn frames_carry_user_and_fill_verbatim() {
        let list = [entry(1), entry(2)];
        let live = parsed(&frame(list.iter(), false));
        assert_eq!(live["channel"], "liquidations");
        assert!(live["data"].get("isSnapshot").is_none());
        assert_eq!(live["data"]["liquidations"][1]["user"], list[1].0.to_string());
        assert_eq!(live["data"]["liquidations"][1]["fill"]["tid"], 2);
        let empty = parsed(&RecentLiquidations::default().snapshot(u64::MAX));
        assert_eq!(empty["data"]["isSnapshot"], true);
        assert_eq!(empty["data"]["liquidations"], serde_json::json!([]));
    }

    #[test]
    fn snapshot_takes_the_ticks_up_to_the_cursor_and_keeps_the_newest() {
        let r = RecentLiquidations::default();
        r.remember(3, 10, &[entry(1)]);
        r.remember(5, 12, &[entry(2), entry(3)]);
        let upto3 = parsed(&r.snapshot(4));
        assert_eq!(upto3["data"]["liquidations"].as_array().unwrap().len(), 1, "tick 5 is read from the feed");
        for seq in 6..(6 + KEPT as u64) {
            r.remember(seq, 100 + seq, &[entry((seq % 200) as u8)]);
        }
        let all = parsed(&r.snapshot(u64::MAX));
        let list = all["data"]["liquidations"].as_array().unwrap();
        assert_eq!(list.len(), KEPT);
        assert_eq!(list.last().unwrap()["fill"]["tid"], u64::from(((5 + KEPT as u64) % 200) as u8));
    }

    #[test]
    fn seeds_go_before_the_live_ones_and_only_from_below_them() {
        let r = RecentLiquidations::default();
        r.remember(1, 50, &[]);
        assert_eq!(r.first_height.load(Relaxed), 50, "the first fills step's height, liquidations or not");
        r.remember(2, 52, &[entry(9)]);
        assert_eq!(r.seed(vec![(40, vec![entry(1)]), (45, vec![entry(2)]), (52, vec![entry(3)])]), 2);
        let tids: Vec<u64> = parsed(&r.snapshot(1))["data"]["liquidations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["fill"]["tid"].as_u64().unwrap())
            .collect();
        assert_eq!(tids, [1, 2], "seeds are older than any tick; block 52 is the live one's");
        assert_eq!(parsed(&r.snapshot(2))["data"]["liquidations"].as_array().unwrap().len(), 3);
    }
}
