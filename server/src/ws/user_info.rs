//! Per-user info types answered from our L4 books: `openOrders` and `frontendOpenOrders` when no node info
//! server answers them, and `orderStatus` for an order resting in the books.
//!
//! Resting orders and the untriggered trigger orders held beside each book (`book::triggers`) are a user's open
//! orders, as the exchange lists them: a waiting trigger order with its `limitPx`, `isTrigger: true`, its
//! `triggerCondition`, `triggerPx` and `orderType`. `dex` selects coins as the official API does: absent or `""`
//! the main dex's perps and every spot book, a name its `name:COIN` books. Orders are listed newest first. Every
//! book is walked under the read lock: O(resting orders), a few milliseconds on a full mainnet book.
//!
//! `orderStatus` is answered only for an order hlbook holds ("open": resting, or a trigger order waiting). An order
//! hlbook does not hold may be filled, canceled or never placed: hlbook cannot tell, so it never answers
//! `unknownOid` itself.

use serde_json::Value;

use super::info_gate::{Answer, Local};
use super::market_info::of_dex;
use crate::book::export::{order_out, trigger_out};
use crate::book::{CoinBook, TriggerOrder};
use crate::node::{Address, Side};
use crate::publish::users::WsOrderBody;
use crate::state::Shared;

/// The request's `user`, or the refusal.
pub fn user_of(body: &Value) -> Result<Address, Answer> {
    let user = body.get("user").and_then(Value::as_str).and_then(|u| Address::parse(&u.to_ascii_lowercase()));
    user.ok_or_else(|| Answer::text(422, "Failed to deserialize the JSON body into the target type: user"))
}

fn half_applied() -> Answer {
    Answer::text(503, "the books are half-applied (a block's status line is awaited); try again")
}

/// Answers `openOrders` (`frontend` false) or `frontendOpenOrders`.
pub fn open_orders(shared: &Shared, body: &Value, frontend: bool) -> Answer {
    let user = match user_of(body) {
        Ok(u) => u,
        Err(a) => return a,
    };
    let dex = body.get("dex").and_then(Value::as_str).unwrap_or_default().to_string();
    // Whole orders only (no half-applied block), like the book a client sees.
    let Some(books) = shared.complete_books(std::time::Duration::from_secs(5)) else { return half_applied() };
    let mut found: Vec<(u64, Value)> = Vec::new();
    for book in books.books().filter(|b| of_dex(b.coin(), &dex)) {
        for side in [Side::Bid, Side::Ask] {
            for o in book.orders(side).filter(|o| o.user == user) {
                found.push((o.oid, entry(book, o, frontend)));
            }
        }
        for t in book.triggers().iter().filter(|t| t.user == user) {
            found.push((t.order.oid, trigger_entry(book, t, frontend)));
        }
    }
    drop(books);
    found.sort_by_key(|f| std::cmp::Reverse(f.0));
    Answer::json(Value::Array(found.into_iter().map(|(_, v)| v).collect()).to_string())
}

/// Answers `orderStatus` (`oid` a number, or a cloid string) for an order of `user` resting in the books:
/// `{"status":"order","order":{"order":{…frontend fields},"status":"open","statusTimestamp":ms}}`. Anything else
/// is `Unsure`: hlbook cannot tell a filled order from one never placed.
pub fn order_status(shared: &Shared, body: &Value) -> Local {
    let user = match user_of(body) {
        Ok(u) => u,
        Err(a) => return Local::Answer(a),
    };
    let (oid, cloid) = match body.get("oid") {
        Some(Value::Number(n)) if n.as_u64().is_some() => (n.as_u64(), None),
        Some(Value::String(c)) if crate::node::Cloid::parse(&c.to_ascii_lowercase()).is_some() => {
            (None, crate::node::Cloid::parse(&c.to_ascii_lowercase()))
        }
        _ => {
            let text = "Failed to deserialize the JSON body into the target type: oid must be an integer or a cloid";
            return Local::Answer(Answer::text(422, text));
        }
    };
    let Some(books) = shared.complete_books(std::time::Duration::from_secs(5)) else {
        return Local::Answer(half_applied());
    };
    for book in books.books() {
        let found = match (oid, &cloid) {
            (Some(oid), _) => book.order(oid).filter(|o| o.user == user),
            (None, Some(c)) => [Side::Bid, Side::Ask]
                .into_iter()
                .flat_map(|s| book.orders(s))
                .find(|o| o.user == user && o.cloid.as_ref() == Some(c)),
            (None, None) => None,
        };
        if let Some(o) = found {
            let order = serde_json::to_value(order_out(book, o)).unwrap_or(Value::Null);
            return Local::Answer(open_status(order, o.timestamp));
        }
        let waiting = match (oid, &cloid) {
            (Some(oid), _) => book.triggers().get(oid).filter(|t| t.user == user),
            (None, Some(c)) => book.triggers().iter().find(|t| t.user == user && t.order.cloid.as_ref() == Some(c)),
            (None, None) => None,
        };
        if let Some(t) = waiting {
            let order = serde_json::to_value(trigger_out(book.coin(), t)).unwrap_or(Value::Null);
            return Local::Answer(open_status(order, t.order.timestamp));
        }
    }
    Local::Unsure("the order is not resting in hlbook's books, and hlbook keeps no other order statuses".into())
}

