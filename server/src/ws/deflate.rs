//! permessage-deflate (RFC 7692): negotiating it, compressing outbound messages and inflating inbound ones.
//!
//! Outbound, the server compresses each shared frame once, with no context takeover, and sends the same bytes to
//! every subscriber that negotiated compression: no message may depend on what one connection saw before. That is
//! why the answer always carries `server_no_context_takeover` and why a smaller `server_max_window_bits` is declined.
//!
//! Inbound, tungstenite rejects every frame with RSV1 set, so compressed client messages are inflated by
//! [`InflateLayer`], a thin layer beneath it that rewrites them as plain frames. It is written by hand because no
//! maintained crate provides permessage-deflate for tokio-tungstenite.

use bytes::Bytes;
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

/// What a sync flush ends with; RFC 7692 strips it from every message and the receiver puts it back.
const TAIL: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

/// Inflate output is produced this much at a time, so a bomb is caught within one chunk of the cap.
const CHUNK: usize = 16 * 1024;

/// The agreed parameters of one connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Agreed {
    /// The `Sec-WebSocket-Extensions` response header value, e.g. "permessage-deflate; server_no_context_takeover".
    pub response: String,
    /// Whether the client promised to reset its compression context per message (it offered
    /// client_no_context_takeover).
    pub client_no_context_takeover: bool,
}

/// Picks the first acceptable permessage-deflate offer from the request's `Sec-WebSocket-Extensions` header values
/// (there may be several header lines, each a comma-separated list of offers). None when there is no acceptable offer.
pub fn negotiate<'a>(header_values: impl IntoIterator<Item = &'a str>) -> Option<Agreed> {
    header_values.into_iter().flat_map(|value| value.split(',')).find_map(accept_offer)
}

/// The parameters one offer named, so that a repeated one declines the offer.
// One flag per parameter RFC 7692 defines.
#[allow(clippy::struct_excessive_bools)]
#[derive(Default)]
struct Seen {
    server_no_context_takeover: bool,
    client_no_context_takeover: bool,
    client_max_window_bits: bool,
    server_max_window_bits: bool,
}

/// The answer to one offer, or None when we cannot accept it as offered.
fn accept_offer(offer: &str) -> Option<Agreed> {
    let mut parts = offer.split(';').map(str::trim);
    if !parts.next()?.eq_ignore_ascii_case("permessage-deflate") {
        return None;
    }
    let mut seen = Seen::default();
    for param in parts.filter(|param| !param.is_empty()) {
        if std::mem::replace(param_flag(&mut seen, param)?, true) {
            return None;
        }
    }
    let mut response = String::from("permessage-deflate; server_no_context_takeover");
    if seen.client_no_context_takeover {
        response.push_str("; client_no_context_takeover");
    }
    Some(Agreed { response, client_no_context_takeover: seen.client_no_context_takeover })
}

/// The flag recording an acceptable parameter; None for an unknown name or a value we cannot honour.
fn param_flag<'s>(seen: &'s mut Seen, param: &str) -> Option<&'s mut bool> {
    let (name, value) = match param.split_once('=') {
        Some((name, value)) => (name.trim(), Some(unquote(value.trim()))),
        None => (param, None),
    };
    match name.to_ascii_lowercase().as_str() {
        "server_no_context_takeover" if value.is_none() => Some(&mut seen.server_no_context_takeover),
        "client_no_context_takeover" if value.is_none() => Some(&mut seen.client_no_context_takeover),
        // Whatever the client limits its own window to, our 15-bit inflater reads it.
        "client_max_window_bits" if value.is_none_or(|bits| window_bits(bits).is_some()) => {
            Some(&mut seen.client_max_window_bits)
        }
        // Shared frames are compressed with a 15-bit window, so only 15 can be honoured.
        "server_max_window_bits" if value.and_then(window_bits) == Some(15) => Some(&mut seen.server_max_window_bits),
        _ => None,
    }
}

/// A parameter value without the quotes RFC 7692 allows around it.
fn unquote(value: &str) -> &str {
    value.strip_prefix('"').and_then(|inner| inner.strip_suffix('"')).unwrap_or(value)
}

/// A window size as RFC 7692 writes it: 8 to 15, no sign, no leading zero.
fn window_bits(value: &str) -> Option<u8> {
    if value.starts_with('0') || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value.parse().ok().filter(|bits| (8..=15).contains(bits))
}

