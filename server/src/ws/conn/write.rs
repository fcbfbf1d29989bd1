//! A connection's writes: a batch of frames as whole WebSocket messages, shared bytes where the frame's cached
//! message serves (plain frames), the connection's own copy where it does not (audit, batch arrays, texts), and the
//! private bytes charged to its budget while they are written.

use bytes::Bytes;
use futures_util::SinkExt;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_tungstenite::tungstenite::Error as WsError;

use super::{Batch, Conn, Out};
use crate::node::time::now_nanos;
use crate::ws::deflate::deflate_message;
use crate::ws::wire;

impl<S: AsyncRead + AsyncWrite + Unpin> Conn<S> {
    /// Writes the batch to the socket as whole WebSocket messages, with one vectored write where the kernel allows.
    pub(super) async fn write(&mut self, mut batch: Batch) -> Result<(), WsError> {
        drop_for_test(self.opts.audit, &mut batch);
        let sent_ns = now_nanos();
        let n = batch.frames.len() as u64;
        let messages: Vec<Bytes> = if self.opts.batch {
            let mut joined = Vec::with_capacity(batch.bytes + batch.frames.len() + 2);
            joined.push(b'[');
            for (i, f) in batch.frames.iter().enumerate() {
                if i > 0 {
                    joined.push(b',');
                }
                joined.extend_from_slice(&self.plain(f, sent_ns));
            }
            joined.push(b']');
            vec![self.encode(&joined)]
        } else {
            batch.frames.iter().map(|f| self.message(f, sent_ns)).collect()
        };
        let bytes = messages.iter().map(Bytes::len).sum::<usize>() as u64;
        // Copies made for this connection alone: every message when batched or audited, else its texts and
        // replayed frames.
        let private = if self.opts.batch || self.opts.audit {
            bytes as usize
        } else {
            let own = |f: &Out| match f {
                Out::Text(t) => Some(t.len()),
                Out::Shared(fr, link) if link.replayed => Some(fr.json.len()),
                Out::Shared(..) => None,
            };
            batch.frames.iter().filter_map(own).sum()
        };
        let _private = self.budget.charge(private);
        // Whatever tungstenite queued (a pong) goes out first, so our messages never land inside one of its frames.
        self.ws.flush().await?;
        wire::write_all(self.ws.get_mut(), &messages).await?;
        let stages = self.ctx.hub().stages();
        let written = now_nanos();
        for f in &batch.frames {
            // A replay's latency is its reconnect's, not the feed's.
            if let Out::Shared(fr, link) = f
                && fr.audit.height() > 0
                && !link.replayed
            {
                stages.sent(fr.audit.height(), fr.audit.times.line, written);
            }
        }
        let c = self.ctx.counters();
        c.frames_sent.add(n);
        c.bytes_sent.add(bytes);
        // A batch of only pongs is tungstenite's write, not ours.
        if n > 0 {
            c.writes.inc();
        }
        Ok(())
    }

    /// A frame's JSON as this connection wants it (with audit fields when asked).
    fn plain(&self, f: &Out, sent_ns: i64) -> Vec<u8> {
        match f {
            Out::Shared(fr, link) if self.opts.audit => fr.with_audit(sent_ns, link.replayed, |out| link.write(out)),
            Out::Shared(fr, link) if link.replayed => fr.replayed(),
            Out::Shared(fr, _) => fr.json.to_vec(),
            Out::Text(t) => t.clone().into_bytes(),
        }
    }

    /// One frame as a whole message on the wire: a shared frame's bytes are framed (and compressed) once for every
    /// subscriber; audit frames and texts are this connection's own.
    fn message(&self, f: &Out, sent_ns: i64) -> Bytes {
        match f {
            Out::Shared(fr, link) if !self.opts.audit && !link.replayed => {
                fr.wire(self.opts.deflate, |json| self.encode(json)).clone()
            }
            _ => self.encode(&self.plain(f, sent_ns)),
        }
    }

    /// JSON as a text message, compressed when negotiated.
    fn encode(&self, json: &[u8]) -> Bytes {
        if self.opts.deflate {
            wire::text_message(&deflate_message(json, self.ctx.cfg().compression_level), true)
        } else {
            wire::text_message(json, false)
        }
    }
}

/// Test hook `HLBOOK_TEST_DROP_FRAME` (`chain::test_drop_frame`) on `?audit=1` connections; it logs the height it
/// drops, which the test reads to learn the height it must see named as lost.
#[cfg(feature = "test-hooks")]
fn drop_for_test(audit: bool, batch: &mut Batch) {
    let Some(n) = super::chain::test_drop_frame().filter(|_| audit) else { return };
    batch.frames.retain(|f| {
        let Out::Shared(fr, l) = f else { return true };
        if l.n != n {
            return true;
        }
        tracing::warn!(
            "test hook HLBOOK_TEST_DROP_FRAME: not writing frame n={} height={} of subscription {}",
            l.n,
            fr.audit.height(),
            l.sub
        );
        false
    });
}

/// Release builds have no test hooks.
#[cfg(not(feature = "test-hooks"))]
fn drop_for_test(_audit: bool, _batch: &mut Batch) {}
