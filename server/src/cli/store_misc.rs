//! `serve`'s thread that keeps misc_events in the history store: it follows the node's misc_events files with
//! ingest's reader (`ingest::misc::MiscReader`, the live reader's rules) from the store's last committed
//! misc_events height, turns each block into user entries (`publish::misc_frames::entries_of`, the shapes the
//! info answers serve) and commits them (`store::misc_writer`). Here because it joins three stages: the store
//! comes before ingest and the publisher in the dependency order.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

use crate::ingest::misc::{MiscReader, misc_present};
use crate::node::Mode;
use crate::publish::misc_frames::entries_of;
use crate::store::Store;
use crate::store::misc_writer::MiscWriter;

/// Where the thread reads from.
#[derive(Clone, Debug)]
pub struct MiscFiles {
    pub node_dir: PathBuf,
    pub mode: Mode,
    pub poll: Duration,
}

/// Reads what the files hold after the writer's height and commits it; the entries written.
fn pass(reader: &mut MiscReader, writer: &mut MiscWriter<'_>) -> Result<u64, String> {
    let mut blocks = Vec::new();
    if let Err(e) = reader.poll(&mut |b| blocks.push(entries_of(&b))) {
        tracing::warn!(error = %e, "history store: misc_events read failed; retried");
    }
    writer.write(&blocks)
}

/// Follows the node's misc_events files into the store until `stop`; waits for the folder while the node writes
/// none. A failed commit is retried from the last committed height.
pub fn run(store: &Store, files: &MiscFiles, retention_days: u32, stop: &AtomicBool) {
    let mut reader: Option<(MiscReader, MiscWriter<'_>)> = None;
    let mut said_absent = false;
    while !stop.load(Relaxed) {
        match &mut reader {
            None if !misc_present(&files.node_dir, files.mode) => {
                if !said_absent {
                    tracing::info!("history store: no misc_events folder; fundings and ledger updates not kept yet");
                    said_absent = true;
                }
            }
            None => match MiscWriter::new(store, files.mode, retention_days) {
                Ok(w) => {
                    tracing::info!(after = w.height(), "history store: reading misc_events");
                    reader = Some((MiscReader::new(&files.node_dir, files.mode, w.height()), w));
                    continue;
                }
                Err(e) => tracing::error!("history store: misc_events: {e}"),
            },
            Some((r, w)) => {
                if let Err(e) = pass(r, w) {
                    tracing::error!("history store: {e}; reading misc_events again from the last commit");
                    reader = None;
                }
            }
        }
        std::thread::sleep(files.poll);
    }
}

#[cfg(test)]
#[path = "store_misc_tests.rs"]
mod tests;
