//! `GET /status`: one JSON document for the status page and for people: state, height, per-stage percentiles
//! over the last minute, blocks a second, the stalest subscribed coins, and connection numbers; with `?blocks=N`
//! also the last N settled blocks' own stage values. "Last minute" is wall time: with no blocks it is empty
//! (0 blocks/s, no stage samples), and `newest_block_age_ms` says how old the newest settled block is.

use hdrhistogram::Histogram;
use serde_json::{Value, json};

use super::{Exposed, STAGES};
use crate::node::Stream;
use crate::node::time::now_nanos;

/// Most blocks `?blocks=N` returns (the one-minute window holds fewer at mainnet's cadence).
pub const MAX_BLOCKS: usize = 4096;

/// The document; `blocks` > 0 adds `"last_blocks"`: that many of the newest settled blocks, oldest first.
pub fn status(ctx: &dyn Exposed, blocks: usize) -> Value {
    let h = ctx.health();
    let now = now_nanos();
    let recent = ctx.stages().recent(now);
    let window = &recent.blocks;
    // `stages`: from the line that completes a block (its last); `stages_by_line`: every source line's own.
    let stages = line_stages(window, Stream::Statuses);
    let by_line: serde_json::Map<String, Value> =
        Stream::ALL.into_iter().map(|l| (l.short().to_string(), line_stages(window, l))).collect();
    // A block is counted once, by the line that completes it.
    let complete: Vec<_> = window.iter().filter(|f| f.line == Stream::Statuses).collect();
    let (block_lag, node_lag) = h.lag();
    let mut doc = json!({
        "state": h.state().as_str(),
        "height": h.height(),
        "time_ms": now / 1_000_000,
        "lag_ms": {"block": block_lag / 1_000_000, "node_write": node_lag / 1_000_000},
        "window_s": ctx.stages().window_ns() / 1_000_000_000,
        "blocks": complete.len(),
        "blocks_per_sec": recent.blocks_per_sec,
        "newest_block_age_ms": recent.newest_age_ns.map(|a| a / 1_000_000),
        "stages": stages,
        "stages_by_line": by_line,
        "stalest_coins": stalest(ctx, now),
        "sources": h.sources().to_json(),
        "race": h.sources().recent_json(),
        "disagreements": h.sources().disagreements_json(),
        "connections": ctx.connections(),
        "subscriptions_by_channel": ctx.subscriptions().into_iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
    });
    let ws = ctx.ws_counters();
    for name in ["frames_sent", "bytes_sent", "overflows", "conflated"] {
        doc[name] = json!(ws.iter().find(|c| c.name == name).map_or(0, |c| c.value));
    }
    if blocks > 0 {
        let from = window.len().saturating_sub(blocks.min(MAX_BLOCKS));
        doc["last_blocks"] = window[from..].iter().map(block).collect();
    }
    doc
}

/// Percentiles of each stage over the window's entries of `line`.
fn line_stages(window: &[super::SettledLine], line: Stream) -> Value {
    let mut stages = Vec::new();
    for (i, name) in STAGES.iter().enumerate() {
        let Ok(mut hist) = Histogram::<u64>::new_with_bounds(1, 600_000_000_000, 3) else { continue };
        for f in window.iter().filter(|f| f.line == line) {
            if let Some(v) = f.stages[i] {
                hist.saturating_record(v.max(1) as u64);
            }
        }
        let us = |p: f64| hist.value_at_quantile(p) / 1_000;
        stages.push(json!({
            "stage": name, "count": hist.len(),
            "p50_us": us(0.5), "p90_us": us(0.9), "p99_us": us(0.99), "p999_us": us(0.999), "max_us": hist.max() / 1_000,
        }));
    }
    Value::Array(stages)
}

/// One settled block: `{"height":…,"applied_ms":…,"stages_ns":{"block_to_node_write":…,…}}` (null: did not happen).
fn block(f: &super::SettledLine) -> Value {
    let stages: serde_json::Map<String, Value> =
        STAGES.iter().zip(f.stages).map(|(name, v)| (name.to_string(), json!(v))).collect();
    json!({"height": f.height, "line": f.line.short(), "applied_ms": f.applied_ns / 1_000_000, "stages_ns": stages})
}

/// Subscribed coins whose newest L2 frame describes the oldest block (quiet coins show up here too).
fn stalest(ctx: &dyn Exposed, now: i64) -> Vec<Value> {
    let mut ages: Vec<(i64, String)> = ctx.newest_l2().into_iter().map(|(coin, t)| (now - t, coin)).collect();
    ages.sort_unstable_by(|a, b| b.cmp(a));
    ages.into_iter().take(5).map(|(age, coin)| json!({"coin": coin, "age_ms": age / 1_000_000})).collect()
}
