//! `tradesByHeight` (our extension; `POST /info` and the socket's `post`): a coin's trades of a range of blocks,
//! or of a time range, from the history store, for clients that want history rather than a stream, or that fill
//! the heights a broken connection missed before resuming the `trades` channel with `since`.
//!
//! `{"type":"tradesByHeight","coin","fromHeight","toHeight"?}` (inclusive; `toHeight` absent or null: the
//! store's newest block) or `{"type":"tradesByHeight","coin","startTime","endTime"?}` (ms, inclusive; `endTime`
//! absent or null: now). The answer is `[{"height":H,"trades":[…]},…]`, one entry per block with trades of the
//! coin, in height order, each `trades` the array the live `trades` channel sends for that block (the same writer,
//! `publish::json::trades_data`). At most the newest `MAX_TRADES` trades, in whole blocks, as `candleSnapshot`
//! caps; a range over `MAX_BLOCKS` heights is refused, since the store has no per-coin index and reads each block
//! of the range. hlbook answers it alone: no node or upstream knows the type, so it is never passed on, and what
//! the store cannot answer whole (another coin, no store, heights or times it does not hold, a hole) is a 422.

use std::sync::Arc;

use serde_json::Value;

use super::info_gate::{Answer, Local, Place};
use crate::node::event::HexBytes;
use crate::node::fills_light::fill_of_coin;
use crate::node::matches::pair_by_tid;
use crate::node::time::{nanos_to_millis, now_nanos};
use crate::node::{Coin, Fill};
use crate::publish::Hub;
use crate::publish::json::trades_data;
use crate::store::Store;

/// Trades an answer holds at most (the newest, in whole blocks), as `candleSnapshot`'s 5000 candles.
pub const MAX_TRADES: usize = 5000;

/// Heights one request may span, about 7 minutes of mainnet: every stored block of the range is decoded whole
/// (about 0.3 ms a block of 200 fills in the test profile, so a full read holds a history turn under 2 s).
pub const MAX_BLOCKS: u64 = 6_000;

/// The range asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Range {
    /// `fromHeight`, `toHeight` (`None`: the store's newest).
    Heights(u64, Option<u64>),
    /// `startTime`, `endTime` in ms.
    Times(i64, i64),
}

#[derive(Debug, PartialEq, Eq)]
struct Ask {
    coin: String,
    range: Range,
}

fn bad(what: &str) -> Answer {
    Answer::text(422, &format!("Failed to deserialize the JSON body into the target type: {what}"))
}

fn refuse(why: &str) -> Answer {
    Answer::text(422, &format!("tradesByHeight: {why}"))
}

/// An optional field: absent and null are `None`.
fn opt<'a>(body: &'a Value, k: &str) -> Option<&'a Value> {
    body.get(k).filter(|v| !v.is_null())
}

fn parse(body: &Value) -> Result<Ask, Answer> {
    let coin = body.get("coin").and_then(Value::as_str).filter(|c| !c.is_empty());
    let coin = coin.ok_or_else(|| bad("tradesByHeight needs a coin"))?.to_string();
    let height = |k: &str| match opt(body, k) {
        None => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| bad(&format!("{k} must be a block height (an integer)"))),
    };
    let ms = |k: &str| match opt(body, k) {
        None => Ok(None),
        Some(v) => v.as_i64().map(Some).ok_or_else(|| bad(&format!("{k} must be an integer (ms)"))),
    };
    let range = match (height("fromHeight")?, height("toHeight")?, ms("startTime")?, ms("endTime")?) {
        (Some(from), to, None, None) => Range::Heights(from, to),
        (None, None, Some(start), end) => Range::Times(start, end.unwrap_or(i64::MAX)),
        (None, Some(_), _, _) => return Err(bad("toHeight needs fromHeight")),
        (None, None, None, Some(_)) => return Err(bad("endTime needs startTime")),
        (None, None, None, None) => return Err(bad("tradesByHeight needs fromHeight or startTime")),
        _ => return Err(bad("heights (fromHeight, toHeight) or times (startTime, endTime), not both")),
    };
    Ok(Ask { coin, range })
}

