//! A `trades` subscription that resumes from a height the feed no longer holds catches up from the history store
//! (docs/api.md "Resume"): a page of blocks at a time, each block's frame written by the live channel's writer
//! (`json::trades`), until the feed holds the rest.
//!
//! Each page is a history read: it takes a turn among `server.history_reads` like a userFills snapshot, so a
//! thousand clients resuming from a day back wait in the bounded queue (or are told to come back) instead of reading
//! the store at once, and its frames are charged to the connection like any it writes. A page is at most
//! `PAGE_BLOCKS` blocks, so one resume never holds more than a page in memory.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::frame::{Audit, Frame};
use super::hub::{Hub, NoResume};
use super::json;
use crate::node::Coin;
use crate::state::LineTimes;

/// Blocks a page reads at most (about three minutes at mainnet rate).
pub const PAGE_BLOCKS: u64 = 2_000;

/// How long a page waits for the store to have written its last block.
const STORE_WAIT: Duration = Duration::from_secs(10);

/// One page: the frames of the coin's blocks with trades in `after+1..=upto`, oldest first.
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

/// Whether the store can replay every trade after height `since`: it keeps every user's fills, and its oldest
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

/// Reads the coin's trade frames of blocks `after+1..=upto` on a blocking thread, in a history turn; the hub is
/// poked when it is done, so the connection picks the page up on its next wake.
pub fn read_page(hub: &Arc<Hub>, coin: Coin, after: u64, upto: u64) -> PageRead {
    let read = PageRead(Arc::new(OnceLock::new()));
    let (hub, out) = (hub.clone(), read.clone());
    tokio::task::spawn_blocking(move || {
        let result = page(&hub, &coin, after, upto);
        if result.is_err() {
            hub.history().counters.reads_refused.inc();
        }
        let _ = out.0.set(result);
        hub.poke();
    });
    read
}

fn page(hub: &Hub, coin: &Coin, after: u64, upto: u64) -> Result<Page, String> {
    let store = hub.store().ok_or("no history store")?;
    let _turn = hub.history().turns.take()?;
    if !store.wait_for(upto, STORE_WAIT) {
        return Err(format!("the history store had not written height {upto} after {}s", STORE_WAIT.as_secs()));
    }
    let frames = store
        .coin_fills(coin, after + 1, upto)?
        .into_iter()
        .map(|(height, fills)| {
            let block_time = fills.first().map_or(0, |f| f.time.saturating_mul(1_000_000));
            let audit = Audit { times: LineTimes { height, block_time, ..LineTimes::default() }, published: 0 };
            Arc::new(Frame::new(0, json::trades(fills.iter()), audit))
        })
        .collect();
    Ok(Page { frames, upto })
}
