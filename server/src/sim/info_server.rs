//! The node's info server (`POST /info`): meta, spotMeta, metaAndAssetCtxs, spotMetaAndAssetCtxs and perpDexs
//! (the market answers clients ask for at start-up, see `coins` and `ctxs`), and fileSnapshot, which writes the
//! sim's books as an L4 snapshot file. It also answers `candleSnapshot` as the official API would for the time
//! before the simulator (a real node does not): synthetic candles, for tests of hlbook's history seeding.
//!
//! The books are copied under the producer's lock (cheap) and serialized on a blocking thread without it, so a
//! large snapshot never stalls block production or the async runtime.
//!
//! For tests of what reaches the node, `GET /sim/info-stats` counts the requests by type and the most that were
//! in flight at once, and `--info-delay-ms` makes every market answer slow, as a busy node's would be.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::Value;

use super::SimShared;
use super::coins::{self, CoinSpec};
use super::ctxs;
use super::events::order_object;
use super::orders::Order;
use crate::node::Side;

/// A copy of the books at one height, ready to serialize.
#[derive(Debug)]
pub struct SnapshotCopy {
    pub height: u64,
    pub users: Arc<Vec<String>>,
    /// (coin, bids best first, asks best first).
    pub coins: Vec<(CoinSpec, Vec<Order>, Vec<Order>)>,
}

/// Copies the current books (with the configured mismatch while it lasts).
pub fn copy_books(shared: &SimShared) -> SnapshotCopy {
    let mut st = shared.state.lock();
    let mismatch = (st.mismatch_left > 0).then(|| shared.mismatch.clone()).flatten();
    if mismatch.is_some() {
        st.mismatch_left -= 1;
    }
    let m = &st.market;
    let coins = m
        .coins
        .iter()
        .zip(&m.books)
        .map(|(spec, book)| {
            let mut bids: Vec<Order> = book.orders(Side::Bid).cloned().collect();
            let mut asks: Vec<Order> = book.orders(Side::Ask).cloned().collect();
            if mismatch.as_deref() == Some(spec.name) {
                if !bids.is_empty() {
                    bids.remove(0);
                }
                if let Some(a) = asks.first_mut() {
                    a.sz = (a.sz / 2).max(1);
                }
            }
            (spec.clone(), bids, asks)
        })
        .collect();
    SnapshotCopy { height: st.height, users: m.users.clone(), coins }
}

/// Serializes a snapshot: `[height,[[coin,[bids,asks]],…]]` (without the height when not asked for).
pub fn serialize(snap: &SnapshotCopy, with_height: bool, out: &mut impl Write) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1 << 16);
    buf.push(b'[');
    if with_height {
        super::fmt::uint(&mut buf, snap.height);
        buf.extend_from_slice(b",[");
    }
    for (i, (spec, bids, asks)) in snap.coins.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        buf.extend_from_slice(b"[\"");
        buf.extend_from_slice(spec.name.as_bytes());
        buf.extend_from_slice(b"\",[");
        for (j, side) in [bids, asks].into_iter().enumerate() {
            if j > 0 {
                buf.push(b',');
            }
            buf.push(b'[');
            for (k, o) in side.iter().enumerate() {
                if k > 0 {
                    buf.push(b',');
                }
                buf.extend_from_slice(b"[\"");
                buf.extend_from_slice(snap.users[o.user as usize].as_bytes());
                buf.extend_from_slice(b"\",");
                order_object(&mut buf, spec, o, o.sz);
                buf.push(b']');
                if buf.len() > 1 << 16 {
                    out.write_all(&buf)?;
                    buf.clear();
                }
            }
            buf.push(b']');
        }
        buf.extend_from_slice(b"]]");
    }
    buf.push(b']');
    if with_height {
        buf.push(b']');
    }
    out.write_all(&buf)?;
    out.flush()
}

/// Writes the snapshot at `path` via a temp file in the same folder and a rename, so readers never see half.
pub fn write_snapshot(snap: &SnapshotCopy, with_height: bool, path: &Path) -> std::io::Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp: PathBuf = path.with_file_name(format!(".{name}.tmp{}", std::process::id()));
    {
        let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(&tmp)?);
        serialize(snap, with_height, &mut w)?;
    }
    std::fs::rename(&tmp, path)
}

pub fn router(shared: Arc<SimShared>) -> Router {
    router_with(shared, Duration::ZERO)
}

/// The info server with every market answer held back `delay`.
pub fn router_with(shared: Arc<SimShared>, delay: Duration) -> Router {
    let state = InfoState { shared, delay, stats: Arc::default() };
    Router::new().route("/info", post(info)).route("/sim/info-stats", get(stats)).with_state(state)
}

#[derive(Clone, Debug)]
struct InfoState {
    shared: Arc<SimShared>,
    delay: Duration,
    stats: Arc<InfoStats>,
}

/// What reached the info server.
#[derive(Debug, Default)]
struct InfoStats {
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    by_type: parking_lot::Mutex<std::collections::BTreeMap<String, u64>>,
}

/// Counts one request in flight while alive.
struct InFlight<'a>(&'a InfoStats);

