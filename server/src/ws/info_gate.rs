//! Per-client admission for info requests (HTTP `POST /info` and the socket's `post`), whatever answers them.
//!
//! Every info type costs us something: passed-through ones a request at the node, `l2Book` and `openOrders` a walk
//! of the books under their read lock, `candleSnapshot` a read of the node's fills files. So one client IP gets
//! at most `info_max_in_flight_per_ip` requests being worked on at once and `info_max_queued_per_ip` waiting for
//! one of those places; beyond that it gets 429 at once, and a request that waits longer than `info_timeout_ms`
//! for its place gets 504. The global caps (per answer kind) stay with each answerer. An IP's entry lives only
//! while it has requests in flight or waiting, so IPs that came and went cost nothing.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::fair_slots::FairSlots;

use crate::config::ServerConfig;

/// An answer to an info request, whoever gave it: an HTTP status and a JSON body, or a plain-text one.
///
/// Refusals are plain text, as the exchange's: its API answers a request it cannot serve with 422 and a text
/// body (axum's "Failed to deserialize the JSON body into the target type"), and the official clients expect
/// that. The Python SDK parses a 4xx body as JSON and calls `.get` on it, so a JSON string body crashed it
/// inside the SDK; a text body becomes its `ClientError`.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    pub status: u16,
    pub body: Bytes,
    /// The body is plain text (a refusal or an error), not JSON.
    pub text: bool,
}

impl Answer {
    /// A 200 answer with a JSON body.
    pub fn json(body: impl Into<Bytes>) -> Answer {
        Answer { status: 200, body: body.into(), text: false }
    }

    /// An answer with a JSON body and another status (a node's own answer, passed on as it came).
    pub fn json_with(status: u16, body: impl Into<Bytes>) -> Answer {
        Answer { status, body: body.into(), text: false }
    }

    /// A plain-text answer (a refusal, 422 for a request that cannot be served, 429 for a rate limit).
    pub fn text(status: u16, text: &str) -> Answer {
        Answer { status, body: Bytes::from(text.to_string()), text: true }
    }

    /// The refusal's text (a text body as it is; a JSON body as its string, or its bytes).
    pub fn message(&self) -> String {
        let s = serde_json::from_slice::<Value>(&self.body).ok().filter(|_| !self.text);
        match s {
            Some(Value::String(t)) => t,
            _ => String::from_utf8_lossy(&self.body).into_owned(),
        }
    }
}

/// What a local answerer made of a request.
#[derive(Debug)]
pub enum Local {
    /// The whole answer (or a refusal of the request itself, such as a bad field).
    Answer(Answer),
    /// hlbook cannot give a whole answer, for this reason: upstream, or refused with it (`ws::info` routes it).
    Unsure(String),
}

/// Sets its flag when dropped: held by a request's future, so a store read queued for a history turn learns that
/// its client left and is not run.
struct DropFlag(pub Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Relaxed);
    }
}

#[derive(Debug)]
pub struct InfoGate {
    ips: Mutex<FxHashMap<IpAddr, Arc<IpQueue>>>,
    places_per_ip: usize,
    max_waiting_per_ip: usize,
    wait_at_most: Duration,
    pub counters: GateCounters,
}

crate::state::counter::counters! {
    /// The gate's counters, exported with the socket's (`hlbook_ws_info_*`).
    pub struct GateCounters {
        /// Info requests that found no free place and waited for one.
        waited as "info_waited",
        /// Info requests refused: their IP's queue was full (429) or they waited too long (504).
        refused as "info_refused",
    }
}

/// One client IP's places and how many of its requests wait for one.
#[derive(Debug)]
struct IpQueue {
    places: Arc<Semaphore>,
    waiting: AtomicUsize,
}

/// A request's hold on its IP's entry; dropping it (also when the request is abandoned midway) removes the entry
/// once nobody uses it.
#[derive(Debug)]
struct Entry {
    gate: Arc<InfoGate>,
    ip: IpAddr,
    queue: Option<Arc<IpQueue>>,
}

impl Drop for Entry {
    fn drop(&mut self) {
        let mut ips = self.gate.ips.lock();
        self.queue = None;
        if ips.get(&self.ip).is_some_and(|q| Arc::strong_count(q) == 1) {
            ips.remove(&self.ip);
        }
    }
}

