//! Limits on what feeds hlbook, with the real `hlbook serve` (and `hlsim` as the node it asks for snapshots): a
//! relay peer, here a plain socket speaking the relay framing, that claims a 2 GiB line or sends a line over
//! `ingest.max_line_bytes` is refused with an error naming the source, the size and the setting, and hlbook
//! reconnects without ever buffering the line; a line of a block implausibly far ahead is refused and changes nothing.

mod procs;

use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use procs::{CHECKED_MARKET, counter, start_serve, start_sim, wait_health};

/// Accepts the next connection (within `timeout`) and answers its relay handshake; returns it and the height it
/// asked to read after.
fn accept(listener: &TcpListener, timeout: Duration) -> (TcpStream, u64) {
    let deadline = Instant::now() + timeout;
    let sock = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                assert!(Instant::now() < deadline, "hlbook did not connect within {timeout:?}");
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("accept: {e}"),
        }
    };
    sock.set_nonblocking(false).unwrap();
    sock.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut hello = String::new();
    BufReader::new(&sock).read_line(&mut hello).unwrap();
    assert!(hello.starts_with("HLRELAY 1 by-block "), "{hello:?}");
    let after = hello.trim_end().rsplit(' ').next().unwrap().parse().unwrap();
    (&sock).write_all(b"HLRELAY 1 OK\n").unwrap();
    (sock, after)
}

/// The resident memory of process `pid`, in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

/// Writes `bytes` bytes of a line body in 1 MiB pieces until the peer stops taking them; returns the peak resident
/// memory of `pid` seen meanwhile.
fn flood(sock: &mut TcpStream, bytes: usize, pid: u32) -> u64 {
    let piece = vec![b'a'; 1 << 20];
    let mut peak = rss(pid);
    for _ in 0..bytes / piece.len() {
        if sock.write_all(&piece).is_err() {
            break;
        }
        peak = peak.max(rss(pid));
    }
    peak.max(rss(pid))
}

fn log_of(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Waits until the server's log has `text`.
fn wait_log(path: &Path, text: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let log = log_of(path);
        if log.contains(text) {
            return log;
        }
        assert!(Instant::now() < deadline, "the log never said {text:?}:\n{log}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn the_settings_default_to_the_limits_ingest_defaults_to() {
    let (c, l) = (hlbook::config::IngestConfig::default(), hlbook::ingest::limits::Limits::default());
    assert_eq!(
        (c.max_line_bytes, c.max_height_jump, c.race_max_parked_blocks),
        (l.max_line_bytes, l.max_height_jump, l.race_max_parked_blocks)
    );
}

#[test]
fn a_relay_peer_over_the_line_cap_is_refused_and_reconnected_without_buffering() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    // The simulator is the node: it answers the snapshots hlbook syncs from. Its files are not read.
    let mut market = vec!["--blocks", "100000"];
    market.extend_from_slice(&CHECKED_MARKET);
    let (mut sim, info_url) = start_sim(&data, &market, &tmp.path().join("sim.log"));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let src = format!("tcp://{}", listener.local_addr().unwrap());
    let cap = 4 << 20;
    let cap_set = format!("ingest.max_line_bytes={cap}");
    let extra = ["--source", &src, "--validate-interval", "0", "--set", &cap_set];
    let log = tmp.path().join("serve.log");
    let mut server = start_serve(&data, &info_url, &tmp.path().join("snapshots"), &extra, &log);
    let base = format!("http://{}", server.wait_line("hlbook listening on", Duration::from_secs(30)));
    let pid = server.pid().unwrap();

    // A header claiming a 2 GiB line, then bytes of it as fast as hlbook takes them.
    let (mut sock, after) = accept(&listener, Duration::from_secs(60));
    let before = rss(pid);
    writeln!(sock, "S {} 2147483648", after + 1).unwrap();
    let peak = flood(&mut sock, 512 << 20, pid);
    eprintln!("hlbook VmRSS: {before} bytes before the 2 GiB claim, at most {peak} while it was sent");
    let said = wait_log(&log, "2147483648 bytes, over ingest.max_line_bytes (4194304)");
    let refusal = said.lines().find(|l| l.contains("2147483648 bytes, over")).unwrap();
    assert!(refusal.contains(&src), "the source is named: {refusal}");
    // The line is lost, so hlbook resyncs past it and connects again.
    let (mut sock, after2) = accept(&listener, Duration::from_secs(60));
    assert!(after2 >= after, "it resumes after {after2}");
    assert!(peak < before + (100 << 20), "memory grew from {before} to {peak} bytes");

    // A whole line just over the cap (the setting, not a constant) is refused the same way.
    let over = cap + 1;
    writeln!(sock, "D {} {over}", after2 + 1).unwrap();
    let peak = flood(&mut sock, over + (1 << 20), pid);
    wait_log(&log, &format!("{over} bytes, over ingest.max_line_bytes"));
    let (mut sock, after3) = accept(&listener, Duration::from_secs(60));
    assert!(peak < before + (100 << 20), "memory grew from {before} to {peak} bytes");

    // A line of a block far past the height hlbook resumes from is refused, and nothing else changes.
    // Each refusal lost a line, so each asked for a snapshot; the last one is installed before we go on.
    let h = wait_health(&base, Duration::from_secs(60), |h| {
        let serving = h["state"] == "live" || h["state"] == "catching_up";
        counter(h, "lines_too_long") == 2 && counter(h, "snapshots_requested") == 3 && serving
    });
    let far = after3 + 10_001;
    let line = format!(
        r#"{{"local_time":"2026-05-05T17:39:13.3","block_time":"2026-05-05T17:39:13.02","block_number":{far},"events":[]}}"#
    );
    writeln!(sock, "D {far} {}\n{line}", line.len()).unwrap();
    let after_far = wait_health(&base, Duration::from_secs(60), |h| counter(h, "lines_too_far_ahead") == 1);
    for same in ["books_loaded", "snapshots_requested", "broken_blocks", "gaps", "blocks_applied"] {
        assert_eq!(counter(&after_far, same), counter(&h, same), "{same}: {after_far}");
    }
    wait_log(&log, &format!("a line of block {far}, 10001 blocks past block {after3}"));
    let entry = &after_far["sources"][0];
    assert_eq!(entry["refused_lines"], 3, "{entry}");
    assert!(entry["height"].as_u64() < Some(far), "its height is not the refused one: {entry}");
    assert!(counter(&after_far, "source_disconnects") >= 2, "{after_far}");
    drop(sock);
    assert!(server.running(), "the server never exits on a source's bad input");
    assert!(server.stop().success());
    sim.stop();
}
