//! One coin's L4 book: every resting order, in time priority within its price level.
//!
//! Orders live in a slab and each level is an intrusive doubly linked list through it, so `remove` and
//! `insertBefore` are O(1) given the oid, and time priority is the list order. Levels sit in a `BTreeMap` per side
//! with a running size and count, so the best level and the top N levels are read without touching orders: an L2
//! build costs O(levels it returns), not O(orders in the book). Every level change is also passed to `buckets`,
//! which keeps the coarse L2 shapes someone wants.

use std::collections::BTreeMap;
use std::sync::Arc;

use rustc_hash::FxHashMap;
use slab::Slab;

use super::buckets::Buckets;
use super::triggers::Triggers;
use crate::node::{Address, Cloid, Coin, Fixed, FixedSum, OrderFlavor, Side};

/// A resting order. Fields are what the snapshot and `l4Book` frames carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestingOrder {
    pub oid: u64,
    pub user: Address,
    pub side: Side,
    /// Resting price: the diff's `px` (or the snapshot's `limitPx`).
    pub px: Fixed,
    pub sz: Fixed,
    pub orig_sz: Fixed,
    pub limit_px: Fixed,
    pub trigger_px: Fixed,
    pub timestamp: u64,
    pub cloid: Option<Cloid>,
    pub flavor: Arc<OrderFlavor>,
}

impl RestingOrder {
    /// `user`'s order `o` resting at its `limitPx`: a snapshot's order, or a waiting trigger order shown the way
    /// resting ones are.
    pub fn at_limit(user: Address, o: &crate::node::OrderInfo) -> RestingOrder {
        RestingOrder {
            oid: o.oid,
            user,
            side: o.side,
            px: o.limit_px,
            sz: o.sz,
            orig_sz: o.orig_sz,
            limit_px: o.limit_px,
            trigger_px: o.trigger_px,
            timestamp: o.timestamp,
            cloid: o.cloid,
            flavor: o.flavor.clone(),
        }
    }
}

/// The fields of a resting order that do not place it: what an opening status adds to its `new` diff.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Details {
    pub orig_sz: Fixed,
    pub limit_px: Fixed,
    pub trigger_px: Fixed,
    pub timestamp: u64,
    pub cloid: Option<Cloid>,
    pub flavor: Arc<OrderFlavor>,
}

const NIL: u32 = u32::MAX;

#[derive(Clone, Debug)]
struct Node {
    order: RestingOrder,
    prev: u32,
    next: u32,
}

/// Running totals of one price level, plus the ends of its time-priority list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Level {
    pub sz: FixedSum,
    pub n: u32,
    head: u32,
    tail: u32,
}

/// Why a diff did not fit the book.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Misfit {
    /// `update`/`remove` of an oid that is not resting.
    UnknownOid,
    /// `new` for an oid already resting (the old one is replaced).
    DuplicateOid,
    /// `update`/`remove` naming a side or price other than where the order rests.
    WrongPlace,
    /// `update` whose `origSz` is not the resting size (the new size is applied anyway).
    SizeMismatch,
}

/// Where a new order went.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    Back,
    BeforeAnchor,
    /// `insertBefore` named an oid not resting in that level: placed at the back.
    AnchorMissing,
}

#[derive(Clone, Debug)]
pub struct CoinBook {
    coin: Coin,
    slab: Slab<Node>,
    by_oid: FxHashMap<u64, u32>,
    levels: [BTreeMap<Fixed, Level>; 2],
    /// Raw `children` JSON of the few orders that have TP/SL children attached.
    children: FxHashMap<u64, Box<str>>,
    buckets: Buckets,
    /// Resting orders of size 0: an `update` to 0 keeps the order until its `remove`, which in streaming mode may
    /// come on a later line. While any rests, the book is between two of the engine's events (`is_sane`).
    zero_sized: u32,
    /// The coin's untriggered trigger orders: beside the levels, never in them (`book::triggers`).
    triggers: Triggers,
}

impl CoinBook {
    pub fn new(coin: Coin) -> CoinBook {
        CoinBook {
            coin,
            slab: Slab::new(),
            by_oid: FxHashMap::default(),
            levels: [BTreeMap::new(), BTreeMap::new()],
            children: FxHashMap::default(),
            buckets: Buckets::default(),
            zero_sized: 0,
            triggers: Triggers::default(),
        }
    }

    pub fn triggers(&self) -> &Triggers {
        &self.triggers
    }

    pub fn triggers_mut(&mut self) -> &mut Triggers {
        &mut self.triggers
    }

    /// Whether a trader would accept this book as it is: not crossed (best bid below best ask) and no order of
    /// size 0 resting. Every complete block's book is; a book between two lines of one block may not be.
    pub fn is_sane(&self) -> bool {
        let crossed = matches!((self.best(Side::Bid), self.best(Side::Ask)), (Some((b, _)), Some((a, _))) if b >= a);
        self.zero_sized == 0 && !crossed
    }

