//! A NATS stream that holds what no honest publisher writes (issue #36; the old TCP relay's hostile-peer test,
//! moved to NATS). Anyone allowed to publish on the line subjects (a compromised publisher credential, a
//! misconfigured tool) can put messages straight into the stream, so an edge must take them as bad input: no
//! panic, no stop at the bad message, no wrong book. Injected while `hlsim`, `hlbook relay --nats` and an edge
//! with nothing but NATS run:
//! - a message with no headers and one with a bad part header: skipped and counted (`foreign_messages`);
//! - a "status line" of a block still to come that claims 1,000 bytes but inflates to 64 MB (a zstd bomb), and a
//!   "diffs line" in parts whose named length is over the edge's limit: each is a lost line (`lines_too_long`),
//!   neither is inflated or buffered past its limit, and the real lines of that block, when they come, are copies
//!   of lines already taken. The block breaks, the edge resyncs from a snapshot over NATS, and ends with the
//!   simulator's own books.

#[allow(clippy::duplicate_mod)]
mod procs;

use std::time::Duration;

use async_nats::HeaderMap;
use hlbook::ingest::nats::{H_ENC, H_HEIGHT, H_LEN, H_PART};
use procs::nats::{NatsServer, relay, relay_config};
use procs::{counter, get_bytes, wait_health};

const START: u64 = 1_000_000_000;
/// 40 ms blocks: long enough for three injections and two resyncs (at most one per 5 s).
const BLOCKS: u64 = 900;
/// How far past the edge's height the forged lines claim to be: ~4 s of 40 ms blocks, so they are in the stream
/// well before the publisher reaches that block.
const AHEAD: u64 = 100;

fn headers(pairs: &[(&str, String)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.insert(*k, v.as_str());
    }
    h
}

/// What the test forges into the stream.
#[derive(Clone, Copy)]
enum Forged {
    /// A headerless message and one with a bad part header: not node lines at all.
    Strangers,
    /// A status line of block `height` that claims 1,000 bytes and inflates to 64 MB.
    Bomb,
    /// A diffs line of block `height` in two parts, whose named length is over any limit.
    OverLimit,
}

/// Publishes `what` straight into the stream, at `height`.
fn inject(url: &str, what: Forged, height: u64) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let js = async_nats::jetstream::new(async_nats::connect(url).await.unwrap());
        let put = |subject: &'static str, h: HeaderMap, body: Vec<u8>| {
            let js = js.clone();
            async move { js.publish_with_headers(subject, h, body.into()).await.unwrap().await.unwrap() }
        };
        match what {
            Forged::Strangers => {
                put("hl.by-block.fills", HeaderMap::new(), b"[]".to_vec()).await;
                let bad_part = headers(&[(H_HEIGHT, height.to_string()), (H_PART, "5/2".into())]);
                put("hl.by-block.diffs", bad_part, b"{}".to_vec()).await;
            }
            Forged::Bomb => {
                let bomb = zstd::bulk::compress(&vec![b' '; 64 << 20], 19).unwrap();
                let h = [(H_HEIGHT, height.to_string()), (H_ENC, "zstd".into()), (H_LEN, "1000".into())];
                put("hl.by-block.statuses", headers(&h), bomb).await;
            }
            Forged::OverLimit => {
                for part in 0..2 {
                    let len = (1u64 << 40).to_string();
                    let h = [(H_HEIGHT, height.to_string()), (H_PART, format!("{part}/2")), (H_LEN, len)];
                    put("hl.by-block.diffs", headers(&h), vec![b'x'; 1000]).await;
                }
            }
        }
    });
}

#[test]
fn forged_messages_in_the_stream_cost_a_resync_and_nothing_else() {
    if !procs::nats::available_or_skip() {
        return;
    }
    let (data, logs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = |name: &str| logs.path().join(name);
    let n = BLOCKS.to_string();
    let market = [&procs::CHECKED_MARKET[..], &["--blocks", &n]].concat();
    let (_sim, info) = procs::start_sim(data.path(), &market, &log("sim.log"));
    let last = START + BLOCKS - 1;
    let nats = NatsServer::start(&log("nats"), "");
    let config = relay_config(logs.path(), "snapshot_min_interval_secs = 1\n");
    let pub_snaps = log("pub-snaps");
    let snapshots = ["--mode", "by-block", "--info-url", &info, "--snapshot-dir", pub_snaps.to_str().unwrap()];
    let mut publisher = relay(&nats.url(), data.path(), &config, &snapshots, &log("pub.log"), Duration::from_secs(30));
    // The edge has nothing but NATS: its resync's snapshot comes from the publisher's object store.
    let (source, edge_snaps) = (nats.source(), log("edge-snaps"));
    let extra = ["--source", &source, "--validate-interval", "0"];
    let (mut edge, _, admin) = procs::start_info_edge("", &edge_snaps, &extra, &log("edge.log"));

    // One at a time: a lost line resyncs the edge past its block at once, and what it had not read yet of the
    // stream before that block is skipped with the rest of it.
    let mut h = wait_health(&admin, Duration::from_secs(60), |h| h["height"].as_u64() >= Some(START + 50));
    for (i, what) in [Forged::Strangers, Forged::Bomb, Forged::OverLimit].into_iter().enumerate() {
        let forged = h["height"].as_u64().unwrap() + AHEAD;
        assert!(forged < last, "the run is long enough to reach the forged block");
        inject(&nats.url(), what, forged);
        let (lost, loads) = (i as u64, 1 + i as u64);
        h = wait_health(&admin, Duration::from_secs(60), |h| {
            counter(h, "lines_too_long") >= lost
                && counter(h, "books_loaded") >= loads
                && counter(h, "foreign_messages") >= 2
        });
    }
    let h = wait_health(&admin, Duration::from_secs(120), |h| h["height"].as_u64() == Some(last));
    assert_eq!(counter(&h, "foreign_messages"), 2, "the headerless and the bad-part messages were skipped: {h}");
    assert_eq!(counter(&h, "lines_too_long"), 2, "the bomb and the over-limit parts were lost lines: {h}");
    assert!(counter(&h, "books_loaded") >= 3, "each forged block broke and was resynced: {h}");
    let ours = procs::books_from_snapshot(&get_bytes(&format!("{admin}/l4snapshot")).expect("snapshot"));
    procs::assert_same_books(&ours, &procs::sim_books_at(&info, logs.path(), last));
    let text = std::fs::read_to_string(log("edge.log")).unwrap();
    assert!(text.contains("unreadable") && text.contains("foreign message"), "each is logged with why");
    assert!(edge.running(), "an edge never exits on what is in the stream");
    assert!(edge.stop().success() && publisher.stop().success());
}
