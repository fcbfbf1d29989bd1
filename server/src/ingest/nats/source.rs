//! `hlbook serve --source nats://HOST:PORT[/STREAM]`: node lines from a JetStream stream (`publish`), as a
//! `LineSource` like the node's files, so it races with them under the same rules.
//!
//! A worker thread runs the NATS client and an ordered pull consumer that starts at the height ingest asks for
//! (`lookup`), also subscribes to the line subjects for the lines still to come (`lines` says when those may be
//! used), puts lines split in parts back together, and hands whole lines over a bounded channel: a slow edge only
//! slows its own consumer, never the publisher or other edges. When the consumer fails the worker reports
//! it and ends; the next worker resumes at the stream sequence after the last line this source handed to ingest,
//! so a reconnect (a NATS server restarted mid-block) is invisible to ingest: no line comes twice, none is
//! skipped, and a streaming block's applied diffs are not read again. Only when that position is gone from the
//! stream (retention) does it fall back to the block after the last one ingest fully saw, behind a
//! `SourceEvent::Restart`.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer};
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::{Semaphore, mpsc, oneshot};

use super::NatsTarget;
use super::lines::{Lines, Pos, Via, Whole};
use crate::ingest::line_source::{LineSource, SourceCounters, SourceEvent};
use crate::node::{Mode, Stream};

const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// Whole lines waiting for ingest; a multi-MB status line is one of them.
const QUEUE: usize = 256;
/// Bytes of those lines: 256 whole lines of up to `ingest.max_line_bytes` each would be 16 GiB at the defaults.
/// At least one line of the longest allowed always fits.
const QUEUE_BYTES: usize = 128 << 20;

/// The bytes of lines in the worker's channel: the worker takes a line's bytes before sending it and ingest gives
/// them back once it has handled the line, so the channel holds at most `total` bytes (or one line, when longer).
#[derive(Debug)]
struct ByteGate {
    free: Arc<Semaphore>,
    total: usize,
}

impl ByteGate {
    fn new(total: usize) -> ByteGate {
        let total = total.clamp(1, u32::MAX as usize);
        ByteGate { free: Arc::new(Semaphore::new(total)), total }
    }

    /// The permits a line of `len` bytes holds while queued.
    fn cost(&self, len: usize) -> u32 {
        len.clamp(1, self.total) as u32
    }

    /// Waits until `len` more bytes fit; they stay taken until `release`.
    async fn admit(&self, len: usize) -> anyhow::Result<()> {
        self.free.acquire_many(self.cost(len)).await?.forget();
        Ok(())
    }

    fn release(&self, len: usize) {
        self.free.add_permits(self.cost(len) as usize);
    }
}

enum Msg {
    Up(u64),
    /// The stream no longer holds the resume position: lines come again from a block start.
    Restart,
    /// A line, and whether it came straight from its subject (the live path).
    Line(Stream, Bytes, Pos, bool),
    TooLong(Stream, u64, u64, Pos),
    /// A stream message that is not a node line of ours, skipped.
    Foreign(String, Pos),
    Broken(String),
}

