//! hlsim's TWAPs read back with the node's TWAP reader: every status line parses with nothing skipped, each TWAP
//! is activated before its slices and ends after them, its slices' fills carry its id on its owner's side only and
//! add up exactly to what its last status says, the book streams still replay into the sim's own books, and with
//! the flag off nothing of it is written.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::tests::{engine_from_sim, small_args};
use super::*;
use crate::ingest::replay::replay;
use crate::node::paths::{hour_files, hour_files_under};
use crate::node::twap::{TwapEvent, TwapOutcome, parse_twap_line, twap_dir};
use crate::node::{Fixed, Mode, Stream};

const BLOCKS: u64 = 240;
const ZERO_HASH: &str = "0x0000000000000000000000000000000000000000000000000000000000000000";

/// Every TWAP event the files hold, with its line's height, in file order.
fn twap_events(dir: &Path, mode: Mode) -> Vec<(u64, TwapEvent)> {
    let mut out = Vec::new();
    for f in hour_files_under(&dir.join(twap_dir(mode)).join("hourly"), 0).unwrap() {
        for l in std::fs::read_to_string(&f.path).unwrap().lines() {
            let parsed = parse_twap_line(l).unwrap();
            assert!(parsed.skipped.is_empty(), "{:?}", parsed.skipped);
            out.extend(parsed.events.into_iter().map(|e| (parsed.meta.height, e)));
        }
    }
    out
}

/// Every fill the files hold, as (height, user, fill object).
fn fills(dir: &Path, mode: Mode) -> Vec<(u64, String, Value)> {
    let mut out = Vec::new();
    for f in hour_files(dir, mode, Stream::Fills).unwrap() {
        for l in std::fs::read_to_string(&f.path).unwrap().lines() {
            let v: Value = serde_json::from_str(l).unwrap();
            let h = v["block_number"].as_u64().unwrap();
            for pair in v["events"].as_array().unwrap() {
                out.push((h, pair[0].as_str().unwrap().to_string(), pair[1].clone()));
            }
        }
    }
    out
}

fn fixed(v: &Value) -> Fixed {
    Fixed::parse(v.as_str().unwrap()).unwrap()
}

/// A TWAP's slice fills against its statuses: heights in order, owner's side, exact totals.
fn check_slices(id: u64, events: &[&(u64, TwapEvent)], all: &[(u64, String, Value)]) {
    let (start, first) = events[0];
    assert_eq!(first.outcome, TwapOutcome::Activated, "TWAP {id} starts activated");
    assert_eq!((first.state.executed_sz, first.state.executed_ntl), (Fixed::ZERO, Fixed::ZERO));
    assert!(events.len() <= 2, "TWAP {id}: {events:?}");
    let last = events.last().unwrap();
    // A TWAP still running when the sim stopped has slices up to the last block.
    let end = if events.len() == 2 { last.0 } else { u64::MAX };
    let own: Vec<_> = all.iter().filter(|(_, _, f)| f["twapId"].as_u64() == Some(id)).collect();
    let (mut sz, mut ntl) = (0u128, 0u128);
    for (h, user, f) in &own {
        assert!(*h > *start && *h <= end, "TWAP {id}: a slice at {h} outside {start}..={end}");
        assert_eq!(*user, first.state.user.to_string());
        assert_eq!(f["coin"].as_str(), Some(first.state.coin.as_str()));
        assert_eq!(f["side"].as_str(), Some(first.state.side.as_str()));
        assert_eq!((f["crossed"].as_bool(), f["hash"].as_str()), (Some(true), Some(ZERO_HASH)));
        let other: Vec<_> = all.iter().filter(|(oh, _, o)| oh == h && o["tid"] == f["tid"] && o != f).collect();
        assert_eq!(other.len(), 1, "TWAP {id}: one counterparty per slice fill");
        assert_eq!(other[0].2["twapId"], Value::Null, "the counterparty's twapId is null");
        assert_eq!(other[0].2["hash"].as_str(), Some(ZERO_HASH));
        let (px, q) = (fixed(&f["px"]), fixed(&f["sz"]));
        sz += u128::from(q.0);
        ntl += u128::from(px.0) * u128::from(q.0);
    }
    if events.len() == 2 {
        assert!(matches!(last.1.outcome, TwapOutcome::Finished | TwapOutcome::Terminated), "{last:?}");
        assert_eq!(last.1.state.timestamp, first.state.timestamp, "the start time stays");
        assert_eq!(u128::from(last.1.state.executed_sz.0), sz, "TWAP {id}: executedSz is its slices' sum");
        assert_eq!(ntl % u128::from(crate::node::decimal::ONE), 0, "exact within 8 decimals");
        assert_eq!(u128::from(last.1.state.executed_ntl.0), ntl / u128::from(crate::node::decimal::ONE));
    }
}

