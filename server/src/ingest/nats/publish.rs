//! The node host's side: every line of the node's files, unchanged, into one JetStream stream (`hlbook relay
//! --nats`).
//!
//! Restarts are idempotent two ways. On start the publisher reads the last message of each subject and skips
//! every line at or before it (by height and index within the block), so it neither repeats nor skips a line
//! however long it was down; and each message's id (`Nats-Msg-Id`) makes the server drop a line sent twice
//! within its duplicate window (a crash between a publish and its ack). A message is counted as published only
//! once JetStream acked it, and the next is sent only then (`publish`); any error tears the connection down and
//! starts over from the stream's own record.
//!
//! The three streams go out in step by block (`MAX_LEAD_BLOCKS`): while catching up on files already written, no
//! stream is published more than a few blocks ahead of another that has lines waiting, so an edge reading the
//! stream's history finds every block's lines close together instead of one stream far ahead of the statuses,
//! and holds a few blocks of lines at most while their blocks complete.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

use anyhow::Context;
use async_nats::HeaderMap;
use async_nats::jetstream::{self, stream};
use bytes::Bytes;

use super::codec::{Encoder, ZSTD};
use super::metrics::RelayMetrics;
use super::snapshot_keeper::FreshSnapshot;
use super::{
    H_ENC, H_HEIGHT, H_INDEX, H_LEN, H_LOST, H_PART, H_PREV, H_STREAM, NatsConfig, header_part, header_u64,
    stream_word, subject,
};
use crate::ingest::file_source::FileSource;
use crate::ingest::line_source::{LineSource, SourceEvent};
use crate::ingest::tail::block_number;
use crate::node::{Mode, Stream};

#[derive(Clone, Debug)]
pub struct PublishConfig {
    pub node_dir: PathBuf,
    pub mode: Mode,
    /// NATS servers, comma-separated (`nats://host:4222` or `tls://…`).
    pub url: String,
    pub nats: NatsConfig,
    /// With an empty stream: publish the lines of blocks after this height (0: every file present).
    pub start_after: u64,
    pub max_line_bytes: usize,
    /// What `/metrics` shows (`metrics`).
    pub metrics: Arc<RelayMetrics>,
    /// Set when the snapshot keeper runs: a stream emptied by retention resumes after its next snapshot.
    pub fresh: Option<Arc<FreshSnapshot>>,
}

/// Where a line sits: its block and its place among that block's lines in its stream.
type Key = (u64, u64);

/// How many blocks one stream may run ahead of another that has lines on disk waiting. Live, the node writes a
/// block's three lines together and no stream waits; catching up, each pass reads this many blocks of each stream.
pub const MAX_LEAD_BLOCKS: u64 = 8;

/// The highest block a pass may hand out: `MAX_LEAD_BLOCKS` past the lowest line a stream holds back (whose
/// block's lines before it are all out), or past the highest block read when no stream holds one back.
fn pass_bound(lowest_held: Option<u64>, highest_read: u64) -> u64 {
    match lowest_held {
        Some(h) => h + MAX_LEAD_BLOCKS - 1,
        None => highest_read + MAX_LEAD_BLOCKS,
    }
}

enum Item {
    Line(Stream, Vec<u8>),
    TooLong(Stream, Option<u64>, u64),
    Restart,
}

struct Publisher<'a> {
    cfg: &'a PublishConfig,
    js: jetstream::Context,
    /// The last line of each stream JetStream holds (indexed by `Stream as usize` through `slot`).
    last: [Option<Key>; 3],
    /// The block being read in each stream and how many of its lines came so far.
    reading: [Option<Key>; 3],
    chunk: usize,
    encoder: Encoder,
    /// With nothing in the stream: publish the lines of blocks after this height.
    start_after: u64,
}

fn slot(s: Stream) -> usize {
    match s {
        Stream::Fills => 0,
        Stream::Diffs => 1,
        Stream::Statuses => 2,
    }
}

