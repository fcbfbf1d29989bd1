//! Trigger orders (stop-loss and take-profit) in the simulated market: placed, canceled while they wait, and
//! triggered, written as the node writes them.
//!
//! - Placed: an `open` status whose order says `"isTrigger": true`, `"triggerCondition": "Price below 60000"`,
//!   `"tif": null` and an `orderType` such as `"Stop Market"`: the shape the capture's statuses show for a waiting
//!   TP/SL (their `children`, `$HL_FIXTURES`). No diff: a waiting order does not rest.
//! - Canceled while waiting: a `canceled` status of the same order object, no diff.
//! - Triggered: a `triggered` status (now `"isTrigger": false`, `"triggerCondition": "Triggered"`, tif `Gtc`, as
//!   the capture's snapshot shows triggered orders resting) and a `new` diff that rests it at a price of its own,
//!   which is not its `limitPx` (docs/architecture.md: a triggered stop rests at the diff's `px`).
//!
//! Their own RNG drives them, so the rest of a seed's market draws the same numbers as without them.

use std::collections::BTreeMap;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use super::Market;
use crate::node::{Side, Stream};
use crate::sim::block::BlockOut;
use crate::sim::events::{self, DiffOp};
use crate::sim::fmt::hex_string;
use crate::sim::orders::{Order, Tif, Trigger, TriggerKind};

/// Every coin's waiting trigger orders, by oid, and the RNG that moves them.
#[derive(Clone, Debug)]
pub struct Waiting {
    pub coins: Vec<BTreeMap<u64, Order>>,
    rng: Xoshiro256PlusPlus,
}

impl Waiting {
    pub fn new(coins: usize, seed: u64) -> Waiting {
        let rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x7269_6767_6572_7321);
        Waiting { coins: vec![BTreeMap::new(); coins], rng }
    }

    /// Waiting trigger orders over all coins.
    pub fn len(&self) -> usize {
        self.coins.iter().map(BTreeMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Waiting orders a coin holds before the sim fires or cancels rather than places.
const WANTED_PER_COIN: usize = 12;

impl Market {
    /// Now and then after an action on coin `c`: place, cancel or fire one of its trigger orders.
    pub(super) fn trigger_action(&mut self, c: usize, out: &mut BlockOut) -> u32 {
        if !self.waiting.rng.random_ratio(1, 8) {
            return 0;
        }
        let held = self.waiting.coins[c].len();
        let r = self.waiting.rng.random_range(0..WANTED_PER_COIN * 2);
        if held == 0 || r >= held + WANTED_PER_COIN / 2 {
            self.place_trigger(c, out);
            0
        } else if self.waiting.rng.random_ratio(1, 2) {
            self.cancel_trigger(c, out);
            0
        } else {
            self.fire_trigger(c, out)
        }
    }

    fn place_trigger(&mut self, c: usize, out: &mut BlockOut) {
        let w = &mut self.waiting.rng;
        let side = if w.random() { Side::Bid } else { Side::Ask };
        let kind = [
            TriggerKind::StopMarket,
            TriggerKind::StopLimit,
            TriggerKind::TakeProfitMarket,
            TriggerKind::TakeProfitLimit,
        ][w.random_range(0..4)];
        let (mid, lot) = (self.coins[c].mid.max(20), self.coins[c].lot);
        let away = w.random_range(1..=mid / 10);
        let trigger = Trigger { px: mid, kind, waiting: true };
        let px = if trigger.above(side) { mid + away } else { mid - away };
        // Market kinds carry a slippage limit a tenth past the trigger; limit kinds a few ticks past it.
        let slip = if matches!(kind, TriggerKind::StopMarket | TriggerKind::TakeProfitMarket) { px / 10 } else { 3 };
        let limit = match side {
            Side::Bid => px + slip,
            Side::Ask => px.saturating_sub(slip).max(1),
        };
        let sz = w.random_range(1..=lot * 2);
        let user = w.random_range(0..self.users.len() as u32);
        let cloid = w.random_ratio(1, 2).then(|| w.random());
        let hash = hex_string(&w.random::<[u8; 32]>());
        self.accounts.request(user);
        let o = Order {
            oid: self.next_oid,
            user,
            side,
            px: limit,
            sz,
            orig_sz: sz,
            timestamp: self.time_ms,
            tif: Tif::Gtc,
            reduce_only: true,
            cloid,
            trigger: Some(Trigger { px, ..trigger }),
        };
        self.next_oid += 1;
        let (coin, user) = (&self.coins[c], &self.users[o.user as usize]);
        out.event(Stream::Statuses, |b| events::status(b, &self.time, user, Some(&hash), "open", coin, &o, o.sz));
        self.waiting.coins[c].insert(o.oid, o);
    }

    fn cancel_trigger(&mut self, c: usize, out: &mut BlockOut) {
        let Some(o) = self.pick_waiting(c) else { return };
        self.accounts.request(o.user);
        let (coin, user) = (&self.coins[c], &self.users[o.user as usize]);
        out.event(Stream::Statuses, |b| events::status(b, &self.time, user, None, "canceled", coin, &o, o.sz));
    }

    /// Triggers a waiting order: it rests on its side's passive half of the book, never at its limit price.
    fn fire_trigger(&mut self, c: usize, out: &mut BlockOut) -> u32 {
        let Some(mut o) = self.pick_waiting(c) else { return 0 };
        if let Some(t) = o.trigger.as_mut() {
            t.waiting = false;
        }
        let book = &self.books[c];
        let mid = self.coins[c].mid;
        let back = self.waiting.rng.random_range(0..4);
        let rest = match o.side {
            Side::Bid => book.best(Side::Ask).unwrap_or(mid + 1).saturating_sub(1 + back).max(1),
            Side::Ask => book.best(Side::Bid).unwrap_or(mid.saturating_sub(1)) + 1 + back,
        };
        let limit = o.px;
        // One tick further from the spread when it would rest at its limit (the point is a price of its own).
        o.px = match o.side {
            _ if rest != limit => rest,
            Side::Bid => rest.saturating_sub(1).max(1),
            Side::Ask => rest + 1,
        };
        self.accounts.request(o.user);
        let (coin, user) = (&self.coins[c], &self.users[o.user as usize]);
        // The status names the order's limit price; the diff the price it rests at.
        let status_order = Order { px: limit, ..o.clone() };
        out.event(Stream::Diffs, |b| events::diff(b, user, coin, &o, DiffOp::New { sz: o.sz }));
        let (time, sz) = (&self.time, o.sz);
        out.event(Stream::Statuses, |b| events::status(b, time, user, None, "triggered", coin, &status_order, sz));
        self.books[c].insert(o);
        1
    }

    /// Takes a random waiting order of coin `c` out.
    fn pick_waiting(&mut self, c: usize) -> Option<Order> {
        let held = &mut self.waiting.coins[c];
        let k = self.waiting.rng.random_range(0..held.len().max(1));
        let oid = *held.keys().nth(k)?;
        held.remove(&oid)
    }
}
