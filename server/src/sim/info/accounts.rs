//! The per-user info answers (both servers), built from the simulator's own state under the producer's lock:
//! positions and balances from the ledger the market moves with every fill it writes (`sim::accounts`), open
//! orders from the sim's books, so what a user is told agrees with the lines the node streams carry.
//!
//! Shapes follow the exchange's docs, cited beside each builder ("gitbook" is
//! https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/api/info-endpoint). Money is written from
//! integers (micro-USDC, ticks, lots) as exact decimal strings; every margin is cross, at the coin's max leverage.

use serde_json::{Map, Value, json};

use super::Reply;
use crate::node::Side;
use crate::sim::SimShared;
use crate::sim::accounts::{Account, DEPOSIT, micro};
use crate::sim::coins::{self, CoinSpec, Kind, TOKENS};
use crate::sim::ctxs;
use crate::sim::events::order_object;
use crate::sim::fmt::{decimal_string, signed_decimal};
use crate::sim::market::Market;
use crate::sim::orders::Order;

/// The sim's fees as its fills charge them: 0.045% taker, a 0.003% maker rebate.
const CROSS_RATE: &str = "0.00045";
const ADD_RATE: &str = "-0.00003";
/// Requests every address may make before trading earns more (one per USDC traded), as the exchange's rule.
const BASE_REQUESTS: u64 = 10_000;

/// `user` as the exchange deserializes it: a 0x-prefixed 20-byte hex address (case-insensitive).
fn user(v: &Value) -> Result<String, String> {
    let u = v.get("user").and_then(Value::as_str).ok_or("user: missing field `user`")?;
    let ok = u.len() == 42 && u.starts_with("0x") && u[2..].bytes().all(|b| b.is_ascii_hexdigit());
    if ok { Ok(u.to_ascii_lowercase()) } else { Err(format!("user: invalid address {u:?}")) }
}

/// Writes micro-USDC (or any 6-decimal fixed point) as a decimal string.
fn money(units: i128) -> Value {
    let mut out = Vec::new();
    signed_decimal(&mut out, i64::try_from(units).unwrap_or(i64::MAX), 6);
    Value::String(String::from_utf8(out).unwrap_or_default())
}

/// A signed fixed-point value with `dec` decimals as a decimal string.
fn fixed(units: i128, dec: u32) -> Value {
    let mut out = Vec::new();
    signed_decimal(&mut out, i64::try_from(units).unwrap_or(i64::MAX), dec);
    Value::String(String::from_utf8(out).unwrap_or_default())
}

/// A per-user type's answer (`kind` is on the node's list).
pub fn answer(shared: &SimShared, v: &Value, kind: &str) -> Reply {
    let addr = user(v)?;
    let st = shared.state.lock();
    let m = &st.market;
    let idx = m.users.iter().position(|u| *u == addr).map(|i| i as u32);
    let acct = idx.and_then(|i| m.accounts.get(i));
    let dex = v.get("dex").and_then(Value::as_str).unwrap_or("");
    Ok(match kind {
        "clearinghouseState" => clearinghouse_state(m, idx, dex),
        "spotClearinghouseState" => spot_clearinghouse_state(m, idx),
        "openOrders" => open_orders(m, idx, dex, false),
        "frontendOpenOrders" => open_orders(m, idx, dex, true),
        "activeAssetData" => active_asset_data(m, idx, &addr, v)?,
        "userFees" => user_fees(m, acct),
        "userRateLimit" => user_rate_limit(acct),
        // gitbook "Query a user's role": a pool user has deposited (every pool user starts funded); anyone else
        // is unknown to the exchange.
        "userRole" => json!({"role": if idx.is_some() { "user" } else { "missing" }}),
        // gitbook "Retrieve a user's subaccounts": null for a user without any.
        "subAccounts" | "userToMultiSigSigners" => Value::Null,
        // gitbook "Query a user's staking delegations" / "Retrieve a user's vault deposits"; leadingVaults and
        // extraAgents (the Python SDK's `query_sub_accounts` neighbours) list nothing: the sim has none.
        "delegations" | "userVaultEquities" | "leadingVaults" | "extraAgents" => json!([]),
        // gitbook "Query a user's staking summary".
        "delegatorSummary" => {
            json!({"delegated": "0.0", "undelegated": "0.0", "totalPendingWithdrawal": "0.0", "nPendingWithdrawals": 0})
        }
        // gitbook "Check builder fee approval": nobody approved a builder fee (tenths of a basis point).
        "maxBuilderFee" => {
            v.get("builder").and_then(Value::as_str).ok_or("missing field `builder`")?;
            json!(0)
        }
        "webData2" => web_data2(m, idx, &addr),
        other => return Err(format!("unknown variant `{other}`")),
    })
}

