//! The exchange's request weight, per client IP: every info request (`POST /info` and the socket's `post`) costs
//! the weight the exchange charges for its type, out of `server.info_weight_per_minute` (1200, as the exchange
//! allows an IP). Past it the request gets 429 with plain text, as the exchange answers, before any work is done.
//!
//! Weights, from the exchange's "Rate limits and user limits" page: 2 for l2Book, allMids, clearinghouseState,
//! orderStatus, spotClearinghouseState and exchangeStatus; 60 for userRole; 20 for every other type; and the types
//! that return lists cost 1 more per 20 items returned (candleSnapshot per 60), charged once the answer is known.
//! Our extension `tradesByHeight` is weighed as the list types, 20 and 1 per 20 trades (not blocks) returned.
//! Unlike the gate's places (how many requests run at once), this bounds how much one IP asks over time, so a
//! flood of pass-through requests costs the node and the upstream what one exchange client could cost them.
//!
//! The buckets are `governor`'s keyed GCRA limiter; idle IPs are swept once the map grows.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use governor::clock::{Clock, DefaultClock};
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};

use super::info_gate::Answer;

/// Tracked IPs past which idle ones are swept.
const SWEEP_AT: usize = 4096;

#[derive(Debug)]
pub struct InfoWeight {
    limiter: Option<RateLimiter<IpAddr, DefaultKeyedStateStore<IpAddr>, DefaultClock>>,
    per_minute: u32,
    checks: AtomicU64,
}

/// The exchange's weight of one request of `kind`, before what it returns.
pub fn base_weight(kind: &str) -> u32 {
    match kind {
        "l2Book" | "allMids" | "clearinghouseState" | "orderStatus" | "spotClearinghouseState" | "exchangeStatus" => 2,
        "userRole" => 60,
        _ => 20,
    }
}

/// The extra weight of an answer of `kind` holding `items` entries.
pub fn items_weight(kind: &str, items: usize) -> u32 {
    let per = match kind {
        "recentTrades"
        | "historicalOrders"
        | "userFills"
        | "userFillsByTime"
        | "fundingHistory"
        | "userFunding"
        | "userNonFundingLedgerUpdates"
        | "nonUserFundingUpdates"
        | "twapHistory"
        | "userTwapSliceFills"
        | "userTwapSliceFillsByTime"
        | "delegatorHistory"
        | "delegatorRewards"
        | "validatorStats"
        | "tradesByHeight" => 20,
        "candleSnapshot" => 60,
        _ => return 0,
    };
    (items / per) as u32
}

/// Entries of a JSON array answer (0 for anything else); a `tradesByHeight` answer's trades, in all its blocks.
pub fn answer_items(kind: &str, a: &Answer) -> usize {
    if a.text || a.status != 200 || a.body.first() != Some(&b'[') {
        return 0;
    }
    if kind == "tradesByHeight" {
        #[derive(serde::Deserialize)]
        struct Block {
            trades: Vec<serde::de::IgnoredAny>,
        }
        return serde_json::from_slice::<Vec<Block>>(&a.body).map_or(0, |v| v.iter().map(|b| b.trades.len()).sum());
    }
    serde_json::from_slice::<Vec<serde::de::IgnoredAny>>(&a.body).map_or(0, |v| v.len())
}

impl InfoWeight {
    pub fn new(per_minute: u32) -> InfoWeight {
        let limiter = NonZeroU32::new(per_minute).map(|n| RateLimiter::keyed(Quota::per_minute(n)));
        InfoWeight { limiter, per_minute, checks: AtomicU64::new(0) }
    }

    /// Spends `kind`'s base weight for `ip`, or the 429 refusing it.
    pub fn spend(&self, ip: IpAddr, kind: &str) -> Result<(), Answer> {
        let Some(limiter) = &self.limiter else { return Ok(()) };
        self.sweep(limiter);
        let w = NonZeroU32::new(base_weight(kind)).expect("every weight is at least 2");
        match limiter.check_key_n(&ip, w) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(until)) => {
                let wait = until.wait_time_from(DefaultClock::default().now()).as_millis();
                Err(Answer::text(
                    429,
                    &format!(
                        "rate limited: {ip} spent its info request weight ({} a minute, server.info_weight_per_minute; \
                         {kind} weighs {w}); retry in {wait} ms",
                        self.per_minute
                    ),
                ))
            }
            Err(_) => Err(Answer::text(429, &format!("{kind} weighs more than server.info_weight_per_minute"))),
        }
    }

    /// Charges what an answer returned, where the exchange charges by items; spent when it fits (a client at its
    /// limit pays with its next request).
    pub fn charge_items(&self, ip: IpAddr, kind: &str, answer: &Answer) {
        let Some(limiter) = &self.limiter else { return };
        if let Some(w) = NonZeroU32::new(items_weight(kind, answer_items(kind, answer))) {
            let _ = limiter.check_key_n(&ip, w);
        }
    }

    fn sweep(&self, limiter: &RateLimiter<IpAddr, DefaultKeyedStateStore<IpAddr>, DefaultClock>) {
        if self.checks.fetch_add(1, Relaxed) % 1024 == 0 && limiter.len() > SWEEP_AT {
            limiter.retain_recent();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ip_spends_the_exchanges_weights_then_gets_429_and_others_do_not() {
        let w = InfoWeight::new(100);
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        // 100 a minute: five 20-weight requests, then none; the 2-weight l2Book does not fit either.
        for _ in 0..5 {
            w.spend(a, "meta").unwrap();
        }
        let refused = w.spend(a, "l2Book").unwrap_err();
        assert_eq!(refused.status, 429);
        assert!(refused.text && refused.message().contains("server.info_weight_per_minute"), "{refused:?}");
        for _ in 0..50 {
            w.spend(b, "l2Book").unwrap();
        }
        assert!(w.spend(b, "l2Book").is_err(), "50 × 2 is the whole minute");
        assert!(InfoWeight::new(0).spend(a, "userRole").is_ok(), "0: no limit");
    }

    #[test]
    fn list_answers_cost_by_their_items() {
        assert_eq!((base_weight("userRole"), base_weight("allMids"), base_weight("webData2")), (60, 2, 20));
        assert_eq!(items_weight("userFills", 2000), 100);
        assert_eq!(items_weight("candleSnapshot", 5000), 83);
        assert_eq!(items_weight("meta", 5000), 0);
        let list = Answer::json(format!("[{}]", vec!["1"; 45].join(",")));
        assert_eq!(answer_items("userFills", &list), 45);
        let blocks = Answer::json(format!(
            r#"[{{"height":7,"trades":[{}]}},{{"height":9,"trades":[{}]}}]"#,
            vec!["{}"; 30].join(","),
            vec!["{}"; 15].join(",")
        ));
        assert_eq!((answer_items("tradesByHeight", &blocks), answer_items("recentTrades", &blocks)), (45, 2));
        assert_eq!(items_weight("tradesByHeight", 45), 2);
        let w = InfoWeight::new(60);
        let ip: IpAddr = "10.0.0.3".parse().unwrap();
        w.spend(ip, "userFills").unwrap();
        w.charge_items(ip, "userFills", &list);
        // 20 + 2 spent of 60: one more 20 fits, a second does not.
        w.spend(ip, "meta").unwrap();
        assert!(w.spend(ip, "meta").is_err());
    }
}
