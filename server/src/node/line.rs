//! Parsing one node line of any stream into typed events.
//!
//! `NodeParser` owns the interner, so one parser per ingest thread. A line that does not parse is refused whole
//! with an error naming the stream and the JSON position; the caller decides what a lost line means (a gap).

use std::fmt;
use std::ops::Deref;

use serde_json::value::RawValue;

use super::event::{Address, Diff, DiffKind, Fill, OrderFlavor, OrderInfo, OrderStatus};
use super::fast;
use super::intern::Interner;
use super::status_split::{Split, StatusSplitter};
use super::user_events::{UserEvents, liquidation_fills, watched_fills, watched_rejections};
use super::user_watch::{WatchView, Watched};
pub use super::wire::LineMeta;
use super::wire::{AnyStatusWire, DiffWire, Envelope, FillWire, OrderWire, RawBookDiff, StatusWire};

/// The three node streams, in the order the node writes a block's lines (fills first). The default is the line
/// that completes a block.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stream {
    Fills,
    Diffs,
    #[default]
    Statuses,
}

/// How the node batches its output: `--batch-by-block` or `--stream-with-block-info`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, clap::ValueEnum, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    ByBlock,
    Streaming,
}

impl Mode {
    /// The name on the command line, in config files and in the relay protocol.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::ByBlock => "by-block",
            Mode::Streaming => "streaming",
        }
    }
}

impl Stream {
    pub const ALL: [Stream; 3] = [Stream::Fills, Stream::Diffs, Stream::Statuses];

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            Stream::Fills => "fills",
            Stream::Diffs => "raw_book_diffs",
            Stream::Statuses => "order_statuses",
        }
    }

    /// Its short name, as audit labels a block's line: `fills`, `diffs`, `statuses`.
    pub fn short(self) -> &'static str {
        match self {
            Stream::Fills => "fills",
            Stream::Diffs => "diffs",
            Stream::Statuses => "statuses",
        }
    }

    /// The stream's folder under the node data dir.
    pub fn dir(self, mode: Mode) -> String {
        let suffix = match mode {
            Mode::ByBlock => "by_block",
            Mode::Streaming => "streaming",
        };
        format!("node_{}_{suffix}", self.name())
    }
}

impl fmt::Display for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A parsed line's events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Events {
    Diffs(Vec<Diff>),
    /// Book-relevant statuses, plus how many rejections were skipped.
    Statuses {
        kept: Vec<OrderStatus>,
        rejected: u32,
    },
    Fills(Vec<Fill>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub meta: LineMeta,
    pub events: Events,
    /// Watched users' rejections and verbatim fills (empty when nobody is watched).
    pub users: UserEvents,
}

/// A line that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed {stream} line: {message}")]
pub struct LineError {
    pub stream: Stream,
    pub message: String,
}

/// Parses node lines; keep one per ingest thread (it owns the interner).
#[derive(Debug, Default)]
pub struct NodeParser {
    interner: Interner,
    statuses: StatusSplitter,
    /// Users whose rejections and fills lines must carry; `None`: nobody ever asks (replay, tests).
    watched: Option<std::sync::Arc<Watched>>,
    /// Lines of each stream off the node's exact layout, so read by serde instead of a fast path.
    off_layout: [u64; 3],
}

impl NodeParser {
    pub fn new() -> NodeParser {
        NodeParser::default()
    }

    /// A parser that also keeps the events of the users in `watched` (orderUpdates, userFills).
    pub fn with_watched(watched: std::sync::Arc<Watched>) -> NodeParser {
        NodeParser { watched: Some(watched), ..NodeParser::default() }
    }

    /// Parses one complete line (without its newline) of `stream`.
    pub fn parse(&mut self, stream: Stream, line: &str) -> Result<Line, LineError> {
        self.parse_bytes(stream, line.as_bytes())
    }

