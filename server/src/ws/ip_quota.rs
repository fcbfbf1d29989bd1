//! What one client IP (an IPv6 /64, `ipv6_prefix_len`) may hold and send across all of its connections: its
//! subscriptions (`max_subscriptions_per_ip`) and its messages a minute, pings included
//! (`max_messages_per_minute_per_ip`). A client presenting a named token (`server.tokens`) is counted against
//! that token's allowances instead, whatever its IP (`Who`).
//!
//! The exchange allows an IP 1,000 subscriptions and 2,000 messages a minute however many connections it opens;
//! counted per connection, an IP with a hundred connections got a hundred times that. An IP's entry lives while
//! it holds a subscription or its message window is open, so IPs that came and went cost nothing.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rustc_hash::FxHashMap;

/// Whom the per-client allowances count: a client IP (group), or a named token across every IP it comes from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Who {
    Ip(IpAddr),
    /// The token's name.
    Token(Arc<str>),
}

impl Who {
    /// How refusals name it, and the setting that bounds it.
    fn named(&self, setting: &str) -> (String, String) {
        match self {
            Who::Ip(_) => ("from this IP".into(), format!("server.{setting}_per_ip")),
            Who::Token(name) => (format!("for token {name}"), format!("its {setting} in server.tokens")),
        }
    }
}

impl std::fmt::Display for Who {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Who::Ip(ip) => write!(f, "{ip}"),
            Who::Token(name) => write!(f, "token {name}"),
        }
    }
}

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
    /// Named tokens' (subscriptions, messages a minute).
    tokens: FxHashMap<Arc<str>, (usize, u32)>,
    per_ip: Mutex<(FxHashMap<Who, Entry>, Instant)>,
}

impl IpQuota {
    pub fn new(max_subs: usize, max_messages: u32) -> IpQuota {
        let tokens = FxHashMap::default();
        IpQuota { max_subs, max_messages, tokens, per_ip: Mutex::new((FxHashMap::default(), Instant::now())) }
    }

    /// The server's per-IP allowances and its named tokens' own.
    pub fn from_config(c: &crate::config::ServerConfig) -> IpQuota {
        let mut q = IpQuota::new(c.max_subscriptions_per_ip, c.max_messages_per_minute_per_ip);
        for t in &c.tokens {
            let (_, subs, messages) = t.allowances(c);
            q.tokens.insert(t.name.as_str().into(), (subs, messages));
        }
        q
    }

    pub fn max_subs(&self, who: &Who) -> usize {
        self.allowances(who).0
    }

    pub fn max_messages(&self, who: &Who) -> u32 {
        self.allowances(who).1
    }

    fn allowances(&self, who: &Who) -> (usize, u32) {
        match who {
            Who::Token(name) => self.tokens.get(name).copied().unwrap_or((self.max_subs, self.max_messages)),
            Who::Ip(_) => (self.max_subs, self.max_messages),
        }
    }

    /// Runs `f` on `who`'s entry (made if absent), sweeping idle entries once a window.
    fn with<T>(&self, who: &Who, f: impl FnOnce(&mut Entry) -> T) -> T {
        let now = Instant::now();
        let mut guard = self.per_ip.lock();
        let (map, swept) = &mut *guard;
        if now.duration_since(*swept) >= WINDOW {
            map.retain(|_, e| !e.idle(now));
            *swept = now;
        }
        let e = map.entry(who.clone()).or_insert(Entry { subs: 0, window_start: now, messages: 0 });
        if now.duration_since(e.window_start) >= WINDOW {
            (e.window_start, e.messages) = (now, 0);
        }
        f(e)
    }

    /// Counts one message from `who`; false when it is over its allowance this minute.
    pub fn message(&self, who: &Who) -> bool {
        let max = self.max_messages(who);
        self.with(who, |e| {
            e.messages = e.messages.saturating_add(1);
            e.messages <= max
        })
    }

    /// Takes a subscription place for `who`; false (nothing taken) when it holds its allowance already.
    pub fn try_subscribe(&self, who: &Who) -> bool {
        let max = self.max_subs(who);
        self.with(who, |e| {
            let room = e.subs < max;
            e.subs += usize::from(room);
            room
        })
    }

    /// Gives a subscription place of `who` back.
    pub fn unsubscribe(&self, who: &Who) {
        self.with(who, |e| e.subs = e.subs.saturating_sub(1));
    }

    /// Subscriptions `who` holds.
    pub fn subscriptions(&self, who: &Who) -> usize {
        self.per_ip.lock().0.get(who).map_or(0, |e| e.subs)
    }

    /// The refusal of a subscription over `who`'s allowance, with the subscription (valid JSON) after it.
    pub fn refusal(&self, who: &Who, echo: &dyn std::fmt::Display) -> String {
        let (max, (whom, setting)) = (self.max_subs(who), who.named("max_subscriptions"));
        format!("Too many subscriptions {whom}: at most {max} ({setting}): {echo}")
    }

    /// Why a connection is closed for a message over `who`'s allowance.
    pub fn messages_refusal(&self, who: &Who) -> String {
        let (max, (whom, setting)) = (self.max_messages(who), who.named("max_messages_per_minute"));
        format!("more than {max} messages a minute {whom} ({setting})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Who {
        Who::Ip(s.parse().unwrap())
    }

    #[test]
    fn subscriptions_are_counted_across_connections_per_ip() {
        let q = IpQuota::new(2, 100);
        let (a, b) = (ip("10.0.0.1"), ip("10.0.0.2"));
        assert!(q.try_subscribe(&a) && q.try_subscribe(&a));
        assert!(!q.try_subscribe(&a), "a third from the same IP, whatever its connection");
        assert!(q.try_subscribe(&b), "another IP has its own allowance");
        q.unsubscribe(&a);
        assert!(q.try_subscribe(&a), "a freed place is taken again");
        assert_eq!(q.subscriptions(&a), 2);
    }

    #[test]
    fn messages_past_the_allowance_are_refused() {
        let q = IpQuota::new(1, 3);
        let a = ip("::1");
        assert!((0..3).all(|_| q.message(&a)));
        assert!(!q.message(&a), "the fourth this minute");
        assert!(q.message(&ip("::2")), "another IP");
    }

    #[test]
    fn a_named_token_has_its_own_allowances_and_unset_ones_are_the_ips() {
        let token = |name: &str, subs| crate::config::NamedToken {
            name: name.into(),
            token: format!("{name}-secret"),
            max_subscriptions: subs,
            ..Default::default()
        };
        let c = crate::config::ServerConfig {
            max_subscriptions_per_ip: 1,
            max_messages_per_minute_per_ip: 2,
            tokens: vec![token("desk", Some(3)), token("plain", None)],
            ..Default::default()
        };
        let q = IpQuota::from_config(&c);
        let (desk, plain, a) = (Who::Token("desk".into()), Who::Token("plain".into()), ip("10.0.0.1"));
        assert!((0..3).all(|_| q.try_subscribe(&desk)), "the token's 3, past the IP's 1");
        assert!(!q.try_subscribe(&desk));
        assert!(q.try_subscribe(&a), "the IP's own allowance is untouched by the token's");
        assert!(q.try_subscribe(&plain) && !q.try_subscribe(&plain), "unset: the per-IP 1");
        assert_eq!((q.max_messages(&desk), q.max_messages(&plain)), (2, 2));
        let echo = "{}";
        assert!(q.refusal(&desk, &echo).starts_with("Too many subscriptions for token desk: at most 3"));
        assert!(q.refusal(&a, &echo).starts_with("Too many subscriptions from this IP: at most 1"));
    }
}
