//! `hlbook serve --source nats://HOST:PORT[/STREAM]`: node lines from a JetStream stream (`publish`), as a
//! `LineSource` like the node's files, so it races with them under the same rules.
//!
//! A worker thread runs the NATS client and an ordered pull consumer that starts at the height ingest asks for
//! (`lookup`), puts lines split in parts back together, and hands whole lines over a bounded channel: a slow edge
//! only slows its own consumer, never the publisher or other edges. When the consumer fails the worker reports
//! it and ends; the next worker resumes at the stream sequence after the last line this source handed to ingest,
//! so a reconnect (a NATS server restarted mid-block) is invisible to ingest: no line comes twice, none is
//! skipped, and a streaming block's applied diffs are not read again. Only when that position is gone from the
//! stream (retention) does it fall back to the block after the last one ingest fully saw, behind a
//! `SourceEvent::Restart`.

use std::io;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer};
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::{mpsc, oneshot};

use super::{H_HEIGHT, H_INDEX, H_LOST, NatsConfig, header_part, header_u64, word_stream};
use crate::ingest::source::{LineSource, SourceCounters, SourceEvent};
use crate::node::{Mode, Stream};

const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// Whole lines waiting for ingest; a multi-MB status line is one of them.
const QUEUE: usize = 256;

/// Where a NATS source reads: servers (comma-separated) and the stream, with `[nats]` for credentials and TLS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NatsTarget {
    pub servers: String,
    pub stream: String,
    pub cfg: NatsConfig,
}

enum Msg {
    Up(u64),
    /// The stream no longer holds the resume position: lines come again from a block start.
    Restart,
    Line(Stream, Bytes, Pos),
    TooLong(Stream, u64, u64, Pos),
    Broken(String),
}

/// Where the stream stands after a line handed on: the sequence to read next and the last line (height, index)
/// per stream, so a copy of it read again (a republished line) is still dropped.
#[derive(Clone, Copy, Debug, Default)]
struct Pos {
    next: u64,
    seen: [Option<(u64, u64)>; 3],
}

#[derive(Debug)]
struct Worker {
    rx: mpsc::Receiver<Msg>,
    /// Dropped with the worker: ends its NATS client.
    _cancel: oneshot::Sender<()>,
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Msg")
    }
}

#[derive(Debug)]
pub struct NatsSource {
    target: NatsTarget,
    mode: Mode,
    max_line: usize,
    resume_after: u64,
    /// Set once a line was handed on: a new worker continues right after it.
    pos: Option<Pos>,
    worker: Option<Worker>,
    lost: bool,
    backoff: Duration,
    next_attempt: Instant,
    counters: SourceCounters,
    problem: Option<String>,
    /// Waits on the worker's channel with a timeout.
    rt: tokio::runtime::Runtime,
}

impl NatsSource {
    pub fn new(target: &NatsTarget, mode: Mode, height: u64, max_line: usize) -> NatsSource {
        NatsSource {
            target: target.clone(),
            mode,
            max_line,
            resume_after: height,
            pos: None,
            worker: None,
            lost: false,
            backoff: BACKOFF_MIN,
            next_attempt: Instant::now(),
            counters: SourceCounters::default(),
            problem: None,
            rt: tokio::runtime::Builder::new_current_thread().enable_time().build().expect("a timer runtime"),
        }
    }