    /// `parse` of raw bytes: a status line's rejected events are never looked into, not even checked for UTF-8,
    /// so the multi-MB status line is not scanned once more before it is split.
    pub fn parse_bytes(&mut self, stream: Stream, line: &[u8]) -> Result<Line, LineError> {
        let err = |e: &dyn std::fmt::Display| LineError { stream, message: e.to_string() };
        let view = self.watched.as_ref().filter(|_| stream != Stream::Diffs).map(|w| w.view());
        let watch = view.as_ref().filter(|v| !v.users.is_empty());
        let mut users = UserEvents { generation: view.as_ref().map(|v| v.generation), ..UserEvents::default() };
        match stream {
            Stream::Statuses => {
                let split = self.statuses.split(line, watch.map(|v| &*v.users));
                if let Some((meta, events, rejected)) = split.and_then(|s| self.split_statuses(s)) {
                    users.rejected = rejected;
                    return Ok(Line { meta, events, users });
                }
            }
            Stream::Diffs => {
                if let Some((meta, diffs)) = fast::diffs(line, |w| self.diff(w)) {
                    return Ok(Line { meta, events: Events::Diffs(diffs), users });
                }
            }
            Stream::Fills => {
                let (mut mine, mut liquidations) = (Vec::new(), Vec::new());
                let all = view.as_ref().is_some_and(|v| v.all_fills);
                let parsed = fast::fills(line, |user, body, raw| {
                    if all || watch.is_some_and(|v| v.users.contains(&user)) {
                        mine.push((user, raw.bytes));
                    }
                    if raw.liquidation {
                        liquidations.push((user, raw.bytes));
                    }
                    self.fill(FillWire(user, body))
                });
                // The fast path read every byte of the line as UTF-8 (or refused it), so the check cannot fail.
                let verbatim = |v: Vec<(Address, &[u8])>| {
                    v.into_iter()
                        .map(|(u, raw)| Some((u, std::sync::Arc::from(std::str::from_utf8(raw).ok()?))))
                        .collect::<Option<Vec<_>>>()
                };
                if let (Some((meta, fills)), Some(mine), Some(liquidations)) =
                    (parsed, verbatim(mine), verbatim(liquidations))
                {
                    users.fills = mine;
                    users.liquidations = liquidations;
                    return Ok(Line { meta, events: Events::Fills(fills), users });
                }
            }
        }
        self.off_layout[stream.index()] += 1;
        let line = std::str::from_utf8(line).map_err(|e| err(&e))?;
        if let Some(v) = view.as_ref().filter(|v| !v.users.is_empty() || (v.all_fills && stream == Stream::Fills)) {
            self.watched_in_full(stream, line, v, &mut users);
        }
        if stream == Stream::Fills {
            users.liquidations = liquidation_fills(line);
        }
        let (meta, events) = self.events_in_full(stream, line).map_err(|e| err(&e))?;
        Ok(Line { meta, events, users })
    }

    /// The watched users' events of a line that did not take the fast path.
    fn watched_in_full(&mut self, stream: Stream, line: &str, view: &WatchView, users: &mut UserEvents) {
        match stream {
            Stream::Statuses => users.rejected = self.rejected_in_full(line, view),
            Stream::Fills => users.fills = watched_fills(line, view),
            Stream::Diffs => {}
        }
    }

    /// `parse` without the fast paths: the reference they are tested against.
    pub fn parse_in_full(&mut self, stream: Stream, line: &str) -> Result<Line, LineError> {
        let (meta, events) =
            self.events_in_full(stream, line).map_err(|e| LineError { stream, message: e.to_string() })?;
        let liquidations = if stream == Stream::Fills { liquidation_fills(line) } else { Vec::new() };
        Ok(Line { meta, events, users: UserEvents { liquidations, ..UserEvents::default() } })
    }

    /// A line's events read by serde alone: the reference, and where a line off every fast path goes.
    fn events_in_full(&mut self, stream: Stream, line: &str) -> Result<(LineMeta, Events), serde_json::Error> {
        Ok(match stream {
            Stream::Fills => {
                let env: Envelope<FillWire<'_>> = serde_json::from_str(line)?;
                (env.meta(), Events::Fills(env.events.into_iter().map(|w| self.fill(w)).collect()))
            }
            Stream::Statuses => self.statuses_in_full(line)?,
            Stream::Diffs => {
                let env: Envelope<DiffWire<'_>> = serde_json::from_str(line)?;
                (env.meta(), Events::Diffs(env.events.into_iter().map(|w| self.diff(w)).collect()))
            }
        })
    }

    /// Lines of `stream` so far that were not in the node's exact layout, so took the slower serde parse (a node
    /// version that changed its layout shows here).
    pub fn off_layout(&self, stream: Stream) -> u64 {
        self.off_layout[stream.index()]
    }

