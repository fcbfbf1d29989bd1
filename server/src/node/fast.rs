//! Diffs and fills lines read by their exact byte layout, for the hot path; serde_json stays the reference.
//!
//! Every l2Book and bbo frame waits for its block's diffs line to be parsed, and every trades and userFills frame
//! for its fills line. Through serde_json a live 66 kB diffs line took 0.3 ms and a 37 kB fills line 0.17 ms
//! (most of it string scanning and key matching): the largest single steps between the node's write and the
//! first frame (docs/benchmarks.md). The node writes every event with the same keys in the same order and no
//! whitespace, so a line can be read by comparing those bytes and decoding the values in place. A JSON library,
//! however fast (sonic-rs and simd-json included), tokenizes and matches every key; none reads a known layout by
//! comparison, so it is written here.
//!
//! It is only a fast path: anything off the node's exact layout (another key order, whitespace, an escape in a
//! string, a number serde would refuse or read as another type) gives `None`, and the caller parses the line with
//! serde, which accepts all of it and names the error. So where this returns a line, serde returns the same one
//! (tested on the capture, the simulator's lines and randomly changed lines).

use std::borrow::Cow;

use super::decimal::Fixed;
use super::event::{Address, HexBytes, Side};
use super::time::parse_node_time;
use super::wire::{DiffWire, FillBody, LineMeta, RawBookDiff};

/// Reads a diffs line (without its newline), handing each diff to `each` in line order; `None` when the line is
/// not laid out exactly as the node writes it.
pub(crate) fn diffs<'a, T>(line: &'a [u8], mut each: impl FnMut(DiffWire<'a>) -> T) -> Option<(LineMeta, Vec<T>)> {
    // About 150 bytes a diff: sized once for the line.
    events(line, 128, |c| Some(each(c.diff()?)))
}

/// Reads a fills line, handing each fill to `each` with its user and its object's exact bytes (userFills passes
/// them through); `None` when the line is not laid out exactly as the node writes it.
pub(crate) fn fills<'a, T>(
    line: &'a [u8],
    mut each: impl FnMut(Address, FillBody<'a>, RawFill<'a>) -> T,
) -> Option<(LineMeta, Vec<T>)> {
    events(line, 320, |c| {
        let (user, body, raw) = c.fill()?;
        Some(each(user, body, raw))
    })
}

/// A fill object as written, and whether it carries a `liquidation` object (seen while its keys are stepped over,
/// so the liquidations channel costs the fills parse no second look).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawFill<'a> {
    pub bytes: &'a [u8],
    pub liquidation: bool,
}

