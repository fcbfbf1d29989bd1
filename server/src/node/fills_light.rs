//! A fills line read for what the history store keeps of it: each fill's trade fields and its object verbatim.
//!
//! The store reads whole hour files back (its backfill), so this takes the fast path of `node::fast` where the
//! line is in the node's exact layout, and serde otherwise. It is lighter than `NodeParser`'s fills: only
//! `coin`, `px`, `sz`, `time` and `tid` must parse, and a fill that does not is skipped and counted on its own,
//! the rest of its line kept.

use std::borrow::Cow;

use serde_json::value::RawValue;

use super::decimal::Fixed;
use super::event::{Address, Coin, Fill};
use super::fast;
use super::time::UnixNanos;
use super::wire::{Envelope, FillBody, FillTradeWire};

/// One fill as the light read gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LightFill<'a> {
    pub user: Address,
    pub coin: Cow<'a, str>,
    pub px: Fixed,
    pub sz: Fixed,
    /// Milliseconds, as the node writes it.
    pub time: i64,
    pub tid: u64,
    /// The fill object exactly as written.
    pub raw: &'a str,
}

/// A fills line read light.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LightFills<'a> {
    pub height: u64,
    pub block_time: UnixNanos,
    /// In the node's order.
    pub fills: Vec<LightFill<'a>>,
    /// Fills whose trade fields did not parse (skipped).
    pub malformed: u64,
}

/// Reads a fills line (with or without its newline); `None` when its envelope does not parse.
pub fn read_light_fills(line: &[u8]) -> Option<LightFills<'_>> {
    fast_light(line).or_else(|| light_in_full(line))
}

/// The node's exact layout, read by `node::fast`.
fn fast_light(line: &[u8]) -> Option<LightFills<'_>> {
    let (meta, fills) = fast::fills(line, |user, b, raw| {
        // The fast path read every byte it kept as UTF-8 (or refused the line), so this does not fail.
        let raw = std::str::from_utf8(raw.bytes).ok()?;
        Some(LightFill { user, coin: b.coin, px: b.px, sz: b.sz, time: b.time, tid: b.tid, raw })
    })?;
    let fills = fills.into_iter().collect::<Option<Vec<_>>>()?;
    Some(LightFills { height: meta.height, block_time: meta.block_time, fills, malformed: 0 })
}

/// Any layout serde reads: the reference for the fast path, and where a line off it goes.
fn light_in_full(line: &[u8]) -> Option<LightFills<'_>> {
    let env: Envelope<(Address, &RawValue)> = serde_json::from_slice(line).ok()?;
    let meta = env.meta();
    let mut fills = Vec::with_capacity(env.events.len());
    let mut malformed = 0;
    for (user, raw) in env.events {
        let raw = raw.get();
        let Ok(w) = serde_json::from_str::<FillTradeWire<'_>>(raw) else {
            malformed += 1;
            continue;
        };
        fills.push(LightFill { user, coin: w.coin, px: w.px, sz: w.sz, time: w.time, tid: w.tid, raw });
    }
    Some(LightFills { height: meta.height, block_time: meta.block_time, fills, malformed })
}

