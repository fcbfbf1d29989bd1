//! The exact L4 books of every coin, and applying blocks to them.
//!
//! `Books` is the state that ingest writes (under the server's `RwLock`) and publication reads. Applying a block
//! never panics and never guesses silently: each block has a typed outcome, and every diff that does not fit the
//! book is reported and marks its coin untrusted until a snapshot repairs it; the block's other coins still apply.
//!
//! A block applies in two steps, because the node writes its diffs line well before its (much longer) statuses
//! line: `apply_diffs` places every order (a `new` order rests with default fields, its metadata pending), which
//! fully determines the L2 levels; `apply_statuses` then fills in the new orders' fields from their opening
//! statuses and reports a `new` without one. Between the two the books are half-applied: `diffs_height` is one
//! above `height`, and whatever needs whole orders (validation, snapshots, l4Book) waits for `is_complete`.
//!
//! The diffs step itself may be split in two (`first`): the coins someone watches first, the rest after, so their
//! L2 frames need not wait for every other coin's diffs.
//!
//! Each coin's book is copy-on-write (an `Arc`): a reader that needs a coin's whole book past the lock (an l4Book
//! snapshot serialized on the rayon pool) takes it in O(1) under the read lock (`shared_coin`), and the writer
//! copies that coin only if it changes it while the reader still holds it (`book_copies`). Unshared, a change
//! costs one reference-count check.

pub mod buckets;
pub mod coin;
pub mod export;
mod first;
pub mod l2;
pub mod snapshot;
pub mod triggers;
mod undo;

use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

pub use coin::{CoinBook, Details, Level, Misfit, Placement, RestingOrder};
pub use first::{FirstView, splits};
pub use triggers::{TriggerOrder, Triggers};

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
    /// Coins copied before a change because a reader still held their book (copy-on-write).
    pub copies: u32,
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

/// What this `Books` value has seen since it was built: replay and the simulator's checks read it with no
/// service around. A resync builds new books (and new counts); the service's process-long totals, exported on
/// the admin `/health` and `/metrics`, are ingest's `IngestCounters`, which add these outcomes up across books.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BookCounters {
    pub blocks_applied: u64,
    pub already_applied: u64,
    pub gaps: u64,
    pub inconsistencies: u64,
    pub anchors_missing: u64,
    pub statusless_system: u64,
    pub diffs_applied: u64,
    /// Coins copied before a change because a reader still held their book (copy-on-write).
    pub book_copies: u64,
}

#[derive(Clone, Debug, Default)]
pub struct Books {
    /// The last complete block (both steps applied).
    height: u64,
    block_time: UnixNanos,
    /// The last block whose diffs are applied: `height`, or `height + 1` while its statuses are awaited.
    diffs_height: u64,
    diffs_block_time: UnixNanos,
    /// `new` orders of the half-applied block, in diff order: their metadata waits for the statuses.
    pending: Vec<PendingNew>,
    /// Copy-on-write: a reader may hold a coin's book past the lock (`shared_coin`); changes go through `unshared`.
    coins: FxHashMap<Coin, Arc<CoinBook>>,
    untrusted: FxHashSet<Coin>,
    counters: BookCounters,
    /// A diffs step half done: its first coins are at its height, every other coin still at `diffs_height`.
    first: Option<first::FirstPart>,
    /// Streaming: the open block's parts record how to undo them (`undo`), while `recording`.
    recording: bool,
    undo: Vec<undo::Undo>,
}

impl Books {
    /// Books at `height` holding `coins` (e.g. loaded from a snapshot).
    pub fn new(height: u64, coins: impl IntoIterator<Item = CoinBook>) -> Books {
        let coins = coins.into_iter().map(|b| (b.coin().clone(), Arc::new(b))).collect();
        Books { height, diffs_height: height, coins, ..Books::default() }
    }

    /// `Books::new` of books shared with other books (`shared_coin`): a copy of complete books, coin by coin.
    pub fn from_shared(height: u64, coins: impl IntoIterator<Item = Arc<CoinBook>>) -> Books {
        let coins = coins.into_iter().map(|b| (b.coin().clone(), b)).collect();
        Books { height, diffs_height: height, coins, ..Books::default() }
    }

