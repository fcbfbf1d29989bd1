//! One publish pass: what changed since the last one, copied out under the read lock, then serialized.
//!
//! Ingest applies a by-block block line by line (`ingest::steps`), and waking the publisher after each: L2, bbo and
//! allMids are built from the books as soon as a block's diffs are applied (its statuses may still be unread),
//! trades from its fills line as soon as it is parsed, and l4Book diffs and snapshots only from complete blocks.
//! Each frame is stamped with the height and time of the block it shows and the times of the line it came from.

use std::collections::BTreeMap;
use std::sync::Arc;

use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};

use super::candles::Interval;
use super::candles::keeper::Keeper;
use super::frame::Audit;
use super::hub::{CoinWants, Hub, Tick, Wanted};
use super::json::{self, Bbo};
use super::l2_frames::L2Json;
use super::l4_snapshots::{Copies, Snapshots};
use crate::book::buckets::l2_levels;
use crate::book::l2::{L2Params, LevelAgg};
use crate::book::{Books, CoinBook};
use crate::node::time::{nanos_to_millis, now_nanos};
use crate::node::{Coin, Side, Stream};
use crate::state::{LineTimes, Step, StepData, StepsSince};

#[path = "pass_ticks.rs"]
mod ticks;

/// Coins changed in one pass above which L2 building is spread over the rayon pool.
const PARALLEL_COINS: usize = 8;

/// What one coin's pass copied out of the books.
struct Built {
    coin: Coin,
    /// Per L2 group of `CoinWants::l2`: bids and asks at the group's deepest depth.
    l2: Vec<[Vec<LevelAgg>; 2]>,
    bbo: Bbo,
    /// The books have this coin. A coin they never had (a client's typo) gets no frames at all; one that
    /// vanished (a repair) gets its empty book on slots that already had frames.
    exists: bool,
}

#[derive(Debug)]
pub struct Publisher {
    hub: Arc<Hub>,
    pass: u64,
    tick_seq: u64,
    /// The last complete block published (l4Book).
    height: u64,
    /// The last block whose diffs were published (L2, bbo, allMids).
    diffs_height: u64,
    /// The last block whose fills were published (trades).
    fills_height: u64,
    /// The last `Shared::fills_through` handed to the store.
    fills_through: u64,
    /// The last block whose first part (`book::first`) was published ahead of its other coins.
    first_height: u64,
    /// Where this publisher is in the state's queue of steps (`Step::seq`), per kind.
    diffs_seq: u64,
    fills_seq: u64,
    /// Coins changed in a pass whose books were not sane then (`CoinBook::is_sane`): built by a later pass.
    withheld: FxHashSet<Coin>,
    /// The history store's writer, handed every fills step and the height blocks are whole up to.
    store: Option<crate::store::writer::StoreSender>,
    /// l4Book snapshot requests waiting for the books to be complete, and the frames made at this height.
    snapshots: Snapshots,
    installs: u64,
    wanted_version: u64,
    bbo_last: FxHashMap<Coin, Bbo>,
    /// Every coin's mid, kept while anyone wants allMids.
    mids: BTreeMap<Coin, String>,
    /// Candles of the wanted (coin, interval)s.
    candles: Keeper,
}

impl Publisher {
    pub fn new(hub: Arc<Hub>) -> Publisher {
        let store = hub.take_store_feeder();
        Publisher {
            hub,
            pass: 0,
            tick_seq: 0,
            height: 0,
            diffs_height: 0,
            fills_height: 0,
            fills_through: u64::MAX,
            first_height: 0,
            diffs_seq: 0,
            fills_seq: 0,
            withheld: FxHashSet::default(),
            store,
            snapshots: Snapshots::default(),
            installs: 0,
            wanted_version: 0,
            bbo_last: FxHashMap::default(),
            mids: BTreeMap::new(),
            candles: Keeper::default(),
        }
    }

