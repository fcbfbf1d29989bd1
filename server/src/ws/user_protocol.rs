//! Subscription requests of the per-user channels (orderUpdates, userFills, userEvents) and the official types
//! a node-fed server cannot serve.
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
    Ok(Want::User(user, ch, aggregate))
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
    fn users_match_in_any_case() {
        let a = "0x5eaac7c475b1fad85701f02c4e9e796a53f94bd5";
        let lower = want("orderUpdates", &map(serde_json::json!({"user": a}))).unwrap().unwrap();
        let upper = want("orderUpdates", &map(serde_json::json!({"user": a.to_uppercase().replace("0X", "0x")})));
        assert_eq!(lower, upper.unwrap().unwrap());
        assert_eq!(lower, Want::User(Address::parse(a).unwrap(), UserChannel::Orders, false));
        let fills = want("userFills", &map(serde_json::json!({"user": a, "aggregateByTime": true}))).unwrap();
        assert_eq!(fills.unwrap(), Want::User(Address::parse(a).unwrap(), UserChannel::Fills, true));
        assert!(want("userEvents", &map(serde_json::json!({"user": "0x12"}))).unwrap().is_err());
        assert!(want("userFills", &map(serde_json::json!({"user": a, "aggregateByTime": 1}))).unwrap().is_err());
        assert!(want("l2Book", &map(serde_json::json!({}))).is_none());
    }
}