/// Counts a request as waiting until dropped (also when the wait times out or is abandoned).
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

/// An admitted request's place; hold it until the work is done (move it into a blocking task if the work runs
/// there), dropping it frees the place.
#[derive(Debug)]
pub struct Place {
    // Field order is drop order: the place is given back before the entry may be removed.
    _permit: OwnedSemaphorePermit,
    entry: Entry,
}

impl Place {
    /// Runs `work` on the blocking pool once one of `turns` (a global cap per kind of answer, shared fairly among
    /// client IPs) is free, waiting at most the gate's wait; the turn and this place are held until the work ends,
    /// even if the client goes away first, so an abandoned request cannot start another one beside it. Err: the
    /// answer saying why it did not run.
    pub async fn work_blocking<T: Send + 'static>(
        self,
        turns: &Arc<FairSlots>,
        kind: &str,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Answer> {
        let wait = self.entry.gate.wait_at_most;
        let Ok(turn) = tokio::time::timeout(wait, turns.acquire(self.entry.ip)).await else {
            self.entry.gate.counters.refused.inc();
            let text = format!("{kind}: waited {} ms for a turn among the answers computed here", wait.as_millis());
            return Err(Answer::text(504, &text));
        };
        self.blocking(kind, move || {
            let _turn = turn;
            work()
        })
        .await
    }

    /// Runs `read` on the blocking pool in a history turn (`server.history_reads`, shared with userFills snapshots
    /// and resume pages), holding this place until it ends: 503 when no turn comes, 499 when the client left
    /// before it did (the read is not run), 500 when the task fails.
    pub async fn in_history_turn(
        self,
        hub: &Arc<crate::publish::Hub>,
        kind: &'static str,
        read: impl FnOnce() -> Answer + Send + 'static,
    ) -> Answer {
        // Set when this request is dropped (its client left): it is not read once its turn comes.
        let gone = Arc::new(AtomicBool::new(false));
        let _drop = DropFlag(gone.clone());
        let hub = hub.clone();
        let done = self
            .blocking(kind, move || {
                let history = hub.history();
                let _turn = match history.turns.take() {
                    Ok(t) => t,
                    Err(e) => {
                        history.counters.reads_refused.inc();
                        return Answer::text(503, &format!("{kind}: {e}"));
                    }
                };
                if gone.load(Relaxed) {
                    history.counters.reads_abandoned.inc();
                    return Answer::text(499, &format!("{kind}: the client left"));
                }
                read()
            })
            .await;
        done.unwrap_or_else(|a| a)
    }

    /// Runs `work` on the blocking pool, holding this place until it ends (the work takes its own turns).
    pub async fn blocking<T: Send + 'static>(
        self,
        kind: &str,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Answer> {
        let done = tokio::task::spawn_blocking(move || {
            let _held = self;
            work()
        });
        done.await.map_err(|e| Answer::text(500, &format!("{kind} failed: {e}")))
    }
}

impl InfoGate {
    pub fn new(c: &ServerConfig) -> Arc<InfoGate> {
        Arc::new(InfoGate {
            ips: Mutex::new(FxHashMap::default()),
            places_per_ip: c.info_max_in_flight_per_ip,
            max_waiting_per_ip: c.info_max_queued_per_ip,
            wait_at_most: Duration::from_millis(c.info_timeout_ms),
            counters: GateCounters::default(),
        })
    }

    /// A place for a request from `ip`, or the answer refusing it (429 when too many wait, 504 after waiting too
    /// long).
    pub async fn enter(self: &Arc<Self>, ip: IpAddr) -> Result<Place, Answer> {
        let Some(entry) = self.queue_up(ip) else {
            self.counters.refused.inc();
            let limit = self.max_waiting_per_ip;
            let text = format!("too many info requests from {ip} waiting (server.info_max_queued_per_ip {limit})");
            return Err(Answer::text(429, &text));
        };
        let queue = entry.queue.clone().expect("held until dropped");
        let waiting = Waiting(&queue.waiting);
        if let Ok(permit) = queue.places.clone().try_acquire_owned() {
            drop(waiting);
            return Ok(Place { _permit: permit, entry });
        }
        self.counters.waited.inc();
        let waited = tokio::time::timeout(self.wait_at_most, queue.places.clone().acquire_owned()).await;
        drop(waiting);
        match waited {
            Ok(Ok(permit)) => Ok(Place { _permit: permit, entry }),
            Ok(Err(_)) => Err(Answer::text(503, "shutting down")),
            Err(_) => {
                self.counters.refused.inc();
                let ms = self.wait_at_most.as_millis();
                Err(Answer::text(504, &format!("waited {ms} ms for a place among this client's info requests")))
            }
        }
    }

