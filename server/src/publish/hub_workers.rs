//! What the publisher's background workers (candle backfills, userFills reads) are given of the `Hub`: it
//! implements their traits here, so `hub` and the workers' modules name each other through no file circle.

use std::sync::Arc;

use super::candles::keeper::{CandleFrames, CandleHub};
use super::history::{FillsHub, History};
use super::hub::Hub;
use crate::state::Shared;

impl FillsHub for Hub {
    fn history(&self) -> &History {
        Hub::history(self)
    }

    fn shared(&self) -> &Shared {
        self.shared()
    }

    fn history_store(&self) -> Option<Arc<crate::store::Store>> {
        self.store()
    }

    fn feed_holds_after(&self, seq: u64) -> bool {
        Hub::feed_holds_after(self, seq)
    }

    fn poke(&self) {
        Hub::poke(self);
    }
}

impl CandleHub for Hub {
    fn candle_frames(&self) -> &CandleFrames {
        self.candles()
    }

    fn shared(&self) -> &Shared {
        self.shared()
    }

    fn history_store(&self) -> Option<Arc<crate::store::Store>> {
        self.store()
    }

    fn backfill_deferred(&self) {
        self.counters().candle_backfills_deferred.inc();
    }

    fn backfill_skipped(&self) {
        self.counters().candle_backfills_skipped.inc();
    }
}