    /// Publishes whatever changed since the last pass; a no-op when nothing did.
    pub fn pass(&mut self) {
        let hub = self.hub.clone();
        hub.expire_lingering();
        // Taken before `wanted` is loaded, so every change taken is in it (later ones wake the next pass).
        let shapes = hub.take_shape_changes();
        let wanted = hub.wanted();
        let repaired = hub.shared().take_repaired();
        let misc = hub.take_misc();
        let twaps = hub.take_twaps();
        // A subscriber that left before its snapshot was made costs no copy of the book.
        self.snapshots.gather(&hub);
        let books = hub.shared().books();
        let (h, dh, installs) = (books.height(), books.diffs_height(), hub.shared().installs());
        // A diffs step half applied: the coins it changed are a block ahead of `dh`, and go out on their own.
        let first = books.first_part();
        let first_due = first.filter(|f| f.height != self.first_height);
        if let Some(f) = first {
            hub.shared().first_taken(f.height);
        }
        // Before the steps: every fills step it covers is among them (ingest hands them over first).
        let fills_through = hub.shared().fills_through();
        // Read under the books' lock: ingest records a diffs step under its write lock, so every step up to `dh`
        // is here.
        let StepsSince { diffs: diff_steps, fills: fill_steps, statuses: status_steps, diffs_seq, fills_seq, lost } =
            hub.shared().steps_after(self.diffs_seq, dh, self.fills_seq);
        let fh = fill_steps.last().map_or(self.fills_height, |s| s.height);
        let new_shapes = wanted.version != self.wanted_version;
        if new_shapes {
            // Per-coin state lives only while someone wants the coin's bbo.
            self.bbo_last.retain(|c, _| wanted.coins.get(c).is_some_and(|w| w.bbo.is_some()));
            self.candles.sync(&*hub, &candle_wants(&wanted));
        }
        let serve = books.is_complete() && self.snapshots.waiting();
        let same = (h, dh, installs) == (self.height, self.diffs_height, self.installs)
            && diff_steps.is_empty()
            && fill_steps.is_empty()
            && status_steps.is_empty();
        if same
            && first_due.is_none()
            && shapes.is_empty()
            && !new_shapes
            && repaired.is_empty()
            && !serve
            && misc.is_empty()
            && twaps.is_empty()
            && !hub.candle_backfills_done()
        {
            hub.shared().set_publisher_wants_complete(self.snapshots.waiting());
            return;
        }
        self.pass += 1;
        let blocks = hub.shared().blocks_after(self.height, h);
        // Streaming mode steps through one block's diffs in parts, so a pass may start inside the block it ended in.
        let next = self.diffs_height..=self.diffs_height + 1;
        let reloaded = installs != self.installs
            || lost
            || (h > self.height && blocks.first().is_none_or(|b| b.height != self.height + 1))
            || (dh > self.diffs_height && diff_steps.first().is_none_or(|s| !next.contains(&s.height)));
        // allMids newly wanted needs every coin's mid; any other new shape needs only its own coin built.
        let all_mids = shapes.mids && !wanted.mids.is_empty() && self.mids.is_empty();
        let mut targets = Self::targets(&wanted, &books, &diff_steps, &repaired, reloaded || all_mids);
        let shaped: Vec<Coin> =
            shapes.coins.into_iter().filter(|c| wanted.coins.contains_key(c) && !targets.contains(c)).collect();
        targets.extend(shaped);
        if let Some(f) = first {
            targets.retain(|c| !f.changed.contains(c));
        }
        self.withhold_insane(&books, &mut targets);
        let built = build_all(&books, &wanted, &targets);
        let early = first_due.map(|f| {
            let coins: Vec<Coin> = f.changed.iter().filter(|c| wanted.coins.contains_key(*c)).cloned().collect();
            (f.height, f.block_time, build_all(&books, &wanted, &coins))
        });
        let copies = if serve {
            self.snapshots.take_copies(&books, (h, installs), !repaired.is_empty(), &hub)
        } else {
            Copies::default()
        };
        let (block_time, l2_time) = (books.block_time(), books.diffs_block_time());
        // The diffs line times of the books as read: ingest records a diffs step under the books' write lock, so
        // while this read lock is held they are those of the newest line applied. Read after it, a streaming block's
        // next line could already be recorded, and a frame would claim a line its levels do not hold yet (the plain
        // L2 oracle, tests/l2_oracle_plain.rs, caught frames stamped one line ahead of their books).
        let l2_times = hub.shared().times_of(dh, Stream::Diffs);
        let early_times = early.as_ref().map(|e| hub.shared().times_of(e.0, Stream::Diffs));
        drop(books);

        // Register the lines before any of their frames can be written, so every write is counted.
        let lines = fill_steps.iter().map(|s| (s.height, Stream::Fills));
        let lines = lines.chain(status_steps.iter().map(|s| (s.height, Stream::Statuses)));
        let lines = lines.chain(diff_steps.iter().map(|s| (s.height, Stream::Diffs)));
        let lines = lines.chain(blocks.iter().map(|b| (b.height, Stream::Statuses)));
        let mut lines: Vec<(u64, Stream)> = lines.chain(early.iter().map(|e| (e.0, Stream::Diffs))).collect();
        // A split diffs step is two steps of one line, and its first part's line was registered when published.
        lines.retain(|&(height, line)| !(line == Stream::Diffs && height == self.first_height));
        lines.sort_unstable();
        lines.dedup();
        for &(height, line) in &lines {
            if let Some(t) = self.hub.shared().times_of(height, line) {
                hub.stages().begin(t);
            }
        }
        if let Some((height, time, built)) = &early {
            let audit = audit_from(*height, *time, Stream::Diffs, early_times.flatten());
            self.publish_l2(&wanted, built, *time, audit);
            // No allMids: it shows every coin at one height, so it waits for the rest of the step.
            self.publish_bbo(&wanted, built, nanos_to_millis(*time), audit);
            self.first_height = *height;
            hub.counters().first_parts.inc();
        }
        let l2_audit = audit_from(dh, l2_time, Stream::Diffs, l2_times);
        self.publish_l2(&wanted, &built, l2_time, l2_audit);
        self.publish_bbo_and_mids(&wanted, &built, l2_time, l2_audit, reloaded || shapes.mids);
        // Backfilled candles join the trades counted up to the last fills step published, before this pass's.
        let fills_audit = self.audit_of(self.fills_height, self.fills_block_time(), Stream::Fills);
        self.candles.finish_backfills(&*hub, self.tick_seq, stamped(fills_audit));
        let mut ticks = self.ticks(&wanted, &fill_steps, &status_steps, &blocks);
        // Read before the users followed: every user watched since this generation is among them.
        let misc_generation = hub.shared().watched().view().generation;
        let followed = hub.followed_users();
        let mut misc_ticks = super::misc_feed::misc_ticks(&misc, &followed, &mut self.tick_seq);
        misc_ticks.extend(super::twap_feed::twap_ticks(&twaps, &followed, &mut self.tick_seq));
        for t in &mut misc_ticks {
            t.users_generation = Some(misc_generation);
        }
        ticks.extend(misc_ticks);
        if reloaded || !repaired.is_empty() {
            self.tick_seq += 1;
            let mut t = Tick::new(self.tick_seq, h);
            t.all_reset = reloaded;
            t.l4_reset = repaired;
            ticks.push(t);
        }
        if reloaded {
            self.first_height = 0;
            hub.counters().discontinuities.inc();
            tracing::info!(height = h, "publishing from reloaded books: every stream restarts from the new state");
        }
        for t in &mut ticks {
            t.wanted_version = wanted.version;
        }
        hub.push_ticks(ticks);
        self.feed_store(reloaded, &fill_steps, h, fills_through);
        self.snapshots.serve(copies, self.tick_seq, self.audit_of(h, block_time, Stream::Statuses), &hub);
        let published = now_nanos();
        for &(height, line) in &lines {
            hub.stages().published(height, line, published);
        }
        hub.stages().settle(published);
        (self.height, self.diffs_height, self.fills_height) = (h, dh, fh);
        (self.diffs_seq, self.fills_seq) = (diffs_seq, fills_seq);
        if fh > 0 {
            self.candles.start_backfills(&hub, fh + 1);
        }
        (self.installs, self.wanted_version) = (installs, wanted.version);
        hub.shared().set_publisher_wants_complete(self.snapshots.waiting());
        hub.counters().passes.inc();
        hub.announce(self.pass);
    }

