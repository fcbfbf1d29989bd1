//! The one reader of the node's fills hour files: the store's backfill (every file still on disk, on first start)
//! and its catch-up (the blocks it missed while it was down or fell behind) both go through it.
//!
//! Files are read oldest first, a file being skipped whole when the next one begins at or below the first height
//! wanted, so a catch-up of a few blocks opens one or two files. Lines are streamed (memory is one line); a last
//! line still being written (no newline yet) ends the read. Streaming mode writes one line per event: consecutive
//! lines of one height make one block. A line longer than `ingest.max_line_bytes` is skipped and counted, read
//! through to its newline in buffer-sized pieces and never held whole: a broken or hostile writer of the node's
//! files cannot make the store allocate one line's worth of memory past the limit ingest already applies.
//! What a line holds is read by `node::fills_light`: the node's formats are read only in `node`.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use super::candle::Trade;
use crate::node::fills_light::read_light_fills;
use crate::node::intern::Interner;
use crate::node::paths::hour_files;
use crate::node::{Address, Coin, Mode, Stream};

/// Where the node's fills files are.
#[derive(Clone, Debug)]
pub struct FillsDir {
    pub node_dir: PathBuf,
    pub mode: Mode,
    /// `ingest.max_line_bytes`: a longer line is skipped.
    pub max_line_bytes: usize,
}

/// One block's fills as the store takes them, from a file or from the live feed.
#[derive(Debug, Default)]
pub struct BlockFills {
    pub height: u64,
    /// Block time (ms).
    pub time_ms: i64,
    /// Every fill's trade, with its coin and tid (both sides of a trade: deduplicated by `candle::one_per_tid`).
    pub trades: Vec<(Coin, u64, Trade)>,
    /// Every fill object verbatim, with its user, in the node's order.
    pub users: Vec<(Address, std::sync::Arc<str>)>,
}

/// How a read went.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReadOutcome {
    /// The first and last heights handed out (0: none).
    pub first: u64,
    pub last: u64,
    /// Files opened.
    pub files: usize,
    /// Lines that did not parse (skipped).
    pub malformed: u64,
    /// Lines longer than `FillsDir::max_line_bytes` (skipped).
    pub too_long: u64,
}

/// What one capped line read found.
#[derive(Debug, PartialEq, Eq)]
enum Capped {
    /// A whole line (with its newline) is in the buffer.
    Line,
    /// A line over the cap, read through its newline and dropped.
    TooLong,
    /// End of file, or a last line still being written (no newline yet).
    End,
}

/// Reads one line into `line` (cleared first), holding at most `max` bytes of it: a longer one is consumed to its
/// newline without being kept.
fn read_capped(reader: &mut impl BufRead, line: &mut Vec<u8>, max: usize) -> io::Result<Capped> {
    line.clear();
    let mut over = false;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(Capped::End);
        }
        let (take, done) = match memchr::memchr(b'\n', buf) {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        if !over && line.len() + take > max.saturating_add(1) {
            over = true;
            line.clear();
        }
        if !over {
            line.extend_from_slice(&buf[..take]);
        }
        reader.consume(take);
        if done {
            return Ok(if over { Capped::TooLong } else { Capped::Line });
        }
    }
}

/// The block number of a file's first line (`None`: empty or unreadable).
fn first_height(path: &Path) -> Option<u64> {
    // The height is among a line's first fields: a line is never read whole for it.
    let mut line = Vec::new();
    BufReader::new(File::open(path).ok()?.take(4096)).read_until(b'\n', &mut line).ok()?;
    let at = memchr::memmem::find(&line, b"\"block_number\":")? + "\"block_number\":".len();
    let digits: Vec<u8> = line[at..].iter().copied().take_while(u8::is_ascii_digit).collect();
    std::str::from_utf8(&digits).ok()?.parse().ok()
}

