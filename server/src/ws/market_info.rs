//! Market info types answered from hlbook's books and recent trades: `l2Book`, `allMids`, `recentTrades`, in the
//! exchange's shapes. None of them is on a node's info server; all three are what the publisher already keeps.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

use super::info_gate::{Answer, Local};
use crate::book::buckets::l2_levels;
use crate::book::l2::L2Params;
use crate::node::Side;
use crate::node::time::nanos_to_millis;
use crate::publish::Hub;
use crate::publish::json::{l2_book_data, mid_text};
use crate::state::Shared;
use crate::ws::protocol::DEFAULT_LEVELS;

/// `{"coin","time","levels"}` of the current books, or null for an unknown coin.
pub fn l2_book(shared: &Shared, body: &Value) -> Answer {
    let Some(coin) = body.get("coin").and_then(Value::as_str) else {
        return Answer::text(422, "Failed to deserialize the JSON body into the target type: l2Book needs a coin");
    };
    let int = |k: &str| body.get(k).and_then(Value::as_u64).and_then(|n| u8::try_from(n).ok());
    let depth = body.get("nLevels").and_then(Value::as_u64).map_or(DEFAULT_LEVELS, |n| n as usize);
    let params = match L2Params::new(int("nSigFigs"), int("mantissa"), depth) {
        Ok(p) => p,
        Err(e) => return Answer::text(422, &e.to_string()),
    };
    let mut sides = [Vec::new(), Vec::new()];
    let time = {
        let books = shared.books();
        let Some(book) = books.coin(coin) else { return Answer::json(Bytes::from_static(b"null")) };
        // The publisher's build: coarse shapes from running bucket totals.
        l2_levels(book, &params, &mut sides);
        // The levels are at the diffs line's height, which may be ahead of the last complete block.
        nanos_to_millis(books.l2_block_time_of(coin))
    };
    Answer::json(l2_book_data(coin, time, &sides[0], &sides[1]))
}

/// `allMids`: `{coin: mid}` of every coin of the dex (absent or `""`: the main dex's perps and every spot pair; a
/// name: its `name:COIN` books) with both sides, the mid exact as the allMids channel writes it.
pub fn all_mids(shared: &Shared, body: &Value) -> Answer {
    let dex = match body.get("dex") {
        None | Some(Value::Null) => "",
        Some(Value::String(d)) => d.as_str(),
        Some(_) => return Answer::text(422, "Failed to deserialize the JSON body into the target type: dex"),
    };
    let mut mids = serde_json::Map::new();
    let books = shared.books();
    for book in books.books().filter(|b| of_dex(b.coin(), dex)) {
        if let (Some((bid, _)), Some((ask, _))) = (book.best(Side::Bid), book.best(Side::Ask)) {
            mids.insert(book.coin().to_string(), Value::String(mid_text(bid, ask)));
        }
    }
    drop(books);
    Answer::json(Value::Object(mids).to_string())
}

/// Whether `coin` belongs to `dex` (`""`: the main dex and spot).
pub fn of_dex(coin: &str, dex: &str) -> bool {
    match coin.split_once(':') {
        Some((d, _)) => d == dex,
        None => dex.is_empty(),
    }
}

/// `recentTrades`: the coin's last trades as the `trades` channel sends them, oldest first. The publisher keeps
/// the trades it has seen since it started; before a coin's first trade here, it cannot say what the exchange's
/// last trades were.
pub fn recent_trades(hub: &Arc<Hub>, body: &Value) -> Local {
    let Some(coin) = body.get("coin").and_then(Value::as_str) else {
        let text = "Failed to deserialize the JSON body into the target type: recentTrades needs a coin";
        return Local::Answer(Answer::text(422, text));
    };
    let Some(coin) = hub.shared().books().coin(coin).map(|b| b.coin().clone()) else {
        let coin = Value::String(coin.chars().take(100).collect());
        return Local::Answer(Answer::text(422, &format!("recentTrades: hlbook's books have no coin {coin}")));
    };
    match hub.recent_trades_data(&coin) {
        Some(data) => Local::Answer(Answer::json(String::from_utf8(data).expect("serde_json writes UTF-8"))),
        None => Local::Unsure(format!("hlbook has seen no trade of {coin} since it started")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::book::{Books, CoinBook, RestingOrder};
    use crate::node::{Address, Fixed, OrderFlavor};

    fn order(oid: u64, side: Side, px: u64) -> RestingOrder {
        RestingOrder {
            oid,
            user: Address::default(),
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

    fn book(coin: &str, bid: u64, ask: Option<u64>) -> CoinBook {
        let mut b = CoinBook::new(coin.into());
        b.insert(order(1, Side::Bid, bid), None, None);
        if let Some(a) = ask {
            b.insert(order(2, Side::Ask, a), None, None);
        }
        b
    }

    #[test]
    fn all_mids_of_a_dex_exact_and_only_with_both_sides() {
        let books = [
            book("BTC", 100_000_000, Some(100_000_001)),
            book("@107", 300_000_000, Some(500_000_000)),
            book("ETH", 100_000_000, None),
            book("xyz:GOLD", 200_000_000, Some(200_000_000)),
        ];
        let shared = Shared::new(Books::new(9, books), std::time::Duration::from_secs(10));
        let mids = |body: Value| -> Value { serde_json::from_slice(&all_mids(&shared, &body).body).unwrap() };
        // (1.0 + 1.00000001) / 2 = 1.000000005: half a unit is a ninth decimal, never rounded.
        assert_eq!(
            mids(serde_json::json!({"type": "allMids"})),
            serde_json::json!({"BTC": "1.000000005", "@107": "4.0"})
        );
        assert_eq!(mids(serde_json::json!({"type": "allMids", "dex": "xyz"})), serde_json::json!({"xyz:GOLD": "2.0"}));
        assert_eq!(all_mids(&shared, &serde_json::json!({"dex": 5})).status, 422);
    }
}
