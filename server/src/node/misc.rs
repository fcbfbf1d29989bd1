//! The node's fourth, optional stream: `misc_events` (`--write-misc-events`). It carries each user's funding
//! payments and ledger updates (deposits, withdrawals, transfers, vault moves, liquidations), which feed
//! `userFundings`, `userNonFundingLedgerUpdates` and the funding/liquidation kinds of `userEvents`. Only those kinds
//! are decoded; staking and validator kinds are recognised and passed over, and an unknown kind or a malformed
//! event is counted and skipped without losing the rest of its line.
//!
//! Format, and where each fact was learned (URLs read 2026-11; "inferred" marks what no source states):
//! - Folders `misc_events_by_block` and `misc_events_streaming` (no `node_` prefix), each `hourly/YYYYMMDD/H`:
//!   the node README names `misc_events/hourly/{date}/{hour}` for the flag (github.com/hyperliquid-dex/node,
//!   README "Flags"); the `_by_block` name is the public S3 archive's (`s3://hl-mainnet-node-data/
//!   misc_events_by_block/hourly/…`, quoted in several public analyses), the `_streaming` name is what public
//!   readers of a live node open. That the two modes behave like the other streams' is inferred.
//! - Line envelope `{local_time, block_time, block_number, events}`: QuickNode's "Events dataset" page shows a
//!   real line (https://www.quicknode.com/docs/hyperliquid/datasets/events); the same envelope as every stream
//!   (docs/hl-node-data.md).
//! - Event `{time, hash, inner}`, `inner` an object whose single key names the kind (`CDeposit`, `Delegation`,
//!   `CWithdrawal`, `ValidatorRewards`, `LedgerUpdate`): the official "L1 data schemas" page, types `MiscEvent`
//!   and `MiscEventInner` (https://hyperliquid.gitbook.io/hyperliquid-docs/for-developers/nodes/l1-data-schemas).
//!   `time` is a node timestamp string and `hash` a 32-byte hex hash in QuickNode's example.
//! - `LedgerUpdate {users, delta}`, `delta` tagged by `type`, and its types: the official page (`LedgerDelta`),
//!   QuickNode's example (`vaultWithdraw`), Allium's `misc_events` table
//!   (https://docs.allium.so/historical-data/supported-blockchains/hyperliquid/raw/misc-events). `send`,
//!   `cStakingTransfer` and `borrowLend` come from a public third-party reader of the stream (inferred: real).
//! - Amounts are decimal strings: QuickNode's example (`"requestedUsd": "7.203866"`). The official page types
//!   them `number`; money is kept exact here, so a bare JSON number where an amount belongs makes the event
//!   malformed (skipped and counted), never a float.
//! - Fundings: the official page lists `funding` as a ledger delta `{coin, usdc, szi, fundingRate, nSamples}`.
//!   A public probe of the S3 archive lists `Funding` as an inner kind of its own, and a public reader of
//!   `misc_events_streaming` reads it as `{"Funding": {"deltas": [{user, coin, funding_amount, szi,
//!   funding_rate}]}}` (GoldRush's `HypercoreFundingEvent` uses the same field names:
//!   https://goldrush.dev/docs/api-reference/streaming-api/types/hypercore-funding-event). That form's exact
//!   layout is INFERRED from those two; both forms are read. Without `nSamples` the API's field is `null`.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::decimal::Fixed;
use super::event::{Address, TxHash};
use super::line::Mode;
use super::time::UnixNanos;
use super::wire::{Envelope, LineMeta, NodeTime};

/// The stream's folder under the node data dir.
pub fn misc_dir(mode: Mode) -> &'static str {
    match mode {
        Mode::ByBlock => "misc_events_by_block",
        Mode::Streaming => "misc_events_streaming",
    }
}

/// A signed exact decimal (funding payments and positions go both ways).
#[derive(Copy, Clone, Default, PartialEq, Eq, Hash)]
pub struct Signed {
    pub negative: bool,
    pub abs: Fixed,
}

impl Signed {
    /// `"-0.012"`, `"3.5"`: an optional minus, then what `Fixed::parse` takes.
    pub fn parse(s: &str) -> Option<Signed> {
        let (negative, digits) = match s.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, s),
        };
        let abs = Fixed::parse(digits).ok()?;
        Some(Signed { negative: negative && abs != Fixed::ZERO, abs })
    }
}

impl fmt::Display for Signed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.negative {
            f.write_str("-")?;
        }
        fmt::Display::fmt(&self.abs, f)
    }
}

impl fmt::Debug for Signed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// One user's funding payment (`usdc` > 0: received).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Funding {
    pub user: Address,
    pub coin: String,
    pub usdc: Signed,
    pub szi: Signed,
    /// The rate as the node wrote it (not money, can carry more than 8 decimals); checked to be a decimal.
    pub funding_rate: String,
    pub n_samples: Option<u64>,
}

/// A ledger update other than a funding, with its delta kept verbatim (key order as written).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LedgerUpdate {
    pub users: Vec<Address>,
    pub kind: &'static str,
    pub delta: Arc<str>,
}

