//! A serialized data frame, shared by every subscriber that gets it.
//!
//! The JSON is written once by the publisher. Each way of sending it (plain or permessage-deflate) is turned into
//! one whole WebSocket message once, by whichever connection needs it first, and every subscriber that sends it
//! that way writes those same bytes. Audit subscribers (`/ws?audit=1`) get the same JSON with the block's stage times
//! appended, which costs them a copy but leaves everyone else's bytes official.

use std::sync::OnceLock;

use bytes::Bytes;

use crate::state::LineTimes;

/// The stamp a frame carries: its line's recorded stage times (the same record ingest keeps in the state's
/// timeline) and when the frame itself was published (Unix ns; 0 when unknown).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Audit {
    pub times: LineTimes,
    /// This frame was serialized and published.
    pub published: i64,
}

impl Audit {
    pub fn height(&self) -> u64 {
        self.times.height
    }

    pub fn block_time(&self) -> i64 {
        self.times.block_time
    }
}

#[derive(Debug)]
pub struct Frame {
    /// Its number in its slot (L2, bbo, allMids: see `Slot`) or the feed tick that holds it (trades, l4Book, ...).
    pub seq: u64,
    /// `{"channel":…,"data":…}`.
    pub json: Bytes,
    pub audit: Audit,
    /// The message on the wire: `[plain, compressed]`.
    wire: [OnceLock<Bytes>; 2],
}

impl Frame {
    pub fn new(seq: u64, json: Vec<u8>, audit: Audit) -> Frame {
        Frame { seq, json: Bytes::from(json), audit, wire: Default::default() }
    }

    /// This frame as a whole WebSocket message, plain or compressed: `make` frames the JSON (the serving stage
    /// knows the wire format), once per frame and way of sending, and every later caller shares the result.
    pub fn wire(&self, compressed: bool, make: impl FnOnce(&[u8]) -> Bytes) -> &Bytes {
        self.wire[usize::from(compressed)].get_or_init(|| make(&self.json))
    }

    /// The JSON with `"replayed":true` added as a last top-level key: the frame sent again to a subscription
    /// that resumed (docs/api.md "Resume"), otherwise the same bytes.
    pub fn replayed(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.json.len() + REPLAYED.len());
        out.extend_from_slice(&self.json[..self.json.len().saturating_sub(1)]);
        out.extend_from_slice(REPLAYED);
        out.push(b'}');
        out
    }

    /// The JSON with `"audit":{…}` added as a last top-level key (after `"replayed":true` when `replayed`);
    /// `sent_ns` is the connection's write time, and `more` writes the connection's own fields (`,"key":value…`)
    /// at the end of the audit object.
    pub fn with_audit(&self, sent_ns: i64, replayed: bool, more: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.json.len() + 250);
        out.extend_from_slice(&self.json[..self.json.len().saturating_sub(1)]);
        if replayed {
            out.extend_from_slice(REPLAYED);
        }
        write_audit(&mut out, &self.audit, sent_ns);
        out.pop();
        more(&mut out);
        out.extend_from_slice(b"}}");
        out
    }
}

/// The replay mark, written before a frame's closing brace.
const REPLAYED: &[u8] = b",\"replayed\":true";

/// `,"audit":{"height":…,"block_ns":…,…,"sent_ns":…}`: the names `latency_stats --audit` reads (docs/api.md).
/// A stamp that is 0 (unknown) is left out.
pub fn write_audit(out: &mut Vec<u8>, a: &Audit, sent_ns: i64) {
    let mut b = itoa::Buffer::new();
    out.extend_from_slice(b",\"audit\":{\"height\":");
    out.extend_from_slice(b.format(a.times.height).as_bytes());
    for (name, v) in [
        ("block_ns", a.times.block_time),
        ("node_ns", a.times.node_written),
        ("read_ns", a.times.read),
        ("applied_ns", a.times.applied),
        ("published_ns", a.published),
        ("sent_ns", sent_ns),
    ] {
        // 0 means the stamp is unknown (the block left its timeline): leave the key out rather than send a
        // time that a reader would subtract from (issue #18).
        if v == 0 {
            continue;
        }
        out.extend_from_slice(b",\"");
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"\":");
        out.extend_from_slice(b.format(v).as_bytes());
    }
    out.push(b'}');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audit_is_a_last_key_of_valid_json() {
        let f = Frame::new(
            1,
            br#"{"channel":"l2Book","data":{"coin":"BTC"}}"#.to_vec(),
            Audit {
                times: LineTimes {
                    height: 7,
                    block_time: 1,
                    node_written: 2,
                    read: 3,
                    applied: 4,
                    ..LineTimes::default()
                },
                published: 5,
            },
        );
        let v: serde_json::Value =
            serde_json::from_slice(&f.with_audit(6, false, |o| o.extend_from_slice(b",\"n\":3"))).unwrap();
        assert_eq!(v["data"]["coin"], "BTC");
        assert_eq!(v["audit"]["height"], 7);
        assert_eq!(v["audit"]["published_ns"], 5);
        assert_eq!(v["audit"]["sent_ns"], 6);
        assert_eq!(v["audit"]["n"], 3);
    }

    #[test]
    fn a_replayed_frame_is_the_live_one_with_one_more_key() {
        let json = br#"{"channel":"trades","data":[{"coin":"BTC","tid":1}]}"#;
        let f = Frame::new(
            1,
            json.to_vec(),
            Audit { times: LineTimes { height: 7, ..LineTimes::default() }, published: 5 },
        );
        let plain = f.replayed();
        assert_eq!(plain, br#"{"channel":"trades","data":[{"coin":"BTC","tid":1}],"replayed":true}"#);
        let audited: serde_json::Value = serde_json::from_slice(&f.with_audit(6, true, |_| {})).unwrap();
        assert_eq!(audited["replayed"], true);
        assert_eq!(audited["audit"]["height"], 7);
        let text = String::from_utf8(f.with_audit(6, true, |_| {})).unwrap();
        assert!(text.find("\"replayed\"") < text.find("\"audit\""), "the mark comes before the audit: {text}");
    }

    #[test]
    fn unknown_stamps_are_left_out() {
        let f = Frame::new(
            1,
            br#"{"channel":"bbo","data":{"coin":"ETH"}}"#.to_vec(),
            Audit {
                times: LineTimes {
                    height: 9,
                    block_time: 10,
                    node_written: 0,
                    read: 0,
                    applied: 0,
                    ..LineTimes::default()
                },
                published: 50,
            },
        );
        let v: serde_json::Value = serde_json::from_slice(&f.with_audit(60, false, |_| {})).unwrap();
        let a = v["audit"].as_object().unwrap();
        let keys: Vec<&str> = a.keys().map(String::as_str).collect();
        assert_eq!(keys, ["height", "block_ns", "published_ns", "sent_ns"], "{a:?}");
        assert_eq!(a["block_ns"], 10);
    }
}
