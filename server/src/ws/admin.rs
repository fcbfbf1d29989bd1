//! The operator's endpoints, on their own listener (`server.admin_listen`, loopback by default): `/status`,
//! `/metrics`, `/l4snapshot` and the status page at `/`, plus `/health` with every counter and source. They are
//! not for clients: `/l4snapshot` names every resting order's user, `/health` the sources' paths and addresses,
//! and all of them cost more than a client should be able to ask for.
//!
//! `/l4snapshot` takes the books coin by coin, each under a brief read lock (a shared copy-on-write book, O(1)), so
//! ingest never waits for the export; coins that blocks changed meanwhile are taken again under one lock at the
//! end, so the document is still the books at a single height. One export runs at a time.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rustc_hash::FxHashSet;
use serde::Deserialize;

use super::http::{AppState, health, health_detail};
use crate::book::export::write_snapshot;
use crate::book::{Books, CoinBook};
use crate::node::Coin;
use crate::state::Shared;

pub fn router(state: AppState) -> Router {
    let token = state.ws.cfg().token.clone();
    Router::new()
        .route("/", get(status_page))
        .route("/metrics", get(metrics))
        .route("/status", get(status))
        .route("/l4snapshot", get(l4snapshot))
        .layer(axum::middleware::from_fn(move |req: Request, next: Next| {
            let ok = super::auth::authorized(&token, req.uri().query(), req.headers());
            async move { if ok { next.run(req).await } else { super::auth::unauthorized() } }
        }))
        // Added after the token layer, so it stays open: systemd's and the balancers' checks carry no token.
        .route("/health", get(admin_health))
        .with_state(state)
}

/// `/health` with the operator's detail (source paths, NATS addresses, counters) for a request that carries
/// `server.token` (or any, when none is set); the public answer for one that does not.
async fn admin_health(State(s): State<AppState>, req: Request) -> Response {
    if super::auth::authorized(&s.ws.cfg().token, req.uri().query(), req.headers()) {
        health_detail(State(s)).await
    } else {
        health(State(s)).await
    }
}

/// Prometheus/OpenMetrics text.
async fn metrics(State(s): State<AppState>) -> Response {
    let body = crate::audit::metrics::render(&s.metrics);
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], body).into_response()
}

#[derive(Debug, Deserialize)]
struct StatusQuery {
    /// Also return the last N settled blocks' stage values.
    blocks: Option<usize>,
    /// Also return the bytes the store's tables take (walks them all).
    store_tables: Option<u8>,
}

/// State, stage percentiles over the last minute, connections (docs/api.md).
async fn status(State(s): State<AppState>, Query(q): Query<StatusQuery>) -> Response {
    let mut body = crate::audit::status::status(&*s.ws, q.blocks.unwrap_or(0));
    // The history store's state and backfill progress (docs/api.md, "/status").
    if let Some(o) = body.as_object_mut() {
        let mut store = s.ws.hub().store().map_or(serde_json::json!({"state": "off"}), |st| st.status_json());
        if let (Some(st), Some(1)) = (s.ws.hub().store(), q.store_tables) {
            let st = st.clone();
            let tables = tokio::task::spawn_blocking(move || st.table_bytes()).await.ok().and_then(Result::ok);
            store["tables"] = tables.unwrap_or_default();
        }
        o.insert("store".into(), store);
    }
    axum::Json(body).into_response()
}

/// The status page: one self-contained HTML file that charts `/status` (no build step, nothing fetched from
/// elsewhere).
async fn status_page() -> Response {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8"), (header::CACHE_CONTROL, "no-cache")],
        crate::audit::STATUS_PAGE,
    )
        .into_response()
}

#[derive(Debug, Deserialize)]
struct SnapshotQuery {
    /// Comma-separated coins; all when absent.
    coins: Option<String>,
}

/// Our books as `[height, [[coin, [bids, asks]], …]]`, for diffing against the node's own snapshot.
async fn l4snapshot(State(s): State<AppState>, Query(q): Query<SnapshotQuery>) -> Response {
    let Ok(_one) = s.exports.clone().try_acquire_owned() else {
        return (StatusCode::TOO_MANY_REQUESTS, "another /l4snapshot export is running").into_response();
    };
    let coins: Option<Vec<Coin>> = q.coins.map(|c| c.split(',').map(Coin::from).collect());
    let shared = s.ws.shared().clone();
    let body = tokio::task::spawn_blocking(move || {
        let books = consistent_copy(&shared, coins.as_deref()).map_err(std::io::Error::other)?;
        let mut out = Vec::new();
        write_snapshot(&books, None, &mut out).map(|()| out)
    })
    .await;
    match body {
        Ok(Ok(bytes)) => ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        Ok(Err(e)) => (StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// Whole-book events that make copies taken before them worthless: snapshot installs and coin repairs.
fn epoch(shared: &Shared) -> (u64, u64) {
    (shared.installs(), shared.health().counters().repairs.get())
}

/// The books (or `only` those coins) at one height, taken coin by coin (shared, `Books::shared_coin`) under brief
/// read locks, each taken when no block is half-applied (whole orders only).
pub fn consistent_copy(shared: &Shared, only: Option<&[Coin]>) -> Result<Books, &'static str> {
    const TRIES: usize = 3;
    let complete = || {
        shared
            .complete_books(std::time::Duration::from_secs(5))
            .ok_or("the books are half-applied (a block's status line is awaited); try again")
    };
    for _ in 0..TRIES {
        let start = epoch(shared);
        let names = match only {
            Some(c) => c.to_vec(),
            None => complete()?.coin_names(),
        };
        // (coin, its book, the height it was copied at)
        let mut copies: Vec<(Coin, Option<Arc<CoinBook>>, u64)> = Vec::with_capacity(names.len());
        for c in names {
            let books = complete()?;
            let book = books.shared_coin(&c);
            copies.push((c, book, books.height()));
        }
        let books = complete()?;
        if epoch(shared) != start {
            continue;
        }
        let height = books.height();
        let oldest = copies.iter().map(|c| c.2).min().unwrap_or(height);
        let Some(changed) = coins_changed(shared, oldest, height) else { continue };
        for (coin, book, at) in &mut copies {
            if *at < height && changed.iter().any(|(h, c)| h > at && c == coin) {
                *book = books.shared_coin(coin);
            }
        }
        if only.is_none() {
            // Coins that appeared since the names were read (a snapshot install would have changed the epoch).
            let have: FxHashSet<Coin> = copies.iter().map(|c| c.0.clone()).collect();
            for c in books.coin_names().into_iter().filter(|c| !have.contains(c)) {
                let book = books.shared_coin(&c);
                copies.push((c, book, height));
            }
        }
        drop(books);
        return Ok(Books::from_shared(height, copies.into_iter().filter_map(|c| c.1)));
    }
    Err("the books changed under three exports in a row (snapshot installs or repairs); try again")
}

/// (height, coin) of every diff of the applied blocks in (`after`, `upto`], or None when the recent ring no
/// longer holds them all.
fn coins_changed(shared: &Shared, after: u64, upto: u64) -> Option<Vec<(u64, Coin)>> {
    if after >= upto {
        return Some(Vec::new());
    }
    let blocks = shared.blocks_after(after, upto);
    if blocks.first()?.height != after + 1 {
        return None;
    }
    Some(blocks.iter().flat_map(|b| b.diffs.iter().map(|d| (b.height, d.coin.clone()))).collect())
}
