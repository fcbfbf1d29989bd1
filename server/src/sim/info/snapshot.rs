//! `fileSnapshot` (node mode only): the node writes its L4 books to a file on its own host, here the sim's books
//! at one height. The books are copied under the producer's lock (cheap) and serialized on a blocking thread
//! without it, so a large snapshot never stalls block production or the async runtime.
//!
//! With `includeTriggerOrders: true` the waiting trigger orders are listed too, each after the resting orders of
//! its side, marked `"isTrigger": true` as the node's status schema marks them; with `false` (or absent) they are
//! left out, as the node leaves them out (docs hl-node-info-server.md).

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::{bad, json};
use crate::node::Side;
use crate::sim::SimShared;
use crate::sim::coins::CoinSpec;
use crate::sim::events::order_object;
use crate::sim::orders::Order;

/// A copy of the books at one height, ready to serialize.
#[derive(Debug)]
pub struct SnapshotCopy {
    pub height: u64,
    pub users: Arc<Vec<String>>,
    /// (coin, bids best first, asks best first).
    pub coins: Vec<(CoinSpec, Vec<Order>, Vec<Order>)>,
    /// Each coin's waiting trigger orders (oldest first), when asked for: beside `coins`, index for index.
    pub triggers: Vec<Vec<Order>>,
}

/// Copies the current books (with the configured mismatch while it lasts), without trigger orders.
pub fn copy_books(shared: &SimShared) -> SnapshotCopy {
    copy_books_with(shared, false)
}

/// Copies the current books, and the waiting trigger orders when `include_triggers`.
pub fn copy_books_with(shared: &SimShared, include_triggers: bool) -> SnapshotCopy {
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
    let triggers = if include_triggers {
        m.waiting.coins.iter().map(|w| w.values().cloned().collect()).collect()
    } else {
        Vec::new()
    };
    SnapshotCopy { height: st.height, users: m.users.clone(), coins, triggers }
}

/// Serializes a snapshot: `[height,[[coin,[bids,asks]],…]]` (without the height when not asked for).
pub fn serialize(snap: &SnapshotCopy, with_height: bool, out: &mut impl Write) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1 << 16);
    buf.push(b'[');
    if with_height {
        crate::sim::fmt::uint(&mut buf, snap.height);
        buf.extend_from_slice(b",[");
    }
    for (i, (spec, bids, asks)) in snap.coins.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        buf.extend_from_slice(b"[\"");
        buf.extend_from_slice(spec.name.as_bytes());
        buf.extend_from_slice(b"\",[");
        let waiting = snap.triggers.get(i).map_or(&[][..], Vec::as_slice);
        for (j, side) in [bids, asks].into_iter().enumerate() {
            if j > 0 {
                buf.push(b',');
            }
            buf.push(b'[');
            let of_side = waiting.iter().filter(|o| o.side == [Side::Bid, Side::Ask][j]);
            for (k, o) in side.iter().chain(of_side).enumerate() {
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

pub(super) async fn file_snapshot(shared: Arc<SimShared>, v: &Value) -> Response {
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
    let triggers = v.pointer("/request/includeTriggerOrders").and_then(Value::as_bool).unwrap_or(false);
    let done = tokio::task::spawn_blocking(move || {
        let snap = copy_books_with(&shared, triggers);
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
