use std::io::{self, Read, Write};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};
use tokio_tungstenite::tungstenite::error::ProtocolError;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocket};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use super::*;

// The shape `negotiate` answers, so tests compare with it directly.
#[allow(clippy::unnecessary_wraps)]
fn plain(client_no_context_takeover: bool) -> Option<Agreed> {
    let mut response = String::from("permessage-deflate; server_no_context_takeover");
    if client_no_context_takeover {
        response.push_str("; client_no_context_takeover");
    }
    Some(Agreed { response, client_no_context_takeover })
}

#[test]
fn negotiate_accepts_browser_and_library_offers() {
    // Chromium and Python websockets.
    assert_eq!(negotiate(["permessage-deflate; client_max_window_bits"]), plain(false));
    // Firefox.
    assert_eq!(negotiate(["permessage-deflate"]), plain(false));
    // Boost.Beast with its defaults written out.
    assert_eq!(negotiate(["permessage-deflate; client_max_window_bits=15; server_max_window_bits=15"]), plain(false));
}

#[test]
fn negotiate_is_tolerant_of_case_spaces_and_quotes() {
    let offer = "  Permessage-Deflate ;Client_Max_Window_Bits = \"10\" ;  SERVER_NO_CONTEXT_TAKEOVER ";
    assert_eq!(negotiate([offer]), plain(false));
    assert_eq!(negotiate(["permessage-deflate; server_max_window_bits=\"15\""]), plain(false));
}

#[test]
fn negotiate_declines_other_extensions() {
    assert_eq!(negotiate(["x-webkit-deflate-frame"]), None);
    assert_eq!(negotiate(["deflate-frame, x-webkit-deflate-frame; max_window_bits=10"]), None);
    assert_eq!(negotiate([]), None);
    assert_eq!(negotiate([""]), None);
}

#[test]
fn negotiate_skips_an_offer_with_a_small_server_window() {
    assert_eq!(negotiate(["permessage-deflate; server_max_window_bits=10, permessage-deflate"]), plain(false));
    // The declined first offer would have echoed client_no_context_takeover.
    let offers = "permessage-deflate; server_max_window_bits=10; client_no_context_takeover, permessage-deflate";
    assert_eq!(negotiate([offers]), plain(false));
    assert_eq!(negotiate(["permessage-deflate; server_max_window_bits=10"]), None);
    // server_max_window_bits needs a value.
    assert_eq!(negotiate(["permessage-deflate; server_max_window_bits"]), None);
}

#[test]
fn negotiate_declines_duplicated_unknown_and_bad_parameters() {
    for offer in [
        "permessage-deflate; client_no_context_takeover; client_no_context_takeover",
        "permessage-deflate; client_max_window_bits; Client_Max_Window_Bits=15",
        "permessage-deflate; server_max_window_bits=15; server_max_window_bits=15",
        "permessage-deflate; mystery",
        "permessage-deflate; client_max_window_bits=7",
        "permessage-deflate; client_max_window_bits=16",
        "permessage-deflate; client_max_window_bits=015",
        "permessage-deflate; client_max_window_bits=+9",
        "permessage-deflate; client_max_window_bits=abc",
        "permessage-deflate; client_max_window_bits=\"\"",
        "permessage-deflate; server_no_context_takeover=1",
        "permessage-deflate; client_no_context_takeover=true",
    ] {
        assert_eq!(negotiate([offer]), None, "{offer}");
    }
}

#[test]
fn negotiate_echoes_client_no_context_takeover() {
    let agreed = negotiate(["permessage-deflate; client_no_context_takeover; client_max_window_bits=12"]);
    assert_eq!(agreed, plain(true));
}

#[test]
fn negotiate_reads_several_header_lines() {
    let lines =
        ["x-webkit-deflate-frame", "foo; bar=1, permessage-deflate; client_no_context_takeover", "permessage-deflate"];
    assert_eq!(negotiate(lines), plain(true));
}

