//! permessage-deflate (RFC 7692): negotiating it, compressing outbound messages and inflating inbound ones.
//!
//! Outbound, the server compresses each shared frame once, with no context takeover, and sends the same bytes to
//! every subscriber that negotiated compression: no message may depend on what one connection saw before. That is
//! why the answer always carries `server_no_context_takeover` and why a smaller `server_max_window_bits` is declined.
//!
//! Inbound, tungstenite rejects every frame with RSV1 set, so compressed client messages are inflated by
//! [`InflateLayer`], a thin layer beneath it that rewrites them as plain frames. It is written by hand because no
//! maintained crate provides permessage-deflate for tokio-tungstenite.

use std::fmt;
use std::io;
use std::ops::Range;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// What a sync flush ends with; RFC 7692 strips it from every message and the receiver puts it back.
const TAIL: [u8; 4] = [0x00, 0x00, 0xff, 0xff];

/// Inflate output is produced this much at a time, so a bomb is caught within one chunk of the cap.
const CHUNK: usize = 16 * 1024;

/// Size of the layer's read buffer; a frame header (at most 14 bytes) always fits after compaction.
const READ_BUF: usize = 16 * 1024;

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

/// One frame header (RFC 6455 5.2).
#[derive(Clone, Copy, Debug)]
struct Header {
    fin: bool,
    rsv1: bool,
    /// RSV2 or RSV3, which no extension we negotiate defines.
    rsv23: bool,
    opcode: u8,
    mask: Option<[u8; 4]>,
    len: u64,
    /// Bytes the header itself takes.
    size: usize,
}

/// The header at the start of `bytes`, or None while it is incomplete.
fn parse_header(bytes: &[u8]) -> Option<Header> {
    let (&b0, &b1) = (bytes.first()?, bytes.get(1)?);
    let (len, mut size) = match b1 & 0x7f {
        126 => (u64::from(u16::from_be_bytes(bytes.get(2..4)?.try_into().ok()?)), 4),
        127 => (u64::from_be_bytes(bytes.get(2..10)?.try_into().ok()?), 10),
        short => (u64::from(short), 2),
    };
    let mut mask = None;
    if b1 & 0x80 != 0 {
        mask = Some(bytes.get(size..size + 4)?.try_into().ok()?);
        size += 4;
    }
    let (fin, rsv1, rsv23) = (b0 & 0x80 != 0, b0 & 0x40 != 0, b0 & 0x30 != 0);
    Some(Header { fin, rsv1, rsv23, opcode: b0 & 0x0f, mask, len, size })
}

/// Appends the header of a whole (FIN) frame; a masked one gets the all-zero key, which leaves the payload as is.
fn push_header(out: &mut Vec<u8>, opcode: u8, masked: bool, len: usize) {
    let mask_bit = if masked { 0x80 } else { 0 };
    out.push(0x80 | opcode);
    match len {
        0..=125 => out.push(mask_bit | len as u8),
        126..=0xffff => {
            out.push(mask_bit | 126);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        }
        _ => {
            out.push(mask_bit | 127);
            out.extend_from_slice(&(len as u64).to_be_bytes());
        }
    }
    if masked {
        out.extend_from_slice(&[0; 4]);
    }
}

/// A compressed message being collected, frame by frame.
#[derive(Debug)]
struct Compressed {
    opcode: u8,
    /// Whether its first frame was masked, which the rebuilt frame repeats.
    masked: bool,
    /// The unmasked compressed payload so far.
    data: Vec<u8>,
    /// Payload bytes of the current frame still to come.
    left: usize,
    /// The current frame's mask key (zero when unmasked) and how far into its payload we are.
    key: [u8; 4],
    offset: usize,
    /// Whether the current frame ends the message.
    fin: bool,
}

impl Compressed {
    fn new(opcode: u8, masked: bool) -> Compressed {
        Compressed { opcode, masked, data: Vec::new(), left: 0, key: [0; 4], offset: 0, fin: false }
    }

    /// Appends payload bytes of the current frame, unmasked.
    fn collect(&mut self, bytes: &[u8]) {
        let (key, offset) = (self.key, self.offset);
        self.data.extend(bytes.iter().enumerate().map(|(i, b)| b ^ key[(offset + i) % 4]));
        self.offset += bytes.len();
        self.left -= bytes.len();
    }
}