    /// Registers one more waiting request for `ip`, or None when its queue is full.
    fn queue_up(self: &Arc<Self>, ip: IpAddr) -> Option<Entry> {
        let mut ips = self.ips.lock();
        let q = ips.entry(ip).or_insert_with(|| {
            Arc::new(IpQueue { places: Arc::new(Semaphore::new(self.places_per_ip)), waiting: AtomicUsize::new(0) })
        });
        if q.waiting.load(Relaxed) >= self.max_waiting_per_ip {
            let idle = Arc::strong_count(q) == 1;
            if idle {
                ips.remove(&ip);
            }
            return None;
        }
        q.waiting.fetch_add(1, Relaxed);
        Some(Entry { gate: self.clone(), ip, queue: Some(q.clone()) })
    }

    /// Client IPs with requests in flight or waiting.
    pub fn ips_tracked(&self) -> usize {
        self.ips.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(places: usize, waiting: usize, wait_ms: u64) -> Arc<InfoGate> {
        InfoGate::new(&ServerConfig {
            info_max_in_flight_per_ip: places,
            info_max_queued_per_ip: waiting,
            info_timeout_ms: wait_ms,
            ..ServerConfig::default()
        })
    }

    #[tokio::test]
    async fn an_ip_gets_its_places_then_a_bounded_queue_then_429() {
        let g = gate(2, 1, 10_000);
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let p1 = g.enter(a).await.unwrap();
        let _p2 = g.enter(a).await.unwrap();
        let g2 = g.clone();
        let third = tokio::spawn(async move { g2.enter(a).await.map(|_| ()) });
        while g.ips.lock()[&a].waiting.load(Relaxed) == 0 {
            tokio::task::yield_now().await;
        }
        assert_eq!(g.enter(a).await.unwrap_err().status, 429, "the queue holds one");
        assert!(g.enter(b).await.is_ok(), "another IP is not held back");
        drop(p1);
        assert!(third.await.unwrap().is_ok(), "the waiting request gets the freed place");
    }

    #[tokio::test]
    async fn a_local_answer_waits_for_a_fair_turn_at_most_the_gates_wait() {
        // Both turns held by one IP's requests: another IP's request waits, then gets 504 instead of queueing for
        // ever; once a turn frees, it runs.
        let g = gate(4, 8, 50);
        let turns = FairSlots::new(2);
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.7".parse().unwrap(), "10.0.0.8".parse().unwrap());
        let held = [turns.acquire(a).await, turns.acquire(a).await];
        let refused = g.enter(b).await.unwrap().work_blocking(&turns, "openOrders", || 1).await.unwrap_err();
        assert_eq!(refused.status, 504);
        assert!(refused.message().contains("openOrders"), "{refused:?}");
        drop(held);
        assert_eq!(g.enter(b).await.unwrap().work_blocking(&turns, "openOrders", || 1).await.unwrap(), 1);
        assert_eq!(g.ips_tracked(), 0);
    }

    #[tokio::test]
    async fn a_long_wait_is_a_504_and_nothing_is_left_behind() {
        let g = gate(1, 8, 20);
        let ip: IpAddr = "10.0.0.3".parse().unwrap();
        let held = g.enter(ip).await.unwrap();
        assert_eq!(g.enter(ip).await.unwrap_err().status, 504);
        let abandoned = tokio::time::timeout(Duration::from_millis(5), g.enter(ip)).await;
        assert!(abandoned.is_err());
        assert_eq!(g.ips.lock()[&ip].waiting.load(Relaxed), 0, "timed-out and abandoned waits are not counted");
        drop(held);
        assert_eq!(g.ips_tracked(), 0);
        let full = gate(1, 0, 20);
        assert_eq!(full.enter(ip).await.unwrap_err().status, 429);
        assert_eq!(full.ips_tracked(), 0, "a refused IP leaves no entry");
    }
}
