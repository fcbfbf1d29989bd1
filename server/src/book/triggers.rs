//! Trigger orders that have not triggered (stop-loss, take-profit): kept beside each coin's book, never in it.
//!
//! They do not rest, so they are no part of any level or L2; but the exchange lists them among a user's open
//! orders and the node's snapshot (asked with `includeTriggerOrders`) lists them with `"isTrigger": true`, so
//! l4Book, openOrders, frontendOpenOrders and orderStatus serve them from here. The status stream keeps them
//! current: a trigger order is placed by an `open` status whose order says `isTrigger`; any later status of that
//! oid ends it here (`triggered`, after which its `new` diff rests it at the diff's `px` like any order; or
//! `canceled`, `siblingFilledCanceled`, `reduceOnlyCanceled`, `marginCanceled`, `scheduledCancel`, ... — the
//! status list is open-ended, docs hl-user-channels.md §1, so anything but `open` ends it).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Books, CoinBook, RestingOrder};
use crate::node::{Address, Cloid, Fixed, OrderFlavor, OrderInfo, OrderStatus, Side};

/// An untriggered trigger order: its user and the order object its placing status (or the snapshot) wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TriggerOrder {
    pub user: Address,
    pub order: OrderInfo,
}

impl TriggerOrder {
    /// The order as a `RestingOrder` at its `limitPx`, for the answers shaped from resting orders (`openOrders`).
    pub fn as_resting(&self) -> RestingOrder {
        RestingOrder::at_limit(self.user, &self.order)
    }

    /// What validation compares: everything that a status can change or a client reads to act on (not the raw
    /// `children` text).
    fn key(&self) -> Key<'_> {
        let o = &self.order;
        (self.user, o.oid, o.side, [o.limit_px, o.sz, o.orig_sz, o.trigger_px], o.timestamp, &*o.flavor, o.cloid)
    }
}

type Key<'a> = (Address, u64, Side, [Fixed; 4], u64, &'a OrderFlavor, Option<Cloid>);

/// One coin's untriggered trigger orders, by oid (placement order: oids grow).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Triggers {
    by_oid: BTreeMap<u64, TriggerOrder>,
}

impl Triggers {
    pub fn len(&self) -> usize {
        self.by_oid.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_oid.is_empty()
    }

    pub fn get(&self, oid: u64) -> Option<&TriggerOrder> {
        self.by_oid.get(&oid)
    }

    /// Every trigger order, oldest oid first.
    pub fn iter(&self) -> impl Iterator<Item = &TriggerOrder> + '_ {
        self.by_oid.values()
    }

    /// The trigger orders of one side, oldest oid first.
    pub fn of_side(&self, side: Side) -> impl Iterator<Item = &TriggerOrder> + '_ {
        self.iter().filter(move |t| t.order.side == side)
    }

    /// Holds `order` (a placement, or one read from a snapshot); a held oid is replaced.
    pub fn place(&mut self, user: Address, order: OrderInfo) {
        self.by_oid.insert(order.oid, TriggerOrder { user, order });
    }

    pub fn remove(&mut self, oid: u64) -> Option<TriggerOrder> {
        self.by_oid.remove(&oid)
    }

    /// The same orders with the same fields (validation against the node's snapshot).
    pub fn same_as(&self, other: &Triggers) -> bool {
        self.len() == other.len() && self.iter().zip(other.iter()).all(|(a, b)| a.key() == b.key())
    }
}

/// Whether `s` places a trigger order that waits for its trigger.
pub fn places_trigger(s: &OrderStatus) -> bool {
    &*s.status == "open" && s.order.flavor.is_trigger
}

impl Books {
    /// A complete block's statuses, in line order, on the trigger orders: placements are held, and any other
    /// status of a held oid ends it. Returns how many changed. A coin's book is touched only when one of its
    /// trigger orders changes (the statuses are mostly of orders that are not trigger orders).
    pub(super) fn apply_trigger_statuses(&mut self, statuses: &[OrderStatus]) -> usize {
        let mut changed = 0;
        for s in statuses {
            if places_trigger(s) {
                let book = self.coins.entry(s.coin.clone()).or_insert_with(|| Arc::new(CoinBook::new(s.coin.clone())));
                super::unshared(book, &mut self.counters.book_copies).triggers_mut().place(s.user, s.order.clone());
                changed += 1;
            } else if self.coins.get(&s.coin).is_some_and(|b| b.triggers().get(s.order.oid).is_some())
                && let Some(book) = self.book_mut(&s.coin)
            {
                book.triggers_mut().remove(s.order.oid);
                changed += 1;
            }
        }
        changed
    }

    /// Untriggered trigger orders over all coins.
    pub fn trigger_count(&self) -> usize {
        self.books().map(|b| b.triggers().len()).sum()
    }
}

#[cfg(test)]
#[path = "triggers_tests.rs"]
mod tests;