    pub fn coin(&self) -> &Coin {
        &self.coin
    }

    /// Resting orders.
    pub fn len(&self) -> usize {
        self.by_oid.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_oid.is_empty()
    }

    /// Releases spare capacity (after a bulk load).
    pub fn shrink_to_fit(&mut self) {
        self.slab.shrink_to_fit();
        self.by_oid.shrink_to_fit();
        self.children.shrink_to_fit();
    }

    pub fn order(&self, oid: u64) -> Option<&RestingOrder> {
        self.by_oid.get(&oid).map(|&k| &self.slab[k as usize].order)
    }

    /// The running totals of the coarse L2 shapes wanted of this book.
    pub fn buckets(&self) -> &Buckets {
        &self.buckets
    }

    pub fn children(&self, oid: u64) -> Option<&str> {
        self.children.get(&oid).map(|c| &**c)
    }

    /// Rests `order` at the back of its level, or ahead of `insert_before` when that oid rests in the same level.
    /// A duplicate oid replaces the resting order and is reported.
    pub fn insert(
        &mut self,
        order: RestingOrder,
        children: Option<Box<str>>,
        insert_before: Option<u64>,
    ) -> (Placement, Option<Misfit>) {
        let misfit = self.remove_any(order.oid).map(|_| Misfit::DuplicateOid);
        let (side, px, oid, sz) = (order.side, order.px, order.oid, order.sz);
        let anchor = insert_before.and_then(|a| self.by_oid.get(&a).copied()).filter(|&k| {
            let o = &self.slab[k as usize].order;
            o.side == side && o.px == px
        });
        let key = self.slab.insert(Node { order, prev: NIL, next: NIL }) as u32;
        self.by_oid.insert(oid, key);
        if let Some(c) = children {
            self.children.insert(oid, c);
        }
        let level =
            self.levels[side.index()].entry(px).or_insert(Level { sz: FixedSum::ZERO, n: 0, head: NIL, tail: NIL });
        level.sz.add(sz);
        level.n += 1;
        self.zero_sized += u32::from(sz == Fixed::ZERO);
        self.buckets.add(side, px, sz);
        let placement = if let Some(a) = anchor {
            link_before(&mut self.slab, level, key, a);
            Placement::BeforeAnchor
        } else {
            link_back(&mut self.slab, level, key);
            if insert_before.is_some() { Placement::AnchorMissing } else { Placement::Back }
        };
        (placement, misfit)
    }

    /// Fills in a resting order's details (its opening status came after its diff); false when it is not resting.
    /// Side, price and size stay, so levels are untouched.
    pub fn set_details(&mut self, oid: u64, d: Details, children: Option<Box<str>>) -> bool {
        let Some(&key) = self.by_oid.get(&oid) else { return false };
        let o = &mut self.slab[key as usize].order;
        (o.orig_sz, o.limit_px, o.trigger_px, o.timestamp, o.cloid, o.flavor) =
            (d.orig_sz, d.limit_px, d.trigger_px, d.timestamp, d.cloid, d.flavor);
        match children {
            Some(c) => self.children.insert(oid, c),
            None => self.children.remove(&oid),
        };
        true
    }

    /// Sets a resting order's size. A size of 0 keeps the order resting (a `remove` normally follows).
    pub fn update(&mut self, oid: u64, side: Side, px: Fixed, orig_sz: Fixed, new_sz: Fixed) -> Result<(), Misfit> {
        let &key = self.by_oid.get(&oid).ok_or(Misfit::UnknownOid)?;
        let order = &mut self.slab[key as usize].order;
        if order.side != side || order.px != px {
            return Err(Misfit::WrongPlace);
        }
        let old = std::mem::replace(&mut order.sz, new_sz);
        let (side, px) = (order.side, order.px);
        self.zero_sized = self.zero_sized + u32::from(new_sz == Fixed::ZERO) - u32::from(old == Fixed::ZERO);
        if let Some(level) = self.levels[side.index()].get_mut(&px) {
            level.sz.sub(old);
            level.sz.add(new_sz);
        }
        self.buckets.resize(side, px, old, new_sz);
        if old == orig_sz { Ok(()) } else { Err(Misfit::SizeMismatch) }
    }

    /// Takes an order off the book; it must rest at `side`/`px`.
    pub fn remove(&mut self, oid: u64, side: Side, px: Fixed) -> Result<RestingOrder, Misfit> {
        let &key = self.by_oid.get(&oid).ok_or(Misfit::UnknownOid)?;
        let o = &self.slab[key as usize].order;
        if o.side != side || o.px != px {
            return Err(Misfit::WrongPlace);
        }
        self.remove_any(oid).ok_or(Misfit::UnknownOid)
    }

