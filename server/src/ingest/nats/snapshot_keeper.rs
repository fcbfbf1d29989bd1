//! The publisher's snapshots (`hlbook relay --nats` given the node's info server): asks the node for a snapshot
//! (`fileSnapshot`), puts the file into the object store `<stream>_SNAPSHOTS` named by its height, and answers edges'
//! requests (`snapshots`) with the newest stored one that is high enough, taking a new one only when none is.
//!
//! It keeps one fresh on its own (`nats.snapshot_interval_secs`) so an edge rarely waits, keeps the newest
//! `nats.snapshots_kept` and deletes the rest, and asks the node at most once per `snapshot_min_interval_secs`
//! however many edges ask: requests are answered one at a time, so those that come while a snapshot is taken are
//! answered from it. It runs on a thread of its own beside the line publisher, with its own connection, so a slow
//! snapshot never holds up a line.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use anyhow::Context;
use async_nats::jetstream::{self, object_store};
use futures_util::StreamExt;

use super::NatsConfig;
use super::metrics::RelayMetrics;
use super::snapshots::{
    EdgeSnapshotAnswer, EdgeSnapshotAsk, bucket, deflate, object_height, object_name, request_subject,
};
use crate::ingest::info_client::{self as info, InfoClient};

#[derive(Clone, Debug)]
pub struct KeeperConfig {
    /// NATS servers, comma-separated.
    pub url: String,
    pub nats: NatsConfig,
    /// The node's info server, and where it writes the snapshots we ask for.
    pub info_url: String,
    pub snapshot_dir: PathBuf,
    /// The publisher's figures: the height it reached bounds what may be asked for; answers are counted here.
    pub metrics: Arc<RelayMetrics>,
    pub fresh: Arc<FreshSnapshot>,
}

/// Between the publisher and the keeper: a publisher whose stream retention emptied wants a snapshot taken now
/// (`wanted`), and starts after its height (`height`, set once one is stored after the request).
#[derive(Debug, Default)]
pub struct FreshSnapshot {
    pub wanted: AtomicBool,
    pub height: AtomicU64,
}

/// Deleted objects leave a small marker in the bucket; the bucket forgets them (and any snapshot nobody replaced)
/// after this long.
const BUCKET_MAX_AGE: Duration = Duration::from_secs(24 * 3600);

/// Keeps and serves snapshots until `stop` is set; NATS errors start it over (with back-off).
pub fn run(cfg: &KeeperConfig, stop: &AtomicBool) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        return tracing::error!("snapshots over NATS disabled: no runtime");
    };
    let mut backoff = Duration::from_millis(100);
    while !stop.load(Relaxed) {
        match rt.block_on(serve(cfg, stop)) {
            Ok(()) => return,
            Err(e) => tracing::warn!("NATS snapshots: {e:#}; starting over in {backoff:?}"),
        }
        std::thread::sleep(backoff);
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

struct Keeper<'a> {
    cfg: &'a KeeperConfig,
    store: object_store::ObjectStore,
    /// What the bucket holds: height → object name.
    held: BTreeMap<u64, String>,
    /// When the node was last asked (`snapshot_min_interval_secs`, `snapshot_interval_secs`).
    asked: Option<Instant>,
    /// When each named client last made the node write a snapshot (`snapshot_client_interval_secs`).
    by_client: HashMap<String, Instant>,
}

/// The client a reply inbox names: its own prefix (`_INBOX_<nats.name>`); None for the shared `_INBOX`, whose
/// clients cannot be told apart (they still share `snapshot_min_interval_secs`).
fn client_of(reply: &str) -> Option<&str> {
    let first = reply.split('.').next()?;
    (first != "_INBOX").then_some(first)
}

