//! The relay protocol, and the TCP source that consumes it (`hlbook serve --source tcp://HOST:PORT`).
//!
//! hl-node has no data port (4001/4002 are gossip), so one node feeds servers on other hosts through our own
//! relay (`ingest::relay`), which serves the node's lines unchanged. The protocol is small enough to write by
//! hand and to read with `nc`; it is defined here, documented in docs/relay.md:
//!
//! ```text
//! client → relay   HLRELAY 1 <by-block|streaming> <after>\n     lines of blocks > after, please
//! relay → client   HLRELAY 1 OK\n   |   HLRELAY 1 ERR <reason>\n (then close)
//! relay → client   <F|S|D> <block_number> <len>\n<len bytes: one node line>\n   (fills, statuses, diffs)
//!                  H <unix_ns>\n                                     heartbeat after 1 s without a line
//!                  R <F|S|D> <block_number> <len>\n                   the relay refused a line over its cap
//! ```
//! The client resumes after the last block it fully assembled, so a reconnect loses nothing and (because it
//! first drops partial blocks) applies nothing twice.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::source::{LineSource, SourceCounters, SourceEvent};
use crate::node::{Mode, Stream};

pub const MAGIC: &str = "HLRELAY 1";
/// The relay sends a heartbeat after this long without a line; the client gives up after `DEAD_AFTER`.
pub const HEARTBEAT: Duration = Duration::from_secs(1);
const DEAD_AFTER: Duration = Duration::from_secs(5);
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// A frame header (`F <height> <length>`) is a few dozen bytes; more bytes without its newline are not a relay.
const MAX_HEADER: usize = 64;

pub fn stream_tag(stream: Stream) -> u8 {
    match stream {
        Stream::Fills => b'F',
        Stream::Statuses => b'S',
        Stream::Diffs => b'D',
    }
}

fn tag_stream(tag: u8) -> Option<Stream> {
    match tag {
        b'F' => Some(Stream::Fills),
        b'S' => Some(Stream::Statuses),
        b'D' => Some(Stream::Diffs),
        _ => None,
    }
}

/// Writes one line frame.
pub fn write_frame(out: &mut impl Write, stream: Stream, height: u64, line: &[u8]) -> io::Result<()> {
    let mut head = Vec::with_capacity(32);
    head.push(stream_tag(stream));
    writeln!(head, " {height} {}", line.len())?;
    out.write_all(&head)?;
    out.write_all(line)?;
    out.write_all(b"\n")
}

/// Writes an `R` frame: the relay refused this line (longer than its cap), so the client knows it is lost.
pub fn write_refused(out: &mut impl Write, stream: Stream, height: u64, len: u64) -> io::Result<()> {
    writeln!(out, "R {} {height} {len}", char::from(stream_tag(stream)))
}

/// Parses the frames at the front of `buf`; returns how many bytes were consumed. Errors are protocol errors. A
/// frame longer than `max_line` (`ingest.max_line_bytes`) is refused before anything is buffered for it: reported
/// as `SourceEvent::TooLong`, then an error, since the bytes that follow its header cannot be skipped safely.
fn parse_frames(buf: &[u8], max_line: usize, on: &mut dyn FnMut(SourceEvent<'_>)) -> io::Result<usize> {
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("relay protocol: {what}"));
    let mut at = 0;
    loop {
        let Some(nl) = memchr::memchr(b'\n', &buf[at..buf.len().min(at + MAX_HEADER + 1)]) else {
            if buf.len() - at > MAX_HEADER {
                return Err(bad(&format!("no frame header within {MAX_HEADER} bytes")));
            }
            break;
        };
        let head = std::str::from_utf8(&buf[at..at + nl]).map_err(|_| bad("header is not text"))?;
        let mut parts = head.split(' ');
        let tag = parts.next().unwrap_or("");
        if tag == "H" {
            at += nl + 1;
            continue;
        }
        let refused = tag == "R";
        let tag = if refused { parts.next().unwrap_or("") } else { tag };
        let stream = tag.bytes().next().filter(|_| tag.len() == 1).and_then(tag_stream);
        let stream = stream.ok_or_else(|| bad(&format!("unknown frame {head:?}")))?;
        let height: u64 = parts.next().and_then(|h| h.parse().ok()).ok_or_else(|| bad("bad block number"))?;
        let len: u64 = parts.next().and_then(|l| l.parse().ok()).ok_or_else(|| bad("bad length"))?;
        if refused {
            on(SourceEvent::TooLong { stream, height: Some(height), bytes: len });
            at += nl + 1;
            continue;
        }
        if len > max_line as u64 {
            on(SourceEvent::TooLong { stream, height: Some(height), bytes: len });
            return Err(bad(&format!("a line of {len} bytes claimed, over ingest.max_line_bytes ({max_line})")));
        }
        let len = len as usize;
        let body = at + nl + 1;
        if buf.len() < body + len + 1 {
            break; // Incomplete: wait for more bytes.
        }
        if buf[body + len] != b'\n' {
            return Err(bad("frame not newline-terminated"));
        }
        on(SourceEvent::Line(stream, &buf[body..body + len]));
        at = body + len + 1;
    }
    Ok(at)
}

