//! Info requests (HTTP `POST /info` and the socket's `post`): who answers each type, and the refusals.
//!
//! - **hlbook itself** (`SERVED_HERE`), from its books and store: l2Book, allMids and recentTrades
//!   (`market_info`), userFills and userFillsByTime (`fills_info`), userFunding and userNonFundingLedgerUpdates
//!   (`events_info`), twapHistory (`twap_info`), candleSnapshot (`candle_info`), our
//!   extension tradesByHeight (`trades_info`: no node or upstream knows it, so it is never passed on), orderStatus
//!   for an order resting in the books, and openOrders/frontendOpenOrders when no node answers them
//!   (`user_info`). Where hlbook cannot be sure of a whole answer (a user the store does not keep, an order not
//!   in its books, a time before the store), it does not answer: the request goes upstream, or is refused.
//! - **The node's info server**: `server.info_types`, by default every read type a node serves. openOrders and
//!   frontendOpenOrders go there first (the node's own answer), and are answered here, trigger orders included,
//!   when the node does not answer them.
//! - **The upstream** (`server.upstream_info_url`, off by default): every other read type.
//! - **Refused**, 422 with plain text that says why and names the setting that would serve it, as the exchange
//!   refuses a request it cannot serve (its clients turn that into their own error type). `fileSnapshot`, which
//!   makes the node write, is never passed anywhere.
//!
//! Every request first spends its client IP's weight (`info_weight`, 429 past it), then takes one of the IP's
//! places at the gate (`info_gate`) for any work it causes.

use std::net::IpAddr;
use std::sync::{Arc, LazyLock};

use serde_json::Value;

use super::fair_slots::FairSlots;
pub use super::info_gate::{Answer, Local};
pub use super::passthrough::Passthrough;
use super::{market_info, user_info};
use crate::ws::WsContext;
use crate::ws::info_gate::Place;

/// The types hlbook answers from its own books and store.
pub const SERVED_HERE: &[&str] = &[
    "l2Book",
    "allMids",
    "recentTrades",
    "candleSnapshot",
    "tradesByHeight",
    "userFills",
    "userFillsByTime",
    "userTwapSliceFills",
    "userFunding",
    "userNonFundingLedgerUpdates",
    "twapHistory",
    "orderStatus",
    "openOrders",
    "frontendOpenOrders",
];

/// Answered by the node when it serves them: the node's own state; ours (books and trigger orders) otherwise.
const NODE_FIRST: &[&str] = &["openOrders", "frontendOpenOrders"];

/// Local answers computed at once, per kind, whoever asks: each walks the books while ingest may wait, so a flood
/// of them cannot hold ingest's write lock back or fill the blocking pool (candleSnapshot, tradesByHeight and the
/// fills reads take history turns instead). A freed turn goes to the waiting client IP that holds the fewest, and a request waits
/// at most `info_timeout_ms` for one, so one IP's flood neither starves another's requests nor queues for ever.
pub(super) static BOOK_WALKS: LazyLock<Arc<FairSlots>> = LazyLock::new(|| FairSlots::new(2));
pub(super) static ORDER_WALKS: LazyLock<Arc<FairSlots>> = LazyLock::new(|| FairSlots::new(2));

/// Answers one info request body from a client at `ip`.
pub async fn answer(ctx: &WsContext, ip: IpAddr, body: &Value) -> Answer {
    let Some(kind) = body.get("type").and_then(Value::as_str) else {
        return Answer::text(422, "Failed to deserialize the JSON body into the target type: missing field `type`");
    };
    if let Err(refused) = ctx.info_weight().spend(ip, kind) {
        return refused;
    }
    let answer = route(ctx, ip, kind, body).await;
    ctx.info_weight().charge_items(ip, kind, &answer);
    answer
}

