//! Subscription requests of the per-user channels (orderUpdates, userFills, userEvents, userFundings,
//! userNonFundingLedgerUpdates, userTwapSliceFills, userTwapHistory) and the official types a node-fed server
//! cannot serve.
//!
//! Addresses are matched case-insensitively (they are parsed into bytes); the ack echoes the client's own string,
//! which clients compare case-insensitively or not at all.

use serde_json::{Map, Value};

use crate::node::Address;
use crate::publish::Want;
use crate::publish::users::UserChannel;

/// The `Want` of a per-user subscription type, `None` when `kind` is not one.
pub fn want(kind: &str, sub: &Map<String, Value>) -> Option<Result<Want, String>> {
    let ch = match kind {
        "orderUpdates" => UserChannel::Orders,
        "userFills" => UserChannel::Fills,
        // An older docs revision called it `user`; accepting both costs nothing.
        "userEvents" | "user" => UserChannel::Events,
        "userFundings" => UserChannel::Fundings,
        "userNonFundingLedgerUpdates" => UserChannel::Ledger,
        "userTwapSliceFills" => UserChannel::TwapSlices,
        "userTwapHistory" => UserChannel::TwapHistory,
        _ => return None,
    };
    Some(parse(ch, sub))
}

fn parse(ch: UserChannel, sub: &Map<String, Value>) -> Result<Want, String> {
    let user = user(sub)?;
    let aggregate = match (ch, sub.get("aggregateByTime")) {
        (_, None | Some(Value::Null)) => false,
        (UserChannel::Fills, Some(Value::Bool(b))) => *b,
        (UserChannel::Fills, Some(_)) => return Err("aggregateByTime must be true or false".into()),
        (_, Some(_)) => return Err("aggregateByTime applies to userFills only".into()),
    };
    Ok(Want::User { user, channel: ch, aggregate_by_time: aggregate })
}

/// Official subscription types that a server fed by a node's book, status and fills files cannot serve, and why.
const NOT_SERVED: &[(&str, &str)] = &[
    ("webData2", "it needs account and asset-context state"),
    ("webData3", "it needs account and asset-context state"),
    ("notification", "notifications are not in the node's files"),
    ("clearinghouseState", "account state is not in the node's files"),
    ("allDexsClearinghouseState", "account state is not in the node's files"),
    ("spotState", "account state is not in the node's files"),
    ("openOrders", "it is not built here"),
    ("twapStates", "node_twap_statuses says when a TWAP starts and ends, not how far a running one has got"),
    ("activeAssetCtx", "asset contexts are not in the node's files"),
    ("activeAssetData", "account state is not in the node's files"),
    ("allDexsAssetCtxs", "asset contexts are not in the node's files"),
    ("userHistoricalOrders", "order history is not kept here"),
    ("explorerBlock", "explorer data is not in the node's files"),
    ("explorerTxs", "explorer data is not in the node's files"),
];

/// The error text for an official type this server does not serve, naming the type and echoing the request (valid
/// JSON); `None` for a type that is not official.
pub fn not_served(kind: &str, echo: &Value) -> Option<String> {
    let (kind, why) = NOT_SERVED.iter().find(|(k, _)| *k == kind)?;
    Some(format!("Subscription type {kind} is not served by hlbook, a server fed by a node's files ({why}): {echo}"))
}

/// `user`: `0x` and 40 hex digits, either case.
pub fn user(sub: &Map<String, Value>) -> Result<Address, String> {
    let text = sub.get("user").and_then(Value::as_str).ok_or("user must be an address string")?;
    let lower = text.to_ascii_lowercase();
    Address::parse(&lower).ok_or_else(|| "user must be 0x and 40 hex digits".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn official_types_not_served_say_so_with_a_json_echo() {
        let echo = serde_json::json!({"type": "webData2", "user": "0x01"});
        let text = not_served("webData2", &echo).unwrap();
        assert!(text.starts_with("Subscription type webData2 is not served by hlbook"), "{text}");
        let span = &text[text.find('{').unwrap()..=text.rfind('}').unwrap()];
        assert_eq!(serde_json::from_str::<Value>(span).unwrap(), echo);
        assert!(not_served("madeUp", &echo).is_none());
    }

    #[test]
    fn users_match_in_any_case() {
        let a = "0x5eaac7c475b1fad85701f02c4e9e796a53f94bd5";
        let lower = want("orderUpdates", &map(serde_json::json!({"user": a}))).unwrap().unwrap();
        let upper = want("orderUpdates", &map(serde_json::json!({"user": a.to_uppercase().replace("0X", "0x")})));
        assert_eq!(lower, upper.unwrap().unwrap());
        assert_eq!(
            lower,
            Want::User { user: Address::parse(a).unwrap(), channel: UserChannel::Orders, aggregate_by_time: false }
        );
        let fills = want("userFills", &map(serde_json::json!({"user": a, "aggregateByTime": true}))).unwrap();
        assert_eq!(
            fills.unwrap(),
            Want::User { user: Address::parse(a).unwrap(), channel: UserChannel::Fills, aggregate_by_time: true }
        );
        assert!(want("userEvents", &map(serde_json::json!({"user": "0x12"}))).unwrap().is_err());
        assert!(want("userFills", &map(serde_json::json!({"user": a, "aggregateByTime": 1}))).unwrap().is_err());
        assert!(want("l2Book", &map(serde_json::json!({}))).is_none());
        let ledger = want("userNonFundingLedgerUpdates", &map(serde_json::json!({"user": a}))).unwrap().unwrap();
        assert_eq!(
            ledger,
            Want::User { user: Address::parse(a).unwrap(), channel: UserChannel::Ledger, aggregate_by_time: false }
        );
        assert!(not_served("userFundings", &serde_json::json!({})).is_none(), "served from misc_events");
        let twaps = want("userTwapHistory", &map(serde_json::json!({"user": a}))).unwrap().unwrap();
        assert_eq!(
            twaps,
            Want::User {
                user: Address::parse(a).unwrap(),
                channel: UserChannel::TwapHistory,
                aggregate_by_time: false
            }
        );
        assert!(not_served("userTwapHistory", &serde_json::json!({})).is_none(), "served from node_twap_statuses");
    }
}
