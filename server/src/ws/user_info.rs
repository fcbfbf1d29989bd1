//! `openOrders` and `frontendOpenOrders` answered from our L4 books, so they agree with the books a client is sent
//! (the node's info server answers for its own, possibly different, height).
//!
//! Only resting orders are on the books: untriggered trigger orders are not in the node's book output, so they
//! are missing here (the official answer includes them). `dex` selects coins as the official API does: absent or
//! `""` the main dex's perps and every spot book, a name its `name:COIN` books. Orders are listed newest first.
//! Every book is walked under the read lock: O(resting orders), a few milliseconds on a full mainnet book.

use serde_json::Value;

use crate::book::CoinBook;
use crate::book::export::order_out;
use crate::node::{Address, Side};
use crate::publish::users::WsOrderBody;
use crate::state::Shared;

/// Answers `openOrders` (`frontend` false) or `frontendOpenOrders`.
pub fn open_orders(shared: &Shared, body: &Value, frontend: bool) -> (u16, Value) {
    let Some(user) = body.get("user").and_then(Value::as_str).and_then(|u| Address::parse(&u.to_ascii_lowercase()))
    else {
        return (422, Value::String("Failed to deserialize the JSON body into the target type: user".into()));
    };
    let dex = body.get("dex").and_then(Value::as_str).unwrap_or_default().to_string();
    // Whole orders only (no half-applied block), like the book a client sees.
    let Some(books) = shared.complete_books(std::time::Duration::from_secs(5)) else {
        return (503, Value::String("the books are half-applied (a block's status line is awaited); try again".into()));
    };
    let mut found: Vec<(u64, Value)> = Vec::new();
    for book in books.books().filter(|b| of_dex(b.coin(), &dex)) {
        for side in [Side::Bid, Side::Ask] {
            for o in book.orders(side).filter(|o| o.user == user) {
                found.push((o.oid, entry(book, o, frontend)));
            }
        }
    }
    drop(books);
    found.sort_by_key(|f| std::cmp::Reverse(f.0));
    (200, Value::Array(found.into_iter().map(|(_, v)| v).collect()))
}

fn entry(book: &CoinBook, o: &crate::book::RestingOrder, frontend: bool) -> Value {
    let v = if frontend {
        serde_json::to_value(order_out(book, o))
    } else {
        serde_json::to_value(WsOrderBody::of_resting(book.coin(), o))
    };
    v.unwrap_or(Value::Null)
}

/// Whether `coin` belongs to `dex` (`""`: the main dex and spot).
fn of_dex(coin: &str, dex: &str) -> bool {
    match coin.split_once(':') {
        Some((d, _)) => d == dex,
        None => dex.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::book::{Books, RestingOrder};
    use crate::node::{Fixed, OrderFlavor};

    fn order(oid: u64, user: Address, side: Side, px: u64) -> RestingOrder {
        RestingOrder {
            oid,
            user,
            side,
            px: Fixed(px),
            sz: Fixed(50),
            orig_sz: Fixed(100),
            limit_px: Fixed(px),
            trigger_px: Fixed(0),
            timestamp: 7,
            cloid: None,
            flavor: Arc::new(OrderFlavor::system_default()),
        }
    }

    #[test]
    fn a_users_resting_orders_newest_first_by_dex() {
        let a = Address::parse("0x5eaac7c475b1fad85701f02c4e9e796a53f94bd5").unwrap();
        let b = Address::parse("0x1624aac7c475b1fad85701f02c4e9e796a53f94b").unwrap();
        let mut btc = CoinBook::new("BTC".into());
        btc.insert(order(1, a, Side::Bid, 100_000_000), None, None);
        btc.insert(order(2, b, Side::Bid, 100_000_000), None, None);
        btc.insert(order(3, a, Side::Ask, 200_000_000), None, None);
        let mut gold = CoinBook::new("xyz:GOLD".into());
        gold.insert(order(4, a, Side::Ask, 300_000_000), None, None);
        let shared = Shared::new(Books::new(9, [btc, gold]), std::time::Duration::from_secs(10));
        let upper = "0x5EAAC7C475B1FAD85701F02C4E9E796A53F94BD5";
        let (status, v) = open_orders(&shared, &serde_json::json!({"type":"openOrders","user":upper}), false);
        assert_eq!(status, 200);
        assert_eq!(
            v,
            serde_json::json!([
                {"coin":"BTC","side":"A","limitPx":"2.0","sz":"0.0000005","oid":3,"timestamp":7,"origSz":"0.000001"},
                {"coin":"BTC","side":"B","limitPx":"1.0","sz":"0.0000005","oid":1,"timestamp":7,"origSz":"0.000001"},
            ])
        );
        let body = serde_json::json!({"type":"frontendOpenOrders","user":upper,"dex":"xyz"});
        let (_, v) = open_orders(&shared, &body, true);
        assert_eq!(v[0]["coin"], "xyz:GOLD");
        assert_eq!(v[0]["orderType"], "Limit");
        assert_eq!(v[0]["children"], serde_json::json!([]));
        assert_eq!(open_orders(&shared, &serde_json::json!({"user":"0x12"}), false).0, 422);
    }
}
