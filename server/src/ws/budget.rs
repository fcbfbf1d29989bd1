//! Byte budgets: what is held for one connection's client (its subscriptions' echoes, its batch's private copies,
//! its queued post answers and pongs, its l4Book snapshots, and a fixed share for the connection itself), and for
//! all connections together.
//!
//! Frames shared by every subscriber cost one copy whoever reads them, so they are not charged; what a connection
//! makes or keeps for itself is. Each holding is a `Charge` that gives its bytes back when dropped. A connection
//! over its own budget is closed with 1008 and the reason (counted as `closed_budget`). The global budget is a
//! hard bound: past it, new connections and subscriptions are refused (`room`), and the largest holders are closed
//! first until what is left is under it, so ten thousand connections each just under their own budget cannot add
//! up to many times the global one.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use tokio::sync::Notify;

/// What a connection costs before it holds anything: its task, tungstenite's buffers, its maps (measured:
/// docs/operations.md, "What each limit costs").
pub const CONN_BYTES: usize = 16 << 10;

/// What a subscription costs beside its echo: its entry, delivery state and audit chain, its place in the hub.
pub const SUB_BYTES: usize = 512;

/// The global budget, shared by every connection.
#[derive(Debug)]
pub struct Budgets {
    held: AtomicUsize,
    max_total: usize,
    max_conn: usize,
    /// Every connection's budget, to find the largest holders when the total is over.
    conns: Mutex<Vec<Weak<ConnBudget>>>,
    /// Bytes held by connections already told to close: they come back when those connections end.
    closing: AtomicUsize,
}

impl Budgets {
    pub fn new(max_conn: usize, max_total: usize) -> Arc<Budgets> {
        Arc::new(Budgets {
            held: AtomicUsize::new(0),
            max_total,
            max_conn,
            conns: Mutex::new(Vec::new()),
            closing: AtomicUsize::new(0),
        })
    }

    /// Bytes held for all connections.
    pub fn held(&self) -> usize {
        self.held.load(Relaxed)
    }

    pub fn max_total(&self) -> usize {
        self.max_total
    }

    /// Whether `bytes` more fit under the global budget: a new connection or subscription is refused otherwise.
    pub fn room(&self, bytes: usize) -> bool {
        self.held() + bytes <= self.max_total
    }

    /// A new connection's budget.
    pub fn connection(self: &Arc<Self>) -> Arc<ConnBudget> {
        let c = Arc::new(ConnBudget {
            held: AtomicUsize::new(0),
            budgets: self.clone(),
            over: Notify::new(),
            closing: AtomicBool::new(false),
            closing_bytes: AtomicUsize::new(0),
        });
        let mut conns = self.conns.lock();
        // Ended connections leave a dead entry; sweep them when they could be half the list.
        if conns.len() >= 64 && conns.len().is_power_of_two() {
            conns.retain(|w| w.strong_count() > 0);
        }
        conns.push(Arc::downgrade(&c));
        c
    }

    /// Tells the largest holders to close until the bytes of those not closing fit the global budget.
    fn shed(&self) {
        let conns = self.conns.lock();
        while self.held().saturating_sub(self.closing.load(Relaxed)) > self.max_total {
            let largest =
                conns.iter().filter_map(Weak::upgrade).filter(|c| !c.closing.load(Relaxed)).max_by_key(|c| c.held());
            let Some(c) = largest else { break };
            let bytes = c.held();
            c.closing_bytes.store(bytes, Relaxed);
            c.closing.store(true, Relaxed);
            self.closing.fetch_add(bytes, Relaxed);
            c.over.notify_one();
        }
    }
}

/// One connection's budget.
#[derive(Debug)]
pub struct ConnBudget {
    held: AtomicUsize,
    budgets: Arc<Budgets>,
    /// Woken when a charge goes over, or the global budget picks this connection to close, so a connection
    /// blocked writing to its client, or waiting for a request, is closed at once.
    over: Notify,
    /// Picked to close by `Budgets::shed`, holding `closing_bytes` then.
    closing: AtomicBool,
    closing_bytes: AtomicUsize,
}

impl Drop for ConnBudget {
    fn drop(&mut self) {
        if self.closing.load(Relaxed) {
            self.budgets.closing.fetch_sub(self.closing_bytes.load(Relaxed), Relaxed);
        }
    }
}

/// Bytes held for a connection until dropped.
#[derive(Debug)]
#[must_use = "a charge gives its bytes back when dropped"]
pub struct Charge {
    budget: Arc<ConnBudget>,
    bytes: usize,
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.budget.held.fetch_sub(self.bytes, Relaxed);
        self.budget.budgets.held.fetch_sub(self.bytes, Relaxed);
    }
}

