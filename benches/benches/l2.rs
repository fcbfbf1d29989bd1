//! L2 builds on the capture's 51k-order BTC book: each variant at 100 levels a side, and all seven together, as the
//! publisher builds them (coarse shapes from maintained bucket totals, `book::buckets`) and, for reference, by
//! aggregating over every level (`walk_…`, how every coarse frame was built before). `l2_shapes_per_block` is the
//! publisher's L2 work for one block when a client subscribed N distinct shapes (issue #43): each depth serialized
//! on its own (`old`, how the publisher did it) against one serialization per aggregation that every depth is cut
//! from (`new`, `publish::l2_frames`).

#[path = "../../server/tests/common/mod.rs"]
mod common;

use criterion::{Criterion, criterion_group, criterion_main};
use hlbook::book::CoinBook;
use hlbook::book::buckets::l2_levels;
use hlbook::book::l2::{L2Params, LevelAgg, VARIANTS, aggregate, write_l2_book_json};
use hlbook::book::snapshot::load_books;
use hlbook::node::Side;
use hlbook::publish::json::l2_book;
use hlbook::publish::l2_frames::L2Json;

/// What a frame costs the publisher: the maintained levels, then the JSON.
fn build(book: &CoinBook, params: &L2Params, levels: &mut [Vec<LevelAgg>; 2], json: &mut Vec<u8>) {
    l2_levels(book, params, levels);
    json.clear();
    write_l2_book_json(json, book.coin(), 1_778_002_753_024, &levels[0], &levels[1]);
}

/// The same frame by walking the levels, without maintained buckets.
fn build_walk(book: &CoinBook, params: &L2Params, levels: &mut [Vec<LevelAgg>; 2], json: &mut Vec<u8>) {
    for side in [Side::Bid, Side::Ask] {
        let running = book.levels(side).map(|(px, l)| LevelAgg { px, sz: l.sz, n: l.n });
        aggregate(side, running, params, None, &mut levels[side.index()]);
    }
    json.clear();
    write_l2_book_json(json, book.coin(), 1_778_002_753_024, &levels[0], &levels[1]);
}

fn bench(c: &mut Criterion) {
    let Some(cap) = common::unpack() else { return };
    let books = load_books(&cap.snapshot).expect("snapshot loads");
    let book = books.coin("BTC").expect("BTC book");
    let mut g = c.benchmark_group("l2_btc_51k_orders_100_levels");
    let mut levels = [Vec::new(), Vec::new()];
    let mut json = Vec::with_capacity(1 << 14);
    for (sig, m) in VARIANTS {
        let params = L2Params::new(sig, m, 100).expect("valid");
        let name = format!("sig{}_m{}", sig.map_or("full".into(), |s| s.to_string()), m.unwrap_or(1));
        g.bench_function(&name, |b| b.iter(|| build(book, &params, &mut levels, &mut json)));
        g.bench_function(format!("walk_{name}"), |b| b.iter(|| build_walk(book, &params, &mut levels, &mut json)));
    }
    for (sig, m) in [(None, None), (Some(2), None)] {
        let params = L2Params::new(sig, m, 100).expect("valid");
        g.bench_function(format!("aggregate_only_sig{sig:?}"), |b| {
            b.iter(|| {
                for side in [Side::Bid, Side::Ask] {
                    let running = book.levels(side).map(|(px, l)| LevelAgg { px, sz: l.sz, n: l.n });
                    aggregate(side, running, &params, None, &mut levels[side.index()]);
                }
            });
        });
    }
    g.bench_function("json_only_100_levels", |b| {
        let params = L2Params::new(None, None, 100).expect("valid");
        build(book, &params, &mut levels, &mut json);
        b.iter(|| {
            json.clear();
            write_l2_book_json(&mut json, book.coin(), 1, &levels[0], &levels[1]);
        });
    });
    println!("levels: bids {} asks {}", book.levels(Side::Bid).count(), book.levels(Side::Ask).count());
    let all: Vec<L2Params> = VARIANTS.iter().map(|&(s, m)| L2Params::new(s, m, 100).expect("valid")).collect();
    g.bench_function("all_7_variants", |b| {
        b.iter(|| {
            for p in &all {
                build(book, p, &mut levels, &mut json);
            }
        });
    });
    // What maintenance adds to applying a diff: one order in and out at the best bid, without and with every
    // coarse shape maintained.
    let mut owned = book.clone();
    let mut order = owned.orders(Side::Bid).next().expect("a bid").clone();
    order.oid = u64::MAX;
    for with_shapes in [false, true] {
        if with_shapes {
            for p in &all {
                l2_levels(&owned, p, &mut levels);
            }
        }
        let shapes = owned.buckets().len();
        g.bench_function(format!("insert_remove_one_order_{shapes}_shapes"), |b| {
            b.iter(|| {
                owned.insert(order.clone(), None, None);
                owned.remove(order.oid, order.side, order.px).expect("rests");
            });
        });
    }
    g.finish();
}

