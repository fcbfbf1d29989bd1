//! The node's L4 snapshot file, read as a stream.
//!
//! A full mainnet snapshot holds every resting order of every coin (hundreds of MB), so it is never held as a
//! JSON tree: serde visitors walk `[height, [[coin, [bids, asks]], …]]` straight from the reader and hand over
//! each coin's orders as soon as that coin is complete, so the caller can build books while parsing goes on.
//!
//! Asked with `includeTriggerOrders: true`, the node also lists the trigger orders that have not triggered. They
//! carry the status schema's `"isTrigger": true` (a triggered order resting on the book says `false` and
//! `"triggerCondition": "Triggered"`; an untriggered one `"Price above …"`/`"Price below …"` and `"tif": null`, as
//! the `children` of the capture's statuses show), so they are told apart by that flag, wherever the side list
//! puts them, and handed over apart from the resting orders: they never rest on a book.

use std::fmt;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use serde::de::{self, DeserializeSeed, Deserializer, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::event::{Address, Coin, OrderInfo, Side};
use super::line::NodeParser;
use super::wire::OrderWire;

/// One coin of a snapshot: resting orders per side (`[bids, asks]`), best first, time priority within a price;
/// and the untriggered trigger orders of both sides, in the snapshot's order.
#[derive(Debug)]
pub struct SnapshotCoin {
    pub coin: Coin,
    pub sides: [Vec<(Address, OrderInfo)>; 2],
    pub triggers: Vec<(Address, OrderInfo)>,
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("cannot open snapshot {path}: {source}")]
    Open { path: String, source: std::io::Error },
    #[error("malformed snapshot: {0}")]
    Json(#[from] serde_json::Error),
}

/// Streams a snapshot from `reader`, calling `on_coin` for each coin; returns the snapshot height.
pub fn read_snapshot(reader: impl Read, on_coin: impl FnMut(SnapshotCoin)) -> Result<u64, SnapshotError> {
    read_with(serde_json::Deserializer::from_reader(reader), on_coin)
}

/// Streams a snapshot held in memory (or mapped): the same visitors, but serde_json's slice reader is much faster
/// than its `io::Read` one.
pub fn read_snapshot_slice(bytes: &[u8], on_coin: impl FnMut(SnapshotCoin)) -> Result<u64, SnapshotError> {
    read_with(serde_json::Deserializer::from_slice(bytes), on_coin)
}

fn read_with<'de, R: serde_json::de::Read<'de>>(
    mut de: serde_json::Deserializer<R>,
    on_coin: impl FnMut(SnapshotCoin),
) -> Result<u64, SnapshotError> {
    let height = de.deserialize_seq(Top { parser: &mut NodeParser::new(), on_coin })?;
    de.end()?;
    Ok(height)
}

/// Opens a snapshot file and streams it: memory-mapped (no copy; pages are read as parsing reaches them), or
/// decompressed on the fly when the name ends in `.gz`.
pub fn read_snapshot_file(path: &Path, on_coin: impl FnMut(SnapshotCoin)) -> Result<u64, SnapshotError> {
    let open_err = |source| SnapshotError::Open { path: path.display().to_string(), source };
    let file = File::open(path).map_err(open_err)?;
    if path.extension().is_some_and(|e| e == "gz") {
        let reader = BufReader::with_capacity(1 << 20, file);
        return read_snapshot(BufReader::with_capacity(1 << 20, flate2::read::GzDecoder::new(reader)), on_coin);
    }
    if file.metadata().map_err(open_err)?.len() == 0 {
        return read_snapshot_slice(&[], on_coin);
    }
    // SAFETY: the map is read-only and lives only for this call. The snapshot is a file the node finished
    // writing to a path we chose; were it truncated meanwhile the process could fault, which is why a snapshot
    // path is never shared with anything else.
    #[allow(unsafe_code)]
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(open_err)?;
    read_snapshot_slice(&map, on_coin)
}

/// `[height, coins]`.
struct Top<'p, F> {
    parser: &'p mut NodeParser,
    on_coin: F,
}

