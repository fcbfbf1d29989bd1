//! What a non-validating node's info server answers: the types of its README's `--serve-info` list (the requests
//! that depend only on local state), each in the public API's shape. This module owns the list and the answers
//! about the market and the chain; the per-user answers are built in `accounts`.
//!
//! The sim has no vaults, staking, deploy auctions, liquidations or open-interest caps, so those answers are the
//! exchange's shape with nothing in it (as a real node's would be for a user who has none).

use serde_json::{Value, json};

use super::{Reply, accounts};
use crate::sim::SimShared;
use crate::sim::coins::{self, Kind};
use crate::sim::ctxs;

/// Every info type a non-validating node answers (besides `fileSnapshot`), as its README lists them for
/// `--serve-info` (../shared/docs/hl-node-info-server.md). hlbook keeps its own copy; a test compares the two.
pub const NODE_INFO_TYPES: &[&str] = &[
    "meta",
    "spotMeta",
    "clearinghouseState",
    "spotClearinghouseState",
    "openOrders",
    "exchangeStatus",
    "frontendOpenOrders",
    "liquidatable",
    "activeAssetData",
    "maxMarketOrderNtls",
    "vaultSummaries",
    "userVaultEquities",
    "leadingVaults",
    "extraAgents",
    "subAccounts",
    "userFees",
    "userRateLimit",
    "spotDeployState",
    "perpDeployAuctionStatus",
    "delegations",
    "delegatorSummary",
    "maxBuilderFee",
    "userToMultiSigSigners",
    "userRole",
    "perpsAtOpenInterestCap",
    "validatorL1Votes",
    "marginTable",
    "perpDexs",
    "webData2",
];

/// Seconds a deploy gas auction runs (31 hours, as the exchange's do).
const AUCTION_SECS: u64 = 111_600;

/// The answer to node type `kind` (one of `NODE_INFO_TYPES`).
pub fn answer(shared: &SimShared, v: &Value, kind: &str) -> Reply {
    let dex = v.get("dex").and_then(Value::as_str);
    match kind {
        "meta" => Ok(coins::meta(&shared.coins, dex)),
        "spotMeta" => Ok(coins::spot_meta(&shared.coins)),
        "perpDexs" => Ok(ctxs::perp_dexs(&shared.coins)),
        "exchangeStatus" => Ok(exchange_status(shared)),
        "marginTable" => margin_table(shared, v),
        "maxMarketOrderNtls" => Ok(max_market_order_ntls(shared)),
        "spotDeployState" => Ok(json!({"states": [], "gasAuction": gas_auction(shared)})),
        "perpDeployAuctionStatus" => Ok(gas_auction(shared)),
        // Nothing the sim models: no vaults, liquidations, open-interest caps or validators.
        "liquidatable" | "vaultSummaries" | "perpsAtOpenInterestCap" | "validatorL1Votes" => Ok(json!([])),
        _ => accounts::answer(shared, v, kind),
    }
}

/// `exchangeStatus` (not on the gitbook; the node's README: "returns the L1 time", compared with local time to tell
/// a stale node): the latest block's time in ms, and no special statuses.
fn exchange_status(shared: &SimShared) -> Value {
    json!({"time": shared.state.lock().market.time_ms(), "specialStatuses": null})
}

/// `{"type":"marginTable","id":N}`: the table `meta` lists under that id (the sim's tables are one tier, their id
/// the max leverage); null for an id no coin uses.
fn margin_table(shared: &SimShared, v: &Value) -> Reply {
    let id = v.get("id").and_then(Value::as_u64).ok_or("missing field `id`")?;
    let used = shared.coins.iter().any(|c| !matches!(c.kind, Kind::Spot { .. }) && u64::from(c.max_leverage) == id);
    Ok(if used {
        json!({"description": "", "marginTiers": [{"lowerBound": "0.0", "maxLeverage": id}]})
    } else {
        Value::Null
    })
}

/// `maxMarketOrderNtls`: `[[maxLeverage, notional], …]`, one per max leverage the perps use, highest first. The
/// exchange caps a market order's notional by the asset's leverage tier; the sim's caps are fixed by tier.
fn max_market_order_ntls(shared: &SimShared) -> Value {
    let mut levs: Vec<u32> =
        shared.coins.iter().filter(|c| !matches!(c.kind, Kind::Spot { .. })).map(|c| c.max_leverage).collect();
    levs.sort_unstable_by(|a, b| b.cmp(a));
    levs.dedup();
    let cap = |l: u32| if l >= 20 { "4000000.0" } else { "1000000.0" };
    Value::Array(levs.into_iter().map(|l| json!([l, cap(l)])).collect())
}

/// The deploy gas auction, as `perpDeployAuctionStatus` answers it and `spotDeployState` nests it
/// (gitbook, Info endpoint › Perpetuals, "Retrieve information about the Perp Deploy Auction"; Spot, "Retrieve
/// information about the Spot Deploy Auction"): one auction after another, nobody bidding, so the price stays at
/// its start.
fn gas_auction(shared: &SimShared) -> Value {
    let now = shared.state.lock().market.time_ms() / 1000;
    json!({"startTimeSeconds": now - now % AUCTION_SECS, "durationSeconds": AUCTION_SECS, "startGas": "500.0",
        "currentGas": "500.0", "endGas": null})
}
