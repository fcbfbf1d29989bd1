//! The stored form of one block's fills: every `[user, fill]` pair of the block in the node's order, each fill
//! object in `compact` form, the whole compressed with zstd. Exactly the node's bytes come back.
//!
//! Why a block at a time and zstd: a block's fills repeat themselves (both sides of a trade share coin, px, sz,
//! time, hash and tid; one order's fills share the user and oid), which a compressor over the whole block removes
//! and a per-fill encoding cannot. zstd (the reference C library through the `zstd` crate) compresses several
//! times better than lz4 for about the same speed at low levels, and decompresses fast enough that a userFills
//! snapshot reading a few hundred blocks costs milliseconds.

use super::compact;
use super::schema::{get_varint, put_varint};

/// First byte of a value: its format (zstd frame of the records below).
const ZSTD: u8 = 1;

/// zstd's level: 3 is its default; higher levels cost the writer CPU on every block for a few percent less.
const LEVEL: i32 = 3;

/// A decoded block is refused beyond this (a corrupt length cannot make the reader allocate without bound).
const MAX_BLOCK_BYTES: usize = 256 << 20;

/// The stored value of a block's fills: per fill the user's 20 bytes, the length of its compact form, the form.
pub fn encode<'a>(fills: impl IntoIterator<Item = (&'a [u8; 20], &'a str)>) -> Vec<u8> {
    let mut raw = Vec::new();
    for (user, json) in fills {
        let c = compact::encode(json);
        raw.extend_from_slice(user);
        put_varint(&mut raw, c.len() as u128);
        raw.extend_from_slice(&c);
    }
    let mut out = vec![ZSTD];
    // Compressing an in-memory buffer fails only on allocation; an empty frame then decodes to no fills.
    out.extend(zstd::bulk::compress(&raw, LEVEL).unwrap_or_default());
    out
}

/// The block's fills of `user` (every user's: `None`), in the node's order; `None` for a value `encode` did not
/// make.
pub fn decode(stored: &[u8], user: Option<&[u8; 20]>) -> Option<Vec<([u8; 20], String)>> {
    let (&ZSTD, frame) = stored.split_first()? else { return None };
    let raw = if frame.is_empty() {
        Vec::new()
    } else {
        let mut d = zstd::bulk::Decompressor::new().ok()?;
        d.decompress(frame, MAX_BLOCK_BYTES).ok()?
    };
    let mut rest = raw.as_slice();
    let mut out = Vec::new();
    while !rest.is_empty() {
        let who: [u8; 20] = rest.get(..20)?.try_into().ok()?;
        rest = &rest[20..];
        let n = usize::try_from(get_varint(&mut rest)?).ok()?;
        let body = rest.get(..n)?;
        rest = &rest[n..];
        if user.is_none_or(|u| *u == who) {
            out.push((who, compact::decode(body)?));
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocks_fills_come_back_byte_for_byte_and_by_user() {
        let (a, b) = ([0xab; 20], [7u8; 20]);
        let fa = r#"{"coin":"BTC","px":"81308.0","sz":"0.00033","side":"B","time":1778002753024,"startPosition":"0.20486","dir":"Open Long","closedPnl":"0.0","hash":"0x2222138cc516e3fe746c0411dd733f02e60086f43205af2ae37c93f6a792430b","oid":412036451245,"crossed":true,"fee":"0.010866","tid":316059956208702,"feeToken":"USDC","twapId":null}"#;
        let fb = r#"{"coin":"BTC","px":"81308.0","sz":"0.00033","side":"A","time":1778002753024,"startPosition":"-0.29602","dir":"Open Short","closedPnl":"0.0","hash":"0x2222138cc516e3fe746c0411dd733f02e60086f43205af2ae37c93f6a792430b","oid":412036231803,"crossed":false,"fee":"-0.000804","tid":316059956208702,"feeToken":"USDC","twapId":null}"#;
        let odd = r#"{"coin":"xyz:ÜBER","px":"1.0"}"#;
        let list = [(&a, fa), (&b, fb), (&a, odd)];
        let stored = encode(list.iter().map(|(u, f)| (*u, *f)));
        let all = decode(&stored, None).unwrap();
        assert_eq!(all, list.iter().map(|(u, f)| (**u, f.to_string())).collect::<Vec<_>>());
        let mine = decode(&stored, Some(&a)).unwrap();
        assert_eq!(mine, vec![(a, fa.to_string()), (a, odd.to_string())]);
        assert!(stored.len() * 2 < fa.len() + fb.len(), "{} bytes: under half the JSON", stored.len());
        assert_eq!(decode(&encode(std::iter::empty()), None), Some(Vec::new()));
        assert_eq!(decode(&stored[..stored.len() - 3], None), None, "a cut value is refused");
        assert_eq!(decode(b"{}", None), None);
    }
}
