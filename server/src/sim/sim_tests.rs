//! The simulator against the server's engine: lines parse with `NodeParser`, and replaying them from a sim
//! snapshot with `crate::ingest::replay` ends in exactly the sim's own books. Plus the `--rate` scaling (the info
//! servers are tested in `info::tests`).

use std::path::Path;

use super::fmt::decimal_string;
use super::info::{copy_books, write_snapshot};
use super::*;
use crate::book::Books;
use crate::book::snapshot::load_books;
use crate::ingest::replay::replay;
use crate::node::{Mode, Side, Stream};

/// Small, fast settings: a 2k-order BTC book, light rejection noise, no cadence.
pub(super) fn small_args(out: &Path, mode: Mode) -> SimArgs {
    let mut a = SimArgs::with_out(out);
    a.mode = mode;
    a.btc_orders = 2_000;
    a.orders_per_coin = 300;
    a.reject_ratio = 2;
    a.block_ms = 0;
    a.pause_secs = 0;
    a
}

/// One comparable row per resting order, best first, time priority within a level.
type Row = (u64, Side, String, String, String, String, u64, Option<String>);

fn sim_rows(sim: &Sim, coin: &str) -> Vec<Row> {
    let st = sim.shared.state.lock();
    let m = &st.market;
    let c = m.coins.iter().position(|s| s.name == coin).unwrap();
    let spec = &m.coins[c];
    [Side::Bid, Side::Ask]
        .into_iter()
        .flat_map(|side| m.books[c].orders(side))
        .map(|o| {
            (
                o.oid,
                o.side,
                decimal_string(o.px, spec.px_dec),
                decimal_string(o.sz, spec.sz_dec),
                decimal_string(o.orig_sz, spec.sz_dec),
                m.users[o.user as usize].clone(),
                o.timestamp,
                o.cloid.map(|c| format!("0x{c:032x}")),
            )
        })
        .collect()
}

fn engine_rows(books: &Books, coin: &str) -> Vec<Row> {
    let book = books.coin(coin).unwrap();
    [Side::Bid, Side::Ask]
        .into_iter()
        .flat_map(|side| book.orders(side))
        .map(|o| {
            (
                o.oid,
                o.side,
                o.px.to_string(),
                o.sz.to_string(),
                o.orig_sz.to_string(),
                o.user.to_string(),
                o.timestamp,
                o.cloid.map(|c| c.to_string()),
            )
        })
        .collect()
}

/// One comparable row per waiting trigger order, by oid: (oid, side, limitPx, triggerPx, sz, user, orderType).
type TriggerRow = (u64, Side, String, String, String, String, String);

fn sim_triggers(sim: &Sim, coin: &str) -> Vec<TriggerRow> {
    let st = sim.shared.state.lock();
    let m = &st.market;
    let c = m.coins.iter().position(|s| s.name == coin).unwrap();
    let spec = &m.coins[c];
    m.waiting.coins[c]
        .values()
        .map(|o| {
            let t = o.trigger.expect("a waiting order has its trigger");
            (
                o.oid,
                o.side,
                decimal_string(o.px, spec.px_dec),
                decimal_string(t.px, spec.px_dec),
                decimal_string(o.sz, spec.sz_dec),
                m.users[o.user as usize].clone(),
                t.kind.order_type().to_string(),
            )
        })
        .collect()
}

fn engine_triggers(books: &Books, coin: &str) -> Vec<TriggerRow> {
    let Some(book) = books.coin(coin) else { return Vec::new() };
    book.triggers()
        .iter()
        .map(|t| {
            let o = &t.order;
            (
                o.oid,
                o.side,
                o.limit_px.to_string(),
                o.trigger_px.to_string(),
                o.sz.to_string(),
                t.user.to_string(),
                o.flavor.order_type.to_string(),
            )
        })
        .collect()
}

/// Writes the sim's current books as a snapshot file and loads it into the engine.
pub(super) fn engine_from_sim(sim: &Sim, dir: &Path) -> Books {
    let path = dir.join("snap.json");
    write_snapshot(&copy_books(&sim.shared), true, &path).unwrap();
    load_books(&path).unwrap()
}