    fn remove_any(&mut self, oid: u64) -> Option<RestingOrder> {
        let key = self.by_oid.remove(&oid)?;
        self.children.remove(&oid);
        let (side, px, sz) = {
            let o = &self.slab[key as usize].order;
            (o.side, o.px, o.sz)
        };
        let levels = &mut self.levels[side.index()];
        if let Some(level) = levels.get_mut(&px) {
            unlink(&mut self.slab, level, key);
            level.sz.sub(sz);
            level.n -= 1;
            self.zero_sized -= u32::from(sz == Fixed::ZERO);
            if level.n == 0 {
                levels.remove(&px);
            }
            self.buckets.sub(side, px, sz);
        }
        Some(self.slab.remove(key as usize).order)
    }

    /// Best price level of a side with its totals.
    pub fn best(&self, side: Side) -> Option<(Fixed, &Level)> {
        let map = &self.levels[side.index()];
        match side {
            Side::Bid => map.last_key_value(),
            Side::Ask => map.first_key_value(),
        }
        .map(|(px, l)| (*px, l))
    }

    /// Price levels of a side, best first.
    pub fn levels(&self, side: Side) -> Levels<'_> {
        let iter = self.levels[side.index()].iter();
        match side {
            Side::Bid => Levels::Down(iter.rev()),
            Side::Ask => Levels::Up(iter),
        }
    }

    /// Price levels of a side strictly worse than `after` (all of them when `None`), best first: lets a reader
    /// walk a book in short pieces, resuming where it stopped.
    pub fn levels_after(&self, side: Side, after: Option<Fixed>) -> Box<dyn Iterator<Item = (Fixed, &Level)> + '_> {
        use std::ops::Bound::{Excluded, Unbounded};
        let map = &self.levels[side.index()];
        match (side, after) {
            (_, None) => Box::new(self.levels(side)),
            (Side::Bid, Some(px)) => Box::new(map.range(..px).rev().map(|(p, l)| (*p, l))),
            (Side::Ask, Some(px)) => Box::new(map.range((Excluded(px), Unbounded)).map(|(p, l)| (*p, l))),
        }
    }

    /// The order after `oid` in its level's time priority (`None`: it is the last, or not resting).
    pub fn next_in_level(&self, oid: u64) -> Option<u64> {
        let &key = self.by_oid.get(&oid)?;
        let next = self.slab[key as usize].next;
        (next != NIL).then(|| self.slab[next as usize].order.oid)
    }

    /// The level at `px` on `side`.
    pub fn level(&self, side: Side, px: Fixed) -> Option<&Level> {
        self.levels[side.index()].get(&px)
    }

    /// Orders of one level in time priority.
    pub fn level_orders<'a>(&'a self, level: &Level) -> impl Iterator<Item = &'a RestingOrder> + 'a {
        let mut cur = level.head;
        std::iter::from_fn(move || {
            if cur == NIL {
                return None;
            }
            let node = &self.slab[cur as usize];
            cur = node.next;
            Some(&node.order)
        })
    }

    /// Every order of a side: best level first, time priority within a level (the snapshot's order).
    pub fn orders(&self, side: Side) -> impl Iterator<Item = &RestingOrder> + '_ {
        self.levels(side).flat_map(move |(_, level)| self.level_orders(level))
    }
}

/// Levels best first: descending prices for bids, ascending for asks.
#[derive(Debug)]
pub enum Levels<'a> {
    Down(std::iter::Rev<std::collections::btree_map::Iter<'a, Fixed, Level>>),
    Up(std::collections::btree_map::Iter<'a, Fixed, Level>),
}

impl<'a> Iterator for Levels<'a> {
    type Item = (Fixed, &'a Level);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Levels::Down(i) => i.next(),
            Levels::Up(i) => i.next(),
        }
        .map(|(px, l)| (*px, l))
    }
}

fn link_back(slab: &mut Slab<Node>, level: &mut Level, key: u32) {
    slab[key as usize].prev = level.tail;
    slab[key as usize].next = NIL;
    if level.tail == NIL {
        level.head = key;
    } else {
        slab[level.tail as usize].next = key;
    }
    level.tail = key;
}

fn link_before(slab: &mut Slab<Node>, level: &mut Level, key: u32, anchor: u32) {
    let prev = slab[anchor as usize].prev;
    slab[key as usize].prev = prev;
    slab[key as usize].next = anchor;
    slab[anchor as usize].prev = key;
    if prev == NIL {
        level.head = key;
    } else {
        slab[prev as usize].next = key;
    }
}

fn unlink(slab: &mut Slab<Node>, level: &mut Level, key: u32) {
    let (prev, next) = (slab[key as usize].prev, slab[key as usize].next);
    if prev == NIL {
        level.head = next;
    } else {
        slab[prev as usize].next = next;
    }
    if next == NIL {
        level.tail = prev;
    } else {
        slab[next as usize].prev = prev;
    }
}

#[cfg(test)]
#[path = "coin_tests.rs"]
mod tests;
