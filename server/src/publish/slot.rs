//! The newest frame of each conflated stream (L2, bbo, allMids), where connections read it without a lock: a
//! slow reader simply finds the newest one. Its own module because an L2 depth's slot reads its aggregation's
//! cell (`l2_frames`), which makes frames (`frame`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use arc_swap::ArcSwapOption;

use super::frame::{Audit, Frame};
use super::l2_frames::L2Cell;

/// The newest frame of one conflated stream. An L2 depth's slot reads its aggregation's `L2Cell` instead
/// (`publish::l2_frames`: every depth of an aggregation is published with one store); bbo and allMids use `frame`.
#[derive(Debug, Default)]
pub struct Slot {
    pub frame: ArcSwapOption<Frame>,
    /// Frames stored so far: each frame's `seq` is its number in this slot, so a reader that sent frame `s` and
    /// now finds `t` knows exactly `t - s - 1` frames were replaced before it could send them. (The publish pass
    /// number would not do: a pass that leaves this shape unchanged stores nothing here.)
    stored: AtomicU64,
    /// An L2 depth: its aggregation's cell and its `nLevels`.
    l2: Option<(Arc<L2Cell>, usize)>,
}

impl Slot {
    /// The slot of depth `n_levels` of the aggregation published in `cell`.
    pub fn l2(cell: Arc<L2Cell>, n_levels: usize) -> Slot {
        Slot { l2: Some((cell, n_levels)), ..Slot::default() }
    }

    /// The aggregation cell of an L2 depth's slot.
    pub fn l2_cell(&self) -> Option<&Arc<L2Cell>> {
        self.l2.as_ref().map(|(cell, _)| cell)
    }

    /// The newest frame (an L2 depth's is cut on first read).
    pub fn load_full(&self) -> Option<Arc<Frame>> {
        match &self.l2 {
            Some((cell, n)) => cell.frame(*n),
            None => self.frame.load_full(),
        }
    }

    /// The newest frame's stamp, without making an L2 depth's frame.
    pub fn audit(&self) -> Option<Audit> {
        match &self.l2 {
            Some((cell, n)) => cell.audit(*n),
            None => self.frame.load().as_ref().map(|f| f.audit),
        }
    }

    /// Stores the shape's next frame (the publisher is the only writer; bbo and allMids).
    pub fn put(&self, json: Vec<u8>, audit: Audit) {
        let seq = self.stored.fetch_add(1, Relaxed) + 1;
        self.frame.store(Some(Arc::new(Frame::new(seq, json, audit))));
    }
}
