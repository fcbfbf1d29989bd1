//! One racing source's reader thread: it owns the source and a parser, positions them when the ingest thread says
//! (`Control`), and sends each line to the race as soon as it is parsed, so a slow, silent or restarting source holds
//! back only its own thread. Lines at or below the applied height are only hashed: they can only be copies.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::SyncSender;
use std::time::{Duration, Instant};

use super::{Control, Msg, Parsed, Raced, digest};
use crate::config::Source;
use crate::ingest::data_dir::diagnose_dir;
use crate::ingest::limits::Limits;
use crate::ingest::line_source::{LineSource, SourceEvent};
use crate::ingest::open_source::open_source;
use crate::ingest::tail::block_number;
use crate::node::time::now_nanos;
use crate::node::{Mode, NodeParser, Stream};
use crate::state::sources::SourceEntry;

/// One source's reader thread.
pub(super) struct Reader {
    pub(super) src: usize,
    pub(super) spec: Source,
    pub(super) mode: Mode,
    pub(super) poll: Duration,
    pub(super) limits: Limits,
    pub(super) ctl: Arc<Control>,
    pub(super) entry: Arc<SourceEntry>,
    pub(super) tx: SyncSender<Msg>,
}

impl Reader {
    pub(super) fn run(self, mut parser: NodeParser) {
        let mut source = None;
        let mut generation = 0;
        let mut checked = Instant::now().checked_sub(Duration::from_secs(10)).unwrap_or_else(Instant::now);
        while !self.ctl.stop.load(Ordering::Relaxed) {
            let g = self.ctl.generation.load(Ordering::Acquire);
            if g != generation {
                generation = g;
                let h = self.ctl.restart_height.load(Ordering::Relaxed);
                match &mut source {
                    None => source = Some(open_source(&self.spec, self.mode, h, false, self.limits.max_line_bytes)),
                    Some(s) => {
                        let s: &mut Box<dyn LineSource> = s;
                        s.restart_after(h);
                        if self.tx.send(Msg::Restart(self.src)).is_err() {
                            return;
                        }
                    }
                }
                self.entry.reset_height(h);
            }
            let Some(s) = source.as_mut() else {
                // Not positioned yet (the snapshot's height is not known): say what is missing meanwhile.
                if checked.elapsed() >= Duration::from_secs(1) {
                    checked = Instant::now();
                    if let Source::Files(dir) = &self.spec {
                        self.entry.set_problem(diagnose_dir(dir, self.mode));
                    }
                }
                std::thread::sleep(self.poll.min(Duration::from_millis(50)));
                continue;
            };
            let floor = self.ctl.floor.load(Ordering::Relaxed);
            s.set_resume_after(floor);
            let (mut any, mut gone, mut restarted) = (false, false, false);
            // Each line goes over as soon as it is parsed: a block's diffs line (l2Book, bbo) must not wait for
            // its long statuses line read in the same poll.
            let polled = s.poll(self.poll, &mut |ev| match ev {
                SourceEvent::Line(stream, bytes) => {
                    any = true;
                    let line = self.parse(&mut parser, stream, bytes, floor);
                    gone |= !gone && self.tx.send(Msg::Line(self.src, line)).is_err();
                }
                SourceEvent::TooLong { stream, height, bytes } => {
                    any = true;
                    self.entry.refused.inc();
                    self.limits.log_too_long(&self.entry.name, stream, height, bytes);
                    let parsed = Parsed::TooLong;
                    let line = Raced {
                        stream,
                        height: height.unwrap_or(0),
                        digest: 0,
                        read_at: now_nanos(),
                        parsed,
                        off_layout: false,
                        bytes: 0,
                    };
                    gone |= !gone && self.tx.send(Msg::Line(self.src, line)).is_err();
                }
                SourceEvent::Restart => restarted = true,
                // Racing is by-block: a block is whole when each stream gave its one line.
                SourceEvent::Drained => {}
            });
            if gone {
                return;
            }
            if let Err(e) = &polled {
                tracing::warn!(source = %self.entry.name, "reading node lines: {e}");
                self.entry.set_problem(Some(e.to_string()));
                std::thread::sleep(self.poll);
            }
            if restarted {
                self.entry.restarts.inc();
                if self.tx.send(Msg::Restart(self.src)).is_err() {
                    return;
                }
            }
            if !any {
                if checked.elapsed() >= Duration::from_secs(1) {
                    checked = Instant::now();
                    self.entry.set_problem(s.problem());
                }
                continue;
            }
            if polled.is_ok() {
                self.entry.set_problem(None);
            }
        }
    }

    fn parse(&self, parser: &mut NodeParser, stream: Stream, bytes: &[u8], floor: u64) -> Raced {
        let read_at = now_nanos();
        let head = block_number(bytes);
        let off_layout = parser.off_layout(stream);
        let parsed = if head.is_some_and(|h| h <= floor) {
            Parsed::Copy
        } else {
            match parser.parse_bytes(stream, bytes) {
                Ok(line) => Parsed::Line(line),
                Err(e) => {
                    self.entry.malformed.inc();
                    let start = String::from_utf8_lossy(&bytes[..bytes.len().min(120)]).into_owned();
                    tracing::warn!(source = %self.entry.name, %stream, "malformed node line ({e}); starts {start:?}");
                    Parsed::Malformed
                }
            }
        };
        let height = match &parsed {
            Parsed::Line(l) => l.meta.height,
            _ => head.unwrap_or(0),
        };
        if !self.limits.too_far_ahead(height, floor) {
            // A line too far ahead is refused by the race; it must not make this source look far ahead meanwhile.
            self.entry.line(height);
        }
        self.entry.touch(read_at);
        let off_layout = parser.off_layout(stream) > off_layout;
        Raced { stream, height, digest: digest(bytes), read_at, parsed, off_layout, bytes: bytes.len() }
    }
}
