//! Info requests (HTTP `POST /info` and the socket's `post`): `l2Book`, `openOrders`/`frontendOpenOrders` answered
//! from our books, `candleSnapshot` from the node's fills files (`candle_info`), the read-only
//! market types SDKs ask at start-up passed to the node's info server (`passthrough`), everything else refused
//! with its type named, so no client can make the node write or do work it was not meant to do for strangers.
//! Every request first takes one of its client's places (`info_gate`).

use std::net::IpAddr;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::Semaphore;

pub use super::info_gate::Answer;
pub use super::passthrough::Passthrough;
use crate::book::buckets::l2_levels;
use crate::book::l2::L2Params;
use crate::node::time::nanos_to_millis;
use crate::publish::Hub;
use crate::publish::json::l2_book_data;
use crate::state::Shared;
use crate::ws::WsContext;
use crate::ws::info_gate::Place;
use crate::ws::protocol::DEFAULT_LEVELS;

/// Local answers computed at once, per kind, whoever asks: each walks the books under their read lock, so a flood
/// of them cannot hold ingest's write lock back or fill the blocking pool (candleSnapshot has its own, in
/// `candle_info`).
static L2_BOOKS: Semaphore = Semaphore::const_new(2);
static OPEN_ORDERS: Semaphore = Semaphore::const_new(2);

/// Answers one info request body from a client at `ip`. Every type passes the client's places at the gate
/// first (a passed-through one only when it goes to the node), so no type lets one client queue unbounded work.
pub async fn answer(ctx: &WsContext, ip: IpAddr, body: &Value) -> Answer {
    match body.get("type").and_then(Value::as_str) {
        Some(kind @ ("candleSnapshot" | "l2Book" | "openOrders" | "frontendOpenOrders")) => {
            match ctx.info_gate.enter(ip).await {
                Ok(place) => local(&ctx.hub, kind, body, place).await,
                Err(refused) => refused,
            }
        }
        Some(kind) => match &ctx.passthrough {
            Some(p) if p.allows(kind) => p.ask(&ctx.info_gate, ip, body).await,
            Some(_) => Answer::text(400, &refused(kind, "it is not one of server.info_types")),
            None => Answer::text(400, &refused(kind, "no node info server is configured")),
        },
        None => Answer::text(422, "Failed to deserialize the JSON body into the target type"),
    }
}

/// Answers a type served here, holding the client's `place` until the work ends.
async fn local(hub: &Arc<Hub>, kind: &str, body: &Value, place: Place) -> Answer {
    if kind == "candleSnapshot" {
        return super::candle_info::candle_snapshot(hub, body, place).await;
    }
    // The blocking work gets its own copies: it runs on even if the client goes away.
    let (shared, owned) = (hub.state().clone(), body.clone());
    if kind == "l2Book" {
        return place.work_blocking(&L2_BOOKS, kind, move || l2_book(&shared, &owned)).await;
    }
    let frontend = kind == "frontendOpenOrders";
    place
        .work_blocking(&OPEN_ORDERS, kind, move || {
            let (status, v) = super::user_info::open_orders(&shared, &owned, frontend);
            Answer { status, json: Bytes::from(v.to_string()) }
        })
        .await
}

/// Why a type is not answered, naming it.
fn refused(kind: &str, why: &str) -> String {
    let kind = Value::String(kind.chars().take(100).collect());
    format!(
        "hlbook does not serve info type {kind}: it answers l2Book from its books and passes only read-only market types to the node, and {why}"
    )
}

/// `{"coin","time","levels"}` of the current books, or null for an unknown coin.
fn l2_book(shared: &Shared, body: &Value) -> Answer {
    let Some(coin) = body.get("coin").and_then(Value::as_str) else {
        return Answer::text(422, "l2Book needs a coin");
    };
    let int = |k: &str| body.get(k).and_then(Value::as_u64).and_then(|n| u8::try_from(n).ok());
    let depth = body.get("nLevels").and_then(Value::as_u64).map_or(DEFAULT_LEVELS, |n| n as usize);
    let params = match L2Params::new(int("nSigFigs"), int("mantissa"), depth) {
        Ok(p) => p,
        Err(e) => return Answer::text(422, &e.to_string()),
    };
    let mut sides = [Vec::new(), Vec::new()];
    let time = {
        let books = shared.books();
        let Some(book) = books.coin(coin) else { return Answer { status: 200, json: Bytes::from_static(b"null") } };
        // The publisher's build: coarse shapes from running bucket totals (a shape no subscriber wants is dropped
        // again by the publisher's next pass).
        l2_levels(book, &params, &mut sides);
        // The levels are at the diffs line's height, which may be ahead of the last complete block.
        nanos_to_millis(books.l2_block_time_of(coin))
    };
    Answer { status: 200, json: Bytes::from(l2_book_data(coin, time, &sides[0], &sides[1])) }
}