    /// The fast path: only the envelope head and the kept events go through serde. `None` if any of them does not
    /// parse, so the full parse can report the error against the whole line.
    #[allow(clippy::type_complexity)]
    fn split_statuses(&mut self, split: Split<'_>) -> Option<(LineMeta, Events, Vec<(u32, OrderStatus)>)> {
        // The head is the envelope with its events cut off: close it with an empty array and read it as one.
        let head: Envelope<serde::de::IgnoredAny> =
            serde_json::from_str(&format!("{},\"events\":[]}}", split.head)).ok()?;
        let mut rejected = split.rejected;
        let mut kept = Vec::with_capacity(split.kept.len());
        for event in split.kept {
            match self.status(serde_json::from_str(event).ok()?) {
                Some(status) => kept.push(status),
                None => rejected += 1,
            }
        }
        let watched = split.watched.into_iter().filter_map(|(at, ev)| Some((at, self.any_status(ev)?))).collect();
        Some((head.meta(), Events::Statuses { kept, rejected }, watched))
    }

    /// Every event through serde, in any key order.
    fn statuses_in_full(&mut self, line: &str) -> Result<(LineMeta, Events), serde_json::Error> {
        let env: Envelope<StatusWire<'_>> = serde_json::from_str(line)?;
        let meta = env.meta();
        let total = env.events.len();
        let kept: Vec<OrderStatus> = env.events.into_iter().filter_map(|w| self.status(w)).collect();
        let rejected = (total - kept.len()) as u32;
        Ok((meta, Events::Statuses { kept, rejected }))
    }

    fn diff(&mut self, w: DiffWire<'_>) -> Diff {
        let kind = match w.raw_book_diff {
            RawBookDiff::New { sz, insert_before } => DiffKind::New { sz, insert_before },
            RawBookDiff::Update { orig_sz, new_sz } => DiffKind::Update { orig_sz, new_sz },
            RawBookDiff::Remove => DiffKind::Remove,
        };
        Diff { coin: self.interner.str(&w.coin), user: w.user, oid: w.oid, side: w.side, px: w.px, kind }
    }

    fn status(&mut self, w: StatusWire<'_>) -> Option<OrderStatus> {
        let StatusWire::Kept { time, user, hash, builder, status, order } = w else {
            return None;
        };
        Some(OrderStatus {
            coin: self.interner.str(&order.coin),
            user,
            time: time.0,
            status: self.interner.str(status),
            hash,
            builder: builder.map(|b| b.get().into()),
            order: self.order_info(*order),
        })
    }

    fn fill(&mut self, FillWire(user, b): FillWire<'_>) -> Fill {
        let coin = self.interner.str(&b.coin);
        b.into_fill(coin, user)
    }

    /// Converts an `order` object (status or snapshot) into its compact form.
    /// Decodes one whole status event (a watched user's rejection).
    pub(crate) fn any_status(&mut self, piece: &str) -> Option<OrderStatus> {
        let w: AnyStatusWire<'_> = serde_json::from_str(piece).ok()?;
        Some(OrderStatus {
            coin: self.coin(&w.order.coin),
            user: w.user,
            time: w.time.0,
            status: self.coin(&w.status),
            hash: w.hash,
            builder: w.builder.filter(|b| b.get() != "null").map(|b| b.get().into()),
            order: self.order_info(w.order),
        })
    }

    /// The watched users' rejections of a status line taken by the full parse, decoded.
    fn rejected_in_full(&mut self, line: &str, view: &WatchView) -> Vec<(u32, OrderStatus)> {
        watched_rejections(line, view)
            .into_iter()
            .filter_map(|(at, ev)| Some((at, self.any_status(ev.get())?)))
            .collect()
    }

    pub(crate) fn order_info<C: Deref<Target = RawValue>>(&mut self, w: OrderWire<C>) -> OrderInfo {
        let flavor = self.interner.flavor(OrderFlavor {
            tif: w.tif,
            order_type: w.order_type,
            trigger_condition: w.trigger_condition,
            is_trigger: w.is_trigger,
            reduce_only: w.reduce_only,
            is_position_tpsl: w.is_position_tpsl,
        });
        let children = w.children.as_deref().map(RawValue::get).filter(|c| !matches!(*c, "[]" | "null"));
        OrderInfo {
            side: w.side,
            limit_px: w.limit_px,
            sz: w.sz,
            orig_sz: w.orig_sz.unwrap_or(w.sz),
            oid: w.oid,
            timestamp: w.timestamp,
            trigger_px: w.trigger_px,
            cloid: w.cloid,
            flavor,
            children: children.map(Into::into),
        }
    }

    /// The coin name, interned.
    pub(crate) fn coin(&mut self, name: &str) -> super::event::Coin {
        self.interner.str(name)
    }
}

#[cfg(test)]
#[path = "line_tests.rs"]
mod tests;
