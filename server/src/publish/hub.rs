//! What connections want and what the publisher has made for them.
//!
//! Connections register subscriptions here (reference counted, so a shape many clients share is built once) and
//! read results from here: the newest L2/bbo/allMids frame of each wanted shape sits in a `Slot` (an `ArcSwap`, so
//! readers never lock and a slow reader simply skips to the newest), and the ordered streams (trades, l4Book) sit
//! in a bounded feed of per-block ticks (`feed`) that every connection reads with its own cursor. One `watch`
//! channel wakes every connection after each publish pass. Each feature's state (users followed, recent trades,
//! candles, the history store) is its own type in its own module; the publisher reaches it through the hub's methods.

use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use tokio::sync::{oneshot, watch};

use super::candles::Interval;
use super::candles::keeper::{CandleFrames, CandleKey};
use super::feed::Feed;
pub use super::feed::Tick;
use super::frame::Frame;
use super::history::{History, Turns};
use super::misc_feed::MiscInbox;
use super::recent_trades::RecentTrades;
pub use super::slot::Slot;
use super::store_link::StoreLink;
use super::users::{UserChannel, UserSubs, UserWants};
use super::wanted::Registry;
pub use super::wanted::{CoinWants, Depth, L2Group, Wanted};
use crate::book::l2::L2Params;
use crate::node::{Address, Coin};
use crate::state::Shared;

/// One L2 shape of one coin.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct L2Key {
    pub coin: Coin,
    pub params: L2Params,
}

/// A subscription as the hub counts it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Want {
    L2(L2Key),
    Bbo(Coin),
    Mids(Option<Coin>),
    Trades(Coin),
    L4(Coin),
    Candle(Coin, Interval),
    /// hlbook's market-wide liquidation fills (`publish::liquidations`): built whether wanted or not.
    Liquidations,
    /// orderUpdates, userFills, userEvents of one user.
    User {
        user: Address,
        channel: UserChannel,
        /// userFills' `aggregateByTime`: a different frame, so a different key.
        aggregate_by_time: bool,
    },
}

/// A fresh l4Book snapshot: the frame, and the feed tick it is current after.
#[derive(Debug, Clone)]
pub struct L4Snapshot {
    pub after_seq: u64,
    pub frame: Arc<Frame>,
}

crate::state::counter::counters! {
    /// Counters of the publish stage, exported as `hlbook_publish_<name>` and under `publish` in the admin `/health`.
    pub struct PublishCounters {
        /// Publish passes run.
        passes,
        /// l2Book frames built.
        l2_frames,
        /// l2Book aggregations serialized: one per coin, aggregation and pass, whatever depths are wanted.
        l2_serializations,
        /// bbo frames built.
        bbo_frames,
        /// allMids frames built.
        mids_frames,
        /// trades frames built.
        trade_frames,
        /// l4Book update frames built.
        l4_frames,
        /// l4Book snapshots built.
        l4_snapshots,
        /// Coin books taken under the books' read lock for l4Book snapshot jobs: at most once per coin and pass,
        /// and not again until the next block once its snapshot is made. A take is O(1), the book shared
        /// copy-on-write; what it costs the writer is ingest's `book_copies`.
        l4_snapshot_copies,
        /// l4Book snapshot requests answered with a frame already made at that height (no copy, no lock).
        l4_snapshots_shared,
        /// l4Book snapshots not made, or made for nobody, because every subscriber asking had left.
        l4_snapshots_abandoned,
        /// Passes that found the books reloaded or blocks missing from the recent ring.
        discontinuities,
        /// Passes that published a split diffs step's first part ahead of its other coins (`book::first`).
        first_parts,
        /// Streaming: a coin's L2 and bbo held back for a pass because its book was between two events of one
        /// order (crossed, or an order of size 0 resting; `CoinBook::is_sane`).
        l2_withheld,
        /// Candle backfills put off to a later pass because the backfill queue was full.
        candle_backfills_deferred,
        /// Candle backfills dropped unread because nobody wanted their keys any more.
        candle_backfills_skipped,
    }
}

