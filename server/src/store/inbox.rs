//! What the publisher hands the store's writer (`StoreMsg`), over a bounded channel the publisher never waits on: a
//! full channel drops the message, and the next one that fits is preceded by `Gap`, so the writer reads the
//! missing blocks back from the node's files instead.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};

use super::Store;
use crate::state::Step;

/// Messages from the publisher; bounded, never waited on.
#[derive(Debug)]
pub enum StoreMsg {
    /// A fills step: a block's fills line (by-block) or a batch of them (streaming).
    Step(Arc<Step>),
    /// Every block up to this height is whole.
    Complete(u64),
    /// Streaming: every fills line of blocks up to this height has been handed over (a block can be whole before
    /// its last fills line is read). A whole block above it waits for it, at most `writer::FILLS_WAIT`.
    FillsThrough(u64),
    /// What came before and what comes after may not join: read the missing blocks back from the files.
    Gap,
}

/// Messages waiting for the writer at most: about three minutes of mainnet blocks.
pub const FEED_CAPACITY: usize = 4096;

/// The publisher's end of the channel: never blocks; after a message it could not hand over, the next one is
/// preceded by `Gap`.
#[derive(Debug)]
pub struct StoreSender {
    tx: SyncSender<StoreMsg>,
    store: Arc<Store>,
    dropped: bool,
}

impl StoreSender {
    pub fn send(&mut self, m: StoreMsg) {
        if self.dropped {
            if self.tx.try_send(StoreMsg::Gap).is_err() {
                self.store.status.dropped.fetch_add(1, Relaxed);
                return;
            }
            self.dropped = false;
        }
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = self.tx.try_send(m) {
            self.store.status.dropped.fetch_add(1, Relaxed);
            self.dropped = true;
        }
    }
}

/// A new channel to the writer.
pub fn channel(store: &Arc<Store>) -> (StoreSender, Receiver<StoreMsg>) {
    let (tx, rx) = std::sync::mpsc::sync_channel(FEED_CAPACITY);
    (StoreSender { tx, store: store.clone(), dropped: false }, rx)
}
