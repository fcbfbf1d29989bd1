//! The client side of the official WebSocket protocol: parsing requests, normalising subscriptions, and the exact
//! texts of acks and errors (../shared/docs/hl-ws-api.md in the repository's parent, summarised in docs/api.md).
//!
//! Clients differ in spacing, key order, explicit nulls and extra fields, so requests are parsed as JSON values and
//! matched after normalisation (absent == null, mantissa 1 == null). Acks echo the client's own subscription object
//! with the defaults added, and every `{…}` an error text carries is valid JSON, because some clients parse it.

use serde_json::{Map, Value};

use crate::book::l2::{L2Params, MAX_LEVELS};
use crate::node::Coin;
use crate::publish::candles::Interval;
use crate::publish::{L2Key, Want};

/// Official depth, and with `"fast":true`.
pub const DEFAULT_LEVELS: usize = 20;
pub const FAST_LEVELS: usize = 5;

/// A parsed client request.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    Ping,
    Subscribe(Subscription),
    Unsubscribe(Subscription),
    Post { id: Value, request: Value },
}

/// A valid subscription: what it asks for, the object to echo, and where it resumes.
#[derive(Debug, Clone, PartialEq)]
pub struct Subscription {
    pub want: Want,
    pub echo: Echo,
    /// Our extension (docs/api.md "Resume"): the last height the client processed; the server replays every frame
    /// of a later height first. Not part of the subscription's identity, so not in its echo.
    pub since: Option<u64>,
}

/// The object acks and errors echo: the client's subscription (its keys, order and value types) with the defaults
/// added, kept as compact JSON text. A subscription keeps its echo for life, and a parsed object of many small
/// values costs twenty times its text (a 4 KiB message of small arrays was ~100 KB of `Value`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Echo(Box<str>);

impl Echo {
    fn new(object: Map<String, Value>) -> Echo {
        Echo(Value::Object(object).to_string().into_boxed_str())
    }

    /// Bytes held for it.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The object parsed again, for the rare reader of one of its fields (userFills' `aggregateByTime`).
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.0).unwrap_or(Value::Null)
    }
}

impl std::fmt::Display for Echo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Subscription {
    /// The channel name, for counters.
    pub fn channel(&self) -> &'static str {
        match self.want {
            Want::L2(_) => "l2Book",
            Want::Bbo(_) => "bbo",
            Want::Mids(_) => "allMids",
            Want::Trades(_) => "trades",
            Want::L4(_) => "l4Book",
            Want::Candle(..) => "candle",
            Want::Liquidations => "liquidations",
            Want::User { channel, .. } => channel.kind(),
        }
    }
}

/// The largest subscribe or unsubscribe message taken, in bytes. Official ones are under 200 bytes; a
/// subscription lives as long as its connection and keeps the client's object to echo, so extra fields must not be
/// a way to make the server hold memory.
pub const MAX_SUBSCRIPTION_BYTES: usize = 4096;

/// The largest echo kept. Written compactly an echo is rarely longer than the message it came in (numbers such as
/// `1e2` come back as `100.0`); beyond this it is refused like a message over the cap.
pub const MAX_ECHO_BYTES: usize = 2 * MAX_SUBSCRIPTION_BYTES;

/// Parses one text frame. Errors are the full error frame text.
pub fn parse(text: &str) -> Result<Request, String> {
    let Ok(v) = serde_json::from_str::<Value>(text) else { return Err(parse_error(text, None)) };
    let bad = |why: Option<&str>| parse_error(&v.to_string(), why);
    let method = v.get("method").and_then(Value::as_str).ok_or_else(|| bad(None))?;
    match method {
        "ping" => Ok(Request::Ping),
        "subscribe" | "unsubscribe" if text.len() > MAX_SUBSCRIPTION_BYTES => Err(error(&format!(
            "{method} message too large: {} bytes, at most {MAX_SUBSCRIPTION_BYTES}; nothing was kept",
            text.len()
        ))),
        "subscribe" | "unsubscribe" => {
            let sub = v.get("subscription").and_then(Value::as_object).ok_or_else(|| bad(None))?;
            let kind = sub.get("type").and_then(Value::as_str).unwrap_or_default();
            if let Some(text) = super::user_protocol::not_served(kind, &Value::Object(sub.clone())) {
                return Err(text);
            }
            let s = subscription(sub).map_err(|why| bad(Some(&why)))?;
            if s.echo.len() > MAX_ECHO_BYTES {
                return Err(error(&format!(
                    "{method} message too large: its subscription is {} bytes written compactly, at most \
                     {MAX_ECHO_BYTES}; nothing was kept",
                    s.echo.len()
                )));
            }
            Ok(if method == "subscribe" { Request::Subscribe(s) } else { Request::Unsubscribe(s) })
        }
        "post" => {
            let id = v.get("id").cloned().ok_or_else(|| bad(Some("post needs an id")))?;
            let request = v.get("request").cloned().ok_or_else(|| bad(Some("post needs a request")))?;
            Ok(Request::Post { id, request })
        }
        _ => Err(bad(None)),
    }
}

/// `Error parsing JSON into valid websocket request: <frame>`, with an optional reason after it. A frame that is
/// not JSON is echoed with its braces replaced, so the text never carries a `{…}` span that is not valid JSON.
pub fn parse_error(frame: &str, why: Option<&str>) -> String {
    const MAX_ECHO: usize = 1000;
    let echo = if serde_json::from_str::<Value>(frame).is_ok() && frame.len() <= MAX_ECHO {
        frame.to_string()
    } else {
        let mut cut = frame.len().min(MAX_ECHO);
        while !frame.is_char_boundary(cut) {
            cut -= 1;
        }
        frame[..cut].replace('{', "(").replace('}', ")")
    };
    match why {
        Some(w) => format!("Error parsing JSON into valid websocket request: {echo} ({w})"),
        None => format!("Error parsing JSON into valid websocket request: {echo}"),
    }
}