#[derive(Debug)]
pub struct Hub {
    shared: Arc<Shared>,
    registry: Mutex<Registry>,
    wanted: ArcSwap<Wanted>,
    /// The ordered streams' backlog.
    feed: Feed,
    requests: Mutex<Vec<(Coin, oneshot::Sender<L4Snapshot>)>>,
    published: watch::Sender<u64>,
    counters: PublishCounters,
    /// Per-block stage times, settled into latency histograms.
    stages: crate::audit::Stages,
    /// Followers of per-user channels.
    users: UserSubs,
    /// Each coin's last trades, for a trades subscription's first frame.
    recent_trades: RecentTrades,
    recent_liquidations: super::liquidations::RecentLiquidations,
    /// Each wanted candle's newest frame, and finished backfills.
    candles: CandleFrames,
    /// The history store and its writer's channel, for userFills' and candles' first frames and candleSnapshot.
    store: StoreLink,
    /// Reads of history: their turns, and userFills reads shared per user.
    history: History,
    /// misc_events blocks waiting for the publisher.
    misc: MiscInbox,
    /// node_twap_statuses blocks waiting for the publisher.
    twaps: super::twap_feed::TwapInbox,
    /// The highest node_twap_statuses block handed over (`push_twaps`), set before it is queued.
    twaps_pushed: std::sync::atomic::AtomicU64,
    misc_pushed: std::sync::atomic::AtomicU64,
    /// Ordered streams whose last subscriber left, still built for a while so it can resume (`subs`).
    lingering: subs::Lingering,
}

impl Hub {
    /// `feed_ticks` and `feed_bytes` bound the ordered-stream backlog shared by all connections.
    pub fn new(shared: Arc<Shared>, feed_ticks: usize, feed_bytes: usize) -> Hub {
        Hub {
            shared,
            registry: Mutex::new(Registry::default()),
            wanted: ArcSwap::from_pointee(Wanted::default()),
            feed: Feed::new(feed_ticks, feed_bytes),
            requests: Mutex::new(Vec::new()),
            published: watch::channel(0).0,
            counters: PublishCounters::default(),
            stages: crate::audit::Stages::new(),
            users: UserSubs::default(),
            recent_trades: RecentTrades::default(),
            recent_liquidations: Default::default(),
            candles: CandleFrames::default(),
            store: StoreLink::default(),
            history: History::new(Turns::new(2, 64, std::time::Duration::from_secs(10))),
            misc: MiscInbox::default(),
            twaps: Default::default(),
            twaps_pushed: Default::default(),
            misc_pushed: std::sync::atomic::AtomicU64::new(0),
            lingering: subs::Lingering::default(),
        }
    }

    /// `/status`'s window of settled blocks covers `window` of wall time instead of a minute.
    #[must_use]
    pub fn with_status_window(mut self, window: std::time::Duration) -> Hub {
        self.stages.set_window(window.as_nanos() as i64);
        self
    }

    /// Sets the history reads' limits: `reads` at once, `queue` waiting at most `wait` each.
    #[must_use]
    pub fn with_history_limits(mut self, reads: usize, queue: usize, wait: std::time::Duration) -> Hub {
        self.history = History::new(Turns::new(reads, queue, wait));
        self
    }

    /// The state the hub publishes from.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Per-line stage times (the audit stamps frames with them; connections record their writes).
    pub fn stages(&self) -> &crate::audit::Stages {
        &self.stages
    }

    /// The publish stage's counters and its history reads', by name.
    pub fn counter_list(&self) -> Vec<crate::state::counter::Named> {
        let mut list = self.counters.to_list();
        list.extend(self.history.counters.to_list());
        list
    }

    /// Reads of history (userFills snapshots, candleSnapshot): their turns and counters.
    pub fn history(&self) -> &History {
        &self.history
    }