/// The relay's answer line, read a byte at a time: the frames that follow it may be in the same segment, and a
/// buffered reader would take (and lose) their first bytes with it.
fn read_reply(mut stream: &TcpStream) -> io::Result<String> {
    let mut reply = Vec::new();
    let mut byte = [0u8];
    while reply.len() < 512 && stream.read(&mut byte)? == 1 {
        reply.push(byte[0]);
        if byte[0] == b'\n' {
            break;
        }
    }
    Ok(String::from_utf8_lossy(&reply).into_owned())
}

#[derive(Debug)]
struct Conn {
    stream: TcpStream,
    last_bytes: Instant,
}

/// Lines from a relay, with reconnect and back-off.
#[derive(Debug)]
pub struct TcpSource {
    addr: String,
    mode: Mode,
    resume_after: u64,
    max_line: usize,
    conn: Option<Conn>,
    /// Set after a lost connection: the next one starts with `SourceEvent::Restart`.
    lost: bool,
    backoff: Duration,
    next_attempt: Instant,
    buf: Vec<u8>,
    filled: usize,
    counters: SourceCounters,
    /// Why the relay gives no lines now (cannot connect, refused, connection lost); `None` while connected.
    problem: Option<String>,
}

impl TcpSource {
    /// `addr` is `HOST:PORT`; lines of blocks after `height` are requested; a line over `max_line` bytes is refused.
    pub fn new(addr: &str, mode: Mode, height: u64, max_line: usize) -> TcpSource {
        TcpSource {
            addr: addr.to_string(),
            mode,
            resume_after: height,
            max_line,
            conn: None,
            lost: false,
            backoff: BACKOFF_MIN,
            next_attempt: Instant::now(),
            buf: vec![0; 1 << 20],
            filled: 0,
            counters: SourceCounters::default(),
            problem: None,
        }
    }

    fn connect(&mut self) -> io::Result<Conn> {
        let addr =
            self.addr.to_socket_addrs()?.next().ok_or_else(|| io::Error::other("address resolves to nothing"))?;
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        (&stream).write_all(format!("{MAGIC} {} {}\n", self.mode.as_str(), self.resume_after).as_bytes())?;
        let reply = read_reply(&stream)?;
        match reply.trim_end().strip_prefix(MAGIC) {
            Some(" OK") => Ok(Conn { stream, last_bytes: Instant::now() }),
            Some(err) => Err(io::Error::other(format!("relay refused: {}", err.trim()))),
            None => Err(io::Error::other(format!("not a relay (answered {:?})", reply.trim_end()))),
        }
    }

    fn drop_conn(&mut self, why: &str) {
        self.problem = Some(format!("relay {}: connection lost ({why})", self.addr));
        if self.conn.take().is_some() {
            self.counters.disconnects += 1;
            tracing::warn!(relay = %self.addr, "relay connection lost ({why}); resuming after block {}", self.resume_after);
        }
        self.lost = true;
        self.filled = 0;
        self.next_attempt = Instant::now() + self.backoff;
    }

    fn ensure_connected(&mut self, wait: Duration) -> bool {
        if self.conn.is_some() {
            return true;
        }
        let now = Instant::now();
        if now < self.next_attempt {
            std::thread::sleep((self.next_attempt - now).min(wait));
            return false;
        }
        match self.connect() {
            Ok(c) => {
                self.counters.connects += 1;
                tracing::info!(relay = %self.addr, "connected to relay; lines after block {}", self.resume_after);
                self.conn = Some(c);
                self.problem = None;
                self.backoff = BACKOFF_MIN;
                true
            }
            Err(e) => {
                self.problem = Some(format!("relay {}: {e}", self.addr));
                if self.backoff == BACKOFF_MIN {
                    tracing::warn!(relay = %self.addr, "cannot reach relay: {e}; retrying with back-off");
                }
                self.next_attempt = Instant::now() + self.backoff;
                self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
                false
            }
        }
    }

    /// One read; returns bytes read (0 on timeout), or an error meaning the connection is gone.
    fn read_some(&mut self, wait: Duration) -> io::Result<usize> {
        let Some(conn) = self.conn.as_mut() else { return Ok(0) };
        if self.filled == self.buf.len() {
            self.buf.resize(self.buf.len() * 2, 0);
        }
        conn.stream.set_read_timeout(Some(wait.max(Duration::from_millis(1))))?;
        match conn.stream.read(&mut self.buf[self.filled..]) {
            Ok(0) => Err(io::Error::new(io::ErrorKind::UnexpectedEof, "relay closed the connection")),
            Ok(n) => {
                conn.last_bytes = Instant::now();
                self.filled += n;
                self.counters.bytes += n as u64;
                Ok(n)
            }
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                if conn.last_bytes.elapsed() > DEAD_AFTER {
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "no heartbeat from relay"));
                }
                Ok(0)
            }
            Err(e) => Err(e),
        }
    }
}

