//! Where an optional side stream (`misc_events`, `node_twap_statuses`) stands (is it read, and what its reader
//! counted), for `/health`, `/status` and `/metrics`. Kept in the state, beside the book sources' board, because
//! the reader runs in its own thread and the socket side only reads: hlbook serves without the stream, and says so
//! here.

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering::Relaxed};

crate::state::counter::counters! {
    /// A side stream reader's counters over the process's life (`ingest::side`), all monotonic. Exported as
    /// `hlbook_misc_<name>` / `hlbook_twap_<name>` and under `misc_events` / `twap_statuses` in the admin `/health`.
    pub struct MiscStreamCounters {
        /// Lines read.
        lines,
        /// Whole blocks handed to the publisher.
        blocks,
        /// Events in those blocks (misc_events: fundings, ledger updates and kinds passed over).
        events,
        /// Lines that did not parse, skipped whole.
        bad_lines,
        /// Events of a kind hlbook does not know, skipped.
        unknown_events,
        /// Events of a known kind that did not parse, skipped.
        malformed_events,
        /// By-block: places where blocks were missing (their events are lost to subscribers).
        gaps,
        /// Lines of blocks already handed out (a restarted node, a replaced file), dropped.
        duplicates,
        /// Lines over the length cap, skipped.
        lines_refused,
        /// Read errors (retried at the next poll).
        io_errors,
        /// Blocks the publisher could not take in time and dropped (their events are lost to subscribers).
        blocks_dropped,
    }
}

/// Whether the stream is read.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum MiscRead {
    /// Not looked at yet (the books are not loaded).
    Starting,
    /// The node does not write it (no folder), or no source is a node's files: served without it.
    Absent,
    Read,
}

impl MiscRead {
    pub fn as_str(self) -> &'static str {
        match self {
            MiscRead::Starting => "starting",
            MiscRead::Absent => "absent",
            MiscRead::Read => "read",
        }
    }
}

#[derive(Debug)]
pub struct MiscStream {
    read: AtomicU8,
    /// The last block handed to the publisher.
    height: AtomicU64,
    /// The height the reader started after (the books' when it started).
    from: AtomicU64,
    counters: MiscStreamCounters,
}

impl Default for MiscStream {
    fn default() -> MiscStream {
        let read = AtomicU8::new(MiscRead::Starting as u8);
        MiscStream { read, height: AtomicU64::new(0), from: AtomicU64::new(0), counters: MiscStreamCounters::default() }
    }
}

impl MiscStream {
    pub fn counters(&self) -> &MiscStreamCounters {
        &self.counters
    }

    pub fn set_read(&self, read: MiscRead) {
        self.read.store(read as u8, Relaxed);
    }

    pub fn set_height(&self, height: u64) {
        self.height.store(height, Relaxed);
    }

    /// The last block the live reader handed out (0: none yet).
    pub fn height(&self) -> u64 {
        self.height.load(Relaxed)
    }

    /// Records the height the reader starts after.
    pub fn set_from(&self, height: u64) {
        self.from.store(height, Relaxed);
    }

    pub fn from(&self) -> u64 {
        self.from.load(Relaxed)
    }

    pub fn read(&self) -> MiscRead {
        match self.read.load(Relaxed) {
            x if x == MiscRead::Read as u8 => MiscRead::Read,
            x if x == MiscRead::Absent as u8 => MiscRead::Absent,
            _ => MiscRead::Starting,
        }
    }

    /// `{"read": "read"|"absent"|"starting", "height": last block handed out, "counters": {…}}`.
    pub fn to_json(&self) -> serde_json::Value {
        let counters: serde_json::Map<String, serde_json::Value> =
            self.counters.to_list().into_iter().map(|c| (c.name.to_string(), c.value.into())).collect();
        let height = self.height.load(Relaxed);
        serde_json::json!({"read": self.read().as_str(), "height": height, "counters": counters})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn says_whether_it_is_read_with_its_counters() {
        let m = MiscStream::default();
        assert_eq!(m.to_json()["read"], "starting");
        m.set_read(MiscRead::Absent);
        assert_eq!(m.to_json()["read"], "absent");
        m.set_read(MiscRead::Read);
        m.counters().unknown_events.add(2);
        let j = m.to_json();
        assert_eq!((j["read"].as_str(), j["counters"]["unknown_events"].as_u64()), (Some("read"), Some(2)));
    }
}
