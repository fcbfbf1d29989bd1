//! hlsim's `misc_events` (`--write-misc-events`): the funding payments and ledger updates it can model, written
//! in the node's format (cited in `crate::node::misc`, written here independently of that parser).
//!
//! Fundings: every `--funding-every-blocks` blocks each open perp position pays or receives
//! `|szi| × mid × rate` (micro-USDC, truncated), longs paying when the rate is positive, in one `Funding` event
//! with a delta per position. Ledger updates: deposits, withdrawals, perp transfers between users and spot↔perp
//! class transfers, drawn at random. Every payment moves the same accounts the fills move, so
//! `clearinghouseState` stays consistent with what the files say. With `--write-liquidations`, each liquidation of
//! the block (`Market::liquidated`) is also the liquidated user's `liquidation` ledger update. Its own random
//! stream: turning it on leaves the book events unchanged.

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use super::accounts::micro;
use super::block::StreamBuf;
use super::coins::Kind;
use super::fmt::{decimal, node_time, signed_decimal, uint};
use super::market::Market;
use super::market::liquidations::Liquidated;

/// One ledger update in this many blocks, on average.
const LEDGER_EVERY: u32 = 3;
/// Funding rates are `k × 10^-7` with |k| up to this (±0.001%/h, a usual range).
const MAX_RATE_K: i64 = 100;
const RATE_DEC: u32 = 7;
/// Micro-USDC decimals.
const USDC_DEC: u32 = 6;

#[derive(Debug)]
pub struct MiscSim {
    rng: Xoshiro256PlusPlus,
    funding_every: u64,
}

