//! Every listener holds a client to a header deadline, an idle deadline and a per-IP connection cap (issue #31):
//! tried with raw sockets against the real binaries, while ordinary clients go on being served.

mod livefeed;
mod procs;
mod wsclient;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use livefeed::LiveRig;
use serde_json::json;
use wsclient::raw::{connect, expect_json, subscribe};

/// Well beyond any deadline these tests set: how long a socket may take to be closed before the test fails.
const BOUND: Duration = Duration::from_secs(30);

/// `name`'s value on the admin `/metrics`.
fn metric(feed: &LiveRig, name: &str) -> u64 {
    let text = String::from_utf8(procs::get_bytes(&format!("{}/metrics", feed.admin)).expect("/metrics")).unwrap();
    let line = text.lines().find(|l| l.split(' ').next() == Some(name)).unwrap_or_else(|| panic!("no {name}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

/// Reads until the server closes `s`; everything it sent first. Panics if it stays open for `BOUND`.
fn read_until_closed(s: &mut TcpStream, what: &str) -> String {
    s.set_read_timeout(Some(BOUND)).unwrap();
    let deadline = Instant::now() + BOUND;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                panic!("{what}: still open after {BOUND:?}")
            }
            Err(_) => break, // reset: closed too
        }
        assert!(Instant::now() < deadline, "{what}: still open after {BOUND:?}");
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// One keep-alive `GET /health` on `s`: the status, or None if the server closed the connection instead.
fn get_health(s: &mut TcpStream) -> Option<u16> {
    s.set_read_timeout(Some(BOUND)).unwrap();
    s.write_all(b"GET /health HTTP/1.1\r\nHost: test\r\n\r\n").ok()?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return None,
        }
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    let len: usize =
        head.lines().find_map(|l| l.strip_prefix("content-length:")).map_or(0, |v| v.trim().parse().unwrap());
    s.read_exact(&mut vec![0; len]).ok()?;
    head.split(' ').nth(1)?.parse().ok()
}

#[test]
fn slowloris_is_dropped_on_both_listeners_while_others_are_served() {
    // Short deadlines: the WebSocket below, silent for longer than both, must be cut by neither. The slow
    // header's bytes come more often than the idle deadline, so only the header deadline can end it (with both at
    // a second and a byte a second, the idle deadline won the race on a loaded CI machine).
    let feed = LiveRig::start("header_timeout_secs = 1\nhttp_idle_timeout_secs = 3");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut ws = rt.block_on(async {
        let mut ws = connect(&feed.addr, "", None).await;
        subscribe(&mut ws, json!({"type": "l2Book", "coin": "BTC"})).await;
        ws
    });
    let ws_opened = Instant::now();
    let admin = feed.admin.trim_start_matches("http://").to_string();
    let slow: Vec<(TcpStream, std::thread::JoinHandle<()>)> = [feed.addr.clone(), admin]
        .into_iter()
        .map(|addr| {
            let s = TcpStream::connect(&addr).unwrap();
            let mut w = s.try_clone().unwrap();
            // A header five bytes a second, never finished in time.
            let writer = std::thread::spawn(move || {
                for b in b"GET /health HTTP/1.1\r\nHost: test\r\nX-Slow: 1234567890123456789012345678901234567890\r\n" {
                    if w.write_all(&[*b]).is_err() {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
            });
            (s, writer)
        })
        .collect();
    // Meanwhile everyone else is served.
    assert_eq!(reqwest::blocking::get(format!("{}/health", feed.base)).unwrap().status(), 200);
    assert_eq!(reqwest::blocking::get(format!("{}/status", feed.admin)).unwrap().status(), 200);
    for (mut s, writer) in slow {
        let got = read_until_closed(&mut s, "a slowloris connection");
        assert!(!got.contains(" 200 "), "the slow request was never answered: {got}");
        drop(s);
        writer.join().unwrap();
    }
    assert!(metric(&feed, "hlbook_ws_http_header_timeouts_total") >= 2, "both dropped connections are counted");
    rt.block_on(async {
        // Silent since it subscribed, for longer than both HTTP deadlines: still fed.
        while ws_opened.elapsed() < Duration::from_secs(5) {
            let v = expect_json(&mut ws, Duration::from_secs(10)).await;
            assert!(v["channel"] == "l2Book" || v["channel"] == "subscriptionResponse", "{v}");
        }
    });
    assert_eq!(metric(&feed, "hlbook_ws_closed_idle_total"), 0);
}

#[test]
fn connections_beyond_the_per_ip_cap_are_closed_and_counted() {
    let feed = LiveRig::start("max_http_connections_per_ip = 4\nheader_timeout_secs = 60");
    // Fill the cap with connections that are served (a place may still be held by the rig's last request, whose
    // socket the server has not seen close yet: then try again).
    let mut held = Vec::new();
    let deadline = Instant::now() + BOUND;
    while held.len() < 4 {
        let mut s = TcpStream::connect(&feed.addr).unwrap();
        match get_health(&mut s) {
            Some(status) => {
                assert_eq!(status, 200);
                held.push(s);
            }
            None => std::thread::sleep(Duration::from_millis(100)),
        }
        assert!(Instant::now() < deadline, "only {} connections served", held.len());
    }
    let refused_before = metric(&feed, "hlbook_ws_http_refused_total");
    let mut extra = TcpStream::connect(&feed.addr).unwrap();
    let got = read_until_closed(&mut extra, "a connection over the cap");
    assert!(got.is_empty(), "closed before a byte: {got}");
    assert!(metric(&feed, "hlbook_ws_http_refused_total") > refused_before, "the refusal is counted");
    // The admitted ones are untouched, and a closed one frees its place.
    assert_eq!(get_health(&mut held[0]), Some(200));
    drop(held.pop());
    let deadline = Instant::now() + BOUND;
    loop {
        let mut s = TcpStream::connect(&feed.addr).unwrap();
        if get_health(&mut s) == Some(200) {
            break;
        }
        assert!(Instant::now() < deadline, "the freed place was never given to a new connection");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn an_idle_keep_alive_connection_is_closed() {
    let feed = LiveRig::start("http_idle_timeout_secs = 1\nheader_timeout_secs = 60");
    let mut s = TcpStream::connect(&feed.addr).unwrap();
    assert_eq!(get_health(&mut s), Some(200), "kept alive after its first request");
    let got = read_until_closed(&mut s, "an idle keep-alive connection");
    assert!(got.is_empty(), "nothing more was sent: {got}");
    assert!(metric(&feed, "hlbook_ws_http_closed_idle_total") >= 1, "the close is counted");
}