async fn serve(cfg: &KeeperConfig, stop: &AtomicBool) -> anyhow::Result<()> {
    let client = super::connect(&cfg.url, &cfg.nats, "hlbook relay snapshots", super::Watch::default()).await?;
    let js = jetstream::new(client.clone());
    let name = bucket(&cfg.nats.stream);
    let store = match js.get_object_store(&name).await {
        Ok(s) => s,
        Err(_) => js
            .create_object_store(object_store::Config {
                bucket: name.clone(),
                max_age: BUCKET_MAX_AGE,
                storage: jetstream::stream::StorageType::File,
                num_replicas: cfg.nats.replicas,
                ..Default::default()
            })
            .await
            .with_context(|| format!("object store {name}"))?,
    };
    let subject = request_subject(&cfg.nats.subject_prefix);
    // A queue group: a second publisher of the same node (a standby) shares the requests instead of doubling them.
    let mut requests = client.queue_subscribe(subject.clone(), "hlbook-snapshots".into()).await?;
    let mut k = Keeper { cfg, store, held: BTreeMap::new(), asked: None, by_client: HashMap::new() };
    k.held = k.list().await?;
    k.prune().await;
    tracing::info!(bucket = %name, %subject, held = k.held.len(), "serving node snapshots over NATS");
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    loop {
        tokio::select! {
            m = requests.next() => {
                let m = m.context("the request subscription ended")?;
                k.answer(&client, m).await;
            }
            _ = tick.tick() => {
                if stop.load(Relaxed) {
                    return Ok(());
                }
                let wanted = cfg.fresh.wanted.swap(false, Relaxed);
                if wanted || k.due() {
                    match k.take().await {
                        Ok(h) if wanted => cfg.fresh.height.store(h, Relaxed),
                        Ok(_) => {}
                        Err(e) => {
                            cfg.fresh.wanted.fetch_or(wanted, Relaxed);
                            tracing::warn!("periodic snapshot: {e:#}");
                        }
                    }
                }
            }
        }
    }
}

