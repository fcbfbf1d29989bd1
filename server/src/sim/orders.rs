//! The simulator's own L4 book of one coin: price levels in time priority plus an oid index.
//!
//! Deliberately independent of `crate::book` (a plain BTreeMap of VecDeques): the server's engine is tested
//! against this, so sharing code would let one bug hide in both.

use std::collections::{BTreeMap, VecDeque};

use rustc_hash::FxHashMap;

use crate::node::Side;

/// The order time-in-force values the simulator uses.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Tif {
    Alo,
    Gtc,
    Ioc,
}

impl Tif {
    pub fn as_str(self) -> &'static str {
        match self {
            Tif::Alo => "Alo",
            Tif::Gtc => "Gtc",
            Tif::Ioc => "Ioc",
        }
    }
}

/// What kind of trigger order, as `orderType` names it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum TriggerKind {
    StopMarket,
    StopLimit,
    TakeProfitMarket,
    TakeProfitLimit,
}

impl TriggerKind {
    pub fn order_type(self) -> &'static str {
        match self {
            TriggerKind::StopMarket => "Stop Market",
            TriggerKind::StopLimit => "Stop Limit",
            TriggerKind::TakeProfitMarket => "Take Profit Market",
            TriggerKind::TakeProfitLimit => "Take Profit Limit",
        }
    }

    fn is_stop(self) -> bool {
        matches!(self, TriggerKind::StopMarket | TriggerKind::StopLimit)
    }
}

/// An order's trigger: its price in ticks, its kind, and whether it still waits.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Trigger {
    pub px: u64,
    pub kind: TriggerKind,
    pub waiting: bool,
}

impl Trigger {
    /// Fires when the price goes above `px` (a buy stop, a sell take-profit) rather than below.
    pub fn above(self, side: Side) -> bool {
        self.kind.is_stop() == (side == Side::Bid)
    }
}

/// An order as the simulator knows it: price in ticks, sizes in lots, user as an index into the user pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Order {
    pub oid: u64,
    pub user: u32,
    pub side: Side,
    pub px: u64,
    pub sz: u64,
    pub orig_sz: u64,
    /// Milliseconds since the Unix epoch.
    pub timestamp: u64,
    pub tif: Tif,
    pub reduce_only: bool,
    pub cloid: Option<u128>,
    /// A trigger order's trigger (placed, canceled and fired in `market::triggers`); `None` for a plain limit
    /// order.
    pub trigger: Option<Trigger>,
}

#[derive(Clone, Debug, Default)]
pub struct SimBook {
    bids: BTreeMap<u64, VecDeque<u64>>,
    asks: BTreeMap<u64, VecDeque<u64>>,
    orders: FxHashMap<u64, Order>,
}

impl SimBook {
    pub fn len(&self) -> usize {
        self.orders.len()
    }

    pub fn is_empty(&self) -> bool {
        self.orders.is_empty()
    }

    pub fn get(&self, oid: u64) -> Option<&Order> {
        self.orders.get(&oid)
    }

    fn side(&self, side: Side) -> &BTreeMap<u64, VecDeque<u64>> {
        match side {
            Side::Bid => &self.bids,
            Side::Ask => &self.asks,
        }
    }

    fn side_mut(&mut self, side: Side) -> &mut BTreeMap<u64, VecDeque<u64>> {
        match side {
            Side::Bid => &mut self.bids,
            Side::Ask => &mut self.asks,
        }
    }

    /// Rests `o` at the back of its level.
    pub fn insert(&mut self, o: Order) {
        self.side_mut(o.side).entry(o.px).or_default().push_back(o.oid);
        self.orders.insert(o.oid, o);
    }

    pub fn remove(&mut self, oid: u64) -> Option<Order> {
        let o = self.orders.remove(&oid)?;
        let levels = self.side_mut(o.side);
        if let Some(level) = levels.get_mut(&o.px) {
            level.retain(|&x| x != oid);
            if level.is_empty() {
                levels.remove(&o.px);
            }
        }
        Some(o)
    }

    pub fn set_size(&mut self, oid: u64, sz: u64) {
        if let Some(o) = self.orders.get_mut(&oid) {
            o.sz = sz;
        }
    }

    /// Best price of a side.
    pub fn best(&self, side: Side) -> Option<u64> {
        match side {
            Side::Bid => self.bids.keys().next_back().copied(),
            Side::Ask => self.asks.keys().next().copied(),
        }
    }

    pub fn level_count(&self, side: Side) -> usize {
        self.side(side).len()
    }

    /// The `k`-th level from the best one (0 = best): its oids in time priority.
    pub fn level(&self, side: Side, k: usize) -> Option<&VecDeque<u64>> {
        match side {
            Side::Bid => self.bids.values().rev().nth(k),
            Side::Ask => self.asks.values().nth(k),
        }
    }

    /// The first order in time priority at the best price.
    pub fn front(&self, side: Side) -> Option<&Order> {
        self.level(side, 0)?.front().and_then(|oid| self.orders.get(oid))
    }

    /// Every order of a side, best price first, time priority within a price.
    pub fn orders(&self, side: Side) -> impl Iterator<Item = &Order> + '_ {
        let levels: Box<dyn Iterator<Item = &VecDeque<u64>>> = match side {
            Side::Bid => Box::new(self.bids.values().rev()),
            Side::Ask => Box::new(self.asks.values()),
        };
        levels.flat_map(|l| l.iter()).filter_map(|oid| self.orders.get(oid))
    }
}