/// Hands every block of heights `from..=to` the files hold to `each`, oldest first; `progress(files done, files
/// in all)` after each file. Stops early once `stop` says so (asked every line).
pub fn read_blocks(
    dir: &FillsDir,
    (from, to): (u64, u64),
    stop: &dyn Fn() -> bool,
    progress: &mut dyn FnMut(usize, usize),
    each: &mut dyn FnMut(BlockFills),
) -> ReadOutcome {
    let files = hour_files(&dir.node_dir, dir.mode, Stream::Fills).unwrap_or_default();
    let firsts: Vec<Option<u64>> = files.iter().map(|f| first_height(&f.path)).collect();
    let mut r = Reading::default();
    for (k, f) in files.iter().enumerate() {
        // Every block wanted is in a later file: the next one begins at or below `from` (streaming: below, as a
        // block's lines may straddle two files).
        let later = |h: u64| h < from || (h == from && dir.mode == Mode::ByBlock);
        if firsts.get(k + 1).copied().flatten().is_some_and(later) {
            progress(k + 1, files.len());
            continue;
        }
        if firsts[k].is_some_and(|h| h > to) || stop() {
            break;
        }
        r.out.files += 1;
        if !read_file(&f.path, dir.max_line_bytes, (from, to), stop, &mut r, each) {
            break;
        }
        progress(k + 1, files.len());
    }
    if let Some(b) = r.block.take() {
        hand(b, &mut r.out, each);
    }
    r.out
}

/// A read across files: the block being gathered (a streaming block's lines may straddle two), the tally, and
/// the coin names shared by every fill read.
#[derive(Default)]
struct Reading {
    block: Option<BlockFills>,
    out: ReadOutcome,
    coins: Interner,
}

fn hand(b: BlockFills, out: &mut ReadOutcome, each: &mut dyn FnMut(BlockFills)) {
    if out.first == 0 {
        out.first = b.height;
    }
    out.last = b.height;
    each(b);
}

