//! Info requests: `l2Book` answered from our books (over HTTP `POST /info` and the socket's `post`), every other
//! type passed through to the node's info server, so SDKs that call `meta` or `spotMeta` at start-up work
//! against us unchanged.

use std::sync::Arc;

use serde_json::Value;

use crate::book::l2::{L2Params, LevelAgg, aggregate};
use crate::ingest::live::Shared;
use crate::node::Side;
use crate::node::time::nanos_to_millis;
use crate::publish::json::l2_book_data;
use crate::ws::protocol::DEFAULT_LEVELS;

/// Where non-l2Book info requests go.
#[derive(Clone, Debug)]
pub struct Passthrough {
    pub client: reqwest::Client,
    pub url: String,
}

/// An answer: HTTP status and JSON body.
pub type Answer = (u16, Value);

/// Answers one info request body.
pub async fn answer(shared: &Arc<Shared>, pass: Option<&Passthrough>, body: &Value) -> Answer {
    match body.get("type").and_then(Value::as_str) {
        Some("l2Book") => {
            let (shared, body) = (shared.clone(), body.clone());
            match tokio::task::spawn_blocking(move || l2_book(&shared, &body)).await {
                Ok(a) => a,
                Err(e) => (500, Value::String(format!("l2Book failed: {e}"))),
            }
        }
        Some(kind @ ("openOrders" | "frontendOpenOrders")) => {
            let (shared, body, frontend) = (shared.clone(), body.clone(), kind == "frontendOpenOrders");
            match tokio::task::spawn_blocking(move || super::user_info::open_orders(&shared, &body, frontend)).await {
                Ok(a) => a,
                Err(e) => (500, Value::String(format!("{kind} failed: {e}"))),
            }
        }
        Some(_) => match pass {
            Some(p) => forward(p, body).await,
            None => (400, Value::String("hlbook answers only l2Book here (no node info server configured)".into())),
        },
        None => (422, Value::String("Failed to deserialize the JSON body into the target type".into())),
    }
}

/// `{"coin","time","levels"}` of the current books, or null for an unknown coin.
fn l2_book(shared: &Shared, body: &Value) -> Answer {
    let Some(coin) = body.get("coin").and_then(Value::as_str) else {
        return (422, Value::String("l2Book needs a coin".into()));
    };
    let int = |k: &str| body.get(k).and_then(Value::as_u64).and_then(|n| u8::try_from(n).ok());
    let depth = body.get("nLevels").and_then(Value::as_u64).map_or(DEFAULT_LEVELS, |n| n as usize);
    let params = match L2Params::new(int("nSigFigs"), int("mantissa"), depth) {
        Ok(p) => p,
        Err(e) => return (422, Value::String(e.to_string())),
    };
    let mut sides = [Vec::new(), Vec::new()];
    let (time, found) = {
        let books = shared.books.read();
        let Some(book) = books.coin(coin) else { return (200, Value::Null) };
        for side in [Side::Bid, Side::Ask] {
            let levels = book.levels(side).map(|(px, l)| LevelAgg { px, sz: l.sz, n: l.n });
            aggregate(side, levels, &params, None, &mut sides[side.index()]);
        }
        (nanos_to_millis(books.block_time()), true)
    };
    debug_assert!(found);
    let bytes = l2_book_data(coin, time, &sides[0], &sides[1]);
    match serde_json::from_slice(&bytes) {
        Ok(v) => (200, v),
        Err(e) => (500, Value::String(e.to_string())),
    }
}

async fn forward(p: &Passthrough, body: &Value) -> Answer {
    let sent = p.client.post(&p.url).json(body).send().await;
    let resp = match sent {
        Ok(r) => r,
        Err(e) => return (502, Value::String(format!("node info server unreachable: {e}"))),
    };
    let status = resp.status().as_u16();
    match resp.bytes().await {
        Ok(b) => {
            (status, serde_json::from_slice(&b).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&b).into())))
        }
        Err(e) => (502, Value::String(format!("node info server: {e}"))),
    }
}
