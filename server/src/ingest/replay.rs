//! Replaying finished node files from a snapshot: the capture checker behind `hlbook replay`, and the oracle that
//! live ingest is tested against.
//!
//! The three streams are merged by height (always pushing the stream whose next line is lowest), so only a block
//! or two is ever pending however long the capture is.

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};

use crate::book::{Books, Outcome};
use crate::node::paths::{HourFile, hour_files};
use crate::node::{Block, Line, LineError, Mode, NodeParser, Stream};

use super::assemble::{Assembled, Assembler};

#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("reading {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path}:{line_no}: {source}")]
    Line { path: PathBuf, line_no: u64, source: LineError },
    #[error("block {height} is incomplete: no line from {missing}")]
    Broken { height: u64, missing: String },
    #[error("gap: expected block {expected}, next is {got}")]
    Gap { expected: u64, got: u64 },
}

/// What a replay hands to its caller for each block.
#[derive(Debug)]
pub struct ReplayedBlock<'a> {
    pub block: &'a Block,
    pub outcome: &'a Outcome,
    pub books: &'a Books,
}

/// Replays every line of `node_dir` (mode `mode`) onto `books`, calling `on_step` after each block.
/// Stops with an error at the first lost line or gap: past it the books could not be trusted.
pub fn replay(
    books: &mut Books,
    node_dir: &Path,
    mode: Mode,
    mut on_step: impl FnMut(ReplayedBlock<'_>),
) -> Result<(), ReplayError> {
    let mut parser = NodeParser::new();
    let mut assembler = Assembler::new(mode, books.height());
    let mut streams = Vec::new();
    for s in Stream::ALL {
        streams.push(StreamLines::open(node_dir, mode, s)?);
    }
    let mut peeked: [Option<Line>; 3] = [None, None, None];
    loop {
        for (i, s) in streams.iter_mut().enumerate() {
            if peeked[i].is_none() {
                peeked[i] = s.next_line(&mut parser)?;
            }
        }
        let lowest = (0..3).filter(|&i| peeked[i].is_some()).min_by_key(|&i| peeked[i].as_ref().map(|l| l.meta.height));
        match lowest.and_then(|i| peeked[i].take().map(|l| (Stream::ALL[i], l))) {
            Some((stream, line)) => assembler.push(stream, line),
            None => assembler.finish(),
        }
        while let Some(next) = assembler.next_block() {
            apply(books, next, &mut on_step)?;
        }
        if lowest.is_none() {
            return Ok(());
        }
    }
}

fn apply(books: &mut Books, next: Assembled, on_step: &mut impl FnMut(ReplayedBlock<'_>)) -> Result<(), ReplayError> {
    let block = match next {
        Assembled::Block(b) => b,
        Assembled::Broken { height, missing } => {
            let missing = missing.iter().map(|s| s.name()).collect::<Vec<_>>().join(", ");
            return Err(ReplayError::Broken { height, missing });
        }
        // Replay assembles whole blocks only (its assembler hands out no lines).
        Assembled::Line { .. } | Assembled::Fills(_) => return Ok(()),
    };
    let outcome = books.apply(&block);
    on_step(ReplayedBlock { block: &block, outcome: &outcome, books });
    match outcome {
        Outcome::Gap { expected, got } => Err(ReplayError::Gap { expected, got }),
        _ => Ok(()),
    }
}

/// The lines of one stream across its hour files, in order.
struct StreamLines {
    stream: Stream,
    files: std::vec::IntoIter<HourFile>,
    current: Option<(PathBuf, BufReader<File>, u64)>,
    buf: String,
}

impl StreamLines {
    fn open(node_dir: &Path, mode: Mode, stream: Stream) -> Result<StreamLines, ReplayError> {
        let files = hour_files(node_dir, mode, stream)
            .map_err(|source| ReplayError::Io { path: node_dir.to_path_buf(), source })?;
        Ok(StreamLines { stream, files: files.into_iter(), current: None, buf: String::new() })
    }

    fn next_line(&mut self, parser: &mut NodeParser) -> Result<Option<Line>, ReplayError> {
        loop {
            if self.current.is_none() {
                let Some(f) = self.files.next() else {
                    return Ok(None);
                };
                let file = File::open(&f.path).map_err(|source| ReplayError::Io { path: f.path.clone(), source })?;
                self.current = Some((f.path, BufReader::with_capacity(1 << 20, file), 0));
            }
            let Some((path, reader, line_no)) = self.current.as_mut() else {
                continue;
            };
            self.buf.clear();
            let n = reader.read_line(&mut self.buf).map_err(|source| ReplayError::Io { path: path.clone(), source })?;
            if n == 0 {
                self.current = None;
                continue;
            }
            *line_no += 1;
            let text = self.buf.trim_end_matches(['\n', '\r']);
            if text.is_empty() {
                continue;
            }
            return parser.parse(self.stream, text).map(Some).map_err(|source| ReplayError::Line {
                path: path.clone(),
                line_no: *line_no,
                source,
            });
        }
    }
}
