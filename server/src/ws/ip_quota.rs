//! What one client IP (an IPv6 /64, `ipv6_prefix_len`) may hold and send across all of its connections: its
//! subscriptions (`max_subscriptions_per_ip`) and its messages a minute, pings included
//! (`max_messages_per_minute_per_ip`).
//!
//! The exchange allows an IP 1,000 subscriptions and 2,000 messages a minute however many connections it opens;
//! counted per connection, an IP with a hundred connections got a hundred times that. An IP's entry lives while
//! it holds a subscription or its message window is open, so IPs that came and went cost nothing.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rustc_hash::FxHashMap;

/// The message window's length.
const WINDOW: Duration = Duration::from_secs(60);

#[derive(Debug)]
struct Entry {
    subs: usize,
    window_start: Instant,
    messages: u32,
}

impl Entry {
    fn idle(&self, now: Instant) -> bool {
        self.subs == 0 && now.duration_since(self.window_start) >= WINDOW
    }
}

#[derive(Debug)]
pub struct IpQuota {
    max_subs: usize,
    max_messages: u32,
    per_ip: Mutex<(FxHashMap<IpAddr, Entry>, Instant)>,
}

impl IpQuota {
    pub fn new(max_subs: usize, max_messages: u32) -> IpQuota {
        IpQuota { max_subs, max_messages, per_ip: Mutex::new((FxHashMap::default(), Instant::now())) }
    }

    pub fn max_subs(&self) -> usize {
        self.max_subs
    }

    pub fn max_messages(&self) -> u32 {
        self.max_messages
    }

    /// Runs `f` on `ip`'s entry (made if absent), sweeping idle entries once a window.
    fn with<T>(&self, ip: IpAddr, f: impl FnOnce(&mut Entry) -> T) -> T {
        let now = Instant::now();
        let mut guard = self.per_ip.lock();
        let (map, swept) = &mut *guard;
        if now.duration_since(*swept) >= WINDOW {
            map.retain(|_, e| !e.idle(now));
            *swept = now;
        }
        let e = map.entry(ip).or_insert(Entry { subs: 0, window_start: now, messages: 0 });
        if now.duration_since(e.window_start) >= WINDOW {
            (e.window_start, e.messages) = (now, 0);
        }
        f(e)
    }

    /// Counts one message from `ip`; false when it is over the IP's allowance this minute.
    pub fn message(&self, ip: IpAddr) -> bool {
        self.with(ip, |e| {
            e.messages = e.messages.saturating_add(1);
            e.messages <= self.max_messages
        })
    }

    /// Takes a subscription place for `ip`; false (nothing taken) when it holds its allowance already.
    pub fn try_subscribe(&self, ip: IpAddr) -> bool {
        self.with(ip, |e| {
            let room = e.subs < self.max_subs;
            e.subs += usize::from(room);
            room
        })
    }

    /// Gives a subscription place of `ip` back.
    pub fn unsubscribe(&self, ip: IpAddr) {
        self.with(ip, |e| e.subs = e.subs.saturating_sub(1));
    }

    /// Subscriptions `ip` holds.
    pub fn subscriptions(&self, ip: IpAddr) -> usize {
        self.per_ip.lock().0.get(&ip).map_or(0, |e| e.subs)
    }
}

/// The refusal of a subscription over the IP's allowance, with the subscription (valid JSON) after it.
pub fn refusal(max: usize, echo: &super::protocol::Echo) -> String {
    format!("Too many subscriptions from this IP: at most {max} (server.max_subscriptions_per_ip): {echo}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscriptions_are_counted_across_connections_per_ip() {
        let q = IpQuota::new(2, 100);
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        assert!(q.try_subscribe(a) && q.try_subscribe(a));
        assert!(!q.try_subscribe(a), "a third from the same IP, whatever its connection");
        assert!(q.try_subscribe(b), "another IP has its own allowance");
        q.unsubscribe(a);
        assert!(q.try_subscribe(a), "a freed place is taken again");
        assert_eq!(q.subscriptions(a), 2);
    }

    #[test]
    fn messages_past_the_allowance_are_refused() {
        let q = IpQuota::new(1, 3);
        let a: IpAddr = "::1".parse().unwrap();
        assert!((0..3).all(|_| q.message(a)));
        assert!(!q.message(a), "the fourth this minute");
        assert!(q.message("::2".parse().unwrap()), "another IP");
    }
}
