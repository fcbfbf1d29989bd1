use super::*;
use crate::node::{Line, NodeParser, Stream};

const A: &str = "0x5eaac7c475b1fad85701f02c4e9e796a53f94bd5";
const B: &str = "0x1624aac7c475b1fad85701f02c4e9e796a53f94b";
const HEAD: &str = r#"{"local_time":"2026-05-05T17:39:13.3","block_time":"2026-05-05T17:39:13.024","block_number":7"#;

fn status(user: &str, st: &str, oid: u64, cloid: bool, reduce_only: bool) -> String {
    let cloid = if cloid { r#""0x00000000052e29a900002af647791c39""# } else { "null" };
    format!(
        r#"{{"time":"2026-05-05T17:39:13.024084407","user":"{user}","hash":null,"builder":null,"status":"{st}","order":{{"coin":"BTC","side":"A","limitPx":"81311.0","sz":"0.5","oid":{oid},"timestamp":1778002753024,"triggerCondition":"N/A","isTrigger":false,"triggerPx":"0.0","children":[],"isPositionTpsl":false,"reduceOnly":{reduce_only},"orderType":"Limit","origSz":"0.61488","tif":"Alo","cloid":{cloid}}}}}"#
    )
}

fn block_of(lines: &[(Stream, String)], parser: &mut NodeParser) -> Block {
    let mut b = Block::new(7, 0);
    for (stream, l) in lines {
        let line: Line = parser.parse(*stream, l).unwrap();
        b.push(*stream, line);
    }
    b
}

#[test]
fn order_updates_in_line_order_with_rejections_only_of_followed_users() {
    let (a, b) = (Address::parse(A).unwrap(), Address::parse(B).unwrap());
    let watched = Arc::new(Watched::new());
    let subs = UserSubs::default();
    subs.add(a, UserChannel::Orders, &watched);
    let events = [
        status(A, "badAloPxRejected", 1, false, false),
        status(B, "open", 2, false, false),
        status(A, "open", 3, true, true),
        status(B, "iocCancelRejected", 4, false, false),
        status(A, "tickRejected", 5, false, false),
    ];
    let line = format!("{HEAD},\"events\":[{}]}}", events.join(","));
    let mut parser = NodeParser::with_watched(watched.clone());
    let block = block_of(&[(Stream::Statuses, line)], &mut parser);
    assert_eq!(block.rejected_statuses, 3);
    assert_eq!(block.statuses.len(), 2, "the book still sees only what is not rejected");
    let out = order_frames(&block, &subs.wanted(), 1, Audit::default());
    assert!(!out.contains_key(&b), "nobody follows B");
    let json: serde_json::Value = serde_json::from_slice(&out[&a].orders.as_ref().unwrap().json).unwrap();
    let order = |oid: u64, st: &str, extra: serde_json::Value| {
        let mut o = serde_json::json!({"coin":"BTC","side":"A","limitPx":"81311.0","sz":"0.5","oid":oid,
            "timestamp":1778002753024u64,"origSz":"0.61488"});
        o.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        serde_json::json!({"order": o, "status": st, "statusTimestamp": 1778002753024u64})
    };
    let want = serde_json::json!({"channel":"orderUpdates","data":[
        order(1, "badAloPxRejected", serde_json::json!({})),
        order(3, "open", serde_json::json!({"cloid":"0x00000000052e29a900002af647791c39","reduceOnly":true})),
        order(5, "tickRejected", serde_json::json!({})),
    ]});
    assert_eq!(json, want);
    // Nobody watched: the same line keeps no rejection.
    let mut plain = NodeParser::new();
    let events2 = format!("{HEAD},\"events\":[{}]}}", events.join(","));
    assert!(block_of(&[(Stream::Statuses, events2)], &mut plain).users.rejected.is_empty());
}

#[test]
fn full_parse_fallback_finds_the_same_rejections() {
    let a = Address::parse(A).unwrap();
    let watched = Arc::new(Watched::new());
    watched.add(a);
    let events = [status(A, "badAloPxRejected", 1, false, false), status(B, "open", 2, false, false)];
    // A space between events takes the line off the fast path.
    let line = format!("{HEAD},\"events\":[{}]}}", events.join(", "));
    let mut parser = NodeParser::with_watched(watched);
    let block = block_of(&[(Stream::Statuses, line)], &mut parser);
    assert_eq!(block.users.rejected.len(), 1);
    assert_eq!(block.users.rejected[0].0, 0);
    assert_eq!(block.users.rejected[0].1.order.oid, 1);
}

#[test]
fn fills_pass_through_verbatim_with_the_user_lower_case() {
    let (a, b) = (Address::parse(A).unwrap(), Address::parse(B).unwrap());
    let watched = Arc::new(Watched::new());
    let subs = UserSubs::default();
    subs.add(a, UserChannel::Fills, &watched);
    subs.add(a, UserChannel::Events, &watched);
    let fill_a = r#"{"coin":"BTC","px":"81308.0","sz":"0.00033","side":"B","time":1778002753024,"startPosition":"0.20486","dir":"Open Long","closedPnl":"0.0","hash":"0x0000000000000000000000000000000000000000000000000000000000000000","oid":412036451245,"crossed":true,"fee":"0.010866","tid":316059956208702,"feeToken":"USDC","twapId":1790552,"builderFee":"0.001","someNewField":[1,2]}"#;
    let fill_b = fill_a.replace("\"side\":\"B\"", "\"side\":\"A\"").replace("true", "false");
    let line = format!("{HEAD},\"events\":[[\"{A}\",{fill_a}],[\"{B}\",{fill_b}]]}}");
    let mut parser = NodeParser::with_watched(watched.clone());
    let block = block_of(&[(Stream::Fills, line)], &mut parser);
    assert_eq!(block.fills.len(), 2);
    // The fills line alone makes them: they need nothing of the block's other lines.
    let out = fill_frames(&block.users.fills, &subs.wanted(), 1, Audit::default());
    let f = &out[&a];
    assert!(f.orders.is_none());
    assert_eq!(
        std::str::from_utf8(&f.fills.as_ref().unwrap().json).unwrap(),
        format!(r#"{{"channel":"userFills","data":{{"user":"{A}","fills":[{fill_a}]}}}}"#)
    );
    assert_eq!(
        std::str::from_utf8(&f.events.as_ref().unwrap().json).unwrap(),
        format!(r#"{{"channel":"user","data":{{"fills":[{fill_a}]}}}}"#)
    );
    assert!(!out.contains_key(&b));
    // The last follower out stops the watching.
    subs.remove(a, UserChannel::Fills, &watched);
    subs.remove(a, UserChannel::Events, &watched);
    assert!(watched.is_empty() && subs.is_empty());
}

#[test]
fn aggregated_user_fills_merge_one_orders_fills_and_are_the_same_frame_when_nothing_merges() {
    let a = Address::parse(A).unwrap();
    let fill = |oid: u64, px: &str, tid: u64| {
        format!(
            r#"{{"coin":"BTC","px":"{px}","sz":"0.5","side":"B","time":1778002753024,"startPosition":"0.0","dir":"Open Long","closedPnl":"0.0","hash":"0x00","oid":{oid},"crossed":true,"fee":"0.01","tid":{tid},"feeToken":"USDC","twapId":null}}"#
        )
    };
    let wanted: FxHashMap<Address, UserWants> =
        [(a, [false, true, false, false, false, false, false])].into_iter().collect();
    let line = |fills: &[String]| fills.iter().map(|f| (a, Arc::from(f.as_str()))).collect::<Vec<_>>();
    let frames = fill_frames(
        &line(&[fill(7, "100.0", 1), fill(7, "102.0", 2), fill(8, "101.0", 3)]),
        &wanted,
        1,
        Audit::default(),
    );
    let f = &frames[&a];
    let merged: serde_json::Value = serde_json::from_slice(&f.fills(true).unwrap().json).unwrap();
    let fills = merged["data"]["fills"].as_array().unwrap();
    assert_eq!(fills.len(), 2);
    assert_eq!((&fills[0]["px"], &fills[0]["sz"], &fills[0]["tid"]), (&"101.0".into(), &"1.0".into(), &1.into()));
    let plain: serde_json::Value = serde_json::from_slice(&f.fills(false).unwrap().json).unwrap();
    assert_eq!(plain["data"]["fills"].as_array().unwrap().len(), 3);
    let frames = fill_frames(&line(&[fill(7, "100.0", 1), fill(8, "101.0", 3)]), &wanted, 2, Audit::default());
    let f = &frames[&a];
    assert!(Arc::ptr_eq(f.fills(true).unwrap(), f.fills(false).unwrap()), "nothing to merge: one frame");
}

#[test]
fn twap_slice_fills_are_the_fills_with_a_twap_id_each_with_its_id() {
    let a = Address::parse(A).unwrap();
    let fill = |tid: u64, twap: &str| {
        format!(
            r#"{{"coin":"BTC","px":"1.0","sz":"0.5","side":"B","time":1,"hash":"0x00","oid":1,"tid":{tid},"twapId":{twap}}}"#
        )
    };
    let (plain, slice) = (fill(1, "null"), fill(2, "1790552"));
    let got: serde_json::Value =
        serde_json::from_slice(&twap_slice_fills(&a, &[&plain, &slice], false).unwrap()).unwrap();
    let want = serde_json::json!({"channel": "userTwapSliceFills", "data": {"user": A.to_lowercase(),
        "twapSliceFills": [{"fill": serde_json::from_str::<serde_json::Value>(&slice).unwrap(), "twapId": 1790552}]}});
    assert_eq!(got, want);
    assert_eq!(twap_slice_fills(&a, &[&plain], false), None, "no slice: no frame");
    let empty: serde_json::Value = serde_json::from_slice(&twap_slice_fills(&a, &[&plain], true).unwrap()).unwrap();
    assert_eq!(
        (&empty["data"]["isSnapshot"], &empty["data"]["twapSliceFills"]),
        (&true.into(), &serde_json::json!([]))
    );
}
