use std::io::Cursor;

use tokio::io::AsyncReadExt;
use tokio_tungstenite::tungstenite::protocol::frame::FrameHeader;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocket};
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

use super::*;

/// A text payload of exactly `len` bytes.
fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| b'a' + (i % 26) as u8).collect()
}

/// Every message in `bytes`, read as a client reads them.
fn read_as_client(bytes: Vec<u8>, count: usize) -> Vec<Message> {
    let mut ws = WebSocket::from_raw_socket(Cursor::new(bytes), Role::Client, None);
    (0..count).map(|_| ws.read().expect("a valid server message")).collect()
}

#[test]
fn lengths_on_every_header_boundary_parse_back() {
    for len in [0, 1, 125, 126, 127, 65535, 65536, 70_000] {
        let p = payload(len);
        let wire = text_message(&p, false);
        let expected_header = match len {
            0..=125 => 2,
            126..=65535 => 4,
            _ => 10,
        };
        assert_eq!(wire.len(), expected_header + len, "length {len}");
        let got = read_as_client(wire.to_vec(), 1);
        assert_eq!(got, vec![Message::Text(Utf8Bytes::try_from(p).unwrap())], "length {len}");
    }
}

#[test]
fn compressed_messages_carry_rsv1_and_their_length() {
    for len in [3, 125, 126, 65535, 65536] {
        let wire = text_message(&payload(len), true);
        let (header, n) = FrameHeader::parse(&mut Cursor::new(&wire[..])).unwrap().unwrap();
        assert!(header.is_final && header.rsv1 && !header.rsv2 && !header.rsv3, "length {len}");
        assert_eq!(header.opcode, OpCode::Data(Data::Text));
        assert_eq!(header.mask, None, "server frames are never masked");
        assert_eq!(n, len as u64);
    }
}

#[tokio::test]
async fn partial_writes_deliver_every_message_whole_and_in_order() {
    // A 64-byte pipe forces many short writes, each ending inside some message.
    let (mut ours, mut theirs) = tokio::io::duplex(64);
    let texts: Vec<Vec<u8>> = [5, 300, 0, 70_000, 126].into_iter().map(payload).collect();
    let messages: Vec<Bytes> = texts.iter().map(|t| text_message(t, false)).collect();
    let reader = tokio::spawn(async move {
        let mut all = Vec::new();
        theirs.read_to_end(&mut all).await.unwrap();
        all
    });
    write_all(&mut ours, &messages).await.unwrap();
    drop(ours);
    let got = read_as_client(reader.await.unwrap(), texts.len());
    let expected: Vec<Message> = texts.into_iter().map(|t| Message::Text(Utf8Bytes::try_from(t).unwrap())).collect();
    assert_eq!(got, expected);
}
