//! Per-user streams: orderUpdates, userFills and userEvents (channel `user`), built once per block per followed
//! user and carried in the feed ticks, so every follower of a user shares the same frame bytes (userFundings,
//! userNonFundingLedgerUpdates and userEvents' fundings come from misc_events: `publish::misc_feed`;
//! userTwapHistory from node_twap_statuses: `publish::twap_feed`). userFills and
//! userEvents need only the fills line and ride its tick, with the trades; orderUpdates need the statuses and ride
//! the complete block's tick.
//!
//! Who is followed is counted here per channel; the first follower of a user adds it to the parser's watch set
//! (`node::Watched`), the last one out drops it (and with it the decoding of that user's rejections). Shapes follow
//! ../shared/docs/hl-user-channels.md: orderUpdates is a bare `WsOrder[]` with `statusTimestamp`, rejections
//! included, in line order; userFills carries the node's fill objects verbatim with `user` lower-case; the
//! userEvents frame is `{"fills":[…]}` on channel `user`.

use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use serde::Serialize;

use super::frame::{Audit, Frame};
use crate::book::RestingOrder;
use crate::node::time::nanos_to_millis;
use crate::node::{Address, Block, Cloid, Fixed, OrderStatus, Watched};

/// The per-user channels.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum UserChannel {
    Orders,
    Fills,
    Events,
    Fundings,
    Ledger,
    /// userTwapSliceFills: the fills of the user's TWAP slices (those with a `twapId`).
    TwapSlices,
    /// userTwapHistory: the user's TWAPs started and ended (node_twap_statuses).
    TwapHistory,
}

impl UserChannel {
    pub(super) fn index(self) -> usize {
        self as usize
    }

    /// Built from the user's fills, with a snapshot from the history store, which keeps the user's fills while
    /// someone follows this channel.
    pub fn from_fills_history(self) -> bool {
        matches!(self, UserChannel::Fills | UserChannel::TwapSlices)
    }

    /// The subscription type.
    pub fn kind(self) -> &'static str {
        match self {
            UserChannel::Orders => "orderUpdates",
            UserChannel::Fills => "userFills",
            UserChannel::Events => "userEvents",
            UserChannel::Fundings => "userFundings",
            UserChannel::Ledger => "userNonFundingLedgerUpdates",
            UserChannel::TwapSlices => "userTwapSliceFills",
            UserChannel::TwapHistory => "userTwapHistory",
        }
    }
}

/// Which channels of a user someone follows.
pub type UserWants = [bool; CHANNELS];

const CHANNELS: usize = 7;

/// Followers per user and channel.
#[derive(Debug, Default)]
pub struct UserSubs {
    counts: Mutex<FxHashMap<Address, [usize; CHANNELS]>>,
    wanted: ArcSwap<FxHashMap<Address, UserWants>>,
}

impl UserSubs {
    /// Counts one more follower; returns the watch generation from which blocks hold all of the user's events.
    pub fn add(&self, user: Address, ch: UserChannel, watched: &Watched) -> u64 {
        let mut counts = self.counts.lock();
        let c = counts.entry(user).or_default();
        c[ch.index()] += 1;
        let generation = watched.add(user);
        self.store(&counts);
        generation
    }

    pub fn remove(&self, user: Address, ch: UserChannel, watched: &Watched) {
        let mut counts = self.counts.lock();
        let Some(c) = counts.get_mut(&user) else { return };
        c[ch.index()] = c[ch.index()].saturating_sub(1);
        if c.iter().all(|n| *n == 0) {
            counts.remove(&user);
        }
        watched.remove(user);
        self.store(&counts);
    }

    fn store(&self, counts: &FxHashMap<Address, [usize; CHANNELS]>) {
        let wanted = counts.iter().map(|(u, c)| (*u, c.map(|n| n > 0))).collect();
        self.wanted.store(Arc::new(wanted));
    }

    pub fn wanted(&self) -> Arc<FxHashMap<Address, UserWants>> {
        self.wanted.load_full()
    }

    /// Whether anyone follows `user` on any channel.
    pub fn follows(&self, user: Address) -> bool {
        self.counts.lock().contains_key(&user)
    }

