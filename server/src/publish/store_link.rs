//! The history store as the publish stage holds it: the store once opened (none: no history), and the writer's
//! channel, which the publisher takes once and feeds every fills step.
//!
//! Kept apart from the hub's subscription counting so what "the store is on" means lives in one place.

use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::node::Address;
use crate::store::Store;
use crate::store::writer::StoreSender;

#[derive(Debug, Default)]
pub struct StoreLink {
    store: OnceLock<Arc<Store>>,
    feeder: Mutex<Option<StoreSender>>,
}

impl StoreLink {
    /// The store, once opened.
    pub fn get(&self) -> Option<Arc<Store>> {
        self.store.get().cloned()
    }

    /// Opens the link: later calls keep the first store.
    pub fn set(&self, store: Arc<Store>, feeder: StoreSender) {
        let _ = self.store.set(store);
        *self.feeder.lock() = Some(feeder);
    }

    /// The writer's channel, for the one publisher that feeds it.
    pub fn take_feeder(&self) -> Option<StoreSender> {
        self.feeder.lock().take()
    }

    /// Tells the store whether anyone follows `user`'s userFills (it keeps their fills while someone does).
    pub fn follow(&self, user: Address, followed: bool) {
        let Some(store) = self.store.get() else { return };
        if followed {
            store.follow.subscribed(&user.0);
        } else {
            store.follow.unsubscribed(&user.0);
        }
    }
}