impl<'de, F: FnMut(SnapshotCoin)> Visitor<'de> for Top<'_, F> {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[height, [[coin, [bids, asks]], ...]]")
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<u64, A::Error> {
        let height: u64 = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(0, &self))?;
        let coins = Coins { parser: self.parser, on_coin: &mut self.on_coin };
        seq.next_element_seed(coins)?.ok_or_else(|| de::Error::invalid_length(1, &"[height, coins]"))?;
        if seq.next_element::<de::IgnoredAny>()?.is_some() {
            return Err(de::Error::invalid_length(3, &"[height, coins]"));
        }
        Ok(height)
    }
}

/// `[[coin, [bids, asks]], …]`.
struct Coins<'p, F> {
    parser: &'p mut NodeParser,
    on_coin: &'p mut F,
}

impl<'de, F: FnMut(SnapshotCoin)> DeserializeSeed<'de> for Coins<'_, F> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, F: FnMut(SnapshotCoin)> Visitor<'de> for Coins<'_, F> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of [coin, [bids, asks]]")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(coin) = seq.next_element_seed(OneCoin { parser: &mut *self.parser })? {
            (self.on_coin)(coin);
        }
        Ok(())
    }
}

/// `[coin, [bids, asks]]`.
struct OneCoin<'p> {
    parser: &'p mut NodeParser,
}

impl<'de> DeserializeSeed<'de> for OneCoin<'_> {
    type Value = SnapshotCoin;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<SnapshotCoin, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for OneCoin<'_> {
    type Value = SnapshotCoin;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[coin, [bids, asks]]")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<SnapshotCoin, A::Error> {
        let name: compact_str::CompactString =
            seq.next_element()?.ok_or_else(|| de::Error::invalid_length(0, &self))?;
        let coin = self.parser.coin(&name);
        let mut sides: [Vec<(Address, OrderInfo)>; 2] = seq
            .next_element_seed(Sides { parser: self.parser })?
            .ok_or_else(|| de::Error::invalid_length(1, &"[coin, [bids, asks]]"))?;
        if seq.next_element::<de::IgnoredAny>()?.is_some() {
            return Err(de::Error::invalid_length(3, &"[coin, [bids, asks]]"));
        }
        let triggers = split_triggers(&mut sides);
        Ok(SnapshotCoin { coin, sides, triggers })
    }
}

/// Takes the untriggered trigger orders (`isTrigger`) out of both sides; the common case (none) moves nothing.
fn split_triggers(sides: &mut [Vec<(Address, OrderInfo)>; 2]) -> Vec<(Address, OrderInfo)> {
    let mut triggers = Vec::new();
    for side in sides {
        if side.iter().any(|(_, o)| o.flavor.is_trigger) {
            let (t, resting): (Vec<_>, Vec<_>) =
                std::mem::take(side).into_iter().partition(|(_, o)| o.flavor.is_trigger);
            *side = resting;
            triggers.extend(t);
        }
    }
    triggers
}

/// `[bids, asks]`, each `[[user, order], …]`.
struct Sides<'p> {
    parser: &'p mut NodeParser,
}

impl<'de> DeserializeSeed<'de> for Sides<'_> {
    type Value = [Vec<(Address, OrderInfo)>; 2];
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Sides<'_> {
    type Value = [Vec<(Address, OrderInfo)>; 2];

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[bids, asks]")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut sides: [Vec<(Address, OrderInfo)>; 2] = [Vec::new(), Vec::new()];
        for (i, side) in [Side::Bid, Side::Ask].into_iter().enumerate() {
            sides[i] = seq
                .next_element_seed(Orders { parser: &mut *self.parser, side })?
                .ok_or_else(|| de::Error::invalid_length(i, &"[bids, asks]"))?;
        }
        if seq.next_element::<de::IgnoredAny>()?.is_some() {
            return Err(de::Error::invalid_length(3, &"[bids, asks]"));
        }
        Ok(sides)
    }
}

/// `[[user, order], …]` of one side.
struct Orders<'p> {
    parser: &'p mut NodeParser,
    side: Side,
}