/// One perp position priced at the mark, in micro-USDC.
struct Priced {
    json: Value,
    /// Signed position notional at the mark, and signed entry notional.
    ntl: i128,
    entry: i128,
    value: i128,
    margin: i128,
    maintenance: i128,
}

fn price_position(m: &Market, i: usize, c: &CoinSpec, szi: i64, cost: u128) -> Priced {
    let book = &m.books[i];
    let mark = ctxs::mark(c, book.best(Side::Bid), book.best(Side::Ask));
    let sign = i128::from(szi.signum());
    let ntl = micro(c, i128::from(szi) * i128::from(mark));
    let entry = sign * micro(c, cost as i128);
    let (value, lev) = (ntl.abs(), i128::from(c.max_leverage.max(1)));
    let (margin, maintenance) = (value / lev, value / (2 * lev));
    let upnl = ntl - entry;
    // Return on the margin the position took at entry, 6 decimals.
    let roe = if entry == 0 { 0 } else { upnl * lev * 1_000_000 / entry.abs() };
    let entry_px = cost as i128 * 100 / i128::from(szi.unsigned_abs().max(1));
    let json = json!({"type": "oneWay", "position": {
        "coin": c.name,
        "szi": fixed(i128::from(szi), c.sz_dec),
        "leverage": {"type": "cross", "value": c.max_leverage},
        "entryPx": fixed(entry_px, c.px_dec + 2),
        "positionValue": money(value),
        "unrealizedPnl": money(upnl),
        "returnOnEquity": money(roe),
        "liquidationPx": Value::Null,
        "marginUsed": money(margin),
        "maxLeverage": c.max_leverage,
        // The sim pays no funding.
        "cumFunding": {"allTime": "0.0", "sinceOpen": "0.0", "sinceChange": "0.0"},
    }});
    Priced { json, ntl, entry, value, margin, maintenance }
}

/// A user's account on one perp dex, priced at the marks.
struct PerpAccount {
    usdc: i128,
    positions: Vec<(usize, i64, Priced)>,
    account_value: i128,
    margin: i128,
    maintenance: i128,
}

fn perp_account(m: &Market, idx: Option<u32>, dex: &str) -> PerpAccount {
    let acct = idx.map(|i| m.accounts.get(i).cloned().unwrap_or_else(Account::fresh));
    let usdc = i128::from(acct.as_ref().map_or(0, |a| a.usdc(dex)));
    let mut positions: Vec<(usize, i64, Priced)> = Vec::new();
    if let Some(a) = &acct {
        for (i, c) in m.coins.iter().enumerate().filter(|(_, c)| coins::on_perp_dex(c, Some(dex))) {
            let h = a.holding(i, c);
            if h.sz != 0 {
                positions.push((i, h.sz, price_position(m, i, c, h.sz, h.cost)));
            }
        }
    }
    let sum = |f: fn(&Priced) -> i128| positions.iter().map(|p| f(&p.2)).sum::<i128>();
    let account_value = usdc + sum(|p| p.ntl) - sum(|p| p.entry);
    let (margin, maintenance) = (sum(|p| p.margin), sum(|p| p.maintenance));
    PerpAccount { usdc, positions, account_value, margin, maintenance }
}

/// `clearinghouseState` of perp dex `dex` (gitbook, Perpetuals, "Retrieve user's perpetuals account summary").
/// Cross margin throughout: account value = the dex's USDC + unrealized pnl; a position's liquidation price is
/// where the mark would take that value down to the maintenance margin (null when that is not a positive price).
pub fn clearinghouse_state(m: &Market, idx: Option<u32>, dex: &str) -> Value {
    let mut a = perp_account(m, idx, dex);
    let (value, entry) = a.positions.iter().fold((0, 0), |(v, e), p| (v + p.2.value, e + p.2.entry));
    for (i, szi, p) in &mut a.positions {
        let c = &m.coins[*i];
        // The price move, in ticks with 2 more decimals, that eats the value above maintenance.
        let move_ = (a.account_value - a.maintenance) * 100 / (micro(c, 1) * i128::from(*szi));
        let mark = ctxs::mark(c, m.books[*i].best(Side::Bid), m.books[*i].best(Side::Ask));
        let liq = i128::from(mark) * 100 - move_;
        if liq > 0 {
            p.json["position"]["liquidationPx"] = fixed(liq, c.px_dec + 2);
        }
    }
    let summary = json!({"accountValue": money(a.account_value), "totalNtlPos": money(value),
        "totalRawUsd": money(a.usdc - entry), "totalMarginUsed": money(a.margin)});
    json!({
        "marginSummary": summary,
        "crossMarginSummary": summary,
        "crossMaintenanceMarginUsed": money(a.maintenance),
        "withdrawable": money((a.account_value - a.margin).max(0)),
        "assetPositions": a.positions.into_iter().map(|p| p.2.json).collect::<Vec<_>>(),
        "time": m.time_ms(),
    })
}

