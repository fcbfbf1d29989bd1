use serde_json::json;

use super::*;

fn sub(text: &str) -> Subscription {
    match parse(text).unwrap() {
        Request::Subscribe(s) | Request::Unsubscribe(s) => s,
        other => panic!("not a subscription: {other:?}"),
    }
}

#[test]
fn every_clients_subscribe_frame_normalises_to_one_want() {
    let frames = [
        r#"{"method": "subscribe", "subscription": {"type": "l2Book", "coin": "BTC"}}"#,
        r#"{"method":"subscribe","subscription":{"coin":"BTC","type":"l2Book"}}"#,
        r#"{"method":"subscribe","subscription":{"type":"l2Book","coin":"BTC","nSigFigs":null,"mantissa":null}}"#,
        r#"{"id":"17","method":"subscribe","subscription":{"type":"l2Book","coin":"BTC","mantissa":1}}"#,
    ];
    let wants: Vec<Want> = frames.iter().map(|f| sub(f).want).collect();
    assert!(wants.windows(2).all(|w| w[0] == w[1]), "{wants:?}");
    assert_eq!(wants[0], Want::L2(L2Key { coin: "BTC".into(), params: L2Params::full(DEFAULT_LEVELS) }));
}

#[test]
fn ack_echoes_what_the_client_sent_plus_defaults() {
    let s = sub(r#"{"method":"subscribe","subscription":{"coin":"BTC","type":"l2Book","nLevels":50}}"#);
    let ack: Value = serde_json::from_str(&ack("subscribe", &s.echo)).unwrap();
    assert_eq!(
        ack,
        json!({"channel":"subscriptionResponse","data":{"method":"subscribe","subscription":
            {"coin":"BTC","type":"l2Book","nLevels":50,"nSigFigs":null,"mantissa":null}}})
    );
    // Non-l2Book subscriptions get nothing added.
    let t = sub(r#"{"method":"subscribe","subscription":{"type":"trades","coin":"@107"}}"#);
    assert_eq!(t.echo.value(), json!({"type":"trades","coin":"@107"}));
    assert_eq!(t.want, Want::Trades("@107".into()));
}

#[test]
fn depth_fast_and_precision_rules() {
    let depth = |f: &str| match sub(f).want {
        Want::L2(k) => (k.params.n_levels, k.params.n_sig_figs, k.params.mantissa),
        w => panic!("{w:?}"),
    };
    assert_eq!(depth(r#"{"method":"subscribe","subscription":{"type":"l2Book","coin":"X","fast":true}}"#).0, 5);
    assert_eq!(
        depth(r#"{"method":"subscribe","subscription":{"type":"l2Book","coin":"X","nSigFigs":5,"mantissa":2}}"#),
        (20, Some(5), Some(2))
    );
    for bad in [
        r#"{"method":"subscribe","subscription":{"type":"l2Book","coin":"X","nSigFigs":7}}"#,
        r#"{"method":"subscribe","subscription":{"type":"l2Book","coin":"X","nSigFigs":4,"mantissa":2}}"#,
        r#"{"method":"subscribe","subscription":{"type":"l2Book","coin":"X","nLevels":101}}"#,
        r#"{"method":"subscribe","subscription":{"type":"l2Book","coin":"X","nSigFigs":"5"}}"#,
        r#"{"method":"subscribe","subscription":{"type":"l2Book"}}"#,
    ] {
        let e = parse(bad).unwrap_err();
        assert!(e.starts_with("Error parsing JSON into valid websocket request: {"), "{e}");
        assert_json_spans(&e);
    }
}

/// Every `{…}` span a client might cut out of an error text is valid JSON.
fn assert_json_spans(text: &str) {
    if let (Some(a), Some(b)) = (text.find('{'), text.rfind('}')) {
        serde_json::from_str::<Value>(&text[a..=b]).unwrap_or_else(|e| panic!("bad span in {text:?}: {e}"));
    }
}

#[test]
fn malformed_frames_never_carry_invalid_json_spans() {
    for raw in [r#"{"method":"subscribe","#, "}{", "not json", r#"{"a":{"b":1}"#, ""] {
        let e = parse(raw).unwrap_err();
        assert!(e.starts_with("Error parsing JSON into valid websocket request:"), "{e}");
        assert_json_spans(&e);
    }
    let long = format!(r#"{{"method":"subscribe","pad":"{}"}}"#, "x".repeat(5000));
    let e = parse(&long).unwrap_err();
    assert!(e.len() < 1200);
    assert_json_spans(&e);
    // A valid JSON echo stays verbatim (compact).
    let e = parse(r#"{"method": "nope"}"#).unwrap_err();
    assert_eq!(e, r#"Error parsing JSON into valid websocket request: {"method":"nope"}"#);
}

#[test]
fn errors_and_pong_are_official() {
    let s = sub(r#"{"method":"subscribe","subscription":{"type":"bbo","coin":"ETH"}}"#);
    assert_eq!(
        already_subscribed(&s.echo),
        r#"{"channel":"error","data":"Already subscribed: {\"type\":\"bbo\",\"coin\":\"ETH\"}"}"#
    );
    assert!(already_unsubscribed(&s.echo).contains("Already unsubscribed: "));
    assert_eq!(parse(r#"{"method":"ping"}"#).unwrap(), Request::Ping);
    assert_eq!(PONG, r#"{"channel":"pong"}"#);
}

#[test]
fn posts_and_all_mids() {
    let p = parse(r#"{"method":"post","id":123,"request":{"type":"info","payload":{"type":"l2Book","coin":"ETH"}}}"#);
    assert_eq!(
        p.unwrap(),
        Request::Post { id: json!(123), request: json!({"type":"info","payload":{"type":"l2Book","coin":"ETH"}}) }
    );
    assert!(parse(r#"{"method":"post","request":{}}"#).is_err());
    assert_eq!(sub(r#"{"method":"subscribe","subscription":{"type":"allMids"}}"#).want, Want::Mids(None));
    assert_eq!(
        sub(r#"{"method":"subscribe","subscription":{"type":"allMids","dex":"xyz"}}"#).want,
        Want::Mids(Some("xyz".into()))
    );
}

#[test]
fn a_type_with_braces_cannot_break_the_echo_span() {
    let e = parse(r#"{"method":"subscribe","subscription":{"type":"x}{\"a\":1"}}"#).unwrap_err();
    let span = &e[e.find('{').unwrap()..=e.rfind('}').unwrap()];
    serde_json::from_str::<Value>(span).unwrap_or_else(|err| panic!("{err}: {e}"));
}

#[test]
fn official_types_we_do_not_serve_are_named_with_their_echo() {
    let e = parse(r#"{"method":"subscribe","subscription":{"type":"webData2","user":"0x01"}}"#).unwrap_err();
    assert!(e.starts_with("Subscription type webData2 is not served by hlbook"), "{e}");
    let span = &e[e.find('{').unwrap()..=e.rfind('}').unwrap()];
    assert_eq!(serde_json::from_str::<Value>(span).unwrap(), json!({"type":"webData2","user":"0x01"}));
}

#[test]
fn candles_of_every_official_interval_and_nothing_else() {
    for i in Interval::ALL {
        let text = format!(
            r#"{{"method":"subscribe","subscription":{{"type":"candle","coin":"@107","interval":"{}"}}}}"#,
            i.as_str()
        );
        assert_eq!(sub(&text).want, Want::Candle("@107".into(), i));
    }
    for bad in [r#""interval":"1H""#, r#""interval":60"#, r#""x":1"#] {
        let text = format!(r#"{{"method":"subscribe","subscription":{{"type":"candle","coin":"BTC",{bad}}}}}"#);
        let e = parse(&text).unwrap_err();
        assert!(e.contains("interval must be one of 1m 3m 5m"), "{e}");
    }
}

#[test]
fn an_oversized_subscription_is_refused_and_a_large_post_is_not() {
    let pad = "x".repeat(MAX_SUBSCRIPTION_BYTES);
    for method in ["subscribe", "unsubscribe"] {
        let frame = format!(r#"{{"method":"{method}","subscription":{{"type":"l2Book","coin":"BTC","pad":"{pad}"}}}}"#);
        let e = parse(&frame).unwrap_err();
        assert!(e.contains("too large") && e.contains("at most 4096") && !e.contains(&pad), "{e}");
    }
    let small = format!(
        r#"{{"method":"subscribe","subscription":{{"type":"l2Book","coin":"BTC","pad":"{}"}}}}"#,
        "x".repeat(100)
    );
    assert!(matches!(parse(&small), Ok(Request::Subscribe(_))));
    let post = format!(r#"{{"method":"post","id":1,"request":{{"type":"info","payload":{{"pad":"{pad}"}}}}}}"#);
    assert!(matches!(parse(&post), Ok(Request::Post { .. })));
}

#[test]
fn every_channel_is_one_the_counters_list() {
    let user = r#""user":"0x0000000000000000000000000000000000000001""#;
    let subs = [
        r#"{"type":"l2Book","coin":"BTC"}"#.to_string(),
        r#"{"type":"trades","coin":"BTC"}"#.to_string(),
        r#"{"type":"bbo","coin":"BTC"}"#.to_string(),
        r#"{"type":"allMids"}"#.to_string(),
        r#"{"type":"l4Book","coin":"BTC"}"#.to_string(),
        r#"{"type":"candle","coin":"BTC","interval":"1m"}"#.to_string(),
        format!(r#"{{"type":"orderUpdates",{user}}}"#),
        format!(r#"{{"type":"userFills",{user}}}"#),
        format!(r#"{{"type":"userEvents",{user}}}"#),
        format!(r#"{{"type":"userFundings",{user}}}"#),
        format!(r#"{{"type":"userNonFundingLedgerUpdates",{user}}}"#),
        format!(r#"{{"type":"userTwapSliceFills",{user}}}"#),
        format!(r#"{{"type":"userTwapHistory",{user}}}"#),
        r#"{"type":"liquidations"}"#.to_string(),
    ];
    let channels: Vec<&str> =
        subs.iter().map(|s| sub(&format!(r#"{{"method":"subscribe","subscription":{s}}}"#)).channel()).collect();
    assert_eq!(channels, crate::ws::CHANNELS, "each subscription type is counted under its own channel");
}

#[test]
fn since_is_a_resume_point_not_part_of_the_subscription() {
    let resumed = sub(r#"{"method":"subscribe","subscription":{"type":"trades","coin":"BTC","since":985148182}}"#);
    let plain = sub(r#"{"method":"subscribe","subscription":{"type":"trades","coin":"BTC"}}"#);
    assert_eq!(resumed.since, Some(985_148_182));
    assert_eq!((&resumed.want, &resumed.echo), (&plain.want, &plain.echo), "same identity, same echo");
    assert_eq!(plain.since, None);
    let null = sub(r#"{"method":"subscribe","subscription":{"type":"trades","coin":"BTC","since":null}}"#);
    assert_eq!(null.since, None);
    for bad in [r#""12""#, "-1", "1.5", "true"] {
        let text = format!(r#"{{"method":"subscribe","subscription":{{"type":"trades","coin":"BTC","since":{bad}}}}}"#);
        let e = parse(&text).unwrap_err();
        assert!(e.contains("since must be a block height"), "{bad}: {e}");
    }
}