/// An AsyncRead + AsyncWrite wrapper (tokio traits) around the raw connection stream, placed beneath
/// `tokio_tungstenite::WebSocketStream::from_raw_socket`. Writes pass through untouched. Reads parse WebSocket
/// frames; frames without RSV1 pass through byte for byte as they arrive, while a compressed message is collected,
/// inflated and handed on as one plain frame. Control frames between its fragments pass through at once.
/// RSV1 where it cannot be, RSV2/RSV3, or an over-large or invalid compressed message fail the read with
/// `InvalidData`. With no [`Inflater`] (compression not negotiated) nothing is parsed and tungstenite rejects RSV1
/// itself.
pub struct InflateLayer<S> {
    inner: S,
    inflater: Option<Inflater>,
    /// Bytes read from `inner` and not yet handled: `input[start..end]`.
    input: Box<[u8]>,
    start: usize,
    end: usize,
    /// Bytes for the reader (passed-through headers, rebuilt frames), handed on first: `output[sent..]`.
    output: Vec<u8>,
    sent: usize,
    /// Payload bytes of a passed-through frame still to hand on.
    passing: u64,
    /// The compressed message being collected.
    message: Option<Compressed>,
}

impl<S> fmt::Debug for InflateLayer<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InflateLayer")
            .field("inflater", &self.inflater)
            .field("buffered", &(self.end - self.start))
            .field("passing", &self.passing)
            .field("collecting", &self.message.as_ref().map(|m| m.data.len()))
            .finish_non_exhaustive()
    }
}

impl<S> InflateLayer<S> {
    /// Wraps `inner`; `inflater` is None when compression was not negotiated.
    pub fn new(inner: S, inflater: Option<Inflater>) -> InflateLayer<S> {
        let input = if inflater.is_some() { vec![0; READ_BUF].into_boxed_slice() } else { Box::default() };
        InflateLayer {
            inner,
            inflater,
            input,
            start: 0,
            end: 0,
            output: Vec::new(),
            sent: 0,
            passing: 0,
            message: None,
        }
    }

    /// Copies bytes that are ready without reading `inner`; false when there are none.
    fn hand_on(&mut self, buf: &mut ReadBuf<'_>) -> bool {
        if self.sent < self.output.len() {
            let n = (self.output.len() - self.sent).min(buf.remaining());
            buf.put_slice(&self.output[self.sent..self.sent + n]);
            self.sent += n;
            if self.sent == self.output.len() {
                self.clear_output();
            }
            return true;
        }
        if self.passing > 0 && self.start < self.end {
            let n = at_most(self.passing, (self.end - self.start).min(buf.remaining()));
            buf.put_slice(&self.input[self.start..self.start + n]);
            self.start += n;
            self.passing -= n as u64;
            return true;
        }
        false
    }

    /// Empties the output, dropping a large allocation left by a big inflated message.
    fn clear_output(&mut self) {
        if self.output.capacity() > 4 * READ_BUF {
            self.output = Vec::new();
        } else {
            self.output.clear();
        }
        self.sent = 0;
    }

    /// Handles buffered input: collects compressed payload, or routes one frame header. False when it needs more.
    fn step(&mut self) -> io::Result<bool> {
        if let Some(message) = self.message.as_mut().filter(|m| m.left > 0) {
            if self.start == self.end {
                return Ok(false);
            }
            let n = message.left.min(self.end - self.start);
            message.collect(&self.input[self.start..self.start + n]);
            self.start += n;
            self.finish_if_complete()?;
            return Ok(true);
        }
        let Some(header) = parse_header(&self.input[self.start..self.end]) else { return Ok(false) };
        let raw = self.start..self.start + header.size;
        self.start += header.size;
        self.route(header, raw)?;
        Ok(true)
    }

