//! What each simulated user owns, moved only by the fills the simulator writes: per coin a signed size with its
//! entry cost, USDC per perp dex and in spot, and the user's traded volume and request count.
//!
//! The market applies each fill here before writing it, so a fill's `startPosition`, `dir` and `closedPnl` come
//! from the same ledger the info server answers `clearinghouseState` and `spotClearinghouseState` from: a client
//! cross-checking the two finds them consistent. Integers only: sizes in lots, costs in ticks × lots, USDC in
//! micro-USDC. Every coin has `px_dec + sz_dec ≤ 6`, so a notional converts to micro-USDC exactly.

use rustc_hash::FxHashMap;

use super::coins::{CoinSpec, Kind};

/// Micro-USDC each pool user has deposited on every perp dex and in spot at start (1M USDC), so the random flow of
/// fills never drives an account negative.
pub const DEPOSIT: i64 = 1_000_000 * 1_000_000;
/// Whole base tokens of every spot pair each pool user holds at start (bought at the coin's starting mid), so
/// random sells never drive a balance negative.
pub const SPOT_START_TOKENS: u64 = 1_000_000;

/// A size in one coin: perps a signed position, spot the base token balance.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Holding {
    /// Lots, signed (negative: short).
    pub sz: i64,
    /// What the open size cost at entry, ticks × lots (of |sz|): entry price = cost / |sz|.
    pub cost: u128,
}

