//! The exact L4 books of every coin, and applying blocks to them.
//!
//! `Books` is the state that ingest writes (under the server's `RwLock`) and publication reads. Applying a block
//! never panics and never guesses silently: each block has a typed outcome, and every diff that does not fit the
//! book is reported and marks its coin untrusted until a snapshot repairs it; the block's other coins still apply.

pub mod buckets;
pub mod coin;
pub mod export;
pub mod l2;
pub mod snapshot;

use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

pub use coin::{CoinBook, Level, Misfit, Placement, RestingOrder};

use crate::node::event::{SYSTEM_USERS, is_spot};
use crate::node::{Block, Coin, Diff, DiffKind, OrderFlavor, OrderStatus, UnixNanos, time::nanos_to_millis};

/// What applying one block did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Applied(Applied),
    /// `height` ≤ the books' height: nothing to do (a replayed or re-emitted block).
    AlreadyApplied {
        height: u64,
        current: u64,
    },
    /// `height` > current + 1: the books cannot follow; nothing was applied.
    Gap {
        expected: u64,
        got: u64,
    },
}

/// Details of an applied block.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    pub height: u64,
    /// Coins whose book changed, in first-touched order.
    pub changed: Vec<Coin>,
    pub inconsistencies: Vec<Inconsistency>,
    pub anchors_missing: u32,
    /// `new` diffs without a status from system users or on spot books, rested with default fields.
    pub statusless_system: u32,
}

/// A diff that did not fit the book; its coin is now untrusted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inconsistency {
    pub coin: Coin,
    pub oid: u64,
    pub kind: InconsistencyKind,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum InconsistencyKind {
    Book(Misfit),
    /// `new` with no opening status in its block, from a user that is not a system user, on a perp book.
    NewWithoutStatus,
}

/// Running counts of every outcome since start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BookCounters {
    pub blocks_applied: u64,
    pub already_applied: u64,
    pub gaps: u64,
    pub inconsistencies: u64,
    pub anchors_missing: u64,
    pub statusless_system: u64,
    pub diffs_applied: u64,
}

#[derive(Clone, Debug, Default)]
pub struct Books {
    height: u64,
    block_time: UnixNanos,
    coins: FxHashMap<Coin, CoinBook>,
    untrusted: FxHashSet<Coin>,
    counters: BookCounters,
}

impl Books {
    /// Books at `height` holding `coins` (e.g. loaded from a snapshot).
    pub fn new(height: u64, coins: impl IntoIterator<Item = CoinBook>) -> Books {
        let coins = coins.into_iter().map(|b| (b.coin().clone(), b)).collect();
        Books { height, coins, ..Books::default() }
    }

    /// Height of the last applied block (or of the snapshot).
    pub fn height(&self) -> u64 {
        self.height
    }

    /// Block time of the last applied block (0 right after a snapshot).
    pub fn block_time(&self) -> UnixNanos {
        self.block_time
    }

    pub fn coin(&self, coin: &str) -> Option<&CoinBook> {
        self.coins.get(coin)
    }

    /// Coin names, sorted.
    pub fn coin_names(&self) -> Vec<Coin> {
        let mut v: Vec<Coin> = self.coins.keys().cloned().collect();
        v.sort();
        v
    }

    pub fn books(&self) -> impl Iterator<Item = &CoinBook> {
        self.coins.values()
    }

    /// Resting orders over all coins.
    pub fn order_count(&self) -> usize {
        self.coins.values().map(CoinBook::len).sum()
    }

    pub fn is_trusted(&self, coin: &str) -> bool {
        !self.untrusted.contains(coin)
    }

    pub fn untrusted(&self) -> impl Iterator<Item = &Coin> {
        self.untrusted.iter()
    }

    pub fn counters(&self) -> &BookCounters {
        &self.counters
    }

    /// Replaces one coin's book (a repair from a snapshot at the books' height) and trusts it again.
    pub fn replace_coin(&mut self, book: CoinBook) {
        self.untrusted.remove(book.coin());
        self.coins.insert(book.coin().clone(), book);
    }

    /// Sets one coin's book (`None` removes the coin): a repair from a snapshot brought to the books' height.
    pub fn set_coin(&mut self, coin: &Coin, book: Option<CoinBook>) {
        self.untrusted.remove(coin);
        match book {
            Some(b) => {
                self.coins.insert(coin.clone(), b);
            }
            None => {
                self.coins.remove(coin);
            }
        }
    }

    /// Takes one coin's book out.
    pub fn take_coin(&mut self, coin: &str) -> Option<CoinBook> {
        self.coins.remove(coin)
    }