/// One file's lines into blocks; false once the read is over (past `to`, or stopped).
fn read_file(
    path: &Path,
    max_line: usize,
    (from, to): (u64, u64),
    stop: &dyn Fn() -> bool,
    r: &mut Reading,
    each: &mut dyn FnMut(BlockFills),
) -> bool {
    let Reading { block, out, coins } = r;
    let Ok(file) = File::open(path) else { return true };
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut line = Vec::new();
    loop {
        if stop() {
            return false;
        }
        // A last line still being written has no newline yet: it is not read.
        match read_capped(&mut reader, &mut line, max_line) {
            Ok(Capped::End) | Err(_) => return true,
            Ok(Capped::TooLong) => {
                out.too_long += 1;
                tracing::warn!(path = %path.display(), "a fills line over ingest.max_line_bytes ({max_line}); skipped");
                continue;
            }
            Ok(Capped::Line) => {}
        }
        let Some(read) = read_light_fills(&line) else {
            out.malformed += 1;
            continue;
        };
        let h = read.height;
        if h < from {
            continue;
        }
        if h > to {
            return false;
        }
        out.malformed += read.malformed;
        if block.as_ref().is_some_and(|b| b.height != h)
            && let Some(b) = block.take()
        {
            hand(b, out, each);
        }
        let time_ms = read.block_time.div_euclid(1_000_000);
        let b = block.get_or_insert_with(|| BlockFills { height: h, time_ms, ..BlockFills::default() });
        for f in read.fills {
            b.trades.push((coins.str(&f.coin), f.tid, Trade { time: f.time, px: f.px, sz: f.sz }));
            b.users.push((f.user, std::sync::Arc::from(f.raw)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::time::parse_node_time;

    /// A by-block fills line of height `h` with one fill per (user, tid).
    pub(crate) fn line(h: u64, time: &str, fills: &[(&str, u64, &str)]) -> String {
        let ev: Vec<String> = fills
            .iter()
            .map(|(u, tid, px)| {
                format!(
                    r#"["{u}",{{"coin":"BTC","px":"{px}","sz":"0.5","side":"B","time":{},"tid":{tid},"x":1}}]"#,
                    1000 + h
                )
            })
            .collect();
        format!(r#"{{"local_time":"{time}","block_time":"{time}","block_number":{h},"events":[{}]}}"#, ev.join(","))
    }

    #[test]
    fn blocks_in_height_order_across_files_skipping_files_before_the_range() {
        let dir = tempfile::tempdir().unwrap();
        let a = "0x5eaac7c475b1fad85701f02c4e9e796a53f94bd5";
        let hourly = dir.path().join("node_fills_by_block/hourly/20260505");
        std::fs::create_dir_all(&hourly).unwrap();
        let t = "2026-05-05T09:00:00.0";
        std::fs::write(hourly.join("9"), format!("{}\n{}\n", line(1, t, &[(a, 1, "1.0")]), line(2, t, &[]))).unwrap();
        let third = line(3, t, &[(a, 3, "2.0"), (a, 3, "2.0")]);
        std::fs::write(hourly.join("10"), format!("{third}\n{}\n{{\"partial", line(4, t, &[]))).unwrap();
        let fd = FillsDir { node_dir: dir.path().to_path_buf(), mode: Mode::ByBlock, max_line_bytes: 1 << 20 };
        let read = |from, to| {
            let mut got = Vec::new();
            let o =
                read_blocks(&fd, (from, to), &|| false, &mut |_, _| {}, &mut |b| got.push((b.height, b.users.len())));
            (got, o.files)
        };
        assert_eq!(read(0, u64::MAX), (vec![(1, 1), (2, 0), (3, 2), (4, 0)], 2));
        assert_eq!(read(3, 3), (vec![(3, 2)], 1), "the first file ends before 3: not opened");
        assert_eq!(read(2, 2), (vec![(2, 0)], 1));
        // Streaming: block 3's lines straddle two files; reading from 3 opens both.
        let streaming = dir.path().join("node_fills_streaming/hourly/20260505");
        std::fs::create_dir_all(&streaming).unwrap();
        let part = |tid| line(3, t, &[(a, tid, "2.0")]);
        std::fs::write(streaming.join("9"), format!("{}\n{}\n", line(2, t, &[(a, 1, "1.0")]), part(3))).unwrap();
        std::fs::write(streaming.join("10"), format!("{}\n{}\n", part(4), line(4, t, &[(a, 5, "1.0")]))).unwrap();
        let sd = FillsDir { node_dir: dir.path().to_path_buf(), mode: Mode::Streaming, max_line_bytes: 1 << 20 };
        let mut got = Vec::new();
        read_blocks(&sd, (3, 3), &|| false, &mut |_, _| {}, &mut |b| got.push((b.height, b.users.len())));
        assert_eq!(got, [(3, 2)], "both parts of block 3");
        let mut times = Vec::new();
        read_blocks(&fd, (3, 3), &|| false, &mut |_, _| {}, &mut |b| times.push(b.time_ms));
        assert_eq!(times, [parse_node_time(t).unwrap() / 1_000_000]);
    }

    #[test]
    fn a_line_over_the_cap_is_skipped_and_counted_never_held() {
        let dir = tempfile::tempdir().unwrap();
        let a = "0x5eaac7c475b1fad85701f02c4e9e796a53f94bd5";
        let hourly = dir.path().join("node_fills_by_block/hourly/20260505");
        std::fs::create_dir_all(&hourly).unwrap();
        let t = "2026-05-05T09:00:00.0";
        let (one, three) = (line(1, t, &[(a, 1, "1.0")]), line(3, t, &[(a, 3, "2.0")]));
        // Block 2's line is 4 MB of fills, far past a 1 kB cap and past the reader's 1 MB buffer.
        let fills: Vec<(&str, u64, &str)> = (0..30_000).map(|i| (a, 10 + i, "1.5")).collect();
        let long = line(2, t, &fills);
        std::fs::write(hourly.join("9"), format!("{one}\n{long}\n{three}\n")).unwrap();
        let fd = FillsDir { node_dir: dir.path().to_path_buf(), mode: Mode::ByBlock, max_line_bytes: 1024 };
        let mut got = Vec::new();
        let o = read_blocks(&fd, (0, u64::MAX), &|| false, &mut |_, _| {}, &mut |b| got.push(b.height));
        // On the old code the 4 MB line was read whole and handed out: [1, 2, 3], and nothing counted.
        assert_eq!((got, o.too_long, o.malformed), (vec![1, 3], 1, 0), "the lines around it are read");
    }

    #[test]
    fn the_capped_read_keeps_a_line_at_the_cap_and_drops_one_byte_more() {
        let text = b"abcd\nabcde\nab";
        let mut r = BufReader::with_capacity(2, &text[..]);
        let mut line = Vec::new();
        assert_eq!(read_capped(&mut r, &mut line, 4).unwrap(), Capped::Line);
        assert_eq!(line, b"abcd\n");
        assert_eq!(read_capped(&mut r, &mut line, 4).unwrap(), Capped::TooLong);
        assert!(line.len() <= 5, "never more than the cap and its newline held");
        assert_eq!(read_capped(&mut r, &mut line, 4).unwrap(), Capped::End, "a last line without its newline");
    }
}