    /// Decides what becomes of a frame: collected, passed through, or refused.
    fn route(&mut self, header: Header, raw: Range<usize>) -> io::Result<()> {
        let collecting = self.message.is_some();
        match header.opcode {
            _ if header.rsv23 => Err(invalid("frame has RSV2 or RSV3 set, which no negotiated extension defines")),
            8..=15 if header.rsv1 => Err(invalid("control frame has RSV1 set")),
            0 if header.rsv1 => Err(invalid("continuation frame has RSV1 set; only a message's first frame may")),
            1 | 2 if collecting => Err(invalid("new data frame before the compressed message in progress ended")),
            0 if collecting => self.collect_frame(header),
            1 | 2 if header.rsv1 => {
                self.message = Some(Compressed::new(header.opcode, header.mask.is_some()));
                self.collect_frame(header)
            }
            _ if header.rsv1 => Err(invalid("frame with a reserved opcode has RSV1 set")),
            _ => {
                self.output.extend_from_slice(&self.input[raw]);
                self.passing = header.len;
                Ok(())
            }
        }
    }

    /// Starts collecting the payload of one frame of the compressed message, within the size cap.
    fn collect_frame(&mut self, header: Header) -> io::Result<()> {
        let max = self.inflater.as_ref().map_or(0, |inflater| inflater.max_message);
        let Some(message) = self.message.as_mut() else { return Ok(()) };
        let room = max.saturating_sub(message.data.len());
        let Some(len) = usize::try_from(header.len).ok().filter(|&len| len <= room) else {
            return Err(invalid(format!("compressed message is larger than {max} bytes")));
        };
        message.data.reserve_exact(len);
        (message.left, message.key, message.offset, message.fin) =
            (len, header.mask.unwrap_or_default(), 0, header.fin);
        self.finish_if_complete()
    }

    /// Once the last frame is in, inflates the message and queues it as one plain frame.
    fn finish_if_complete(&mut self) -> io::Result<()> {
        if !self.message.as_ref().is_some_and(|m| m.left == 0 && m.fin) {
            return Ok(());
        }
        let (Some(message), Some(inflater)) = (self.message.take(), self.inflater.as_mut()) else { return Ok(()) };
        let payload = inflater.inflate(&message.data).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        push_header(&mut self.output, message.opcode, message.masked, payload.len());
        self.output.extend_from_slice(&payload);
        Ok(())
    }

    /// Whether the stream may end here: only between frames, with nothing half collected.
    fn at_eof(&self) -> io::Result<()> {
        if self.start == self.end && self.message.is_none() {
            Ok(())
        } else {
            Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed in the middle of a frame"))
        }
    }
}

impl<S: AsyncRead + Unpin> InflateLayer<S> {
    /// Streams a passed-through payload straight from `inner`, never reading past the frame's end.
    fn poll_pass(&mut self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let n = at_most(self.passing, buf.remaining());
        let mut part = ReadBuf::new(buf.initialize_unfilled_to(n));
        ready!(Pin::new(&mut self.inner).poll_read(cx, &mut part))?;
        let got = part.filled().len();
        buf.advance(got);
        self.passing -= got as u64;
        // Nothing read is the end of the stream inside a frame, which tungstenite reports.
        Poll::Ready(Ok(()))
    }

    /// Reads more of `inner` into the input buffer; Ok(false) at the end of the stream.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<bool>> {
        // Only called with less than a header buffered, so this moves at most 13 bytes.
        self.input.copy_within(self.start..self.end, 0);
        (self.start, self.end) = (0, self.end - self.start);
        let mut free = ReadBuf::new(&mut self.input[self.end..]);
        ready!(Pin::new(&mut self.inner).poll_read(cx, &mut free))?;
        let got = free.filled().len();
        self.end += got;
        Poll::Ready(Ok(got > 0))
    }
}

/// `n`, or `limit` when that is smaller.
fn at_most(limit: u64, n: usize) -> usize {
    usize::try_from(limit).map_or(n, |limit| limit.min(n))
}

fn invalid(message: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.into())
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for InflateLayer<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.inflater.is_none() {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        }
        loop {
            if buf.remaining() == 0 || this.hand_on(buf) {
                return Poll::Ready(Ok(()));
            }
            if this.passing > 0 {
                return this.poll_pass(cx, buf);
            }
            if !this.step()? && !ready!(this.poll_fill(cx))? {
                return Poll::Ready(this.at_eof());
            }
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for InflateLayer<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
#[path = "deflate_tests.rs"]
mod tests;
