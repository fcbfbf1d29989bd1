//! Checks of message shapes shared by the protocol tests; each panics with the offending message.

use serde_json::{Map, Value, json};

/// Channels that carry market data.
pub fn is_data(v: &Value) -> bool {
    matches!(v["channel"].as_str(), Some("l2Book" | "bbo" | "trades" | "allMids" | "l4Book" | "liquidations"))
}

/// The `data` text of an error frame.
pub fn error_text(v: &Value) -> &str {
    assert_eq!(v["channel"], "error", "expected an error frame: {v}");
    assert_eq!(v.as_object().map(Map::len), Some(2), "an error frame is {{channel, data}}: {v}");
    v["data"].as_str().unwrap_or_else(|| panic!("error data must be a string: {v}"))
}

/// Every `{…}` a client could cut out of `text` parses as JSON: the greedy span (first `{` to last `}`, what a
/// regex like `/{.*}/` takes) and each balanced top-level span. Returns the greedy span's value, if any.
pub fn braces_are_json(text: &str) -> Option<Value> {
    let (Some(a), Some(b)) = (text.find('{'), text.rfind('}')) else {
        assert!(!text.contains('{') && !text.contains('}'), "unbalanced braces in {text:?}");
        return None;
    };
    assert!(a < b, "a '}}' before the first '{{' in {text:?}");
    let greedy: Value = serde_json::from_str(&text[a..=b])
        .unwrap_or_else(|e| panic!("span {:?} of {text:?} is not JSON: {e}", &text[a..=b]));
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, ch) in text.char_indices() {
        match ch {
            '{' => {
                if depth == 0 {
                    start = i;
                }
                depth += 1;
            }
            '}' => {
                assert!(depth > 0, "unbalanced '}}' in {text:?}");
                depth -= 1;
                if depth == 0 {
                    let span = &text[start..=i];
                    serde_json::from_str::<Value>(span).unwrap_or_else(|e| panic!("span {span:?} is not JSON: {e}"));
                }
            }
            _ => {}
        }
    }
    assert_eq!(depth, 0, "unbalanced '{{' in {text:?}");
    Some(greedy)
}

/// `{"channel":"subscriptionResponse","data":{"method":…,"subscription":…}}` whose subscription is exactly what
/// the client sent plus `defaults` for keys it did not send (same values, same JSON types).
pub fn assert_ack(ack: &Value, method: &str, sent: &Value, defaults: &[(&str, Value)]) {
    let mut want = sent.as_object().unwrap().clone();
    for (k, v) in defaults {
        want.entry(k.to_string()).or_insert(v.clone());
    }
    let expected = json!({"channel": "subscriptionResponse", "data": {"method": method, "subscription": want.clone()}});
    assert_eq!(ack, &expected, "ack of {sent}");
    // And in the client's key order, defaults after (docs/api.md: "same keys, same value types, same order").
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&ack["data"]["subscription"]), keys(&Value::Object(want)), "echo key order of {sent}");
}