impl Keeper<'_> {
    async fn list(&self) -> anyhow::Result<BTreeMap<u64, String>> {
        let mut held = BTreeMap::new();
        let mut list = self.store.list().await?;
        while let Some(info) = list.next().await {
            let info = info?;
            if let Some(h) = object_height(&info.name) {
                held.insert(h, info.name);
            }
        }
        Ok(held)
    }

    fn min_interval(&self) -> Duration {
        Duration::from_secs(self.cfg.nats.snapshot_min_interval_secs)
    }

    /// Time for the periodic snapshot.
    fn due(&self) -> bool {
        let every = self.cfg.nats.snapshot_interval_secs;
        every > 0 && self.asked.is_none_or(|a| a.elapsed() >= Duration::from_secs(every).max(self.min_interval()))
    }

    async fn answer(&mut self, client: &async_nats::Client, m: async_nats::Message) {
        let Some(reply_to) = m.reply.clone() else { return };
        let reply = match serde_json::from_slice::<EdgeSnapshotAsk>(&m.payload) {
            Ok(r) => self.for_request(r.min_height, client_of(&reply_to)).await,
            Err(e) => EdgeSnapshotAnswer::Error(format!("bad request: {e}")),
        };
        let counter = match &reply {
            EdgeSnapshotAnswer::Stored { .. } => &self.cfg.metrics.snapshot_answered,
            EdgeSnapshotAnswer::Error(_) => &self.cfg.metrics.snapshot_refused,
        };
        counter.fetch_add(1, Relaxed);
        let body = serde_json::to_vec(&reply).unwrap_or_default();
        if let Err(e) = client.publish(reply_to, body.into()).await {
            tracing::warn!("answering a snapshot request: {e}");
        }
    }

    /// The newest stored snapshot if it is at or above `min_height`; otherwise a new one, once the node may be
    /// asked again, unless the height is beyond what the node can reach soon or this client made the node write
    /// one too recently (issue #43: an edge credential asking for u64::MAX every few seconds).
    async fn for_request(&mut self, min_height: u64, client: Option<&str>) -> EdgeSnapshotAnswer {
        if self.held.last_key_value().is_none_or(|(&h, _)| h < min_height) {
            let published = self.cfg.metrics.height.iter().map(|h| h.load(Relaxed)).max().unwrap_or(0);
            let ceiling = published.saturating_add(self.cfg.nats.snapshot_max_ahead);
            if min_height > ceiling {
                tracing::warn!(
                    client,
                    min_height,
                    published,
                    "refused a snapshot request far above the published height"
                );
                return EdgeSnapshotAnswer::Error(format!(
                    "min_height {min_height} is above {ceiling} (published {published} + nats.snapshot_max_ahead)"
                ));
            }
            let every = Duration::from_secs(self.cfg.nats.snapshot_client_interval_secs);
            if let Some(c) = client {
                if let Some(at) = self.by_client.get(c).filter(|at| at.elapsed() < every) {
                    tracing::warn!(
                        client = c,
                        "refused a new snapshot: this client had one made {:?} ago",
                        at.elapsed()
                    );
                    return EdgeSnapshotAnswer::Error(format!(
                        "{c} asked for a new snapshot {:.0?} ago; at most one per {every:?}",
                        at.elapsed()
                    ));
                }
                self.by_client.insert(c.to_string(), Instant::now());
            }
            if let Some(a) = self.asked {
                tokio::time::sleep(self.min_interval().saturating_sub(a.elapsed())).await;
            }
            if let Err(e) = self.take().await {
                tracing::warn!("snapshot asked for at {min_height}: {e:#}");
                return EdgeSnapshotAnswer::Error(format!("{e:#}"));
            }
        }
        match self.held.last_key_value() {
            Some((&height, name)) => EdgeSnapshotAnswer::Stored { name: name.clone(), height },
            None => EdgeSnapshotAnswer::Error("no snapshot stored".into()),
        }
    }

    /// Asks the node for a snapshot, stores it and drops the oldest beyond `snapshots_kept`; returns its height.
    async fn take(&mut self) -> anyhow::Result<u64> {
        self.asked = Some(Instant::now());
        let (url, dir) = (self.cfg.info_url.clone(), self.cfg.snapshot_dir.clone());
        let path = tokio::task::spawn_blocking(move || InfoClient::new(&url, &dir)?.request_snapshot()).await??;
        let stored = self.put(&path).await;
        let _ = std::fs::remove_file(&path);
        let height = stored?;
        self.prune().await;
        self.cfg.metrics.snapshots_taken.fetch_add(1, Relaxed);
        tracing::info!(height, "node snapshot stored in NATS");
        Ok(height)
    }

    async fn put(&mut self, path: &std::path::Path) -> anyhow::Result<u64> {
        let height = info::snapshot_height(path)?;
        if self.held.contains_key(&height) {
            return Ok(height);
        }
        let name = object_name(height);
        let zst = path.with_extension("json.zst");
        let (from, to) = (path.to_path_buf(), zst.clone());
        let stored = async {
            tokio::task::spawn_blocking(move || deflate(&from, &to)).await?.context("compressing the snapshot")?;
            let mut file = tokio::fs::File::open(&zst).await?;
            self.store.put(name.as_str(), &mut file).await.with_context(|| format!("storing {name}"))
        }
        .await;
        let _ = std::fs::remove_file(&zst);
        stored?;
        self.held.insert(height, name);
        Ok(height)
    }

    async fn prune(&mut self) {
        while self.held.len() > self.cfg.nats.snapshots_kept {
            let Some((h, name)) = self.held.pop_first() else { return };
            if let Err(e) = self.store.delete(&name).await {
                tracing::warn!(height = h, "deleting old snapshot {name}: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::client_of;

    #[test]
    fn named_inboxes_are_clients_and_the_shared_one_is_not() {
        assert_eq!(client_of("_INBOX_edge1.abc.1"), Some("_INBOX_edge1"));
        assert_eq!(client_of("_INBOX.abc.1"), None);
    }
}