impl<'de> DeserializeSeed<'de> for Orders<'_> {
    type Value = Vec<(Address, OrderInfo)>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Orders<'_> {
    type Value = Vec<(Address, OrderInfo)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of [user, order]")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some((user, wire)) = seq.next_element::<(Address, OrderWire<Box<RawValue>>)>()? {
            if wire.side != self.side {
                return Err(de::Error::custom(format_args!(
                    "order {} has side {} but is listed with the {}",
                    wire.oid,
                    wire.side.as_str(),
                    if self.side == Side::Bid { "bids" } else { "asks" }
                )));
            }
            out.push((user, self.parser.order_info(wire)));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNAP: &str = r#"[42,[["BTC",[[["0x1c1c270b573d55b68b3d14722b5d5d401511bed0",{"coin":"BTC","side":"B","limitPx":"81307.0","sz":"0.18385","oid":1,"timestamp":1778002736649,"triggerCondition":"N/A","isTrigger":false,"triggerPx":"0.0","children":[],"isPositionTpsl":false,"reduceOnly":false,"orderType":"Limit","origSz":"0.30747","tif":"Alo","cloid":null}]],[]]],["@107",[[],[]]]]]"#;

    #[test]
    fn streams_coins_in_order() {
        let mut coins = Vec::new();
        let h = read_snapshot(SNAP.as_bytes(), |c| coins.push(c)).unwrap();
        assert_eq!(h, 42);
        assert_eq!(coins.len(), 2);
        assert_eq!(&*coins[0].coin, "BTC");
        assert_eq!(coins[0].sides[0].len(), 1);
        assert_eq!(coins[0].sides[0][0].1.orig_sz.to_string(), "0.30747");
        assert_eq!(&*coins[1].coin, "@107");
    }

    #[test]
    fn untriggered_orders_are_handed_over_apart() {
        let trigger = r#"["0x0000000000000000000000000000000000000009",{"coin":"BTC","side":"B","limitPx":"64800.0","sz":"0.0122","oid":5,"timestamp":1776712523717,"triggerCondition":"Price below 60000","isTrigger":true,"triggerPx":"60000.0","children":[],"isPositionTpsl":false,"reduceOnly":true,"orderType":"Take Profit Market","origSz":"0.0122","tif":null,"cloid":null}]"#;
        // Listed first among the bids although its limitPx is below the resting bid's: the flag decides.
        let with = SNAP.replacen("[[[\"0x1c1c", &format!("[[{trigger},[\"0x1c1c"), 1);
        let mut coins = Vec::new();
        read_snapshot(with.as_bytes(), |c| coins.push(c)).unwrap();
        assert_eq!(coins[0].sides[0].len(), 1);
        assert_eq!(coins[0].sides[0][0].1.oid, 1);
        assert_eq!(coins[0].triggers.len(), 1);
        let (user, t) = &coins[0].triggers[0];
        assert_eq!((t.oid, t.side, t.flavor.is_trigger, t.flavor.tif.as_deref()), (5, Side::Bid, true, None));
        assert_eq!((t.trigger_px.to_string(), &*t.flavor.trigger_condition), ("60000.0".into(), "Price below 60000"));
        assert_eq!(user.to_string(), "0x0000000000000000000000000000000000000009");
        assert!(coins[1].triggers.is_empty());
    }

    #[test]
    fn file_slice_and_gzip_paths_agree() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("s.json");
        std::fs::write(&plain, SNAP).unwrap();
        let gz = dir.path().join("s.json.gz");
        let mut enc = flate2::write::GzEncoder::new(File::create(&gz).unwrap(), flate2::Compression::fast());
        std::io::Write::write_all(&mut enc, SNAP.as_bytes()).unwrap();
        enc.finish().unwrap();
        for p in [&plain, &gz] {
            let mut n = 0;
            assert_eq!(read_snapshot_file(p, |c| n += c.sides[0].len()).unwrap(), 42);
            assert_eq!(n, 1);
        }
        let empty = dir.path().join("empty.json");
        std::fs::write(&empty, "").unwrap();
        assert!(read_snapshot_file(&empty, |_| {}).is_err());
    }

    #[test]
    fn refuses_malformed_snapshots() {
        let wrong_side = SNAP.replacen(r#""side":"B""#, r#""side":"A""#, 1);
        let e = read_snapshot(wrong_side.as_bytes(), |_| {}).unwrap_err();
        assert!(e.to_string().contains("listed with the bids"), "{e}");
        for bad in ["", "[]", "[1]", "{}", "[1,[[\"BTC\"]]]", &SNAP[..SNAP.len() - 1], "[1,[]] x"] {
            assert!(read_snapshot(bad.as_bytes(), |_| {}).is_err(), "{bad}");
        }
        assert!(matches!(
            read_snapshot_file(Path::new("/nonexistent/snap.json"), |_| {}),
            Err(SnapshotError::Open { .. })
        ));
    }
}