/// Text shaped like the book updates the server sends.
fn json_like(len: usize) -> Vec<u8> {
    let mut text = String::from("[");
    for i in 0.. {
        if text.len() >= len {
            break;
        }
        text.push_str(&format!(r#"{{"px":"{}.{}","sz":"{}","n":{}}},"#, 81_000 + i % 97, i % 10, i * 7 % 1000, i % 5));
    }
    text.truncate(len);
    text.into_bytes()
}

#[test]
fn deflate_message_round_trips_and_strips_the_tail() {
    let mut inflater = Inflater::new(false, 1 << 20);
    for len in [0, 1, 2, 125, 65_536, 100_000] {
        let text = json_like(len);
        let compressed = deflate_message(&text, 6);
        assert!(!compressed.ends_with(&TAIL), "{len} bytes left the tail on");
        assert_eq!(inflater.inflate(&compressed).unwrap(), text, "{len} bytes");
    }
    assert!(deflate_message(&json_like(100_000), 6).len() < 50_000, "JSON-like text should compress well");
}

#[test]
fn deflate_message_is_valid_at_every_level() {
    let text = json_like(5_000);
    for level in [0, 1, 9, 42] {
        let compressed = deflate_message(&text, level);
        assert!(!compressed.ends_with(&TAIL), "level {level}");
        assert_eq!(Inflater::new(true, 1 << 20).inflate(&compressed).unwrap(), text, "level {level}");
    }
}

#[test]
fn one_inflater_reads_messages_in_sequence() {
    for no_context_takeover in [false, true] {
        let mut inflater = Inflater::new(no_context_takeover, 1 << 20);
        for text in [json_like(3_000), json_like(10), Vec::new(), json_like(3_000)] {
            assert_eq!(inflater.inflate(&deflate_message(&text, 6)).unwrap(), text);
        }
    }
}

/// Messages compressed by one compressor kept across them, as a client with context takeover sends them.
fn with_context_takeover(messages: &[&[u8]]) -> Vec<Vec<u8>> {
    let mut compress = Compress::new(Compression::default(), false);
    let mut out = Vec::new();
    for message in messages {
        let mut compressed = Vec::with_capacity(message.len() + 64);
        let before = compress.total_in();
        compress.compress_vec(message, &mut compressed, FlushCompress::Sync).unwrap();
        assert_eq!(compress.total_in() - before, message.len() as u64);
        assert!(compressed.len() < compressed.capacity(), "flush incomplete");
        assert!(compressed.ends_with(&TAIL));
        compressed.truncate(compressed.len() - TAIL.len());
        out.push(compressed);
    }
    out
}

#[test]
fn inflater_keeps_the_window_with_context_takeover() {
    let text = json_like(2_000);
    let compressed = with_context_takeover(&[&text, &text]);
    // The repeat is a back-reference into the first message.
    assert!(compressed[1].len() < compressed[0].len() / 4);
    let mut inflater = Inflater::new(false, 1 << 20);
    assert_eq!(inflater.inflate(&compressed[0]).unwrap(), text);
    assert_eq!(inflater.inflate(&compressed[1]).unwrap(), text);
    // An inflater that resets per message cannot follow that reference: it fails, or (miniz_oxide, which reads
    // zeros before the start of its window) inflates the wrong text.
    let mut resetting = Inflater::new(true, 1 << 20);
    assert_eq!(resetting.inflate(&compressed[0]).unwrap(), text);
    assert_ne!(resetting.inflate(&compressed[1]).ok(), Some(text));
}

#[test]
fn inflater_stops_a_bomb_at_the_cap() {
    let max = 1 << 20;
    let bomb = deflate_message(&vec![0; 10 << 20], 9);
    assert!(bomb.len() < 20_000);
    let mut inflater = Inflater::new(false, max);
    let error = inflater.inflate(&bomb).unwrap_err();
    assert!(matches!(error, InflateError::TooLarge { max: 1_048_576 }), "{error}");
    assert_eq!(error.to_string(), "compressed message inflates to more than 1048576 bytes");
    // The failed stream was dropped: the next message starts clean.
    assert_eq!(inflater.decompress.total_out(), 0);
    assert_eq!(inflater.inflate(&deflate_message(b"after", 6)).unwrap(), b"after");
}

#[test]
fn inflater_never_inflates_or_allocates_far_past_the_cap() {
    let max = 1 << 20;
    let bomb = deflate_message(&vec![0; 10 << 20], 9);
    let mut inflater = Inflater::new(false, max);
    let mut out = Vec::new();
    assert!(matches!(inflater.feed(&bomb, &mut out), Err(InflateError::TooLarge { .. })));
    // Stopped within one chunk of the cap instead of inflating all 10 MB, and kept at most the cap.
    let inflated = inflater.decompress.total_out();
    assert!(inflated <= (max + CHUNK) as u64, "inflated {inflated} bytes");
    assert!(out.len() <= max && out.capacity() <= max, "kept {} of {} bytes", out.len(), out.capacity());
}

#[test]
fn inflater_accepts_exactly_the_cap() {
    let max = 100_000;
    let mut inflater = Inflater::new(true, max);
    assert_eq!(inflater.inflate(&deflate_message(&vec![7; max], 6)).unwrap().len(), max);
    assert!(matches!(inflater.inflate(&deflate_message(&vec![7; max + 1], 6)), Err(InflateError::TooLarge { .. })));
}

#[test]
fn inflater_rejects_garbage() {
    let error = Inflater::new(false, 1 << 20).inflate(&[0xff; 32]).unwrap_err();
    assert!(matches!(error, InflateError::Corrupt(_)), "{error}");
}

/// A blocking view of an in-memory async stream whose bytes the test already wrote, so that tungstenite's reader
/// runs over the layer. (tokio-tungstenite's WebSocketStream wraps this same reader, but taking messages from it
/// needs the futures `Stream` trait, and this crate has no futures dependency.)
struct Ready<S>(S);

impl<S: AsyncRead + Unpin> Read for Ready<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut buf = ReadBuf::new(buf);
        match Pin::new(&mut self.0).poll_read(&mut Context::from_waker(Waker::noop()), &mut buf) {
            Poll::Ready(result) => result.map(|()| buf.filled().len()),
            Poll::Pending => Err(io::Error::new(io::ErrorKind::WouldBlock, "the test wrote nothing more")),
        }
    }
}

