use super::*;
use crate::book::{Applied, CoinBook, export};
use crate::node::event::{HexBytes, OrderInfo, Side};
use crate::node::{Block, DiffKind, Fixed, OrderFlavor, OrderStatus};

const T11: UnixNanos = 1_778_002_753_070_000_000;

fn fx(s: &str) -> Fixed {
    Fixed::parse(s).unwrap()
}

fn diff(coin: &Coin, oid: u64, px: &str, kind: DiffKind) -> Diff {
    Diff { coin: coin.clone(), user: HexBytes([1; 20]), oid, side: Side::Bid, px: fx(px), kind }
}

fn new(coin: &Coin, oid: u64, px: &str) -> Diff {
    diff(coin, oid, px, DiffKind::New { sz: fx("1.5"), insert_before: None })
}

fn opening(coin: &Coin, oid: u64, px: &str) -> OrderStatus {
    OrderStatus {
        coin: coin.clone(),
        user: HexBytes([1; 20]),
        time: T11,
        status: "open".into(),
        hash: None,
        builder: None,
        order: OrderInfo {
            side: Side::Bid,
            limit_px: fx(px),
            sz: fx("1.5"),
            orig_sz: fx("1.5"),
            oid,
            timestamp: 1234,
            trigger_px: Fixed::ZERO,
            cloid: None,
            flavor: Arc::new(OrderFlavor { tif: Some("Gtc".into()), ..OrderFlavor::system_default() }),
            children: None,
        },
    }
}

fn coins() -> [Coin; 3] {
    ["BTC".into(), "ETH".into(), "SOL".into()]
}

/// Books at 10 with a resting order per coin, and block 11: BTC and SOL interleaved with ETH, so both parts of a
/// split by {BTC, SOL} come from several runs.
fn setup() -> (Books, Block) {
    let [btc, eth, sol] = coins();
    let resting = |(i, c): (usize, &Coin)| {
        let mut book = CoinBook::new(c.clone());
        let order = crate::book::RestingOrder {
            oid: 100 + i as u64,
            user: HexBytes([1; 20]),
            side: Side::Bid,
            px: fx("10.0"),
            sz: fx("2.0"),
            orig_sz: fx("2.0"),
            limit_px: fx("10.0"),
            trigger_px: Fixed::ZERO,
            timestamp: 1,
            cloid: None,
            flavor: Arc::new(OrderFlavor::system_default()),
        };
        book.insert(order, None, None);
        book
    };
    let books = Books::new(10, coins().iter().enumerate().map(resting).collect::<Vec<_>>());
    let diffs = vec![
        new(&btc, 1, "11.0"),
        new(&eth, 2, "12.0"),
        diff(&btc, 100, "10.0", DiffKind::Remove),
        new(&sol, 3, "13.0"),
        diff(&eth, 101, "10.0", DiffKind::Update { orig_sz: fx("2.0"), new_sz: fx("0.5") }),
        new(&sol, 4, "14.0"),
    ];
    let statuses =
        vec![opening(&btc, 1, "11.0"), opening(&eth, 2, "12.0"), opening(&sol, 3, "13.0"), opening(&sol, 4, "14.0")];
    (books, Block { height: 11, block_time: T11, diffs, statuses, ..Block::default() })
}

fn first_set() -> Arc<FxHashSet<Coin>> {
    let [btc, _, sol] = coins();
    Arc::new([btc, sol].into_iter().collect())
}

fn snapshot(books: &Books) -> String {
    let mut out = Vec::new();
    export::write_snapshot(books, None, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn bids(books: &Books, coin: &str) -> Vec<(u64, Fixed)> {
    books.coin(coin).unwrap().orders(Side::Bid).map(|o| (o.oid, o.sz)).collect()
}

fn applied(o: Outcome) -> Applied {
    match o {
        Outcome::Applied(a) => a,
        other => panic!("not applied: {other:?}"),
    }
}

#[test]
fn first_then_rest_ends_exactly_where_the_whole_step_does() {
    let (mut whole, block) = setup();
    let (mut split, _) = setup();
    assert!(splits(&block.diffs, &first_set()));
    applied(whole.apply(&block));

    let a = applied(split.apply_first_diffs(11, T11, &block.diffs, first_set()));
    assert_eq!(a.changed, vec![Coin::from("BTC"), "SOL".into()]);
    let b = applied(split.apply_rest_diffs(11, &block.diffs));
    assert_eq!(b.changed, vec![Coin::from("ETH")]);
    applied(split.apply_statuses(11, &block.statuses));

    assert_eq!(snapshot(&split), snapshot(&whole));
    assert_eq!((split.height(), split.diffs_height(), split.block_time()), (11, 11, T11));
    assert_eq!(split.counters().diffs_applied, whole.counters().diffs_applied);
    assert!(split.is_complete() && split.first_part().is_none());
}

#[test]
fn between_the_parts_each_coin_is_labelled_with_the_block_it_shows_and_nothing_else_applies() {
    let (mut books, block) = setup();
    applied(books.apply_first_diffs(11, T11, &block.diffs, first_set()));

    // BTC and SOL show block 11, ETH still block 10.
    assert_eq!(bids(&books, "BTC"), vec![(1, fx("1.5"))]);
    assert_eq!(bids(&books, "ETH"), vec![(101, fx("2.0"))]);
    let part = books.first_part().expect("a first part");
    assert_eq!((part.height, part.block_time, part.changed.len()), (11, T11, 2));
    assert_eq!(books.diffs_height(), 10);
    assert_eq!(books.l2_block_time_of("BTC"), T11);
    assert_eq!(books.l2_block_time_of("ETH"), books.diffs_block_time());
    assert!(!books.is_complete(), "orders of block 11 still lack their statuses, and ETH lacks its diffs");

    // Nothing but the rest of block 11 applies now.
    assert!(matches!(books.apply_statuses(11, &block.statuses), Outcome::Gap { .. }));
    assert!(matches!(books.apply_diffs(12, T11, &[]), Outcome::Gap { .. }));
    assert!(matches!(books.apply_rest_diffs(12, &block.diffs), Outcome::Gap { expected: 11, got: 12 }));
    assert!(books.first_part().is_some(), "a refused rest keeps the first part");

    applied(books.apply_rest_diffs(11, &block.diffs));
    assert_eq!(bids(&books, "ETH"), vec![(2, fx("1.5")), (101, fx("0.5"))]);
    assert_eq!(books.diffs_height(), 11);
    assert!(matches!(books.apply_rest_diffs(11, &block.diffs), Outcome::Gap { .. }), "no second rest");
}

#[test]
fn a_split_needs_diffs_on_both_sides() {
    let (_, block) = setup();
    let [btc, eth, sol] = coins();
    let all: FxHashSet<Coin> = [btc.clone(), eth, sol].into_iter().collect();
    assert!(!splits(&block.diffs, &all), "every diff is first");
    assert!(!splits(&block.diffs, &FxHashSet::default()), "no diff is first");
    assert!(splits(&block.diffs, &[btc].into_iter().collect()));
}
