//! [`InflateLayer`]: the byte layer beneath tungstenite that finds compressed client frames (RSV1 set), inflates
//! each message with the connection's [`Inflater`] and hands tungstenite plain frames instead. Written by hand: no
//! maintained crate provides permessage-deflate for tokio-tungstenite.

use std::fmt;
use std::io;
use std::ops::Range;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::Inflater;

/// Size of the layer's read buffer; a frame header (at most 14 bytes) always fits after compaction.
const READ_BUF: usize = 16 * 1024;

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
