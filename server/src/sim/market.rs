//! The simulated market: every coin's book, the user pool, and what happens in one block.
//!
//! A block is a sequence of actions on random coins (maker orders, cancels, Ioc takers walking the book) until
//! the block's diff budget is spent; each action also emits its share of rejected-order noise (the bulk of the
//! real status stream). All content comes from one seeded RNG, so a seed gives the same events every run; only
//! the timestamps follow the wall clock.

#[path = "liquidations.rs"]
pub mod liquidations;
#[path = "sweep.rs"]
mod sweep;
#[path = "triggers.rs"]
pub mod triggers;
#[path = "twap.rs"]
pub mod twap;

use std::sync::Arc;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use super::accounts::{Accounts, TradeSide};
use super::block::BlockOut;
use super::coins::{CoinSpec, Kind};
use super::events::{self, DiffOp, FillSide, LiquidationMark};
use super::fmt::{hex_string, node_time};
use super::orders::{Order, SimBook, Tif};
use crate::node::{Side, Stream};

/// Raw diffs per block over the whole market at `--rate 1` (the mainnet average).
pub const DIFFS_PER_BLOCK: u32 = 450;
const FIRST_OID: u64 = 412_000_000_000;
/// Default size of the user pool orders are drawn from.
pub const USERS: usize = 4_000;

/// What a trade's fills carry beyond the trade itself.
#[derive(Clone, Copy, Debug)]
pub enum Tag<'a> {
    Plain,
    /// A TWAP slice: the taker's (owner's) fill carries the id.
    Twap(u64),
    /// A liquidation: both fills carry the mark.
    Liquidation(&'a LiquidationMark),
}

/// How the market is set up.
#[derive(Clone, Debug)]
pub struct MarketConfig {
    pub coins: Vec<CoinSpec>,
    pub btc_orders: usize,
    pub orders_per_coin: usize,
    /// Mean raw diffs per block.
    pub diffs_per_block: u32,
    /// Rejected statuses per raw diff.
    pub reject_ratio: u32,
    pub seed: u64,
    /// Wall clock (ms) the initial orders' timestamps lead up to.
    pub start_ms: u64,
    /// Distinct users placing orders (a small pool gives each user many events, as tests of user streams want).
    pub users: usize,
}

#[derive(Debug)]
pub struct Market {
    pub coins: Vec<CoinSpec>,
    pub books: Vec<SimBook>,
    pub users: Arc<Vec<String>>,
    /// What each user owns, moved by the fills written (the info server's account answers read it).
    pub accounts: Accounts,
    /// Trigger orders waiting for their trigger (`triggers`).
    pub waiting: triggers::Waiting,
    /// This block's liquidations, for `misc` to write as ledger updates (emptied as each block starts).
    pub liquidated: Vec<liquidations::Liquidated>,
    rng: Xoshiro256PlusPlus,
    next_oid: u64,
    target: Vec<usize>,
    diffs_per_block: u32,
    reject_ratio: u32,
    /// Block time formatted, and in ms, for the block being built.
    time: Vec<u8>,
    time_ms: u64,
}

/// `--rate` scaled diff budget (the only float in the simulator's content path).
#[allow(clippy::float_arithmetic)]
pub fn scaled_diffs(rate: f64) -> u32 {
    (f64::from(DIFFS_PER_BLOCK) * rate.max(0.0)).round() as u32
}

