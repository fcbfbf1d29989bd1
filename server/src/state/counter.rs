//! `Counter`: a monotonic count that one thread bumps and anyone reads. It wraps the atomic so that callers can
//! only add to it, mirror a total kept elsewhere, and read it (never pick an ordering): counters are read for `/metrics` and
//! `/status`, where relaxed ordering is enough, and a counter that went down would break Prometheus rates.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    pub fn inc(&self) {
        self.add(1);
    }

    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Relaxed);
    }

    /// Mirrors a running total that another owner keeps (a source's own counters), so it only goes up too.
    pub fn set(&self, total: u64) {
        self.0.store(total, Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::Counter;

    #[test]
    fn counts_up() {
        let c = Counter::default();
        c.inc();
        c.add(4);
        assert_eq!(c.get(), 5);
    }
}