    /// `coin`'s recent trades as a trades subscription's first frame, for a subscription at feed tick `cursor`.
    pub fn recent_trades_frame(&self, coin: &Coin, cursor: u64) -> Option<Vec<u8>> {
        self.recent_trades.frame(coin, cursor)
    }

    /// The liquidations snapshot frame: the fills kept up to feed tick `cursor`.
    pub fn recent_liquidations_frame(&self, cursor: u64) -> Vec<u8> {
        self.recent_liquidations.snapshot(cursor)
    }

    /// The recentTrades info answer of `coin`'s kept trades, if it has any.
    pub fn recent_trades_data(&self, coin: &Coin) -> Option<Vec<u8>> {
        self.recent_trades.data(coin)
    }

    /// A candle key's newest frame (its first frame for a new subscription).
    pub fn latest_candle(&self, key: &CandleKey) -> Option<super::candles::keeper::Latest> {
        self.candles.latest(key)
    }

    /// The history store, once opened (no store: no history).
    pub fn store(&self) -> Option<Arc<crate::store::Store>> {
        self.store.get()
    }

    /// Gives the hub its history store and the writer's channel, which the publisher feeds every fills step.
    pub fn set_store(&self, store: Arc<crate::store::Store>, feed: crate::store::writer::StoreSender) {
        self.store.set(store, feed);
    }

    /// The store writer's channel, for the one publisher that feeds it.
    pub(super) fn take_store_feeder(&self) -> Option<crate::store::writer::StoreSender> {
        self.store.take_feeder()
    }

    /// The publish stage's counters.
    pub fn counters(&self) -> &PublishCounters {
        &self.counters
    }

    /// The users some connection follows, and on which channels.
    pub(super) fn followed_users(&self) -> Arc<FxHashMap<Address, UserWants>> {
        self.users.wanted()
    }

    /// A whole misc_events block for the followers of its users; wakes the publisher. With nobody followed it is
    /// nobody's, and costs no pass.
    pub fn push_misc(&self, block: crate::node::misc::MiscBlock) {
        // Before it can reach any pass: a subscription that reads this after following its user gets every later
        // block live (`misc_pushed`).
        self.misc_pushed.fetch_max(block.height, std::sync::atomic::Ordering::SeqCst);
        if self.users.is_empty() {
            return;
        }
        if !self.misc.push(block) {
            self.shared.health().misc().counters().blocks_dropped.inc();
        }
        self.shared.signal_change();
    }

    /// The highest misc_events block handed to the publisher. Read after a subscription's user is followed (and
    /// after the feed's head): every block above it reaches a pass that builds the user's frames, in a tick after
    /// that head, so its snapshot takes the blocks up to it and its live frames the blocks above.
    pub fn misc_pushed(&self) -> u64 {
        self.misc_pushed.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub(super) fn take_misc(&self) -> Vec<crate::node::misc::MiscBlock> {
        self.misc.take()
    }

    /// A whole node_twap_statuses block for the followers of its users, as `push_misc`.
    pub fn push_twaps(&self, block: crate::node::twap::TwapBlock) {
        // Before it can reach a tick: a subscription that reads this height takes the block from the store.
        self.twaps_pushed.fetch_max(block.height, std::sync::atomic::Ordering::SeqCst);
        if self.users.is_empty() {
            return;
        }
        if !self.twaps.push(block) {
            self.shared.health().twaps().counters().blocks_dropped.inc();
        }
        self.shared.signal_change();
    }

    /// The node_twap_statuses blocks up to this height are a new userTwapHistory subscription's snapshot
    /// (`publish::twap_history`).
    pub fn twaps_handed(&self) -> u64 {
        let pushed = self.twaps_pushed.load(std::sync::atomic::Ordering::SeqCst);
        pushed.max(self.shared.health().twaps().from())
    }

    pub(super) fn take_twaps(&self) -> Vec<crate::node::twap::TwapBlock> {
        self.twaps.take()
    }

    /// Remembers the trades of tick `seq`'s fills, for the first frame of later trades subscriptions.
    pub(super) fn remember_trades(&self, seq: u64, fills: &[crate::node::Fill]) {
        self.recent_trades.remember(seq, fills);
    }

    pub(super) fn remember_liquidations(&self, seq: u64, height: u64, list: &[super::liquidations::LiquidationFill]) {
        self.recent_liquidations.remember(seq, height, list);
    }

    /// After a restart, the liquidations snapshot's older entries from the history store, if it has one
    /// (`publish::liquidations::seed_from_store`); blocks its thread up to `timeout`.
    pub fn seed_liquidations(&self, timeout: std::time::Duration) {
        let Some(store) = self.store() else { return };
        match super::liquidations::seed_from_store(&self.recent_liquidations, &store, timeout) {
            Ok(0) => {}
            Ok(n) => tracing::info!(fills = n, "liquidations snapshot: the newest fills from the history store"),
            Err(e) => tracing::warn!("liquidations snapshot starts empty: {e}"),
        }
    }

    /// Each wanted candle's newest frame and finished backfills (the candle workers' side, `hub_workers`).
    pub(super) fn candles(&self) -> &CandleFrames {
        &self.candles
    }

    /// Whether candle backfills finished since the publisher last took them.
    pub(super) fn candle_backfills_done(&self) -> bool {
        self.candles.has_inbox()
    }

    /// Wakes after every publish pass.
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.published.subscribe()
    }