impl Market {
    pub fn new(cfg: MarketConfig) -> Market {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed);
        let users = Arc::new((0..cfg.users.max(1)).map(|_| hex_string(&rng.random::<[u8; 20]>())).collect());
        let n_coins = cfg.coins.len();
        let mut m = Market {
            books: vec![SimBook::default(); n_coins],
            target: Vec::new(),
            coins: cfg.coins,
            users,
            accounts: Accounts::default(),
            waiting: triggers::Waiting::new(n_coins, cfg.seed),
            liquidated: Vec::new(),
            rng,
            next_oid: FIRST_OID,
            diffs_per_block: cfg.diffs_per_block,
            reject_ratio: cfg.reject_ratio,
            time: Vec::new(),
            time_ms: cfg.start_ms,
        };
        for c in 0..m.coins.len() {
            let n = if m.coins[c].name == "BTC" { cfg.btc_orders } else { cfg.orders_per_coin };
            m.seed_book(c, n, cfg.start_ms);
            m.target.push(n);
        }
        m
    }

    /// An independent copy, for building blocks outside the producer (tests).
    #[cfg(test)]
    #[must_use]
    pub fn clone_for_test(&self) -> Market {
        Market {
            coins: self.coins.clone(),
            books: self.books.clone(),
            users: self.users.clone(),
            accounts: self.accounts.clone(),
            waiting: self.waiting.clone(),
            liquidated: Vec::new(),
            rng: self.rng.clone(),
            next_oid: self.next_oid,
            target: self.target.clone(),
            diffs_per_block: self.diffs_per_block,
            reject_ratio: self.reject_ratio,
            time: Vec::new(),
            time_ms: 0,
        }
    }

    /// The latest block's time in ms (the start's before the first block): the L1 time `exchangeStatus` reports.
    pub fn time_ms(&self) -> u64 {
        self.time_ms
    }

    pub fn order_count(&self) -> usize {
        self.books.iter().map(SimBook::len).sum()
    }

    /// Fills coin `c` with `n` resting orders, half a side, several per level, walking away from the mid.
    fn seed_book(&mut self, c: usize, n: usize, start_ms: u64) {
        let mid = self.coins[c].mid;
        let total = n.max(1) as u64;
        for side in [Side::Bid, Side::Ask] {
            let mut px = match side {
                Side::Bid => mid - 1,
                Side::Ask => mid + 1,
            };
            let mut left = n / 2;
            while left > 0 && px > 1 {
                let here = self.rng.random_range(1..=12usize).min(left);
                for _ in 0..here {
                    let i = self.next_oid - FIRST_OID;
                    let ts = start_ms.saturating_sub(3_600_000) + i * 3_600_000 / total;
                    let mut o = self.new_order(c, side, px, ts);
                    o.orig_sz = o.sz + if self.rng.random_ratio(1, 4) { self.rng.random_range(1..=o.sz) } else { 0 };
                    self.books[c].insert(o);
                }
                left -= here;
                let gap = self.rng.random_range(1..=2);
                px = match side {
                    Side::Bid => px.saturating_sub(gap),
                    Side::Ask => px + gap,
                };
            }
        }
    }

    /// A fresh resting-type order (Alo or Gtc) with a new oid.
    fn new_order(&mut self, c: usize, side: Side, px: u64, ts: u64) -> Order {
        let lot = self.coins[c].lot;
        let sz = if self.rng.random_ratio(1, 20) {
            self.rng.random_range(lot..=lot * 20)
        } else {
            self.rng.random_range(1..=lot * 2)
        };
        let oid = self.next_oid;
        self.next_oid += 1;
        let user = self.rng.random_range(0..self.users.len() as u32);
        self.accounts.request(user);
        Order {
            oid,
            user,
            side,
            px,
            sz,
            orig_sz: sz,
            timestamp: ts,
            tif: if self.rng.random_ratio(17, 20) { Tif::Alo } else { Tif::Gtc },
            reduce_only: false,
            cloid: self.rng.random_ratio(3, 5).then(|| self.rng.random()),
            trigger: None,
        }
    }

    /// Coin `c`'s mid in ticks (the starting mid when a side is empty): the simulator's oracle price.
    pub fn mid(&self, c: usize) -> u64 {
        let book = &self.books[c];
        match (book.best(Side::Bid), book.best(Side::Ask)) {
            (Some(b), Some(a)) => u64::midpoint(a, b),
            _ => self.coins[c].mid,
        }
    }

    /// Builds block `height` at `block_time` (ns) into `out`, changing the books.
    pub fn block(&mut self, height: u64, block_time: i64, out: &mut BlockOut) {
        out.reset(height, block_time);
        self.liquidated.clear();
        self.time.clear();
        node_time(&mut self.time, block_time);
        self.time_ms = (block_time / 1_000_000) as u64;
        let mean = self.diffs_per_block;
        let budget = if mean == 0 { 0 } else { self.rng.random_range(mean / 2..=mean + mean / 2) };
        let mut diffs = 0;
        while diffs < budget {
            let c = self.pick_coin();
            let n = self.action(c, out) + self.trigger_action(c, out);
            for _ in 0..n * self.reject_ratio {
                self.reject(c, out);
            }
            diffs += n.max(1);
        }
    }

    /// A coin, by activity weight.
    fn pick_coin(&mut self) -> usize {
        let total: u32 = self.coins.iter().map(|c| c.weight).sum();
        let mut pick = self.rng.random_range(0..total.max(1));
        for (i, c) in self.coins.iter().enumerate() {
            if pick < c.weight {
                return i;
            }
            pick -= c.weight;
        }
        0
    }

    /// One action on coin `c`; returns how many raw diffs it wrote.
    fn action(&mut self, c: usize, out: &mut BlockOut) -> u32 {
        let len = self.books[c].len() as i64;
        let target = self.target[c].max(1) as i64;
        let lean = ((target - len) * 20 / target).clamp(-20, 20);
        let r = self.rng.random_range(0..100i64);
        if r < 6 {
            self.taker(c, out)
        } else if r < 53 + lean || self.books[c].is_empty() {
            self.maker(c, out)
        } else {
            self.cancel(c, out)
        }
    }

    /// A random side, or the other one when it is empty.
    fn side_with_orders(&mut self, c: usize) -> Side {
        let side = if self.rng.random() { Side::Bid } else { Side::Ask };
        if self.books[c].level_count(side) == 0 { other(side) } else { side }
    }

    /// Levels from the top: mostly near it (geometric), sometimes anywhere.
    fn depth(&mut self, levels: usize) -> usize {
        if levels == 0 {
            return 0;
        }
        if self.rng.random_ratio(1, 20) {
            return self.rng.random_range(0..levels);
        }
        let mut k = 0;
        while k + 1 < levels && self.rng.random_ratio(7, 8) {
            k += 1;
        }
        k
    }

    fn maker(&mut self, c: usize, out: &mut BlockOut) -> u32 {
        let side = if self.rng.random() { Side::Bid } else { Side::Ask };
        let book = &self.books[c];
        let (bb, ba) = (book.best(Side::Bid), book.best(Side::Ask));
        let mid = self.coins[c].mid;
        let levels = book.level_count(side);
        let improve = matches!((bb, ba), (Some(b), Some(a)) if a - b > 1) && self.rng.random_ratio(1, 4);
        let offset = if improve { 0 } else { self.depth(levels + 5) as u64 * self.rng.random_range(1..=2) };
        let px = match side {
            Side::Bid => {
                let top = bb.map_or(ba.unwrap_or(mid + 1) - 1, |b| if improve { b + 1 } else { b });
                top.saturating_sub(offset).max(1)
            }
            Side::Ask => {
                let top = ba.map_or(bb.unwrap_or(mid - 1) + 1, |a| if improve { a - 1 } else { a });
                top + offset
            }
        };
        let o = self.new_order(c, side, px, self.time_ms);
        let hash = hex_string(&self.rng.random::<[u8; 32]>());
        let coin = &self.coins[c];
        let user = &self.users[o.user as usize];
        out.event(Stream::Diffs, |b| events::diff(b, user, coin, &o, DiffOp::New { sz: o.sz }));
        out.event(Stream::Statuses, |b| events::status(b, &self.time, user, Some(&hash), "open", coin, &o, o.sz));
        self.books[c].insert(o);
        1
    }

    fn cancel(&mut self, c: usize, out: &mut BlockOut) -> u32 {
        let side = self.side_with_orders(c);
        let k = self.depth(self.books[c].level_count(side));
        let Some(level) = self.books[c].level(side, k) else { return 0 };
        let oid = level[self.rng.random_range(0..level.len())];
        let Some(o) = self.books[c].remove(oid) else { return 0 };
        self.accounts.request(o.user);
        let coin = &self.coins[c];
        let user = &self.users[o.user as usize];
        out.event(Stream::Diffs, |b| events::diff(b, user, coin, &o, DiffOp::Remove));
        out.event(Stream::Statuses, |b| events::status(b, &self.time, user, None, "canceled", coin, &o, o.sz));
        1
    }

    /// An Ioc order that crosses: fills against the front of the opposite book until done or past its limit.
    fn taker(&mut self, c: usize, out: &mut BlockOut) -> u32 {
        let maker_side = self.side_with_orders(c);
        let Some(best) = self.books[c].best(maker_side) else { return 0 };
        let slip = self.rng.random_range(0..4);
        let limit = match maker_side {
            Side::Ask => best + slip,
            Side::Bid => best.saturating_sub(slip).max(1),
        };
        let mut taker = self.new_order(c, other(maker_side), limit, self.time_ms);
        taker.tif = Tif::Ioc;
        taker.sz = self.rng.random_range(1..=self.coins[c].lot * 3);
        taker.orig_sz = taker.sz;
        let hash = hex_string(&self.rng.random::<[u8; 32]>());
        let walked = self.walk(c, &taker, &hash, Tag::Plain, out);
        let (status, sz) = if walked.left == 0 { ("filled", 0) } else { ("canceled", walked.left) };
        let (user, coin) = (&self.users[taker.user as usize], &self.coins[c]);
        out.event(Stream::Statuses, |b| events::status(b, &self.time, user, None, status, coin, &taker, sz));
        walked.makers
    }

    /// The two fills of one trade (same tid; taker crossed), in random order as the node does. Each side moves its
    /// user's account in the order the fills are written, so every fill's startPosition is the previous one's end.
    /// `tag`: what the fills carry beyond the trade (a TWAP slice's id on the taker's, a liquidation's mark on both).
    #[allow(clippy::too_many_arguments)]
    fn trade(&mut self, c: usize, taker: &Order, maker: &Order, q: u64, hash: &str, tag: Tag<'_>, out: &mut BlockOut) {
        let coin = &self.coins[c];
        let notional = u128::from(maker.px) * u128::from(q) * 1_000_000 / 10u128.pow(coin.px_dec + coin.sz_dec);
        let notional = notional.min(i64::MAX as u128) as i64;
        let tid = self.rng.random_range(1u64 << 40..1u64 << 50);
        let maker_first = self.rng.random();
        let mut sides = [(taker, true), (maker, false)];
        if maker_first {
            sides.reverse();
        }
        for (o, crossed) in sides {
            let fee = if crossed { notional * 45 / 100_000 } else { -(notional * 3 / 100_000) };
            let buys = o.side == Side::Bid;
            let t = TradeSide { user: o.user, coin: c, buys, px: maker.px, sz: q, crossed, fee };
            let done = self.accounts.apply(coin, t);
            let f = FillSide {
                user: &self.users[o.user as usize],
                order: o,
                px: maker.px,
                sz: q,
                side: o.side,
                time_ms: self.time_ms,
                start_position: done.start,
                dir: done.dir,
                closed_pnl: done.closed_pnl,
                hash,
                crossed,
                fee,
                tid,
                twap_id: match tag {
                    Tag::Twap(id) if crossed => Some(id),
                    _ => None,
                },
                liquidation: match tag {
                    Tag::Liquidation(l) => Some(l),
                    _ => None,
                },
            };
            out.event(Stream::Fills, |b| events::fill(b, coin, &f));
        }
    }

    /// One rejected order on coin `c`: never touches the book, but uses an oid like the real thing.
    fn reject(&mut self, c: usize, out: &mut BlockOut) {
        let coin = &self.coins[c];
        let side = if self.rng.random() { Side::Bid } else { Side::Ask };
        let book = &self.books[c];
        let near = book.best(other(side)).or(book.best(side)).unwrap_or(coin.mid);
        let kind = self.rng.random_range(0..100u32);
        let spot = matches!(coin.kind, Kind::Spot { .. });
        let (status, tif, px, reduce_only) = if kind < 87 || (spot && kind < 95) {
            // An Alo order that would cross the book.
            let px = match side {
                Side::Bid => near + self.rng.random_range(0..3),
                Side::Ask => near.saturating_sub(self.rng.random_range(0..3)).max(1),
            };
            ("badAloPxRejected", Tif::Alo, px, false)
        } else if kind < 95 {
            ("perpMarginRejected", Tif::Ioc, near, false)
        } else if kind < 99 {
            ("iocCancelRejected", Tif::Ioc, (near * 4 / 5).max(1), false)
        } else {
            ("minTradeNtlRejected", Tif::Gtc, near, true)
        };
        let sz = self.rng.random_range(1..=coin.lot * 2);
        let user = self.rng.random_range(0..self.users.len() as u32);
        self.accounts.request(user);
        let o = Order {
            oid: self.next_oid,
            user,
            side,
            px,
            sz,
            orig_sz: sz,
            timestamp: self.time_ms,
            tif,
            reduce_only,
            cloid: self.rng.random_ratio(7, 10).then(|| self.rng.random()),
            trigger: None,
        };
        self.next_oid += 1;
        let user = &self.users[o.user as usize];
        out.event(Stream::Statuses, |b| events::status(b, &self.time, user, None, status, coin, &o, sz));
    }
}

fn other(side: Side) -> Side {
    match side {
        Side::Bid => Side::Ask,
        Side::Ask => Side::Bid,
    }
}
