//! Connection admission: total and per-IP caps, and new connections a minute per IP. A refused client gets an
//! HTTP 429 before the upgrade, so abuse costs us one response and touches no other connection. An IP's entry
//! lives while it has connections or its rate window is open: windows older than a minute are swept, so IPs that
//! came and went cost nothing. A named token's connections count against the token's own cap instead (`Who`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rustc_hash::FxHashMap;

use super::ip_quota::Who;
use crate::config::ServerConfig;

#[derive(Debug, Default)]
struct PerIp {
    open: usize,
    window_start: Option<Instant>,
    new_in_window: u32,
}

/// The rate window's length.
const WINDOW: Duration = Duration::from_secs(60);

impl PerIp {
    /// Nothing to remember: no open connection and no open rate window.
    fn idle(&self, now: Instant) -> bool {
        self.open == 0 && self.window_start.is_none_or(|t| now.duration_since(t) >= WINDOW)
    }
}

#[derive(Debug)]
struct IpTable {
    map: FxHashMap<Who, PerIp>,
    swept: Instant,
}

#[derive(Debug)]
pub struct ConnLimits {
    max_total: usize,
    max_per_ip: usize,
    /// Named tokens' connection caps.
    per_token: FxHashMap<Arc<str>, usize>,
    new_per_minute: u32,
    open: AtomicUsize,
    ips: Mutex<IpTable>,
}

/// Holds one admitted connection's place; dropping it frees the place.
#[derive(Debug)]
pub struct Admitted {
    limits: Arc<ConnLimits>,
    who: Who,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.limits.open.fetch_sub(1, Relaxed);
        let mut ips = self.limits.ips.lock();
        if let Some(p) = ips.map.get_mut(&self.who) {
            p.open = p.open.saturating_sub(1);
            if p.idle(Instant::now()) {
                ips.map.remove(&self.who);
            }
        }
    }
}

impl ConnLimits {
    pub fn new(c: &ServerConfig) -> ConnLimits {
        ConnLimits {
            max_total: c.max_connections,
            max_per_ip: c.max_connections_per_ip,
            per_token: c.tokens.iter().map(|t| (t.name.as_str().into(), t.allowances(c).0)).collect(),
            new_per_minute: c.new_connections_per_minute_per_ip,
            open: AtomicUsize::new(0),
            ips: Mutex::new(IpTable { map: FxHashMap::default(), swept: Instant::now() }),
        }
    }

    pub fn open(&self) -> usize {
        self.open.load(Relaxed)
    }

    /// Client IPs remembered (open connections or an open rate window).
    pub fn ips_tracked(&self) -> usize {
        self.ips.lock().map.len()
    }

    /// Admits a connection from `who`, or says which limit refused it.
    pub fn admit(self: &Arc<Self>, who: Who) -> Result<Admitted, String> {
        let mut ips = self.ips.lock();
        let now = Instant::now();
        if now.duration_since(ips.swept) >= WINDOW {
            ips.map.retain(|_, p| !p.idle(now));
            ips.swept = now;
        }
        if self.open.load(Relaxed) >= self.max_total {
            return Err(format!("server full: {} connections", self.max_total));
        }
        let max = match &who {
            Who::Token(name) => self.per_token.get(name).copied().unwrap_or(self.max_per_ip),
            Who::Ip(_) => self.max_per_ip,
        };
        let p = ips.map.entry(who.clone()).or_default();
        if p.open >= max {
            return Err(format!("too many connections from {who} (limit {max})"));
        }
        if p.window_start.is_none_or(|t| now.duration_since(t) >= WINDOW) {
            p.window_start = Some(now);
            p.new_in_window = 0;
        }
        if p.new_in_window >= self.new_per_minute {
            return Err(format!("too many new connections from {who} (limit {} a minute)", self.new_per_minute));
        }
        p.new_in_window += 1;
        p.open += 1;
        self.open.fetch_add(1, Relaxed);
        Ok(Admitted { limits: self.clone(), who })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_per_ip_total_and_rate() {
        let c = ServerConfig {
            max_connections: 3,
            max_connections_per_ip: 2,
            new_connections_per_minute_per_ip: 3,
            ..ServerConfig::default()
        };
        let l = Arc::new(ConnLimits::new(&c));
        let (a, b) = (Who::Ip("10.0.0.1".parse().unwrap()), Who::Ip("10.0.0.2".parse().unwrap()));
        let a1 = l.admit(a.clone()).unwrap();
        let _a2 = l.admit(a.clone()).unwrap();
        assert!(l.admit(a.clone()).unwrap_err().contains("too many connections from 10.0.0.1"));
        let _b1 = l.admit(b.clone()).unwrap();
        assert!(l.admit(b).unwrap_err().contains("server full"));
        drop(a1);
        assert_eq!(l.open(), 2);
        // The third new connection this minute from `a` is allowed; the fourth is not, even with room.
        let a3 = l.admit(a.clone()).unwrap();
        drop(a3);
        assert!(l.admit(a).unwrap_err().contains("a minute"));
    }

    #[test]
    fn a_named_tokens_connections_count_against_its_own_cap() {
        let desk = crate::config::NamedToken {
            name: "desk".into(),
            token: "t".into(),
            max_connections: Some(3),
            ..Default::default()
        };
        let c = ServerConfig { max_connections_per_ip: 1, tokens: vec![desk], ..ServerConfig::default() };
        let l = Arc::new(ConnLimits::new(&c));
        let (token, ip) = (Who::Token("desk".into()), Who::Ip("10.0.0.1".parse().unwrap()));
        let held: Vec<Admitted> = (0..3).map(|_| l.admit(token.clone()).unwrap()).collect();
        assert!(l.admit(token).unwrap_err().contains("too many connections from token desk (limit 3)"));
        let _ip = l.admit(ip.clone()).expect("the IP's own cap is untouched by the token's connections");
        assert!(l.admit(ip).is_err(), "the per-IP 1");
        drop(held);
    }
}