impl<S: AsyncWrite + Unpin> Write for Ready<S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match Pin::new(&mut self.0).poll_write(&mut Context::from_waker(Waker::noop()), buf) {
            Poll::Ready(result) => result,
            Poll::Pending => Err(io::Error::new(io::ErrorKind::WouldBlock, "the test's pipe is full")),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// One frame's bytes, built independently of the code under test; masked with a random key when `masked`.
fn frame(fin: bool, rsv1: bool, opcode: u8, payload: &[u8], masked: bool) -> Vec<u8> {
    let mut out = vec![(u8::from(fin) << 7) | (u8::from(rsv1) << 6) | opcode];
    let mask_bit = if masked { 0x80 } else { 0 };
    match payload.len() {
        len @ 0..=125 => out.push(mask_bit | len as u8),
        len @ 126..=0xffff => {
            out.push(mask_bit | 126);
            out.extend((len as u16).to_be_bytes());
        }
        len => {
            out.push(mask_bit | 127);
            out.extend((len as u64).to_be_bytes());
        }
    }
    if masked {
        let key: [u8; 4] = rand::random();
        out.extend(key);
        out.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
    } else {
        out.extend(payload);
    }
    out
}

type Reader = WebSocket<Ready<InflateLayer<DuplexStream>>>;

/// A tungstenite reader in `role` over the layer, with `wire` already sent by the peer, whose end is returned too.
fn reader(role: Role, wire: &[u8], inflater: Option<Inflater>) -> (DuplexStream, Reader) {
    let (mut peer, ours) = tokio::io::duplex(1 << 22);
    Ready(&mut peer).write_all(wire).unwrap();
    (peer, WebSocket::from_raw_socket(Ready(InflateLayer::new(ours, inflater)), role, None))
}

fn text(bytes: &[u8]) -> Message {
    Message::text(String::from_utf8(bytes.to_vec()).unwrap())
}

fn io_error_kind(result: Result<Message, WsError>) -> io::ErrorKind {
    match result {
        Err(WsError::Io(e)) => e.kind(),
        other => panic!("expected an I/O error, got {other:?}"),
    }
}

/// The wire of the server test, with the messages tungstenite should read from it.
fn client_wire() -> (Vec<u8>, Vec<Message>) {
    let whole = json_like(5_000);
    let fragmented = json_like(30_000);
    let compressed = deflate_message(&fragmented, 6);
    let (a, b) = (compressed.len() / 3, 2 * compressed.len() / 3);
    let big: Vec<u8> = (0..200_000u32).map(|i| (i * 31 % 251) as u8).collect();
    let wire = [
        frame(true, true, 1, &deflate_message(&whole, 6), true),
        frame(false, true, 1, &compressed[..a], true),
        frame(false, false, 0, &compressed[a..b], true),
        frame(true, false, 9, b"still there?", true),
        frame(true, false, 0, &compressed[b..], true),
        frame(true, false, 1, b"plain text", true),
        frame(true, false, 2, &big, true),
        // A plain fragmented message passes through for tungstenite to join.
        frame(false, false, 1, b"plain ", true),
        frame(true, false, 0, b"fragments", true),
    ]
    .concat();
    let messages = vec![
        text(&whole),
        Message::Ping(Bytes::from_static(b"still there?")),
        text(&fragmented),
        text(b"plain text"),
        Message::binary(big),
        text(b"plain fragments"),
    ];
    (wire, messages)
}

#[test]
fn layer_lets_a_server_read_compressed_and_plain_client_frames() {
    let (wire, messages) = client_wire();
    let (_peer, mut ws) = reader(Role::Server, &wire, Some(Inflater::new(false, 1 << 20)));
    for expected in messages {
        assert_eq!(ws.read().unwrap(), expected);
    }
}

#[tokio::test]
async fn layer_waits_for_a_trickling_peer() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (wire, messages) = client_wire();
    // A pipe smaller than any frame, fed a few bytes at a time: every read of the layer must wait on the peer.
    let (mut peer, ours) = tokio::io::duplex(64);
    let writer = tokio::spawn(async move {
        for piece in wire.chunks(5) {
            peer.write_all(piece).await.unwrap();
        }
    });
    let mut rewritten = Vec::new();
    InflateLayer::new(ours, Some(Inflater::new(false, 1 << 20))).read_to_end(&mut rewritten).await.unwrap();
    writer.await.unwrap();
    // What came out is plain frames, which tungstenite reads with no layer at all.
    let (_peer, mut ws) = reader(Role::Server, &rewritten, None);
    for expected in messages {
        assert_eq!(ws.read().unwrap(), expected);
    }
}

