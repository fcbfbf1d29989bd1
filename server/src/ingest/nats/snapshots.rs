//! Snapshots over NATS, what both sides agree on and the edge's side: an edge (`hlbook serve` whose snapshots come
//! from NATS, `SnapshotFrom::Nats`) asks the publisher on `<prefix>.snapshot.request` for a snapshot at or above a
//! height, and downloads the object it is told of from the object store `<stream>_SNAPSHOTS`. The publisher's side
//! (`snapshot_keeper`) answers. An edge then needs nothing but NATS: no access to the node's disk or info server.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::NatsTarget;

/// How long an edge waits for its answer: the node may have to write a whole snapshot first, and the publisher to
/// store it (seconds to a minute on mainnet).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(300);

/// The object store beside a node's stream of lines.
pub fn bucket(stream: &str) -> String {
    format!("{stream}_SNAPSHOTS")
}

/// The subject the publisher answers snapshot requests on.
pub fn request_subject(prefix: &str) -> String {
    format!("{prefix}.snapshot.request")
}

/// Objects are named by the height of the books they hold, and are zstd-compressed (node snapshots are JSON that
/// shrinks ~10x: an edge bootstraps that much sooner, and the bucket holds that much less).
pub fn object_name(height: u64) -> String {
    format!("snapshot-{height}.json.zst")
}

/// The height an object holds; plain `.json` objects (stored by an older publisher) are read too.
pub fn object_height(name: &str) -> Option<u64> {
    let json = name.strip_suffix(".zst").unwrap_or(name);
    json.strip_prefix("snapshot-")?.strip_suffix(".json")?.parse().ok()
}

/// An edge's request: any snapshot at or above `min_height` will do.
#[derive(Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct EdgeSnapshotAsk {
    #[serde(default)]
    pub min_height: u64,
}

/// The publisher's answer: the object to fetch, or why there is none.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum EdgeSnapshotAnswer {
    Stored { name: String, height: u64 },
    Error(String),
}

static SEQ: AtomicU64 = AtomicU64::new(0);

/// A snapshot object past `nats.max_snapshot_bytes`: refused, never written out whole.
#[derive(Debug, thiserror::Error)]
#[error("snapshot {name} is over nats.max_snapshot_bytes ({max} bytes) {stage}; refused")]
pub struct TooLarge {
    pub name: String,
    pub max: u64,
    pub stage: &'static str,
}

/// Asks for a snapshot at or above `min_height` and downloads it into `dir`; returns the file (the caller's to
/// delete). Blocking: for the snapshot loader and validation threads.
pub fn fetch(t: &NatsTarget, dir: &Path, min_height: u64) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let n = SEQ.fetch_add(1, Relaxed);
    let path = dir.join(format!("hlbook-nats-snapshot-{}-{n}.json", std::process::id()));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let result = rt.block_on(download(t, &path, min_height));
    if result.is_err() {
        let _ = std::fs::remove_file(&path);
    }
    result.map(|()| path)
}

async fn download(t: &NatsTarget, path: &Path, min_height: u64) -> anyhow::Result<()> {
    let client = super::connect(&t.servers, &t.cfg, "hlbook serve snapshots", super::Watch::default()).await?;
    let js = super::jetstream(client.clone(), &t.cfg);
    let stream = js.get_stream(&t.stream).await.map_err(|e| anyhow::anyhow!("stream {}: {e}", t.stream))?;
    // Subjects are `<prefix>.<mode>.*`: the prefix names the publisher to ask (a mirror's is the config's).
    let prefix = if stream.cached_info().config.mirror.is_some() {
        t.cfg.subject_prefix.clone()
    } else {
        let first = stream.cached_info().config.subjects.first().cloned().unwrap_or_default();
        let p = first.rsplitn(3, '.').nth(2).with_context(|| format!("stream {} subjects {first:?}", t.stream))?;
        p.to_string()
    };
    let subject = request_subject(&prefix);
    let body = serde_json::to_vec(&EdgeSnapshotAsk { min_height })?;
    let req = async_nats::Request::new().payload(body.into()).timeout(Some(REQUEST_TIMEOUT));
    let answer = client.send_request(subject.clone(), req).await.map_err(|e| match e.kind() {
        async_nats::RequestErrorKind::NoResponders => {
            anyhow::anyhow!("no publisher answers on {subject} (`hlbook relay --nats` with an info server)")
        }
        _ => anyhow::anyhow!("asking {subject}: {e}"),
    })?;
    let (name, height) = match serde_json::from_slice(&answer.payload) {
        Ok(EdgeSnapshotAnswer::Stored { name, height }) => (name, height),
        Ok(EdgeSnapshotAnswer::Error(why)) => anyhow::bail!("the publisher has no snapshot: {why}"),
        Err(e) => anyhow::bail!("answer on {subject} is not a snapshot reply: {e}"),
    };
    let store =
        js.get_object_store(bucket(&t.stream)).await.with_context(|| format!("object store {}", bucket(&t.stream)))?;
    let mut object = store.get(&name).await.with_context(|| format!("snapshot {name}"))?;
    let compressed = Path::new(&name).extension().is_some_and(|e| e == "zst");
    let download = if compressed { path.with_extension("json.zst") } else { path.to_path_buf() };
    let mut file =
        tokio::fs::File::create(&download).await.with_context(|| format!("creating {}", download.display()))?;
    let max = t.cfg.max_snapshot_bytes;
    let mut capped = tokio::io::AsyncReadExt::take(&mut object, max.saturating_add(1));
    let bytes = tokio::io::copy(&mut capped, &mut file).await.with_context(|| format!("downloading {name}"))?;
    tokio::io::AsyncWriteExt::flush(&mut file).await?;
    drop(file);
    if bytes > max {
        let _ = std::fs::remove_file(&download);
        return Err(TooLarge { name, max, stage: "as downloaded" }.into());
    }
    if compressed {
        let inflated = inflate(&download, path, max);
        let _ = std::fs::remove_file(&download);
        match inflated.with_context(|| format!("inflating {name}"))? {
            Inflated::Whole => {}
            Inflated::TooLarge => return Err(TooLarge { name, max, stage: "once inflated" }.into()),
        }
    }
    tracing::info!(name, height, bytes, "snapshot fetched from NATS");
    Ok(())
}

