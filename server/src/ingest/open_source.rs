//! Opening a configured source (`config::Source`: `--source`, `ingest.sources`) as the `LineSource` ingest reads.
//! Its own module because the single reader (`input`) and the race's readers (`race_reader`) both open sources,
//! and the trait's module (`line_source`) must not name the implementations that import it.

use super::file_source::FileSource;
use super::line_source::LineSource;
use super::nats::source::NatsSource;
use crate::config::Source;
use crate::node::Mode;

/// `source`, positioned after `height`; `lines`: streaming at line speed (`FileSource::fills_first`); lines over
/// `max_line` bytes are refused.
pub fn open_source(source: &Source, mode: Mode, height: u64, lines: bool, max_line: usize) -> Box<dyn LineSource> {
    match source {
        Source::Files(dir) if lines => Box::new(FileSource::new(dir, mode, height, max_line).fills_first()),
        Source::Files(dir) => Box::new(FileSource::new(dir, mode, height, max_line)),
        Source::Nats(t) => Box::new(NatsSource::new(t, mode, height, max_line)),
    }
}
