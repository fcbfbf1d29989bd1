//! The users some client follows (orderUpdates, userFills, userEvents), shared by the connections that add them
//! and the parser that reads their events.
//!
//! Rejections are over 95% of status bytes and are never decoded for the book. A watched user's rejections must
//! be, so the parser asks this set, per line, whom to look for; with nobody watched it takes exactly the path it
//! took before users were served. Every change bumps a generation: a line carries the generation it was parsed
//! under, so a subscriber knows from which block on its user's events are complete.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use rustc_hash::{FxHashMap, FxHashSet};

use super::event::Address;

/// Reference-counted set of watched addresses.
#[derive(Debug, Default)]
pub struct Watched {
    /// Per user: followers, and the generation since which it has been watched without a break.
    counts: Mutex<FxHashMap<Address, (usize, u64)>>,
    set: ArcSwap<FxHashSet<Address>>,
    generation: AtomicU64,
    /// Every user's fills are kept verbatim (the history store keeps them all), watched or not.
    all_fills: AtomicBool,
}

/// What one line is parsed against: the set and the generation it belongs to.
#[derive(Debug, Clone)]
pub struct WatchView {
    pub generation: u64,
    pub users: Arc<FxHashSet<Address>>,
    /// Keep every fill verbatim, not only the watched users'.
    pub all_fills: bool,
}

impl Watched {
    pub fn new() -> Watched {
        Watched::default()
    }

    /// Counts one more follower of `user`; returns the generation from which lines include its events (the one
    /// it has been watched since, when it already was).
    pub fn add(&self, user: Address) -> u64 {
        let mut counts = self.counts.lock();
        let n = counts.entry(user).or_default();
        n.0 += 1;
        if n.0 == 1 {
            self.publish(&counts);
            let now = self.generation.load(SeqCst);
            counts.entry(user).or_default().1 = now;
            return now;
        }
        n.1
    }

    /// The generation since which `user` has been watched without a break (`None`: it is not).
    pub fn since(&self, user: &Address) -> Option<u64> {
        self.counts.lock().get(user).map(|n| n.1)
    }

    /// Counts one follower less; the last one out stops the decoding of that user's rejections.
    pub fn remove(&self, user: Address) {
        let mut counts = self.counts.lock();
        let Some(n) = counts.get_mut(&user) else { return };
        n.0 -= 1;
        if n.0 == 0 {
            counts.remove(&user);
            self.publish(&counts);
        }
    }

    /// The set is stored before the generation moves on, so a reader that sees the new generation sees the set.
    fn publish(&self, counts: &FxHashMap<Address, (usize, u64)>) {
        self.set.store(Arc::new(counts.keys().copied().collect()));
        self.generation.fetch_add(1, SeqCst);
    }

    /// The generation first, then the set: a line read with generation g holds every user added up to g.
    pub fn view(&self) -> WatchView {
        let generation = self.generation.load(SeqCst);
        WatchView { generation, users: self.set.load_full(), all_fills: self.all_fills.load(Relaxed) }
    }

    /// From now on fills lines carry every user's fill objects verbatim (for the history store).
    pub fn keep_all_fills(&self) {
        self.all_fills.store(true, Relaxed);
    }

    pub fn len(&self) -> usize {
        self.counts.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counted_and_generations_move() {
        let w = Watched::new();
        let a = Address::parse("0x5eaac7c475b1fad85701f02c4e9e796a53f94bd5").unwrap();
        let g1 = w.add(a);
        assert!(w.view().users.contains(&a));
        let g2 = w.add(a);
        assert_eq!(g1, g2, "a second follower changes nothing");
        w.remove(a);
        assert!(w.view().users.contains(&a));
        w.remove(a);
        assert!(w.view().users.is_empty());
        assert!(w.view().generation > g1);
        w.remove(a);
        assert!(w.is_empty());
    }
}