impl Holding {
    /// Where a user starts in coin `c`: flat on perps, `SPOT_START_TOKENS` of a spot pair's base token.
    pub fn start(c: &CoinSpec) -> Holding {
        match c.kind {
            Kind::Spot { .. } => {
                let sz = SPOT_START_TOKENS * 10u64.pow(c.sz_dec);
                Holding { sz: sz as i64, cost: u128::from(sz) * u128::from(c.mid) }
            }
            Kind::Perp | Kind::Builder(_) => Holding::default(),
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct Account {
    /// Micro-USDC by perp dex ("" the main one); a dex never traded on holds `DEPOSIT`.
    usdc: FxHashMap<&'static str, i64>,
    pub spot_usdc: i64,
    /// By coin index (`Market::coins`); a coin never traded is `Holding::start`.
    holdings: FxHashMap<usize, Holding>,
    /// Micro-USDC traded as taker and as maker.
    pub cross_volume: i128,
    pub add_volume: i128,
    /// Orders placed, canceled or rejected: the actions the exchange's rate limit counts.
    pub requests: u64,
}

impl Account {
    /// A pool user's account before any fill: `DEPOSIT` everywhere.
    pub fn fresh() -> Account {
        Account { spot_usdc: DEPOSIT, ..Account::default() }
    }

    /// Micro-USDC on perp dex `dex`.
    pub fn usdc(&self, dex: &str) -> i64 {
        self.usdc.get(dex).copied().unwrap_or(DEPOSIT)
    }

    /// The holding in coin `c` (index `i`).
    pub fn holding(&self, i: usize, c: &CoinSpec) -> Holding {
        self.holdings.get(&i).copied().unwrap_or_else(|| Holding::start(c))
    }
}

/// What one fill did to its user, as the fill line reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FillEffect {
    /// Holding before the fill, lots.
    pub start: i64,
    pub dir: &'static str,
    /// Micro-USDC realized against the entry cost.
    pub closed_pnl: i64,
}

/// One side of a trade, as `Accounts::apply` takes it.
#[derive(Clone, Copy, Debug)]
pub struct TradeSide {
    pub user: u32,
    pub coin: usize,
    pub buys: bool,
    pub px: u64,
    pub sz: u64,
    pub crossed: bool,
    /// Micro-USDC (negative: a rebate).
    pub fee: i64,
}

/// Every pool user's account (created on first use).
#[derive(Clone, Debug, Default)]
pub struct Accounts {
    by_user: FxHashMap<u32, Account>,
    /// Micro-USDC traded on the whole exchange (each trade once).
    pub exchange_volume: i128,
}

/// `ticks × lots` of coin `c` in micro-USDC (exact: px_dec + sz_dec ≤ 6).
pub fn micro(c: &CoinSpec, units: i128) -> i128 {
    debug_assert!(c.px_dec + c.sz_dec <= 6, "{} has more than 6 decimals of notional", c.name);
    units * 10i128.pow(6u32.saturating_sub(c.px_dec + c.sz_dec))
}

impl Accounts {
    pub fn get(&self, user: u32) -> Option<&Account> {
        self.by_user.get(&user)
    }

    fn account(&mut self, user: u32) -> &mut Account {
        self.by_user.entry(user).or_insert_with(Account::fresh)
    }

    /// Every open perp position as (user, coin index, lots), by user then coin: funding is paid on these.
    pub fn perp_positions(&self, coins: &[CoinSpec]) -> Vec<(u32, usize, i64)> {
        let mut out: Vec<(u32, usize, i64)> = self
            .by_user
            .iter()
            .flat_map(|(&u, a)| a.holdings.iter().map(move |(&c, h)| (u, c, h.sz)))
            .filter(|&(_, c, sz)| sz != 0 && coins.get(c).is_some_and(|c| !matches!(c.kind, Kind::Spot { .. })))
            .collect();
        out.sort_unstable();
        out
    }

    /// Moves `user`'s perp USDC on `dex` by `micro` (fundings, deposits, transfers).
    pub fn credit(&mut self, user: u32, dex: &'static str, micro: i64) {
        *self.account(user).usdc.entry(dex).or_insert(DEPOSIT) += micro;
    }

    /// Moves `user`'s spot USDC by `micro`.
    pub fn credit_spot(&mut self, user: u32, micro: i64) {
        self.account(user).spot_usdc += micro;
    }

    /// Counts one order action of `user` (placed, canceled, rejected).
    pub fn request(&mut self, user: u32) {
        self.account(user).requests += 1;
    }

    /// Moves `t`'s user by one fill of coin `c`: its size, entry cost and USDC (closed pnl and fee; spot the
    /// notional too). Returns what the fill line says about it.
    pub fn apply(&mut self, c: &CoinSpec, t: TradeSide) -> FillEffect {
        let notional = micro(c, i128::from(t.px) * i128::from(t.sz));
        if t.crossed {
            self.exchange_volume += notional;
        }
        let acct = self.account(t.user);
        let h = acct.holdings.entry(t.coin).or_insert_with(|| Holding::start(c));
        let start = h.sz;
        let closing = start != 0 && (start > 0) != t.buys;
        let (closed, pnl_units) = if closing {
            let open = u128::from(start.unsigned_abs());
            let closed = u128::from(t.sz).min(open);
            // The closed share of the entry cost (rounded down; the rest stays with what is still open).
            let basis = h.cost * closed / open;
            h.cost -= basis;
            let at_px = (u128::from(t.px) * closed) as i128;
            (closed, if start > 0 { at_px - basis as i128 } else { basis as i128 - at_px })
        } else {
            (0, 0)
        };
        h.cost += u128::from(t.px) * (u128::from(t.sz) - closed);
        let signed = if t.buys { t.sz as i64 } else { -(t.sz as i64) };
        h.sz = start + signed;
        if h.sz == 0 {
            h.cost = 0;
        }
        let end = h.sz;
        let closed_pnl = micro(c, pnl_units) as i64;
        if t.crossed {
            acct.cross_volume += notional;
        } else {
            acct.add_volume += notional;
        }
        let dir = match c.kind {
            Kind::Spot { .. } => {
                acct.spot_usdc += (if t.buys { -notional } else { notional }) as i64 - t.fee;
                if t.buys { "Buy" } else { "Sell" }
            }
            Kind::Perp | Kind::Builder(_) => {
                let dex = match c.kind {
                    Kind::Builder(d) => d,
                    _ => "",
                };
                *acct.usdc.entry(dex).or_insert(DEPOSIT) += closed_pnl - t.fee;
                perp_dir(start, end)
            }
        };
        FillEffect { start, dir, closed_pnl }
    }
}

/// The exchange's `dir` of a perp fill from the position before and after it.
fn perp_dir(start: i64, end: i64) -> &'static str {
    match (start.signum(), end.signum()) {
        (1, -1) => "Long > Short",
        (-1, 1) => "Short > Long",
        (1, _) if end < start => "Close Long",
        (-1, _) if end > start => "Close Short",
        (_, 1) => "Open Long",
        _ => "Open Short",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::coins::universe;

    fn fill(a: &mut Accounts, c: &CoinSpec, buys: bool, px: u64, sz: u64) -> FillEffect {
        a.apply(c, TradeSide { user: 7, coin: 0, buys, px, sz, crossed: true, fee: 0 })
    }

    #[test]
    fn positions_open_close_and_flip_with_exact_pnl() {
        let btc = universe(3).remove(0);
        let mut a = Accounts::default();
        // 0.001 BTC at 80000, then 0.001 more at 82000: entry 81000.
        assert_eq!(fill(&mut a, &btc, true, 80_000, 100), FillEffect { start: 0, dir: "Open Long", closed_pnl: 0 });
        fill(&mut a, &btc, true, 82_000, 100);
        assert_eq!(a.get(7).unwrap().holding(0, &btc), Holding { sz: 200, cost: 16_200_000 });
        // Sell 0.003 at 81500: closes 0.002 (+1.0 USDC) and opens 0.001 short at 81500.
        let flip = fill(&mut a, &btc, false, 81_500, 300);
        assert_eq!(flip, FillEffect { start: 200, dir: "Long > Short", closed_pnl: 1_000_000 });
        assert_eq!(a.get(7).unwrap().holding(0, &btc), Holding { sz: -100, cost: 8_150_000 });
        assert_eq!(a.get(7).unwrap().usdc(""), DEPOSIT + 1_000_000);
        let close = fill(&mut a, &btc, true, 81_000, 100);
        assert_eq!(close, FillEffect { start: -100, dir: "Close Short", closed_pnl: 500_000 });
        assert_eq!(a.get(7).unwrap().holding(0, &btc), Holding::default());
    }
}
