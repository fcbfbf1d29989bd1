//! The feed ticks of one publish pass: trades, candles and the followed users' frames from fills steps, their
//! orderUpdates from statuses steps (streaming) or complete blocks, and l4Book diffs from complete blocks, in the
//! order ingest handed them on.

use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use super::{Publisher, stamped};
use crate::node::{Block, Coin, Stream};
use crate::publish::frame::Frame;
use crate::publish::hub::{CoinWants, Tick, Wanted};
use crate::publish::json;
use crate::state::{Step, StepData};

impl Publisher {
    /// A trades tick per fills line and an l4Book tick per complete block, in height order (a block's trades
    /// first, as the node writes them).
    pub(super) fn ticks(
        &mut self,
        wanted: &Wanted,
        fill_steps: &[Arc<Step>],
        status_steps: &[Arc<Step>],
        blocks: &[Arc<Block>],
    ) -> Vec<Tick> {
        let want_trades = wanted.coins.values().any(|w| w.trades);
        let want_l4 = wanted.coins.values().any(|w| w.l4);
        let users = self.hub.followed_users();
        // (height, step number, step, block): steps in the order ingest queued them, a complete block after them.
        let mut order: Vec<(u64, u64, Option<&Step>, Option<&Block>)> = Vec::new();
        order.extend(fill_steps.iter().map(|s| (s.height, s.seq, Some(&**s), None)));
        if !users.is_empty() {
            order.extend(status_steps.iter().map(|s| (s.height, s.seq, Some(&**s), None)));
        }
        // Complete blocks make l4Book ticks and the followed users' orderUpdates (which need the statuses).
        if want_l4 || !users.is_empty() {
            order.extend(blocks.iter().map(|b| (b.height, u64::MAX, None, Some(&**b))));
        }
        order.sort_by_key(|o| (o.0, o.1));
        let mut out = Vec::with_capacity(order.len());
        for (height, _, step, block) in order {
            self.tick_seq += 1;
            let mut tick = Tick::new(self.tick_seq, height);
            if let Some(Step { data: StepData::Statuses(part), .. }) = step
                && !users.is_empty()
            {
                // Streaming at line speed: the orderUpdates of the statuses lines read, before their block is whole.
                let audit = self.audit_of(height, part.block_time, Stream::Statuses);
                tick.users_generation = part.users.generation;
                tick.users = crate::publish::users::order_frames(part, &users, self.tick_seq, stamped(audit));
            }
            if let Some(Step { data: StepData::Fills { fills, liquidations, .. }, block_time, .. }) = step {
                // Every coin's recent trades, tagged with the tick that carries them, for new subscribers.
                self.hub.remember_trades(self.tick_seq, fills);
                self.hub.remember_liquidations(self.tick_seq, height, liquidations);
                if !liquidations.is_empty() {
                    let audit = self.audit_of(height, *block_time, Stream::Fills);
                    let bytes = crate::publish::liquidations::frame(liquidations.iter(), false);
                    tick.liquidations = Some(Arc::new(Frame::new(self.tick_seq, bytes, stamped(audit))));
                }
            }
            if let Some(Step { data: StepData::Fills { fills, .. }, block_time, .. }) = step
                && !self.candles.is_empty()
            {
                let audit = self.audit_of(height, *block_time, Stream::Fills);
                tick.candles = self.candles.on_fills(&*self.hub, height, fills, self.tick_seq, stamped(audit));
            }
            if let Some(Step { data: StepData::Fills { users: user_fills, generation, .. }, block_time, .. }) = step
                && !users.is_empty()
            {
                // userFills and userEvents need only this line: they go out with the trades, not with the block.
                let audit = self.audit_of(height, *block_time, Stream::Fills);
                tick.users_generation = *generation;
                tick.users = crate::publish::users::fill_frames(user_fills, &users, self.tick_seq, stamped(audit));
            }
            if let Some(Step { data: StepData::Fills { fills, .. }, block_time, .. }) = step
                && want_trades
            {
                let audit = self.audit_of(height, *block_time, Stream::Fills);
                for (coin, fills) in group_by_coin(fills.iter().map(|f| (&f.coin, f)), wanted, |w| w.trades) {
                    let frame = Frame::new(self.tick_seq, json::trades(fills.into_iter()), stamped(audit));
                    tick.trades.insert(coin, Arc::new(frame));
                    self.hub.counters().trade_frames.inc();
                }
            }
            if let Some(b) = block {
                let audit = self.audit_of(height, b.block_time, Stream::Statuses);
                if want_l4 {
                    let mut by_coin = group_by_coin(b.diffs.iter().map(|d| (&d.coin, d)), wanted, |w| w.l4);
                    // A trigger order's statuses change the coin's waiting orders without any diff.
                    for s in b.statuses.iter().filter(|s| concerns_trigger(s)) {
                        if wanted.coins.get(&s.coin).is_some_and(|w| w.l4) {
                            by_coin.entry(s.coin.clone()).or_default();
                        }
                    }
                    for (coin, diffs) in by_coin {
                        let oids: FxHashSet<u64> = diffs.iter().map(|d| d.oid).collect();
                        let statuses: Vec<_> = b
                            .statuses
                            .iter()
                            .filter(|s| s.coin == coin && (oids.contains(&s.order.oid) || concerns_trigger(s)))
                            .collect();
                        let bytes = json::l4_updates(&coin, b.height, b.block_time, &diffs, &statuses);
                        tick.l4.insert(coin, Arc::new(Frame::new(self.tick_seq, bytes, stamped(audit))));
                        self.hub.counters().l4_frames.inc();
                    }
                }
                if !b.orders_stepped {
                    tick.users_generation = b.users.generation;
                    tick.users = crate::publish::users::order_frames(b, &users, self.tick_seq, stamped(audit));
                }
            }
            out.push(tick);
        }
        out
    }
}

/// A status of a trigger order (waiting, or triggered): l4Book sends it whether or not a diff touches its oid, so
/// a client keeps the coin's waiting trigger orders as the snapshot frame lists them.
fn concerns_trigger(s: &crate::node::OrderStatus) -> bool {
    s.order.flavor.is_trigger || &*s.status == "triggered"
}

/// Items of wanted coins grouped by coin, in first-appearance order within each coin.
fn group_by_coin<'a, T>(
    items: impl Iterator<Item = (&'a Coin, &'a T)>,
    wanted: &Wanted,
    wants: impl Fn(&CoinWants) -> bool,
) -> FxHashMap<Coin, Vec<&'a T>> {
    let mut out: FxHashMap<Coin, Vec<&T>> = FxHashMap::default();
    for (coin, item) in items {
        if wanted.coins.get(coin).is_some_and(|w| wants(w)) {
            out.entry(coin.clone()).or_default().push(item);
        }
    }
    out
}