#[derive(Debug, PartialEq, Eq)]
enum Inflated {
    Whole,
    /// It inflates past the cap: what was written is a prefix, for the caller to delete.
    TooLarge,
}

/// Inflates `from` into `to`, stopping one byte past `max`: a small object that inflates without end (a zstd
/// bomb, or a publisher gone wrong) costs at most `max` bytes of disk.
fn inflate(from: &Path, to: &Path, max: u64) -> std::io::Result<Inflated> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(to)?);
    let decoder = zstd::stream::read::Decoder::new(std::fs::File::open(from)?)?;
    let written = std::io::copy(&mut decoder.take(max.saturating_add(1)), &mut out)?;
    std::io::Write::flush(&mut out)?;
    Ok(if written > max { Inflated::TooLarge } else { Inflated::Whole })
}

/// The publisher's side: `from` compressed into `to`, at zstd's fastest level (a whole-market snapshot is
/// hundreds of MB; the level barely changes its size, and the node is waiting on nothing but us).
pub fn deflate(from: &Path, to: &Path) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(to)?);
    zstd::stream::copy_encode(std::io::BufReader::new(std::fs::File::open(from)?), &mut out, 1)?;
    std::io::Write::flush(&mut out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_the_height_and_nothing_else_parses() {
        assert_eq!(object_height(&object_name(985148181)), Some(985148181));
        assert_eq!(object_height("snapshot-7.json"), Some(7));
        assert_eq!(object_height("snapshot-7.zst"), None);
        assert_eq!(object_height("snapshot-x.json"), None);
        assert_eq!(object_height("other-12.json"), None);
        assert_eq!(bucket("HL2"), "HL2_SNAPSHOTS");
        assert_eq!(request_subject("hl"), "hl.snapshot.request");
    }

    #[test]
    fn a_snapshot_deflated_and_inflated_is_the_same_file() {
        let dir = tempfile::tempdir().unwrap();
        let (a, z, b) = (dir.path().join("a.json"), dir.path().join("a.json.zst"), dir.path().join("b.json"));
        let text = r#"[985148181,[["BTC",[[{"oid":1,"px":"81307.0"}],[]]]]]"#.repeat(1000);
        std::fs::write(&a, &text).unwrap();
        deflate(&a, &z).unwrap();
        assert!(std::fs::metadata(&z).unwrap().len() * 10 < text.len() as u64);
        assert_eq!(inflate(&z, &b, text.len() as u64).unwrap(), Inflated::Whole, "exactly at the cap");
        assert_eq!(std::fs::read_to_string(&b).unwrap(), text);
    }

    #[test]
    fn an_object_that_inflates_past_the_cap_is_refused_having_written_at_most_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let (a, z, b) = (dir.path().join("a.json"), dir.path().join("a.json.zst"), dir.path().join("b.json"));
        // 64 MB of one byte deflates to a few kB: the shape of a decompression bomb.
        std::fs::write(&a, vec![b' '; 64 << 20]).unwrap();
        deflate(&a, &z).unwrap();
        assert!(std::fs::metadata(&z).unwrap().len() < 1 << 20);
        // On the old code the object was inflated whole (64 MB written), whatever its size.
        assert_eq!(inflate(&z, &b, 1 << 20).unwrap(), Inflated::TooLarge);
        assert!(std::fs::metadata(&b).unwrap().len() <= (1 << 20) + 1, "never more than the cap on disk");
    }

    #[test]
    fn requests_and_replies_read_back_and_bad_ones_are_refused() {
        let r: EdgeSnapshotAsk = serde_json::from_str(r#"{"min_height":7}"#).unwrap();
        assert_eq!(r, EdgeSnapshotAsk { min_height: 7 });
        assert_eq!(serde_json::from_str::<EdgeSnapshotAsk>("{}").unwrap(), EdgeSnapshotAsk::default());
        assert!(serde_json::from_str::<EdgeSnapshotAsk>(r#"{"min_height":-1}"#).is_err());
        assert!(serde_json::from_str::<EdgeSnapshotAsk>(r#"{"x":1}"#).is_err());
        let s = EdgeSnapshotAnswer::Stored { name: object_name(5), height: 5 };
        assert_eq!(serde_json::from_slice::<EdgeSnapshotAnswer>(&serde_json::to_vec(&s).unwrap()).unwrap(), s);
    }
}
