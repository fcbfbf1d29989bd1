//! hlsim's TWAP orders (`--write-twaps`): now and then a user starts one, it executes as slices over later blocks,
//! and it ends finished or terminated. Each slice is a real trade of the simulated market: a market order walking
//! the opposite book (moving the books and both accounts, with the makers' diffs and statuses), whose fill on the
//! owner's side carries the TWAP's id. Each start and end is a line of `node_twap_statuses`, in the node's format
//! (cited in `crate::node::twap`, written here independently of that parser).
//!
//! As the node does (sources in `crate::node::twap`): slice fills have an all-zero hash on both sides and a
//! `twapId` on the owner's side only; a slice writes no status line of its own (none in the mainnet fixture of
//! docs/hl-user-channels.md). The exchange sends a suborder every 30 s with at most 3% slippage, later ones larger
//! to catch up (Hyperliquid docs, https://hyperliquid.gitbook.io/hyperliquid-docs/trading/order-types, as
//! third-party summaries of it quote; Allium's https://docs.allium.so/historical-data/supported-blockchains/
//! hyperliquid/dex states the 30 s and the zero hash). Here a slice comes every `SLICE_EVERY` blocks, two per
//! TWAP minute, so a TWAP lives a few blocks, not minutes of block time; a slice is what is left over the slices
//! left (catching up, without the exchange's 3× cap). `randomize` is drawn and written but does not move the
//! slices. Its own random stream: blocks without TWAP activity are the market's alone.

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use super::sweep::Sweep;
use super::{Market, Tag};
use crate::node::Side;
use crate::sim::block::{BlockOut, StreamBuf};
use crate::sim::fmt::{decimal, uint};

/// The first TWAP id (mainnet's were near 1.8 million in 2026).
const FIRST_TWAP_ID: u64 = 1_790_000;
/// A new TWAP starts in one block of this many, on average.
const START_ONE_IN: u32 = 12;
/// Blocks between two slices of one TWAP.
const SLICE_EVERY: u64 = 3;
/// A slice walks the book at most this many percent past the best price.
const SLIPPAGE_PCT: u64 = 3;
/// One TWAP in this many is terminated by its owner before its last slice.
const TERMINATE_ONE_IN: u32 = 4;
/// Both sides of a slice fill carry this hash.
const ZERO_HASH: &str = "0x0000000000000000000000000000000000000000000000000000000000000000";

/// A running TWAP.
#[derive(Clone, Debug)]
struct Running {
    id: u64,
    user: u32,
    coin: usize,
    side: Side,
    /// Lots.
    sz: u64,
    executed_sz: u64,
    /// Quote units of `10^-(px_dec + sz_dec)`: exact.
    executed_ntl: u64,
    minutes: u32,
    randomize: bool,
    start_ms: u64,
    slices_left: u32,
    /// Terminated when this many slices are left (`None`: runs to the end).
    stop_at: Option<u32>,
    next_slice: u64,
}

#[derive(Debug)]
pub struct TwapSim {
    rng: Xoshiro256PlusPlus,
    next_id: u64,
    running: Vec<Running>,
}

