//! Streaming at line speed on the real capture: the streaming lines applied one line at a time, as live ingest
//! may publish them, give sane books after every line and the by-block replay's books at every block end.
//!
//! "Sane" is what a trader would reject otherwise: a crossed book, or a level of size zero. It is checked by a
//! plain aggregation written here (every resting order summed per price), not by the engine's own L2 code.

mod common;

use std::collections::BTreeMap;

use hlbook::book::{Books, Outcome};
use hlbook::ingest::assemble::{Assembled, Assembler};
use hlbook::node::{Mode, NodeParser, Side, Stream};

/// Per side, price → (total size, orders), summed from every resting order of every coin.
fn plain_levels(books: &Books) -> Vec<[BTreeMap<u64, (u128, u32)>; 2]> {
    let mut out = Vec::new();
    for coin in books.coin_names() {
        let book = books.coin(&coin).expect("listed");
        let mut sides = [BTreeMap::new(), BTreeMap::new()];
        for (i, side) in [Side::Bid, Side::Ask].into_iter().enumerate() {
            for o in book.orders(side) {
                let e = sides[i].entry(o.px.0).or_insert((0, 0));
                e.0 += u128::from(o.sz.0);
                e.1 += 1;
            }
        }
        out.push(sides);
    }
    out
}

/// What a trader would reject in `books`, if anything.
fn insane(books: &Books) -> Option<String> {
    for [bids, asks] in plain_levels(books) {
        if let Some((px, _)) = bids.iter().chain(&asks).find(|(_, (sz, _))| *sz == 0) {
            return Some(format!("a level of size 0 at {px}"));
        }
        if let (Some(bid), Some(ask)) = (bids.keys().next_back(), asks.keys().next())
            && bid >= ask
        {
            return Some(format!("crossed: bid {bid} >= ask {ask}"));
        }
    }
    None
}

#[test]
fn every_streaming_line_leaves_sane_books_and_every_block_end_equals_by_block() {
    let Some(cap) = common::unpack() else { return };
    // The by-block replay's digest at every height.
    let mut books = hlbook::book::snapshot::load_books(&cap.snapshot).expect("snapshot");
    let mut by_block = BTreeMap::new();
    let mut before = BTreeMap::new();
    before.insert(books.height(), common::l4_digest(&books));
    hlbook::ingest::replay::replay(&mut books, &cap.node_dir, Mode::ByBlock, |step| {
        by_block.insert(step.block.height, common::l4_digest(step.books));
    })
    .expect("by-block replays");
    before.extend(by_block.iter().map(|(h, d)| (*h, *d)));

    let mut books = hlbook::book::snapshot::load_books(&cap.snapshot).expect("snapshot");
    let mut a = Assembler::new(Mode::Streaming, books.height()).streaming_lines();
    let mut parser = NodeParser::default();
    let (mut taken, mut parts, mut ends, mut fills) = (0usize, 0u32, 0u32, 0usize);
    let lines = common::lines_by_local_time(&cap.node_dir);
    // The capture's README: 1,332 diff, 41,592 status and 22 fill lines in the streaming archive.
    assert_eq!(lines.len(), 1332 + 41_592 + 22);
    for (stream, _, text) in &lines {
        a.push(*stream, parser.parse(*stream, text).expect("capture line parses"));
        while let Some(next) = a.next_block() {
            match next {
                Assembled::Line { height, stream: Stream::Diffs } => {
                    // One line at a time: the finest split live ingest can publish.
                    let block = a.pending(height).expect("pending");
                    let out = books.apply_diffs_part(height, block.block_time, &block.diffs[taken..]);
                    assert!(matches!(&out, Outcome::Applied(x) if x.inconsistencies.is_empty()), "{height}: {out:?}");
                    taken = block.diffs.len();
                    parts += 1;
                    assert_eq!(insane(&books), None, "after a diffs line of block {height}");
                    // A reader of complete books may take the parts back: the books of the block before, exactly.
                    let mut back = books.clone();
                    assert!(back.roll_back(), "{height}: an open block to roll back");
                    assert_eq!(Some(&common::l4_digest(&back)), before.get(&(height - 1)), "rolled back in {height}");
                }
                Assembled::Block(b) => {
                    let out = books.apply_diffs_part(b.height, b.block_time, &b.diffs[taken.min(b.diffs.len())..]);
                    assert!(matches!(out, Outcome::Applied(_)), "{}: {out:?}", b.height);
                    let out = books.apply_statuses(b.height, &b.statuses);
                    assert!(matches!(&out, Outcome::Applied(x) if x.inconsistencies.is_empty()), "{out:?}");
                    assert_eq!(Some(&common::l4_digest(&books)), by_block.get(&b.height), "block {}", b.height);
                    taken = 0;
                    ends += 1;
                }
                // Statuses lines go to the publisher for orderUpdates; the books take them at the block's end.
                Assembled::Line { stream: Stream::Statuses, .. } => {}
                Assembled::Fills(l) => {
                    let hlbook::node::Events::Fills(f) = l.events else { panic!("a fills line") };
                    fills += f.len();
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    }
    // The last block is never closed (no later line), as on a live node.
    assert_eq!(ends, 50);
    // A part per diffs line (the open last block's too), but once two lines of a block came while the block before
    // was still open, and went out as one part when it closed.
    assert_eq!(parts, 1331);
    assert_eq!(fills, 22);
    assert_eq!(books.counters().inconsistencies, 0);
}