impl Charge {
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl ConnBudget {
    /// Charges `bytes` to this connection (and the global budget); wakes `went_over` when its own is exceeded,
    /// and has the largest holders closed when the global one is.
    pub fn charge(self: &Arc<Self>, bytes: usize) -> Charge {
        let mine = self.held.fetch_add(bytes, Relaxed) + bytes;
        let all = self.budgets.held.fetch_add(bytes, Relaxed) + bytes;
        if bytes > 0 && mine > self.budgets.max_conn {
            self.over.notify_one();
        }
        if bytes > 0 && all > self.budgets.max_total {
            self.budgets.shed();
        }
        Charge { budget: self.clone(), bytes }
    }

    /// Bytes held for this connection.
    pub fn held(&self) -> usize {
        self.held.load(Relaxed)
    }

    /// Whether the global budget has room for `bytes` more.
    pub fn room(&self, bytes: usize) -> bool {
        self.budgets.room(bytes)
    }

    /// Why the connection must close, if it is over its budget or was picked to free the global one.
    pub fn over(&self) -> Option<String> {
        let (mine, b) = (self.held(), &self.budgets);
        if mine > b.max_conn {
            return Some(format!(
                "hlbook: {mine} bytes queued for this connection, over its budget of {} (server.conn_budget_bytes)",
                b.max_conn
            ));
        }
        self.closing.load(Relaxed).then(|| {
            format!(
                "hlbook: the server's byte budget for all connections ({} bytes, server.global_budget_bytes) is \
                 exhausted; this connection held {}, among the most",
                b.max_total,
                self.closing_bytes.load(Relaxed)
            )
        })
    }

    /// Resolves once a charge has gone over (check `over` after it: the budget may have recovered).
    pub async fn went_over(&self) {
        self.over.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_are_given_back_and_going_over_says_which_budget() {
        let budgets = Budgets::new(100, 1000);
        let a = budgets.connection();
        let c1 = a.charge(60);
        assert_eq!(a.over(), None);
        let c2 = a.charge(50);
        assert!(a.over().unwrap().contains("server.conn_budget_bytes"), "110 > 100");
        drop(c2);
        assert_eq!(a.over(), None);
        drop(c1);
        assert_eq!((a.held(), budgets.held()), (0, 0));
    }

    #[test]
    fn past_the_global_budget_the_largest_holders_close_until_the_rest_fits() {
        // On the old code only holders of an eighth of their own budget were closed, so many connections each
        // just under that could hold many times the global budget.
        let budgets = Budgets::new(100, 150);
        let conns: Vec<_> = (0..4).map(|_| budgets.connection()).collect();
        let charges: Vec<_> = [10, 60, 40, 30].iter().zip(&conns).map(|(n, c)| c.charge(*n)).collect();
        assert!(!budgets.room(11), "140 held: 11 more would pass 150");
        assert!(budgets.room(10));
        assert!(conns.iter().all(|c| c.over().is_none()), "140 <= 150: nobody closes");
        let more = conns[0].charge(30);
        // 170 > 150: the largest (60) goes, and 110 is under 150, so nobody else does.
        let closing: Vec<bool> = conns.iter().map(|c| c.over().is_some()).collect();
        assert_eq!(closing, [false, true, false, false]);
        assert!(conns[1].over().unwrap().contains("server.global_budget_bytes"));
        drop((charges, more));
        assert_eq!(budgets.held(), 0);
    }

    #[test]
    fn a_closing_connection_counts_as_freed_until_it_ends() {
        let budgets = Budgets::new(100, 100);
        let (a, b) = (budgets.connection(), budgets.connection());
        let ca = a.charge(80);
        let cb = b.charge(30);
        assert!(a.over().is_some() && b.over().is_none());
        // b grows while a is still closing: 30 + 40 of b is under 100 once a's 80 are back, so b stays.
        let cb2 = b.charge(40);
        assert!(b.over().is_none());
        drop(ca);
        drop(a);
        assert_eq!(budgets.closing.load(Relaxed), 0);
        drop((cb, cb2));
    }

    #[tokio::test]
    async fn going_over_wakes_the_connection() {
        let budgets = Budgets::new(10, 1000);
        let a = budgets.connection();
        let _c = a.charge(11);
        tokio::time::timeout(std::time::Duration::from_secs(5), a.went_over()).await.expect("woken");
    }
}