    /// Hands the store's writer this pass's fills steps and how far blocks are whole; never waits (a full channel
    /// drops, and the writer reads what it missed back from the node's files).
    fn feed_store(&mut self, reloaded: bool, fill_steps: &[Arc<Step>], complete: u64, fills_through: u64) {
        let Some(feed) = &mut self.store else { return };
        if reloaded {
            feed.send(crate::store::StoreMsg::Gap);
        }
        for s in fill_steps {
            feed.send(crate::store::StoreMsg::Step(s.clone()));
        }
        if fills_through != self.fills_through {
            self.fills_through = fills_through;
            feed.send(crate::store::StoreMsg::FillsThrough(fills_through));
        }
        if complete > self.height || reloaded {
            feed.send(crate::store::StoreMsg::Complete(complete));
        }
    }

    /// Coins whose wanted shapes need building this pass.
    fn targets(
        wanted: &Wanted,
        books: &Books,
        diff_steps: &[Arc<Step>],
        repaired: &[Coin],
        everything: bool,
    ) -> Vec<Coin> {
        let mids = !wanted.mids.is_empty();
        if everything {
            let mut all: FxHashSet<Coin> = wanted.coins.keys().cloned().collect();
            if mids {
                all.extend(books.coin_names());
            }
            return all.into_iter().collect();
        }
        let changed = diff_steps
            .iter()
            .flat_map(|s| match &s.data {
                StepData::Diffs(coins) => coins.as_slice(),
                StepData::Fills { .. } | StepData::Statuses(_) => &[],
            })
            .cloned()
            .chain(repaired.iter().cloned());
        distinct(changed).into_iter().filter(|c| mids || wanted.coins.contains_key(c)).collect()
    }