/// An `orderStatus` answer for an order hlbook holds: open since it was placed.
fn open_status(order: Value, timestamp: u64) -> Answer {
    let v = serde_json::json!({"status": "order",
        "order": {"order": order, "status": "open", "statusTimestamp": timestamp}});
    Answer::json(v.to_string())
}

/// A waiting trigger order: the frontend shape with every trigger field, or the plain one at its `limitPx`.
fn trigger_entry(book: &CoinBook, t: &TriggerOrder, frontend: bool) -> Value {
    let v = if frontend {
        serde_json::to_value(trigger_out(book.coin(), t))
    } else {
        serde_json::to_value(WsOrderBody::of_resting(book.coin(), &t.as_resting()))
    };
    v.unwrap_or(Value::Null)
}

fn entry(book: &CoinBook, o: &crate::book::RestingOrder, frontend: bool) -> Value {
    let v = if frontend {
        serde_json::to_value(order_out(book, o))
    } else {
        serde_json::to_value(WsOrderBody::of_resting(book.coin(), o))
    };
    v.unwrap_or(Value::Null)
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
        let a = open_orders(&shared, &serde_json::json!({"type":"openOrders","user":upper}), false);
        assert_eq!(a.status, 200);
        let v: Value = serde_json::from_slice(&a.body).unwrap();
        assert_eq!(
            v,
            serde_json::json!([
                {"coin":"BTC","side":"A","limitPx":"2.0","sz":"0.0000005","oid":3,"timestamp":7,"origSz":"0.000001"},
                {"coin":"BTC","side":"B","limitPx":"1.0","sz":"0.0000005","oid":1,"timestamp":7,"origSz":"0.000001"},
            ])
        );
        let body = serde_json::json!({"type":"frontendOpenOrders","user":upper,"dex":"xyz"});
        let v: Value = serde_json::from_slice(&open_orders(&shared, &body, true).body).unwrap();
        assert_eq!(v[0]["coin"], "xyz:GOLD");
        assert_eq!(v[0]["orderType"], "Limit");
        assert_eq!(v[0]["children"], serde_json::json!([]));
        assert_eq!(open_orders(&shared, &serde_json::json!({"user":"0x12"}), false).status, 422);

        // orderStatus: a resting order of the user, by oid; another user's, or an unknown oid, is not answered.
        let status = |oid: Value| order_status(&shared, &serde_json::json!({"user": upper, "oid": oid}));
        let Local::Answer(a) = status(serde_json::json!(3)) else { panic!("oid 3 rests") };
        let v: Value = serde_json::from_slice(&a.body).unwrap();
        assert_eq!((&v["status"], &v["order"]["status"]), (&serde_json::json!("order"), &serde_json::json!("open")));
        assert_eq!(
            (&v["order"]["order"]["oid"], &v["order"]["statusTimestamp"]),
            (&serde_json::json!(3), &serde_json::json!(7))
        );
        assert!(matches!(status(serde_json::json!(2)), Local::Unsure(_)), "oid 2 is b's");
        assert!(matches!(status(serde_json::json!(99)), Local::Unsure(_)));
        assert!(matches!(status(serde_json::json!([1])), Local::Answer(a) if a.status == 422));
    }

    #[test]
    fn waiting_trigger_orders_are_open_orders_with_their_trigger_fields() {
        let a = Address::parse("0x5eaac7c475b1fad85701f02c4e9e796a53f94bd5").unwrap();
        let stop = r#"{"coin":"BTC","side":"A","limitPx":"90.0","sz":"0.5","oid":13,"timestamp":3,"triggerCondition":"Price below 95","isTrigger":true,"triggerPx":"95.0","children":[],"isPositionTpsl":false,"reduceOnly":true,"orderType":"Stop Limit","origSz":"0.5","tif":null,"cloid":null}"#;
        let snap = format!(r#"[9,[["BTC",[[],[["{a}",{stop}]]]]]]"#);
        let mut coins = Vec::new();
        crate::node::snapshot::read_snapshot_slice(snap.as_bytes(), |c| {
            coins.push(crate::book::snapshot::coin_book(c));
        })
        .unwrap();
        let mut btc = coins.pop().unwrap();
        btc.insert(order(1, a, Side::Bid, 100_000_000), None, None);
        let shared = Shared::new(Books::new(9, [btc]), std::time::Duration::from_secs(10));
        let user = a.to_string();
        let ask = |kind: &str| {
            let a = open_orders(&shared, &serde_json::json!({"type": kind, "user": user}), kind != "openOrders");
            serde_json::from_slice::<Value>(&a.body).unwrap()
        };
        let front = ask("frontendOpenOrders");
        assert_eq!(front[0], serde_json::from_str::<Value>(stop).unwrap(), "newest first, as the node wrote it");
        assert_eq!(front[1]["oid"], 1);
        let plain = ask("openOrders");
        assert_eq!(
            plain[0],
            serde_json::json!({"coin":"BTC","side":"A","limitPx":"90.0","sz":"0.5","oid":13,"timestamp":3,
                "origSz":"0.5","reduceOnly":true})
        );
        let Local::Answer(st) = order_status(&shared, &serde_json::json!({"user": user, "oid": 13})) else {
            panic!("a waiting trigger order is open")
        };
        let v: Value = serde_json::from_slice(&st.body).unwrap();
        assert_eq!(
            (&v["order"]["status"], &v["order"]["order"]["isTrigger"]),
            (&serde_json::json!("open"), &serde_json::json!(true))
        );
    }
}