/// Answers one `tradesByHeight` request; `place`, the client's at the info gate, is held until the read ends.
pub(super) async fn trades_by_height(hub: &Arc<Hub>, body: &Value, place: Place) -> Local {
    let ask = match parse(body) {
        Ok(a) => a,
        Err(a) => return Local::Answer(a),
    };
    let Some(coin) = hub.shared().books().coin(&ask.coin).map(|b| b.coin().clone()) else {
        let coin = Value::String(ask.coin.chars().take(100).collect());
        return Local::Answer(refuse(&format!("hlbook's books have no coin {coin}")));
    };
    let Some(store) = hub.store() else {
        return Local::Answer(refuse("hlbook keeps no history store here (its log says why)"));
    };
    if store.follow.only() {
        return Local::Answer(refuse(
            "the history store keeps followed users' fills only (store.fills_users = \"followed\"), so not every trade",
        ));
    }
    let done = place
        .in_history_turn(hub, "tradesByHeight", move || {
            let answer = match heights(&store, ask.range) {
                Ok(Some((from, to))) => read(&store, &coin, from, to),
                Ok(None) => Ok(b"[]".to_vec()),
                Err(refused) => return refused,
            };
            match answer {
                Ok(json) => Answer::json(json),
                Err(e) => Answer::text(500, &format!("tradesByHeight: {e}")),
            }
        })
        .await;
    Local::Answer(done)
}

/// The heights to read, checked against what the store holds; `None`: a time range with no block in it.
fn heights(store: &Store, range: Range) -> Result<Option<(u64, u64)>, Answer> {
    let failed = |e: String| Answer::text(500, &format!("tradesByHeight: {e}"));
    // The range's times, for the holes: a time range's own; a height range's end blocks' when they are held, else
    // the nearest blocks' held outside it.
    let (from, to, lower, upper) = match range {
        Range::Heights(from, to) => {
            let newest = store.height();
            let to = to.unwrap_or(newest);
            if from > to {
                return Err(refuse(&format!("fromHeight {from} is above toHeight {to}")));
            }
            narrow(from, to)?;
            if to > newest {
                return Err(refuse(&format!(
                    "the history store holds blocks up to height {newest}, below toHeight {to}: ask again, or omit \
                     toHeight for the newest"
                )));
            }
            match store.oldest_height().map_err(failed)? {
                Some(oldest) if from >= oldest => {}
                Some(oldest) => {
                    return Err(refuse(&format!(
                        "the history store's oldest block is height {oldest} (it began there, or \
                         store.fills_retention_days dropped older ones), after fromHeight {from}"
                    )));
                }
                None => return Err(refuse("the history store holds no block yet")),
            }
            let end_time = |h: u64, after: bool| -> Result<Option<i64>, Answer> {
                Ok(match store.block_near(h, after).map_err(failed)? {
                    Some((at, t)) if at == h => Some(t),
                    _ if after => store.block_near(h.saturating_sub(1), false).map_err(failed)?.map(|b| b.1),
                    _ => store.block_near(h.saturating_add(1), true).map_err(failed)?.map(|b| b.1),
                })
            };
            (from, to, end_time(from, true)?.unwrap_or(i64::MIN), end_time(to, false)?.unwrap_or(i64::MAX))
        }
        Range::Times(start, end) => {
            if start > end {
                return Err(refuse(&format!("startTime {start} is after endTime {end}")));
            }
            let kept = store.fills_kept_from_ms(nanos_to_millis(now_nanos()));
            if kept == i64::MAX {
                return Err(refuse("the history store holds no block yet"));
            }
            if start < kept {
                return Err(refuse(&format!(
                    "the history store holds trades from {kept} ms on (it began then, or store.fills_retention_days), \
                     after startTime {start}"
                )));
            }
            hole(store, start, end)?;
            match store.heights_of_times(start, end).map_err(failed)? {
                Some((from, to)) => (from, to, start, end),
                None => return Ok(None),
            }
        }
    };
    narrow(from, to)?;
    hole(store, lower, upper)?;
    Ok(Some((from, to)))
}

