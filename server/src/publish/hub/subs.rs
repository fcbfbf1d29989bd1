//! The hub's subscription counting: what connections want built (`add`, `remove`, the `Wanted` it publishes), and
//! since when each ordered stream has been built without a break, so a subscription that resumes from a height
//! knows whether the feed holds all of its frames since (docs/api.md "Resume").
//!
//! An ordered stream whose last subscriber leaves lingers: it is built for `resume_window` more, so a client that
//! lost its connection can come back and resume it. Lingering streams are bounded in number, and a user's streams
//! per client IP as well: an IP whose connections come and go cannot keep more users followed than
//! `max_users_per_ip` live plus as many lingering (the user cap, `ws::user_cap`, counts live subscriptions only, as
//! the official server's does, so a lingering user never refuses a client its next one).

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rustc_hash::FxHashMap;

use super::{Hub, NoResume, ResumeAt, Slot, Want};
use crate::book::l2::L2Params;
use crate::node::Coin;
use crate::publish::feed::TickKind;
use crate::publish::wanted::{Registry, ShapeChanges, Wanted};

/// At most this many streams linger at once; past it a stream whose last subscriber leaves stops at once.
const MAX_LINGERING: usize = 65_536;

/// Since when each ordered coin stream has been built, and the streams whose last subscriber left, with when they
/// stop being built and the IP whose subscriber it was.
#[derive(Debug, Default)]
pub(super) struct Lingering {
    window: Duration,
    /// A client IP's lingering user streams at most.
    users_per_ip: usize,
    queue: Mutex<VecDeque<(Instant, Want, Option<IpAddr>)>>,
    /// Lingering user streams per client IP.
    users_of: Mutex<FxHashMap<IpAddr, usize>>,
    /// Each wanted coin stream's `Wanted` version when it became wanted: ticks built since hold its frames.
    since: Mutex<FxHashMap<Want, u64>>,
}

impl Lingering {
    /// Whether a user stream of `ip` may linger, counting it if so (coin streams always may: their number is
    /// bounded by the universe).
    fn admit(&self, want: &Want, ip: Option<IpAddr>) -> bool {
        let (Want::User { .. }, Some(ip)) = (want, ip) else { return true };
        let mut users_of = self.users_of.lock();
        let n = users_of.entry(ip).or_default();
        if *n >= self.users_per_ip {
            if *n == 0 {
                users_of.remove(&ip);
            }
            return false;
        }
        *n += 1;
        true
    }

    /// A lingering stream of `ip` stopped.
    fn release(&self, want: &Want, ip: Option<IpAddr>) {
        let (Want::User { .. }, Some(ip)) = (want, ip) else { return };
        let mut users_of = self.users_of.lock();
        if let Some(n) = users_of.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                users_of.remove(&ip);
            }
        }
    }
}

impl Hub {
    /// How long an ordered stream is still built after its last subscriber leaves (0: not at all), and how many
    /// user streams of one client IP may linger at once.
    #[must_use]
    pub fn with_resume_window(mut self, window: Duration, users_per_ip: usize) -> Hub {
        self.lingering.window = window;
        self.lingering.users_per_ip = users_per_ip;
        self
    }

    /// Counts one subscriber (of client IP `ip`, if known) less. An ordered stream (trades, l4Book, candle, a
    /// user's channel) lingers for the resume window; the rest stop when their last subscriber leaves.
    pub fn remove(&self, want: &Want, ip: Option<IpAddr>) {
        let window = self.lingering.window;
        let ordered = !matches!(want, Want::L2(_) | Want::Bbo(_) | Want::Mids(_));
        let mut queue = self.lingering.queue.lock();
        if ordered && !window.is_zero() && queue.len() < MAX_LINGERING && self.lingering.admit(want, ip) {
            queue.push_back((Instant::now() + window, want.clone(), ip));
            drop(queue);
            // The history store's followed set (`store.fills_follow_max` places) is for subscribers: a lingering
            // user gives its place back now, and the next subscriber reads its snapshot afresh (the kept read may
            // say the set was full); the feed still carries its frames for a resume.
            if let Want::User { user, channel, .. } = want
                && channel.from_fills_history()
            {
                self.store.follow(*user, false);
                self.history.forget(*user);
            }
            return;
        }
        drop(queue);
        self.remove_now(want, true);
    }