/// l2Book's defaults in the echo.
pub fn l2_defaults() -> [(&'static str, Value); 2] {
    [("nSigFigs", Value::Null), ("mantissa", Value::Null)]
}

/// A decimal string (`"84143.0"`, `"0.00036"`) in 10^-8 units; panics on anything else.
pub fn units(s: &str) -> u128 {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let ok = !int.is_empty()
        && int.bytes().all(|b| b.is_ascii_digit())
        && frac.len() <= 8
        && frac.bytes().all(|b| b.is_ascii_digit());
    assert!(ok, "not a decimal with at most 8 places: {s:?}");
    let frac = format!("{frac:0<8}");
    int.parse::<u128>().unwrap() * 100_000_000 + frac.parse::<u128>().unwrap()
}

/// Significant figures of a decimal string (trailing zeros are not counted).
pub fn sig_figs(s: &str) -> usize {
    let digits: String = s.chars().filter(char::is_ascii_digit).collect();
    digits.trim_start_matches('0').trim_end_matches('0').len()
}

/// The bucket width of the aggregation `(nSigFigs, mantissa)` at a price, in 10^-8 units (the API doc's
/// `mantissa × 10^(digits(P) − nSigFigs)`); a coin's tick can only make it wider.
pub fn bucket_width(px_units: u128, sig: u32, mantissa: u128) -> u128 {
    let unit_digits = px_units.checked_ilog10().map_or(1, |d| d + 1);
    if unit_digits < sig { 1 } else { mantissa * 10u128.pow(unit_digits - sig) }
}

/// An l2Book `data` object (frame, post or /info answer) of `coin`: bids strictly descending, asks strictly
/// ascending and above the bids, at most `depth` a side, positive sizes and counts, and, when aggregated, every
/// price on its bucket grid with at most `sig` significant figures. Returns the two sides' lengths.
pub fn l2_book(data: &Value, coin: &str, depth: usize, agg: Option<(u32, u128)>) -> (usize, usize) {
    assert_eq!(
        data.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()),
        Some(vec!["coin".into(), "time".into(), "levels".into()]),
        "l2Book data keys: {data}"
    );
    assert_eq!(data["coin"], coin, "{data}");
    assert!(data["time"].as_u64().is_some_and(|t| t > 1_000_000_000_000), "time in ms: {data}");
    let levels = data["levels"].as_array().unwrap_or_else(|| panic!("levels: {data}"));
    assert_eq!(levels.len(), 2, "levels is [bids, asks]: {data}");
    let mut best = [None, None];
    for (side, list) in levels.iter().enumerate() {
        let list = list.as_array().unwrap_or_else(|| panic!("a side is a list: {data}"));
        assert!(list.len() <= depth, "{} levels > {depth}: {data}", list.len());
        let mut prev: Option<u128> = None;
        for l in list {
            assert_eq!(l.as_object().map(Map::len), Some(3), "a level is {{px, sz, n}}: {l}");
            let px = units(l["px"].as_str().unwrap_or_else(|| panic!("px is a string: {l}")));
            assert!(units(l["sz"].as_str().unwrap_or_else(|| panic!("sz is a string: {l}"))) > 0, "size 0: {l}");
            assert!(l["n"].as_u64().is_some_and(|n| n >= 1), "n ≥ 1: {l}");
            if let Some((sig, mantissa)) = agg {
                assert!(sig_figs(l["px"].as_str().unwrap()) <= sig as usize, "more than {sig} figures: {l} in {data}");
                assert_eq!(px % bucket_width(px, sig, mantissa), 0, "{l} off the ({sig}, {mantissa}) grid: {data}");
            }
            if let Some(p) = prev {
                let ordered = if side == 0 { px < p } else { px > p };
                assert!(ordered, "side {side} not strictly best-first at {l}: {data}");
            }
            prev = Some(px);
            best[side].get_or_insert(px);
        }
    }
    if let [Some(bid), Some(ask)] = best {
        assert!(bid < ask, "crossed book: {data}");
    }
    (levels[0].as_array().unwrap().len(), levels[1].as_array().unwrap().len())
}

/// An address: `0x` and 40 hex digits.
pub fn is_address(v: &Value) -> bool {
    v.as_str().is_some_and(|s| s.len() == 42 && s.starts_with("0x") && s[2..].bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A trade as the official API (and the Rust SDK, which drops frames missing any field) has it.
pub fn trade(t: &Value, coin: &str) {
    let keys: Vec<&str> =
        t.as_object().unwrap_or_else(|| panic!("a trade is an object: {t}")).keys().map(String::as_str).collect();
    for k in ["coin", "side", "px", "sz", "time", "hash", "tid", "users"] {
        assert!(keys.contains(&k), "trade without {k}: {t}");
    }
    assert_eq!(t["coin"], coin, "{t}");
    assert!(matches!(t["side"].as_str(), Some("A" | "B")), "side: {t}");
    assert!(units(t["px"].as_str().unwrap()) > 0 && units(t["sz"].as_str().unwrap()) > 0, "{t}");
    assert!(t["time"].as_u64().is_some_and(|x| x > 1_000_000_000_000), "time in ms: {t}");
    let hash = t["hash"].as_str().unwrap_or_else(|| panic!("hash: {t}"));
    assert!(
        hash.len() == 66 && hash.starts_with("0x") && hash[2..].bytes().all(|b| b.is_ascii_hexdigit()),
        "hash: {t}"
    );
    assert!(t["tid"].as_u64().is_some(), "tid: {t}");
    let users = t["users"].as_array().unwrap_or_else(|| panic!("users: {t}"));
    assert!(users.len() == 2 && users.iter().all(is_address), "users are [buyer, seller]: {t}");
}
