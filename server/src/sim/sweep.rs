//! Takers walking the opposite book: the one walk every taker of the simulator uses (its Ioc takers, TWAP slices,
//! liquidations), and the market order TWAP slices (`twap`) and liquidations (`liquidations`) place. Each trade
//! moves the book and both accounts and writes the maker's diff and status.

use super::{Market, Tag};
use crate::node::{Side, Stream};
use crate::sim::block::BlockOut;
use crate::sim::events::{self, DiffOp};
use crate::sim::orders::{Order, Tif};

/// Makers one taker may take.
const MAX_MAKERS: u32 = 20;

/// What a walk of the book left: lots not filled, the exact notional filled, makers taken.
#[derive(Clone, Copy, Debug)]
pub(super) struct Walked {
    pub left: u64,
    pub ntl: u64,
    pub makers: u32,
}

/// The order a sweep places: whose, which side, how many lots, how far past the best price, and its fills' tag.
#[derive(Clone, Copy, Debug)]
pub struct Sweep<'a> {
    pub user: u32,
    pub side: Side,
    pub sz: u64,
    pub reduce_only: bool,
    pub slippage_pct: u64,
    pub hash: &'a str,
    pub tag: Tag<'a>,
}

impl Market {
    /// Takes coin `c`'s opposite book for `s`, up to `s.slippage_pct` past its best price. Returns the lots filled
    /// and their exact notional (quote units of `10^-(px_dec + sz_dec)`).
    pub(crate) fn sweep(&mut self, c: usize, s: Sweep<'_>, out: &mut BlockOut) -> (u64, u64) {
        let maker_side = match s.side {
            Side::Bid => Side::Ask,
            Side::Ask => Side::Bid,
        };
        let Some(best) = self.books[c].best(maker_side) else { return (0, 0) };
        let limit = match maker_side {
            Side::Ask => best + best * s.slippage_pct / 100,
            Side::Bid => (best - best * s.slippage_pct / 100).max(1),
        };
        let taker = Order {
            oid: self.next_oid,
            user: s.user,
            side: s.side,
            px: limit,
            sz: s.sz,
            orig_sz: s.sz,
            timestamp: self.time_ms,
            tif: Tif::Ioc,
            reduce_only: s.reduce_only,
            cloid: None,
            trigger: None,
        };
        self.next_oid += 1;
        let walked = self.walk(c, &taker, s.hash, s.tag, out);
        (s.sz - walked.left, walked.ntl)
    }

    /// Trades `taker` against the front of coin `c`'s opposite book while makers cross its price, `MAX_MAKERS` at
    /// most: every taker of the simulator (its Ioc takers, TWAP slices, liquidations) walks the book here.
    pub(super) fn walk(&mut self, c: usize, taker: &Order, hash: &str, tag: Tag<'_>, out: &mut BlockOut) -> Walked {
        let maker_side = match taker.side {
            Side::Bid => Side::Ask,
            Side::Ask => Side::Bid,
        };
        let mut w = Walked { left: taker.sz, ntl: 0, makers: 0 };
        while w.left > 0 && w.makers < MAX_MAKERS {
            let Some(maker) = self.books[c].front(maker_side).cloned() else { break };
            let crosses = match maker_side {
                Side::Ask => maker.px <= taker.px,
                Side::Bid => maker.px >= taker.px,
            };
            if !crosses {
                break;
            }
            let q = w.left.min(maker.sz);
            w.left -= q;
            w.ntl += maker.px * q;
            self.trade(c, taker, &maker, q, hash, tag, out);
            self.maker_hit(c, &maker, q, out);
            w.makers += 1;
        }
        w
    }

    /// The maker's side of a sweep's trade in the book streams: removed and filled, or reduced.
    fn maker_hit(&mut self, c: usize, maker: &Order, q: u64, out: &mut BlockOut) {
        let (coin, user) = (&self.coins[c], &self.users[maker.user as usize]);
        if q == maker.sz {
            out.event(Stream::Diffs, |b| events::diff(b, user, coin, maker, DiffOp::Remove));
            out.event(Stream::Statuses, |b| events::status(b, &self.time, user, None, "filled", coin, maker, 0));
            self.books[c].remove(maker.oid);
        } else {
            let update = DiffOp::Update { orig_sz: maker.sz, new_sz: maker.sz - q };
            out.event(Stream::Diffs, |b| events::diff(b, user, coin, maker, update));
            self.books[c].set_size(maker.oid, maker.sz - q);
        }
    }
}
