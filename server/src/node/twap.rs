//! The node's `node_twap_statuses` stream, written beside the fills by `--write-fills`: one event each time a TWAP
//! order starts, finishes, is stopped or fails. With the fills' `twapId` it is what `userTwapHistory` and
//! `userTwapSliceFills` are built from. An unknown status or a malformed event is counted and skipped without
//! losing the rest of its line; a line whose envelope does not parse is refused whole.
//!
//! Format, and where each fact was learned (read 2026-11; "inferred" marks what no source states):
//! - `--write-fills` "also streams TWAP statuses to `~/hl/data/node_twap_statuses/{date}/{hour}`": the node README,
//!   "Flags" (github.com/hyperliquid-dex/node). With `--batch-by-block` / `--stream-with-block-info` the folders
//!   are `node_twap_statuses_by_block` (listed beside `node_fills_by_block` by public prune scripts of live nodes)
//!   and `node_twap_statuses_streaming/hourly/…` (Bitquery's schema notes, github.com/bitquery/streaming_protobuf,
//!   `hyperliquid/README.md` §5). That `_by_block` also has the `hourly/YYYYMMDD/H` layout is inferred from the
//!   other streams (docs/hl-node-data.md).
//! - Line envelope `{local_time, block_time, block_number, events}` and event `{time, twap_id, state, status}`,
//!   with `state` `{coin, user, side, sz, executedSz, executedNtl, minutes, reduceOnly, randomize, timestamp}`:
//!   a real line on QuickNode's "TWAP Dataset" page (https://www.quicknode.com/docs/hyperliquid/datasets/twap).
//!   Amounts are decimal strings there (`"sz":"108.36"`, `"executedNtl":"0.0"`), so a bare JSON number where an
//!   amount belongs makes the event malformed; `timestamp` is ms, `time` a node timestamp string.
//! - `status` is a string (`activated`, `finished`, `terminated`) or `{"error": message}`: Bitquery's notes §5.4
//!   ("The node's status is `string | {"error": msg}`", from mainnet output). QuickNode shows `activated` and names
//!   `finished`, `terminated`; CoinAPI's TWAP statuses dataset lists "activated, finished, terminated, or error:*"
//!   (https://www.coinapi.io/products/flat-files/docs/datasets/twap-statuses). Anything else is unknown here.
//! - `state.timestamp` is the TWAP's start (ms), not the event's time (Bitquery §5.4); `executedSz`/`executedNtl`
//!   are cumulative (QuickNode, CoinAPI).
//! - Slice fills carry `twapId` on the TWAP owner's side only, the counterparty's is `null`, and both sides' hash
//!   is all zeros (Bitquery §5.1, observed; the mainnet fixture of docs/hl-user-channels.md agrees; Allium's
//!   https://docs.allium.so/historical-data/supported-blockchains/hyperliquid/dex: TWAP fills have no transaction
//!   hash).

use serde::Deserialize;
use serde_json::value::RawValue;

use super::decimal::Fixed;
use super::event::{Address, Side};
use super::line::Mode;
use super::misc::{EventBlock, EventError, Skipped, parse_events_line};
use super::time::UnixNanos;
use super::wire::{LineMeta, NodeTime};

/// The stream's folder under the node data dir.
pub fn twap_dir(mode: Mode) -> &'static str {
    match mode {
        Mode::ByBlock => "node_twap_statuses_by_block",
        Mode::Streaming => "node_twap_statuses_streaming",
    }
}

/// What happened to the TWAP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TwapOutcome {
    Activated,
    Finished,
    /// Stopped by its owner (or the exchange) before its time was up.
    Terminated,
    /// Failed, with the node's message (e.g. "Insufficient margin to place order.").
    Error(String),
}

impl TwapOutcome {
    /// The API's `status.status` word.
    pub fn word(&self) -> &'static str {
        match self {
            TwapOutcome::Activated => "activated",
            TwapOutcome::Finished => "finished",
            TwapOutcome::Terminated => "terminated",
            TwapOutcome::Error(_) => "error",
        }
    }
}

/// The TWAP order as it stands at the event, amounts exact.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TwapOrder {
    pub coin: String,
    pub user: Address,
    pub side: Side,
    pub sz: Fixed,
    pub executed_sz: Fixed,
    /// Executed notional in the quote (USDC for perps).
    pub executed_ntl: Fixed,
    pub minutes: u32,
    pub reduce_only: bool,
    pub randomize: bool,
    /// When the TWAP started, ms.
    pub timestamp: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TwapEvent {
    pub time: UnixNanos,
    pub twap_id: u64,
    pub state: TwapOrder,
    pub outcome: TwapOutcome,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TwapLine {
    pub meta: LineMeta,
    pub events: Vec<TwapEvent>,
    pub skipped: Vec<Skipped>,
}

/// One block's TWAP events, as `ingest::side` gathers them.
pub type TwapBlock = EventBlock<TwapEvent>;

/// A line whose envelope did not parse: the whole line is lost.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed node_twap_statuses line: {0}")]
pub struct TwapLineError(pub String);

#[derive(Deserialize)]
struct EventWire<'a> {
    time: NodeTime,
    twap_id: u64,
    state: TwapOrder,
    #[serde(borrow)]
    status: &'a RawValue,
}

/// Parses one complete node_twap_statuses line (without its newline).
pub fn parse_twap_line(line: &str) -> Result<TwapLine, TwapLineError> {
    let (meta, events, skipped) = parse_events_line(line, parse_event).map_err(TwapLineError)?;
    Ok(TwapLine { meta, events, skipped })
}

fn parse_event(raw: &str) -> Result<TwapEvent, EventError> {
    let wire: EventWire<'_> = serde_json::from_str(raw).map_err(|e| (false, e.to_string()))?;
    let outcome = outcome(wire.status.get())?;
    Ok(TwapEvent { time: wire.time.0, twap_id: wire.twap_id, state: wire.state, outcome })
}

#[derive(Deserialize)]
#[serde(untagged)]
enum StatusWire {
    Word(String),
    Error { error: String },
}

fn outcome(raw: &str) -> Result<TwapOutcome, EventError> {
    let wire: StatusWire = serde_json::from_str(raw)
        .map_err(|_| (false, format!("status {raw} is neither a word nor {{\"error\":…}}")))?;
    match wire {
        StatusWire::Error { error } => Ok(TwapOutcome::Error(error)),
        StatusWire::Word(w) => match w.as_str() {
            "activated" => Ok(TwapOutcome::Activated),
            "finished" => Ok(TwapOutcome::Finished),
            "terminated" => Ok(TwapOutcome::Terminated),
            other => Err((true, format!("unknown TWAP status {other:?}"))),
        },
    }
}

#[cfg(test)]
#[path = "twap_tests.rs"]
mod tests;