fn check_mode(mode: Mode) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("data");
    let mut args = small_args(&out, mode);
    args.reject_ratio = 1;
    args.write_twaps = true;
    let mut sim = Sim::new(&args).unwrap();
    let mut books = engine_from_sim(&sim, tmp.path());
    for _ in 0..BLOCKS {
        sim.step().unwrap();
    }
    let events = twap_events(&out, mode);
    let all = fills(&out, mode);
    let mut by_id: BTreeMap<u64, Vec<&(u64, TwapEvent)>> = BTreeMap::new();
    for e in &events {
        by_id.entry(e.1.twap_id).or_default().push(e);
    }
    let ends = |o: TwapOutcome| by_id.values().filter(|v| v.len() == 2 && v[1].1.outcome == o).count();
    assert!(ends(TwapOutcome::Finished) > 2 && ends(TwapOutcome::Terminated) > 0, "{mode:?}: too few ends");
    for (id, evs) in &by_id {
        check_slices(*id, evs, &all);
    }
    let slices = all.iter().filter(|(_, _, f)| !f["twapId"].is_null()).count();
    assert!(slices > 10, "{mode:?}: only {slices} slice fills");
    // Every other fill is not a TWAP's: a null id and a real hash.
    assert!(all.iter().filter(|(_, _, f)| f["hash"] != ZERO_HASH).all(|(_, _, f)| f["twapId"].is_null()));
    replay(&mut books, &out, mode, |step| {
        assert!(matches!(step.outcome, crate::book::Outcome::Applied(a) if a.inconsistencies.is_empty()));
    })
    .unwrap_or_else(|e| panic!("{mode:?} replay failed: {e}"));
    assert_eq!(books.counters().inconsistencies, 0);
    assert_eq!(books.height(), sim.shared.state.lock().height);
}

#[test]
fn by_block_twaps_read_back_in_order_with_their_slices() {
    check_mode(Mode::ByBlock);
}

#[test]
fn streaming_twaps_read_back_in_order_with_their_slices() {
    check_mode(Mode::Streaming);
}

/// With the flag off the sim's blocks are exactly its market's, no TWAP folder appears and every fill's id is null.
#[test]
fn with_the_flag_off_the_streams_are_the_markets_alone() {
    for mode in [Mode::ByBlock, Mode::Streaming] {
        let tmp = tempfile::tempdir().unwrap();
        let mut sim = Sim::new(&small_args(tmp.path(), mode)).unwrap();
        let mut market = sim.shared.state.lock().market.clone_for_test();
        let mut alone = BlockOut::default();
        for _ in 0..BLOCKS / 4 {
            let h = sim.next_height();
            sim.step().unwrap();
            let b = sim.last_block();
            market.block(h, b.block_time, &mut alone);
            for s in Stream::ALL {
                assert_eq!(b.stream(s).data, alone.stream(s).data, "{mode:?}: {s} at {h}");
            }
            assert!(b.twaps.is_empty());
        }
        assert!(!tmp.path().join(twap_dir(mode)).exists(), "{mode:?}");
        let all = fills(tmp.path(), mode);
        assert!(all.len() > 50 && all.iter().all(|(_, _, f)| f["twapId"].is_null()), "{mode:?}");
    }
}