/// Client text quoted inside an error reason, with braces replaced so it cannot open or close a JSON span.
fn quoted(s: &str) -> String {
    format!("{s:?}").replace('{', "(").replace('}', ")")
}

fn subscription(sub: &Map<String, Value>) -> Result<Subscription, String> {
    let kind = sub.get("type").and_then(Value::as_str).ok_or("subscription needs a type")?;
    let mut echo = sub.clone();
    let since = match echo.remove("since") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_u64().ok_or("since must be a block height (a non-negative integer)")?),
    };
    let want = match kind {
        "l2Book" => {
            let coin = coin(sub)?;
            let sig = small_int(sub, "nSigFigs")?;
            let mantissa = small_int(sub, "mantissa")?;
            let fast = match sub.get("fast") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => return Err("fast must be true or false".into()),
            };
            let depth = match sub.get("nLevels") {
                None | Some(Value::Null) if fast => FAST_LEVELS,
                None | Some(Value::Null) => DEFAULT_LEVELS,
                Some(v) => v
                    .as_u64()
                    .filter(|n| (1..=MAX_LEVELS as u64).contains(n))
                    .ok_or(format!("nLevels must be an integer from 1 to {MAX_LEVELS}"))?
                    as usize,
            };
            let params = L2Params::new(sig, mantissa, depth).map_err(|e| e.to_string())?;
            echo.entry("nSigFigs").or_insert(Value::Null);
            echo.entry("mantissa").or_insert(Value::Null);
            Want::L2(L2Key { coin, params })
        }
        "trades" => Want::Trades(coin(sub)?),
        "bbo" => Want::Bbo(coin(sub)?),
        "l4Book" => Want::L4(coin(sub)?),
        "liquidations" => Want::Liquidations,
        "candle" => {
            let interval = sub.get("interval").and_then(Value::as_str).and_then(Interval::parse);
            let names = Interval::ALL.map(Interval::as_str).join(" ");
            Want::Candle(coin(sub)?, interval.ok_or(format!("interval must be one of {names}"))?)
        }
        "allMids" => match sub.get("dex") {
            None | Some(Value::Null) => Want::Mids(None),
            Some(Value::String(d)) if d.is_empty() => Want::Mids(None),
            Some(Value::String(d)) => Want::Mids(Some(Coin::from(d.as_str()))),
            Some(_) => return Err("dex must be a string".into()),
        },
        other => match super::user_protocol::want(other, sub) {
            Some(w) => w?,
            None => return Err(format!("unsupported subscription type {}", quoted(other))),
        },
    };
    Ok(Subscription { want, echo: Echo::new(echo), since })
}

fn coin(sub: &Map<String, Value>) -> Result<Coin, String> {
    match sub.get("coin") {
        Some(Value::String(c)) if !c.is_empty() => Ok(Coin::from(c.as_str())),
        _ => Err("coin must be a non-empty string".into()),
    }
}

fn small_int(sub: &Map<String, Value>, key: &str) -> Result<Option<u8>, String> {
    match sub.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().and_then(|n| u8::try_from(n).ok()).map(Some).ok_or(format!("{key} must be an integer")),
    }
}

/// `{"channel":"subscriptionResponse","data":{"method":…,"subscription":…}}`.
pub fn ack(method: &str, echo: &Echo) -> String {
    let method = Value::from(method);
    format!(r#"{{"channel":"subscriptionResponse","data":{{"method":{method},"subscription":{echo}}}}}"#)
}

/// `{"channel":"error","data":<text>}`.
pub fn error(text: &str) -> String {
    serde_json::json!({"channel": "error", "data": text}).to_string()
}

/// `{"channel":"hlbookNotice","data":<text>}`: news the client did not provoke (a loss of blocks). Not an
/// `error`: ccxt rejects every pending future of a connection on any error but `Already subscribed`, and every
/// official client ignores a channel it does not know.
pub fn notice(text: &str) -> String {
    serde_json::json!({"channel": "hlbookNotice", "data": text}).to_string()
}

pub fn already_subscribed(echo: &Echo) -> String {
    error(&format!("Already subscribed: {echo}"))
}

/// A subscription to a coin (or dex) the books do not have; the echo is the request's own object.
pub fn unknown_subject(echo: &Echo) -> String {
    error(&format!("Invalid subscription: hlbook's books have no such coin or dex: {echo}"))
}

pub fn already_unsubscribed(echo: &Echo) -> String {
    error(&format!("Already unsubscribed: {echo}"))
}

pub const PONG: &str = r#"{"channel":"pong"}"#;

/// `{"channel":"post","data":{"id":…,"response":…}}`.
pub fn post_response(id: &Value, response: Value) -> String {
    serde_json::json!({"channel": "post", "data": {"id": id, "response": response}}).to_string()
}

/// A successful info answer, `data` being the JSON bytes of the answer as they are (never parsed and re-written).
pub fn post_info_response(id: &Value, kind: &Value, data: &[u8]) -> String {
    let mut out = format!(
        r#"{{"channel":"post","data":{{"id":{id},"response":{{"type":"info","payload":{{"type":{kind},"data":"#
    );
    out.push_str(&String::from_utf8_lossy(data));
    out.push_str("}}}}");
    out
}

pub fn post_error(id: &Value, text: &str) -> String {
    post_response(id, serde_json::json!({"type": "error", "payload": text}))
}

#[cfg(test)]
#[path = "protocol_tests.rs"]
mod tests;
