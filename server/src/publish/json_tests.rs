use serde_json::{Value, json};

use super::*;
use crate::node::FixedSum;

fn addr(b: u8) -> Address {
    crate::node::event::HexBytes([b; 20])
}

fn fill(user: u8, side: Side, crossed: bool, tid: u64, time: i64) -> Fill {
    Fill {
        coin: "BTC".into(),
        user: addr(user),
        px: Fixed::parse("100.5").unwrap(),
        sz: Fixed::parse("0.25").unwrap(),
        side,
        time,
        hash: crate::node::event::HexBytes([7; 32]),
        oid: u64::from(user),
        crossed,
        tid,
    }
}

#[test]
fn trades_pair_fills_by_tid_with_the_takers_side() {
    let fills = [
        fill(1, Side::Ask, true, 10, 5), // taker sells to maker 2
        fill(2, Side::Bid, false, 10, 5),
        fill(3, Side::Ask, false, 11, 6), // maker ask first, taker buy second
        fill(4, Side::Bid, true, 11, 6),
        fill(5, Side::Ask, false, 12, 7), // one-sided: only the maker ask was written
    ];
    let v: Value = serde_json::from_slice(&trades(fills.iter())).unwrap();
    assert_eq!(v["channel"], "trades");
    let t = v["data"].as_array().unwrap();
    assert_eq!(t.len(), 3);
    assert_eq!(t[0]["side"], "A");
    assert_eq!(t[0]["users"], json!([addr(2).to_string(), addr(1).to_string()]));
    assert_eq!(t[1]["side"], "B");
    assert_eq!(t[1]["users"], json!([addr(4).to_string(), addr(3).to_string()]));
    assert_eq!(t[2]["side"], "B", "the unseen taker of a maker ask bought");
    assert_eq!(t[2]["users"][0], Address::default().to_string());
    assert_eq!(t[0]["px"], "100.5");
    assert_eq!(t[0]["tid"], 10);
    let keys: Vec<&str> = t[0].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["coin", "side", "px", "sz", "time", "hash", "tid", "users"]);
}

#[test]
fn mids_are_exact() {
    let f = |s| Fixed::parse(s).unwrap();
    assert_eq!(mid_text(f("84143.0"), f("84144.0")), "84143.5");
    assert_eq!(mid_text(f("1.0"), f("1.0")), "1.0");
    assert_eq!(mid_text(f("0.00000001"), f("0.00000002")), "0.000000015");
    let v: Value = serde_json::from_slice(&all_mids(None, [("BTC", "1.5")].into_iter())).unwrap();
    assert_eq!(v, json!({"channel":"allMids","data":{"mids":{"BTC":"1.5"}}}));
    let v: Value = serde_json::from_slice(&all_mids(Some("xyz"), std::iter::empty())).unwrap();
    assert_eq!(v["data"]["dex"], "xyz");
}

#[test]
fn bbo_and_l2_shapes() {
    let l = LevelAgg { px: Fixed::parse("10.0").unwrap(), sz: FixedSum(150_000_000), n: 2 };
    let v: Value = serde_json::from_slice(&bbo("ETH", 9, &[Some(l), None])).unwrap();
    assert_eq!(v, json!({"channel":"bbo","data":{"coin":"ETH","time":9,"bbo":[{"px":"10.0","sz":"1.5","n":2},null]}}));
    let v: Value = serde_json::from_slice(&l2_book("ETH", 9, &[l], &[])).unwrap();
    assert_eq!(
        v,
        json!({"channel":"l2Book","data":{"coin":"ETH","time":9,"levels":[[{"px":"10.0","sz":"1.5","n":2}],[]]}})
    );
}