impl MiscSim {
    pub fn new(seed: u64, funding_every: u64) -> MiscSim {
        MiscSim { rng: Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x6d69_7363), funding_every: funding_every.max(1) }
    }

    /// Adds block `height`'s misc events to `out`, moving the accounts they pay.
    pub fn block(&mut self, m: &mut Market, height: u64, block_time: i64, out: &mut StreamBuf) {
        if height % self.funding_every == 0 {
            self.funding(m, block_time, out);
        }
        if self.rng.random_range(0..LEDGER_EVERY) == 0 {
            self.ledger(m, height, block_time, out);
        }
        for l in std::mem::take(&mut m.liquidated) {
            liquidation(m, &l, block_time, out);
        }
    }

    fn funding(&mut self, m: &mut Market, block_time: i64, out: &mut StreamBuf) {
        let positions = m.accounts.perp_positions(&m.coins);
        if positions.is_empty() {
            return;
        }
        let k = self.rng.random_range(1..=MAX_RATE_K) * if self.rng.random() { 1 } else { -1 };
        let buf = out.begin();
        head(buf, block_time, &[0; 32]);
        buf.extend_from_slice(br#""Funding":{"deltas":["#);
        for (i, &(user, c, sz)) in positions.iter().enumerate() {
            let coin = &m.coins[c];
            let px = m.mid(c);
            let notional = micro(coin, i128::from(sz.unsigned_abs()) * i128::from(px));
            let paid = (notional * i128::from(k.abs()) / 10i128.pow(RATE_DEC)) as i64;
            // Longs pay a positive rate; shorts receive it.
            let usdc = if (sz > 0) == (k > 0) { -paid } else { paid };
            let dex = match coin.kind {
                Kind::Builder(d) => d,
                _ => "",
            };
            m.accounts.credit(user, dex, usdc);
            if i > 0 {
                buf.push(b',');
            }
            buf.extend_from_slice(br#"{"user":""#);
            buf.extend_from_slice(m.users[user as usize].as_bytes());
            buf.extend_from_slice(br#"","coin":""#);
            buf.extend_from_slice(coin.name.as_bytes());
            buf.extend_from_slice(br#"","funding_amount":""#);
            signed_decimal(buf, usdc, USDC_DEC);
            buf.extend_from_slice(br#"","szi":""#);
            signed_decimal(buf, sz, coin.sz_dec);
            buf.extend_from_slice(br#"","funding_rate":""#);
            signed_decimal(buf, k, RATE_DEC);
            buf.extend_from_slice(br#""}"#);
        }
        buf.extend_from_slice(b"]}}}");
        out.end();
    }

    fn ledger(&mut self, m: &mut Market, height: u64, block_time: i64, out: &mut StreamBuf) {
        let n = m.users.len() as u32;
        let (a, b) = (self.rng.random_range(0..n), self.rng.random_range(0..n));
        let usdc = self.rng.random_range(1..=5_000_000_000i64); // Up to 5,000 USDC.
        let fee = 1_000_000; // 1 USDC, the bridge's withdrawal fee.
        let hash: [u8; 32] = self.rng.random();
        let buf = out.begin();
        head(buf, block_time, &hash);
        buf.extend_from_slice(br#""LedgerUpdate":{"users":[""#);
        buf.extend_from_slice(m.users[a as usize].as_bytes());
        let kind = self.rng.random_range(0..4u8);
        if kind == 2 && a != b {
            buf.extend_from_slice(br#"",""#);
            buf.extend_from_slice(m.users[b as usize].as_bytes());
        }
        buf.extend_from_slice(br#""],"delta":{"type":"#);
        match kind {
            0 => {
                m.accounts.credit(a, "", usdc);
                buf.extend_from_slice(br#""deposit","usdc":""#);
                decimal(buf, usdc as u64, USDC_DEC);
                buf.push(b'"');
            }
            1 => {
                m.accounts.credit(a, "", -(usdc + fee));
                buf.extend_from_slice(br#""withdraw","usdc":""#);
                decimal(buf, usdc as u64, USDC_DEC);
                buf.extend_from_slice(br#"","nonce":"#);
                uint(buf, (block_time / 1_000_000) as u64 * 1000 + height % 1000);
                buf.extend_from_slice(br#","fee":""#);
                decimal(buf, fee as u64, USDC_DEC);
                buf.push(b'"');
            }
            2 if a != b => {
                m.accounts.credit(a, "", -usdc);
                m.accounts.credit(b, "", usdc);
                buf.extend_from_slice(br#""internalTransfer","usdc":""#);
                decimal(buf, usdc as u64, USDC_DEC);
                buf.extend_from_slice(br#"","user":""#);
                buf.extend_from_slice(m.users[a as usize].as_bytes());
                buf.extend_from_slice(br#"","destination":""#);
                buf.extend_from_slice(m.users[b as usize].as_bytes());
                buf.extend_from_slice(br#"","fee":"0.0""#);
            }
            _ => {
                let to_perp = self.rng.random::<bool>();
                let signed = if to_perp { usdc } else { -usdc };
                m.accounts.credit(a, "", signed);
                m.accounts.credit_spot(a, -signed);
                buf.extend_from_slice(br#""accountClassTransfer","usdc":""#);
                decimal(buf, usdc as u64, USDC_DEC);
                buf.extend_from_slice(if to_perp { br#"","toPerp":true"# } else { br#"","toPerp":false"# });
            }
        }
        buf.extend_from_slice(b"}}}}");
        out.end();
    }
}

/// The liquidated user's `liquidation` ledger update (fields: `crate::sim::market::liquidations`): the position's
/// notional at the mark, the perp account's USDC after the liquidation as its value, cross margin.
fn liquidation(m: &Market, l: &Liquidated, block_time: i64, out: &mut StreamBuf) {
    let coin = &m.coins[l.coin];
    let dex = match coin.kind {
        Kind::Builder(d) => d,
        _ => "",
    };
    let ntl = micro(coin, i128::from(l.closed) * i128::from(l.mark_px));
    let value = m.accounts.get(l.user).map_or(0, |a| a.usdc(dex));
    let mut hash = [0u8; 32];
    faster_hex::hex_decode(l.hash.trim_start_matches("0x").as_bytes(), &mut hash).expect("the sim's own hex");
    let buf = out.begin();
    head(buf, block_time, &hash);
    buf.extend_from_slice(br#""LedgerUpdate":{"users":[""#);
    buf.extend_from_slice(m.users[l.user as usize].as_bytes());
    buf.extend_from_slice(br#""],"delta":{"type":"liquidation","liquidatedNtlPos":""#);
    decimal(buf, ntl.max(0) as u64, USDC_DEC);
    buf.extend_from_slice(br#"","accountValue":""#);
    signed_decimal(buf, value, USDC_DEC);
    buf.extend_from_slice(br#"","leverageType":"Cross","liquidatedPositions":[{"coin":""#);
    buf.extend_from_slice(coin.name.as_bytes());
    buf.extend_from_slice(br#"","szi":""#);
    signed_decimal(buf, l.szi, coin.sz_dec);
    buf.extend_from_slice(br#""}]}}}}"#);
    out.end();
}

/// `{"time":…,"hash":…,"inner":{` of one event.
fn head(buf: &mut Vec<u8>, block_time: i64, hash: &[u8; 32]) {
    buf.extend_from_slice(br#"{"time":""#);
    node_time(buf, block_time);
    buf.extend_from_slice(br#"","hash":"0x"#);
    let mut hex = [0u8; 64];
    faster_hex::hex_encode(hash, &mut hex).expect("64 digits for 32 bytes");
    buf.extend_from_slice(&hex);
    buf.extend_from_slice(br#"","inner":{"#);
}

#[cfg(test)]
#[path = "misc_tests.rs"]
mod tests;
