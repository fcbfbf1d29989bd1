//! Relay → TCP source on loopback, with the real binaries: the server fed through `hlbook relay` ends with the
//! same books as `replay` of the files, and killing and restarting the relay mid-stream leaves no gap and no
//! block applied twice.

// Both helpers carry the (stateless) skip module.
#[allow(clippy::duplicate_mod)]
mod common;
#[allow(clippy::duplicate_mod)]
mod procs;

use std::time::Duration;

use hlbook::node::Mode;
use procs::{HLBOOK, Proc, books_from_snapshot, counter, get_bytes, wait_health};

const FIRST: u64 = 985148182;

fn relay(dir: &std::path::Path, mode: &str, listen: &str, log: &std::path::Path) -> (Proc, String) {
    let args = ["relay", "--node-dir", dir.to_str().unwrap(), "--mode", mode, "--listen", listen];
    let p = Proc::start(HLBOOK, &args, log);
    let addr = p.wait_line("relay listening on", Duration::from_secs(20));
    (p, addr)
}

fn run(mode: Mode, last: u64) {
    let mode_name = mode.as_str();
    let Some(cap) = common::unpack() else { return };
    let dst = tempfile::tempdir().unwrap();
    let logs = tempfile::tempdir().unwrap();
    let (mut relay1, addr) = relay(dst.path(), mode_name, "127.0.0.1:0", &logs.path().join("relay1.log"));
    let source = format!("tcp://{addr}");
    let (mut server, base, admin) =
        procs::start_edge(&source, mode_name, &cap.snapshot, &logs.path().join("serve.log"));

    let (src, out) = (cap.node_dir.clone(), dst.path().to_path_buf());
    let writer = std::thread::spawn(move || common::write_capture(&src, &out, mode, None, Duration::from_millis(60)));
    // Kill the relay (a crash, not a shutdown) once the server is part-way through, then bring it back.
    wait_health(&base, Duration::from_secs(60), |h| h["height"].as_u64() >= Some(FIRST + 15));
    relay1.kill();
    std::thread::sleep(Duration::from_millis(700));
    let (_relay2, _) = relay(dst.path(), mode_name, &addr, &logs.path().join("relay2.log"));
    writer.join().unwrap();

    let h = wait_health(&base, Duration::from_secs(60), |h| h["height"].as_u64() == Some(last));
    let ours = books_from_snapshot(&get_bytes(&format!("{admin}/l4snapshot")).expect("snapshot"));
    assert_eq!(ours.height(), last);
    assert_eq!(common::l4_digest(&ours), common::replay_digest(&cap, mode, last), "{mode:?}: differs from replay");
    for zero in ["gaps", "inconsistencies", "malformed_lines", "broken_blocks", "blocks_already_applied"] {
        assert_eq!(counter(&h, zero), 0, "{zero}: {h}");
    }
    assert_eq!(counter(&h, "blocks_applied"), last - FIRST + 1, "each block applied exactly once: {h}");
    assert!(counter(&h, "source_disconnects") >= 1 && counter(&h, "source_connects") >= 2, "{h}");
    assert!(server.running(), "the server never exits on a lost relay");
    assert!(server.stop().success());
}

#[test]
fn by_block_through_a_restarted_relay() {
    run(Mode::ByBlock, 985148232);
}

#[test]
fn streaming_through_a_restarted_relay() {
    run(Mode::Streaming, 985148231);
}