    /// Between two lines of one block (streaming), a coin's book may be between two events of one order: such a
    /// coin is left out of this pass and built by the first pass that finds it sane or its block complete (every
    /// complete block's book is the engine's own state).
    fn withhold_insane(&mut self, books: &Books, targets: &mut Vec<Coin>) {
        let carried: Vec<Coin> = self.withheld.drain().filter(|c| !targets.contains(c)).collect();
        targets.extend(carried);
        if books.is_complete() {
            return;
        }
        let mut held = 0;
        targets.retain(|c| {
            let sane = books.coin(c).is_none_or(CoinBook::is_sane);
            if !sane {
                self.withheld.insert(c.clone());
                held += 1;
            }
            sane
        });
        self.hub.counters().l2_withheld.add(held);
    }

    /// The block time of the last fills step published (0 when unknown).
    fn fills_block_time(&self) -> i64 {
        self.hub.shared().times_of(self.fills_height, Stream::Fills).map_or(0, |t| t.block_time)
    }

    fn audit_of(&self, height: u64, block_time: i64, line: Stream) -> Audit {
        audit_from(height, block_time, line, self.hub.shared().times_of(height, line))
    }

    fn publish_l2(&mut self, wanted: &Wanted, built: &[Built], block_time: i64, audit: Audit) {
        let time = nanos_to_millis(block_time);
        for b in built {
            let Some(w) = wanted.coins.get(&b.coin) else { continue };
            for (group, [bids, asks]) in w.l2.iter().zip(&b.l2) {
                let Some(cell) = group.depths.first().and_then(|d| d.slot.l2_cell()) else { continue };
                // Written once per aggregation, at its deepest depth; each depth's frame is cut from it when sent.
                self.hub.counters().l2_serializations.inc();
                let json = Arc::new(L2Json::new(&b.coin, time, bids, asks));
                let audit = Audit { published: now_nanos(), ..audit };
                let depths = group.depths.iter().map(|d| d.n_levels);
                self.hub.counters().l2_frames.add(cell.publish(json, depths, b.exists, audit));
            }
        }
    }

    fn publish_bbo(&mut self, wanted: &Wanted, built: &[Built], time: i64, audit: Audit) {
        for b in built {
            let Some(slot) = wanted.coins.get(&b.coin).and_then(|w| w.bbo.as_ref()) else { continue };
            let last = self.bbo_last.get(&b.coin);
            let never = slot.frame.load().is_none();
            if (last != Some(&b.bbo) || never) && (b.exists || !never) {
                let audit = Audit { published: now_nanos(), ..audit };
                slot.put(json::bbo(&b.coin, time, &b.bbo), audit);
                self.hub.counters().bbo_frames.inc();
            }
            self.bbo_last.insert(b.coin.clone(), b.bbo);
        }
    }

