use std::sync::Arc;

use super::*;
use crate::book::RestingOrder;
use crate::node::{Address, Fixed, OrderFlavor};
use crate::publish::hub::{L2Key, Want};
use crate::state::Shared;

fn order(oid: u64, side: Side, px: u64) -> RestingOrder {
    RestingOrder {
        oid,
        user: Address::parse(&format!("0x{oid:040x}")).unwrap(),
        side,
        px: Fixed(px * 100_000_000),
        sz: Fixed(oid * 1_000_000),
        orig_sz: Fixed(oid * 1_000_000),
        limit_px: Fixed(px * 100_000_000),
        trigger_px: Fixed::ZERO,
        timestamp: oid,
        cloid: None,
        flavor: Arc::new(OrderFlavor::system_default()),
    }
}

/// A BTC book with 150 levels a side, so every depth up to 100 is full.
fn hub() -> Arc<Hub> {
    let mut book = CoinBook::new("BTC".into());
    for i in 0..150 {
        book.insert(order(2 * i + 1, Side::Bid, 90_000 - i), None, None);
        book.insert(order(2 * i + 2, Side::Ask, 90_001 + i), None, None);
    }
    let shared = Arc::new(Shared::new(Books::new(7, [book]), std::time::Duration::from_secs(10)));
    Arc::new(Hub::new(shared, 16, 1 << 20))
}

fn l2(n_sig_figs: Option<u8>, n_levels: usize) -> Want {
    Want::L2(L2Key { coin: "BTC".into(), params: L2Params::new(n_sig_figs, None, n_levels).unwrap() })
}

#[test]
fn every_depth_of_an_aggregation_is_cut_from_one_serialization() {
    let hub = hub();
    let aggs = [None, Some(5), Some(2)];
    let slots: Vec<_> =
        aggs.iter().flat_map(|&s| (1..=100).map(move |n| (s, n))).map(|(s, n)| (s, n, hub.add(&l2(s, n)))).collect();
    let mut publisher = Publisher::new(hub.clone());
    publisher.pass();
    assert_eq!(hub.counters().l2_frames.get(), 300, "a frame per shape");
    // On the old code every depth was serialized on its own: 300 here, not 3.
    assert_eq!(hub.counters().l2_serializations.get(), 3, "one serialization per aggregation");
    let books = hub.shared().books();
    let book = books.coin("BTC").unwrap();
    for (s, n, slot) in slots {
        let mut levels = [Vec::new(), Vec::new()];
        l2_levels(book, &L2Params::new(s, None, n).unwrap(), &mut levels);
        let frame = slot.unwrap().load_full().unwrap();
        let want = json::l2_book("BTC", 0, &levels[0], &levels[1]);
        assert_eq!(&frame.json[..], &want[..], "nSigFigs {s:?} nLevels {n}: byte for byte the frame of its own levels");
    }
}

#[test]
fn l4_snapshots_of_one_coin_at_one_height_are_made_once_and_shared() {
    let hub = hub();
    hub.add(&Want::L4("BTC".into()));
    let mut publisher = Publisher::new(hub.clone());
    let first = hub.request_snapshot("BTC".into());
    publisher.pass();
    let a = first.blocking_recv().expect("the job answers");
    // Churn: the subscriber leaves and comes back (a pass each), with no new block in between.
    let mut second = hub.request_snapshot("BTC".into());
    // The first answer is sent before the job hands its frame over and ends; until it has, a pass holds the
    // request (as the publisher does, woken by the job): pass until it is answered.
    let b = loop {
        publisher.pass();
        match second.try_recv() {
            Ok(b) => break b,
            Err(tokio::sync::oneshot::error::TryRecvError::Empty) => std::thread::yield_now(),
            Err(e) => panic!("the request was dropped: {e}"),
        }
    };
    // On the old code every pass copied and serialized the book again: 2 copies, 2 snapshots, two frames.
    assert_eq!(hub.counters().l4_snapshot_copies.get(), 1, "one copy under the lock");
    assert_eq!(hub.counters().l4_snapshots.get(), 1, "one serialization");
    assert!(Arc::ptr_eq(&a.frame, &b.frame) && a.after_seq == b.after_seq, "the same frame");
    let gone = hub.request_snapshot("BTC".into());
    drop(gone);
    publisher.pass();
    assert_eq!(hub.counters().l4_snapshots_abandoned.get(), 1, "a request whose subscriber left costs nothing");
    assert_eq!(hub.counters().l4_snapshots_shared.get(), 1);
}