#[derive(Debug)]
struct Worker {
    rx: mpsc::Receiver<Msg>,
    gate: Arc<ByteGate>,
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
    /// Subscriptions and publishes NATS refused, counted by every worker's connection.
    denied: Arc<AtomicU64>,
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
            denied: Arc::default(),
            problem: None,
            rt: tokio::runtime::Builder::new_current_thread().enable_time().build().expect("a timer runtime"),
        }
    }

    fn spawn(&mut self) {
        let (tx, rx) = mpsc::channel(QUEUE);
        let gate = Arc::new(ByteGate::new(QUEUE_BYTES.max(self.max_line)));
        let (cancel, cancelled) = oneshot::channel();
        let (target, mode, max_line, denied) = (self.target.clone(), self.mode, self.max_line, self.denied.clone());
        let worker_gate = gate.clone();
        let from = From { after: self.resume_after, pos: self.pos };
        std::thread::Builder::new()
            .name("nats-source".into())
            .spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
                rt.block_on(async move {
                    tokio::select! {
                        r = consume(&target, mode, from, max_line, &denied, &tx, &worker_gate) => {
                            let why = match r { Ok(()) => "the consumer ended".to_string(), Err(e) => format!("{e:#}") };
                            let _ = tx.send(Msg::Broken(why)).await;
                        }
                        _ = cancelled => {}
                    }
                });
            })
            .expect("spawning the NATS source thread");
        self.worker = Some(Worker { rx, gate, _cancel: cancel });
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
            Msg::Line(s, line, pos, live) => {
                self.counters.lines += 1;
                self.counters.live_lines += u64::from(live);
                self.counters.bytes += line.len() as u64;
                self.pos = Some(pos);
                on(SourceEvent::Line(s, &line));
            }
            Msg::TooLong(stream, height, bytes, pos) => {
                self.pos = Some(pos);
                on(SourceEvent::TooLong { stream, height: Some(height), bytes });
            }
            Msg::Foreign(why, pos) => {
                self.pos = Some(pos);
                self.counters.foreign_messages += 1;
                // The first few, then one in a thousand: a flood of them must not flood the log.
                let n = self.counters.foreign_messages;
                if n <= 10 || n % 1000 == 0 {
                    tracing::warn!(stream = %self.target.stream, "skipped {why} (foreign message #{n})");
                }
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
        let gate = w.gate.clone();
        for m in batch {
            if let Msg::Line(_, line, _, _) = &m {
                gate.release(line.len());
            }
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
        SourceCounters { permission_denied: self.denied.load(Relaxed), ..self.counters.clone() }
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

/// Messages straight from the subject waiting for the reader; more are dropped (the stream has them).
const SUBJECT_QUEUE: usize = 64;

/// Reads the stream from `from` and sends whole lines until an error; lines still to come are also taken straight
/// from the subject when they are next in sequence (`lines`).
async fn consume(
    t: &NatsTarget,
    mode: Mode,
    mut from: From,
    max_line: usize,
    denied: &Arc<AtomicU64>,
    tx: &mpsc::Sender<Msg>,
    gate: &ByteGate,
) -> anyhow::Result<()> {
    let (re_tx, mut reconnected) = mpsc::unbounded_channel();
    let watch = super::Watch { reconnected: Some(re_tx), denied: Some(denied.clone()) };
    let client = super::connect(&t.servers, &t.cfg, "hlbook serve", watch).await?;
    let js = super::jetstream(client.clone(), &t.cfg);
    let mut st = js.get_stream(&t.stream).await.map_err(|e| anyhow::anyhow!("stream {}: {e}", t.stream))?;
    let wanted = format!(".{}.*", mode.as_str());
    let prefix = super::stream_prefix(&st, mode, &t.cfg);
    let prefix = prefix.ok_or_else(|| anyhow::anyhow!("stream {} holds no {} lines", t.stream, mode.as_str()))?;
    let (live_tx, mut live_rx) = mpsc::channel(SUBJECT_QUEUE);
    let mut _drain = None;
    if t.cfg.live_subjects {
        let mut live = client.subscribe(format!("{prefix}{wanted}")).await?;
        // Drains the subscription into a small queue, dropping what does not fit, so a slow edge holds at most
        // SUBJECT_QUEUE such messages; it ends with this function.
        _drain = Some(AbortOnDrop(tokio::spawn(async move {
            while let Some(m) = live.next().await {
                if let Err(mpsc::error::TrySendError::Closed(_)) = live_tx.try_send(m) {
                    break;
                }
            }
        })));
    }
    let start = start_at(&mut st, &prefix, mode, &mut from, tx).await?;
    let name = own_consumer(&st, &t.cfg.name).await;
    let c = st
        .create_consumer(consumer::pull::OrderedConfig {
            name,
            filter_subject: format!("{prefix}{wanted}"),
            deliver_policy: consumer::DeliverPolicy::ByStartSequence { start_sequence: start },
            ..Default::default()
        })
        .await?;
    let mut msgs = c.messages().await?;
    tx.send(Msg::Up(start)).await?;
    let mut lines = Lines::new(from.after, max_line, from.pos);
    let mut caught_up = false;
    loop {
        let (whole, live) = tokio::select! {
            biased;
            _ = reconnected.recv() => anyhow::bail!("reconnected to NATS; the consumer starts over"),
            Some(m) = live_rx.recv() => {
                let whole = lines.take(Via::Subject, None, &m.subject, m.headers.as_ref(), &m.payload);
                if whole.is_some() && !std::mem::replace(&mut caught_up, true) {
                    tracing::info!(stream = %t.stream, "caught up: lines now come straight from their subjects");
                }
                (whole, true)
            }
            m = msgs.next() => {
                let Some(m) = m else { break };
                let m = m?;
                let seq = m.info().map_err(|e| anyhow::anyhow!("message without stream info: {e}"))?.stream_sequence;
                (lines.take(Via::Stream, Some(seq), &m.subject, m.headers.as_ref(), &m.payload), false)
            }
        };
        match whole {
            Some(Whole::Line(s, line)) => {
                // Held here, not queued, while ingest works through what is: the consumer then waits too.
                gate.admit(line.len()).await?;
                tx.send(Msg::Line(s, line, lines.pos(), live)).await?;
            }
            Some(Whole::TooLong(s, height, bytes)) => tx.send(Msg::TooLong(s, height, bytes, lines.pos())).await?,
            Some(Whole::Foreign(why)) => tx.send(Msg::Foreign(why, lines.pos())).await?,
            None => {}
        }
    }
    Ok(())
}

/// The consumer's name: the edge's own (`nats.name`, the only one its permissions let it read), after deleting
/// what a previous worker of this edge left under it; None (the server names it) without one.
async fn own_consumer(st: &jetstream::stream::Stream, name: &str) -> Option<String> {
    if name.is_empty() {
        return None;
    }
    // Not found is the usual answer; anything else shows when the create fails.
    let _ = st.delete_consumer(name).await;
    Some(name.to_string())
}

/// A task aborted when this is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use futures_util::FutureExt;

    use super::*;

    #[test]
    fn queued_lines_are_bounded_by_bytes_and_one_long_line_always_fits() {
        let gate = ByteGate::new(100);
        // The old queue took 256 lines whatever their size: a second 60-byte line went in at once.
        assert!(gate.admit(60).now_or_never().is_some(), "room for the first");
        assert!(gate.admit(60).now_or_never().is_none(), "the second waits: 120 bytes would be queued");
        gate.release(60);
        assert!(gate.admit(60).now_or_never().is_some(), "ingest took the first: the second goes");
        gate.release(60);
        assert!(gate.admit(1_000).now_or_never().is_some(), "a line over the whole bound still fits alone");
        assert!(gate.admit(1).now_or_never().is_none(), "and nothing beside it");
        gate.release(1_000);
        assert!(gate.admit(1).now_or_never().is_some());
    }
}