/// Publishes until `stop` is set, reconnecting (with back-off) after any NATS error. `ready` is called once, when
/// the publisher first holds its stream and is about to publish (systemd's READY=1).
pub fn run(cfg: &PublishConfig, stop: &AtomicBool, ready: impl FnOnce()) -> anyhow::Result<()> {
    cfg.nats.check().map_err(anyhow::Error::msg)?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let mut backoff = Duration::from_millis(100);
    let mut ready = Some(ready);
    while !stop.load(Relaxed) {
        let result = rt.block_on(Publisher::open(cfg, stop)).and_then(|mut p| {
            cfg.metrics.connected.store(1, Relaxed);
            if let Some(ready) = ready.take() {
                println!("relay publishing to nats stream {}", cfg.nats.stream);
                ready();
            }
            backoff = Duration::from_millis(100);
            p.follow(&rt, stop)
        });
        cfg.metrics.connected.store(0, Relaxed);
        if let Err(e) = result {
            if e.is::<super::streams::Unchangeable>() {
                return Err(e);
            }
            cfg.metrics.publish_errors.fetch_add(1, Relaxed);
            tracing::warn!("NATS publisher: {e:#}; starting over in {backoff:?}");
            std::thread::sleep(backoff);
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    }
    Ok(())
}

impl<'a> Publisher<'a> {
    async fn open(cfg: &'a PublishConfig, stop: &AtomicBool) -> anyhow::Result<Publisher<'a>> {
        let client = super::connect(&cfg.url, &cfg.nats, "hlbook relay", super::Watch::default()).await?;
        let max_payload = client.server_info().max_payload;
        // Headers and protocol overhead ride in the same payload limit.
        let chunk = cfg.nats.chunk_bytes.min(max_payload.saturating_sub(4096)).max(1024);
        let js = jetstream::new(client);
        let n = &cfg.nats;
        let stream_cfg = stream::Config {
            name: n.stream.clone(),
            subjects: vec![format!("{}.{}.*", n.subject_prefix, cfg.mode.as_str())],
            max_age: Duration::from_secs(n.max_age_secs),
            max_bytes: if n.max_bytes > 0 { n.max_bytes } else { -1 },
            storage: stream::StorageType::File,
            num_replicas: n.replicas,
            // JetStream wants the window within max_age (0: no age limit).
            duplicate_window: match n.max_age_secs {
                0 => Duration::from_secs(120),
                age => Duration::from_secs(age.min(120)),
            },
            allow_direct: true,
            deny_delete: true,
            deny_purge: true,
            ..Default::default()
        };
        let mut st = super::streams::ensure(&js, stream_cfg).await?;
        let mut last = [None; 3];
        for s in Stream::ALL {
            last[slot(s)] = last_key(&st, &subject(&n.subject_prefix, cfg.mode, s)).await?;
        }
        for (s, key) in Stream::ALL.into_iter().zip(last) {
            if let Some((h, i)) = key {
                cfg.metrics.height[s as usize].store(h, Relaxed);
                cfg.metrics.index[s as usize].store(i, Relaxed);
            }
        }
        let state = st.info().await.with_context(|| format!("stream {}", n.stream))?.state.clone();
        let mut start_after = cfg.start_after;
        if state.messages == 0 && state.last_sequence > 0 && start_after == 0 {
            start_after = after_expiry(cfg, stop).await;
        }
        let encoder = Encoder::new(n.compress_min_bytes)?;
        Ok(Publisher { cfg, js, last, reading: [None; 3], chunk, encoder, start_after })
    }

    /// Where to (re)read the files from: the earliest block some stream may still owe a line of.
    fn resume_after(&self) -> u64 {
        let held = self.last.iter().flatten().map(|&(h, _)| h.saturating_sub(1)).min();
        held.unwrap_or(self.start_after)
    }

    fn follow(&mut self, rt: &tokio::runtime::Runtime, stop: &AtomicBool) -> anyhow::Result<()> {
        let cfg = self.cfg;
        let from = self.resume_after();
        tracing::info!(stream = %cfg.nats.stream, "publishing node lines after block {from}");
        let mut files = FileSource::new(&cfg.node_dir, cfg.mode, from, cfg.max_line_bytes);
        let mut items = Vec::new();
        let mut highest = from;
        while !stop.load(Relaxed) {
            files.hold_above(Some(pass_bound(files.held().map(|(_, h)| h).min(), highest)));
            files.poll(Duration::from_millis(250), &mut |ev| match ev {
                SourceEvent::Line(s, line) => {
                    highest = highest.max(block_number(line).unwrap_or(0));
                    items.push(Item::Line(s, line.to_vec()));
                }
                SourceEvent::TooLong { stream, height, bytes } => {
                    highest = highest.max(height.unwrap_or(0));
                    items.push(Item::TooLong(stream, height, bytes));
                }
                SourceEvent::Restart => items.push(Item::Restart),
                SourceEvent::Drained => {}
            })?;
            rt.block_on(self.publish(std::mem::take(&mut items)))?;
            files.set_resume_after(self.resume_after());
        }
        Ok(())
    }

    /// The line's key, counting lines per block; None when it is already in the stream.
    fn place(&mut self, s: Stream, height: u64) -> Option<Key> {
        let r = &mut self.reading[slot(s)];
        let key = match *r {
            Some((h, n)) if h == height => (h, n),
            _ => (height, 0),
        };
        *r = Some((key.0, key.1 + 1));
        self.last[slot(s)].is_none_or(|last| key > last).then_some(key)
    }

    /// Sends each message only once the one before it was acked: a message lost in a NATS crash then cannot
    /// be followed by a later one that the client resent after reconnecting, which would leave a hole that the
    /// stream's last message hides. The one message in doubt is sent again after a restart, and dropped by id
    /// if it had been stored.
    async fn publish(&mut self, items: Vec<Item>) -> anyhow::Result<()> {
        for item in items {
            let (s, line, lost, height) = match item {
                Item::Restart => {
                    // The files are read again from a block boundary: count lines per block afresh.
                    self.reading = [None; 3];
                    continue;
                }
                Item::Line(s, line) => {
                    let h = block_number(&line).or(self.reading[slot(s)].map(|(h, _)| h)).unwrap_or(0);
                    (s, line, None, h)
                }
                Item::TooLong(s, h, bytes) => {
                    tracing::error!(stream = %s, ?h, bytes, "a node line over --max-line-bytes; edges are told it is lost");
                    let h = h.or(self.reading[slot(s)].map(|(h, _)| h)).unwrap_or(0);
                    (s, Vec::new(), Some(bytes), h)
                }
            };
            let Some(key) = self.place(s, height) else { continue };
            let subj = subject(&self.cfg.nats.subject_prefix, self.cfg.mode, s);
            let len = line.len();
            let (body, compressed) = self.encoder.encode(Bytes::from(line));
            // The encoding is part of the id: a publisher restarted mid-line with another setting sends the
            // line anew from its first part, never parts of two encodings as one line.
            let id = format!("{}:{}:{}{}", stream_word(s), key.0, key.1, if compressed { ":z" } else { "" });
            let parts = body.len().div_ceil(self.chunk).max(1);
            let began = std::time::Instant::now();
            for p in 0..parts {
                let mut h = HeaderMap::new();
                h.insert(H_HEIGHT, key.0.to_string().as_str());
                h.insert(H_STREAM, stream_word(s));
                h.insert(H_INDEX, key.1.to_string().as_str());
                if let Some(bytes) = lost {
                    h.insert(H_LOST, bytes.to_string().as_str());
                }
                if let Some((height, index)) = self.last[slot(s)] {
                    h.insert(H_PREV, format!("{height}:{index}").as_str());
                }
                if compressed {
                    h.insert(H_ENC, ZSTD);
                }
                if compressed || parts > 1 {
                    h.insert(H_LEN, len.to_string().as_str());
                }
                let body = if parts == 1 {
                    h.insert(async_nats::header::NATS_MESSAGE_ID, id.as_str());
                    body.clone()
                } else {
                    h.insert(H_PART, format!("{p}/{parts}").as_str());
                    h.insert(async_nats::header::NATS_MESSAGE_ID, format!("{id}:{p}").as_str());
                    body.slice(p * self.chunk..((p + 1) * self.chunk).min(body.len()))
                };
                let ack = self.js.publish_with_headers(subj.clone(), h, body).await?;
                ack.await.context("JetStream did not ack a line")?;
            }
            self.cfg.metrics.published(s, key, began.elapsed(), len, body.len());
            self.last[slot(s)] = Some(key);
        }
        Ok(())
    }
}

/// The stream held lines once and retention dropped them all: the publisher was away longer than `max_age`.
/// Edges then start from a snapshot taken now, so the lines before it would be read by nobody: rather than
/// republish every node file on disk, one acked message at a time, start after the keeper's next snapshot.
/// Without a keeper (no info server) there is no such snapshot, and the files are published as before.
async fn after_expiry(cfg: &PublishConfig, stop: &AtomicBool) -> u64 {
    let Some(fresh) = &cfg.fresh else {
        tracing::warn!(
            "the stream is empty after an outage longer than max_age; no info server to snapshot, so every node file is published again"
        );
        return 0;
    };
    tracing::warn!(
        "the stream is empty after an outage longer than max_age: waiting for a fresh node snapshot to start after"
    );
    fresh.wanted.store(true, Relaxed);
    while !stop.load(Relaxed) {
        let h = fresh.height.load(Relaxed);
        if h > 0 {
            tracing::info!("publishing after the fresh snapshot's height {h}, not the whole disk");
            return h;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    0
}

/// The key of the last whole line on `subj`; a line whose last part is missing counts as not sent.
async fn last_key(st: &stream::Stream, subj: &str) -> anyhow::Result<Option<Key>> {
    use async_nats::jetstream::stream::LastRawMessageErrorKind as K;
    let m = match st.get_last_raw_message_by_subject(subj).await {
        Ok(m) => m,
        Err(e) if e.kind() == K::NoMessageFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("last message on {subj}")),
    };
    let h = header_u64(&m.headers, H_HEIGHT).context("last message has no height header")?;
    let i = header_u64(&m.headers, H_INDEX).unwrap_or(0);
    let (p, n) = header_part(&m.headers).context("bad part header")?;
    if p + 1 == n {
        return Ok(Some((h, i)));
    }
    Ok(match i.checked_sub(1) {
        Some(prev) => Some((h, prev)),
        None => Some((h.saturating_sub(1), u64::MAX)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_goes_a_bounded_lead_past_the_lowest_stream_held_back() {
        // Catching up: the statuses wait at block 100, so the others may be handed out to 107, 8 blocks past
        // the statuses' last one (99); once they are out, the statuses may follow.
        assert_eq!(pass_bound(Some(100), 500), 107);
        assert!(pass_bound(Some(100), 500) >= 100, "the stream held back always moves on");
        // Live: nothing waits, so the next pass may read what the node wrote meanwhile, a few blocks of it.
        assert_eq!(pass_bound(None, 500), 508);
    }
}
