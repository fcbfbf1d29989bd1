//! Asking the node for an L4 snapshot (`fileSnapshot` on its info server) and loading it.
//!
//! The node writes the snapshot to a path we name and answers when it is done; the file's first bytes give its
//! height, which is all ingest needs to position its source, so loading (seconds on mainnet) can go on beside
//! ingest. Snapshot files are ours: each is deleted once loaded. `SnapshotFrom` names every place a snapshot can
//! come from (a file, the node, the NATS object store of an edge's publisher), so ingest and validation ask one way.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use super::nats::NatsTarget;
use crate::book::Books;
use crate::book::snapshot::load_books;

/// Where snapshots come from.
#[derive(Clone, Debug)]
pub enum SnapshotFrom {
    /// The node's info server (`http://127.0.0.1:3001/info`), writing into `dir` (which the node must be able to
    /// write and we to read).
    Info { url: String, dir: PathBuf },
    /// A file already on disk (tests, offline starts); used once, then the info server (if any) takes over.
    File(PathBuf),
    /// The object store an `hlbook relay --nats` keeps (`ingest::nats::snapshots`), downloaded into `dir`: an edge
    /// with no access to the node.
    Nats { target: Box<NatsTarget>, dir: PathBuf },
}

impl SnapshotFrom {
    /// A snapshot file, and whether it is ours to delete once loaded. `min_height`: the lowest height the caller
    /// can use, for a source that can choose among several (NATS); the node's info server always writes a new one.
    pub fn fetch(&self, min_height: u64) -> Result<(PathBuf, bool), InfoError> {
        match self {
            SnapshotFrom::File(p) => Ok((p.clone(), false)),
            SnapshotFrom::Info { url, dir } => Ok((InfoClient::new(url, dir)?.request_snapshot()?, true)),
            SnapshotFrom::Nats { target, dir } => super::nats::snapshots::fetch(target, dir, min_height)
                .map(|p| (p, true))
                .map_err(|e| match e.downcast_ref::<super::nats::snapshots::TooLarge>() {
                    Some(t) => InfoError::TooLarge(t.to_string()),
                    None => InfoError::Nats(format!("{e:#}")),
                }),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum InfoError {
    #[error("info server {url}: {source}")]
    Http { url: String, source: reqwest::Error },
    #[error("info server {url} answered {status}: {body}")]
    Status { url: String, status: u16, body: String },
    #[error("snapshot over NATS: {0}")]
    Nats(String),
    /// Over `nats.max_snapshot_bytes` (counted apart: `snapshots_too_large`).
    #[error("snapshot over NATS: {0}")]
    TooLarge(String),
    #[error("snapshot {path}: {why}")]
    File { path: String, why: String },
}

/// A blocking client of the node's info server, for the ingest and validation threads.
#[derive(Debug)]
pub struct InfoClient {
    url: String,
    dir: PathBuf,
    http: reqwest::blocking::Client,
}

static SEQ: AtomicU64 = AtomicU64::new(0);

impl InfoClient {
    pub fn new(url: &str, dir: &Path) -> Result<InfoClient, InfoError> {
        let http = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()
            .map_err(|source| InfoError::Http { url: url.to_string(), source })?;
        Ok(InfoClient { url: url.to_string(), dir: dir.to_path_buf(), http })
    }

    /// Asks the node to write its current books; returns the file's path once written.
    pub fn request_snapshot(&self) -> Result<PathBuf, InfoError> {
        std::fs::create_dir_all(&self.dir).map_err(|e| file_err(&self.dir, e))?;
        let dir = std::path::absolute(&self.dir).map_err(|e| file_err(&self.dir, e))?;
        let n = SEQ.fetch_add(1, Relaxed);
        let path = dir.join(format!("hlbook-snapshot-{}-{n}.json", std::process::id()));
        let body = serde_json::json!({
            "type": "fileSnapshot",
            "request": {"type": "l4Snapshots", "includeUsers": true, "includeTriggerOrders": true},
            "outPath": path,
            "includeHeightInOutput": true,
        });
        let http_err = |source| InfoError::Http { url: self.url.clone(), source };
        let resp = self.http.post(&self.url).json(&body).send().map_err(http_err)?;
        let status = resp.status();
        if !status.is_success() {
            let body = resp.text().unwrap_or_default().chars().take(300).collect();
            return Err(InfoError::Status { url: self.url.clone(), status: status.as_u16(), body });
        }
        Ok(path)
    }
}

fn file_err(path: &Path, e: impl std::fmt::Display) -> InfoError {
    InfoError::File { path: path.display().to_string(), why: e.to_string() }
}

/// The height at the head of a snapshot file (`[height, …`), without parsing the rest.
pub fn snapshot_height(path: &Path) -> Result<u64, InfoError> {
    let mut head = [0u8; 64];
    let n = std::fs::File::open(path).and_then(|mut f| f.read(&mut head)).map_err(|e| file_err(path, e))?;
    let text = std::str::from_utf8(&head[..n]).unwrap_or("");
    let digits = text.trim_start().strip_prefix('[').map_or("", str::trim_start);
    let end = digits.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits.len());
    digits[..end].parse().map_err(|_| file_err(path, "does not start with [height,"))
}

/// Loads a snapshot file into books; deletes it afterwards when `ours`.
pub fn load(path: &Path, ours: bool) -> Result<Books, InfoError> {
    let books = load_books(path).map_err(|e| file_err(path, e));
    if ours {
        let _ = std::fs::remove_file(path);
    }
    books
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_height_at_the_head() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.json");
        std::fs::write(&p, b"[985148181,[[\"BTC\",[[],[]]]]]").unwrap();
        assert_eq!(snapshot_height(&p).unwrap(), 985148181);
        std::fs::write(&p, b" [ 12 ,[]]").unwrap();
        assert_eq!(snapshot_height(&p).unwrap(), 12);
        std::fs::write(&p, b"{\"x\":1}").unwrap();
        assert!(snapshot_height(&p).is_err());
        assert!(snapshot_height(&dir.path().join("missing")).is_err());
    }

    #[test]
    fn unreachable_info_server_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        // Port 9 (discard) on loopback: nothing listens in a test sandbox.
        let c = InfoClient::new("http://127.0.0.1:9/info", dir.path()).unwrap();
        let e = c.request_snapshot().unwrap_err().to_string();
        assert!(e.contains("127.0.0.1:9"), "{e}");
    }
}