    /// Distinct users followed.
    pub fn len(&self) -> usize {
        self.counts.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One block's frames of one user (a channel nobody follows, or without events in the block, has none).
#[derive(Debug, Default)]
pub struct UserFrames {
    pub orders: Option<Arc<Frame>>,
    pub fills: Option<Arc<Frame>>,
    /// userFills with `aggregateByTime` (the same frame when nothing merges).
    pub fills_aggregated: Option<Arc<Frame>>,
    pub events: Option<Arc<Frame>>,
    /// userEvents frames after `events` in the same tick: a misc_events block's fundings, one a frame (official
    /// userEvents carries one funding per message).
    pub more_events: Vec<Arc<Frame>>,
    /// From misc_events (`publish::misc_feed`).
    pub fundings: Option<Arc<Frame>>,
    pub ledger: Option<Arc<Frame>>,
    pub twap_slices: Option<Arc<Frame>>,
    /// From node_twap_statuses (`publish::twap_feed`).
    pub twap_history: Option<Arc<Frame>>,
}

impl UserFrames {
    /// The channel's further frames of the tick, after `get`'s (userEvents fundings).
    pub fn more(&self, ch: UserChannel) -> &[Arc<Frame>] {
        if ch == UserChannel::Events { &self.more_events } else { &[] }
    }

    pub fn get(&self, ch: UserChannel) -> Option<&Arc<Frame>> {
        match ch {
            UserChannel::Orders => self.orders.as_ref(),
            UserChannel::Fills => self.fills.as_ref(),
            UserChannel::Events => self.events.as_ref(),
            UserChannel::Fundings => self.fundings.as_ref(),
            UserChannel::Ledger => self.ledger.as_ref(),
            UserChannel::TwapSlices => self.twap_slices.as_ref(),
            UserChannel::TwapHistory => self.twap_history.as_ref(),
        }
    }

    /// userFills' frame, merged by time or not.
    pub fn fills(&self, aggregate_by_time: bool) -> Option<&Arc<Frame>> {
        if aggregate_by_time { self.fills_aggregated.as_ref() } else { self.fills.as_ref() }
    }

    pub fn bytes(&self) -> usize {
        let merged = self.fills_aggregated.as_ref().filter(|m| !self.fills.as_ref().is_some_and(|f| Arc::ptr_eq(f, m)));
        let frames = [&self.orders, &self.fills, &self.events, &self.fundings, &self.ledger];
        let frames = frames.into_iter().chain([&self.twap_slices, &self.twap_history]);
        let frames = frames.flatten().chain(merged).chain(&self.more_events);
        frames.map(|f| f.json.len()).sum()
    }
}

/// The orderUpdates frames of every followed user with statuses in the complete `block`.
pub fn order_frames(
    block: &Block,
    wanted: &FxHashMap<Address, UserWants>,
    seq: u64,
    audit: Audit,
) -> FxHashMap<Address, UserFrames> {
    let mut out: FxHashMap<Address, UserFrames> = FxHashMap::default();
    if wanted.is_empty() {
        return out;
    }
    let mut orders: FxHashMap<Address, Vec<&OrderStatus>> = FxHashMap::default();
    let mut cancels: FxHashMap<Address, Vec<&OrderStatus>> = FxHashMap::default();
    for s in in_line_order(block) {
        let Some(w) = wanted.get(&s.user) else { continue };
        if w[UserChannel::Orders.index()] {
            orders.entry(s.user).or_default().push(s);
        }
        if w[UserChannel::Events.index()] && is_non_user_cancel(&s.status) {
            cancels.entry(s.user).or_default().push(s);
        }
    }
    for (u, list) in orders {
        out.entry(u).or_default().orders = Some(Arc::new(Frame::new(seq, order_updates(&list), audit)));
    }
    for (u, list) in cancels {
        out.entry(u).or_default().events = Some(Arc::new(Frame::new(seq, non_user_cancels(&list), audit)));
    }
    out
}

/// Cancels the exchange makes, not the user: the `…Canceled` statuses of the official order-status table
/// (docs/hl-user-channels.md §2, "Status values"), whose descriptions there name a cause other than the user's
/// request (margin, liquidation, a filled sibling, a reduce-only order that would grow the position, a delisting,
/// the open-interest cap, a vault withdrawal, a self-trade, a settled outcome). That these are what userEvents'
/// `nonUserCancel` reports is inferred: the docs give the kind (`[{coin, oid}]`) and not the statuses behind it.
/// `canceled` and `scheduledCancel` are the user's own.
pub fn is_non_user_cancel(status: &str) -> bool {
    status.ends_with("Canceled")
}

/// `{"channel":"user","data":{"nonUserCancel":[{"coin":…,"oid":…}…]}}`.
fn non_user_cancels(list: &[&OrderStatus]) -> Vec<u8> {
    let mut out = b"{\"channel\":\"user\",\"data\":{\"nonUserCancel\":[".to_vec();
    for (i, s) in list.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"coin\":");
        serde_json::to_writer(&mut out, &*s.coin).expect("a string serializes");
        out.extend_from_slice(format!(",\"oid\":{}}}", s.order.oid).as_bytes());
    }
    out.extend_from_slice(b"]}}");
    out
}