/// A user's resting orders on coin `i`.
fn orders_of(m: &Market, i: usize, idx: u32) -> impl Iterator<Item = &Order> {
    let b = &m.books[i];
    b.orders(Side::Bid).chain(b.orders(Side::Ask)).filter(move |o| o.user == idx)
}

/// `spotClearinghouseState` (gitbook, Spot, "Retrieve a user's token balances"): USDC, then each spot pair's base
/// token. `hold` is what resting orders lock: a bid's notional in USDC, an ask's size in the base token.
pub fn spot_clearinghouse_state(m: &Market, idx: Option<u32>) -> Value {
    let Some(idx) = idx else { return json!({"balances": []}) };
    let acct = m.accounts.get(idx).cloned().unwrap_or_else(Account::fresh);
    let mut usdc_hold = 0i128;
    let mut balances = Vec::new();
    for (i, c) in m.coins.iter().enumerate() {
        let Kind::Spot { base, .. } = c.kind else { continue };
        let h = acct.holding(i, c);
        let mut hold = 0u64;
        for o in orders_of(m, i, idx) {
            match o.side {
                Side::Bid => usdc_hold += micro(c, i128::from(o.px) * i128::from(o.sz)),
                Side::Ask => hold += o.sz,
            }
        }
        let (name, _, _, token) = TOKENS[base];
        balances.push(json!({"coin": name, "token": token, "hold": decimal_string(hold, c.sz_dec),
            "total": fixed(i128::from(h.sz), c.sz_dec), "entryNtl": money(micro(c, h.cost as i128))}));
    }
    let usdc = json!({"coin": TOKENS[0].0, "token": TOKENS[0].3, "hold": money(usdc_hold),
        "total": money(i128::from(acct.spot_usdc)), "entryNtl": "0.0"});
    balances.insert(0, usdc);
    json!({ "balances": balances })
}

/// `openOrders` (gitbook "Retrieve a user's open orders") or `frontendOpenOrders` ("… with additional frontend
/// info"), newest first. `dex` as the exchange reads it: "" the main perps and every spot pair, else its coins.
/// The frontend shape is the order object the sim's statuses and snapshots carry. Waiting trigger orders are open
/// orders too, at their `limitPx` (the exchange lists them; a user's TP/SL shows there).
pub fn open_orders(m: &Market, idx: Option<u32>, dex: &str, frontend: bool) -> Value {
    let Some(idx) = idx else { return json!([]) };
    let mut found: Vec<(u64, Value)> = Vec::new();
    for (i, c) in m.coins.iter().enumerate() {
        let listed = match c.kind {
            Kind::Builder(d) => d == dex,
            Kind::Perp | Kind::Spot { .. } => dex.is_empty(),
        };
        let waiting = m.waiting.coins[i].values().filter(|o| o.user == idx);
        for o in orders_of(m, i, idx).chain(waiting).filter(|_| listed) {
            let v = if frontend {
                let mut buf = Vec::new();
                order_object(&mut buf, c, o, o.sz);
                serde_json::from_slice(&buf).unwrap_or(Value::Null)
            } else {
                let mut v = json!({"coin": c.name, "side": o.side.as_str(), "limitPx": decimal_string(o.px, c.px_dec),
                    "sz": decimal_string(o.sz, c.sz_dec), "oid": o.oid, "timestamp": o.timestamp,
                    "origSz": decimal_string(o.orig_sz, c.sz_dec)});
                if let Some(cl) = o.cloid {
                    v["cloid"] = json!(format!("0x{cl:032x}"));
                }
                if o.reduce_only {
                    v["reduceOnly"] = json!(true);
                }
                v
            };
            found.push((o.oid, v));
        }
    }
    found.sort_by_key(|f| std::cmp::Reverse(f.0));
    Value::Array(found.into_iter().map(|f| f.1).collect())
}