impl<'a> InFlight<'a> {
    fn new(stats: &'a InfoStats, kind: &str) -> InFlight<'a> {
        *stats.by_type.lock().entry(kind.to_string()).or_default() += 1;
        let now = stats.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        stats.max_in_flight.fetch_max(now, Ordering::SeqCst);
        InFlight(stats)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn stats(State(s): State<InfoState>) -> Response {
    let by_type = s.stats.by_type.lock().clone();
    json(serde_json::json!({"max_in_flight": s.stats.max_in_flight.load(Ordering::SeqCst), "by_type": by_type}))
}

fn bad(msg: impl Into<String>) -> Response {
    (StatusCode::BAD_REQUEST, msg.into()).into_response()
}

fn json(v: Value) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], v.to_string()).into_response()
}

async fn info(State(s): State<InfoState>, body: Bytes) -> Response {
    let v: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return bad(format!("invalid JSON body: {e}")),
    };
    let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
    let _counted = InFlight::new(&s.stats, kind);
    if !s.delay.is_zero() && kind != "fileSnapshot" {
        tokio::time::sleep(s.delay).await;
    }
    let shared = s.shared;
    match v.get("type").and_then(Value::as_str) {
        Some("meta") => json(coins::meta(&shared.coins, v.get("dex").and_then(Value::as_str))),
        Some("spotMeta") => json(coins::spot_meta(&shared.coins)),
        Some("metaAndAssetCtxs") => {
            let dex = v.get("dex").and_then(Value::as_str);
            json(ctxs::meta_and_asset_ctxs(&shared.coins, &ctxs::tops(&shared), dex))
        }
        Some("spotMetaAndAssetCtxs") => json(ctxs::spot_meta_and_asset_ctxs(&shared.coins, &ctxs::tops(&shared))),
        Some("perpDexs") => json(ctxs::perp_dexs(&shared.coins)),
        Some("fileSnapshot") => file_snapshot(shared, &v).await,
        Some("candleSnapshot") => candle_snapshot(&v),
        Some(other) => bad(format!("unsupported info type {other:?}")),
        None => bad("missing \"type\""),
    }
}

/// Candles a `candleSnapshot` answers at most: the newest of the range.
const PAST_CANDLES: i64 = 100;

/// The newest `PAST_CANDLES` buckets of the range that closed by `endTime`, each one trade at 100.0 (1M: none):
/// what the official API would answer for a market older than the simulator.
fn candle_snapshot(v: &Value) -> Response {
    let req = v.get("req");
    let field = |k: &str| req.and_then(|r| r.get(k));
    let (Some(coin), Some(interval), Some(start)) = (
        field("coin").and_then(Value::as_str),
        field("interval").and_then(Value::as_str),
        field("startTime").and_then(Value::as_i64),
    ) else {
        return (StatusCode::UNPROCESSABLE_ENTITY, "Failed to deserialize the JSON body").into_response();
    };
    let end = field("endTime").and_then(Value::as_i64).unwrap_or(i64::MAX / 2);
    let minutes = match interval {
        "1m" => 1,
        "3m" => 3,
        "5m" => 5,
        "15m" => 15,
        "30m" => 30,
        "1h" => 60,
        "2h" => 120,
        "4h" => 240,
        "8h" => 480,
        "12h" => 720,
        "1d" => 1440,
        "3d" => 4320,
        "1w" => 10_080,
        _ => return json(Value::Array(Vec::new())),
    };
    let len = minutes * 60_000;
    let last = (end + 1).div_euclid(len) * len - len;
    let first = (start.div_euclid(len) * len).max(last - (PAST_CANDLES - 1) * len).max(0);
    let candles = (0..).map(|k| first + k * len).take_while(|t| *t <= last).map(|t| {
        serde_json::json!({"t": t, "T": t + len - 1, "s": coin, "i": interval, "o": "100.0", "c": "100.0",
            "h": "100.0", "l": "100.0", "v": "1.0", "n": 1})
    });
    json(Value::Array(candles.collect()))
}

async fn file_snapshot(shared: Arc<SimShared>, v: &Value) -> Response {
    let kind = v.pointer("/request/type").and_then(Value::as_str);
    if kind != Some("l4Snapshots") {
        return bad("fileSnapshot needs request.type \"l4Snapshots\"");
    }
    let Some(path) = v.get("outPath").and_then(Value::as_str).map(PathBuf::from) else {
        return bad("fileSnapshot needs a string outPath");
    };
    if !path.is_absolute() || path.file_name().is_none() {
        return bad("outPath must be an absolute file path");
    }
    let with_height = v.get("includeHeightInOutput").and_then(Value::as_bool).unwrap_or(false);
    let done = tokio::task::spawn_blocking(move || {
        let snap = copy_books(&shared);
        tracing::info!(height = snap.height, path = %path.display(), "writing fileSnapshot");
        write_snapshot(&snap, with_height, &path)
    })
    .await;
    match done {
        Ok(Ok(())) => json(Value::Null),
        Ok(Err(e)) => (StatusCode::INTERNAL_SERVER_ERROR, format!("writing snapshot: {e}")).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("snapshot task failed: {e}")).into_response(),
    }
}
