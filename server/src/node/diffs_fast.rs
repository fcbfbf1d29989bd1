//! A diffs line read by its exact byte layout, for the books' hot path; serde_json stays the reference.
//!
//! Every l2Book and bbo frame waits for its block's diffs line to be parsed. Through serde_json that took 0.3 ms
//! for a live 66 kB line (most of it string scanning and key matching): the largest single step between the
//! node's write and the first frame (docs/benchmarks.md). The node writes every diff with the same keys in the
//! same order and no whitespace, so the line can be read by comparing those bytes and decoding the values in
//! place. A JSON library, however fast (sonic-rs and simd-json included), tokenizes and matches every key; none
//! reads a known layout by comparison, so it is written here.
//!
//! It is only a fast path: anything off the node's exact layout (another key order, whitespace, an escape in a
//! string, an unknown key, a number serde would refuse) gives `None`, and the caller parses the line with serde,
//! which accepts all of it and names the error. So where this returns a line, serde returns the same one (tested
//! on the capture, the simulator's lines and mutated lines).

use std::borrow::Cow;

use super::decimal::Fixed;
use super::event::{HexBytes, Side};
use super::line::LineMeta;
use super::time::parse_node_time;
use super::wire::{DiffWire, RawBookDiff};

/// Reads `line` (without its newline), handing each diff to `each` in line order; `None` when the line is not
/// laid out exactly as the node writes it.
pub(crate) fn parse<'a, T>(line: &'a [u8], mut each: impl FnMut(DiffWire<'a>) -> T) -> Option<(LineMeta, Vec<T>)> {
    let mut c = Cursor { s: line, at: 0 };
    c.lit(b"{\"local_time\":\"")?;
    let local_time = parse_node_time(c.text()?).ok()?;
    c.lit(b",\"block_time\":\"")?;
    let block_time = parse_node_time(c.text()?).ok()?;
    c.lit(b",\"block_number\":")?;
    let height = c.uint()?;
    c.lit(b",\"events\":[")?;
    // About 150 bytes a diff: sized once for the line.
    let mut out = Vec::with_capacity(line.len() / 128);
    if c.lit(b"]").is_none() {
        loop {
            out.push(each(c.diff()?));
            if c.lit(b",").is_none() {
                c.lit(b"]")?;
                break;
            }
        }
    }
    c.lit(b"}")?;
    // serde_json accepts trailing whitespace, and only that.
    if !line[c.at..].iter().all(|b| matches!(b, b' ' | b'\n' | b'\r' | b'\t')) {
        return None;
    }
    Some((LineMeta { height, block_time, local_time }, out))
}

struct Cursor<'a> {
    s: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    /// One diff object, from its `{` to its `}`.
    fn diff(&mut self) -> Option<DiffWire<'a>> {
        self.lit(b"{\"user\":\"")?;
        let user = HexBytes::parse_bytes(self.string()?)?;
        self.lit(b",\"oid\":")?;
        let oid = self.uint()?;
        self.lit(b",\"coin\":\"")?;
        let coin = Cow::Borrowed(self.text()?);
        self.lit(b",\"side\":\"")?;
        let side = match self.string()? {
            b"B" => Side::Bid,
            b"A" => Side::Ask,
            _ => return None,
        };
        self.lit(b",\"px\":\"")?;
        let px = self.fixed()?;
        self.lit(b",\"raw_book_diff\":")?;
        let raw_book_diff = if self.lit(b"\"remove\"}").is_some() {
            return Some(DiffWire { user, oid, coin, side, px, raw_book_diff: RawBookDiff::Remove });
        } else if self.lit(b"{\"new\":{\"sz\":\"").is_some() {
            let sz = self.fixed()?;
            let insert_before = if self.lit(b",\"insertBefore\":").is_some() { Some(self.uint()?) } else { None };
            RawBookDiff::New { sz, insert_before }
        } else {
            self.lit(b"{\"update\":{\"origSz\":\"")?;
            let orig_sz = self.fixed()?;
            self.lit(b",\"newSz\":\"")?;
            let new_sz = self.fixed()?;
            RawBookDiff::Update { orig_sz, new_sz }
        };
        self.lit(b"}}}")?;
        Some(DiffWire { user, oid, coin, side, px, raw_book_diff })
    }

    /// Steps over `lit` if the line continues with it.
    fn lit(&mut self, lit: &[u8]) -> Option<()> {
        let end = self.at + lit.len();
        (self.s.get(self.at..end)? == lit).then(|| self.at = end)
    }

    /// The bytes of a string whose opening quote was read, stepping past its closing quote. A backslash (an
    /// escape, which serde would decode) or a control character (which serde refuses) gives `None`. Strings here
    /// are short (an address is the longest), so a plain loop beats a vectorised search's set-up.
    fn string(&mut self) -> Option<&'a [u8]> {
        let rest = &self.s[self.at..];
        let len = rest.iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
        if rest[len] != b'"' {
            return None;
        }
        self.at += len + 1;
        Some(&rest[..len])
    }

    /// A string read as text (UTF-8 checked): the coin and the envelope's times. Addresses, sides and decimals
    /// are decoded from their bytes by parsers that take only ASCII.
    fn text(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.string()?).ok()
    }

    /// A decimal string's value, past its closing quote.
    fn fixed(&mut self) -> Option<Fixed> {
        Fixed::parse_bytes(self.string()?).ok()
    }

    /// An unsigned JSON integer as serde reads a `u64`: digits, no leading zero, no fraction or exponent (the next
    /// literal refuses those), no overflow.
    fn uint(&mut self) -> Option<u64> {
        let start = self.at;
        let mut v: u64 = 0;
        while let Some(&d) = self.s.get(self.at).filter(|d| d.is_ascii_digit()) {
            v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
            self.at += 1;
        }
        let digits = self.at - start;
        (digits == 1 || (digits > 1 && self.s[start] != b'0')).then_some(v)
    }
}

#[cfg(test)]
#[path = "diffs_fast_tests.rs"]
mod tests;