/// `activeAssetData` (gitbook, Perpetuals, "Retrieve User's Active Asset Data"): leverage, and what the free
/// margin buys or sells at that leverage, as notional (`availableToTrade`) and size at the mark (`maxTradeSzs`).
fn active_asset_data(m: &Market, idx: Option<u32>, addr: &str, v: &Value) -> Reply {
    let name = v.get("coin").and_then(Value::as_str).ok_or("missing field `coin`")?;
    let (i, c) = m
        .coins
        .iter()
        .enumerate()
        .find(|(_, c)| c.name == name && !matches!(c.kind, Kind::Spot { .. }))
        .ok_or_else(|| format!("coin: unknown perp {name:?}"))?;
    let dex = match c.kind {
        Kind::Builder(d) => d,
        _ => "",
    };
    let a = perp_account(m, idx, dex);
    let free = (a.account_value - a.margin).max(0);
    let book = &m.books[i];
    let mark = ctxs::mark(c, book.best(Side::Bid), book.best(Side::Ask));
    let available = free * i128::from(c.max_leverage);
    let size = available / (micro(c, 1) * i128::from(mark.max(1)));
    let (avail, sz) = (money(available), fixed(size, c.sz_dec));
    Ok(json!({"user": addr, "coin": name, "leverage": {"type": "cross", "value": c.max_leverage},
        "maxTradeSzs": [sz, sz], "availableToTrade": [avail, avail], "markPx": decimal_string(mark, c.px_dec)}))
}

/// `userFees` (gitbook "Query a user's fees"): the rates the sim's fills charge, and today's volume.
fn user_fees(m: &Market, acct: Option<&Account>) -> Value {
    let mut date = Vec::new();
    crate::sim::fmt::node_time(&mut date, m.time_ms() as i64 * 1_000_000);
    let date = String::from_utf8_lossy(&date[..10]).into_owned();
    let (cross, add) = acct.map_or((0, 0), |a| (a.cross_volume, a.add_volume));
    json!({
        "dailyUserVlm": [{"date": date, "userCross": money(cross), "userAdd": money(add),
            "exchange": money(m.accounts.exchange_volume)}],
        "feeSchedule": {"cross": CROSS_RATE, "add": ADD_RATE, "spotCross": CROSS_RATE, "spotAdd": ADD_RATE,
            "tiers": {"vip": [], "mm": []}, "referralDiscount": "0.0", "stakingDiscountTiers": []},
        "userCrossRate": CROSS_RATE,
        "userAddRate": ADD_RATE,
        "userSpotCrossRate": CROSS_RATE,
        "userSpotAddRate": ADD_RATE,
        "activeReferralDiscount": "0.0",
        "trial": null,
        "feeTrialEscrow": "0.0",
        "nextTrialAvailableTimestamp": null,
        "stakingLink": null,
        "activeStakingDiscount": {"bpsOfMaxSupply": "0.0", "discount": "0.0"},
    })
}

/// `userRateLimit` (gitbook "Query User Rate Limits"): the order actions the user took against 10,000 plus one per
/// USDC traded.
fn user_rate_limit(acct: Option<&Account>) -> Value {
    let (vlm, used) = acct.map_or((0, 0), |a| (a.cross_volume + a.add_volume, a.requests));
    let earned = u64::try_from(vlm / 1_000_000).unwrap_or(u64::MAX);
    json!({"cumVlm": money(vlm), "nRequestsUsed": used, "nRequestsCap": BASE_REQUESTS.saturating_add(earned),
        "nRequestsSurplus": 0})
}

/// `webData2` as a node answers it: the user's main-dex state, orders and spot balances without the asset
/// contexts (not on the gitbook; the node's README; field names as the public API's). The exchange stand-in adds
/// `assetCtxs` and `spotAssetCtxs`.
fn web_data2(m: &Market, idx: Option<u32>, addr: &str) -> Value {
    let mut o = Map::new();
    o.insert("clearinghouseState".into(), clearinghouse_state(m, idx, ""));
    o.insert("leadingVaults".into(), json!([]));
    o.insert("totalVaultEquity".into(), json!("0.0"));
    o.insert("openOrders".into(), open_orders(m, idx, "", true));
    o.insert("agentAddress".into(), Value::Null);
    o.insert("agentValidUntil".into(), Value::Null);
    o.insert("cumLedger".into(), if idx.is_some() { money(i128::from(DEPOSIT)) } else { json!("0.0") });
    o.insert("meta".into(), coins::meta(&m.coins, None));
    o.insert("serverTime".into(), json!(m.time_ms()));
    o.insert("isVault".into(), json!(false));
    o.insert("user".into(), json!(addr));
    o.insert("twapStates".into(), json!([]));
    o.insert("spotState".into(), spot_clearinghouse_state(m, idx));
    o.insert("perpsAtOpenInterestCap".into(), json!([]));
    Value::Object(o)
}
