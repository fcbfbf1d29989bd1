//! A subscription's resume (`since`, docs/api.md "Resume"): where it starts — on the feed after the newest tick
//! at or below the height, or, for the fills-made channels (trades, userFills, candle) the feed cannot give, a
//! catch-up from the history store a page at a time — and the notice when neither can serve it. The replay itself
//! is the gather's ordinary walk of the feed.

use super::{Chain, Conn, Delivery, L4State, Out};
use crate::node::Coin;
use crate::publish::Want;
use crate::publish::hub::NoResume;
use crate::publish::store_replay;
use crate::ws::candle_stream::CandleState;
use crate::ws::protocol::{self, Echo, Subscription};
use crate::ws::user_stream::UserState;

/// Where a resumed subscription starts.
pub(super) enum Resumed {
    /// On the feed, after this tick.
    Feed(u64),
    /// From the store (trades, userFills, candle), after this height: its pages are read one at a time per
    /// connection (`catch_up`).
    Store(u64),
}

impl<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin> Conn<S> {
    /// An ordered subscription with `since`: where it resumes (its chain set to continue from `since`), or the
    /// notice why it starts afresh. Snapshot channels take `since` as it is: their first frame is the current
    /// state, with its height.
    pub(super) fn resume(&self, s: &Subscription, chain: &mut Chain) -> (Option<Resumed>, Option<String>) {
        let Some(since) = s.since else { return (None, None) };
        if matches!(s.want, Want::L2(_) | Want::Bbo(_) | Want::Mids(_)) {
            return (None, None);
        }
        let hub = self.ctx.hub();
        let counters = self.ctx.counters();
        match hub.resume_at(&s.want, since, self.ctx.cfg().backlog_blocks as u64) {
            Ok(at) => {
                chain.resume(since, at.to);
                counters.resumes.inc();
                (Some(Resumed::Feed(at.cursor)), None)
            }
            // Fills-made frames the feed cannot give (too old, or nobody wanted them then) are all in the store.
            Err(why @ (NoResume::TooOld { .. } | NoResume::NotKept)) if store_replay::replays(&s.want) => {
                match store_replay::can_replay(hub, since) {
                    Ok(()) => {
                        chain.resume(since, 0);
                        counters.resumes.inc();
                        counters.resumes_from_store.inc();
                        (Some(Resumed::Store(since)), None)
                    }
                    Err(store_why) => {
                        counters.resumes_refused.inc();
                        // The store's own oldest height is the one to name; else the feed's reason, and the store's.
                        let why = if store_why.starts_with("the oldest height") {
                            store_why
                        } else {
                            format!("{} ({store_why})", because(why))
                        };
                        (None, Some(refusal(&s.echo, since, &why)))
                    }
                }
            }
            Err(why) => {
                counters.resumes_refused.inc();
                (None, Some(refusal(&s.echo, since, &because(why))))
            }
        }
    }

    /// The books' copy of the subscription's coin, if it has one.
    pub(super) fn shared_coin_of(&self, want: &Want) -> Option<Coin> {
        match want {
            Want::Trades(c) | Want::L4(c) | Want::Candle(c, _) => Some(self.shared_coin(c)),
            _ => None,
        }
    }
}

