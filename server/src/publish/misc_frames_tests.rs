use serde_json::{Value, json};

use super::*;
use crate::node::misc::parse_misc_line;

const A: &str = "0x025a744111554e57c66ba2069a8081249fbe5e11";
const B: &str = "0x1e37a337ed460039d1b15bd3bc489de789768d5e";
const H: &str = "0x4a3367a1c546233d4bad042ee5d5ba020b2a00876049420fedfc12f48449fd27";
const Z: &str = "0x0000000000000000000000000000000000000000000000000000000000000000";

fn block() -> MiscBlock {
    let funding = format!(
        r#"{{"time":"2026-05-05T09:00:00.5","hash":"{Z}","inner":{{"Funding":{{"deltas":[{{"user":"{A}","coin":"BTC","funding_amount":"-0.0125","szi":"0.50","funding_rate":"0.0000125"}}]}}}}}}"#
    );
    let transfer = format!(
        r#"{{"time":"2026-05-05T09:00:00.5","hash":"{H}","inner":{{"LedgerUpdate":{{"users":["{A}","{B}"],"delta":{{"type":"internalTransfer","usdc":"5.0","user":"{A}","destination":"{B}","fee":"0.0"}}}}}}}}"#
    );
    let line = format!(
        r#"{{"local_time":"2026-05-05T09:00:00.9","block_time":"2026-05-05T09:00:00.5","block_number":7,"events":[{funding},{transfer}]}}"#
    );
    let l = parse_misc_line(&line).unwrap();
    MiscBlock { height: 7, block_time: l.meta.block_time, events: l.events }
}

fn json(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap()
}

#[test]
fn frames_and_info_answers_have_the_official_shapes() {
    let b = block();
    let users = by_user(&b);
    let (a, bb) = (Address::parse(A).unwrap(), Address::parse(B).unwrap());
    assert_eq!(users.len(), 2);
    let ua = &users[&a];
    assert_eq!((ua.fundings.len(), ua.ledger.len(), users[&bb].fundings.len(), users[&bb].ledger.len()), (1, 1, 0, 1));
    let time = 1_777_971_600_500i64;
    let funding = json!({"time": time, "coin": "BTC", "usdc": "-0.0125", "szi": "0.5", "fundingRate": "0.0000125", "nSamples": null});
    assert_eq!(
        json(&user_fundings(&a, &ua.fundings, true)),
        json!({"channel": "userFundings", "data": {"isSnapshot": true, "user": A, "fundings": [funding]}})
    );
    assert_eq!(
        json(&user_event_funding(ua.fundings[0].0, ua.fundings[0].1)),
        json!({"channel": "user", "data": {"funding": funding}})
    );
    let delta = json!({"type": "internalTransfer", "usdc": "5.0", "user": A, "destination": B, "fee": "0.0"});
    let entry = json!({"time": time, "hash": H, "delta": delta});
    assert_eq!(
        json(&user_ledger_updates(&bb, &users[&bb].ledger, false)),
        json!({"channel": "userNonFundingLedgerUpdates", "data": {"user": B, "nonFundingLedgerUpdates": [entry.clone()]}})
    );
    assert_eq!(json(&info_ledger_updates(&ua.ledger)), json!([entry]));
    assert_eq!(
        json(&info_user_funding(&ua.fundings)),
        json!([{"time": time, "hash": Z, "delta": {"type": "funding", "coin": "BTC", "usdc": "-0.0125", "szi": "0.5", "fundingRate": "0.0000125", "nSamples": null}}])
    );
}

#[test]
fn snapshots_from_the_stores_entries_are_the_live_frames_shapes_with_is_snapshot() {
    let b = block();
    let users = by_user(&b);
    let a = Address::parse(A).unwrap();
    let ua = &users[&a];
    let stored: Vec<Vec<u8>> = ua.fundings.iter().map(|(ev, f)| funding_entry(ev, f)).collect();
    let refs: Vec<&[u8]> = stored.iter().map(Vec::as_slice).collect();
    assert_eq!(fundings_snapshot(&a, &refs), user_fundings(&a, &ua.fundings, true), "byte for byte");
    let stored: Vec<Vec<u8>> = ua.ledger.iter().map(|(ev, u)| ledger_entry(ev, u)).collect();
    let refs: Vec<&[u8]> = stored.iter().map(Vec::as_slice).collect();
    assert_eq!(ledger_snapshot(&a, &refs), user_ledger_updates(&a, &ua.ledger, true));
    assert_eq!(json(&fundings_snapshot(&a, &[b"not json".as_slice()]))["data"]["fundings"], json!([]));
}
