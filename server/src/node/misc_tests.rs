use super::*;

const HEAD: &str = r#""local_time":"2025-11-05T16:09:18.727320857","block_time":"2025-11-05T16:09:18.466557521","block_number":786814394"#;
const HASH: &str = "0x4a3367a1c546233d4bad042ee5d5ba020b2a00876049420fedfc12f48449fd27";
const A: &str = "0x025a744111554e57c66ba2069a8081249fbe5e11";
const B: &str = "0x1e37a337ed460039d1b15bd3bc489de789768d5e";

fn line(events: &[String]) -> String {
    format!("{{{HEAD},\"events\":[{}]}}", events.join(","))
}

fn event(inner: &str) -> String {
    format!(r#"{{"time":"2025-11-05T16:09:18.466557521","hash":"{HASH}","inner":{inner}}}"#)
}

fn addr(s: &str) -> Address {
    Address::parse(s).unwrap()
}

#[test]
fn reads_a_vault_withdraw_ledger_update_verbatim() {
    let delta = r#"{"type":"vaultWithdraw","vault":"0x1e37a337ed460039d1b15bd3bc489de789768d5e","user":"0x025a744111554e57c66ba2069a8081249fbe5e11","requestedUsd":"7.203866","commission":"0.0","closingCost":"0.0","basis":"7.22722","netWithdrawnUsd":"7.203866"}"#;
    let l = line(&[event(&format!(r#"{{"LedgerUpdate":{{"users":["{A}","{B}"],"delta":{delta}}}}}"#))]);
    let parsed = parse_misc_line(&l).unwrap();
    assert_eq!(parsed.meta.height, 786814394);
    assert!(parsed.skipped.is_empty());
    let [ev] = &parsed.events[..] else { panic!("one event") };
    assert_eq!(ev.hash, TxHash::parse(HASH).unwrap());
    assert_eq!(ev.time, parsed.meta.block_time);
    let MiscKind::Ledger(u) = &ev.kind else { panic!("ledger") };
    assert_eq!(u.users, vec![addr(A), addr(B)]);
    assert_eq!(u.kind, "vaultWithdraw");
    assert_eq!(&*u.delta, delta, "delta passes through in the node's key order");
}

#[test]
fn reads_both_funding_forms_exactly() {
    let inner = format!(
        r#"{{"Funding":{{"deltas":[{{"user":"{A}","coin":"BTC","funding_amount":"-0.012345","szi":"0.5","funding_rate":"0.0000125"}},{{"user":"{B}","coin":"ETH","funding_amount":"1.5","szi":"-2.0","funding_rate":"-0.00000987654321"}}]}}}}"#
    );
    let ledger = format!(
        r#"{{"LedgerUpdate":{{"users":["{A}"],"delta":{{"type":"funding","coin":"SOL","usdc":"0.25","szi":"-10.0","fundingRate":"0.00001","nSamples":3600}}}}}}"#
    );
    let parsed = parse_misc_line(&line(&[event(&inner), event(&ledger)])).unwrap();
    assert!(parsed.skipped.is_empty(), "{:?}", parsed.skipped);
    let MiscKind::Fundings(f) = &parsed.events[0].kind else { panic!("fundings") };
    assert_eq!(f.len(), 2);
    assert_eq!((f[0].user, f[0].coin.as_str()), (addr(A), "BTC"));
    assert_eq!(f[0].usdc, Signed { negative: true, abs: Fixed::parse("0.012345").unwrap() });
    assert_eq!(f[0].usdc.to_string(), "-0.012345");
    assert_eq!(f[1].szi.to_string(), "-2.0");
    assert_eq!(f[1].funding_rate, "-0.00000987654321", "a rate keeps all its digits");
    assert_eq!(f[0].n_samples, None);
    let MiscKind::Fundings(g) = &parsed.events[1].kind else { panic!("fundings") };
    assert_eq!((g[0].coin.as_str(), g[0].usdc.to_string(), g[0].n_samples), ("SOL", "0.25".into(), Some(3600)));
}

#[test]
fn an_unknown_kind_is_skipped_and_the_rest_of_the_line_kept() {
    let deposit = format!(r#"{{"LedgerUpdate":{{"users":["{A}"],"delta":{{"type":"deposit","usdc":"100.0"}}}}}}"#);
    let parsed = parse_misc_line(&line(&[
        event(r#"{"SomethingNew":{"x":1}}"#),
        event(&format!(r#"{{"LedgerUpdate":{{"users":["{A}"],"delta":{{"type":"teleport","usdc":"1.0"}}}}}}"#)),
        event(&deposit),
        event(r#"{"Delegation":{"user":"0x025a744111554e57c66ba2069a8081249fbe5e11","validator":"0x1e37a337ed460039d1b15bd3bc489de789768d5e","amount":1.0,"is_undelegate":false}}"#),
    ]))
    .unwrap();
    let skipped: Vec<(usize, bool)> = parsed.skipped.iter().map(|s| (s.at, s.unknown_kind)).collect();
    assert_eq!(skipped, vec![(0, true), (1, true)]);
    assert!(parsed.skipped[0].why.contains("SomethingNew"), "{}", parsed.skipped[0].why);
    assert_eq!(parsed.events.len(), 2);
    assert!(matches!(&parsed.events[0].kind, MiscKind::Ledger(u) if u.kind == "deposit"));
    assert_eq!(parsed.events[1].kind, MiscKind::Ignored("Delegation"));
}

#[test]
fn a_null_hash_reads_as_zeros() {
    let ev = format!(
        r#"{{"time":"2025-11-05T16:09:18.466557521","hash":null,"inner":{{"LedgerUpdate":{{"users":["{A}"],"delta":{{"type":"deposit","usdc":"1.0"}}}}}}}}"#
    );
    let parsed = parse_misc_line(&line(&[ev])).unwrap();
    assert_eq!(parsed.events[0].hash, TxHash::default());
}

#[test]
fn a_malformed_event_is_skipped_and_counted_apart_from_unknown_ones() {
    let float_amount = format!(r#"{{"LedgerUpdate":{{"users":["{A}"],"delta":{{"type":"deposit","usdc":100.5}}}}}}"#);
    let bad_user = r#"{"LedgerUpdate":{"users":["0x12"],"delta":{"type":"deposit","usdc":"1.0"}}}"#;
    let two_keys = r#"{"Funding":{"deltas":[]},"CDeposit":{}}"#;
    let bad_rate = format!(
        r#"{{"Funding":{{"deltas":[{{"user":"{A}","coin":"BTC","funding_amount":"1.0","szi":"1.0","funding_rate":"1e-5"}}]}}}}"#
    );
    let nested = format!(
        r#"{{"LedgerUpdate":{{"users":["{A}"],"delta":{{"type":"liquidation","liquidatedNtlPos":"10.0","accountValue":"1.0","leverageType":"Cross","liquidatedPositions":[{{"coin":"BTC","szi":0.5}}]}}}}}}"#
    );
    let events = [float_amount, bad_user.into(), two_keys.into(), bad_rate, nested].map(|i| event(&i));
    let parsed = parse_misc_line(&line(&events)).unwrap();
    assert!(parsed.events.is_empty());
    assert_eq!(parsed.skipped.len(), 5);
    assert!(parsed.skipped.iter().all(|s| !s.unknown_kind), "{:?}", parsed.skipped);
}

#[test]
fn a_malformed_line_is_refused_whole() {
    for bad in [
        "",
        "{",
        r#"{"local_time":"x","block_time":"2025-11-05T16:09:18.466557521","block_number":1,"events":[]}"#,
        r#"{"block_time":"2025-11-05T16:09:18.466557521","block_number":1,"events":[]}"#,
        &line(&[String::from("[1,2]")])[..10],
    ] {
        assert!(parse_misc_line(bad).is_err(), "{bad:?}");
    }
    // An event that is not even an object costs only that event.
    let parsed = parse_misc_line(&line(&[String::from("[1,2]")])).unwrap();
    assert_eq!(parsed.skipped.len(), 1);
}

#[test]
fn signed_decimals_are_exact_and_canonical() {
    assert_eq!(Signed::parse("-0.0").unwrap().to_string(), "0.0");
    assert_eq!(Signed::parse("-12.50").unwrap().to_string(), "-12.5");
    assert!(Signed::parse("--1").is_none());
    assert!(Signed::parse("1e3").is_none());
    assert!(Signed::parse("").is_none());
    assert!(is_decimal("-0.00000987654321") && is_decimal("3") && !is_decimal("-") && !is_decimal("1."));
}
