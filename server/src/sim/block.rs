//! One produced block's events, already serialized, per stream, plus the order in which streaming mode writes
//! the diff and status events (each order's diff just before its status).
//!
//! A stream's events live in one byte buffer joined by commas, so a by-block line is its envelope around the
//! buffer as it is, and a streaming line is one slice of it.

use crate::node::Stream;

/// The serialized events of one stream.
#[derive(Clone, Debug, Default)]
pub struct StreamBuf {
    /// Events joined by `,`.
    pub data: Vec<u8>,
    /// End offset (exclusive) of each event in `data`.
    pub ends: Vec<usize>,
}

impl StreamBuf {
    /// Starts a new event; returns the buffer to write it into. Call `end` after writing.
    pub fn begin(&mut self) -> &mut Vec<u8> {
        if !self.ends.is_empty() {
            self.data.push(b',');
        }
        &mut self.data
    }

    pub fn end(&mut self) {
        self.ends.push(self.data.len());
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The bytes of event `i`.
    pub fn event(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] + 1 };
        &self.data[start..self.ends[i]]
    }

    fn clear(&mut self) {
        self.data.clear();
        self.ends.clear();
    }
}

#[derive(Clone, Debug, Default)]
pub struct BlockOut {
    pub height: u64,
    pub block_time: i64,
    /// Indexed by `Stream::index`.
    pub streams: [StreamBuf; 3],
    /// Runs of consecutive diff/status events in streaming write order: (stream, count).
    pub seq: Vec<(Stream, usize)>,
    /// `misc_events` (`--write-misc-events`), written by `misc_out` apart from the three book streams.
    pub misc: StreamBuf,
    /// `node_twap_statuses` (`--write-twaps`), written like `misc`.
    pub twaps: StreamBuf,
}

impl BlockOut {
    pub fn reset(&mut self, height: u64, block_time: i64) {
        self.height = height;
        self.block_time = block_time;
        for s in &mut self.streams {
            s.clear();
        }
        self.seq.clear();
        self.misc.clear();
        self.twaps.clear();
    }

    pub fn stream(&self, s: Stream) -> &StreamBuf {
        &self.streams[s.index()]
    }

    /// Writes one event of `s` with `write`; diffs and statuses are also noted in streaming order (the writer
    /// spreads a block's fills over them).
    pub fn event(&mut self, s: Stream, write: impl FnOnce(&mut Vec<u8>)) {
        write(self.streams[s.index()].begin());
        self.streams[s.index()].end();
        if s != Stream::Fills {
            self.note(s);
        }
    }

    /// Notes that one more event of `s` (diffs or statuses) follows in streaming order.
    pub fn note(&mut self, s: Stream) {
        match self.seq.last_mut() {
            Some((last, n)) if *last == s => *n += 1,
            _ => self.seq.push((s, 1)),
        }
    }
}