/// A kept fill object (the store gives them back as the node wrote them) of `coin`, read as the live trades
/// channel reads a fill, so `tradesByHeight` writes the same trades; `None` for another coin, or a fill without
/// the fields a trade needs.
pub fn fill_of_coin(user: Address, raw: &str, coin: &Coin) -> Option<Fill> {
    // The node writes `coin` first: another coin's fill (most of a block's) is told apart without parsing it. A
    // name with an escape, or another layout, takes the full parse.
    if let Some(rest) = raw.strip_prefix(r#"{"coin":""#)
        && let Some(name) = rest.split('"').next()
        && !name.contains('\\')
        && name != &**coin
    {
        return None;
    }
    let b: FillBody<'_> = serde_json::from_str(raw).ok()?;
    (*b.coin == **coin).then(|| b.into_fill(coin.clone(), user))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = r#"{"local_time":"2026-05-05T17:39:13.394386432","block_time":"2026-05-05T17:39:13.024084407","block_number":985148182"#;

    /// Two sides of a trade as the node writes them, the second with the optional fields after `tid`.
    const FILLS: [&str; 2] = [
        r#"["0x1624a8af8b91cc781586b4d7a33b8e693dc11015",{"coin":"BTC","px":"81308.0","sz":"0.00033","side":"B","time":1778002753024,"startPosition":"0.20486","dir":"Open Long","closedPnl":"0.0","hash":"0x0000000000000000000000000000000000000000000000000000000000000000","oid":412036451245,"crossed":true,"fee":"0.010866","tid":316059956208702,"feeToken":"USDC","twapId":1790552}]"#,
        r#"["0x5eaac7c475b1fad85701f02c4e9e796a53f94bd5",{"coin":"BTC","px":"81308.0","sz":"0.00033","side":"A","time":1778002753024,"startPosition":"-0.29602","dir":"Open Short","closedPnl":"0.0","hash":"0x0000000000000000000000000000000000000000000000000000000000000000","oid":412036231803,"crossed":false,"fee":"-0.000804","tid":316059956208702,"cloid":"0x00000000052e29a900002af647791c39","feeToken":"USDC","twapId":null}]"#,
    ];

    fn line(events: &[&str]) -> String {
        format!("{HEAD},\"events\":[{}]}}", events.join(","))
    }

    #[test]
    fn the_node_layout_is_read_fast_and_as_serde_reads_it() {
        for l in [line(&FILLS), line(&[]), format!("{}\n", line(&FILLS))] {
            let fast = fast_light(l.as_bytes()).expect("the node's layout");
            assert_eq!(Some(&fast), light_in_full(l.as_bytes()).as_ref(), "{l}");
        }
        let l = line(&FILLS);
        let read = read_light_fills(l.as_bytes()).unwrap();
        assert_eq!((read.height, read.fills.len(), read.malformed), (985148182, 2, 0));
        let f = &read.fills[1];
        assert_eq!((&*f.coin, f.px, f.tid), ("BTC", Fixed::parse("81308.0").unwrap(), 316059956208702));
        assert_eq!(f.raw, &FILLS[1][FILLS[1].find('{').unwrap()..FILLS[1].len() - 1], "the object verbatim");
    }

    #[test]
    fn a_fill_without_its_trade_fields_is_skipped_alone_and_a_bad_envelope_refuses_the_line() {
        // Off the node's layout (no hash, oid or crossed): serde reads it, fill by fill.
        let lite =
            r#"["0x1624a8af8b91cc781586b4d7a33b8e693dc11015",{"coin":"BTC","px":"1.5","sz":"2","time":7,"tid":3}]"#;
        let no_tid = FILLS[0].replace(r#","tid":316059956208702"#, "");
        let l = line(&[lite, &no_tid, FILLS[1]]);
        let read = read_light_fills(l.as_bytes()).unwrap();
        let tids: Vec<u64> = read.fills.iter().map(|f| f.tid).collect();
        assert_eq!((tids, read.malformed), (vec![3, 316059956208702], 1));
        assert!(read_light_fills(line(&FILLS).replace("block_number", "height").as_bytes()).is_none());
        assert!(read_light_fills(&line(&FILLS).as_bytes()[..300]).is_none(), "a line cut short");
    }

    #[test]
    fn a_kept_fill_reads_as_the_live_parse_reads_it_and_only_for_its_coin() {
        let l = line(&FILLS);
        let mut parser = crate::node::NodeParser::new();
        let crate::node::Events::Fills(live) = parser.parse(crate::node::Stream::Fills, &l).unwrap().events else {
            panic!("a fills line gives fills");
        };
        let btc: Coin = "BTC".into();
        for (f, raw) in live.iter().zip(FILLS) {
            let obj = &raw[raw.find('{').unwrap()..raw.len() - 1];
            assert_eq!(fill_of_coin(f.user, obj, &btc).as_ref(), Some(f));
            assert_eq!(fill_of_coin(f.user, obj, &"ETH".into()), None);
        }
        assert_eq!(fill_of_coin(Address::default(), r#"{"coin":"BTC","px":"1.5"}"#, &btc), None);
        // Another key order, and an escaped name, are read in full.
        let obj = &FILLS[0][FILLS[0].find('{').unwrap()..FILLS[0].len() - 1];
        let moved = obj.replacen(r#""coin":"BTC","#, "", 1).replacen('{', r#"{"oid":412036451245,"coin":"BTC","#, 1);
        let moved = moved.replacen(r#","oid":412036451245,"crossed""#, r#","crossed""#, 1);
        assert_eq!(fill_of_coin(live[0].user, &moved, &btc).as_ref(), Some(&live[0]), "{moved}");
        let escaped = obj.replacen(r#""coin":"BTC""#, r#""coin":"\u0042TC""#, 1);
        assert_eq!(fill_of_coin(live[0].user, &escaped, &btc).as_ref(), Some(&live[0]), "{escaped}");
    }

    proptest::proptest! {
        /// Wherever the fast path answers for a changed line, serde answers the same.
        #[test]
        fn a_changed_line_is_read_as_serde_reads_it_or_left_to_it(
            edits in proptest::collection::vec((0usize..1500, 0usize..3, proptest::sample::select(
                b"\"\\{}[],:. 0129aAbBe-xnult\t\x80".to_vec())), 1..4),
        ) {
            let mut bytes = line(&FILLS).into_bytes();
            for (at, op, b) in edits {
                let at = at % (bytes.len() + 1);
                match op {
                    0 if at < bytes.len() => bytes[at] = b,
                    1 if at < bytes.len() => drop(bytes.remove(at)),
                    _ => bytes.insert(at, b),
                }
            }
            if let Some(fast) = fast_light(&bytes) {
                proptest::prop_assert_eq!(Some(fast), light_in_full(&bytes));
            }
        }
    }
}