    fn spawn(&mut self) {
        let (tx, rx) = mpsc::channel(QUEUE);
        let (cancel, cancelled) = oneshot::channel();
        let (target, mode, max_line) = (self.target.clone(), self.mode, self.max_line);
        let from = From { after: self.resume_after, pos: self.pos };
        std::thread::Builder::new()
            .name("nats-source".into())
            .spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
                rt.block_on(async move {
                    tokio::select! {
                        r = consume(&target, mode, from, max_line, &tx) => {
                            let why = match r { Ok(()) => "the consumer ended".to_string(), Err(e) => format!("{e:#}") };
                            let _ = tx.send(Msg::Broken(why)).await;
                        }
                        _ = cancelled => {}
                    }
                });
            })
            .expect("spawning the NATS source thread");
        self.worker = Some(Worker { rx, _cancel: cancel });
    }

    fn handle(&mut self, m: Msg, on: &mut dyn FnMut(SourceEvent<'_>)) {
        match m {
            Msg::Up(seq) => {
                self.counters.connects += 1;
                self.problem = None;
                self.backoff = BACKOFF_MIN;
                tracing::info!(nats = %self.target.servers, stream = %self.target.stream, "reading lines from sequence {seq}");
            }
            Msg::Restart => {
                self.pos = None;
                on(SourceEvent::Restart);
            }
            Msg::Line(s, line, pos) => {
                self.counters.lines += 1;
                self.counters.bytes += line.len() as u64;
                self.pos = Some(pos);
                on(SourceEvent::Line(s, &line));
            }
            Msg::TooLong(stream, height, bytes, pos) => {
                self.pos = Some(pos);
                on(SourceEvent::TooLong { stream, height: Some(height), bytes });
            }
            Msg::Broken(why) => {
                let at = self
                    .pos
                    .map_or(format!("after block {}", self.resume_after), |p| format!("at sequence {}", p.next));
                tracing::warn!(nats = %self.target.servers, "NATS source lost ({why}); resuming {at}");
                self.problem = Some(format!("nats {}/{}: {why}", self.target.servers, self.target.stream));
                self.counters.disconnects += 1;
                self.worker = None;
                self.lost = true;
                self.next_attempt = Instant::now() + self.backoff;
                self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
}

impl LineSource for NatsSource {
    fn poll(&mut self, wait: Duration, on: &mut dyn FnMut(SourceEvent<'_>)) -> io::Result<()> {
        if self.worker.is_none() {
            let now = Instant::now();
            if now < self.next_attempt {
                std::thread::sleep((self.next_attempt - now).min(wait));
                return Ok(());
            }
            // Lost with no line handed on since (re)positioning: ingest drops partial blocks, as the new worker
            // reads from the block after the last whole one. With a position, it continues right there.
            if std::mem::take(&mut self.lost) && self.pos.is_none() {
                on(SourceEvent::Restart);
            }
            self.spawn();
        }
        let Some(w) = self.worker.as_mut() else { return Ok(()) };
        let first = self.rt.block_on(async { tokio::time::timeout(wait, w.rx.recv()).await });
        let mut batch = match first {
            Ok(Some(m)) => vec![m],
            Ok(None) => vec![Msg::Broken("the NATS worker stopped".into())],
            Err(_) => return Ok(()),
        };
        while batch.len() < QUEUE {
            match w.rx.try_recv() {
                Ok(m) => batch.push(m),
                Err(_) => break,
            }
        }
        for m in batch {
            self.handle(m, on);
            if self.worker.is_none() {
                break;
            }
        }
        Ok(())
    }

    fn restart_after(&mut self, height: u64) {
        self.resume_after = height;
        self.pos = None;
        self.worker = None;
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

/// Where a worker starts: right after the last line handed on (`pos`), or else at the block after `after`.
#[derive(Clone, Copy, Debug)]
struct From {
    after: u64,
    pos: Option<Pos>,
}

/// A line being put back together from its parts.
#[derive(Default)]
struct Parts {
    buf: Vec<u8>,
    next: u64,
    /// The sequence of its first part: a worker that stops mid-line resumes there.
    first_seq: Option<u64>,
    /// Over `max_line`: the rest of its parts are dropped and the line reported lost.
    over: bool,
}

/// Turns messages into whole lines, dropping those already handed on.
struct Reader {
    after: u64,
    max_line: usize,
    parts: [Parts; 3],
    pos: Pos,
}

impl Reader {
    /// The position to report with a line that ends at `seq`: the next sequence, unless a line of another
    /// stream is still partly read (then its first part, so it is read whole again; its streams' lines read
    /// since are dropped by `seen`).
    fn after_line(&mut self, seq: u64) -> Pos {
        let open = self.parts.iter().filter_map(|p| p.first_seq).min();
        self.pos.next = open.map_or(seq + 1, |o| o.min(seq + 1));
        self.pos
    }

    /// The message as a whole line, if it completes one that was not handed on before.
    fn take(&mut self, m: &jetstream::Message) -> anyhow::Result<Option<Msg>> {
        let seq = m.info().map_err(|e| anyhow::anyhow!("message without stream info: {e}"))?.stream_sequence;
        let s = m.subject.rsplit('.').next().and_then(word_stream);
        let (Some(s), Some(h)) = (s, m.headers.as_ref()) else {
            anyhow::bail!("message on {} is not a node line of ours", m.subject);
        };
        let height = header_u64(h, H_HEIGHT).ok_or_else(|| anyhow::anyhow!("no {H_HEIGHT} header"))?;
        let key = (height, header_u64(h, H_INDEX).unwrap_or(0));
        let (part, n) = header_part(h).ok_or_else(|| anyhow::anyhow!("bad part header on {}", m.subject))?;
        let i = s as usize;
        if height <= self.after || self.pos.seen[i].is_some_and(|k| key <= k) {
            return Ok(None);
        }
        if let Some(bytes) = header_u64(h, H_LOST) {
            self.pos.seen[i] = Some(key);
            return Ok(Some(Msg::TooLong(s, height, bytes, self.after_line(seq))));
        }
        if n == 1 {
            self.pos.seen[i] = Some(key);
            let pos = self.after_line(seq);
            if m.payload.len() > self.max_line {
                return Ok(Some(Msg::TooLong(s, height, m.payload.len() as u64, pos)));
            }
            return Ok(Some(Msg::Line(s, m.payload.clone(), pos)));
        }
        let p = &mut self.parts[i];
        if part == 0 {
            *p = Parts { first_seq: Some(seq), ..Parts::default() };
        } else if part != p.next {
            // A part of a line we did not see begin (a publisher restarted mid-line): its whole copy follows.
            *p = Parts { next: u64::MAX, ..Parts::default() };
            return Ok(None);
        }
        p.next = part + 1;
        p.over |= p.buf.len() + m.payload.len() > self.max_line;
        if !p.over {
            p.buf.extend_from_slice(&m.payload);
        }
        if part + 1 < n {
            return Ok(None);
        }
        self.pos.seen[i] = Some(key);
        let p = std::mem::take(p);
        let pos = self.after_line(seq);
        Ok(Some(if p.over {
            Msg::TooLong(s, height, n * m.payload.len() as u64, pos)
        } else {
            Msg::Line(s, p.buf.into(), pos)
        }))
    }
}

/// The sequence to start at: `from.pos` when the stream still holds it, else the first line after `from.after`
/// (announced with `Msg::Restart` when a position was given up).
async fn start_at(
    st: &mut async_nats::jetstream::stream::Stream,
    prefix: &str,
    mode: Mode,
    from: &mut From,
    tx: &mpsc::Sender<Msg>,
) -> anyhow::Result<u64> {
    if let Some(pos) = from.pos {
        let first = st.get_info().await?.state.first_sequence;
        if pos.next >= first {
            return Ok(pos.next);
        }
        tracing::warn!("the NATS stream no longer holds sequence {} (retention); reading from a block start", pos.next);
        from.pos = None;
        tx.send(Msg::Restart).await?;
    }
    super::lookup::start_sequence(st, prefix, mode, from.after).await
}

/// Reads the stream from `from` and sends whole lines until an error.
async fn consume(
    t: &NatsTarget,
    mode: Mode,
    mut from: From,
    max_line: usize,
    tx: &mpsc::Sender<Msg>,
) -> anyhow::Result<()> {
    let (re_tx, mut reconnected) = mpsc::unbounded_channel();
    let client = super::connect(&t.servers, &t.cfg, "hlbook serve", Some(re_tx)).await?;
    let js = jetstream::new(client);
    let mut st = js.get_stream(&t.stream).await.map_err(|e| anyhow::anyhow!("stream {}: {e}", t.stream))?;
    let wanted = format!(".{}.*", mode.as_str());
    let prefix = st.cached_info().config.subjects.iter().find_map(|s| s.strip_suffix(&wanted)).map(str::to_string);
    let prefix = prefix.ok_or_else(|| anyhow::anyhow!("stream {} holds no {} lines", t.stream, mode.as_str()))?;
    let start = start_at(&mut st, &prefix, mode, &mut from, tx).await?;
    let c = st
        .create_consumer(consumer::pull::OrderedConfig {
            filter_subject: format!("{prefix}{wanted}"),
            deliver_policy: consumer::DeliverPolicy::ByStartSequence { start_sequence: start },
            ..Default::default()
        })
        .await?;
    let mut msgs = c.messages().await?;
    tx.send(Msg::Up(start)).await?;
    let pos = from.pos.unwrap_or_default();
    let mut reader = Reader { after: from.after, max_line, parts: Default::default(), pos };
    loop {
        let m = tokio::select! {
            m = msgs.next() => m,
            _ = reconnected.recv() => anyhow::bail!("reconnected to NATS; the consumer starts over"),
        };
        let Some(m) = m else { break };
        if let Some(msg) = reader.take(&m?)? {
            tx.send(msg).await?;
        }
    }
    Ok(())
}
