//! What every source of node lines is to ingest: the `LineSource` trait, the events a source delivers, and its
//! running totals. Two sources implement it: the node's files on this host (`file_source`) and a NATS JetStream
//! stream (`nats::source`).
//!
//! Both hand complete lines to ingest in each stream's order and can be told to start over after a height. A
//! source that loses its place (a file replaced under its name) says so with `SourceEvent::Restart` before
//! delivering anything again: ingest then drops its partly assembled blocks, because every line after the resume
//! height is coming again and must not be applied twice.

use std::io;
use std::time::Duration;

use crate::node::Stream;

/// What a source delivers.
#[derive(Debug)]
pub enum SourceEvent<'a> {
    Line(Stream, &'a [u8]),
    /// A line longer than `ingest.max_line_bytes` was refused, not delivered (`bytes`: its length, or what of it had
    /// come): the source moved past it. `height` when its start says.
    TooLong {
        stream: Stream,
        height: Option<u64>,
        bytes: u64,
    },
    /// The source lost its place and resumes after the height it was last given: drop partial blocks.
    Restart,
    /// Every stream was just read to its end, in a pass that began after the previous `Drained` (sources that read
    /// in passes: the node's files). What closes a streaming block (`ingest::assemble`) builds on it.
    Drained,
}

/// Running totals of a source, for health and metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceCounters {
    pub bytes: u64,
    pub lines: u64,
    pub rollovers: u64,
    pub partial_lines_dropped: u64,
    pub files_reopened: u64,
    pub connects: u64,
    pub disconnects: u64,
    /// Messages in a NATS stream that were not node lines of ours, skipped.
    pub foreign_messages: u64,
    /// NATS: lines taken straight from their subject (the live path), not from the stream.
    pub live_lines: u64,
    /// NATS: subscriptions and publishes the server refused (permissions).
    pub permission_denied: u64,
}

/// A stream of node lines.
pub trait LineSource: Send + std::fmt::Debug {
    /// Delivers what is available, waiting up to `wait` for something to arrive when nothing is.
    fn poll(&mut self, wait: Duration, on: &mut dyn FnMut(SourceEvent<'_>)) -> io::Result<()>;
    /// Starts over with the lines of blocks after `height` (a snapshot's height).
    fn restart_after(&mut self, height: u64);
    /// Where to resume if the source loses its place: the last block ingest has fully seen.
    fn set_resume_after(&mut self, height: u64);
    fn counters(&self) -> SourceCounters;
    /// What keeps this source from delivering lines, if anything can be named (a missing folder, a NATS server out
    /// of reach); asked only while the source is silent, so it may look at the file system.
    fn problem(&mut self) -> Option<String> {
        None
    }
}
