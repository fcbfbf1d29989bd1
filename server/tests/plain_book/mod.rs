//! The capture's BTC book rebuilt by the test alone, from the node's own files with serde_json and nothing of
//! hlbook's: the snapshot's orders, then each by-block diffs line in order (`new` adds an order with its size,
//! `update` sets its size, `remove` drops it), as /work/shared/docs/hl-node-data.md describes the diffs. The golden
//! numbers of capture.rs and replay_cli.rs are checked against it, so they come from the files, not from the engine
//! they test (the capture's README states the same numbers, from whoever published it).
//!
//! Decimals are kept exact as integer counts of 1e-8 (the node writes at most 8 decimals).

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use serde_json::Value;

/// The by-block diffs file of the capture (its README lists the one hour it spans).
const DIFFS: &str = "node_raw_book_diffs_by_block/hourly/20260505/17";

/// A decimal string as a count of 1e-8.
fn e8(s: &Value) -> i128 {
    let s = s.as_str().unwrap_or_else(|| panic!("a decimal string: {s}"));
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    assert!(frac.len() <= 8 && !int.starts_with('-'), "{s}");
    format!("{int}{frac:0<8}").parse().unwrap_or_else(|_| panic!("a decimal: {s}"))
}

/// A count of 1e-8 written as the node writes decimals: no trailing zeros, at least one decimal.
fn show_e8(v: i128) -> String {
    let s = format!("{}.{:08}", v / 100_000_000, v % 100_000_000);
    let t = s.trim_end_matches('0');
    if t.ends_with('.') { format!("{t}0") } else { t.to_string() }
}

#[derive(Debug)]
pub struct PlainBook {
    /// oid → (bid, px, sz), both in 1e-8.
    orders: HashMap<u64, (bool, i128, i128)>,
}

impl PlainBook {
    /// BTC's orders in the (gzipped) snapshot.
    pub fn snapshot(snapshot: &Path) -> PlainBook {
        let mut text = String::new();
        let file = std::fs::File::open(snapshot).expect("the snapshot");
        flate2::read::GzDecoder::new(file).read_to_string(&mut text).expect("a gzipped snapshot");
        let v: Value = serde_json::from_str(&text).expect("snapshot JSON");
        let mut orders = HashMap::new();
        // `[height, [[coin, [bids, asks]], …]]`, each order `[user, {oid, limitPx, sz, …}]`.
        for coin in v[1].as_array().expect("coins").iter().filter(|c| c[0] == "BTC") {
            for (side, bid) in [(0, true), (1, false)] {
                for o in coin[1][side].as_array().expect("orders") {
                    let o = &o[1];
                    orders.insert(o["oid"].as_u64().expect("oid"), (bid, e8(&o["limitPx"]), e8(&o["sz"])));
                }
            }
        }
        PlainBook { orders }
    }

    /// The book after the capture's last block: the snapshot with every by-block diffs line applied.
    pub fn at_end(snapshot: &Path, node_dir: &Path) -> PlainBook {
        let mut book = PlainBook::snapshot(snapshot);
        let text = std::fs::read_to_string(node_dir.join(DIFFS)).expect("the by-block diffs file");
        for line in text.lines() {
            let v: Value = serde_json::from_str(line).expect("a diffs line");
            for e in v["events"].as_array().expect("events").iter().filter(|e| e["coin"] == "BTC") {
                book.apply(e);
            }
        }
        book
    }

    fn apply(&mut self, e: &Value) {
        let oid = e["oid"].as_u64().expect("oid");
        let d = &e["raw_book_diff"];
        if d == "remove" {
            self.orders.remove(&oid).unwrap_or_else(|| panic!("remove of an unknown order: {e}"));
        } else if let Some(new) = d.get("new") {
            self.orders.insert(oid, (e["side"] == "B", e8(&e["px"]), e8(&new["sz"])));
        } else if let Some(update) = d.get("update") {
            self.orders.get_mut(&oid).unwrap_or_else(|| panic!("update of an unknown order: {e}")).2 =
                e8(&update["newSz"]);
        } else {
            panic!("a diff of no known kind: {e}");
        }
    }

    pub fn len(&self) -> usize {
        self.orders.len()
    }

    /// The best bid level: (px, total size, orders), written as the node writes decimals.
    pub fn best_bid(&self) -> (String, String, usize) {
        let bids = || self.orders.values().filter(|o| o.0);
        let px = bids().map(|o| o.1).max().expect("bids");
        let at = || bids().filter(|o| o.1 == px);
        (show_e8(px), show_e8(at().map(|o| o.2).sum()), at().count())
    }
}
