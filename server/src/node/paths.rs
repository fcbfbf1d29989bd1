//! Where the node writes: `DATA/node_<stream>_<mode>/hourly/YYYYMMDD/H`.
//!
//! Hour files must be visited in time order, and the hour has no leading zero, so `10` sorts before `9` as text:
//! ordering is by (date, numeric hour). Anything else in those folders is ignored.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::line::{Mode, Stream};

/// An hour file of one stream, with its place in time.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct HourFile {
    /// `YYYYMMDD` as a number.
    pub date: u32,
    pub hour: u8,
    pub path: PathBuf,
}

/// The `hourly` folder of a stream.
pub fn hourly_dir(node_dir: &Path, mode: Mode, stream: Stream) -> PathBuf {
    node_dir.join(stream.dir(mode)).join("hourly")
}

/// The hour file path for a date and hour.
pub fn hour_path(node_dir: &Path, mode: Mode, stream: Stream, date: u32, hour: u8) -> PathBuf {
    hourly_dir(node_dir, mode, stream).join(date.to_string()).join(hour.to_string())
}

/// Every hour file of a stream, oldest first. A missing stream folder is an empty list.
pub fn hour_files(node_dir: &Path, mode: Mode, stream: Stream) -> io::Result<Vec<HourFile>> {
    hour_files_from(node_dir, mode, stream, 0)
}

/// The hour files of dates `from_date` and later, oldest first. A node keeps days of folders; a tail looking for
/// the file after its current one lists only the current day's folder and newer ones.
pub fn hour_files_from(node_dir: &Path, mode: Mode, stream: Stream, from_date: u32) -> io::Result<Vec<HourFile>> {
    hour_files_under(&hourly_dir(node_dir, mode, stream), from_date)
}

/// The hour files of dates `from_date` and later under an `hourly` folder (any stream's, `misc_events` too).
pub fn hour_files_under(root: &Path, from_date: u32) -> io::Result<Vec<HourFile>> {
    let mut out = Vec::new();
    for date_entry in read_dir_or_empty(root)? {
        let date_entry = date_entry?;
        let Some(date) = parse_date(&date_entry.file_name().to_string_lossy()) else {
            continue;
        };
        if date < from_date {
            continue;
        }
        for hour_entry in read_dir_or_empty(&date_entry.path())? {
            let hour_entry = hour_entry?;
            let Some(hour) = parse_hour(&hour_entry.file_name().to_string_lossy()) else {
                continue;
            };
            if hour_entry.file_type()?.is_file() {
                out.push(HourFile { date, hour, path: hour_entry.path() });
            }
        }
    }
    out.sort();
    Ok(out)
}

fn read_dir_or_empty(dir: &Path) -> io::Result<Box<dyn Iterator<Item = io::Result<fs::DirEntry>>>> {
    match fs::read_dir(dir) {
        Ok(rd) => Ok(Box::new(rd)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Box::new(std::iter::empty())),
        Err(e) => Err(e),
    }
}

fn parse_date(s: &str) -> Option<u32> {
    (s.len() == 8 && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok()).flatten()
}

fn parse_hour(s: &str) -> Option<u8> {
    let h: u8 = s.parse().ok()?;
    (h < 24 && (s == "0" || !s.starts_with('0'))).then_some(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_hours_numerically_across_dates() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for (date, hour) in [(20260505, 9), (20260505, 10), (20260505, 23), (20260506, 0), (20260504, 23)] {
            let p = hour_path(d, Mode::ByBlock, Stream::Diffs, date, hour);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(&p, "").unwrap();
        }
        // Noise that must be ignored.
        let noise = hourly_dir(d, Mode::ByBlock, Stream::Diffs).join("20260505");
        fs::write(noise.join("09"), "").unwrap();
        fs::write(noise.join("x.tmp"), "").unwrap();
        fs::create_dir_all(hourly_dir(d, Mode::ByBlock, Stream::Diffs).join("latest")).unwrap();
        let files = hour_files(d, Mode::ByBlock, Stream::Diffs).unwrap();
        let order: Vec<_> = files.iter().map(|f| (f.date, f.hour)).collect();
        assert_eq!(order, vec![(20260504, 23), (20260505, 9), (20260505, 10), (20260505, 23), (20260506, 0)]);
        assert!(hour_files(d, Mode::Streaming, Stream::Diffs).unwrap().is_empty());
    }
}
