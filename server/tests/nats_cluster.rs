//! A 3-node nats-server cluster with the stream replicated three times: one node crashes mid-stream, the
//! publisher and the edge move to the others, and the edge's books equal a `replay` of the files with every block
//! applied once and none skipped. The node killed is the stream's leader.

#[allow(clippy::duplicate_mod)]
mod common;
#[allow(clippy::duplicate_mod)]
mod procs;

use std::time::Duration;

use hlbook::node::Mode;
use procs::nats::{relay, relay_config};
use procs::wait_health;

const FIRST: u64 = 985148182;
const LAST: u64 = 985148232;

#[test]
fn a_nats_node_crash_loses_no_block() {
    if !procs::nats::available_or_skip() {
        return;
    }
    let Some(cap) = common::unpack() else { return };
    let (dst, logs) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let log = |name: &str| logs.path().join(name);
    let mut nodes = procs::nats::start_cluster(&logs.path().join("nats"));
    let all = procs::nats::urls(&nodes);
    let config = relay_config(logs.path(), "replicas = 3\nchunk_bytes = 262144\n");
    let servers: String = all.split(',').map(|a| format!("nats://{a}")).collect::<Vec<_>>().join(",");
    let _publisher = relay(&servers, dst.path(), &config, &[], &log("pub.log"), Duration::from_secs(60));
    let source = format!("nats://{all}/HL");
    let (mut edge, base, admin) = procs::start_edge(&source, "by-block", &cap.snapshot, &log("edge.log"));

    let (src, out) = (cap.node_dir.clone(), dst.path().to_path_buf());
    let writer =
        std::thread::spawn(move || common::write_capture(&src, &out, Mode::ByBlock, None, Duration::from_millis(60)));
    wait_health(&base, Duration::from_secs(60), |h| h["height"].as_u64() >= Some(FIRST + 15));
    // The crash that matters most: the node leading the stream's replicas.
    let leader = stream_leader(&nodes[0].url());
    let n: usize = leader.trim_start_matches('n').parse().expect("a node name n1..n3");
    nodes[n - 1].kill();
    writer.join().unwrap();

    let (ours, _) = procs::clean_books_at(&admin, LAST, LAST - FIRST + 1, Duration::from_secs(120));
    assert_eq!(common::l4_digest(&ours), common::replay_digest(&cap, Mode::ByBlock, LAST), "differs from replay");
    assert!(edge.stop().success());
}

/// The name (`n1`..`n3`) of the server leading stream HL's replicas.
fn stream_leader(url: &str) -> String {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let js = async_nats::jetstream::new(async_nats::connect(url).await.expect("connect"));
        let mut st = js.get_stream("HL").await.expect("stream HL");
        let info = st.info().await.expect("stream info");
        info.cluster.as_ref().and_then(|c| c.leader.clone()).expect("a replicated stream has a leader")
    })
}
