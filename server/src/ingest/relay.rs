//! `hlbook relay`: serves the node's lines to servers on other hosts (protocol in `ingest::tcp`).
//!
//! Each client gets its own thread and its own `FileSource` starting after the height it asked for, so clients
//! are independent: a slow one is held back by TCP flow control and its file position only, never by a shared
//! buffer, and a reconnecting one simply asks again from where it stopped (the node's files are the buffer).

use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use super::source::{FileSource, LineSource, SourceEvent};
use super::tail::block_number;
use super::tcp::{HEARTBEAT, MAGIC, write_frame, write_refused};
use crate::node::Mode;

#[derive(Clone, Debug)]
pub struct RelayConfig {
    pub node_dir: PathBuf,
    pub mode: Mode,
    pub max_clients: usize,
    /// Lines longer than this are not forwarded: the client is told (`R` frame) and treats the line as lost.
    pub max_line_bytes: usize,
}

/// Accepts clients until `stop` is set.
pub fn serve(listener: TcpListener, cfg: RelayConfig, stop: Arc<AtomicBool>) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let clients = Arc::new(AtomicUsize::new(0));
    while !stop.load(Relaxed) {
        let (sock, peer) = match listener.accept() {
            Ok(x) => x,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            Err(e) => {
                tracing::warn!("relay accept failed: {e}");
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        if clients.load(Relaxed) >= cfg.max_clients {
            let _ = (&sock).write_all(format!("{MAGIC} ERR too many clients\n").as_bytes());
            continue;
        }
        clients.fetch_add(1, Relaxed);
        let (cfg, stop, clients) = (cfg.clone(), stop.clone(), clients.clone());
        std::thread::spawn(move || {
            match serve_client(sock, &cfg, &stop) {
                Ok(()) => tracing::info!(%peer, "relay client left"),
                Err(e) => tracing::info!(%peer, "relay client dropped: {e}"),
            }
            clients.fetch_sub(1, Relaxed);
        });
    }
    Ok(())
}

/// Reads `HLRELAY 1 <mode> <after>`; answers an error line for anything else.
fn handshake(sock: &TcpStream, mode: Mode) -> io::Result<u64> {
    sock.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut line = String::new();
    BufReader::new(sock).take(512).read_line(&mut line)?;
    let refuse = |why: String| {
        let _ = (&*sock).write_all(format!("{MAGIC} ERR {why}\n").as_bytes());
        io::Error::new(io::ErrorKind::InvalidData, why)
    };
    let rest = line.trim_end().strip_prefix(MAGIC).ok_or_else(|| refuse(format!("expected {MAGIC:?}")))?;
    let mut parts = rest.split_whitespace();
    let want = parts.next().unwrap_or("");
    if want != mode.as_str() {
        return Err(refuse(format!("this relay serves {} lines, not {want:?}", mode.as_str())));
    }
    let after = parts.next().and_then(|h| h.parse().ok()).ok_or_else(|| refuse("bad height".into()))?;
    (&*sock).write_all(format!("{MAGIC} OK\n").as_bytes())?;
    Ok(after)
}

fn serve_client(sock: TcpStream, cfg: &RelayConfig, stop: &AtomicBool) -> io::Result<()> {
    sock.set_nodelay(true)?;
    let after = handshake(&sock, cfg.mode)?;
    let peer: Option<SocketAddr> = sock.peer_addr().ok();
    tracing::info!(?peer, "relay client wants lines after block {after}");
    sock.set_write_timeout(Some(Duration::from_secs(30)))?;
    let mut out = BufWriter::with_capacity(1 << 20, sock);
    let mut source = FileSource::new(&cfg.node_dir, cfg.mode, after, cfg.max_line_bytes);
    let mut last_write = Instant::now();
    while !stop.load(Relaxed) {
        let mut result = Ok(());
        let mut restarted = false;
        source.poll(Duration::from_millis(250), &mut |ev| match ev {
            SourceEvent::Line(stream, line) if result.is_ok() => {
                result = write_frame(&mut out, stream, block_number(line).unwrap_or(0), line);
            }
            SourceEvent::TooLong { stream, height, bytes } if result.is_ok() => {
                tracing::error!(%stream, ?height, bytes, "a node line over --max-line-bytes; the client is told it is lost");
                result = write_refused(&mut out, stream, height.unwrap_or(0), bytes);
            }
            SourceEvent::Line(..) | SourceEvent::TooLong { .. } | SourceEvent::Drained => {}
            SourceEvent::Restart => restarted = true,
        })?;
        result?;
        if restarted {
            // A node file was replaced: the client knows what it fully has; let it ask again.
            out.flush()?;
            return Err(io::Error::other("a node file was replaced; client must resume"));
        }
        if out.buffer().is_empty() && last_write.elapsed() >= HEARTBEAT {
            writeln!(out, "H {}", crate::node::time::now_nanos())?;
        }
        if !out.buffer().is_empty() {
            out.flush()?;
            last_write = Instant::now();
        }
    }
    Ok(())
}
