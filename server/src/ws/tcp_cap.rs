//! The per-IP cap on TCP connections, checked at accept on every listener (`listen`), before a byte is read.
//!
//! `limits` caps WebSocket connections per client at the upgrade, which a client never reaches if it opens sockets
//! and sends nothing, or sends headers slowly: each such socket would hold a file descriptor and a task for as long
//! as the header deadline allows, and enough of them would exhaust the process. So every TCP connection also holds
//! a place here for its whole life (WebSocket ones included: the place lives in the socket's IO), counted by the
//! TCP peer's IP group (`upgrade::ip_group`). `X-Forwarded-For` is not read yet at accept, so peers that are
//! trusted balancers are not capped here; their clients are counted at `/ws` by `limits`.

use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::Mutex;
use rustc_hash::FxHashMap;

use crate::config::ServerConfig;

/// Open connections per IP group on the listeners that share this table.
#[derive(Debug)]
pub struct TcpCap {
    max_per_ip: usize,
    ipv6_prefix_len: u8,
    trusted: Vec<IpAddr>,
    open: Mutex<FxHashMap<IpAddr, usize>>,
}

/// One connection's place; dropping it (with the socket) frees it. Trusted peers hold no place.
#[derive(Debug)]
pub struct TcpPlace {
    cap: Arc<TcpCap>,
    group: Option<IpAddr>,
}

impl Drop for TcpPlace {
    fn drop(&mut self) {
        let Some(group) = self.group else { return };
        let mut open = self.cap.open.lock();
        if let Some(n) = open.get_mut(&group) {
            *n = n.saturating_sub(1);
            // An IP with nothing open costs nothing.
            if *n == 0 {
                open.remove(&group);
            }
        }
    }
}

impl TcpCap {
    pub fn new(c: &ServerConfig) -> Arc<TcpCap> {
        Arc::new(TcpCap {
            max_per_ip: c.max_http_connections_per_ip,
            ipv6_prefix_len: c.ipv6_prefix_len,
            trusted: c.trusted_proxies.iter().map(IpAddr::to_canonical).collect(),
            open: Mutex::new(FxHashMap::default()),
        })
    }

    /// A place for a connection from `peer`, or None when its IP group already has the most allowed.
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Option<TcpPlace> {
        let peer = peer.to_canonical();
        if self.trusted.contains(&peer) {
            return Some(TcpPlace { cap: self.clone(), group: None });
        }
        let group = super::upgrade::ip_group(peer, self.ipv6_prefix_len);
        let mut open = self.open.lock();
        let n = open.entry(group).or_default();
        if *n >= self.max_per_ip {
            return None;
        }
        *n += 1;
        Some(TcpPlace { cap: self.clone(), group: Some(group) })
    }

    /// IP groups with connections open.
    pub fn ips_tracked(&self) -> usize {
        self.open.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn caps_each_ip_group_and_frees_places_with_their_sockets() {
        let c = ServerConfig {
            max_http_connections_per_ip: 2,
            trusted_proxies: vec![ip("10.0.0.9")],
            ..Default::default()
        };
        let cap = TcpCap::new(&c);
        let a1 = cap.admit(ip("10.0.0.1")).unwrap();
        let _a2 = cap.admit(ip("::ffff:10.0.0.1")).unwrap();
        assert!(cap.admit(ip("10.0.0.1")).is_none(), "a mapped IPv4 peer is the same peer");
        assert!(cap.admit(ip("10.0.0.2")).is_some(), "another IP has its own budget");
        // One /64, one budget.
        let _v1 = cap.admit(ip("2001:db8:1:2::1")).unwrap();
        let _v2 = cap.admit(ip("2001:db8:1:2::2")).unwrap();
        assert!(cap.admit(ip("2001:db8:1:2:ffff::3")).is_none());
        assert!(cap.admit(ip("2001:db8:1:3::1")).is_some());
        drop(a1);
        assert!(cap.admit(ip("10.0.0.1")).is_some(), "a closed socket frees its place");
        // A trusted balancer carries many clients: not capped here.
        let lb: Vec<TcpPlace> = (0..5).map(|_| cap.admit(ip("10.0.0.9")).unwrap()).collect();
        drop(lb);
        assert_eq!(cap.ips_tracked(), 2, "only IPs with open connections are remembered");
    }
}