    /// Height of the last complete block (or of the snapshot).
    pub fn height(&self) -> u64 {
        self.height
    }

    /// Block time of the last complete block (0 right after a snapshot).
    pub fn block_time(&self) -> UnixNanos {
        self.block_time
    }

    /// Height of the last block whose diffs are applied to every coin: what the L2 levels show (the coins of a
    /// first part, `first_part`, may be one block ahead).
    pub fn diffs_height(&self) -> u64 {
        self.diffs_height
    }

    /// Block time of `diffs_height`.
    pub fn diffs_block_time(&self) -> UnixNanos {
        if self.diffs_height == self.height { self.block_time } else { self.diffs_block_time }
    }

    /// No block is half-applied: every resting order has its fields.
    pub fn is_complete(&self) -> bool {
        self.diffs_height == self.height && self.first.is_none()
    }

    pub fn coin(&self, coin: &str) -> Option<&CoinBook> {
        self.coins.get(coin).map(|b| &**b)
    }

    /// `coin`'s book, shared: O(1) under the lock, and the holder keeps this version for as long as it likes. The
    /// writer copies the coin if it changes it meanwhile (counted in `book_copies`), so hold it no longer than the
    /// work needs.
    pub fn shared_coin(&self, coin: &str) -> Option<Arc<CoinBook>> {
        self.coins.get(coin).cloned()
    }

    /// Coin names, sorted.
    pub fn coin_names(&self) -> Vec<Coin> {
        let mut v: Vec<Coin> = self.coins.keys().cloned().collect();
        v.sort();
        v
    }

    pub fn books(&self) -> impl Iterator<Item = &CoinBook> {
        self.coins.values().map(|b| &**b)
    }

    /// Resting orders over all coins.
    pub fn order_count(&self) -> usize {
        self.coins.values().map(|b| b.len()).sum()
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
        self.coins.insert(book.coin().clone(), Arc::new(book));
    }

    /// Sets one coin's book (`None` removes the coin): a repair from a snapshot brought to the books' height.
    pub fn set_coin(&mut self, coin: &Coin, book: Option<CoinBook>) {
        self.untrusted.remove(coin);
        match book {
            Some(b) => {
                self.coins.insert(coin.clone(), Arc::new(b));
            }
            None => {
                self.coins.remove(coin);
            }
        }
    }

    /// `coin`'s book for changing it, copied first if a reader still holds it.
    fn book_mut(&mut self, coin: &str) -> Option<&mut CoinBook> {
        let book = self.coins.get_mut(coin)?;
        Some(unshared(book, &mut self.counters.book_copies))
    }

    /// Takes one coin's book out.
    pub fn take_coin(&mut self, coin: &str) -> Option<CoinBook> {
        self.coins.remove(coin).map(Arc::unwrap_or_clone)
    }

    /// Applies the next block whole (both steps).
    pub fn apply(&mut self, block: &Block) -> Outcome {
        let mut out = match self.apply_diffs(block.height, block.block_time, &block.diffs) {
            Outcome::Applied(a) => a,
            other => return other,
        };
        match self.apply_statuses(block.height, &block.statuses) {
            Outcome::Applied(a) => {
                out.inconsistencies.extend(a.inconsistencies);
                out.statusless_system += a.statusless_system;
                out.copies += a.copies;
                Outcome::Applied(out)
            }
            other => other,
        }
    }

    /// Step one: the next block's diffs. Every order is placed (L2 is final for the block); `new` orders wait for
    /// their statuses. The outcome reports the changed coins and the diffs that did not fit.
    pub fn apply_diffs(&mut self, height: u64, block_time: UnixNanos, diffs: &[Diff]) -> Outcome {
        if let Some(refused) = self.refuse_diffs(height) {
            return refused;
        }
        let out = self.apply_some(height, block_time, diffs.iter());
        self.diffs_height = height;
        self.diffs_block_time = block_time;
        Outcome::Applied(out)
    }

