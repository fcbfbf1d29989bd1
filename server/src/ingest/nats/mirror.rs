//! A region's copy of a node's stream and snapshot store (`hlbook relay --mirror-from HUB --nats nats://LEAF`):
//! JetStream mirrors, in the JetStream domain of a leaf node or regional cluster, of the stream `nats.stream` and
//! of the object store's stream `OBJ_<stream>_SNAPSHOTS` in domain `HUB`. Edges of the region read the mirrors
//! (`nats.domain`, or their server's own domain): each line crosses the link between the regions once, however
//! many edges read it there, and an edge replays from the region's disk. Snapshot requests are core NATS
//! requests and still reach the publisher across the leaf connection.
//!
//! A mirror keeps the origin's subjects and headers but has no subjects of its own, which is why edges take the
//! subject prefix from `nats.subject_prefix` when their stream is a mirror.

use std::time::Duration;

use anyhow::Context;
use async_nats::jetstream::stream;

use super::NatsConfig;
use super::snapshots::bucket;

/// The mirror of stream `name` from domain `from`, kept as long as the origin keeps lines.
fn mirror_config(name: &str, from: &str, cfg: &NatsConfig) -> stream::Config {
    stream::Config {
        name: name.to_string(),
        mirror: Some(stream::Source { name: name.to_string(), domain: Some(from.to_string()), ..Default::default() }),
        max_age: Duration::from_secs(cfg.max_age_secs),
        max_bytes: if cfg.max_bytes > 0 { cfg.max_bytes } else { -1 },
        storage: stream::StorageType::File,
        num_replicas: cfg.replicas,
        allow_direct: true,
        deny_delete: true,
        deny_purge: true,
        ..Default::default()
    }
}

/// Creates (or brings to `cfg`'s settings) the mirrors of `cfg.stream` and its snapshot store from domain `from`
/// on the servers at `url`, in `cfg.domain` (empty: theirs).
pub async fn ensure(url: &str, cfg: &NatsConfig, from: &str) -> anyhow::Result<()> {
    let client = super::connect(url, cfg, "hlbook mirror", super::Watch::default()).await?;
    let js = super::jetstream(client, cfg);
    for name in [cfg.stream.clone(), format!("OBJ_{}", bucket(&cfg.stream))] {
        let mut want = mirror_config(&name, from, cfg);
        if name != cfg.stream {
            // The snapshot store keeps what its origin keeps (a day of deletion markers at most), and takes the
            // rollups an object's metadata is written with.
            want.max_age = Duration::ZERO;
            want.allow_rollup = true;
            want.deny_purge = false;
            want.deny_delete = false;
        }
        super::streams::ensure(&js, want).await.with_context(|| format!("mirror {name} of domain {from}"))?;
        println!("mirror {name} of domain {from} ready");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mirror_names_its_origin_domain_and_has_no_subjects() {
        let c = mirror_config("HL", "hub", &NatsConfig::default());
        let m = c.mirror.as_ref().unwrap();
        assert_eq!((m.name.as_str(), m.domain.as_deref()), ("HL", Some("hub")));
        assert!(c.subjects.is_empty());
        assert_eq!(c.max_age, Duration::from_secs(6 * 3600));
    }
}