/// Refuses a range whose times, `lower` to `upper`, overlap a hole the store could not fill (blocks missing
/// between two times).
fn hole(store: &Store, lower: i64, upper: i64) -> Result<(), Answer> {
    match store.coverage().gaps.into_iter().find(|(a, b)| *a < upper && *b > lower) {
        Some((a, b)) => {
            Err(refuse(&format!("the history store misses the blocks between {a} and {b} ms, in this range")))
        }
        None => Ok(()),
    }
}

/// Refuses a range of more than `MAX_BLOCKS` heights.
fn narrow(from: u64, to: u64) -> Result<(), Answer> {
    let span = to - from + 1;
    if span > MAX_BLOCKS {
        return Err(refuse(&format!(
            "heights {from} to {to} are {span} blocks, at most {MAX_BLOCKS} a request: ask for a narrower range"
        )));
    }
    Ok(())
}

/// The newest whole blocks of trades that fit `MAX_TRADES` (the newest block always), oldest first.
#[derive(Debug, Default)]
struct Newest {
    blocks: Vec<(u64, Vec<Fill>)>,
    trades: usize,
}

impl Newest {
    /// Takes the block below those taken (newest first); whether to go on.
    fn offer(&mut self, height: u64, fills: Vec<Fill>) -> bool {
        if fills.is_empty() {
            return true;
        }
        let n = pair_by_tid(fills.iter(), |f| f.tid).len();
        if !self.blocks.is_empty() && self.trades + n > MAX_TRADES {
            return false;
        }
        self.trades += n;
        self.blocks.push((height, fills));
        self.trades < MAX_TRADES
    }

    /// `[{"height":H,"trades":[…]},…]` in height order.
    fn json(mut self) -> Vec<u8> {
        self.blocks.reverse();
        let mut out = b"[".to_vec();
        for (i, (height, fills)) in self.blocks.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(format!("{{\"height\":{height},\"trades\":").as_bytes());
            out.extend_from_slice(&trades_data(fills.iter()));
            out.push(b'}');
        }
        out.push(b']');
        out
    }
}

