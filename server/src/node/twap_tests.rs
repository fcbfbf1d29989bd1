use super::*;

const HEAD: &str = r#""local_time":"2025-12-04T17:00:22.590883578","block_time":"2025-12-04T17:00:22.417074898","block_number":817824346"#;
const USER: &str = "0x9d6a5ab97a8eed617bde9968d9ab6fcf72fde1b8";

fn line(events: &[String]) -> String {
    format!("{{{HEAD},\"events\":[{}]}}", events.join(","))
}

fn event(id: u64, executed_sz: &str, executed_ntl: &str, status: &str) -> String {
    format!(
        r#"{{"time":"2025-12-04T17:00:22.417074898","twap_id":{id},"state":{{"coin":"HYPE","user":"{USER}","side":"A","sz":"108.36","executedSz":"{executed_sz}","executedNtl":"{executed_ntl}","minutes":10,"reduceOnly":false,"randomize":true,"timestamp":1764867622417}},"status":{status}}}"#
    )
}

#[test]
fn reads_every_status_with_exact_amounts() {
    let l = line(&[
        event(1430699, "0.0", "0.0", r#""activated""#),
        event(1430699, "108.36", "4316.12345678", r#""finished""#),
        event(7, "54.18", "2158.06", r#""terminated""#),
        event(8, "0.0", "0.0", r#"{"error":"Insufficient margin to place order."}"#),
    ]);
    let parsed = parse_twap_line(&l).unwrap();
    assert!(parsed.skipped.is_empty(), "{:?}", parsed.skipped);
    assert_eq!(parsed.meta.height, 817824346);
    let outcomes: Vec<_> = parsed.events.iter().map(|e| (e.twap_id, e.outcome.clone())).collect();
    assert_eq!(
        outcomes,
        vec![
            (1430699, TwapOutcome::Activated),
            (1430699, TwapOutcome::Finished),
            (7, TwapOutcome::Terminated),
            (8, TwapOutcome::Error("Insufficient margin to place order.".into())),
        ]
    );
    let done = &parsed.events[1];
    assert_eq!(done.time, parsed.meta.block_time);
    let s = &done.state;
    assert_eq!((s.coin.as_str(), s.user, s.side), ("HYPE", Address::parse(USER).unwrap(), Side::Ask));
    assert_eq!(s.sz, Fixed(10_836_000_000));
    assert_eq!(s.executed_sz, Fixed(10_836_000_000));
    assert_eq!(s.executed_ntl, Fixed(431_612_345_678), "all eight decimals kept");
    assert_eq!(s.executed_ntl.to_string(), "4316.12345678");
    assert_eq!((s.minutes, s.reduce_only, s.randomize, s.timestamp), (10, false, true, 1764867622417));
    assert_eq!(parsed.events[3].outcome.word(), "error");
}

#[test]
fn an_unknown_status_is_skipped_and_the_rest_of_the_line_kept() {
    let l = line(&[
        event(1, "0.0", "0.0", r#""paused""#),
        event(2, "0.0", "0.0", r#""activated""#),
        event(3, "0.0", "0.0", r#"{"halted":"x"}"#),
    ]);
    let parsed = parse_twap_line(&l).unwrap();
    let skipped: Vec<(usize, bool)> = parsed.skipped.iter().map(|s| (s.at, s.unknown_kind)).collect();
    assert_eq!(skipped, vec![(0, true), (2, false)]);
    assert!(parsed.skipped[0].why.contains("paused"), "{}", parsed.skipped[0].why);
    let ids: Vec<u64> = parsed.events.iter().map(|e| e.twap_id).collect();
    assert_eq!(ids, vec![2]);
}

#[test]
fn malformed_events_are_skipped_not_guessed() {
    let number_amount = event(1, "0.0", "0.0", r#""activated""#).replace(r#""sz":"108.36""#, r#""sz":108.36"#);
    let bad_side = event(2, "0.0", "0.0", r#""activated""#).replace(r#""side":"A""#, r#""side":"S""#);
    let no_state = r#"{"time":"2025-12-04T17:00:22.417074898","twap_id":3,"status":"activated"}"#.to_string();
    let negative = event(4, "-1.0", "0.0", r#""finished""#);
    let ok = event(5, "0.0", "0.0", r#""activated""#);
    let parsed = parse_twap_line(&line(&[number_amount, bad_side, no_state, negative, ok])).unwrap();
    let skipped: Vec<(usize, bool)> = parsed.skipped.iter().map(|s| (s.at, s.unknown_kind)).collect();
    assert_eq!(skipped, vec![(0, false), (1, false), (2, false), (3, false)]);
    assert_eq!(parsed.events.len(), 1);
    assert_eq!(parsed.events[0].twap_id, 5);
}

#[test]
fn a_malformed_line_is_refused_whole() {
    let good = line(&[event(1, "0.0", "0.0", r#""activated""#)]);
    for bad in [
        good[..good.len() - 1].to_string(),
        good.replace(r#""block_number":817824346"#, r#""block_number":"817824346""#),
        good.replace("2025-12-04T17:00:22.417074898\",\"block_number", "yesterday\",\"block_number"),
        good.replace(r#""events":["#, r#""events":{"#).replace("}]}", "}}}"),
        String::new(),
    ] {
        assert!(parse_twap_line(&bad).is_err(), "{bad}");
    }
    assert!(parse_twap_line(&good).is_ok());
}

#[test]
fn folders_follow_the_mode() {
    assert_eq!(twap_dir(Mode::ByBlock), "node_twap_statuses_by_block");
    assert_eq!(twap_dir(Mode::Streaming), "node_twap_statuses_streaming");
}