/// Compresses one whole message payload for sending with RSV1 set: raw deflate (no zlib header), a fresh context
/// each call (no context takeover), sync flush, with the trailing 0x00 0x00 0xff 0xff removed (RFC 7692 7.2.1).
pub fn deflate_message(payload: &[u8], level: u32) -> Bytes {
    let mut compress = Compress::new(Compression::new(level.min(9)), false);
    let mut out = Vec::with_capacity(payload.len() / 2 + 64);
    loop {
        let rest = payload.get(progress(0, compress.total_in())..).unwrap_or_default();
        // Raw deflate into a buffer we grow has no failure mode; an error would be a bug in flate2.
        compress.compress_vec(rest, &mut out, FlushCompress::Sync).expect("raw deflate into a growing buffer");
        // Room left over means the flush is complete; a full buffer may hide more output.
        if out.len() < out.capacity() && progress(0, compress.total_in()) == payload.len() {
            break;
        }
        out.reserve(out.capacity().max(64));
    }
    if out.ends_with(&TAIL) {
        out.truncate(out.len() - TAIL.len());
    }
    Bytes::from(out)
}

/// How far a flate2 counter moved, as a length.
fn progress(before: u64, after: u64) -> usize {
    usize::try_from(after.saturating_sub(before)).unwrap_or(usize::MAX)
}

/// Why a compressed message could not be inflated.
#[derive(Debug, thiserror::Error)]
pub enum InflateError {
    /// The message would inflate past the connection's message size limit (a decompression bomb, or just too big).
    #[error("compressed message inflates to more than {max} bytes")]
    TooLarge {
        /// The limit it passed.
        max: usize,
    },
    /// The payload is not valid deflate data.
    #[error("compressed message is not valid deflate data: {0}")]
    Corrupt(String),
}

/// Inflates compressed message payloads of one connection, keeping the LZ77 window across messages unless the
/// client promised no context takeover.
#[derive(Debug)]
pub struct Inflater {
    decompress: Decompress,
    reset_each_message: bool,
    max_message: usize,
}

impl Inflater {
    /// An inflater for one connection; `max_message` caps each inflated message.
    pub fn new(client_no_context_takeover: bool, max_message: usize) -> Inflater {
        Inflater { decompress: Decompress::new(false), reset_each_message: client_no_context_takeover, max_message }
    }

    /// Appends 0x00 0x00 0xff 0xff and inflates; Err when the result would exceed max_message bytes
    /// (a decompression bomb: stop inflating as soon as the cap is passed, never allocate past it) or the data is
    /// invalid.
    pub fn inflate(&mut self, payload: &[u8]) -> Result<Vec<u8>, InflateError> {
        let mut out = Vec::with_capacity(payload.len().saturating_mul(4).min(self.max_message));
        let result = match self.feed(payload, &mut out) {
            Ok(false) => self.feed(&TAIL, &mut out),
            other => other,
        };
        // A final block ends the deflate stream and a failed one cannot go on: either way the next starts afresh.
        if self.reset_each_message || !matches!(result, Ok(false)) {
            self.decompress.reset(false);
        }
        result.map(|_| out)
    }

    /// Inflates `input` onto `out`; Ok(true) when the deflate stream ended with a final block.
    fn feed(&mut self, mut input: &[u8], out: &mut Vec<u8>) -> Result<bool, InflateError> {
        let mut chunk = [0u8; CHUNK];
        loop {
            let (before_in, before_out) = (self.decompress.total_in(), self.decompress.total_out());
            let status = self
                .decompress
                .decompress(input, &mut chunk, FlushDecompress::Sync)
                .map_err(|e| InflateError::Corrupt(e.to_string()))?;
            let used = progress(before_in, self.decompress.total_in());
            let made = progress(before_out, self.decompress.total_out());
            input = input.get(used..).unwrap_or_default();
            push_capped(out, chunk.get(..made).unwrap_or_default(), self.max_message)?;
            if status == Status::StreamEnd {
                return Ok(true);
            }
            // Input used up with output room to spare: nothing is held back.
            if made < CHUNK && input.is_empty() {
                return Ok(false);
            }
            if used == 0 && made == 0 {
                return Err(InflateError::Corrupt("the inflater stopped making progress".into()));
            }
        }
    }
}

/// Appends to `out` unless that would pass `max`, growing it no further than `max`.
fn push_capped(out: &mut Vec<u8>, bytes: &[u8], max: usize) -> Result<(), InflateError> {
    let len = out.len() + bytes.len();
    if len > max {
        return Err(InflateError::TooLarge { max });
    }
    if len > out.capacity() {
        out.reserve_exact(len.max(out.capacity().saturating_mul(2)).min(max) - out.len());
    }
    out.extend_from_slice(bytes);
    Ok(())
}

mod layer;
pub use layer::InflateLayer;

#[cfg(test)]
#[path = "deflate_tests.rs"]
mod tests;