fn replay_matches(mode: Mode) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("data");
    let mut args = small_args(&out, mode);
    // Rejections only need to be skipped, and debug-build parsing of them dominates the test's time.
    args.reject_ratio = 1;
    let mut sim = Sim::new(&args).unwrap();
    let mut books = engine_from_sim(&sim, tmp.path());
    assert_eq!(books.height(), 999_999_999);
    for name in sim.shared.coins.iter().map(|c| c.name) {
        assert_eq!(engine_rows(&books, name), sim_rows(&sim, name), "{name} differs at the start");
    }
    let blocks = 150;
    let mut kinds = [0u32; 3];
    for _ in 0..blocks {
        sim.step().unwrap();
        let b = sim.last_block();
        for s in Stream::ALL {
            kinds[s.index()] += b.stream(s).len() as u32;
        }
    }
    assert!(kinds.iter().all(|&k| k > 1000), "too few events: {kinds:?}");

    // Replay parses every line with `NodeParser` and stops at the first that fails.
    let mut steps = 0;
    replay(&mut books, &out, mode, |step| {
        steps += 1;
        assert!(matches!(step.outcome, crate::book::Outcome::Applied(a) if a.inconsistencies.is_empty()));
    })
    .unwrap_or_else(|e| panic!("{mode:?} replay failed: {e}"));
    assert_eq!(steps, blocks);
    let c = books.counters();
    assert_eq!((c.inconsistencies, c.gaps, c.statusless_system), (0, 0, 0), "{c:?}");
    assert_eq!(books.height(), 999_999_999 + blocks);
    assert!(c.diffs_applied > 30_000, "{c:?}");
    for name in sim.shared.coins.iter().map(|c| c.name) {
        assert_eq!(engine_rows(&books, name), sim_rows(&sim, name), "{mode:?}: {name} differs after replay");
        // Started without trigger orders (none before the first block): every one placed since is held.
        assert_eq!(engine_triggers(&books, name), sim_triggers(&sim, name), "{mode:?}: {name}'s trigger orders");
    }
    let waiting: usize = sim.shared.coins.iter().map(|c| sim_triggers(&sim, c.name).len()).sum();
    assert!(waiting > 5, "the sim holds too few trigger orders to test: {waiting}");
}

#[test]
fn by_block_replay_rebuilds_the_sims_books_exactly() {
    replay_matches(Mode::ByBlock);
}

#[test]
fn streaming_replay_rebuilds_the_sims_books_exactly() {
    replay_matches(Mode::Streaming);
}

#[test]
fn same_seed_same_events() {
    let tmp = tempfile::tempdir().unwrap();
    let strip = |b: &block::BlockOut| -> Vec<Vec<u8>> {
        // Timestamps follow the wall clock; everything else must repeat.
        b.streams.iter().map(|s| s.data.iter().copied().filter(|c| !c.is_ascii_digit()).collect()).collect()
    };
    let mut a = Sim::new(&small_args(&tmp.path().join("a"), Mode::ByBlock)).unwrap();
    let mut b = Sim::new(&small_args(&tmp.path().join("b"), Mode::ByBlock)).unwrap();
    for _ in 0..5 {
        a.step().unwrap();
        b.step().unwrap();
        assert_eq!(strip(a.last_block()), strip(b.last_block()));
    }
    assert_eq!(sim_rows(&a, "ETH").len(), sim_rows(&b, "ETH").len());
}

#[test]
fn streaming_puts_a_new_diff_before_its_status_and_fills_first() {
    let tmp = tempfile::tempdir().unwrap();
    let mut sim = Sim::new(&small_args(tmp.path(), Mode::Streaming)).unwrap();
    sim.step().unwrap();
    let b = sim.last_block();
    assert_eq!(b.seq.first().map(|r| r.0), Some(Stream::Diffs));
    let text = |s: Stream, i: usize| String::from_utf8(b.stream(s).event(i).to_vec()).unwrap();
    let first_diff = text(Stream::Diffs, 0);
    let oid = first_diff.split("\"oid\":").nth(1).unwrap().split(',').next().unwrap().to_string();
    if first_diff.contains("\"new\"") {
        assert!(text(Stream::Statuses, 0).contains(&format!("\"oid\":{oid},")));
    }
}

/// `--rate 10` builds ten times the events: the content is what a block at that rate needs.
#[test]
fn rate_scales_the_event_count() {
    let tmp = tempfile::tempdir().unwrap();
    let mut counts = Vec::new();
    for rate in [1.0, 10.0] {
        let mut a = small_args(tmp.path(), Mode::ByBlock);
        a.rate = rate;
        a.reject_ratio = 20;
        let mut st = Sim::new(&a).unwrap().shared.state.lock().market.clone_for_test();
        let mut out = block::BlockOut::default();
        let (mut diffs, mut statuses) = (0, 0);
        let started = std::time::Instant::now();
        for h in 0..10 {
            st.block(h, 1_778_002_753_024_084_407 + h as i64 * 80_000_000, &mut out);
            diffs += out.stream(Stream::Diffs).len();
            statuses += out.stream(Stream::Statuses).len();
        }
        eprintln!("rate {rate}: 10 blocks built in {:?}", started.elapsed());
        assert!(statuses >= diffs * 20, "rate {rate}: {statuses} statuses for {diffs} diffs");
        counts.push(diffs);
    }
    assert!(counts[1] > counts[0] * 6 && counts[1] < counts[0] * 14, "{counts:?}");
    assert!(counts[0] > 10 * 450 / 2 && counts[0] < 10 * 450 * 3 / 2, "{counts:?}");
}