/// The envelope `{"local_time":"…","block_time":"…","block_number":N,"events":[…]}`, each event read by `event`.
fn events<'a, T>(
    line: &'a [u8],
    bytes_per_event: usize,
    mut event: impl FnMut(&mut Cursor<'a>) -> Option<T>,
) -> Option<(LineMeta, Vec<T>)> {
    let mut c = Cursor { s: line, at: 0 };
    c.lit(b"{\"local_time\":\"")?;
    let local_time = parse_node_time(c.text()?).ok()?;
    c.lit(b",\"block_time\":\"")?;
    let block_time = parse_node_time(c.text()?).ok()?;
    c.lit(b",\"block_number\":")?;
    let height = c.uint()?;
    c.lit(b",\"events\":[")?;
    let mut out = Vec::with_capacity(line.len() / bytes_per_event);
    if c.lit(b"]").is_none() {
        loop {
            out.push(event(&mut c)?);
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

/// The fill keys serde reads; any of them twice is an error there, so never skipped here.
const FILL_KEYS: [&[u8]; 9] = [b"coin", b"px", b"sz", b"side", b"time", b"hash", b"oid", b"crossed", b"tid"];

/// Lengths of an address and a transaction hash as the node writes them (`0x` and hex).
const ADDRESS_LEN: usize = 42;
const HASH_LEN: usize = 66;

/// How deep a skipped value may nest before the line is left to serde (the node's deepest is 1).
const SKIP_DEPTH: u32 = 8;

struct Cursor<'a> {
    s: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    /// One diff object, from its `{` to its `}`.
    fn diff(&mut self) -> Option<DiffWire<'a>> {
        self.lit(b"{\"user\":\"")?;
        let user = HexBytes::parse_bytes(self.string_sized(ADDRESS_LEN)?)?;
        self.lit(b",\"oid\":")?;
        let oid = self.uint()?;
        self.lit(b",\"coin\":\"")?;
        let coin = Cow::Borrowed(self.text()?);
        self.lit(b",\"side\":\"")?;
        let side = self.side()?;
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

    /// One `[user, {fill}]` pair: the fields the book and trades read are in the node's order; the ones between
    /// them and after them are checked and skipped, as serde skips them.
    fn fill(&mut self) -> Option<(Address, FillBody<'a>, RawFill<'a>)> {
        self.lit(b"[\"")?;
        let user = HexBytes::parse_bytes(self.string_sized(ADDRESS_LEN)?)?;
        self.lit(b",")?;
        let start = self.at;
        self.lit(b"{\"coin\":\"")?;
        let coin = Cow::Borrowed(self.text()?);
        self.lit(b",\"px\":\"")?;
        let px = self.fixed()?;
        self.lit(b",\"sz\":\"")?;
        let sz = self.fixed()?;
        self.lit(b",\"side\":\"")?;
        let side = self.side()?;
        self.lit(b",\"time\":")?;
        let time = i64::try_from(self.uint()?).ok()?;
        for key in [&b",\"startPosition\":\""[..], b",\"dir\":\"", b",\"closedPnl\":\""] {
            self.lit(key)?;
            self.text()?;
        }
        self.lit(b",\"hash\":\"")?;
        let hash = HexBytes::parse_bytes(self.string_sized(HASH_LEN)?)?;
        self.lit(b",\"oid\":")?;
        let oid = self.uint()?;
        self.lit(b",\"crossed\":")?;
        let crossed = self.bool()?;
        self.lit(b",\"fee\":\"")?;
        self.text()?;
        self.lit(b",\"tid\":")?;
        let tid = self.uint()?;
        let mut liquidation = false;
        while self.lit(b"}").is_none() {
            self.lit(b",\"")?;
            let key = self.text()?;
            if FILL_KEYS.contains(&key.as_bytes()) {
                return None;
            }
            self.lit(b":")?;
            liquidation |= key == "liquidation" && self.s.get(self.at) == Some(&b'{');
            self.skip_value(0)?;
        }
        let raw = RawFill { bytes: &self.s[start..self.at], liquidation };
        self.lit(b"]")?;
        Some((user, FillBody { coin, px, sz, side, time, hash, oid, crossed, tid }, raw))
    }

    /// Steps over any JSON value of the kinds the node writes: a string, an integer, `true`, `false`, `null`,
    /// or an object or array of those. Anything else (a fraction or exponent, an escape) is left to serde.
    fn skip_value(&mut self, depth: u32) -> Option<()> {
        if depth > SKIP_DEPTH {
            return None;
        }
        match *self.s.get(self.at)? {
            b'"' => {
                self.at += 1;
                self.text().map(drop)
            }
            b'{' => self.skip_list(b'}', |c| {
                c.lit(b"\"")?;
                c.text()?;
                c.lit(b":")?;
                c.skip_value(depth + 1)
            }),
            b'[' => self.skip_list(b']', |c| c.skip_value(depth + 1)),
            b't' => self.lit(b"true"),
            b'f' => self.lit(b"false"),
            b'n' => self.lit(b"null"),
            b'-' => {
                self.at += 1;
                self.uint().map(drop)
            }
            _ => self.uint().map(drop),
        }
    }

    /// An object or array whose opening byte is next: its items (each read by `item`) up to `close`.
    fn skip_list(&mut self, close: u8, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.at += 1;
        if self.lit(&[close]).is_some() {
            return Some(());
        }
        loop {
            item(self)?;
            if self.lit(b",").is_none() {
                return self.lit(&[close]);
            }
        }
    }

    /// Steps over `lit` if the line continues with it. Marked inline, so that each call site compares a literal of
    /// known length in place: left a call, the comparison went through `memcmp` for every key of every event.
    #[inline]
    fn lit(&mut self, lit: &[u8]) -> Option<()> {
        let end = self.at + lit.len();
        (self.s.get(self.at..end)? == lit).then(|| self.at = end)
    }

    /// `string` for a string the node always writes `len` bytes long (an address, a hash): the closing quote is
    /// looked for where it must be and the bytes before it checked all at once, which the compiler vectorises.
    /// Any other length goes to `string`, whose byte loop this avoids for the longest strings of a line.
    #[inline]
    #[allow(clippy::needless_bitwise_bool)] // No short circuit: a loop without an early exit is vectorised.
    fn string_sized(&mut self, len: usize) -> Option<&'a [u8]> {
        let rest = &self.s[self.at..];
        if let (Some(body), Some(b'"')) = (rest.get(..len), rest.get(len))
            && body.iter().fold(true, |ok, &b| ok & (b != b'"') & (b != b'\\') & (b >= 0x20))
        {
            self.at += len + 1;
            return Some(body);
        }
        self.string()
    }

    /// The bytes of a string whose opening quote was read, stepping past its closing quote. A backslash (an
    /// escape, which serde would decode) or a control character (which serde refuses) gives `None`. Strings here
    /// are short (a hash is the longest), so a plain loop beats a vectorised search's set-up.
    fn string(&mut self) -> Option<&'a [u8]> {
        let rest = &self.s[self.at..];
        let len = rest.iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
        if rest[len] != b'"' {
            return None;
        }
        self.at += len + 1;
        Some(&rest[..len])
    }

    /// A string read as text (UTF-8 checked): coins, times, and the fill fields only passed through.
    /// Addresses, hashes, sides and decimals are decoded from their bytes by parsers that take only ASCII.
    fn text(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.string()?).ok()
    }

    /// A decimal string's value, past its closing quote.
    fn fixed(&mut self) -> Option<Fixed> {
        Fixed::parse_bytes(self.string()?).ok()
    }

    /// `"B"` or `"A"`, past the closing quote.
    fn side(&mut self) -> Option<Side> {
        match self.string()? {
            b"B" => Some(Side::Bid),
            b"A" => Some(Side::Ask),
            _ => None,
        }
    }

    fn bool(&mut self) -> Option<bool> {
        if self.lit(b"true").is_some() { Some(true) } else { self.lit(b"false").map(|()| false) }
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
#[path = "fast_tests.rs"]
mod tests;
