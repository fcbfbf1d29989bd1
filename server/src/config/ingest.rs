//! `[ingest]`: where the node's lines come from and how they are read.

use std::path::PathBuf;

use serde::Deserialize;

use crate::node::Mode;

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct IngestConfig {
    /// The node's data dir (`~/hl/data`); `~` is expanded.
    pub node_dir: PathBuf,
    /// `by-block` (`--batch-by-block`) or `streaming` (`--stream-with-block-info`).
    pub mode: Mode,
    /// `file` (read `node_dir`), `file:PATH` (another data dir) or `nats://HOST:PORT[/STREAM]` (`hlbook relay`).
    pub source: String,
    /// Several sources to race, each as in `source` (overrides it when not empty): every line is taken from the
    /// one that delivers it first and checked against the others. By-block only.
    pub sources: Vec<String>,
    /// Racing: how long a line one source skipped may take to come from another before its block counts as
    /// broken (resync), in milliseconds.
    pub race_grace_ms: u64,
    /// Streaming mode: publish each batch of lines as it lands (true), or each block once it is whole.
    pub stream_lines: bool,
    /// At most one snapshot request (resync) per this many seconds, whatever caused it.
    pub resync_min_interval_secs: f64,
    /// The node's info server; empty: no snapshots (bootstrap needs `snapshot_file` then, and no resync).
    pub info_url: String,
    /// Where the node writes the snapshots we ask for: it must be able to write there, and we to read.
    pub snapshot_dir: PathBuf,
    /// Start from this snapshot file instead of asking the node (later resyncs still ask the node).
    pub snapshot_file: Option<PathBuf>,
    /// No block for this long: `stale`.
    pub stale_after_secs: f64,
    /// Slow poll of the source when no file event arrives, in milliseconds.
    pub poll_interval_ms: u64,
    /// Compare with a node snapshot this often; 0 disables periodic validation (coins that racing sources disagree
    /// about are still repaired at once from a snapshot).
    pub validate_interval_secs: f64,
    /// Longest line taken from a source (file or relay), in bytes; a longer one is refused as lost.
    pub max_line_bytes: usize,
    /// A line of a block more than this many blocks past the last one handed out is refused.
    pub max_height_jump: u64,
    /// Racing: later blocks that may wait for a missing earlier one; at this many it is lost (resync), whatever
    /// `race_grace_ms` says.
    pub race_max_parked_blocks: usize,
    /// Bytes of lines held for blocks not whole yet (one stream running ahead of another, one source or several);
    /// past it the source counts as broken and the books resync.
    pub max_pending_bytes: usize,
}

impl Default for IngestConfig {
    fn default() -> IngestConfig {
        IngestConfig {
            node_dir: PathBuf::from("~/hl/data"),
            mode: Mode::ByBlock,
            source: "file".into(),
            sources: Vec::new(),
            race_grace_ms: 1000,
            stream_lines: true,
            resync_min_interval_secs: 5.0,
            info_url: "http://127.0.0.1:3001/info".into(),
            snapshot_dir: std::env::temp_dir().join("hlbook-snapshots"),
            snapshot_file: None,
            stale_after_secs: 10.0,
            poll_interval_ms: 100,
            validate_interval_secs: 60.0,
            // The defaults of `ingest::limits` (config sits below ingest; tests/source_limits.rs holds them equal).
            max_line_bytes: 64 << 20,
            max_height_jump: 10_000,
            race_max_parked_blocks: 256,
            max_pending_bytes: 1 << 30,
        }
    }
}
