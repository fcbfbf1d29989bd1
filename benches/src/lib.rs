//! What more than one benchmark needs. The benchmarks live in `benches/` (criterion and harness-less); what they
//! share with the tests they include by path: the process rig (`server/tests/procs`: hlsim, hlbook and
//! nats-server started and stopped one way; `build.rs` points it at the release binaries) and the capture
//! helpers (`server/tests/common`). Here: the simulator's write times, and hlbook's ingest run in the bench's own
//! process, so a bench can time a line from the simulator's write to ingest reading and applying it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::thread::JoinHandle;
use std::time::Duration;

use hlbook::book::Books;
use hlbook::config::Source;
use hlbook::ingest::info_client::SnapshotFrom;
use hlbook::ingest::live::{Ingest, LiveConfig};
use hlbook::node::Mode;
use hlbook::state::Shared;

/// Block height → when each of its lines was fully written (ns since the epoch), indexed by `Stream::index`
/// (fills, diffs, statuses), from the simulator's `--timing` CSV.
pub fn written_times(timing: &Path) -> HashMap<u64, [i64; 3]> {
    let text = std::fs::read_to_string(timing).expect("timing csv");
    let mut rows = text.lines();
    let header: Vec<&str> = rows.next().unwrap_or_default().split(',').collect();
    let col = |name: &str| header.iter().position(|c| *c == name).expect("a timing column");
    let cols = [col("fills_written_ns"), col("diffs_written_ns"), col("statuses_written_ns")];
    let mut out = HashMap::new();
    for row in rows {
        let f: Vec<i64> = row.split(',').filter_map(|x| x.parse().ok()).collect();
        if f.len() == header.len() {
            out.insert(f[0] as u64, cols.map(|c| f[c]));
        }
    }
    out
}

/// hlbook's ingest following a node's files, as `hlbook serve` runs it (file source, inotify, bootstrap from the
/// node's info server), on a thread of this process; its `shared` records when each line was read and applied.
#[derive(Debug)]
pub struct Follower {
    pub shared: Arc<Shared>,
    pub stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Follower {
    pub fn start(data: &Path, mode: Mode, info_url: &str, snapshots: &Path) -> Follower {
        let shared = Arc::new(Shared::new(Books::default(), Duration::from_secs(10)));
        let cfg = LiveConfig {
            sources: vec![Source::Files(data.to_path_buf())],
            mode,
            race_grace: Duration::from_secs(1),
            poll_interval: Duration::from_millis(100),
            stale_after: Duration::from_secs(10),
            snapshots: vec![SnapshotFrom::Info { url: info_url.to_string(), dir: snapshots.to_path_buf() }],
            stream_lines: true,
            resync_min_interval: Duration::from_secs(5),
            limits: hlbook::ingest::limits::Limits::default(),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let ingest = Ingest::new(cfg, shared.clone());
        let st = stop.clone();
        let thread = Some(std::thread::spawn(move || ingest.run(&st)));
        Follower { shared, stop, thread }
    }

    /// Stops ingest and waits for its thread.
    pub fn finish(mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().expect("ingest thread");
        }
    }
}