    /// Stops the lingering streams whose window has passed (the publisher's, once a pass).
    pub(crate) fn expire_lingering(&self) {
        let now = Instant::now();
        loop {
            let mut queue = self.lingering.queue.lock();
            let Some((_, want, ip)) = queue.front().filter(|(at, ..)| *at <= now).cloned() else { return };
            queue.pop_front();
            drop(queue);
            self.lingering.release(&want, ip);
            self.remove_now(&want, false);
        }
    }

    /// Where a subscription of `want` that processed every frame up to height `since` resumes on the feed, if
    /// the feed holds every frame of it since: the stream must have been built (wanted, its user watched) through
    /// the whole replay, and the replay no more than `max_behind` ticks long. Call after `add`.
    pub fn resume_at(&self, want: &Want, since: u64, max_behind: u64) -> Result<ResumeAt, NoResume> {
        let kind = match want {
            Want::User { channel, .. } => TickKind::of(*channel),
            _ => TickKind::Blocks,
        };
        let at = self.feed.resume_at(since, kind, max_behind)?;
        let kept = if *want == Want::Liquidations {
            true
        } else if let Want::User { user, .. } = want {
            let watched = self.shared.watched().since(user);
            watched.is_some_and(|g| self.feed.users_complete_through(at.cursor, g))
        } else {
            let version = self.lingering.since.lock().get(want).copied();
            version.is_some_and(|v| self.feed.wanted_through(at.cursor, v))
        };
        if kept { Ok(at) } else { Err(NoResume::NotKept) }
    }

    /// Counts one more subscriber of `want`; returns its slot for conflated streams. A new shape wakes the
    /// publisher, which builds its first frame at once.
    pub fn add(&self, want: &Want) -> Option<Arc<Slot>> {
        let mut r = self.registry.lock();
        fn up(e: &mut (usize, Arc<Slot>)) -> (Arc<Slot>, bool) {
            e.0 += 1;
            (e.1.clone(), e.0 == 1)
        }
        let coin = match want {
            Want::Mids(d) => {
                let (slot, new) = up(r.mids.entry(d.clone()).or_default());
                if new {
                    self.publish_wanted(&mut r, None);
                }
                return Some(slot);
            }
            Want::User { user: u, channel: ch, .. } => {
                self.users.add(*u, *ch, self.shared.watched());
                if ch.from_fills_history() {
                    self.store.follow(*u, true);
                }
                return None;
            }
            Want::Liquidations => return None,
            Want::L2(k) => &k.coin,
            Want::Bbo(c) | Want::Trades(c) | Want::L4(c) | Want::Candle(c, _) => c,
        };
        let subs = r.coins.entry(coin.clone()).or_default();
        let (slot, new) = match want {
            Want::L2(k) => {
                // Every depth of an aggregation reads the one cell the publisher stores it in.
                let same = |p: &L2Params| (p.n_sig_figs, p.mantissa) == (k.params.n_sig_figs, k.params.mantissa);
                let cell = subs.l2.iter().find(|(p, _)| same(p)).and_then(|(_, (_, s))| s.l2_cell().cloned());
                let entry = subs
                    .l2
                    .entry(k.params)
                    .or_insert_with(|| (0, Arc::new(Slot::l2(cell.unwrap_or_default(), k.params.n_levels))));
                let (slot, new) = up(entry);
                (Some(slot), new)
            }
            Want::Bbo(_) => {
                let (slot, new) = up(subs.bbo.get_or_insert_default());
                (Some(slot), new)
            }
            Want::Trades(_) => {
                subs.trades += 1;
                (None, subs.trades == 1)
            }
            Want::L4(_) => {
                subs.l4 += 1;
                (None, subs.l4 == 1)
            }
            Want::Candle(_, i) => {
                let n = subs.candles.entry(*i).or_default();
                *n += 1;
                (None, *n == 1)
            }
            Want::Mids(_) | Want::User { .. } | Want::Liquidations => unreachable!("handled above"),
        };
        if new {
            self.publish_wanted(&mut r, Some(coin));
            self.lingering.since.lock().insert(want.clone(), r.version);
        }
        slot
    }