#[test]
fn layer_streams_a_plain_frame_before_it_is_complete() {
    let wire = frame(true, false, 2, &vec![5; 200_000], true);
    let (mut peer, ours) = tokio::io::duplex(1 << 22);
    Ready(&mut peer).write_all(&wire[..100_000]).unwrap();
    let mut layer = Ready(InflateLayer::new(ours, Some(Inflater::new(false, 1 << 20))));
    let mut got = vec![0; wire.len()];
    let mut n = 0;
    loop {
        match layer.read(&mut got[n..]) {
            Ok(0) => panic!("end of stream"),
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(got[..n], wire[..100_000]);
}

#[test]
fn layer_refuses_a_bomb_without_panicking() {
    let bomb = deflate_message(&vec![0; 10 << 20], 9);
    let (_peer, mut ws) = reader(Role::Server, &frame(true, true, 2, &bomb, true), Some(Inflater::new(false, 1 << 20)));
    assert_eq!(io_error_kind(ws.read()), io::ErrorKind::InvalidData);
}

#[test]
fn layer_refuses_compressed_frames_over_the_cap() {
    let noise: Vec<u8> = (0..3_000).map(|_| rand::random()).collect();
    let compressed = deflate_message(&noise, 6);
    let (_peer, mut ws) =
        reader(Role::Server, &frame(true, true, 2, &compressed, true), Some(Inflater::new(false, 2_000)));
    assert_eq!(io_error_kind(ws.read()), io::ErrorKind::InvalidData);
    // The cap counts all fragments together.
    let wire = [frame(false, true, 2, &compressed[..1_500], true), frame(true, false, 0, &compressed[1_500..], true)];
    let (_peer, mut ws) = reader(Role::Server, &wire.concat(), Some(Inflater::new(false, 2_000)));
    assert_eq!(io_error_kind(ws.read()), io::ErrorKind::InvalidData);
}

#[test]
fn layer_refuses_misplaced_reserved_bits() {
    let compressed = deflate_message(b"hello", 6);
    let cases = [
        ("RSV1 on a ping", frame(true, true, 9, b"", true)),
        ("RSV1 on a close", frame(true, true, 8, b"", true)),
        ("RSV1 on a continuation", [frame(false, false, 1, b"a", true), frame(true, true, 0, b"b", true)].concat()),
        (
            "RSV2",
            frame(true, false, 1, b"a", true)
                .into_iter()
                .enumerate()
                .map(|(i, b)| if i == 0 { b | 0x20 } else { b })
                .collect(),
        ),
        (
            "RSV3",
            frame(true, false, 1, b"a", true)
                .into_iter()
                .enumerate()
                .map(|(i, b)| if i == 0 { b | 0x10 } else { b })
                .collect(),
        ),
        (
            "a new message inside a compressed one",
            [frame(false, true, 1, &compressed, true), frame(true, false, 1, b"x", true)].concat(),
        ),
    ];
    for (case, wire) in cases {
        let (_peer, mut ws) = reader(Role::Server, &wire, Some(Inflater::new(false, 1 << 20)));
        assert_eq!(io_error_kind(ws.read()), io::ErrorKind::InvalidData, "{case}");
    }
}

#[test]
fn layer_reports_a_compressed_message_cut_short() {
    let compressed = deflate_message(&json_like(1_000), 6);
    let (peer, mut ws) =
        reader(Role::Server, &frame(false, true, 1, &compressed, true), Some(Inflater::new(false, 1 << 20)));
    drop(peer);
    assert_eq!(io_error_kind(ws.read()), io::ErrorKind::UnexpectedEof);
}

#[test]
fn layer_lets_a_client_read_unmasked_server_frames() {
    let update = json_like(4_000);
    let compressed = deflate_message(&update, 6);
    let half = compressed.len() / 2;
    let wire = [
        frame(true, true, 1, &compressed, false),
        frame(false, true, 2, &compressed[..half], false),
        frame(true, false, 10, b"pong", false),
        frame(true, false, 0, &compressed[half..], false),
        frame(true, false, 1, b"plain", false),
    ]
    .concat();
    let (_peer, mut ws) = reader(Role::Client, &wire, Some(Inflater::new(true, 1 << 20)));
    assert_eq!(ws.read().unwrap(), text(&update));
    assert_eq!(ws.read().unwrap(), Message::Pong(Bytes::from_static(b"pong")));
    assert_eq!(ws.read().unwrap(), Message::binary(update));
    assert_eq!(ws.read().unwrap(), text(b"plain"));
}

#[test]
fn layer_without_an_inflater_leaves_rsv1_to_tungstenite() {
    let wire = [frame(true, false, 1, b"plain", true), frame(true, true, 1, &deflate_message(b"x", 6), true)].concat();
    let (_peer, mut ws) = reader(Role::Server, &wire, None);
    assert_eq!(ws.read().unwrap(), text(b"plain"));
    assert!(matches!(ws.read(), Err(WsError::Protocol(ProtocolError::NonZeroReservedBits))));
}