/// The userFills and userEvents frames of every followed user with fills in one block's fills line (`line_fills`:
/// the line's watched users' fill objects, verbatim).
pub fn fill_frames(
    line_fills: &[(Address, Arc<str>)],
    wanted: &FxHashMap<Address, UserWants>,
    seq: u64,
    audit: Audit,
) -> FxHashMap<Address, UserFrames> {
    let mut out: FxHashMap<Address, UserFrames> = FxHashMap::default();
    let mut fills: FxHashMap<Address, Vec<&str>> = FxHashMap::default();
    for (u, f) in line_fills {
        if wanted.contains_key(u) {
            fills.entry(*u).or_default().push(f);
        }
    }
    let frame = |json: Vec<u8>| Some(Arc::new(Frame::new(seq, json, audit)));
    for (u, list) in fills {
        let w = wanted[&u];
        let f = out.entry(u).or_default();
        if w[UserChannel::Fills.index()] {
            f.fills = frame(user_fills(&u, &list, false));
            f.fills_aggregated = match user_fills_merged(&u, &list) {
                Some(json) => frame(json),
                None => f.fills.clone(),
            };
        }
        if w[UserChannel::Events.index()] {
            f.events = frame(user_event_fills(&list));
        }
        if w[UserChannel::TwapSlices.index()] {
            f.twap_slices = twap_slice_fills(&u, &list, false).and_then(frame);
        }
    }
    out
}

/// The block's statuses and its watched rejections merged back into line order.
fn in_line_order(block: &Block) -> impl Iterator<Item = &OrderStatus> {
    let mut rejected = block.users.rejected.iter().peekable();
    let mut kept = block.statuses.iter().enumerate();
    std::iter::from_fn(move || {
        if let Some((at, _)) = rejected.peek() {
            let next_kept = kept.clone().next().map_or(u32::MAX, |(i, _)| i as u32);
            if *at <= next_kept {
                return rejected.next().map(|(_, s)| s);
            }
        }
        kept.next().map(|(_, s)| s)
    })
}

/// The official basic order object: `orderUpdates`' `order` and an `openOrders` entry. Built only here, one
/// constructor per thing it is made from, so the two answers cannot drift apart.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WsOrderBody<'a> {
    coin: &'a str,
    side: &'static str,
    limit_px: Fixed,
    sz: Fixed,
    oid: u64,
    timestamp: u64,
    orig_sz: Fixed,
    #[serde(skip_serializing_if = "Option::is_none")]
    cloid: Option<Cloid>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    reduce_only: bool,
}

