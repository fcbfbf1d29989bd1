//! The WebSocket protocol end to end, one test per rule of ../shared/docs/hl-ws-api.md (and docs/api.md for our
//! extensions), against the real binaries: `hlsim` writes a small market, `hlbook serve` follows it, and a
//! tungstenite client speaks to `/ws` the way the public clients do. Every connection also checks, on every
//! message it reads, that data only ever comes for a subscription between its ack and its unsubscribe ack.
//!
//! Requests, limits and HTTP endpoints are here; the data feeds (l2Book precisions, trades, l4Book, batch and
//! audit frames, shutdown) are in `ws_protocol/feeds.rs`.

mod livefeed;
mod procs;
mod wsclient;

#[path = "ws_protocol/feeds.rs"]
mod feeds;

use std::time::Duration;

use livefeed::LiveRig;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use wsclient::check::{self, assert_ack, braces_are_json, error_text, l2_defaults};
use wsclient::http::{get_json, health_until, post_json};
use wsclient::{Client, Event, refused_status, run};

/// The market these tests run against: five busy coins with 40 ms blocks (the feed's default market is quieter),
/// validation off; `server_toml` goes under `[server]`.
fn rig(server_toml: &str) -> LiveRig {
    let market = [
        ("--coins", "5"),
        ("--btc-orders", "4000"),
        ("--orders-per-coin", "300"),
        ("--block-ms", "40"),
        ("--rate", "1"),
    ];
    LiveRig::start_serving(&market, &["--validate-interval", "0"], server_toml)
}

const PARSE_ERROR: &str = "Error parsing JSON into valid websocket request: ";

