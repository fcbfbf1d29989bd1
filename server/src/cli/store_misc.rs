//! `serve`'s threads that keep the side streams in the history store: each follows the node's files of one stream
//! (misc_events, node_twap_statuses) with ingest's reader (`ingest::side::SideReader`, the live reader's rules)
//! from the store's last committed height of that stream, turns each block into user entries (misc_events:
//! `publish::misc_frames::entries_of`; node_twap_statuses: `publish::twap_frames::entries_of`, the shapes the
//! info answers serve) and commits them (`store::misc_writer`). Here because it joins three stages: the store
//! comes before ingest and the publisher in the dependency order.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

use crate::ingest::side::{SideReader, SideStream, present};
use crate::node::Mode;
use crate::node::misc::EventBlock;
use crate::store::Store;
use crate::store::misc_writer::MiscWriter;
use crate::store::user_events::EntryBlock;

/// A side stream as the store keeps it: its name there, and how a block becomes entries.
pub type Kept<E> = (&'static str, fn(&EventBlock<E>) -> EntryBlock);

/// Where the thread reads from.
#[derive(Clone, Debug)]
pub struct MiscFiles {
    pub node_dir: PathBuf,
    pub mode: Mode,
    pub poll: Duration,
}

/// Entries a pass gathers before it commits them: a first start reading days of files commits as it goes,
/// holding about this many entries, never the files.
const COMMIT_ENTRIES: usize = 50_000;

/// Reads what the files hold after the writer's height and commits it, a batch at a time; the entries written.
fn pass<S: SideStream>(
    reader: &mut SideReader<S>,
    writer: &mut MiscWriter<'_>,
    entries: fn(&EventBlock<S::Event>) -> EntryBlock,
) -> Result<u64, String> {
    let (mut blocks, mut held, mut written, mut failed) = (Vec::new(), 0, 0, None);
    let read = reader.poll(&mut |b| {
        if failed.is_some() {
            return;
        }
        let block = entries(&b);
        held += block.entries.len();
        blocks.push(block);
        if held >= COMMIT_ENTRIES {
            match writer.write(&blocks) {
                Ok(n) => written += n,
                Err(e) => failed = Some(e),
            }
            (blocks, held) = (Vec::new(), 0);
        }
    });
    if let Err(e) = read {
        tracing::warn!(error = %e, "history store: {} read failed; retried", S::NAME);
    }
    // A failed commit: the reader starts again from the last committed height.
    if let Some(e) = failed {
        return Err(e);
    }
    Ok(written + writer.write(&blocks)?)
}

/// Follows the node's files of side stream `S` into the store, kept as `kept` says, until `stop`; waits for the
/// folder while the node writes none. A failed commit is retried from the last committed height.
pub fn run<S: SideStream>(store: &Store, files: &MiscFiles, days: u32, stop: &AtomicBool, kept: Kept<S::Event>) {
    let (stream, entries) = kept;
    let mut reader: Option<(SideReader<S>, MiscWriter<'_>)> = None;
    let mut said_absent = false;
    while !stop.load(Relaxed) {
        match &mut reader {
            None if !present::<S>(&files.node_dir, files.mode) => {
                if !said_absent {
                    tracing::info!("history store: no {} folder; {}", S::NAME, S::WITHOUT);
                    said_absent = true;
                }
            }
            None => match MiscWriter::of(store, stream, files.mode, days) {
                Ok(w) => {
                    tracing::info!(after = w.height(), "history store: reading {}", S::NAME);
                    reader = Some((SideReader::new(&files.node_dir, files.mode, w.height()), w));
                    continue;
                }
                Err(e) => tracing::error!("history store: {}: {e}", S::NAME),
            },
            Some((r, w)) => {
                if let Err(e) = pass(r, w, entries) {
                    tracing::error!("history store: {e}; reading {} again from the last commit", S::NAME);
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