    /// Streaming mode: the diffs of block `height` that the lines read since the last part brought. The first part
    /// opens the block as `apply_diffs` does; each later one continues it, until `apply_statuses` completes it.
    /// Between parts the books are the engine's own state after that line, in order (`CoinBook::is_sane` says
    /// whether a coin is between two events of one order).
    pub fn apply_diffs_part(&mut self, height: u64, block_time: UnixNanos, diffs: &[Diff]) -> Outcome {
        let open = height == self.diffs_height && height == self.height + 1 && self.first.is_none() && self.recording;
        if !open {
            if let Some(refused) = self.refuse_diffs(height) {
                return refused;
            }
            (self.recording, self.undo) = (true, Vec::new());
            return self.apply_diffs(height, block_time, diffs);
        }
        Outcome::Applied(self.apply_some(height, block_time, diffs.iter()))
    }

    /// Why block `height`'s diffs cannot be applied now, if they cannot.
    fn refuse_diffs(&mut self, height: u64) -> Option<Outcome> {
        if height <= self.diffs_height {
            self.counters.already_applied += 1;
            return Some(Outcome::AlreadyApplied { height, current: self.diffs_height });
        }
        if height > self.diffs_height + 1 || !self.is_complete() {
            self.counters.gaps += 1;
            return Some(Outcome::Gap { expected: self.height + 1, got: height });
        }
        None
    }