impl LineSource for TcpSource {
    fn poll(&mut self, wait: Duration, on: &mut dyn FnMut(SourceEvent<'_>)) -> io::Result<()> {
        if !self.ensure_connected(wait) {
            return Ok(());
        }
        if std::mem::take(&mut self.lost) {
            on(SourceEvent::Restart);
        }
        if let Err(e) = self.read_some(wait) {
            self.drop_conn(&e.to_string());
            return Ok(());
        }
        let (mut lines, mut refused) = (0u64, false);
        let parsed = parse_frames(&self.buf[..self.filled], self.max_line, &mut |ev| {
            refused |= matches!(ev, SourceEvent::TooLong { .. });
            lines += 1;
            on(ev);
        });
        self.counters.lines += lines;
        match parsed {
            Ok(used) => {
                self.buf.copy_within(used..self.filled, 0);
                self.filled -= used;
                Ok(())
            }
            Err(e) => {
                self.drop_conn(&e.to_string());
                if refused {
                    // Asking again at once would bring the same line: wait the longest back-off (a resync, which
                    // moves past it, reconnects at once through `restart_after`).
                    self.next_attempt = Instant::now() + BACKOFF_MAX;
                }
                Err(e)
            }
        }
    }

    fn restart_after(&mut self, height: u64) {
        self.resume_after = height;
        self.conn = None;
        self.filled = 0;
        self.lost = false;
        self.next_attempt = Instant::now();
    }

    fn set_resume_after(&mut self, height: u64) {
        self.resume_after = height;
    }

    fn counters(&self) -> SourceCounters {
        self.counters.clone()
    }

    fn problem(&mut self) -> Option<String> {
        self.problem.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(bytes: &[u8]) -> (Vec<(Stream, Vec<u8>)>, io::Result<usize>) {
        let mut got = Vec::new();
        let r = parse_frames(bytes, 64 << 20, &mut |ev| {
            if let SourceEvent::Line(s, b) = ev {
                got.push((s, b.to_vec()));
            }
        });
        (got, r)
    }

    #[test]
    fn frames_round_trip_and_wait_for_whole_frames() {
        let mut out = Vec::new();
        write_frame(&mut out, Stream::Fills, 7, b"{\"a\":1}").unwrap();
        out.extend_from_slice(b"H 123\n");
        write_frame(&mut out, Stream::Diffs, 8, b"").unwrap();
        write_frame(&mut out, Stream::Statuses, 9, b"x\ny").unwrap();
        let before_refused = out.len();
        write_refused(&mut out, Stream::Diffs, 10, 1 << 40).unwrap();
        let (got, used) = frames(&out);
        assert_eq!(used.unwrap(), out.len());
        let mut told = Vec::new();
        parse_frames(&out[before_refused..], 64, &mut |ev| {
            if let SourceEvent::TooLong { stream, height, bytes } = ev {
                told.push((stream, height, bytes));
            }
        })
        .unwrap();
        assert_eq!(told, [(Stream::Diffs, Some(10), 1 << 40)], "a relay's refusal is passed on, not an error");
        let want = [(Stream::Fills, &b"{\"a\":1}"[..]), (Stream::Diffs, b""), (Stream::Statuses, b"x\ny")];
        assert_eq!(got, want.map(|(s, b)| (s, b.to_vec())));
        for cut in 0..out.len() {
            let (got, used) = frames(&out[..cut]);
            let used = used.unwrap();
            assert!(used <= cut && got.len() <= 3, "prefix {cut}");
        }
    }

    #[test]
    fn the_handshake_reply_leaves_the_frames_sent_with_it() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut relay, _) = listener.accept().unwrap();
        relay.write_all(b"HLRELAY 1 OK\nD 5 3\nabc\n").unwrap();
        assert_eq!(read_reply(&client).unwrap(), "HLRELAY 1 OK\n");
        let mut rest = [0u8; 10];
        (&client).read_exact(&mut rest).unwrap();
        assert_eq!(&rest, b"D 5 3\nabc\n", "the first frame is whole");
    }

    #[test]
    fn protocol_errors_are_errors() {
        for bad in [&b"X 1 2\nab\n"[..], b"F x 2\nab\n", b"F 1 2\nabc", b"F 1 99999999999\n", b"\xff\n"] {
            assert!(frames(bad).1.is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        // A line claiming 2 GiB, and a header that never ends, are refused before anything is buffered for them.
        let mut refused = Vec::new();
        let e = parse_frames(b"S 5 2147483648\n", 1 << 20, &mut |ev| {
            if let SourceEvent::TooLong { stream, height, bytes } = ev {
                refused.push((stream, height, bytes));
            }
        })
        .unwrap_err();
        assert!(e.to_string().contains("2147483648 bytes claimed, over ingest.max_line_bytes (1048576)"), "{e}");
        assert_eq!(refused, [(Stream::Statuses, Some(5), 2_147_483_648)]);
        let endless = vec![b'7'; 1000];
        assert!(frames(&endless).1.unwrap_err().to_string().contains("no frame header"));
        assert_eq!(frames(&endless[..MAX_HEADER]).1.unwrap(), 0, "a header still arriving is waited for");
    }
}