/// N distinct shapes as a flood asks for them: every aggregation, then every depth from 100 down, then the next
/// coin (the capture holds BTC alone, so at most 700). Grouped by (coin, aggregation) with their depths, as the publisher's `Wanted` holds them.
fn flood(books: &hlbook::book::Books, n: usize) -> Vec<(&CoinBook, L2Params, Vec<usize>)> {
    let mut coins: Vec<&CoinBook> = books.books().collect();
    coins.sort_by_key(|b| std::cmp::Reverse(b.len()));
    let mut groups: Vec<(&CoinBook, L2Params, Vec<usize>)> = Vec::new();
    for i in 0..n {
        let (coin, rest) = (coins[i / 700], i % 700);
        let (sig, m) = VARIANTS[rest % 7];
        let depth = 100 - rest / 7;
        let params = L2Params::new(sig, m, 100).expect("valid");
        match groups.iter_mut().find(|g| std::ptr::eq(g.0, coin) && g.1 == params) {
            Some(g) => g.2.push(depth),
            None => groups.push((coin, params, vec![depth])),
        }
    }
    groups
}

/// One block's L2 frames of `groups`: each aggregation built once at its deepest depth (as before), then every
/// depth serialized on its own (`cut` false) or cut from one serialization (`cut` true).
fn frames(groups: &[(&CoinBook, L2Params, Vec<usize>)], cut: bool, levels: &mut [Vec<LevelAgg>; 2]) -> usize {
    let mut bytes = 0;
    for (book, params, depths) in groups {
        l2_levels(book, params, levels);
        let all = cut.then(|| L2Json::new(book.coin(), 1_778_002_753_024, &levels[0], &levels[1]));
        for &d in depths {
            let json = if let Some(all) = &all {
                all.depth(d)
            } else {
                let [b, a] = [0, 1].map(|i| &levels[i][..levels[i].len().min(d)]);
                l2_book(book.coin(), 1_778_002_753_024, b, a)
            };
            bytes += json.len();
        }
    }
    bytes
}

fn bench_shapes(c: &mut Criterion) {
    let Some(cap) = common::unpack() else { return };
    let books = load_books(&cap.snapshot).expect("snapshot loads");
    let mut g = c.benchmark_group("l2_shapes_per_block");
    let mut levels = [Vec::new(), Vec::new()];
    for n in [1, 10, 100, 700] {
        let groups = flood(&books, n);
        assert_eq!(frames(&groups, true, &mut levels), frames(&groups, false, &mut levels), "same frames");
        // Alternated, so drift from other work on the machine falls on both.
        for (name, cut) in [("old", false), ("new", true)] {
            g.bench_function(format!("{n}_shapes_{name}"), |b| b.iter(|| frames(&groups, cut, &mut levels)));
        }
    }
    g.finish();
}

criterion_group!(benches, bench, bench_shapes);
criterion_main!(benches);
