//! The publish stage: from applied blocks to serialized frames, off the ingest path.
//!
//! One blocking thread (started with `spawn_blocking`) sleeps on the books' change signal, so a block applied while
//! it works is picked up the moment it finishes, never after a timer tick. Each pass holds the read lock only to
//! copy out what changed: aggregated L2 levels of the changed coins, in the shapes some connection wants, their
//! best levels, and clones of books that need an l4Book snapshot. JSON is written after the lock is released, once
//! per frame, and handed to the connections through the `hub`. Trades and l4Book diffs come from the applied blocks
//! themselves (kept by ingest as `Arc<Block>`), one tick per block, in order.

pub mod candles;
pub mod feed;
pub mod frame;
pub mod history;
pub mod hub;
mod hub_workers;
pub mod json;
pub mod l2_frames;
mod l4_snapshots;
pub mod liquidations;
pub mod misc_feed;
pub mod misc_frames;
mod misc_history;
mod pass;
pub mod recent_trades;
pub mod slot;
mod store_link;
pub mod store_replay;
pub mod twap_feed;
pub mod twap_frames;
pub mod twap_history;
pub mod users;
pub mod wanted;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

pub use frame::{Audit, Frame};
pub use hub::{Hub, L2Key, L4Snapshot, Slot, Tick, Want};
pub use pass::Publisher;

/// Runs the publisher until `stop` is set.
pub fn run(hub: Arc<Hub>, stop: &AtomicBool) {
    let mut publisher = Publisher::new(hub.clone());
    let mut seen = 0;
    #[cfg(feature = "test-hooks")]
    let panic_after = test_panic_after();
    while !stop.load(Relaxed) {
        seen = hub.shared().wait_for_change(seen, Duration::from_millis(200));
        publisher.pass();
        #[cfg(feature = "test-hooks")]
        assert!(
            panic_after.is_none_or(|n| hub.counters().passes.get() < n),
            "HLBOOK_TEST_PUBLISHER_PANIC_AFTER asked the publisher to panic"
        );
    }
}

/// Test-only fault: `HLBOOK_TEST_PUBLISHER_PANIC_AFTER=N` makes the publisher panic after N passes, so the tests
/// can check that a dead thread fails the service (docs/operations.md). Only in `test-hooks` builds.
#[cfg(feature = "test-hooks")]
fn test_panic_after() -> Option<u64> {
    std::env::var("HLBOOK_TEST_PUBLISHER_PANIC_AFTER").ok()?.parse().ok()
}
