//! Waking ingest when the node writes: the ingest thread waits on inotify itself.
//!
//! `notify` hands each event to a thread of its own, which then wakes ingest through a channel: two wake-ups, and
//! two waits for a free core when the node and the clients keep both busy, before a line is read. Here the ingest
//! thread sleeps in poll(2) on the inotify descriptor and reads the events itself, so a write wakes exactly the
//! thread that reads the file. Written on the `inotify` crate (which `notify` wraps) because `notify` only delivers
//! events through its own thread.
//!
//! Watched: each stream's `hourly` folder (date folders appear) and every date folder in it (hour files appear
//! and grow). A data write is reported as such; anything else (a file or folder created, moved, deleted, or lost
//! events) as a folder change, so the tails look for new hour files only then.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask};
use rustc_hash::FxHashMap;
use rustix::event::{PollFd, PollFlags, Timespec, poll};

/// What the events since the last look said.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Woken {
    /// A watched file was written.
    pub data: bool,
    /// Files or folders appeared or went, or events were lost: look for new hour files.
    pub dirs_changed: bool,
}

/// An inotify instance read by the thread that reads the files.
#[derive(Debug)]
pub struct Wake {
    inotify: Option<Inotify>,
    /// Watched folders; `true` for an `hourly` folder, whose new subfolders are watched too.
    dirs: FxHashMap<WatchDescriptor, (PathBuf, bool)>,
    buf: Vec<u8>,
}

const ROOT: WatchMask = WatchMask::CREATE
    .union(WatchMask::MOVED_TO)
    .union(WatchMask::MOVED_FROM)
    .union(WatchMask::DELETE)
    .union(WatchMask::DELETE_SELF)
    .union(WatchMask::MOVE_SELF)
    .union(WatchMask::ONLYDIR);
const DATE: WatchMask = ROOT.union(WatchMask::MODIFY);

impl Default for Wake {
    fn default() -> Wake {
        Wake::new()
    }
}

impl Wake {
    /// A new instance; without inotify (unavailable, or out of instances) every wait is a plain sleep.
    pub fn new() -> Wake {
        let inotify = Inotify::init().map_err(|e| tracing::warn!("inotify unavailable, polling only: {e}")).ok();
        Wake { inotify, dirs: FxHashMap::default(), buf: vec![0; 64 << 10] }
    }

    pub fn is_active(&self) -> bool {
        self.inotify.is_some()
    }

    /// Watches an `hourly` folder and its date folders; false when the folder does not exist yet (or inotify is
    /// off). Watching a folder twice is harmless: inotify returns the same watch.
    pub fn watch_tree(&mut self, root: &Path) -> bool {
        if self.inotify.is_none() || !root.is_dir() || self.add(root, true).is_err() {
            return false;
        }
        if let Ok(entries) = std::fs::read_dir(root) {
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    let _ = self.add(&e.path(), false);
                }
            }
        }
        true
    }

    fn add(&mut self, dir: &Path, root: bool) -> io::Result<()> {
        let Some(ino) = self.inotify.as_mut() else { return Ok(()) };
        let wd = ino.watches().add(dir, if root { ROOT } else { DATE })?;
        self.dirs.insert(wd, (dir.to_path_buf(), root));
        Ok(())
    }

    /// Takes the events queued now, without waiting.
    pub fn take(&mut self) -> Woken {
        let mut woken = Woken::default();
        self.drain(&mut woken);
        woken
    }

    /// Waits up to `wait` for an event and takes every event queued by then. Without inotify, sleeps `wait` and
    /// reports a folder change so the caller looks everywhere.
    pub fn wait(&mut self, wait: Duration) -> Woken {
        let Some(ino) = self.inotify.as_ref() else {
            std::thread::sleep(wait);
            return Woken { data: true, dirs_changed: true };
        };
        let timeout = Timespec::try_from(wait).unwrap_or(Timespec { tv_sec: 1, tv_nsec: 0 });
        let mut fds = [PollFd::new(ino, PollFlags::IN)];
        if let Err(e) = poll(&mut fds, Some(&timeout))
            && e != rustix::io::Errno::INTR
        {
            tracing::warn!("waiting for inotify: {e}");
        }
        self.take()
    }

    /// Reads queued events until none are left.
    fn drain(&mut self, woken: &mut Woken) {
        let mut new_dirs = Vec::new();
        loop {
            let Some(ino) = self.inotify.as_mut() else { return };
            let events = match ino.read_events(&mut self.buf) {
                Ok(events) => events,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    tracing::warn!("reading inotify events: {e}");
                    woken.dirs_changed = true;
                    break;
                }
            };
            for ev in events {
                if ev.mask == EventMask::MODIFY {
                    woken.data = true;
                    continue;
                }
                woken.dirs_changed = true;
                if ev.mask.contains(EventMask::IGNORED) {
                    self.dirs.remove(&ev.wd);
                    continue;
                }
                let Some((path, true)) = self.dirs.get(&ev.wd) else { continue };
                if ev.mask.contains(EventMask::ISDIR)
                    && ev.mask.intersects(EventMask::CREATE | EventMask::MOVED_TO)
                    && let Some(name) = ev.name
                {
                    new_dirs.push(path.join(name));
                }
            }
        }
        for dir in new_dirs {
            let _ = self.add(&dir, false);
        }
    }
}

/// The end-to-end tests' skip mechanism (`HLBOOK_SKIP_LOG`, `HLBOOK_NO_SKIPS`), so a skip here is counted too.
#[cfg(test)]
#[path = "../../tests/skip/mod.rs"]
mod skip;

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn writes_and_new_folders_wake_the_waiter() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("hourly");
        let mut w = Wake::new();
        if !w.is_active() {
            return super::skip::skip("inotify unavailable");
        }
        assert!(!w.watch_tree(&root), "no folder yet");
        std::fs::create_dir_all(root.join("20260101")).unwrap();
        assert!(w.watch_tree(&root));
        let file = root.join("20260101").join("0");
        let mut f = std::fs::File::create(&file).unwrap();
        assert_eq!(w.wait(Duration::from_secs(5)), Woken { data: false, dirs_changed: true }, "a new file");
        f.write_all(b"line\n").unwrap();
        assert_eq!(w.wait(Duration::from_secs(5)), Woken { data: true, dirs_changed: false });
        assert_eq!(w.take(), Woken::default(), "nothing left queued");
        // A new date folder is watched as it appears: a write in it wakes the waiter.
        std::fs::create_dir(root.join("20260102")).unwrap();
        assert!(w.wait(Duration::from_secs(5)).dirs_changed);
        let mut g = std::fs::File::create(root.join("20260102").join("0")).unwrap();
        w.take();
        g.write_all(b"line\n").unwrap();
        assert!(w.wait(Duration::from_secs(5)).data);
        // Reading a file raises no event.
        let _ = std::fs::read(&file).unwrap();
        assert_eq!(w.wait(Duration::from_millis(50)), Woken::default());
    }
}