    /// Applies the next block.
    pub fn apply(&mut self, block: &Block) -> Outcome {
        if block.height <= self.height {
            self.counters.already_applied += 1;
            return Outcome::AlreadyApplied { height: block.height, current: self.height };
        }
        if block.height > self.height + 1 {
            self.counters.gaps += 1;
            return Outcome::Gap { expected: self.height + 1, got: block.height };
        }
        let opening = opening_statuses(&block.statuses);
        let mut out = Applied { height: block.height, ..Applied::default() };
        let mut seen = FxHashSet::default();
        for diff in &block.diffs {
            if out.changed.last() != Some(&diff.coin) && seen.insert(diff.coin.clone()) {
                out.changed.push(diff.coin.clone());
            }
            self.apply_diff(diff, &opening, block.block_time, &mut out);
        }
        for inc in &out.inconsistencies {
            self.untrusted.insert(inc.coin.clone());
        }
        self.height = block.height;
        self.block_time = block.block_time;
        let c = &mut self.counters;
        c.blocks_applied += 1;
        c.inconsistencies += out.inconsistencies.len() as u64;
        c.anchors_missing += u64::from(out.anchors_missing);
        c.statusless_system += u64::from(out.statusless_system);
        c.diffs_applied += block.diffs.len() as u64;
        Outcome::Applied(out)
    }

    fn apply_diff(
        &mut self,
        d: &Diff,
        opening: &FxHashMap<u64, &OrderStatus>,
        block_time: UnixNanos,
        out: &mut Applied,
    ) {
        // A coin that first appears now gets a book.
        let book = self.coins.entry(d.coin.clone()).or_insert_with(|| CoinBook::new(d.coin.clone()));
        let mut misfit = |kind| out.inconsistencies.push(Inconsistency { coin: d.coin.clone(), oid: d.oid, kind });
        match d.kind {
            DiffKind::New { sz, insert_before } => {
                let (order, children, how) = new_order(d, sz, opening.get(&d.oid).copied(), block_time);
                let (placement, m) = book.insert(order, children, insert_before);
                if let Some(m) = m {
                    misfit(InconsistencyKind::Book(m));
                }
                match how {
                    Opened::ByStatus => {}
                    Opened::System => out.statusless_system += 1,
                    Opened::Unexplained => misfit(InconsistencyKind::NewWithoutStatus),
                }
                if placement == Placement::AnchorMissing {
                    out.anchors_missing += 1;
                }
            }
            DiffKind::Update { orig_sz, new_sz } => {
                if let Err(m) = book.update(d.oid, d.side, d.px, orig_sz, new_sz) {
                    misfit(InconsistencyKind::Book(m));
                }
            }
            DiffKind::Remove => {
                if let Err(m) = book.remove(d.oid, d.side, d.px) {
                    misfit(InconsistencyKind::Book(m));
                }
            }
        }
    }
}

/// How a `new` order got its fields.
enum Opened {
    ByStatus,
    System,
    Unexplained,
}

/// The first opening status of each oid in a block.
fn opening_statuses(statuses: &[OrderStatus]) -> FxHashMap<u64, &OrderStatus> {
    let mut map = FxHashMap::default();
    for s in statuses.iter().filter(|s| s.is_opening()) {
        map.entry(s.order.oid).or_insert(s);
    }
    map
}

/// Builds the resting order of a `new` diff: position from the diff, the rest from its opening status.
fn new_order(
    d: &Diff,
    sz: crate::node::Fixed,
    status: Option<&OrderStatus>,
    block_time: UnixNanos,
) -> (RestingOrder, Option<Box<str>>, Opened) {
    // What the opening status says, or defaults for a statusless order.
    let (orig_sz, limit_px, trigger_px, timestamp, cloid, flavor, children, how) = match status {
        Some(s) => {
            let o = &s.order;
            // An Ioc order the node reports open and rests is, from then on, a resting Gtc order.
            let flavor =
                if o.flavor.tif.as_deref() == Some("Ioc") { Arc::new(o.flavor.as_gtc()) } else { o.flavor.clone() };
            (o.orig_sz, o.limit_px, o.trigger_px, o.timestamp, o.cloid, flavor, o.children.clone(), Opened::ByStatus)
        }
        None => {
            let how =
                if SYSTEM_USERS.contains(&d.user) || is_spot(&d.coin) { Opened::System } else { Opened::Unexplained };
            let ts = nanos_to_millis(block_time) as u64;
            (sz, d.px, crate::node::Fixed::ZERO, ts, None, system_flavor(), None, how)
        }
    };
    let order = RestingOrder {
        oid: d.oid,
        user: d.user,
        side: d.side,
        px: d.px,
        sz,
        orig_sz,
        limit_px,
        trigger_px,
        timestamp,
        cloid,
        flavor,
    };
    (order, children, how)
}

fn system_flavor() -> Arc<OrderFlavor> {
    static FLAVOR: std::sync::OnceLock<Arc<OrderFlavor>> = std::sync::OnceLock::new();
    FLAVOR.get_or_init(|| Arc::new(OrderFlavor::system_default())).clone()
}

#[cfg(test)]
#[path = "apply_tests.rs"]
mod tests;