    /// Counts one subscriber less; the last one out stops the building and drops the coin's entry. `store`: give
    /// a userFills subscriber's place in the store's followed set back too (a lingering one gave it already).
    fn remove_now(&self, want: &Want, store: bool) {
        let mut r = self.registry.lock();
        fn down(n: &mut usize) -> bool {
            *n = n.saturating_sub(1);
            *n == 0
        }
        let coin = match want {
            Want::Mids(d) => {
                if r.mids.get_mut(d).is_some_and(|e| down(&mut e.0)) {
                    r.mids.remove(d);
                    self.publish_wanted(&mut r, None);
                }
                return;
            }
            Want::User { user: u, channel: ch, .. } => {
                self.users.remove(*u, *ch, self.shared.watched());
                if ch.from_fills_history() && store {
                    self.store.follow(*u, false);
                }
                if !self.users.follows(*u) {
                    self.history.forget(*u);
                }
                return;
            }
            Want::Liquidations => return,
            Want::L2(k) => &k.coin,
            Want::Bbo(c) | Want::Trades(c) | Want::L4(c) | Want::Candle(c, _) => c,
        };
        let Some(subs) = r.coins.get_mut(coin) else { return };
        let gone = match want {
            Want::L2(k) => {
                let gone = subs.l2.get_mut(&k.params).is_some_and(|e| down(&mut e.0));
                if gone {
                    subs.l2.remove(&k.params);
                }
                gone
            }
            Want::Bbo(_) => {
                let gone = subs.bbo.as_mut().is_some_and(|e| down(&mut e.0));
                if gone {
                    subs.bbo = None;
                }
                gone
            }
            Want::Trades(_) => subs.trades > 0 && down(&mut subs.trades),
            Want::L4(_) => subs.l4 > 0 && down(&mut subs.l4),
            Want::Candle(_, i) => {
                let gone = subs.candles.get_mut(i).is_some_and(down);
                if gone {
                    subs.candles.remove(i);
                }
                gone
            }
            Want::Mids(_) | Want::User { .. } | Want::Liquidations => unreachable!("handled above"),
        };
        if gone {
            self.lingering.since.lock().remove(want);
            self.publish_wanted(&mut r, Some(coin));
        }
    }

    /// Publishes a new `Wanted` with `coin`'s entry rebuilt from its own subscriptions (or allMids' list, for
    /// `None`), and wakes the publisher so a new shape gets its first frame now, not at the next block.
    fn publish_wanted(&self, r: &mut Registry, coin: Option<&Coin>) {
        r.version += 1;
        let mut w = Wanted::clone(&self.wanted.load());
        w.version = r.version;
        match coin {
            Some(c) => {
                r.changes.coins.insert(c.clone());
            }
            None => r.changes.mids = true,
        }
        match coin {
            Some(c) => match r.coins.get(c) {
                Some(subs) if !subs.is_empty() => {
                    w.coins.insert(c.clone(), Arc::new(subs.wants()));
                }
                _ => {
                    r.coins.remove(c);
                    w.coins.remove(c);
                }
            },
            None => w.mids = r.mids.iter().map(|(d, (_, s))| (d.clone(), s.clone())).collect(),
        }
        if let Some(c) = coin {
            // The set is copied only when this coin joins or leaves it.
            let has_book = r.coins.get(c).is_some_and(|s| !s.l2.is_empty() || s.bbo.is_some());
            let changed = if has_book { r.book_coins.insert(c.clone()) } else { r.book_coins.remove(c) };
            if changed {
                self.shared.set_first_coins(r.book_coins.clone());
            }
        }
        self.wanted.store(Arc::new(w));
        self.shared.signal_change();
    }

    /// The shapes changed since the last call (the publisher's, once a pass).
    pub(crate) fn take_shape_changes(&self) -> ShapeChanges {
        std::mem::take(&mut self.registry.lock().changes)
    }

    /// Coins with at least one subscription (for tests of the cleanup).
    pub fn coins_wanted(&self) -> usize {
        self.registry.lock().coins.len()
    }
}
