//! hlsim's liquidations (`--write-liquidations`): now and then an open perp position is closed by the exchange
//! as a market order (method `market`), which walks the opposite book like any taker. Both fills of each of its
//! trades carry the fill's `liquidation` object `{liquidatedUser, markPx, method}`; with `--write-misc-events` the
//! liquidated user also gets a `liquidation` ledger update in `misc_events` (written by `crate::sim::misc` from
//! `Market::liquidated`), and the user's other orders resting on that coin are canceled `liquidatedCanceled`.
//!
//! Where the shapes were learned: the fill's object from docs/hl-user-channels.md §2 (WsFill's optional
//! `liquidation`), GoldRush's `HypercoreLiquidation` and `liquidationFills` pages (every fill of a liquidation
//! carries it; https://goldrush.dev/docs/api-reference/hyperliquid-websocket/liquidation-fills) and Bitquery's
//! liquidation pages (`market` vs `backstop`); the ledger delta's fields from GoldRush's `LedgerLiquidation`
//! (liquidated notional, account value, leverage type, the liquidated positions' coin and szi). Margin is not
//! modelled: which position is liquidated is drawn, not computed. The mark price is the book's mid (the
//! simulator's oracle, as its fundings use). Its own random stream: turning it on leaves blocks without a
//! liquidation as they were.

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use super::sweep::Sweep;
use super::{Market, Tag};
use crate::node::{Side, Stream};
use crate::sim::block::BlockOut;
use crate::sim::events::{self, DiffOp, LiquidationMark};
use crate::sim::fmt::hex_string;

/// A liquidation in one block of this many, on average.
const ONE_IN: u32 = 8;
/// A liquidation order takes the book at most this many percent past its best price.
const SLIPPAGE_PCT: u64 = 5;

/// What `misc` writes of a liquidation as the liquidated user's ledger update.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Liquidated {
    pub user: u32,
    pub coin: usize,
    /// The position before, in lots (signed).
    pub szi: i64,
    /// The lots closed.
    pub closed: u64,
    pub mark_px: u64,
    pub hash: String,
}

#[derive(Debug)]
pub struct LiquidationSim {
    rng: Xoshiro256PlusPlus,
}

impl LiquidationSim {
    pub fn new(seed: u64) -> LiquidationSim {
        LiquidationSim { rng: Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x6c69_7164) }
    }

    /// Maybe liquidates one open perp position in this block. Call after `Market::block` built the block.
    pub fn block(&mut self, m: &mut Market, out: &mut BlockOut) {
        if !self.rng.random_ratio(1, ONE_IN) {
            return;
        }
        let positions = m.accounts.perp_positions(&m.coins);
        if positions.is_empty() {
            return;
        }
        let (user, coin, szi) = positions[self.rng.random_range(0..positions.len())];
        let mark =
            LiquidationMark { liquidated_user: m.users[user as usize].clone(), mark_px: m.mid(coin), method: "market" };
        let hash = hex_string(&self.rng.random::<[u8; 32]>());
        let sweep = Sweep {
            user,
            side: if szi > 0 { Side::Ask } else { Side::Bid },
            sz: szi.unsigned_abs(),
            reduce_only: true,
            slippage_pct: SLIPPAGE_PCT,
            hash: &hash,
            tag: Tag::Liquidation(&mark),
        };
        let (closed, _) = m.sweep(coin, sweep, out);
        if closed > 0 {
            m.liquidated.push(Liquidated { user, coin, szi, closed, mark_px: mark.mark_px, hash });
            m.cancel_resting(coin, user, "liquidatedCanceled", out);
        }
    }
}

impl Market {
    /// Cancels every order `user` rests on coin `c` with `status`, as the exchange does to a liquidated user's
    /// orders (`liquidatedCanceled`, one of the cancels that are not the user's: docs/hl-user-channels.md §2).
    fn cancel_resting(&mut self, c: usize, user: u32, status: &str, out: &mut BlockOut) {
        let oids: Vec<u64> = [Side::Bid, Side::Ask]
            .into_iter()
            .flat_map(|side| self.books[c].orders(side).filter(|o| o.user == user).map(|o| o.oid).collect::<Vec<_>>())
            .collect();
        for oid in oids {
            let Some(o) = self.books[c].remove(oid) else { continue };
            let (coin, name) = (&self.coins[c], &self.users[user as usize]);
            out.event(Stream::Diffs, |b| events::diff(b, name, coin, &o, DiffOp::Remove));
            out.event(Stream::Statuses, |b| events::status(b, &self.time, name, None, status, coin, &o, o.sz));
        }
    }
}