#[test]
fn acks_echo_every_clients_subscribe_frame() {
    let rig = rig("");
    run(async {
        let frames = [
            ("python json.dumps", r#"{"method": "subscribe", "subscription": {"type": "l2Book", "coin": "BTC"}}"#),
            ("rust sdk, sorted keys", r#"{"method":"subscribe","subscription":{"coin":"BTC","type":"l2Book"}}"#),
            (
                "nktkas, explicit nulls",
                r#"{"method":"subscribe","subscription":{"type":"l2Book","coin":"BTC","nSigFigs":null,"mantissa":null}}"#,
            ),
            (
                "ccxt, extra id",
                r#"{"method":"subscribe","id":"1700000000001","subscription":{"type":"l2Book","coin":"BTC"}}"#,
            ),
        ];
        for (who, text) in frames {
            let mut c = Client::connect(&rig.ws("")).await;
            c.send(text).await;
            let sent: Value = serde_json::from_str(text).unwrap();
            let ack = c.next().await;
            assert_ack(&ack, "subscribe", &sent["subscription"], &l2_defaults());
            // ccxt's watch_order_book resolves only on the first book: it must come right after the ack.
            let first = c.next().await;
            assert_eq!(first["channel"], "l2Book", "{who}: first message after the ack: {first}");
            check::l2_book(&first["data"], "BTC", 20, None);
            c.close().await;
        }
    });
}

#[test]
fn acks_of_every_channel_and_their_first_frames() {
    let rig = rig("");
    run(async {
        let subs = [
            (json!({"type": "l2Book", "coin": "BTC", "nSigFigs": 5, "mantissa": 2}), Some("l2Book")),
            (json!({"type": "trades", "coin": "BTC"}), None),
            (json!({"type": "bbo", "coin": "BTC"}), Some("bbo")),
            (json!({"type": "allMids"}), Some("allMids")),
            (json!({"type": "l4Book", "coin": "BTC"}), Some("l4Book")),
        ];
        for (sub, first_channel) in subs {
            let mut c = Client::connect(&rig.ws("")).await;
            c.send_json(&json!({"method": "subscribe", "subscription": sub})).await;
            let ack = c.next().await;
            let defaults = if sub["type"] == "l2Book" { l2_defaults().to_vec() } else { Vec::new() };
            assert_ack(&ack, "subscribe", &sub, &defaults);
            let Some(channel) = first_channel else { continue };
            let first = c.next().await;
            assert_eq!(first["channel"], channel, "first message after the ack of {sub}: {first}");
            let data = &first["data"];
            match channel {
                "l2Book" => _ = check::l2_book(data, "BTC", 20, Some((5, 2))),
                "bbo" => {
                    assert_eq!(data["coin"], "BTC", "{first}");
                    let bbo = data["bbo"].as_array().unwrap();
                    assert_eq!(bbo.len(), 2, "{first}");
                    let px = |i: usize| check::units(bbo[i]["px"].as_str().unwrap());
                    assert!(px(0) < px(1), "best bid below best ask: {first}");
                }
                "allMids" => {
                    let mids = data["mids"].as_object().unwrap_or_else(|| panic!("{first}"));
                    assert!(data.get("dex").is_none(), "no dex key for the main dex: {first}");
                    assert!(mids.contains_key("BTC") && mids.contains_key("ETH"), "{first}");
                    assert!(
                        mids.keys().all(|k| !k.contains(':')),
                        "builder-dex coins only in their dex's mids: {first}"
                    );
                    assert!(mids.values().all(|m| check::units(m.as_str().unwrap()) > 0), "{first}");
                }
                _ => {
                    assert_eq!(data["type"], "snapshot", "{first}");
                    assert_eq!(data["coin"], "BTC", "{first}");
                    assert!(data["height"].as_u64().is_some() && data["levels"].as_array().map(Vec::len) == Some(2));
                }
            }
            c.close().await;
        }
    });
}

#[test]
fn ping_before_any_subscription_pongs() {
    let rig = rig("");
    run(async {
        let mut c = Client::connect(&rig.ws("")).await;
        c.send(r#"{"method":"ping"}"#).await;
        let (_, text) = c.next_text().await;
        assert_eq!(text, r#"{"channel":"pong"}"#);
        // And again, at any time.
        c.ping_pong().await;
    });
}

#[test]
fn unsubscribe_stops_data_and_repeats_are_errors() {
    let rig = rig("");
    run(async {
        let mut c = Client::connect(&rig.ws("")).await;
        c.subscribe(json!({"type": "l2Book", "coin": "ETH"})).await;
        c.subscribe(json!({"type": "l2Book", "coin": "BTC"})).await;
        c.subscribe(json!({"type": "allMids"})).await;
        c.next_where("an ETH book", |v| v["channel"] == "l2Book" && v["data"]["coin"] == "ETH").await;

        // ccxt's unwatch: an extra id; nktkas's explicit nulls match a subscription made without them.
        let unsub = json!({"type": "l2Book", "coin": "ETH", "nSigFigs": null, "mantissa": null});
        c.send_json(&json!({"method": "unsubscribe", "id": "42", "subscription": unsub})).await;
        let ack = c.next_where("unsubscribe ack", |v| v["channel"] == "subscriptionResponse").await;
        assert_ack(&ack, "unsubscribe", &unsub, &[]);
        assert!(!c.subscribed("l2Book", "ETH"));

        // Blocks keep coming (the other subscriptions get data) and ETH gets none: the client checks every
        // message against its acks, and this says it again.
        let after =
            c.collect_until(Duration::from_secs(1), |m| m.iter().filter(|v| check::is_data(v)).count() >= 3).await;
        assert!(!after.iter().any(|v| v["channel"] == "l2Book" && v["data"]["coin"] == "ETH"), "ETH after unsubscribe");

        // mantissa 1 is no mantissa.
        c.subscribe(json!({"type": "l2Book", "coin": "SOL", "nSigFigs": 5, "mantissa": 1})).await;
        let unsub = json!({"type": "l2Book", "coin": "SOL", "nSigFigs": 5});
        c.send_json(&json!({"method": "unsubscribe", "subscription": unsub})).await;
        let ack = c.next_where("unsubscribe ack", |v| v["channel"] == "subscriptionResponse").await;
        assert_ack(&ack, "unsubscribe", &unsub, &l2_defaults());

        c.send_json(&json!({"method": "unsubscribe", "subscription": {"type": "l2Book", "coin": "ETH"}})).await;
        let err = c.next_where("an error", |v| v["channel"] == "error").await;
        let text = error_text(&err);
        assert!(text.starts_with("Already unsubscribed: {"), "{text}");
        let span = braces_are_json(text).unwrap();
        assert_eq!((&span["type"], &span["coin"]), (&json!("l2Book"), &json!("ETH")), "{text}");

        c.send_json(&json!({"method": "subscribe", "subscription": {"type": "l2Book", "coin": "BTC"}})).await;
        let err = c.next_where("an error", |v| v["channel"] == "error").await;
        let text = error_text(&err);
        assert!(text.starts_with("Already subscribed: {"), "{text}");
        assert_eq!(braces_are_json(text).unwrap()["coin"], "BTC", "{text}");
        c.ping_pong().await;
    });
}

#[test]
fn unknown_coin_or_dex_gets_an_error_echoing_the_request_and_nothing_else() {
    let rig = rig("");
    run(async {
        let mut c = Client::connect(&rig.ws("")).await;
        let subs = [
            json!({"type": "l2Book", "coin": "NOPE"}),
            json!({"type": "bbo", "coin": "NOPE"}),
            json!({"type": "trades", "coin": "NOPE"}),
            json!({"type": "l4Book", "coin": "NOPE"}),
            json!({"type": "allMids", "dex": "nodex"}),
        ];
        for sub in subs {
            c.send_json(&json!({"method": "subscribe", "subscription": sub})).await;
            let err = c.next_where("an error", |v| v["channel"] == "error").await;
            let echo = braces_are_json(error_text(&err)).expect("the request is echoed");
            for (k, v) in sub.as_object().unwrap() {
                assert_eq!(&echo[k], v, "{err}");
            }
        }
        c.subscribe(json!({"type": "l2Book", "coin": "BTC"})).await;
        let books = |m: &[Value]| m.iter().filter(|v| v["channel"] == "l2Book" && v["data"]["coin"] == "BTC").count();
        c.collect_until(Duration::from_secs(2), |m| books(m) >= 3).await;
        // Counted on every message read, also those before the last ack.
        assert_eq!(c.data_by_coin.get("NOPE"), None, "no data for an unknown coin");
        c.ping_pong().await;
        let h = get_json(&format!("{}/health", rig.admin)).await;
        assert_eq!(
            h["subscriptions"],
            json!({"allMids": 0, "bbo": 0, "l2Book": 1, "l4Book": 0, "trades": 0, "candle": 0, "orderUpdates": 0, "userFills": 0, "userEvents": 0, "userFundings": 0, "userNonFundingLedgerUpdates": 0, "userTwapSliceFills": 0, "userTwapHistory": 0, "liquidations": 0}),
            "{h}"
        );
    });
}

#[test]
fn bad_requests_get_parse_errors_and_keep_the_connection() {
    let rig = rig("");
    run(async {
        let mut c = Client::connect(&rig.ws("")).await;
        let bad = [
            r#"{"method":"subscribe","#,
            r#"{"hello":"world"}"#,
            r"[1,2,3]",
            r#"{"method":"dance"}"#,
            r#"{"method":"subscribe","subscription":{"type":"l2Book","coin":"BTC","nSigFigs":7}}"#,
            r#"{"method":"subscribe","subscription":{"type":"l2Book","coin":"BTC","mantissa":2}}"#,
            r#"{"method":"subscribe","subscription":{"type":"l2Book","coin":"BTC","nLevels":0}}"#,
            r#"{"method":"subscribe","subscription":{"type":"l2Book"}}"#,
        ];
        for text in bad {
            c.send(text).await;
            let err = c.next().await;
            let msg = error_text(&err);
            assert!(msg.starts_with(PARSE_ERROR), "{text} → {msg}");
            braces_are_json(msg);
            c.ping_pong().await;
        }
        // None of them subscribed anything: no data arrives (the client would fail on it).
        c.collect(Duration::from_secs(1)).await;
        assert_eq!(c.data_messages, 0);
    });
}

/// The server reads a client socket a few KiB at a time (`ws::upgrade`): a message many reads long still arrives
/// whole.
#[test]
fn a_message_many_reads_long_arrives_whole() {
    let rig = rig("");
    run(async {
        let mut c = Client::connect(&rig.ws("")).await;
        c.send(&format!(r#"{{"method":"ping","pad":"{}"}}"#, "x".repeat(200_000))).await;
        assert_eq!(c.next().await, json!({"channel": "pong"}));
    });
}

#[test]
fn oversize_frame_closes_only_that_connection() {
    let rig = rig("max_frame_bytes = 4096");
    run(async {
        let mut quiet = Client::connect(&rig.ws("")).await;
        quiet.subscribe(json!({"type": "l2Book", "coin": "BTC"})).await;
        quiet.next_where("a book", |v| v["channel"] == "l2Book").await;

        // Just under the limit is fine.
        let mut near = Client::connect(&rig.ws("")).await;
        near.send(&format!(r#"{{"method":"ping","pad":"{}"}}"#, "x".repeat(3900))).await;
        assert_eq!(near.next().await, json!({"channel": "pong"}));

        let mut big = Client::connect(&rig.ws("")).await;
        big.send_lossy(&format!(r#"{{"method":"ping","pad":"{}"}}"#, "x".repeat(10_000))).await;
        let f = big.closed(wsclient::WAIT).await.expect("a close frame, not a bare end");
        assert_eq!(f.code, CloseCode::Size, "{f:?}");
        let books = |m: &[Value]| m.iter().filter(|v| v["channel"] == "l2Book").count();
        quiet.collect_until(Duration::ZERO, |m| books(m) >= 2).await;
        quiet.ping_pong().await;
        near.ping_pong().await;
    });
}

#[test]
fn subscription_cap_refuses_the_1001st() {
    let rig = rig("");
    run(async {
        let mut c = Client::connect(&rig.ws("")).await;
        // 1,000 distinct real shapes: every depth of five aggregations of two coins.
        let shapes = [(None, None), (Some(5), None), (Some(5), Some(2)), (Some(4), None), (Some(3), None)];
        let subs: Vec<Value> = (0..1000)
            .map(|i| {
                let ((sig, mantissa), coin) = (shapes[i / 100 % 5], ["BTC", "ETH"][i / 500]);
                json!({"type": "l2Book", "coin": coin, "nSigFigs": sig, "mantissa": mantissa, "nLevels": i % 100 + 1})
            })
            .collect();
        // Sent back to back, then the acks read in order: waiting for each ack before the next request would let
        // the book frames of every earlier subscription pile up in between, and reading them is most of the time.
        for sub in &subs {
            c.send_json(&json!({"method": "subscribe", "subscription": sub})).await;
        }
        for sub in &subs {
            let ack = c.next_where("subscribe ack", |v| v["channel"] == "subscriptionResponse").await;
            assert_ack(&ack, "subscribe", sub, &[]);
        }
        c.send_json(&json!({"method": "subscribe", "subscription": {"type": "bbo", "coin": "BTC"}})).await;
        let err = c.next_where("an error", |v| v["channel"] == "error" || v["channel"] == "subscriptionResponse").await;
        braces_are_json(error_text(&err));
        assert!(!c.subscribed("bbo", "BTC"));
        c.ping_pong().await;
        let h = get_json(&format!("{}/health", rig.admin)).await;
        assert_eq!(h["subscriptions"]["l2Book"], 1000, "{h}");
    });
}

#[test]
fn post_answers_info_over_the_socket() {
    let rig = rig("");
    run(async {
        let mut c = Client::connect(&rig.ws("")).await;
        let req = json!({"method": "post", "id": 123, "request": {"type": "info",
            "payload": {"type": "l2Book", "coin": "BTC", "nSigFigs": 5, "mantissa": null}}});
        c.send_json(&req).await;
        let v = c.next().await;
        assert_eq!(v["channel"], "post", "{v}");
        assert_eq!(v["data"]["id"], 123, "{v}");
        let resp = &v["data"]["response"];
        assert_eq!((&resp["type"], &resp["payload"]["type"]), (&json!("info"), &json!("l2Book")), "{v}");
        let (bids, asks) = check::l2_book(&resp["payload"]["data"], "BTC", 20, Some((5, 1)));
        assert!(bids > 0 && asks > 0, "{v}");

        // Other info types go to the node, as over HTTP.
        c.send_json(&json!({"method": "post", "id": 7, "request": {"type": "info", "payload": {"type": "meta"}}}))
            .await;
        let v = c.next().await;
        let (_, direct) = post_json(&rig.sim_info, &json!({"type": "meta"})).await;
        assert_eq!(
            v,
            json!({"channel": "post", "data": {"id": 7, "response": {"type": "info",
            "payload": {"type": "meta", "data": direct}}}})
        );

        // Types that make the node act are refused with their name, whatever the client asks.
        let snap = json!({"type": "fileSnapshot", "request": {"type": "l4Snapshots"}, "outPath": "/tmp/x.json"});
        c.send_json(&json!({"method": "post", "id": 8, "request": {"type": "info", "payload": snap}})).await;
        let v = c.next().await;
        assert_eq!((&v["data"]["id"], &v["data"]["response"]["type"]), (&json!(8), &json!("error")), "{v}");
        assert!(v["data"]["response"]["payload"].as_str().unwrap().contains("fileSnapshot"), "{v}");

        // Actions are not ours to serve: an error answer, the connection stays.
        c.send_json(&json!({"method": "post", "id": 9, "request": {"type": "action", "payload": {}}})).await;
        let v = c.next().await;
        assert_eq!((&v["data"]["id"], &v["data"]["response"]["type"]), (&json!(9), &json!("error")), "{v}");
        assert!(v["data"]["response"]["payload"].is_string(), "{v}");
        c.ping_pong().await;
    });
}

#[test]
fn http_info_answers_l2book_and_passes_the_rest() {
    let rig = rig("");
    run(async {
        let url = format!("{}/info", rig.base);
        let (status, book) = post_json(&url, &json!({"type": "l2Book", "coin": "BTC"})).await;
        assert_eq!(status, 200, "{book}");
        let (bids, asks) = check::l2_book(&book, "BTC", 20, None);
        assert!(bids == 20 && asks == 20, "a deep book shows 20 levels a side: {book}");
        let (_, coarse) = post_json(&url, &json!({"type": "l2Book", "coin": "BTC", "nSigFigs": 3})).await;
        check::l2_book(&coarse, "BTC", 20, Some((3, 1)));
        for kind in ["meta", "spotMeta"] {
            let (s, ours) = post_json(&url, &json!({"type": kind})).await;
            let (_, direct) = post_json(&rig.sim_info, &json!({"type": kind})).await;
            assert_eq!((s, &ours), (200, &direct), "{kind} passed through");
        }
        let (status, none) = post_json(&url, &json!({"type": "l2Book", "coin": "NOPE"})).await;
        assert_eq!((status, none), (200, Value::Null));
    });
}

#[test]
fn token_is_required_when_configured() {
    let rig = rig("token = \"s3cret\"\n");
    run(async {
        assert_eq!(refused_status(&rig.ws(""), None).await, 401);
        assert_eq!(refused_status(&rig.ws("token=wrong"), None).await, 401);
        assert_eq!(refused_status(&rig.ws(""), Some("wrong")).await, 401);
        let mut by_query = Client::connect(&rig.ws("token=s3cret")).await;
        by_query.ping_pong().await;
        let mut by_header = wsclient::try_connect(&rig.ws(""), Some("s3cret")).await.expect("bearer token accepted");
        by_header.ping_pong().await;
    });
}

#[test]
fn connections_per_ip_are_capped() {
    let rig = rig("max_connections_per_ip = 2\n");
    run(async {
        let mut a = Client::connect(&rig.ws("")).await;
        let mut b = Client::connect(&rig.ws("")).await;
        assert_eq!(refused_status(&rig.ws(""), None).await, 429);
        a.subscribe(json!({"type": "l2Book", "coin": "BTC"})).await;
        a.next_where("a book", |v| v["channel"] == "l2Book").await;
        b.ping_pong().await;
        // A place freed is a place to take.
        b.close().await;
        health_until(&rig.admin, "one connection", |h| h["connections"] == 1).await;
        let mut c = Client::connect(&rig.ws("")).await;
        c.ping_pong().await;
        a.ping_pong().await;
    });
}

#[test]
fn clients_behind_a_trusted_balancer_are_capped_each() {
    // The test connects from 127.0.0.1, which plays the balancer.
    let trusting = rig("max_connections_per_ip = 1\ntrusted_proxies = [\"127.0.0.1\"]\n");
    run(async {
        let via = |client: &str| vec![("X-Forwarded-For", client.to_string())];
        let mut a = wsclient::try_connect_with(&trusting.ws(""), &via("203.0.113.7")).await.expect("first client");
        let mut b = wsclient::try_connect_with(&trusting.ws(""), &via("203.0.113.8")).await.expect("another client");
        match wsclient::try_connect_with(&trusting.ws(""), &via("203.0.113.7")).await {
            Err(tokio_tungstenite::tungstenite::Error::Http(r)) => assert_eq!(r.status(), 429),
            other => panic!("a second connection of 203.0.113.7 was not refused: {:?}", other.map(|c| c.name)),
        }
        // A hop the client wrote itself (left of the balancer's) does not move it to another bucket.
        let forged = via("198.51.100.1, 203.0.113.7");
        assert!(wsclient::try_connect_with(&trusting.ws(""), &forged).await.is_err(), "a forged hop was believed");
        a.ping_pong().await;
        b.ping_pong().await;
    });
    // Without trust, the header is ignored: everyone here is 127.0.0.1.
    let untrusting = rig("max_connections_per_ip = 1\n");
    run(async {
        let mut a =
            wsclient::try_connect_with(&untrusting.ws(""), &[("X-Forwarded-For", "203.0.113.7".into())]).await.unwrap();
        assert_eq!(refused_status(&untrusting.ws(""), None).await, 429);
        a.ping_pong().await;
    });
}

#[test]
fn message_rate_closes_only_the_abuser() {
    let rig = rig("max_messages_per_minute = 20\n");
    run(async {
        let mut calm = Client::connect(&rig.ws("")).await;
        calm.subscribe(json!({"type": "l2Book", "coin": "BTC"})).await;
        let mut loud = Client::connect(&rig.ws("")).await;
        for _ in 0..30 {
            loud.send_lossy(r#"{"method":"ping"}"#).await;
        }
        let mut pongs = 0;
        let close = loop {
            match loud.next_event(wsclient::WAIT).await {
                Some(Event::Msg(v, _)) => {
                    assert_eq!(v, json!({"channel": "pong"}));
                    pongs += 1;
                }
                Some(Event::Closed(f)) => break f,
                None => panic!("the abuser was not closed after 30 messages (limit 20 a minute)"),
            }
        };
        assert_eq!(pongs, 20, "the first 20 messages are served");
        assert_eq!(close.map(|f| f.code), Some(CloseCode::Policy));
        let books = |m: &[Value]| m.iter().filter(|v| v["channel"] == "l2Book").count();
        calm.collect_until(Duration::ZERO, |m| books(m) >= 2).await;
        calm.ping_pong().await;
    });
}

#[test]
fn idle_connection_is_closed_busy_one_is_not() {
    let rig = rig("idle_timeout_secs = 2\n");
    run(async {
        let mut busy = Client::connect(&rig.ws("")).await;
        busy.subscribe(json!({"type": "allMids"})).await;
        let mut idle = Client::connect(&rig.ws("")).await;
        // A behaviour bound, not a speed goal: closed well within five idle periods.
        let f = idle.closed(Duration::from_secs(10)).await.expect("a close frame, not a bare end");
        assert_eq!(f.code, CloseCode::Normal, "{f:?}");
        // The busy one got data all along and stays open for two more idle periods.
        let got = busy.collect(Duration::from_secs(4)).await;
        assert!(got.iter().any(|v| v["channel"] == "allMids"), "allMids flowing");
        busy.ping_pong().await;
        let h = get_json(&format!("{}/health", rig.admin)).await;
        assert_eq!(h["ws"]["closed_idle"], 1, "{h}");
    });
}

#[test]
fn health_counts_connections_and_subscriptions() {
    let rig = rig("");
    run(async {
        let mut a = Client::connect(&rig.ws("")).await;
        a.subscribe(json!({"type": "l2Book", "coin": "BTC"})).await;
        a.subscribe(json!({"type": "l2Book", "coin": "BTC", "nSigFigs": 3})).await;
        a.subscribe(json!({"type": "trades", "coin": "BTC"})).await;
        let mut b = Client::connect(&rig.ws("")).await;
        b.subscribe(json!({"type": "bbo", "coin": "ETH"})).await;
        b.subscribe(json!({"type": "allMids"})).await;
        let mut c = Client::connect(&rig.ws("")).await;
        c.subscribe(json!({"type": "l4Book", "coin": "BTC"})).await;
        c.subscribe(json!({"type": "liquidations"})).await;
        let h = get_json(&format!("{}/health", rig.admin)).await;
        assert_eq!(h["connections"], 3, "{h}");
        let by_channel = json!({"l2Book": 2, "trades": 1, "bbo": 1, "allMids": 1, "l4Book": 1, "candle": 0, "orderUpdates": 0, "userFills": 0, "userEvents": 0, "userFundings": 0, "userNonFundingLedgerUpdates": 0, "userTwapSliceFills": 0, "userTwapHistory": 0, "liquidations": 1});
        assert_eq!(h["subscriptions"], by_channel, "{h}");
        let ws = &h["ws"];
        assert!(ws["connections_accepted"].as_u64() >= Some(3) && ws["messages_received"].as_u64() >= Some(6), "{h}");
        a.close().await;
        let h = health_until(&rig.admin, "a closed connection's subscriptions gone", |h| h["connections"] == 2).await;
        let by_channel = json!({"l2Book": 0, "trades": 0, "bbo": 1, "allMids": 1, "l4Book": 1, "candle": 0, "orderUpdates": 0, "userFills": 0, "userEvents": 0, "userFundings": 0, "userNonFundingLedgerUpdates": 0, "userTwapSliceFills": 0, "userTwapHistory": 0, "liquidations": 1});
        assert_eq!(h["subscriptions"], by_channel, "{h}");
        b.ping_pong().await;
        c.ping_pong().await;
    });
}

/// hlbook's `liquidations` channel is one subscription a connection like any other: a second subscribe is refused
/// (nothing more held), an unsubscribe frees it (the admin /health count goes back) and a second one is refused.
#[test]
fn liquidations_is_one_subscription_a_connection_and_unsubscribes() {
    let rig = rig("");
    run(async {
        let mut c = Client::connect(&rig.ws("")).await;
        let sub = json!({"type": "liquidations"});
        c.subscribe(sub.clone()).await;
        c.send_json(&json!({"method": "subscribe", "subscription": sub})).await;
        let err = c.next_where("an error", |v| v["channel"] == "error").await;
        assert!(error_text(&err).starts_with("Already subscribed: {"), "{err}");
        let h = get_json(&format!("{}/health", rig.admin)).await;
        assert_eq!(h["subscriptions"]["liquidations"], 1, "{h}");
        c.send_json(&json!({"method": "unsubscribe", "subscription": sub})).await;
        let ack = c.next_where("unsubscribe ack", |v| v["channel"] == "subscriptionResponse").await;
        assert_eq!(ack["data"]["method"], "unsubscribe", "{ack}");
        health_until(&rig.admin, "the liquidations subscription gone", |h| h["subscriptions"]["liquidations"] == 0)
            .await;
        c.send_json(&json!({"method": "unsubscribe", "subscription": sub})).await;
        let err = c.next_where("an error", |v| v["channel"] == "error").await;
        assert!(error_text(&err).starts_with("Already unsubscribed: {"), "{err}");
        c.ping_pong().await;
    });
}
