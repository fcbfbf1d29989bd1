//! A market order walking the opposite book, shared by the simulator's orders that are not placed by its ordinary
//! takers: TWAP slices (`twap`) and liquidations (`liquidations`). Each trade moves the book and both accounts
//! and writes the maker's diff and status, as the ordinary takers' trades do.

use super::{Market, Tag};
use crate::node::{Side, Stream};
use crate::sim::block::BlockOut;
use crate::sim::events::{self, DiffOp};
use crate::sim::orders::{Order, Tif};

/// Makers one sweep may take, as the simulator's other takers.
const MAX_MAKERS: u32 = 20;

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
        let (mut left, mut ntl, mut makers) = (s.sz, 0, 0);
        while left > 0 && makers < MAX_MAKERS {
            let Some(maker) = self.books[c].front(maker_side).cloned() else { break };
            let crosses = match maker_side {
                Side::Ask => maker.px <= limit,
                Side::Bid => maker.px >= limit,
            };
            if !crosses {
                break;
            }
            let q = left.min(maker.sz);
            left -= q;
            ntl += maker.px * q;
            self.trade(c, &taker, &maker, q, s.hash, s.tag, out);
            self.maker_hit(c, &maker, q, out);
            makers += 1;
        }
        (s.sz - left, ntl)
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
