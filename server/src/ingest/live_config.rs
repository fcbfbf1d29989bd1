//! `LiveConfig`: what live ingest is told at start (sources, mode, timings, limits). Its own module because both
//! the ingest loop (`live`) and the reading side (`input`) take it, and neither should import the other for it.

use std::time::Duration;

use super::info_client::SnapshotFrom;
use super::limits::Limits;
use crate::config::Source;
use crate::node::Mode;

#[derive(Clone, Debug)]
pub struct LiveConfig {
    /// Where lines come from; several race (`ingest::race`), by-block only.
    pub sources: Vec<Source>,
    pub mode: Mode,
    /// Racing: how long a line one source skipped may take to come from another before its block is broken.
    pub race_grace: Duration,
    /// How long to wait for input before looking again (inotify usually wakes ingest much sooner).
    pub poll_interval: Duration,
    /// No block for this long: `stale`.
    pub stale_after: Duration,
    /// Where snapshots come from when the books need one. `None`: keep the books given, never resync.
    pub snapshots: Vec<SnapshotFrom>,
    /// Streaming mode: publish each read batch of lines as it lands (true), or each block once it is whole.
    pub stream_lines: bool,
    /// At most one snapshot request (a resync) per this long, whatever loses the stream: each one makes the node
    /// write a whole snapshot, so no source, peer or fault can make it do so in a loop.
    pub resync_min_interval: Duration,
    /// What a source may feed ingest (`ingest::limits`).
    pub limits: Limits,
}
