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

pub use super::passthrough::{Answer, Passthrough};
use crate::book::buckets::l2_levels;
use crate::book::l2::L2Params;
use crate::node::time::nanos_to_millis;
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
    let (hub, gate) = (&ctx.hub, &ctx.info_gate);
    let local = |place| Local { place, shared: hub.shared.clone(), body: body.clone() };
    match body.get("type").and_then(Value::as_str) {
        Some("candleSnapshot") => match gate.enter(ip).await {
            Ok(place) => super::candle_info::candle_snapshot(hub, body, place).await,
            Err(refused) => refused,
        },
        Some("l2Book") => match gate.enter(ip).await {
            Ok(place) => local(place).run(&L2_BOOKS, "l2Book", l2_book).await,
            Err(refused) => refused,
        },
        Some(kind @ ("openOrders" | "frontendOpenOrders")) => match gate.enter(ip).await {
            Ok(place) => {
                let frontend = kind == "frontendOpenOrders";
                local(place)
                    .run(&OPEN_ORDERS, kind, move |shared, body| {
                        let (status, v) = super::user_info::open_orders(shared, body, frontend);
                        Answer { status, json: Bytes::from(v.to_string()) }
                    })
                    .await
            }
            Err(refused) => refused,
        },
        Some(kind) => match &ctx.passthrough {
            Some(p) if p.allows(kind) => p.ask(gate, ip, body).await,
            Some(_) => Answer::text(400, &refused(kind, "it is not one of server.info_types")),
            None => Answer::text(400, &refused(kind, "no node info server is configured")),
        },
        None => Answer::text(422, "Failed to deserialize the JSON body into the target type"),
    }
}

/// A locally answered request that holds its client's place.
struct Local {
    place: Place,
    shared: Arc<Shared>,
    body: Value,
}

impl Local {
    /// Runs `work` on the blocking pool once `turns` allows; the turn and the client's place are held until the
    /// work ends, even if the client goes away first.
    async fn run(
        self,
        turns: &'static Semaphore,
        kind: &str,
        work: impl FnOnce(&Shared, &Value) -> Answer + Send + 'static,
    ) -> Answer {
        let Ok(turn) = turns.acquire().await else { return Answer::text(503, "shutting down") };
        let Local { place, shared, body } = self;
        let done = tokio::task::spawn_blocking(move || {
            let _held = (turn, place);
            work(&shared, &body)
        });
        done.await.unwrap_or_else(|e| Answer::text(500, &format!("{kind} failed: {e}")))
    }
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
        nanos_to_millis(books.diffs_block_time())
    };
    Answer { status: 200, json: Bytes::from(l2_book_data(coin, time, &sides[0], &sides[1])) }
}
