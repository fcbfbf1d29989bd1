//! Line parse throughput on the capture's by-block lines, against serde_json into owned Strings in the same run.

#[path = "../../server/tests/common/mod.rs"]
mod common;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::sync::Arc;

use hlbook::node::{Address, NodeParser, Stream, Watched};

/// The baseline: the whole status event into owned Strings, as a straightforward parser would.
#[allow(dead_code)]
#[derive(serde::Deserialize)]
struct OwnedLine {
    local_time: String,
    block_time: String,
    block_number: u64,
    events: Vec<OwnedStatus>,
}

#[allow(dead_code)]
#[derive(serde::Deserialize)]
struct OwnedStatus {
    time: String,
    user: String,
    hash: Option<String>,
    status: String,
    order: OwnedOrder,
}

#[allow(dead_code)]
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct OwnedOrder {
    coin: String,
    side: String,
    limit_px: String,
    sz: String,
    oid: u64,
    timestamp: u64,
    trigger_condition: String,
    is_trigger: bool,
    trigger_px: String,
    is_position_tpsl: bool,
    reduce_only: bool,
    order_type: String,
    orig_sz: String,
    tif: Option<String>,
    cloid: Option<String>,
}

fn bench(c: &mut Criterion) {
    let Some(cap) = common::unpack() else { return };
    for (stream, dir) in [
        (Stream::Statuses, "node_order_statuses_by_block"),
        (Stream::Diffs, "node_raw_book_diffs_by_block"),
        (Stream::Fills, "node_fills_by_block"),
    ] {
        let text = std::fs::read_to_string(cap.node_dir.join(dir).join("hourly/20260505/17")).expect("capture file");
        let lines: Vec<&str> = text.lines().collect();
        let mut g = c.benchmark_group(format!("parse_{}", stream.name()));
        g.throughput(Throughput::Bytes(text.len() as u64));
        g.sample_size(20);
        g.bench_function("hlbook", |b| {
            let mut p = NodeParser::new();
            b.iter(|| {
                for l in &lines {
                    std::hint::black_box(p.parse(stream, l).expect("parses"));
                }
            });
        });
        if stream == Stream::Statuses {
            // The live parser: with a watch set that is empty (nobody follows a user) and with 100 followed users
            // (the capture's 100 busiest, so their rejections are decoded).
            for (name, users) in [("hlbook_0_users", 0), ("hlbook_100_users", 100)] {
                let watched = Arc::new(Watched::new());
                for u in busiest_users(&lines, users) {
                    watched.add(u);
                }
                g.bench_function(name, |b| {
                    let mut p = NodeParser::with_watched(watched.clone());
                    b.iter(|| {
                        for l in &lines {
                            std::hint::black_box(p.parse(stream, l).expect("parses"));
                        }
                    });
                });
            }
            g.bench_function("serde_json_owned_strings", |b| {
                b.iter(|| {
                    for l in &lines {
                        std::hint::black_box(serde_json::from_str::<OwnedLine>(l).expect("parses"));
                    }
                });
            });
        }
        g.finish();
    }
}

/// The `n` users with the most status events.
fn busiest_users(lines: &[&str], n: usize) -> Vec<Address> {
    let mut counts = std::collections::HashMap::<String, usize>::new();
    for l in lines {
        let v: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
        for ev in v["events"].as_array().into_iter().flatten() {
            *counts.entry(ev["user"].as_str().unwrap_or_default().to_string()).or_default() += 1;
        }
    }
    let mut by_count: Vec<(String, usize)> = counts.into_iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    by_count.into_iter().take(n).filter_map(|(u, _)| Address::parse(&u)).collect()
}

criterion_group!(benches, bench);
criterion_main!(benches);
