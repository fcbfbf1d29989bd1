//! A serialized data frame, shared by every subscriber that gets it.
//!
//! The JSON is written once by the publisher. Compressed subscribers share one deflated copy, made by whichever
//! connection needs it first. Audit subscribers (`/ws?audit=1`) get the same JSON with the block's stage times
//! appended, which costs them a copy but leaves everyone else's bytes official.

use std::sync::OnceLock;

use bytes::Bytes;

use crate::ws::deflate::deflate_message;

/// Stage timestamps of the block a frame describes (Unix ns; 0 when unknown).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Audit {
    pub height: u64,
    /// The block's line the frame was built from (its stage times are that line's).
    pub line: crate::node::Stream,
    /// Consensus time.
    pub block_ns: i64,
    /// The node's `local_time` of the line.
    pub node_ns: i64,
    /// We had read the line.
    pub read_ns: i64,
    /// Its step was applied to our books.
    pub applied_ns: i64,
    /// This frame was serialized and published.
    pub published_ns: i64,
}

#[derive(Debug)]
pub struct Frame {
    /// The publish pass (L2, bbo, allMids) or feed tick (trades, l4Book) that made it.
    pub seq: u64,
    /// `{"channel":…,"data":…}`.
    pub json: Bytes,
    pub audit: Audit,
    deflated: OnceLock<Bytes>,
}

impl Frame {
    pub fn new(seq: u64, json: Vec<u8>, audit: Audit) -> Frame {
        Frame { seq, json: Bytes::from(json), audit, deflated: OnceLock::new() }
    }

    /// The JSON compressed for permessage-deflate, made once per frame.
    pub fn deflated(&self, level: u32) -> &Bytes {
        self.deflated.get_or_init(|| deflate_message(&self.json, level))
    }

    /// The JSON with `"audit":{…}` added as a last top-level key; `sent_ns` is the connection's write time.
    pub fn with_audit(&self, sent_ns: i64) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.json.len() + 200);
        out.extend_from_slice(&self.json[..self.json.len().saturating_sub(1)]);
        write_audit(&mut out, &self.audit, sent_ns);
        out.push(b'}');
        out
    }
}

/// `,"audit":{"height":…,"block_ns":…,…,"sent_ns":…}`: the names `latency_stats --audit` reads (docs/api.md).
pub fn write_audit(out: &mut Vec<u8>, a: &Audit, sent_ns: i64) {
    let mut b = itoa::Buffer::new();
    out.extend_from_slice(b",\"audit\":{\"height\":");
    out.extend_from_slice(b.format(a.height).as_bytes());
    for (name, v) in [
        ("block_ns", a.block_ns),
        ("node_ns", a.node_ns),
        ("read_ns", a.read_ns),
        ("applied_ns", a.applied_ns),
        ("published_ns", a.published_ns),
        ("sent_ns", sent_ns),
    ] {
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
                height: 7,
                block_ns: 1,
                node_ns: 2,
                read_ns: 3,
                applied_ns: 4,
                published_ns: 5,
                ..Audit::default()
            },
        );
        let v: serde_json::Value = serde_json::from_slice(&f.with_audit(6)).unwrap();
        assert_eq!(v["data"]["coin"], "BTC");
        assert_eq!(v["audit"]["height"], 7);
        assert_eq!(v["audit"]["published_ns"], 5);
        assert_eq!(v["audit"]["sent_ns"], 6);
    }
}
