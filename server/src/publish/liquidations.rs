//! The `liquidations` channel, hlbook's own (the official API has none: one would follow every wallet): every
//! fill the node writes with a `liquidation` object, market-wide, as `{user, fill}` with the fill object verbatim
//! (its `liquidation` names the liquidated user, the mark price and the method). Both sides of a liquidation's
//! trades carry the object (ccxt 4.5.90's hyperliquid `handle_my_liquidations`: "liquidator fills carry the
//! liquidated counterparty here"; GoldRush sells such a stream, `liquidationFills`,
//! https://goldrush.dev/docs/api-reference/hyperliquid-websocket/liquidation-fills), so an entry whose `user` is
//! `fill.liquidation.liquidatedUser` is the liquidated side.
//!
//! A new subscriber first gets the recent ones (`isSnapshot: true`, up to `KEPT` fills, oldest first, possibly
//! none), kept in memory since start and tagged with the feed tick that carried them, so it takes exactly those
//! of the ticks it will not read from the feed. Liquidations are rare, so their frames are built whether anybody
//! is subscribed or not: a `since` resume always finds them on the feed.

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::node::Address;

/// Liquidation fills kept for snapshots; whole ticks are dropped, oldest first.
pub const KEPT: usize = 100;

/// A liquidation fill: whose side, and the fill object as written.
pub type Entry = (Address, Arc<str>);

/// The recent liquidation fills, per feed tick, oldest first.
#[derive(Debug, Default)]
pub struct RecentLiquidations {
    ticks: Mutex<VecDeque<(u64, Vec<Entry>)>>,
}

impl RecentLiquidations {
    /// Remembers one tick's liquidation fills (before the tick is pushed to the feed).
    pub fn remember(&self, seq: u64, list: &[Entry]) {
        if list.is_empty() {
            return;
        }
        let mut ticks = self.ticks.lock();
        ticks.push_back((seq, list.to_vec()));
        let mut n: usize = ticks.iter().map(|t| t.1.len()).sum();
        while n > KEPT && ticks.len() > 1 {
            n -= ticks.pop_front().map_or(0, |t| t.1.len());
        }
    }

    /// The snapshot frame of the fills remembered up to feed tick `seq`.
    pub fn snapshot(&self, seq: u64) -> Vec<u8> {
        let ticks = self.ticks.lock();
        let list: Vec<&Entry> = ticks.iter().filter(|t| t.0 <= seq).flat_map(|t| t.1.iter()).collect();
        frame(list.into_iter(), true)
    }
}

/// `{"channel":"liquidations","data":{["isSnapshot":true,]"liquidations":[{"user":…,"fill":{…}}…]}}`.
pub fn frame<'a>(list: impl Iterator<Item = &'a Entry>, snapshot: bool) -> Vec<u8> {
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

    fn entry(n: u8) -> Entry {
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
        r.remember(3, &[entry(1)]);
        r.remember(5, &[entry(2), entry(3)]);
        let upto3 = parsed(&r.snapshot(4));
        assert_eq!(upto3["data"]["liquidations"].as_array().unwrap().len(), 1, "tick 5 is read from the feed");
        for seq in 6..(6 + KEPT as u64) {
            r.remember(seq, &[entry((seq % 200) as u8)]);
        }
        let all = parsed(&r.snapshot(u64::MAX));
        let list = all["data"]["liquidations"].as_array().unwrap();
        assert_eq!(list.len(), KEPT);
        assert_eq!(list.last().unwrap()["fill"]["tid"], u64::from(((5 + KEPT as u64) % 200) as u8));
    }
}