impl<'a> WsOrderBody<'a> {
    /// The order of a status (`orderUpdates`).
    fn of_status(s: &'a OrderStatus) -> WsOrderBody<'a> {
        let o = &s.order;
        WsOrderBody {
            coin: &s.coin,
            side: o.side.as_str(),
            limit_px: o.limit_px,
            sz: o.sz,
            oid: o.oid,
            timestamp: o.timestamp,
            orig_sz: o.orig_sz,
            cloid: o.cloid,
            reduce_only: o.flavor.reduce_only,
        }
    }

    /// A resting order of `coin`'s book (`openOrders`).
    pub(crate) fn of_resting(coin: &'a str, o: &RestingOrder) -> WsOrderBody<'a> {
        WsOrderBody {
            coin,
            side: o.side.as_str(),
            // Where it rests (a triggered order: its `new` diff's px, not its status's limitPx).
            limit_px: o.px,
            sz: o.sz,
            oid: o.oid,
            timestamp: o.timestamp,
            orig_sz: o.orig_sz,
            cloid: o.cloid,
            reduce_only: o.flavor.reduce_only,
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WsOrder<'a> {
    order: WsOrderBody<'a>,
    status: &'a str,
    status_timestamp: i64,
}

fn ws_order(s: &OrderStatus) -> WsOrder<'_> {
    WsOrder { order: WsOrderBody::of_status(s), status: &s.status, status_timestamp: nanos_to_millis(s.time) }
}

/// `{"channel":"orderUpdates","data":[WsOrder…]}`.
pub fn order_updates(list: &[&OrderStatus]) -> Vec<u8> {
    let data: Vec<WsOrder<'_>> = list.iter().map(|s| ws_order(s)).collect();
    let mut out = b"{\"channel\":\"orderUpdates\",\"data\":".to_vec();
    // Serializing owned plain structs into a Vec cannot fail.
    serde_json::to_writer(&mut out, &data).expect("orderUpdates serialize");
    out.push(b'}');
    out
}

/// userFills with `aggregateByTime: true` of one block's `fills`; `None` when nothing merges (the plain frame is
/// the same).
pub fn user_fills_merged(user: &Address, fills: &[&str]) -> Option<Vec<u8>> {
    let merged = crate::store::fills::aggregate(fills);
    (merged.len() != fills.len()).then(|| {
        let merged: Vec<&str> = merged.iter().map(|m| &**m).collect();
        user_fills(user, &merged, false)
    })
}

/// `{"channel":"userTwapSliceFills","data":{["isSnapshot":true,]"user":…,"twapSliceFills":[{"fill":…,"twapId":…}]}}`
/// of the slices among `fills` (verbatim, in order); `None` when there is none and it is not a snapshot. The shape
/// is the one @nktkas/hyperliquid validates (`UserTwapSliceFillsEvent`: `user`, `twapSliceFills` of `{fill,
/// twapId}`, optional `isSnapshot`), the info answer the official docs' array of `{fill, twapId}`.
pub fn twap_slice_fills(user: &Address, fills: &[&str], snapshot: bool) -> Option<Vec<u8>> {
    let entries = twap_slice_entries(fills);
    if entries == b"[]" && !snapshot {
        return None;
    }
    let mut out = b"{\"channel\":\"userTwapSliceFills\",\"data\":{".to_vec();
    if snapshot {
        out.extend_from_slice(b"\"isSnapshot\":true,");
    }
    out.extend_from_slice(format!("\"user\":\"{user}\",\"twapSliceFills\":").as_bytes());
    out.extend_from_slice(&entries);
    out.extend_from_slice(b"}}");
    Some(out)
}

/// `[{"fill":…,"twapId":…},…]` of the slices among `fills`, in their order: the channel's list and the
/// `userTwapSliceFills` info answer.
pub fn twap_slice_entries(fills: &[&str]) -> Vec<u8> {
    let mut out = vec![b'['];
    for (fill, id) in fills.iter().filter_map(|f| Some((*f, crate::store::fills::twap_id(f)?))) {
        if out.len() > 1 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"fill\":");
        out.extend_from_slice(fill.as_bytes());
        out.extend_from_slice(format!(",\"twapId\":{id}}}").as_bytes());
    }
    out.push(b']');
    out
}

fn fill_array(out: &mut Vec<u8>, fills: &[&str]) {
    out.push(b'[');
    for (i, f) in fills.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(f.as_bytes());
    }
    out.push(b']');
}

/// `{"channel":"userFills","data":{["isSnapshot":true,]"user":…,"fills":[…]}}`, fills verbatim.
pub fn user_fills(user: &Address, fills: &[&str], snapshot: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(96 + fills.iter().map(|f| f.len() + 1).sum::<usize>());
    out.extend_from_slice(b"{\"channel\":\"userFills\",\"data\":{");
    if snapshot {
        out.extend_from_slice(b"\"isSnapshot\":true,");
    }
    out.extend_from_slice(format!("\"user\":\"{user}\",\"fills\":").as_bytes());
    fill_array(&mut out, fills);
    out.extend_from_slice(b"}}");
    out
}

/// `{"channel":"user","data":{"fills":[…]}}`.
pub fn user_event_fills(fills: &[&str]) -> Vec<u8> {
    let mut out = b"{\"channel\":\"user\",\"data\":{\"fills\":".to_vec();
    fill_array(&mut out, fills);
    out.extend_from_slice(b"}}");
    out
}

#[cfg(test)]
#[path = "users_tests.rs"]
mod tests;