    /// Applies `diffs` of block `height` and counts them; the caller moves `diffs_height`.
    fn apply_some<'d>(&mut self, height: u64, block_time: UnixNanos, diffs: impl Iterator<Item = &'d Diff>) -> Applied {
        let mut out = Applied { height, ..Applied::default() };
        let copies = self.counters.book_copies;
        let mut seen = FxHashSet::default();
        let mut n = 0;
        for diff in diffs {
            if out.changed.last() != Some(&diff.coin) && seen.insert(diff.coin.clone()) {
                out.changed.push(diff.coin.clone());
            }
            if self.recording {
                self.note_undo(diff);
            }
            self.apply_diff(diff, block_time, &mut out);
            n += 1;
        }
        self.distrust(&out);
        self.counters.anchors_missing += u64::from(out.anchors_missing);
        self.counters.diffs_applied += n;
        out.copies = (self.counters.book_copies - copies) as u32;
        out
    }

    /// Step two: the half-applied block's statuses fill in its new orders, which completes the block. A `new`
    /// with no opening status is an inconsistency unless it is a system user's or on a spot book.
    pub fn apply_statuses(&mut self, height: u64, statuses: &[OrderStatus]) -> Outcome {
        if height <= self.height {
            self.counters.already_applied += 1;
            return Outcome::AlreadyApplied { height, current: self.height };
        }
        if height != self.diffs_height || self.first.is_some() {
            // The block's diffs were never applied (or only some of them): nothing to complete.
            self.counters.gaps += 1;
            return Outcome::Gap { expected: self.diffs_height, got: height };
        }
        let opening = opening_statuses(statuses);
        let mut out = Applied { height, ..Applied::default() };
        let copies = self.counters.book_copies;
        for p in std::mem::take(&mut self.pending) {
            match opening.get(&p.oid) {
                Some(s) => {
                    if let Some(book) = self.coins.get_mut(&p.coin) {
                        let (details, children) = details_of(s);
                        unshared(book, &mut self.counters.book_copies).set_details(p.oid, details, children);
                    }
                }
                None if SYSTEM_USERS.contains(&p.user) || is_spot(&p.coin) => out.statusless_system += 1,
                None => out.inconsistencies.push(Inconsistency {
                    coin: p.coin,
                    oid: p.oid,
                    kind: InconsistencyKind::NewWithoutStatus,
                }),
            }
        }
        out.copies = (self.counters.book_copies - copies) as u32;
        self.distrust(&out);
        self.apply_trigger_statuses(statuses);
        self.height = height;
        self.block_time = self.diffs_block_time;
        (self.recording, self.undo) = (false, Vec::new());
        let c = &mut self.counters;
        c.blocks_applied += 1;
        c.statusless_system += u64::from(out.statusless_system);
        Outcome::Applied(out)
    }

    /// Marks `coin` untrusted until a snapshot repairs it (two sources disagreed about one of its lines).
    pub fn distrust_coin(&mut self, coin: Coin) {
        self.untrusted.insert(coin);
    }

    /// Marks the coins of `out`'s inconsistencies untrusted and counts them.
    fn distrust(&mut self, out: &Applied) {
        for inc in &out.inconsistencies {
            self.untrusted.insert(inc.coin.clone());
        }
        self.counters.inconsistencies += out.inconsistencies.len() as u64;
    }

    fn apply_diff(&mut self, d: &Diff, block_time: UnixNanos, out: &mut Applied) {
        // A coin that first appears now gets a book.
        let book = self.coins.entry(d.coin.clone()).or_insert_with(|| Arc::new(CoinBook::new(d.coin.clone())));
        let book = unshared(book, &mut self.counters.book_copies);
        let mut misfit = |kind| out.inconsistencies.push(Inconsistency { coin: d.coin.clone(), oid: d.oid, kind });
        match d.kind {
            DiffKind::New { sz, insert_before } => {
                let (placement, m) = book.insert(new_order(d, sz, block_time), None, insert_before);
                if let Some(m) = m {
                    misfit(InconsistencyKind::Book(m));
                }
                self.pending.push(PendingNew { coin: d.coin.clone(), oid: d.oid, user: d.user });
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

/// `book` for changing it: copied first when a reader still holds it (`Books::shared_coin`), counted in `copies`.
/// Unshared, this is a reference-count check.
fn unshared<'a>(book: &'a mut Arc<CoinBook>, copies: &mut u64) -> &'a mut CoinBook {
    if Arc::strong_count(book) > 1 {
        *copies += 1;
    }
    Arc::make_mut(book)
}

/// A `new` order of the half-applied block, waiting for its opening status.
#[derive(Clone, Debug)]
struct PendingNew {
    coin: Coin,
    oid: u64,
    user: crate::node::Address,
}

/// The first opening status of each oid in a block.
fn opening_statuses(statuses: &[OrderStatus]) -> FxHashMap<u64, &OrderStatus> {
    let mut map = FxHashMap::default();
    for s in statuses.iter().filter(|s| s.is_opening()) {
        map.entry(s.order.oid).or_insert(s);
    }
    map
}

/// The resting order of a `new` diff: position from the diff, the other fields defaults (a statusless system or
/// spot order keeps them) until its opening status fills them in.
fn new_order(d: &Diff, sz: crate::node::Fixed, block_time: UnixNanos) -> RestingOrder {
    RestingOrder {
        oid: d.oid,
        user: d.user,
        side: d.side,
        px: d.px,
        sz,
        orig_sz: sz,
        limit_px: d.px,
        trigger_px: crate::node::Fixed::ZERO,
        timestamp: nanos_to_millis(block_time) as u64,
        cloid: None,
        flavor: system_flavor(),
    }
}

/// What an opening status says about the order it opened.
fn details_of(s: &OrderStatus) -> (Details, Option<Box<str>>) {
    let o = &s.order;
    // An Ioc order the node reports open and rests is, from then on, a resting Gtc order.
    let flavor = if o.flavor.tif.as_deref() == Some("Ioc") { Arc::new(o.flavor.as_gtc()) } else { o.flavor.clone() };
    let details = Details {
        orig_sz: o.orig_sz,
        limit_px: o.limit_px,
        trigger_px: o.trigger_px,
        timestamp: o.timestamp,
        cloid: o.cloid,
        flavor,
    };
    (details, o.children.clone())
}

fn system_flavor() -> Arc<OrderFlavor> {
    static FLAVOR: std::sync::OnceLock<Arc<OrderFlavor>> = std::sync::OnceLock::new();
    FLAVOR.get_or_init(|| Arc::new(OrderFlavor::system_default())).clone()
}

#[cfg(test)]
#[path = "book_apply_tests.rs"]
mod tests;
