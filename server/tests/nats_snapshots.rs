//! Snapshots over NATS (issue #36), with the real binaries and a real `nats-server` running the shipped accounts
//! (deploy/nats/accounts.conf): `hlsim` is the node, `hlbook relay --nats` on its files and info server keeps its
//! snapshots in the object store, and an edge with nothing but NATS (no node dir, no info URL, the `edge` user)
//! bootstraps, resyncs after a line the node never wrote, and validates, all from that store. The node's first
//! snapshot is wrong for BTC, so the bootstrap snapshot is wrong and only validation through NATS can find and
//! repair it. The edge ends with the simulator's own books, and the store holds no more than it should keep.

#[allow(clippy::duplicate_mod)]
mod procs;

use std::time::Duration;

use futures_util::StreamExt;
use procs::nats::{EDGE_PASSWORD, NatsServer, PUBLISHER_PASSWORD, connect_as_edge, relay, user_config};
use procs::{HLBOOK, Proc, counter, get_bytes, wait_health};

const START: u64 = 1_000_000_000;
/// 40 ms blocks: the dropped line comes ~17 s in, well after the edge's bootstrap (its validations check against
/// fresh snapshots once the stored one is more than 256 blocks old, or at once for a coin found inconsistent).
const BLOCKS: u64 = 520;
const DROPPED: u64 = START + 420;
const KEPT: usize = 2;
/// The heights of the snapshots the object store holds, read with the edge's credentials.
fn stored_heights(url: &str) -> Vec<u64> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let client = connect_as_edge(url).await;
        let store = async_nats::jetstream::new(client).get_object_store("HL_SNAPSHOTS").await.unwrap();
        let mut list = store.list().await.unwrap();
        let mut heights = Vec::new();
        while let Some(info) = list.next().await {
            let name = info.unwrap().name;
            heights.push(hlbook::ingest::nats::snapshots::object_height(&name).expect("named by height"));
        }
        heights
    })
}

/// Raw requests with the edge's credentials: a bad one gets a clear error, a good one names a stored snapshot.
fn ask(url: &str, body: &'static [u8]) -> serde_json::Value {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let client = connect_as_edge(url).await;
        let answer = client.request("hl.snapshot.request", body.into()).await.expect("the publisher answers");
        serde_json::from_slice(&answer.payload).expect("a JSON reply")
    })
}

#[test]
fn an_edge_with_only_nats_bootstraps_resyncs_and_validates() {
    if !procs::nats::available_or_skip() {
        return;
    }
    let (data, logs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = |name: &str| logs.path().join(name);
    let nats = NatsServer::start_with_accounts(&log("nats"));
    let (n, dropped) = (BLOCKS.to_string(), DROPPED.to_string());
    let faults = ["--blocks", &n, "--drop-block", &dropped, "--snapshot-mismatch", "BTC"];
    let (_sim, info) = procs::start_sim(data.path(), &[&procs::CHECKED_MARKET[..], &faults].concat(), &log("sim.log"));
    let last = START + BLOCKS - 1;

    // The publisher's own snapshot comes first (the wrong one) and is not renewed during the run: the edge's
    // resync and validations get fresh ones only by asking.
    let keys = format!("snapshot_interval_secs = 600\nsnapshots_kept = {KEPT}\nsnapshot_min_interval_secs = 1\n");
    let pub_conf = user_config(logs.path(), "publisher", PUBLISHER_PASSWORD, &keys);
    let pub_snaps = log("publisher-snapshots");
    let extra = ["--info-url", &info, "--snapshot-dir", pub_snaps.to_str().unwrap()];
    let mut publisher = relay(&nats.url(), data.path(), &pub_conf, &extra, &log("pub.log"), Duration::from_secs(30));

    let edge_conf = user_config(logs.path(), "edge", EDGE_PASSWORD, "");
    let (source, edge_snaps) = (nats.source(), log("edge-snapshots"));
    #[rustfmt::skip]
    let args = [
        "serve", "--source", &source, "--info-url", "", "--node-dir", "/nonexistent", "--config",
        edge_conf.to_str().unwrap(), "--snapshot-dir", edge_snaps.to_str().unwrap(), "--validate-interval", "1",
        "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
    ];
    let mut edge = Proc::start(HLBOOK, &args, &log("edge.log"));
    edge.wait_line("hlbook listening on", Duration::from_secs(20));
    let admin = procs::admin_base(&edge);

    let h = wait_health(&admin, Duration::from_secs(120), |h| {
        h["height"].as_u64() == Some(last) && counter(h, "repairs") >= 1 && counter(h, "validations") >= 2
    });
    assert_eq!(counter(&h, "broken_blocks"), 1, "the dropped line broke its block: {h}");
    assert!(counter(&h, "books_loaded") >= 2, "bootstrapped, then resynced past the lost line: {h}");
    assert!(counter(&h, "validation_mismatches") >= 1, "validation found the wrong BTC book: {h}");
    let ours = procs::books_from_snapshot(&get_bytes(&format!("{admin}/l4snapshot")).expect("snapshot"));
    procs::assert_same_books(&ours, &procs::sim_books_at(&info, logs.path(), last));

    let held = stored_heights(&nats.url());
    assert!(!held.is_empty() && held.len() <= KEPT, "the store keeps at most {KEPT}: {held:?}");
    assert!(held.iter().any(|&h| h >= DROPPED), "the resync asked for one past the lost line: {held:?}");
    let stored = std::fs::read_to_string(log("pub.log")).unwrap().matches("node snapshot stored in NATS").count();
    assert!(stored > KEPT, "more were taken ({stored}) than kept, so old ones were deleted");
    let bad = ask(&nats.url(), b"{\"min_height\":\"soon\"}");
    assert!(bad["error"].as_str().is_some_and(|e| e.contains("bad request")), "{bad}");
    let good = ask(&nats.url(), b"{\"min_height\":0}");
    assert_eq!(good["stored"]["height"].as_u64(), held.iter().max().copied(), "the newest: {good}");
    let left: Vec<_> = std::fs::read_dir(&edge_snaps).unwrap().collect();
    assert!(left.is_empty(), "the edge deletes each downloaded snapshot once loaded: {left:?}");
    assert!(edge.stop().success() && publisher.stop().success());
}