impl TwapSim {
    pub fn new(seed: u64) -> TwapSim {
        TwapSim {
            rng: Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x7477_6170),
            next_id: FIRST_TWAP_ID,
            running: Vec::new(),
        }
    }

    /// Adds block `height`'s TWAP activity to `out`: the slices due, the ends they bring, then maybe a new TWAP.
    /// Call after `Market::block` built the block.
    pub fn block(&mut self, m: &mut Market, height: u64, out: &mut BlockOut) {
        let mut i = 0;
        while i < self.running.len() {
            if self.running[i].next_slice == height {
                let t = &mut self.running[i];
                slice(m, t, out);
                t.next_slice = height + SLICE_EVERY;
                if let Some(status) = end(t) {
                    let t = self.running.remove(i);
                    status_event(m, &t, status, &mut out.twaps);
                    continue;
                }
            }
            i += 1;
        }
        if self.rng.random_ratio(1, START_ONE_IN) {
            self.start(m, height, out);
        }
    }

    fn start(&mut self, m: &mut Market, height: u64, out: &mut BlockOut) {
        let coin = self.rng.random_range(0..m.coins.len());
        let user = self.rng.random_range(0..m.users.len() as u32);
        m.accounts.request(user);
        let minutes = self.rng.random_range(1..=3);
        let slices = minutes * 2;
        let t = Running {
            id: self.next_id,
            user,
            coin,
            side: if self.rng.random() { Side::Bid } else { Side::Ask },
            sz: self.rng.random_range(1..=m.coins[coin].lot * 6),
            executed_sz: 0,
            executed_ntl: 0,
            minutes,
            randomize: self.rng.random(),
            start_ms: m.time_ms,
            slices_left: slices,
            stop_at: self.rng.random_ratio(1, TERMINATE_ONE_IN).then(|| self.rng.random_range(1..slices)),
            next_slice: height + 1,
        };
        self.next_id += 1;
        status_event(m, &t, "\"activated\"", &mut out.twaps);
        self.running.push(t);
    }
}

/// The status a TWAP ends with after its latest slice, if it ends.
fn end(t: &Running) -> Option<&'static str> {
    if t.slices_left == 0 || t.executed_sz == t.sz {
        Some("\"finished\"")
    } else if t.stop_at == Some(t.slices_left) {
        Some("\"terminated\"")
    } else {
        None
    }
}

/// One slice: an even share of what is left (all of it at the last), as a market order.
fn slice(m: &mut Market, t: &mut Running, out: &mut BlockOut) {
    let left = t.sz - t.executed_sz;
    let sz = if t.slices_left <= 1 { left } else { (left / u64::from(t.slices_left)).max(1) };
    t.slices_left -= 1;
    let sweep = Sweep {
        user: t.user,
        side: t.side,
        sz,
        reduce_only: false,
        slippage_pct: SLIPPAGE_PCT,
        hash: ZERO_HASH,
        tag: Tag::Twap(t.id),
    };
    let (filled, ntl) = m.sweep(t.coin, sweep, out);
    t.executed_sz += filled;
    t.executed_ntl += ntl;
}

/// One `node_twap_statuses` event: `{time, twap_id, state, status}`; `status` is written as given (JSON).
fn status_event(m: &Market, t: &Running, status: &str, out: &mut StreamBuf) {
    let coin = &m.coins[t.coin];
    let buf = out.begin();
    buf.extend_from_slice(br#"{"time":""#);
    buf.extend_from_slice(&m.time);
    buf.extend_from_slice(br#"","twap_id":"#);
    uint(buf, t.id);
    buf.extend_from_slice(br#","state":{"coin":""#);
    buf.extend_from_slice(coin.name.as_bytes());
    buf.extend_from_slice(br#"","user":""#);
    buf.extend_from_slice(m.users[t.user as usize].as_bytes());
    buf.extend_from_slice(br#"","side":""#);
    buf.extend_from_slice(t.side.as_str().as_bytes());
    buf.extend_from_slice(br#"","sz":""#);
    decimal(buf, t.sz, coin.sz_dec);
    buf.extend_from_slice(br#"","executedSz":""#);
    decimal(buf, t.executed_sz, coin.sz_dec);
    buf.extend_from_slice(br#"","executedNtl":""#);
    decimal(buf, t.executed_ntl, coin.px_dec + coin.sz_dec);
    buf.extend_from_slice(br#"","minutes":"#);
    uint(buf, u64::from(t.minutes));
    buf.extend_from_slice(br#","reduceOnly":false,"randomize":"#);
    buf.extend_from_slice(if t.randomize { b"true" } else { b"false" });
    buf.extend_from_slice(br#","timestamp":"#);
    uint(buf, t.start_ms);
    buf.extend_from_slice(br#"},"status":"#);
    buf.extend_from_slice(status.as_bytes());
    buf.push(b'}');
    out.end();
}