    pub fn wanted(&self) -> Arc<Wanted> {
        self.wanted.load_full()
    }

    /// Asks the publisher for a fresh l4Book snapshot of `coin`, current after some feed tick.
    pub fn request_snapshot(&self, coin: Coin) -> oneshot::Receiver<L4Snapshot> {
        let (tx, rx) = oneshot::channel();
        self.requests.lock().push((coin, tx));
        self.shared.signal_change();
        rx
    }

    pub(super) fn take_requests(&self) -> Vec<(Coin, oneshot::Sender<L4Snapshot>)> {
        std::mem::take(&mut *self.requests.lock())
    }

    /// Appends ticks, dropping the oldest past the limits.
    pub(super) fn push_ticks(&self, ticks: Vec<Tick>) {
        self.feed.push(ticks);
    }

    /// Tells every connection a pass is done.
    pub(super) fn announce(&self, pass: u64) {
        self.published.send_replace(pass);
    }

    /// The newest tick's sequence (0 before the first).
    pub fn feed_head(&self) -> u64 {
        self.feed.head()
    }

    /// Appends the ticks after `seq`, oldest first; returns the oldest sequence the feed still holds, so a reader
    /// whose `seq + 1` is below it knows it lost the ticks in between.
    pub fn ticks_after(&self, seq: u64, out: &mut Vec<Arc<Tick>>) -> u64 {
        self.feed.ticks_after(seq, out)
    }

    /// Whether the feed still holds every tick after `seq`.
    pub fn feed_holds_after(&self, seq: u64) -> bool {
        self.feed.holds_after(seq)
    }

    /// The block height of the feed tick `seq`, while the feed holds it.
    pub fn tick_height(&self, seq: u64) -> Option<u64> {
        self.feed.height_of(seq)
    }

    /// Wakes every connection without a pass (a snapshot or a post answer is ready).
    pub fn poke(&self) {
        self.published.send_modify(|_| {});
    }

    pub fn feed_bytes(&self) -> u64 {
        self.feed.bytes()
    }

    /// Each subscribed coin with the block time of its newest L2 frame (coins with no frame yet are left out).
    pub fn newest_l2(&self) -> Vec<(String, i64)> {
        let wanted = self.wanted();
        let newest = |w: &CoinWants| {
            w.l2.iter().flat_map(|g| &g.depths).filter_map(|d| d.slot.audit()).map(|a| a.block_time()).max()
        };
        wanted.coins.iter().filter_map(|(coin, w)| Some((coin.to_string(), newest(w)?))).collect()
    }
}

mod subs;
pub use super::feed::{NoResume, ResumeAt};

#[cfg(test)]
#[path = "hub_tests.rs"]
mod tests;
