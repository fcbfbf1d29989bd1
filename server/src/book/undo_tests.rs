use super::*;
use crate::book::Outcome;
use crate::node::event::{HexBytes, Side};
use crate::node::{Diff, DiffKind, Fixed};

fn fx(s: &str) -> Fixed {
    Fixed::parse(s).unwrap()
}

fn diff(coin: &str, oid: u64, px: &str, kind: DiffKind) -> Diff {
    Diff { coin: coin.into(), user: HexBytes([1; 20]), oid, side: Side::Bid, px: fx(px), kind }
}

fn new(coin: &str, oid: u64, px: &str, sz: &str, before: Option<u64>) -> Diff {
    diff(coin, oid, px, DiffKind::New { sz: fx(sz), insert_before: before })
}

/// Every order of every book, in book order: (coin, oid, px, sz).
fn orders(books: &Books) -> Vec<(String, u64, Fixed, Fixed)> {
    let mut out = Vec::new();
    for coin in books.coin_names() {
        let b = books.coin(&coin).unwrap();
        for side in [Side::Bid, Side::Ask] {
            out.extend(b.orders(side).map(|o| (coin.to_string(), o.oid, o.px, o.sz)));
        }
    }
    out
}

#[test]
fn rolling_back_an_open_blocks_parts_gives_the_last_complete_block_exactly() {
    let mut books = Books::new(10, [CoinBook::new("BTC".into())]);
    let setup =
        [new("BTC", 1, "10.0", "1.0", None), new("BTC", 2, "10.0", "2.0", None), new("BTC", 3, "10.0", "3.0", None)];
    assert!(matches!(books.apply_diffs(11, 0, &setup), Outcome::Applied(_)));
    assert!(matches!(books.apply_statuses(11, &[]), Outcome::Applied(_)));
    let before = orders(&books);

    // Block 12 in two parts: the middle order removed, one resized, one placed ahead of another, a new coin, and
    // an oid placed again (a duplicate takes the old one off).
    let part1 = [diff("BTC", 2, "10.0", DiffKind::Remove), new("ETH", 7, "5.0", "1.0", None)];
    let part2 = [
        diff("BTC", 3, "10.0", DiffKind::Update { orig_sz: fx("3.0"), new_sz: fx("0.5") }),
        new("BTC", 4, "10.0", "4.0", Some(3)),
        new("BTC", 1, "11.0", "9.0", None),
        diff("BTC", 99, "10.0", DiffKind::Remove),
    ];
    assert!(matches!(books.apply_diffs_part(12, 0, &part1), Outcome::Applied(_)));
    assert!(matches!(books.apply_diffs_part(12, 0, &part2), Outcome::Applied(_)));
    assert_ne!(orders(&books), before);
    assert_eq!((books.height(), books.diffs_height(), books.is_complete()), (11, 12, false));

    assert!(books.roll_back());
    assert_eq!(orders(&books), before, "every order back in its place");
    assert_eq!((books.height(), books.diffs_height(), books.is_complete()), (11, 11, true));
    assert!(books.coin("ETH").is_none(), "the coin the part made is gone");
    assert!(!books.roll_back(), "nothing open any more");

    // The block applies again from its first diff, and completes.
    let all: Vec<Diff> = part1.iter().chain(&part2).cloned().collect();
    assert!(matches!(books.apply_diffs_part(12, 0, &all), Outcome::Applied(_)));
    assert!(matches!(books.apply_statuses(12, &[]), Outcome::Applied(_)));
    assert!(!books.roll_back(), "a complete block is never rolled back");
}
