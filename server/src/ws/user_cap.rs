//! How many distinct users one client IP follows (orderUpdates, userFills, userEvents), across its connections.
//!
//! The official server refuses the 16th distinct user per IP with `Cannot track more than 15 total users.` and
//! frees a user when its last subscription from that IP goes; `server.max_users_per_ip` sets the cap here.
//! `server.max_user_subscriptions_per_ip` caps the subscriptions themselves, so one IP cannot follow the same
//! user on hundreds of connections.

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
    /// Counts one more subscription of `user` from `ip`; Err (and nothing counted) when it would be the
    /// `max_users + 1`th distinct user of that IP, or its `max_subs + 1`th subscription.
    pub fn try_add(&self, ip: IpAddr, user: Address, max_users: usize, max_subs: usize) -> Result<(), Refused> {
        let mut per_ip = self.per_ip.lock();
        let users = per_ip.entry(ip).or_default();
        let refused = if !users.contains_key(&user) && users.len() >= max_users {
            Some(Refused::Users)
        } else if users.values().sum::<usize>() >= max_subs {
            Some(Refused::Subscriptions)
        } else {
            None
        };
        if let Some(r) = refused {
            if users.is_empty() {
                per_ip.remove(&ip);
            }
            return Err(r);
        }
        *users.entry(user).or_default() += 1;
        Ok(())
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

/// Which cap refused a subscription.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    Users,
    Subscriptions,
}

/// The refusal text (for distinct users, the official one), with the refused subscription (valid JSON) after it.
pub fn refusal(why: Refused, max: usize, echo: &super::protocol::Echo) -> String {
    match why {
        Refused::Users => format!("Cannot track more than {max} total users. {echo}"),
        Refused::Subscriptions => format!(
            "Too many user subscriptions from this IP: at most {max} (server.max_user_subscriptions_per_ip): {echo}"
        ),
    }
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
        let add = |ip, user| cap.try_add(ip, user, 2, 4);
        assert_eq!(add(ip, u(1)), Ok(()));
        assert_eq!(add(ip, u(1)), Ok(()), "the same user again is no new user");
        assert_eq!(add(ip, u(2)), Ok(()));
        assert_eq!(add(ip, u(3)), Err(Refused::Users));
        assert_eq!(add(other, u(3)), Ok(()), "another IP has its own count");
        cap.remove(ip, u(1));
        assert_eq!(add(ip, u(3)), Err(Refused::Users), "u1 still has a subscription");
        cap.remove(ip, u(1));
        assert_eq!(add(ip, u(3)), Ok(()));
        assert_eq!(add(ip, u(3)), Ok(()));
        assert_eq!(add(ip, u(3)), Ok(()), "four subscriptions of two users");
        assert_eq!(add(ip, u(2)), Err(Refused::Subscriptions), "a known user, but a fifth subscription");
    }
}
