//! Byte budgets: what is held for one connection's client and not yet written (its batch's private copies, its
//! queued post answers, its l4Book snapshots), and for all connections together.
//!
//! Frames shared by every subscriber cost one copy whoever reads them, so they are not charged; what a connection
//! makes or keeps for itself is. Each holding is a `Charge` that gives its bytes back when dropped. A connection
//! whose holdings go over its budget, or that takes the last bytes of the global one, is closed with 1008 and
//! the reason (counted as `closed_budget`): bounded memory for whatever a client asks for, and the client that
//! asked is the one that pays.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use tokio::sync::Notify;

/// The global budget, shared by every connection.
#[derive(Debug)]
pub struct Budgets {
    held: AtomicUsize,
    max_total: usize,
    max_conn: usize,
}

impl Budgets {
    pub fn new(max_conn: usize, max_total: usize) -> Arc<Budgets> {
        Arc::new(Budgets { held: AtomicUsize::new(0), max_total, max_conn })
    }

    /// Bytes held for all connections.
    pub fn held(&self) -> usize {
        self.held.load(Relaxed)
    }

    /// A new connection's budget.
    pub fn connection(self: &Arc<Self>) -> Arc<ConnBudget> {
        Arc::new(ConnBudget { held: AtomicUsize::new(0), budgets: self.clone(), over: Notify::new() })
    }
}

/// One connection's budget.
#[derive(Debug)]
pub struct ConnBudget {
    held: AtomicUsize,
    budgets: Arc<Budgets>,
    /// Woken when a charge goes over, so a connection blocked writing to its client is closed at once.
    over: Notify,
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

impl ConnBudget {
    /// Charges `bytes` to this connection (and the global budget); wakes `went_over` when either is exceeded.
    pub fn charge(self: &Arc<Self>, bytes: usize) -> Charge {
        let mine = self.held.fetch_add(bytes, Relaxed) + bytes;
        let all = self.budgets.held.fetch_add(bytes, Relaxed) + bytes;
        if bytes > 0 && (mine > self.budgets.max_conn || all > self.budgets.max_total) {
            self.over.notify_one();
        }
        Charge { budget: self.clone(), bytes }
    }

    /// Bytes held for this connection.
    pub fn held(&self) -> usize {
        self.held.load(Relaxed)
    }

    /// Why the connection must close, if it is over its budget or the global one is exhausted.
    pub fn over(&self) -> Option<String> {
        let (mine, all) = (self.held(), self.budgets.held());
        let b = &self.budgets;
        if mine > b.max_conn {
            return Some(format!(
                "hlbook: {mine} bytes queued for this connection, over its budget of {} (server.conn_budget_bytes)",
                b.max_conn
            ));
        }
        // The global budget gone, the connections holding an eighth of their own or more are closed, the
        // light ones (a bystander's batch in flight) spared.
        (all > b.max_total && mine >= b.max_conn / 8).then(|| {
            format!(
                "hlbook: the server's byte budget for all connections ({} bytes, server.global_budget_bytes) is \
                 exhausted; this connection holds {mine}",
                b.max_total
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
        let budgets = Budgets::new(100, 150);
        let (a, b) = (budgets.connection(), budgets.connection());
        let c1 = a.charge(60);
        assert_eq!(a.over(), None);
        let c2 = a.charge(50);
        assert!(a.over().unwrap().contains("server.conn_budget_bytes"), "110 > 100");
        drop(c2);
        assert_eq!(a.over(), None);
        let c3 = b.charge(95);
        assert!(b.over().unwrap().contains("server.global_budget_bytes"), "155 > 150 in all");
        assert!(a.over().is_some(), "a heavy holder of the exhausted budget goes too");
        let light = budgets.connection();
        let c4 = light.charge(5);
        assert_eq!(light.over(), None, "a light one is spared");
        drop((c1, c3, c4));
        assert_eq!((a.held(), b.held(), budgets.held()), (0, 0, 0));
        assert_eq!(a.over(), None);
    }

    #[tokio::test]
    async fn going_over_wakes_the_connection() {
        let budgets = Budgets::new(10, 1000);
        let a = budgets.connection();
        let _c = a.charge(11);
        tokio::time::timeout(std::time::Duration::from_secs(5), a.went_over()).await.expect("woken");
    }
}
