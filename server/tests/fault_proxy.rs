//! The test fault proxy (tests/procs/fault_proxy.rs) itself: bytes go through both ways, and at its tick the
//! connection is reset on both sides (a read on either end fails with a reset, not an end of stream) and counted.

mod procs;

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use procs::fault_proxy::FaultProxy;

#[test]
fn fault_proxy_forwards_then_resets_both_sides() {
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let target = server.local_addr().unwrap().to_string();
    let proxy = FaultProxy::start(&target, Duration::from_secs(2));
    let mut client = TcpStream::connect(&proxy.addr).unwrap();
    let (mut upstream, _) = server.accept().unwrap();

    client.write_all(b"ping").unwrap();
    let mut buf = [0u8; 4];
    upstream.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"ping");
    upstream.write_all(b"pong").unwrap();
    client.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"pong");

    // Nothing more is sent: both reads block until the cut.
    for (side, mut s) in [("client", client), ("upstream", upstream)] {
        let err = s.read(&mut buf).map_or_else(|e| e.kind(), |n| panic!("{side}: read {n} bytes, not a reset"));
        assert_eq!(err, ErrorKind::ConnectionReset, "{side}");
    }
    assert_eq!(proxy.cuts(), 1);
}
