//! Slots shared fairly among client IPs: a freed slot goes to the waiting IP that holds the fewest, first come
//! first served among equals, so two busy IPs cannot hold every slot while a third waits behind them.
//!
//! tokio's `Semaphore` is FIFO, which is fair per request, not per client; nothing maintained does this per key,
//! hence this small queue. A grant travels as a `FairSlot` through a oneshot: if its waiter has gone, dropping the
//! unreceived slot hands it on, so no slot is ever lost.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use tokio::sync::oneshot;

#[derive(Debug)]
pub struct FairSlots {
    state: Mutex<Ledger>,
}

/// Who holds and who waits for the slots, behind the one lock.
#[derive(Debug, Default)]
struct Ledger {
    free: usize,
    held: FxHashMap<IpAddr, usize>,
    waiting: VecDeque<(IpAddr, oneshot::Sender<FairSlot>)>,
}

impl Ledger {
    /// One slot fewer held by `ip` (its entry goes with its last).
    fn unhold(&mut self, ip: IpAddr) {
        if let Some(n) = self.held.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                self.held.remove(&ip);
            }
        }
    }
}

/// A held slot; dropping it gives it to the next waiter.
#[derive(Debug)]
pub struct FairSlot {
    /// `None` once disarmed (a grant that found its waiter gone is handed on by `release` itself).
    slots: Option<Arc<FairSlots>>,
    ip: IpAddr,
}

impl Drop for FairSlot {
    fn drop(&mut self) {
        if let Some(slots) = self.slots.take() {
            slots.release(self.ip);
        }
    }
}

impl FairSlots {
    pub fn new(n: usize) -> Arc<FairSlots> {
        Arc::new(FairSlots { state: Mutex::new(Ledger { free: n.max(1), ..Ledger::default() }) })
    }

    /// A slot for a request from `ip` (cancel-safe: dropping the future gives up its place).
    pub async fn acquire(self: &Arc<Self>, ip: IpAddr) -> FairSlot {
        let rx = {
            let mut s = self.state.lock();
            if s.free > 0 && s.waiting.is_empty() {
                s.free -= 1;
                *s.held.entry(ip).or_default() += 1;
                return FairSlot { slots: Some(self.clone()), ip };
            }
            let (tx, rx) = oneshot::channel();
            s.waiting.push_back((ip, tx));
            rx
        };
        match rx.await {
            Ok(slot) => slot,
            // The sender is only dropped after a failed send, which needs this receiver gone: unreachable while
            // we wait, but a slot must never be made from nothing.
            Err(_) => Box::pin(self.acquire(ip)).await,
        }
    }

    /// Slots held by `ip` now.
    pub fn held_by(&self, ip: IpAddr) -> usize {
        self.state.lock().held.get(&ip).copied().unwrap_or(0)
    }

    fn release(self: &Arc<Self>, ip: IpAddr) {
        let mut s = self.state.lock();
        s.unhold(ip);
        loop {
            s.waiting.retain(|(_, tx)| !tx.is_closed());
            let held = |ip: &IpAddr| s.held.get(ip).copied().unwrap_or(0);
            let next = s.waiting.iter().enumerate().min_by_key(|(i, (ip, _))| (held(ip), *i)).map(|(i, _)| i);
            let Some((ip, tx)) = next.and_then(|i| s.waiting.remove(i)) else {
                s.free += 1;
                return;
            };
            *s.held.entry(ip).or_default() += 1;
            // Sent under the lock; if the waiter went away meanwhile, the returned slot is disarmed (dropping
            // it armed would re-enter this lock) and the loop hands it on.
            match tx.send(FairSlot { slots: Some(self.clone()), ip }) {
                Ok(()) => return,
                Err(mut slot) => {
                    slot.slots = None;
                    s.unhold(ip);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_freed_slot_goes_to_the_ip_holding_fewest() {
        let slots = FairSlots::new(2);
        let (a, b, c): (IpAddr, IpAddr, IpAddr) =
            ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap(), "10.0.0.3".parse().unwrap());
        let a1 = slots.acquire(a).await;
        let a2 = slots.acquire(a).await;
        // a queues a third request first, then b and c ask.
        let s = slots.clone();
        let a3 = tokio::spawn(async move { s.acquire(a).await });
        let s = slots.clone();
        let b1 = tokio::spawn(async move { s.acquire(b).await });
        while slots.state.lock().waiting.len() < 2 {
            tokio::task::yield_now().await;
        }
        drop(a1);
        let b1 = b1.await.unwrap();
        assert_eq!((slots.held_by(a), slots.held_by(b)), (1, 1), "b, holding none, goes before a's older request");
        let s = slots.clone();
        let c1 = tokio::spawn(async move { s.acquire(c).await });
        while slots.state.lock().waiting.len() < 2 {
            tokio::task::yield_now().await;
        }
        drop(b1);
        let c1 = c1.await.unwrap();
        assert_eq!(slots.held_by(c), 1);
        drop(a2);
        let a3 = a3.await.unwrap();
        drop((a3, c1));
        let s = slots.state.lock();
        assert_eq!((s.free, s.held.len(), s.waiting.len()), (2, 0, 0));
    }

    #[tokio::test]
    async fn a_waiter_that_left_loses_no_slot() {
        let slots = FairSlots::new(1);
        let ip: IpAddr = "10.0.0.9".parse().unwrap();
        let held = slots.acquire(ip).await;
        let gave_up = tokio::time::timeout(std::time::Duration::from_millis(20), slots.acquire(ip)).await;
        assert!(gave_up.is_err());
        drop(held);
        assert_eq!(slots.state.lock().free, 1);
        let _again = slots.acquire(ip).await;
    }
}
