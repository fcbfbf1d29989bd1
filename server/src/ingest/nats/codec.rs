//! How a line's bytes travel: lines of at least `nats.compress_min_bytes` are zstd-compressed by the publisher
//! (`Hl-Enc: zstd`), everything else goes as the node wrote it.
//!
//! Why: a by-block status line is several MB of JSON that compresses ~30x at zstd's fastest level, which
//! compresses at GB/s and inflates faster still. Every edge receives every line, so the bytes a NATS server sends
//! grow with the number of edges; compressed, 50 edges cost what two did uncompressed, and a multi-MB line crosses
//! the wire in a few hundred KB. Small lines (fills, most diffs) are left alone: they are latency-bound, not
//! bandwidth-bound. Each compressed line also names its length (`Hl-Len`), so an edge refuses a line over its
//! limit before inflating anything, and never inflates past what it was told (a hostile payload cannot grow).

use bytes::Bytes;

/// zstd's fastest level: the ratio on node JSON barely improves above it, the CPU does.
const LEVEL: i32 = 1;

/// The value of `Hl-Enc` for a zstd-compressed line.
pub const ZSTD: &str = "zstd";

/// The publisher's side: one compression context, reused for every line.
pub struct Encoder {
    zstd: zstd::bulk::Compressor<'static>,
    min: usize,
}

impl Encoder {
    /// Compresses lines of at least `min` bytes; 0 never compresses.
    pub fn new(min: usize) -> anyhow::Result<Encoder> {
        Ok(Encoder { zstd: zstd::bulk::Compressor::new(LEVEL)?, min })
    }

    /// The bytes to send and whether they are compressed. A line that does not get smaller goes as it is.
    pub fn encode(&mut self, line: Bytes) -> (Bytes, bool) {
        if self.min == 0 || line.len() < self.min {
            return (line, false);
        }
        match self.zstd.compress(&line) {
            Ok(z) if z.len() < line.len() => (Bytes::from(z), true),
            _ => (line, false),
        }
    }
}

/// The edge's side: the line a payload holds, given its `Hl-Enc` and `Hl-Len`. The declared length must be within
/// `max_line` and must be exactly what the payload inflates to.
pub fn decode(payload: Bytes, enc: Option<&str>, len: Option<u64>, max_line: usize) -> Result<Bytes, String> {
    match enc {
        None => Ok(payload),
        Some(ZSTD) => {
            let len = len.ok_or("a compressed line without Hl-Len")?;
            let len = usize::try_from(len).ok().filter(|&l| l <= max_line).ok_or("over the line limit")?;
            let line = zstd::bulk::decompress(&payload, len).map_err(|e| format!("does not inflate: {e}"))?;
            if line.len() != len {
                return Err(format!("inflates to {} bytes, not the {len} its header says", line.len()));
            }
            Ok(Bytes::from(line))
        }
        Some(other) => Err(format!("unknown encoding {other:?} (an edge older than its publisher?)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(n: usize) -> Bytes {
        let mut s = String::from("[");
        for i in 0..n {
            s.push_str(&format!(r#"{{"oid":{i},"px":"81307.0","sz":"0.0123","side":"B"}},"#));
        }
        s.push(']');
        Bytes::from(s)
    }

    #[test]
    fn large_lines_round_trip_small_ones_go_as_they_are() {
        let mut e = Encoder::new(4096).unwrap();
        let big = json(2000);
        let (z, compressed) = e.encode(big.clone());
        assert!(compressed && z.len() * 5 < big.len(), "{} of {}", z.len(), big.len());
        assert_eq!(decode(z, Some(ZSTD), Some(big.len() as u64), 1 << 20).unwrap(), big);
        let small = json(3);
        assert_eq!(e.encode(small.clone()), (small, false));
        assert_eq!(Encoder::new(0).unwrap().encode(big.clone()), (big, false));
    }

    #[test]
    fn a_lying_or_hostile_payload_is_refused_without_inflating_past_its_length() {
        let mut e = Encoder::new(1).unwrap();
        let big = json(2000);
        let (z, _) = e.encode(big.clone());
        let n = big.len() as u64;
        // Over the edge's limit: refused before inflating.
        assert!(decode(z.clone(), Some(ZSTD), Some(n), big.len() - 1).unwrap_err().contains("limit"));
        // A length smaller than the truth: inflating stops there and fails.
        assert!(decode(z.clone(), Some(ZSTD), Some(n - 1), 1 << 20).is_err());
        // Larger than the truth: the line is short of it.
        assert!(decode(z.clone(), Some(ZSTD), Some(n + 1), 1 << 20).unwrap_err().contains("not the"));
        assert!(decode(z.clone(), Some(ZSTD), None, 1 << 20).is_err());
        assert!(decode(Bytes::from_static(b"not zstd"), Some(ZSTD), Some(8), 1 << 20).is_err());
        assert!(decode(z, Some("lz4"), Some(n), 1 << 20).unwrap_err().contains("unknown"));
        // A bomb: 64 MB of zeros in a few KB, declared small, never inflates past the declared size.
        let bomb = zstd::bulk::compress(&vec![0u8; 64 << 20], 19).unwrap();
        assert!(decode(Bytes::from(bomb), Some(ZSTD), Some(1000), 1 << 20).is_err());
    }
}