async fn route(ctx: &WsContext, ip: IpAddr, kind: &str, body: &Value) -> Answer {
    if crate::config::WRITE_INFO_TYPES.contains(&kind) {
        return refuse(kind, "it makes the node write, and no client may make it do that");
    }
    let node = ctx.passthrough().filter(|p| p.allows(kind));
    if let Some(node) = node.filter(|_| !SERVED_HERE.contains(&kind) || NODE_FIRST.contains(&kind)) {
        return node.ask(ctx.info_gate(), ip, body).await;
    }
    if SERVED_HERE.contains(&kind) {
        let place = match ctx.info_gate().enter(ip).await {
            Ok(p) => p,
            Err(refused) => return refused,
        };
        match local(ctx, kind, body, place).await {
            Local::Answer(a) => return a,
            Local::Unsure(why) => return upstream_or_refuse(ctx, ip, kind, body, &why).await,
        }
    }
    let why = match ctx.passthrough() {
        Some(_) => "neither hlbook nor the node's info server answers it".to_string(),
        None if crate::config::NODE_INFO_TYPES.contains(&kind) => {
            "a node's info server answers it, and none is configured here (ingest.info_url)".to_string()
        }
        None => "neither hlbook nor a node's info server answers it".to_string(),
    };
    upstream_or_refuse(ctx, ip, kind, body, &why).await
}

/// Sends a request hlbook cannot answer to the upstream, or refuses it for `why`.
async fn upstream_or_refuse(ctx: &WsContext, ip: IpAddr, kind: &str, body: &Value, why: &str) -> Answer {
    match ctx.upstream() {
        Some(up) if up.allows(kind) => up.ask(ctx.info_gate(), ip, body).await,
        _ => refuse(kind, &format!("{why}; set server.upstream_info_url to send it to an info server that does")),
    }
}

/// The exchange's refusal of a request it cannot serve: 422 and plain text, naming the type.
fn refuse(kind: &str, why: &str) -> Answer {
    let kind = Value::String(kind.chars().take(100).collect());
    Answer::text(422, &format!("hlbook does not answer info type {kind}: {why}"))
}

/// Answers a type served here, holding the client's `place` until the work ends.
async fn local(ctx: &WsContext, kind: &str, body: &Value, place: Place) -> Local {
    let hub = ctx.hub();
    if kind == "candleSnapshot" {
        return super::candle_info::candle_snapshot(hub, body, place).await;
    }
    if kind == "tradesByHeight" {
        return super::trades_info::trades_by_height(hub, body, place).await;
    }
    if matches!(kind, "userFills" | "userFillsByTime" | "userTwapSliceFills") {
        return super::fills_info::answer(hub, kind, body, place).await;
    }
    if let Some(k) = ["userFunding", "userNonFundingLedgerUpdates"].into_iter().find(|k| *k == kind) {
        return super::events_info::answer(hub, k, body, place).await;
    }
    if kind == "twapHistory" {
        return super::twap_info::answer(hub, body, place).await;
    }
    // The blocking work gets its own copies: it runs on even if the client goes away.
    let (shared, owned) = (hub.shared().clone(), body.clone());
    let done = match kind {
        "l2Book" => {
            place.work_blocking(&BOOK_WALKS, kind, move || Local::Answer(market_info::l2_book(&shared, &owned))).await
        }
        "allMids" => {
            place.work_blocking(&BOOK_WALKS, kind, move || Local::Answer(market_info::all_mids(&shared, &owned))).await
        }
        "recentTrades" => return market_info::recent_trades(hub, body),
        "orderStatus" => {
            place.work_blocking(&ORDER_WALKS, kind, move || user_info::order_status(&shared, &owned)).await
        }
        _ => {
            let frontend = kind == "frontendOpenOrders";
            let work = move || Local::Answer(user_info::open_orders(&shared, &owned, frontend));
            place.work_blocking(&ORDER_WALKS, kind, work).await
        }
    };
    done.unwrap_or_else(Local::Answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hlbook_answers_no_type_that_writes_and_the_node_first_types_are_its_own() {
        for t in crate::config::WRITE_INFO_TYPES {
            assert!(!SERVED_HERE.contains(t));
        }
        for t in NODE_FIRST {
            assert!(SERVED_HERE.contains(t) && crate::config::NODE_INFO_TYPES.contains(t), "{t}");
        }
        // Types hlbook answers and a node does not: never passed to the node, however info_types is set.
        for t in [
            "l2Book",
            "allMids",
            "recentTrades",
            "userFills",
            "userFillsByTime",
            "userTwapSliceFills",
            "userFunding",
            "userNonFundingLedgerUpdates",
            "twapHistory",
            "candleSnapshot",
            "tradesByHeight",
        ] {
            assert!(!crate::config::NODE_INFO_TYPES.contains(&t), "{t}");
        }
        let refused = refuse("metaAndAssetCtxs", "why");
        assert_eq!((refused.status, refused.text), (422, true));
        assert!(refused.message().contains("\"metaAndAssetCtxs\""));
    }
}