impl<S> Conn<S> {
    /// The subscriptions catching up from the store, one page read at a time per connection (so a connection
    /// resuming many streams holds one page and one history turn, not one each): a finished page's frames go out
    /// as replays, then the subscription joins the feed if it holds the rest, or waits to read its next page. A
    /// page the store cannot give ends the catch-up with a notice, and the subscription continues from the newest
    /// tick.
    pub(super) fn catch_up(&mut self, batch: &mut super::Batch) {
        let hub = self.ctx.hub().clone();
        let backlog = self.ctx.cfg().backlog_blocks as u64;
        let mut reading = false;
        for (s, sub, chain) in self.subs.values_mut() {
            let Delivery::FromStore { read, after, coin } = sub else { continue };
            let Some(r) = read else { continue };
            let Some(result) = r.result() else {
                reading = true;
                continue;
            };
            match result {
                Ok(page) => {
                    for f in &page.frames {
                        batch.push_replayed(f.clone(), chain);
                    }
                    (*after, *read) = (page.upto, None);
                }
                Err(e) => {
                    let text = format!("hlbook: {} stopped catching up from the history store: {e}", s.echo);
                    batch.push(Out::Text(protocol::notice(&format!("{text}; it continues from the newest frames"))));
                    // Its next frame's audit says which heights it lost, never that it follows on from `after`.
                    let head = hub.feed_head();
                    let newest = hub.tick_height(head).unwrap_or(*after).max(*after + 1);
                    chain.dropped(*after + 1, newest);
                    *sub = resumed_delivery(&s.want, Resumed::Feed(head), coin.take());
                }
            }
        }
        // Each waiting subscription joins the feed if it holds the rest now; the first that cannot reads a page.
        let mut joined = false;
        for (s, sub, chain) in self.subs.values_mut() {
            let Delivery::FromStore { read: read @ None, after, coin } = sub else { continue };
            let cursor = match hub.resume_at(&s.want, *after, join_within(backlog)) {
                Ok(at) => {
                    chain.replay_after(*after, at.to);
                    at.cursor
                }
                Err(NoResume::Ahead { .. }) => hub.feed_head(),
                // Below the feed's floor, or its ticks since lack the stream (nobody wanted it then): a page.
                Err(why) if !reading => {
                    let end = store_replay::page_end(&hub, *after, why);
                    // `None`: this IP's other connections hold its share of pages; the next wake tries again.
                    *read = store_replay::read_page(&hub, s.want.clone(), *after, end, self.opts.ip);
                    reading = true;
                    continue;
                }
                Err(_) => continue,
            };
            *sub = resumed_delivery(&s.want, Resumed::Feed(cursor), coin.take());
            self.ctx.counters().resumes_caught_up.inc();
            joined = true;
        }
        if joined {
            pause_after_join_for_test();
        }
    }
}

/// How far behind the newest tick a subscription catching up from the store may join the feed: half the backlog.
/// Joined at the backlog's very edge, the next tick published before its batch is gathered would count it as
/// fallen behind, and it would lose blocks the store could have given; short of the edge, it reads one more page.
fn join_within(backlog: u64) -> u64 {
    (backlog / 2).max(1)
}

/// Test hook `HLBOOK_TEST_JOIN_PAUSE_MS=N`: the connection's task stalls N ms once subscriptions joined the feed
/// from the store, before the gather reads the feed's head, as a task descheduled on a loaded machine does. Only
/// in `test-hooks` builds.
#[cfg(feature = "test-hooks")]
fn pause_after_join_for_test() {
    static PAUSE: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    let pause = *PAUSE.get_or_init(|| std::env::var("HLBOOK_TEST_JOIN_PAUSE_MS").ok().and_then(|v| v.parse().ok()));
    if let Some(ms) = pause {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

#[cfg(not(feature = "test-hooks"))]
fn pause_after_join_for_test() {}

/// A resumed ordered subscription: live on the feed after a tick, or catching up from the store; no snapshot, no
/// recent trades.
pub(super) fn resumed_delivery(want: &Want, resumed: Resumed, coin: Option<Coin>) -> Delivery {
    let cursor = match resumed {
        Resumed::Feed(c) => c,
        Resumed::Store(after) => return Delivery::FromStore { read: None, after, coin },
    };
    let coin = || coin.clone().expect("a coin stream has a coin");
    match want {
        Want::Trades(_) => Delivery::Trades { coin: coin(), cursor },
        Want::Liquidations => Delivery::Liquidations { cursor },
        Want::L4(_) => Delivery::L4 { coin: coin(), state: L4State::Live { cursor } },
        Want::Candle(_, i) => Delivery::Candle { key: (coin(), *i), state: CandleState::Live { cursor } },
        Want::User { user, channel, aggregate_by_time } => Delivery::User {
            user: *user,
            ch: *channel,
            // Read only while a subscription waits to go live; a resumed one is live.
            generation: 0,
            state: UserState::Live { cursor, aggregate: *aggregate_by_time, misc_after: 0 },
        },
        Want::L2(_) | Want::Bbo(_) | Want::Mids(_) => unreachable!("snapshot channels do not resume"),
    }
}

fn because(why: NoResume) -> String {
    match why {
        NoResume::TooOld { oldest } => format!("the oldest height it can resume from is {oldest}"),
        NoResume::Ahead { newest } => format!("its newest height is {newest}"),
        NoResume::NotKept => "nobody was subscribed to it for part of that time, so its frames were not kept".into(),
    }
}

/// The notice for a `since` the server cannot resume from; the subscription then starts as a fresh one.
fn refusal(echo: &Echo, since: u64, because: &str) -> String {
    format!("hlbook: cannot resume {echo} from height {since}: {because}; it starts afresh, as a new subscription")
}
