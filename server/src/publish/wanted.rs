//! What connections want built: per coin its L2 shapes, bbo, trades, l4Book and candles (`Wanted`, loaded by the
//! publisher once a pass), the subscriber counts behind it (`Registry`, the hub's), and the shapes changed since
//! the publisher last looked (`ShapeChanges`), so a subscription change costs its own coin.

use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use super::candles::Interval;
use super::slot::Slot;
use crate::book::l2::L2Params;
use crate::node::Coin;

/// An aggregation (`nSigFigs`, `mantissa`) and the slots of its wanted depths, deepest last: one aggregation pass
/// serves every depth.
#[derive(Clone, Debug)]
pub struct L2Group {
    pub n_sig_figs: Option<u8>,
    pub mantissa: Option<u8>,
    pub depths: Vec<Depth>,
}

/// One wanted depth (`nLevels`) of an aggregation, and the slot its frames go to.
#[derive(Clone, Debug)]
pub struct Depth {
    pub n_levels: usize,
    pub slot: Arc<Slot>,
}

/// Per coin, what some connection wants built.
#[derive(Clone, Debug, Default)]
pub struct CoinWants {
    pub l2: Vec<L2Group>,
    pub bbo: Option<Arc<Slot>>,
    pub trades: bool,
    pub l4: bool,
    /// Candle intervals wanted.
    pub candles: Vec<Interval>,
}

/// Everything wanted, as one immutable value the publisher loads per pass. `coins` is a persistent map, so a
/// subscription change makes a new value in O(log coins) and rebuilds only its own coin's entry.
#[derive(Clone, Debug, Default)]
pub struct Wanted {
    pub version: u64,
    pub coins: imbl::HashMap<Coin, Arc<CoinWants>>,
    /// allMids per dex (`None`: the main dex).
    pub mids: Vec<(Option<Coin>, Arc<Slot>)>,
}

/// Subscriber counts of one coin's streams; the entry goes when its last subscriber leaves.
#[derive(Debug, Default)]
pub(super) struct CoinSubs {
    pub(super) l2: FxHashMap<L2Params, (usize, Arc<Slot>)>,
    pub(super) bbo: Option<(usize, Arc<Slot>)>,
    pub(super) trades: usize,
    pub(super) l4: usize,
    pub(super) candles: FxHashMap<Interval, usize>,
}

impl CoinSubs {
    pub(super) fn is_empty(&self) -> bool {
        self.l2.is_empty() && self.bbo.is_none() && self.trades == 0 && self.l4 == 0 && self.candles.is_empty()
    }

    /// What the publisher must build for this coin: L2 shapes grouped by aggregation, deepest depth last.
    pub(super) fn wants(&self) -> CoinWants {
        let mut w = CoinWants::default();
        for (params, (_, slot)) in &self.l2 {
            let same = |g: &L2Group| (g.n_sig_figs, g.mantissa) == (params.n_sig_figs, params.mantissa);
            let i = if let Some(i) = w.l2.iter().position(same) {
                i
            } else {
                let group = L2Group { n_sig_figs: params.n_sig_figs, mantissa: params.mantissa, depths: Vec::new() };
                w.l2.push(group);
                w.l2.len() - 1
            };
            w.l2[i].depths.push(Depth { n_levels: params.n_levels, slot: slot.clone() });
            w.l2[i].depths.sort_by_key(|d| d.n_levels);
        }
        w.bbo = self.bbo.as_ref().map(|b| b.1.clone());
        (w.trades, w.l4) = (self.trades > 0, self.l4 > 0);
        w.candles = self.candles.keys().copied().collect();
        w.candles.sort();
        w
    }
}

#[derive(Debug, Default)]
pub(super) struct Registry {
    pub(super) version: u64,
    pub(super) coins: FxHashMap<Coin, CoinSubs>,
    pub(super) mids: FxHashMap<Option<Coin>, (usize, Arc<Slot>)>,
    /// Coins with an L2 or bbo subscription (the books split a block's first part for these).
    pub(super) book_coins: FxHashSet<Coin>,
    /// What changed shape since the publisher last looked (`Hub::take_shape_changes`).
    pub(super) changes: ShapeChanges,
}

/// The subscription shapes added or dropped since the publisher's last pass: it builds just these, so a
/// subscription change costs its own keys, not every wanted coin.
#[derive(Debug, Default)]
pub struct ShapeChanges {
    pub coins: FxHashSet<Coin>,
    /// allMids gained or lost a dex.
    pub mids: bool,
}

impl ShapeChanges {
    pub fn is_empty(&self) -> bool {
        self.coins.is_empty() && !self.mids
    }
}