/// What an event means to hlbook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MiscKind {
    Fundings(Vec<Funding>),
    Ledger(LedgerUpdate),
    /// A known kind hlbook does not serve (staking, validator rewards).
    Ignored(&'static str),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MiscEvent {
    /// The event's own time (the block's in every example).
    pub time: UnixNanos,
    pub hash: TxHash,
    pub kind: MiscKind,
}

/// An event left out of its line, and why (for the log line and the counters).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// Its place in the line's `events`.
    pub at: usize,
    pub unknown_kind: bool,
    pub why: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MiscLine {
    pub meta: LineMeta,
    pub events: Vec<MiscEvent>,
    pub skipped: Vec<Skipped>,
}

/// One block's events of a side stream (misc_events, node_twap_statuses), gathered from its line (by-block) or
/// lines (streaming) by `ingest::side`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventBlock<E> {
    pub height: u64,
    pub block_time: UnixNanos,
    pub events: Vec<E>,
}

pub type MiscBlock = EventBlock<MiscEvent>;

/// A line whose envelope did not parse: the whole line is lost.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed misc_events line: {0}")]
pub struct MiscLineError(pub String);

/// Inner kinds that are known and not served (official `MiscEventInner`; `GossipPriorityAuctionRestart` was seen
/// in the S3 archive by a public probe).
const IGNORED_KINDS: [&str; 5] =
    ["CDeposit", "Delegation", "CWithdrawal", "ValidatorRewards", "GossipPriorityAuctionRestart"];

/// Ledger delta types served by `userNonFundingLedgerUpdates` (sources in the module comment).
const LEDGER_TYPES: [&str; 22] = [
    "withdraw",
    "deposit",
    "vaultCreate",
    "vaultDeposit",
    "vaultWithdraw",
    "vaultDistribution",
    "vaultLeaderCommission",
    "liquidation",
    "internalTransfer",
    "subAccountTransfer",
    "spotTransfer",
    "spotGenesis",
    "rewardsClaim",
    "accountActivationGas",
    "accountClassTransfer",
    "perpDexClassTransfer",
    "deployGasAuction",
    "send",
    "cStakingTransfer",
    "borrowLend",
    "cDeposit",
    "cWithdrawal",
];

/// Delta keys that hold an amount of money (or a position): they must be decimal strings.
const AMOUNT_KEYS: [&str; 14] = [
    "usdc",
    "fee",
    "amount",
    "requestedUsd",
    "commission",
    "closingCost",
    "basis",
    "netWithdrawnUsd",
    "liquidatedNtlPos",
    "accountValue",
    "usdcValue",
    "szi",
    "nativeTokenFee",
    "toPerpUsdc",
];

#[derive(Deserialize)]
struct EventWire<'a> {
    time: NodeTime,
    /// QuickNode's page says the hash "may be null hash for some events": whether that is JSON `null` or zeros is
    /// not shown, so both are read (as zeros).
    hash: Option<TxHash>,
    #[serde(borrow)]
    inner: HashMap<&'a str, &'a RawValue>,
}

/// Parses one complete misc_events line (without its newline).
pub fn parse_misc_line(line: &str) -> Result<MiscLine, MiscLineError> {
    let (meta, events, skipped) = parse_events_line(line, parse_event).map_err(MiscLineError)?;
    Ok(MiscLine { meta, events, skipped })
}

/// A line of the node's `{…, "events": [...]}` envelope with each event read by `parse`: an event it refuses
/// (`(unknown kind, why)`) is skipped and the rest of the line kept; Err: the envelope did not parse.
pub(super) fn parse_events_line<E>(
    line: &str,
    parse: impl Fn(&str) -> Result<E, EventError>,
) -> Result<(LineMeta, Vec<E>, Vec<Skipped>), String> {
    let env: Envelope<&RawValue> = serde_json::from_str(line).map_err(|e| e.to_string())?;
    let (mut events, mut skipped) = (Vec::new(), Vec::new());
    for (at, raw) in env.events.iter().enumerate() {
        match parse(raw.get()) {
            Ok(ev) => events.push(ev),
            Err((unknown_kind, why)) => skipped.push(Skipped { at, unknown_kind, why }),
        }
    }
    Ok((env.meta(), events, skipped))
}

/// Why an event was skipped: (its kind is unknown, the reason).
pub(super) type EventError = (bool, String);

fn malformed(why: impl Into<String>) -> EventError {
    (false, why.into())
}

fn parse_event(raw: &str) -> Result<MiscEvent, EventError> {
    let wire: EventWire<'_> = serde_json::from_str(raw).map_err(|e| malformed(e.to_string()))?;
    if wire.inner.len() != 1 {
        return Err(malformed(format!("inner has {} keys, not one", wire.inner.len())));
    }
    let (&name, body) = wire.inner.iter().next().expect("one key");
    let kind = match name {
        "Funding" => MiscKind::Fundings(funding_deltas(body.get())?),
        "LedgerUpdate" => ledger_update(body.get())?,
        other => match IGNORED_KINDS.iter().find(|k| **k == other) {
            Some(k) => MiscKind::Ignored(k),
            None => return Err((true, format!("unknown event kind {other:?}"))),
        },
    };
    Ok(MiscEvent { time: wire.time.0, hash: wire.hash.unwrap_or_default(), kind })
}

