//! A subscription that resumes from a height the feed no longer holds (or from a time nobody followed it) catches
//! up from the history store when its frames are made of fills (docs/api.md "Resume"): `trades`, `userFills`,
//! `userTwapSliceFills` and `candle`. A page of blocks at a time, each block's frame written by the live channel's writer (`json::trades`,
//! `users::user_fills`, `candles::candle_frame`), until the feed holds the rest. A candle page starts from the
//! candle as it stood after the page's first height (`Store::candle_after`) and counts each block's trades as the
//! live keeper does.
//!
//! Each page is a history read: it takes a turn among `server.history_reads` like a userFills snapshot, so a
//! thousand clients resuming from a day back wait in the bounded queue (or are told to come back) instead of reading
//! the store at once, and its frames are charged to the connection like any it writes. A page is at most
//! `PAGE_BLOCKS` blocks, so one resume never holds more than a page in memory. A connection reads one page at a
//! time (`ws::conn::resume`), and one client IP at most as many as there are turns (`History::page_place`), so
//! an IP with many connections cannot fill the queue that every other client's history reads wait in.

use std::net::IpAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::candles::candle_frame;
use super::frame::{Audit, Frame};
use super::hub::{Hub, NoResume};
use super::users::{UserChannel, twap_slice_fills, user_fills, user_fills_merged};
use super::{Want, json};
use crate::state::LineTimes;
use crate::store::Store;
use crate::store::candle::{block_trades, push};

/// Blocks a page reads at most (about three minutes at mainnet rate).
pub const PAGE_BLOCKS: u64 = 2_000;

/// How long a page waits for the store to have written its last block.
const STORE_WAIT: Duration = Duration::from_secs(10);

/// Whether the subscription's frames are made of fills only, so the store can replay them.
pub fn replays(want: &Want) -> bool {
    match want {
        Want::Trades(_) | Want::Candle(..) => true,
        Want::User { channel, .. } => channel.from_fills_history(),
        _ => false,
    }
}

/// One page: the subscription's frames of blocks `after+1..=upto`, oldest first.
#[derive(Debug)]
pub struct Page {
    pub frames: Vec<Arc<Frame>>,
    pub upto: u64,
}

/// A page being read; its result once the read is done.
#[derive(Debug, Clone)]
pub struct PageRead(Arc<OnceLock<Result<Page, String>>>);

impl PageRead {
    pub fn result(&self) -> Option<&Result<Page, String>> {
        self.0.get()
    }
}

/// Whether the store can replay every fill after height `since`: it keeps every user's fills, and its oldest
/// block is no later than the first one after `since` with no hole since. Err: why not (for the notice).
pub fn can_replay(hub: &Hub, since: u64) -> Result<(), String> {
    let store = hub.store().ok_or("hlbook keeps no history store here")?;
    if store.follow.only() {
        return Err("its history store keeps followed users' fills only".into());
    }
    let oldest = store.oldest_height()?.ok_or("its history store holds no block yet")?;
    if since + 1 < oldest {
        return Err(format!("the oldest height it can resume from is {}", oldest - 1));
    }
    let from_ms = store.block_near(since, false)?.map_or(i64::MIN, |b| b.1);
    if let Some((a, b)) = store.coverage().gaps.into_iter().find(|(_, b)| *b > from_ms) {
        return Err(format!("its history store misses the blocks between {a} and {b} ms"));
    }
    Ok(())
}

/// The last height of the page after `after`: at most `PAGE_BLOCKS` on, no further than the feed's floor when the
/// feed was too old (`TooOld`), and at least one block on, no further than the store has written otherwise (the
/// read waits for it).
pub fn page_end(hub: &Hub, after: u64, why: NoResume) -> u64 {
    let written = hub.store().map_or(after, |s| s.height());
    match why {
        NoResume::TooOld { oldest } => oldest.min(after + PAGE_BLOCKS).max(after + 1),
        _ => written.min(after + PAGE_BLOCKS).max(after + 1),
    }
}

/// Reads the subscription's frames of blocks `after+1..=upto` on a blocking thread, in a history turn; the hub is
/// poked when it is done, so the connection picks the page up on its next wake.
/// `None`: client IP `ip` has as many pages in flight as there are history turns; try again when one ends.
pub fn read_page(hub: &Arc<Hub>, want: Want, after: u64, upto: u64, ip: Option<IpAddr>) -> Option<PageRead> {
    let place = hub.history().page_place(ip)?;
    let read = PageRead(Arc::new(OnceLock::new()));
    let (hub, out) = (hub.clone(), read.clone());
    tokio::task::spawn_blocking(move || {
        let result = page(&hub, &want, after, upto);
        if result.is_err() {
            hub.history().counters.reads_refused.inc();
        }
        let _ = out.0.set(result);
        drop(place);
        hub.poke();
    });
    Some(read)
}

fn page(hub: &Hub, want: &Want, after: u64, upto: u64) -> Result<Page, String> {
    let store = hub.store().ok_or("no history store")?;
    let _turn = hub.history().turns.take()?;
    if !store.wait_for(upto, STORE_WAIT) {
        return Err(format!("the history store had not written height {upto} after {}s", STORE_WAIT.as_secs()));
    }
    let frames = frames(&store, want, after + 1, upto)?;
    Ok(Page { frames: frames.into_iter().map(Arc::new).collect(), upto })
}

/// The frames of blocks `lo..=hi`, as the live writer made them.
fn frames(store: &Store, want: &Want, lo: u64, hi: u64) -> Result<Vec<Frame>, String> {
    let frame = |height: u64, time_ms: i64, json: Vec<u8>| {
        let block_time = time_ms.saturating_mul(1_000_000);
        let audit = Audit { times: LineTimes { height, block_time, ..LineTimes::default() }, published: 0 };
        Frame::new(0, json, audit)
    };
    Ok(match want {
        Want::Trades(coin) => store
            .coin_fills(coin, lo, hi)?
            .into_iter()
            .map(|(height, fills)| frame(height, fills.first().map_or(0, |f| f.time), json::trades(fills.iter())))
            .collect(),
        Want::User { user, channel, aggregate_by_time } if channel.from_fills_history() => store
            .user_fills_by_block(user, lo, hi)?
            .into_iter()
            .filter_map(|(height, fills)| {
                let list: Vec<&str> = fills.iter().map(String::as_str).collect();
                let time = list.first().and_then(|f| crate::store::trades::time_of(f)).unwrap_or(0);
                let json = match channel {
                    // A block without a slice of the user has no frame.
                    UserChannel::TwapSlices => twap_slice_fills(user, &list, false)?,
                    _ => aggregate_by_time
                        .then(|| user_fills_merged(user, &list))
                        .flatten()
                        .unwrap_or_else(|| user_fills(user, &list, false)),
                };
                Some(frame(height, time, json))
            })
            .collect(),
        Want::Candle(coin, interval) => {
            let mut candle = store.candle_after(coin, *interval, lo - 1)?;
            let mut out = Vec::new();
            for (height, fills) in store.coin_fills(coin, lo, hi)? {
                let mut counted = false;
                for tr in block_trades(fills.iter()) {
                    counted |= push(&mut candle, *interval, tr);
                }
                if let (true, Some(c)) = (counted, candle) {
                    out.push(frame(height, fills.first().map_or(0, |f| f.time), candle_frame(coin, *interval, &c)));
                }
            }
            out
        }
        _ => return Err("its frames are not made of fills alone".into()),
    })
}