    /// bbo frames of `built`, then allMids; `fresh` republishes allMids even if no mid changed.
    fn publish_bbo_and_mids(&mut self, wanted: &Wanted, built: &[Built], block_time: i64, audit: Audit, fresh: bool) {
        let time = nanos_to_millis(block_time);
        let mut mids_changed = fresh;
        self.publish_bbo(wanted, built, time, audit);
        for b in built {
            if !wanted.mids.is_empty() {
                let mid = match b.bbo {
                    [Some(bid), Some(ask)] => Some(json::mid_text(bid.px, ask.px)),
                    _ => None,
                };
                let prev = match &mid {
                    Some(m) => self.mids.insert(b.coin.clone(), m.clone()),
                    None => self.mids.remove(&b.coin),
                };
                mids_changed |= prev != mid;
            }
        }
        if wanted.mids.is_empty() {
            self.mids.clear();
            return;
        }
        for (dex, slot) in &wanted.mids {
            if !mids_changed && slot.frame.load().is_some() {
                continue;
            }
            let of_dex = |c: &str| match (dex.as_deref(), c.split_once(':')) {
                (None, None) => true,
                (Some(d), Some((p, _))) => d == p,
                _ => false,
            };
            let list = self.mids.iter().filter(|(c, _)| of_dex(c)).map(|(c, m)| (&**c, m.as_str()));
            let json = json::all_mids(dex.as_deref(), list);
            let audit = Audit { published: now_nanos(), ..audit };
            slot.put(json, audit);
            self.hub.counters().mids_frames.inc();
        }
    }
}

/// Per coin, the candle intervals some connection wants.
fn candle_wants(wanted: &Wanted) -> FxHashMap<Coin, Vec<Interval>> {
    wanted.coins.iter().filter(|(_, w)| !w.candles.is_empty()).map(|(c, w)| (c.clone(), w.candles.clone())).collect()
}

fn stamped(a: Audit) -> Audit {
    Audit { published: now_nanos(), ..a }
}

fn audit_from(height: u64, block_time: i64, line: Stream, t: Option<LineTimes>) -> Audit {
    Audit { times: LineTimes { height, line, block_time, ..t.unwrap_or_default() }, published: 0 }
}

/// Copies out every target coin's wanted L2 groups and best levels (in parallel when there are many).
fn build_all(books: &Books, wanted: &Wanted, targets: &[Coin]) -> Vec<Built> {
    // A coin nobody wants any more is never built again, so its coarse L2 shapes are dropped here.
    for b in books.books().filter(|b| !b.buckets().is_empty() && !wanted.coins.contains_key(b.coin())) {
        b.buckets().keep(&[]);
    }
    let none = CoinWants::default();
    let one = |c: &Coin| build(books.coin(c), c, wanted.coins.get(c).map_or(&none, |w| &**w));
    if targets.len() >= PARALLEL_COINS {
        targets.par_iter().map(one).collect()
    } else {
        targets.iter().map(one).collect()
    }
}

/// One coin's wanted L2 groups, coarse ones from running bucket totals (kept for exactly the shapes wanted).
fn build(book: Option<&CoinBook>, coin: &Coin, w: &CoinWants) -> Built {
    let mut l2 = Vec::with_capacity(w.l2.len());
    let mut coarse = Vec::new();
    for group in &w.l2 {
        let deepest = group.depths.last().map_or(1, |d| d.n_levels);
        let params = L2Params::new(group.n_sig_figs, group.mantissa, deepest).unwrap_or(L2Params::full(deepest));
        coarse.extend(params.n_sig_figs.map(|s| (s, params.mantissa)));
        let mut sides = [Vec::new(), Vec::new()];
        if let Some(book) = book {
            l2_levels(book, &params, &mut sides);
        }
        l2.push(sides);
    }
    if let Some(book) = book {
        book.buckets().keep(&coarse);
    }
    let best = |s| book.and_then(|b| b.best(s)).map(|(px, l)| LevelAgg { px, sz: l.sz, n: l.n });
    Built { coin: coin.clone(), l2, bbo: [best(Side::Bid), best(Side::Ask)], exists: book.is_some() }
}

fn distinct(items: impl Iterator<Item = Coin>) -> Vec<Coin> {
    let mut seen = FxHashSet::default();
    items.filter(|c| seen.insert(c.clone())).collect()
}

#[cfg(test)]
#[path = "pass_tests.rs"]
mod tests;