#[derive(Deserialize)]
struct FundingDeltaWire {
    user: Address,
    coin: String,
    funding_amount: String,
    szi: String,
    funding_rate: String,
}

#[derive(Deserialize)]
struct FundingWire {
    deltas: Vec<FundingDeltaWire>,
}

/// The `Funding` inner kind: one delta per user.
fn funding_deltas(body: &str) -> Result<Vec<Funding>, EventError> {
    let wire: FundingWire = serde_json::from_str(body).map_err(|e| malformed(format!("Funding: {e}")))?;
    wire.deltas.into_iter().map(|d| funding(d.user, d.coin, &d.funding_amount, &d.szi, d.funding_rate, None)).collect()
}

fn funding(
    user: Address,
    coin: String,
    usdc: &str,
    szi: &str,
    funding_rate: String,
    n_samples: Option<u64>,
) -> Result<Funding, EventError> {
    let usdc = Signed::parse(usdc).ok_or_else(|| malformed(format!("funding amount {usdc:?}")))?;
    let szi = Signed::parse(szi).ok_or_else(|| malformed(format!("funding szi {szi:?}")))?;
    if !is_decimal(&funding_rate) {
        return Err(malformed(format!("funding rate {funding_rate:?}")));
    }
    Ok(Funding { user, coin, usdc, szi, funding_rate, n_samples })
}

/// A signed decimal of any precision (`-0.0000125`).
fn is_decimal(s: &str) -> bool {
    let digits = s.strip_prefix('-').unwrap_or(s);
    let mut parts = digits.splitn(2, '.');
    let int = parts.next().unwrap_or("");
    let frac = parts.next().unwrap_or("0");
    !int.is_empty() && !frac.is_empty() && (int.bytes().chain(frac.bytes())).all(|b| b.is_ascii_digit())
}

#[derive(Deserialize)]
struct LedgerWire {
    users: Vec<Address>,
    delta: Map<String, Value>,
}

/// `LedgerUpdate`: a funding delta becomes fundings, a known type a ledger update, anything else is unknown.
fn ledger_update(body: &str) -> Result<MiscKind, EventError> {
    let wire: LedgerWire = serde_json::from_str(body).map_err(|e| malformed(format!("LedgerUpdate: {e}")))?;
    let Some(Value::String(ty)) = wire.delta.get("type") else {
        return Err(malformed("LedgerUpdate delta without a string type"));
    };
    if ty == "funding" {
        return ledger_funding(&wire.users, &wire.delta).map(MiscKind::Fundings);
    }
    let Some(kind) = LEDGER_TYPES.iter().find(|k| *k == ty) else {
        return Err((true, format!("unknown ledger delta type {ty:?}")));
    };
    if wire.users.is_empty() {
        return Err(malformed("LedgerUpdate without users"));
    }
    check_amounts(&wire.delta)?;
    let delta = serde_json::to_string(&wire.delta).map_err(|e| malformed(e.to_string()))?;
    Ok(MiscKind::Ledger(LedgerUpdate { users: wire.users, kind, delta: delta.into() }))
}

/// Every amount key present holds a decimal string (nested objects, e.g. liquidated positions, included).
fn check_amounts(delta: &Map<String, Value>) -> Result<(), EventError> {
    for (key, value) in delta {
        match value {
            Value::Object(inner) => check_amounts(inner)?,
            Value::Array(items) => {
                for item in items {
                    if let Value::Object(inner) = item {
                        check_amounts(inner)?;
                    }
                }
            }
            _ if AMOUNT_KEYS.contains(&key.as_str()) => match value {
                Value::String(s) if Signed::parse(s).is_some() => {}
                _ => return Err(malformed(format!("amount {key} is {value}, not a decimal string"))),
            },
            _ => {}
        }
    }
    Ok(())
}

/// The documented ledger form of a funding: one user, `{coin, usdc, szi, fundingRate, nSamples}`.
fn ledger_funding(users: &[Address], delta: &Map<String, Value>) -> Result<Vec<Funding>, EventError> {
    let [user] = users else {
        return Err(malformed(format!("funding delta for {} users, not one", users.len())));
    };
    let text = |key: &str| match delta.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        other => Err(malformed(format!("funding {key} is {other:?}, not a string"))),
    };
    let n_samples = match delta.get("nSamples") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_u64().ok_or_else(|| malformed(format!("funding nSamples {v}")))?),
    };
    let f = funding(*user, text("coin")?, &text("usdc")?, &text("szi")?, text("fundingRate")?, n_samples)?;
    Ok(vec![f])
}

#[cfg(test)]
#[path = "misc_tests.rs"]
mod tests;