/// The coin's trades of `from..=to` from the store, capped.
fn read(store: &Store, coin: &Coin, from: u64, to: u64) -> Result<Vec<u8>, String> {
    let mut newest = Newest::default();
    store.blocks_newest_first(from, to, |height, fills| {
        let mine = fills.into_iter().filter_map(|(user, raw)| fill_of_coin(HexBytes(user), &raw, coin));
        newest.offer(height, mine.collect())
    })?;
    Ok(newest.json())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::{Fixed, Side};

    fn fill(tid: u64, side: Side, crossed: bool) -> Fill {
        Fill {
            coin: "BTC".into(),
            user: HexBytes([side.index() as u8 + 1; 20]),
            px: Fixed::parse("81308.0").unwrap(),
            sz: Fixed::parse("0.00033").unwrap(),
            side,
            time: 1_778_002_753_024,
            hash: HexBytes([9; 32]),
            oid: 7,
            crossed,
            tid,
        }
    }

    /// A block of `n` trades, both sides of each.
    fn block(first_tid: u64, n: u64) -> Vec<Fill> {
        (first_tid..first_tid + n).flat_map(|t| [fill(t, Side::Bid, true), fill(t, Side::Ask, false)]).collect()
    }

    #[test]
    fn fields_name_heights_or_times_and_nothing_else() {
        let p = |v: Value| parse(&v);
        let heights = p(serde_json::json!({"type": "tradesByHeight", "coin": "BTC", "fromHeight": 5, "toHeight": 9}));
        assert_eq!(heights.unwrap().range, Range::Heights(5, Some(9)));
        let open = p(serde_json::json!({"coin": "BTC", "fromHeight": 5, "toHeight": null}));
        assert_eq!(open.unwrap().range, Range::Heights(5, None));
        let times = p(serde_json::json!({"coin": "BTC", "startTime": 100}));
        assert_eq!(times.unwrap().range, Range::Times(100, i64::MAX));
        for (body, says) in [
            (serde_json::json!({"fromHeight": 5}), "needs a coin"),
            (serde_json::json!({"coin": "BTC"}), "needs fromHeight or startTime"),
            (serde_json::json!({"coin": "BTC", "toHeight": 5}), "toHeight needs fromHeight"),
            (serde_json::json!({"coin": "BTC", "endTime": 5}), "endTime needs startTime"),
            (serde_json::json!({"coin": "BTC", "fromHeight": 5, "startTime": 1}), "not both"),
            (serde_json::json!({"coin": "BTC", "fromHeight": -5}), "fromHeight must be a block height"),
            (serde_json::json!({"coin": "BTC", "startTime": "1"}), "startTime must be an integer"),
        ] {
            let refused = p(body.clone()).unwrap_err();
            assert_eq!((refused.status, refused.text), (422, true), "{body}");
            assert!(refused.message().contains(says), "{body}: {}", refused.message());
        }
    }

    #[test]
    fn the_newest_whole_blocks_up_to_the_cap_oldest_first_as_the_live_channel_writes_them() {
        let mut n = Newest::default();
        // Newest first: 3000 trades at 30, none at 29, 1500 at 28, then 1000 at 27 would pass the cap.
        assert!(n.offer(30, block(0, 3000)));
        assert!(n.offer(29, Vec::new()));
        assert!(n.offer(28, block(5000, 1500)));
        assert!(!n.offer(27, block(9000, 1000)), "a block past the cap ends the read");
        assert_eq!(n.trades, 4500);
        let (b28, b30) = (block(5000, 1500), block(0, 3000));
        let want = format!(
            "[{{\"height\":28,\"trades\":{}}},{{\"height\":30,\"trades\":{}}}]",
            String::from_utf8(trades_data(b28.iter())).unwrap(),
            String::from_utf8(trades_data(b30.iter())).unwrap()
        );
        assert_eq!(String::from_utf8(n.json()).unwrap(), want);
        // One block over the cap is answered whole, and ends the read.
        let mut big = Newest::default();
        assert!(!big.offer(9, block(0, MAX_TRADES as u64 + 1)));
        assert_eq!(big.blocks.len(), 1);
        assert_eq!(String::from_utf8(Newest::default().json()).unwrap(), "[]");
    }

    /// 2026-05-05T09:00:00 UTC.
    const T0: i64 = 1_777_971_600_000;

    /// A store written by its own writer from live steps: blocks 1..=10, then (the node's files lost 11..=68) 69
    /// and 70, one BTC trade each at T0 + h seconds; the hole it records ends at 70.
    fn store_with_a_hole(dir: &std::path::Path) -> Arc<Store> {
        use crate::state::{Step, StepData};
        use crate::store::{StoreMsg, Writer};
        let store = Store::open(&dir.join("store")).unwrap();
        // The node's files, empty: the blocks it missed cannot be read back. Retention keeps T0's day whatever
        // today is.
        let node_dir = dir.join("node");
        std::fs::create_dir_all(&node_dir).unwrap();
        let files =
            crate::store::files::FillsDir { node_dir, mode: crate::node::Mode::ByBlock, max_line_bytes: 1 << 20 };
        let mut w = Writer::new(store.clone(), Some(files), 36_500);
        let step = |h: u64| {
            let time = T0 + h as i64 * 1000;
            let fills: Vec<Fill> = block(h * 10, 1).into_iter().map(|f| Fill { time, ..f }).collect();
            let users = fills
                .iter()
                .map(|f| {
                    let raw = format!(
                        r#"{{"coin":"BTC","px":"{}","sz":"{}","side":"{}","time":{time},"hash":"{}","oid":7,"crossed":{},"tid":{}}}"#,
                        f.px, f.sz, f.side.as_str(), f.hash, f.crossed, f.tid
                    );
                    (f.user, Arc::from(raw.as_str()))
                })
                .collect();
            let data = StepData::Fills { fills, users, generation: None, liquidations: Vec::new() };
            StoreMsg::Step(Arc::new(Step { seq: h, height: h, block_time: time * 1_000_000, data }))
        };
        let mut first: Vec<StoreMsg> = (1..=10).map(step).collect();
        first.push(StoreMsg::Complete(10));
        for batch in [first, vec![StoreMsg::Gap, step(69), step(70), StoreMsg::Complete(70)]] {
            for m in batch {
                w.take(m);
            }
            w.settle(&std::sync::atomic::AtomicBool::new(false)).unwrap();
        }
        // The writer counts the hole up to the block after the one that came first past it.
        assert_eq!((store.height(), store.coverage().gaps), (70, vec![(T0 + 10_000, T0 + 70_000)]));
        store
    }

    #[test]
    fn ranges_are_read_whole_or_refused_saying_why() {
        let dir = tempfile::tempdir().unwrap();
        let store = store_with_a_hole(dir.path());
        // The writer starts the store at the first whole block it gets.
        let oldest = store.oldest_height().unwrap().unwrap();
        assert!(oldest < 3, "{oldest}");
        let ok = |r: Range| heights(&store, r).unwrap_or_else(|a| panic!("{r:?}: {}", a.message()));
        assert_eq!(ok(Range::Heights(3, Some(8))), Some((3, 8)));
        assert_eq!(ok(Range::Heights(5, Some(10))), Some((5, 10)), "up to the hole");
        assert_eq!(ok(Range::Heights(70, None)), Some((70, 70)), "from the hole's end");
        assert_eq!(ok(Range::Times(T0 + 3000, T0 + 8500)), Some((3, 8)));
        assert_eq!(ok(Range::Times(T0 + 70_000, i64::MAX)), Some((70, 70)));
        for (r, says) in [
            (Range::Heights(5, Some(11)), "misses the blocks between"),
            (Range::Heights(3, None), "misses the blocks between"),
            (Range::Heights(50, Some(70)), "misses the blocks between"),
            (Range::Times(T0 + 20_000, T0 + 30_000), "misses the blocks between"),
            (Range::Heights(oldest - 1, Some(5)), "oldest block is height"),
            (Range::Heights(69, Some(71)), "up to height 70"),
            (Range::Heights(69, Some(70)), "misses the blocks between"),
            (Range::Heights(9, Some(8)), "above toHeight"),
            (Range::Heights(1, Some(MAX_BLOCKS + 1)), "at most 6000"),
            (Range::Times(T0, T0 + 5000), "holds trades from"),
            (Range::Times(T0 + 5000, T0 + 4000), "after endTime"),
        ] {
            let refused = heights(&store, r).unwrap_err();
            assert_eq!((refused.status, refused.text), (422, true), "{r:?}");
            assert!(refused.message().contains(says), "{r:?}: {}", refused.message());
        }
        // The blocks' trades, each block as the live channel writes it.
        let got: Value = serde_json::from_slice(&read(&store, &"BTC".into(), 3, 8).unwrap()).unwrap();
        let want: Vec<Value> = (3..=8)
            .map(|h| {
                let fills: Vec<Fill> = block(h * 10, 1).into_iter().map(|f| Fill { time: T0 + h as i64 * 1000, ..f }).collect();
                serde_json::json!({"height": h, "trades": serde_json::from_slice::<Value>(&trades_data(fills.iter())).unwrap()})
            })
            .collect();
        assert_eq!(got, Value::Array(want));
        assert_eq!(read(&store, &"ETH".into(), 1, 70).unwrap(), b"[]");
    }
}
