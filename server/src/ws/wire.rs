//! Server-to-client WebSocket messages as wire bytes, and writing them to the socket beneath tungstenite.
//!
//! A data frame goes to many subscribers, so it is framed once (header and payload in one buffer, see
//! `publish::Frame::wire`) and every connection writes the same bytes with a vectored write: a connection's cost per
//! block is a `writev`, not a copy into tungstenite's write buffer. Server frames are never masked (RFC 6455 5.1),
//! so the bytes are the same for every client. Tungstenite still reads, answers pings and closes; a connection
//! flushes it before writing its own bytes so that nothing interleaves inside a message. Written by hand because
//! tungstenite frames each message into its own per-connection buffer and has no way to send pre-built bytes.

use std::io::{self, IoSlice};

use bytes::Bytes;
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// The longest header a server frame has: 2 bytes plus an 8-byte extended length, no mask.
const MAX_HEADER: usize = 10;

/// One whole, unfragmented text message: FIN set, RSV1 set when `payload` is permessage-deflate compressed.
pub fn text_message(payload: &[u8], compressed: bool) -> Bytes {
    let mut out = Vec::with_capacity(MAX_HEADER + payload.len());
    push_header(&mut out, compressed, payload.len());
    out.extend_from_slice(payload);
    Bytes::from(out)
}

/// FIN, RSV1 and the text opcode, then the payload length in its shortest form (RFC 6455 5.2).
fn push_header(out: &mut Vec<u8>, compressed: bool, len: usize) {
    const FIN: u8 = 0x80;
    const RSV1: u8 = 0x40;
    const TEXT: u8 = 0x1;
    out.push(FIN | if compressed { RSV1 } else { 0 } | TEXT);
    match len {
        0..=125 => out.push(len as u8),
        126..=0xffff => {
            out.push(126);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        }
        _ => {
            out.push(127);
            out.extend_from_slice(&(len as u64).to_be_bytes());
        }
    }
}

/// Writes every message in order with as few `writev` calls as the kernel allows, then flushes.
pub async fn write_all<W: AsyncWrite + Unpin>(w: &mut W, messages: &[Bytes]) -> io::Result<()> {
    let mut slices: Vec<IoSlice<'_>> = messages.iter().map(|m| IoSlice::new(m)).collect();
    let mut rest = &mut slices[..];
    IoSlice::advance_slices(&mut rest, 0);
    while !rest.is_empty() {
        let n = w.write_vectored(rest).await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        IoSlice::advance_slices(&mut rest, n);
    }
    w.flush().await
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
