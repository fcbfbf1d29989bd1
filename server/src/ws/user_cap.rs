//! How many distinct users one client IP follows (orderUpdates, userFills, userEvents), across its connections.
//!
//! The official server refuses the 16th distinct user per IP with `Cannot track more than 15 total users.` and
//! frees a user when its last subscription from that IP goes; `server.max_users_per_ip` sets the cap here.

use std::net::IpAddr;

use parking_lot::Mutex;
use rustc_hash::FxHashMap;

use crate::node::Address;

/// Per IP, per user, the subscriptions that follow it.
#[derive(Debug, Default)]
pub struct UserCap {
    per_ip: Mutex<FxHashMap<IpAddr, FxHashMap<Address, usize>>>,
}

impl UserCap {
    /// Counts one more subscription of `user` from `ip`; false (and nothing counted) when it would be the
    /// `max + 1`th distinct user of that IP.
    pub fn try_add(&self, ip: IpAddr, user: Address, max: usize) -> bool {
        let mut per_ip = self.per_ip.lock();
        let users = per_ip.entry(ip).or_default();
        if !users.contains_key(&user) && users.len() >= max {
            if users.is_empty() {
                per_ip.remove(&ip);
            }
            return false;
        }
        *users.entry(user).or_default() += 1;
        true
    }

    pub fn remove(&self, ip: IpAddr, user: Address) {
        let mut per_ip = self.per_ip.lock();
        let Some(users) = per_ip.get_mut(&ip) else { return };
        if let Some(n) = users.get_mut(&user) {
            *n -= 1;
            if *n == 0 {
                users.remove(&user);
            }
        }
        if users.is_empty() {
            per_ip.remove(&ip);
        }
    }
}

/// The official refusal text, with the refused subscription (valid JSON) after it.
pub fn refusal(max: usize, echo: &serde_json::Value) -> String {
    format!("Cannot track more than {max} total users. {echo}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_users_per_ip_are_capped_and_freed() {
        let cap = UserCap::default();
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let other: IpAddr = "::1".parse().unwrap();
        let u = |i: u8| Address::parse(&format!("0x{}", format!("{i:02x}").repeat(20))).unwrap();
        assert!(cap.try_add(ip, u(1), 2));
        assert!(cap.try_add(ip, u(1), 2), "the same user again is no new user");
        assert!(cap.try_add(ip, u(2), 2));
        assert!(!cap.try_add(ip, u(3), 2));
        assert!(cap.try_add(other, u(3), 2), "another IP has its own count");
        cap.remove(ip, u(1));
        assert!(!cap.try_add(ip, u(3), 2), "u1 still has a subscription");
        cap.remove(ip, u(1));
        assert!(cap.try_add(ip, u(3), 2));
    }
}
