//! The simulated universe: which coins exist, their tick and lot sizes, and the meta/spotMeta answers about them
//! (the market data beside them is `ctxs`).
//!
//! Prices are integer ticks (`px_dec` decimals) and sizes integer lots (`sz_dec` decimals), chosen like the real
//! exchange (five significant figures at the coin's price, perps limited to 6 - szDecimals price decimals).

/// What kind of book a coin is; decides its name shape and which meta answer lists it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    Perp,
    /// A builder-deployed perp of dex `dex` (`dex:COIN`).
    Builder(&'static str),
    /// Spot pair `@index` of base token `base` (index into `TOKENS`).
    Spot {
        index: u32,
        base: usize,
    },
}

#[derive(Clone, Debug)]
pub struct CoinSpec {
    pub name: &'static str,
    pub kind: Kind,
    /// Decimals of a price tick (0 → tick 1.0).
    pub px_dec: u32,
    /// Size decimals (szDecimals).
    pub sz_dec: u32,
    /// Starting mid price in ticks.
    pub mid: u64,
    pub max_leverage: u32,
    /// Relative share of the market's activity.
    pub weight: u32,
    /// Typical order size in lots.
    pub lot: u64,
}

/// A spot token: (name, szDecimals, weiDecimals, index).
pub const TOKENS: [(&str, u32, u32, u32); 3] = [("USDC", 8, 8, 0), ("PURR", 0, 5, 1), ("HYPE", 2, 8, 150)];

/// `(px_dec, sz_dec)` travel together: they are the coin's precision.
const fn spec(
    name: &'static str,
    kind: Kind,
    (px_dec, sz_dec): (u32, u32),
    mid: u64,
    max_leverage: u32,
    weight: u32,
    lot: u64,
) -> CoinSpec {
    CoinSpec { name, kind, px_dec, sz_dec, mid, max_leverage, weight, lot }
}

/// Every coin the simulator knows, in the order `--coins N` takes them (so any N ≥ 3 has a spot and a builder
/// perp).
fn all() -> Vec<CoinSpec> {
    use Kind::{Builder, Perp, Spot};
    vec![
        spec("BTC", Perp, (0, 5), 81_308, 40, 30, 2_000),
        spec("@107", Spot { index: 107, base: 2 }, (3, 2), 40_125, 1, 4, 500),
        spec("xyz:GOLD", Builder("xyz"), (1, 4), 33_425, 20, 3, 20),
        spec("ETH", Perp, (1, 4), 30_125, 25, 20, 500),
        spec("SOL", Perp, (2, 2), 15_031, 20, 10, 300),
        spec("HYPE", Perp, (3, 2), 40_118, 10, 10, 500),
        spec("DOGE", Perp, (5, 0), 17_012, 10, 6, 2_000),
        spec("kPEPE", Perp, (6, 0), 10_211, 10, 4, 50_000),
        spec("@1", Spot { index: 1, base: 1 }, (5, 0), 12_345, 1, 2, 300),
        spec("XRP", Perp, (4, 0), 25_013, 20, 5, 400),
        spec("AVAX", Perp, (3, 2), 22_410, 10, 3, 300),
        spec("LINK", Perp, (3, 1), 14_025, 10, 3, 200),
        spec("xyz:SILVER", Builder("xyz"), (3, 2), 32_150, 10, 2, 300),
    ]
}

/// The first `n` coins (at least 3, at most `MAX_COINS`): the named ones, then quiet perps `C13`, `C14`, … of the
/// least weight, so a universe of hundreds of coins (mainnet lists about 400) has coins that most blocks leave alone.
pub fn universe(n: usize) -> Vec<CoinSpec> {
    let mut v = all();
    let n = n.clamp(3, MAX_COINS);
    v.truncate(n);
    for i in v.len()..n {
        // Names must be `'static` like the named ones'; a simulator makes each at most once per universe.
        let name: &'static str = Box::leak(format!("C{i}").into_boxed_str());
        v.push(spec(name, Kind::Perp, (2, 2), 10_000 + i as u64 * 7, 10, 1, 100));
    }
    v
}

/// How many coins `universe` can give at most.
pub const MAX_COINS: usize = 1_000;

/// How many named coins there are (the rest are generated).
pub fn named_coins() -> usize {
    all().len()
}

/// Whether perp dex `dex` (None or "" for the main one) lists `c`; `meta` and `metaAndAssetCtxs` answer these.
pub fn on_perp_dex(c: &CoinSpec, dex: Option<&str>) -> bool {
    match (c.kind, dex) {
        (Kind::Perp, None | Some("")) => true,
        (Kind::Builder(d), Some(want)) => d == want,
        _ => false,
    }
}

/// `{"type":"meta"}` (main dex) or `{"type":"meta","dex":d}`. Margin tables are the exchange's simple kind, one
/// tier whose id is its max leverage; every dex's collateral is USDC (token 0), which ccxt reads to quote
/// builder perps.
pub fn meta(coins: &[CoinSpec], dex: Option<&str>) -> serde_json::Value {
    let listed: Vec<&CoinSpec> = coins.iter().filter(|c| on_perp_dex(c, dex)).collect();
    let universe: Vec<serde_json::Value> = listed
        .iter()
        .map(|c| {
            serde_json::json!({"name": c.name, "szDecimals": c.sz_dec, "maxLeverage": c.max_leverage,
                "marginTableId": c.max_leverage})
        })
        .collect();
    let mut leverages: Vec<u32> = listed.iter().map(|c| c.max_leverage).collect();
    leverages.sort_unstable();
    leverages.dedup();
    let tables: Vec<serde_json::Value> = leverages
        .iter()
        .map(|&l| {
            let tiers = [serde_json::json!({"lowerBound": "0.0", "maxLeverage": l})];
            serde_json::json!([l, {"description": "", "marginTiers": tiers}])
        })
        .collect();
    serde_json::json!({ "universe": universe, "marginTables": tables, "collateralToken": TOKENS[0].3 })
}

/// `{"type":"spotMeta"}`.
pub fn spot_meta(coins: &[CoinSpec]) -> serde_json::Value {
    let universe: Vec<serde_json::Value> = coins
        .iter()
        .filter_map(|c| match c.kind {
            Kind::Spot { index, base } => Some(serde_json::json!({
                "name": c.name,
                "tokens": [TOKENS[base].3, TOKENS[0].3],
                "index": index,
                "isCanonical": false,
            })),
            _ => None,
        })
        .collect();
    let tokens: Vec<serde_json::Value> = TOKENS
        .iter()
        .map(|&(name, sz, wei, index)| {
            serde_json::json!({
                "name": name,
                "szDecimals": sz,
                "weiDecimals": wei,
                "index": index,
                "tokenId": format!("0x{:032x}", u128::from(index) * 0x9e37_79b9_7f4a_7c15 + 0x1234),
                "isCanonical": index <= 1,
            })
        })
        .collect();
    serde_json::json!({ "universe": universe, "tokens": tokens })
}
