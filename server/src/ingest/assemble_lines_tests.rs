//! Streaming lines (`Assembler::streaming_lines`): what is handed out as lines land, and what closes a block.
//! ("diffs" and "statuses": the open block has new lines of that stream.)

use super::line;
use crate::ingest::assemble::{Assembled, Assembler};
use crate::node::{Line, Mode, Stream};

fn lines_assembler() -> Assembler {
    Assembler::new(Mode::Streaming, 10).streaming_lines()
}

/// Everything `a` has ready, as (kind, height): "diffs" for a diffs line of the open block, "fills" for a fills
/// line, "block" for a whole block.
fn ready(a: &mut Assembler) -> Vec<(&'static str, u64)> {
    std::iter::from_fn(|| a.next_block())
        .map(|x| match x {
            Assembled::Line { height, stream: Stream::Diffs } => ("diffs", height),
            Assembled::Line { height, stream: Stream::Statuses } => ("statuses", height),
            Assembled::Fills(l) => ("fills", l.meta.height),
            Assembled::Block(b) => ("block", b.height),
            other => panic!("unexpected {other:?}"),
        })
        .collect()
}

#[test]
fn the_open_blocks_diffs_lines_and_every_fills_line_go_out_as_they_land() {
    let mut a = lines_assembler();
    a.push(Stream::Fills, line(Stream::Fills, 11));
    a.push(Stream::Diffs, line(Stream::Diffs, 11));
    assert_eq!(ready(&mut a), [("fills", 11), ("diffs", 11)]);
    a.push(Stream::Diffs, line(Stream::Diffs, 11));
    a.push(Stream::Diffs, line(Stream::Diffs, 11));
    assert_eq!(ready(&mut a), [("diffs", 11)], "one notice for every line read since the last");
    assert_eq!(a.pending(11).map(|b| b.node_written[Stream::Diffs.index()]), Some(Some(11_007)));
    // A fills line of the next block goes out at once: trades need no book.
    a.push(Stream::Fills, line(Stream::Fills, 12));
    assert_eq!(ready(&mut a), [("fills", 12)]);
    a.push(Stream::Statuses, line(Stream::Statuses, 12));
    a.push(Stream::Diffs, line(Stream::Diffs, 12));
    // Block 11 has no status line: it is whole once both streams moved on. Its fills are in no block.
    let got: Vec<_> = std::iter::from_fn(|| a.next_block()).collect();
    let Some(Assembled::Block(b)) = got.first() else { panic!("{got:?}") };
    assert_eq!((b.height, b.fills.len(), b.node_written[Stream::Fills.index()]), (11, 0, None));
    assert_eq!(got.get(1), Some(&Assembled::Line { height: 12, stream: Stream::Diffs }));
}

#[test]
fn a_drained_pass_after_any_later_line_closes_the_block() {
    let mut a = lines_assembler();
    a.push(Stream::Diffs, line(Stream::Diffs, 11));
    a.push(Stream::Statuses, line(Stream::Statuses, 11));
    assert_eq!(ready(&mut a), [("diffs", 11), ("statuses", 11)]);
    // Only the status stream shows 12 (no diffs in 12 yet): not whole by rule (a).
    a.push(Stream::Statuses, line(Stream::Statuses, 12));
    assert_eq!(ready(&mut a), []);
    // The pass that read 12 ends: a line of 11 written before 12's may still be unread in a stream read earlier.
    a.drained();
    assert_eq!(ready(&mut a), []);
    // A whole pass after it found every line of 11; 12 is open now, with its status line.
    a.drained();
    assert_eq!(ready(&mut a), [("block", 11), ("statuses", 12)]);
    // A restart forgets what passes proved: the lines come again.
    a.push(Stream::Statuses, line(Stream::Statuses, 13));
    a.restart(11);
    a.drained();
    a.drained();
    assert_eq!(ready(&mut a), []);
}

#[test]
fn fills_lines_are_handed_out_once_across_a_restart() {
    let mut a = lines_assembler();
    let fills = |a: &mut Assembler, hs: &[u64]| hs.iter().for_each(|&h| a.push(Stream::Fills, line(Stream::Fills, h)));
    fills(&mut a, &[11, 11, 12]);
    assert_eq!(ready(&mut a), [("fills", 11), ("fills", 11), ("fills", 12)]);
    // The source starts over after 10: 11's two lines and 12's first come again, then 12's second is new.
    a.restart(10);
    fills(&mut a, &[11, 11, 12, 12]);
    assert_eq!(ready(&mut a), [("fills", 12)]);
    assert_eq!(a.counters().stale_lines, 3);
}

/// The blocks a streaming assembler without drained passes (rule (a) only) emits for `order`, with what each
/// holds: (height, diffs lines, status lines) and the fills lines handed out.
fn feed(order: &[(Stream, u64)]) -> (Vec<(u64, usize, u32)>, Vec<u64>) {
    let mut a = lines_assembler();
    let (mut blocks, mut fills) = (Vec::new(), Vec::new());
    let mut take = |a: &mut Assembler| {
        while let Some(x) = a.next_block() {
            match x {
                Assembled::Block(b) => blocks.push((b.height, b.diffs.len(), b.rejected_statuses)),
                Assembled::Fills(l) => fills.push(l.meta.height),
                _ => {}
            }
        }
    };
    for &(s, h) in order {
        let mut l: Line = line(s, h);
        if let crate::node::Events::Diffs(d) = &mut l.events {
            d.push(crate::node::Diff {
                coin: "BTC".into(),
                user: crate::node::event::HexBytes([1; 20]),
                oid: h,
                side: crate::node::Side::Bid,
                px: crate::node::Fixed::parse("1.0").unwrap(),
                kind: crate::node::DiffKind::Remove,
            });
        }
        a.push(s, l);
        take(&mut a);
    }
    a.finish();
    take(&mut a);
    (blocks, fills)
}

#[test]
fn a_reader_held_a_whole_block_behind_changes_no_block() {
    // Blocks 11..=14, each with two lines per stream, in the node's order.
    let node: Vec<(Stream, u64)> = (11..=14)
        .flat_map(|h| {
            [Stream::Fills, Stream::Diffs, Stream::Statuses, Stream::Diffs, Stream::Statuses, Stream::Fills]
                .map(|s| (s, h))
        })
        .collect();
    let expected = feed(&node);
    assert_eq!(expected.0, [(11, 2, 4), (12, 2, 4), (13, 2, 4), (14, 2, 4)]);
    for held in Stream::ALL {
        // `held`'s lines of block h arrive only after every other stream's lines of block h + 1.
        let mut order: Vec<(Stream, u64)> = Vec::new();
        for h in 11..=15 {
            order.extend(node.iter().filter(|(s, b)| *b == h && *s != held));
            order.extend(node.iter().filter(|(s, b)| *b + 1 == h && *s == held));
        }
        assert_eq!(feed(&order), expected, "{held} held back");
    }
}

#[test]
fn fills_are_through_the_heights_below_their_newest_line_or_a_drained_pass() {
    let mut a = lines_assembler();
    assert_eq!(a.fills_through(), 0, "nothing read");
    a.push(Stream::Fills, line(Stream::Fills, 11));
    a.push(Stream::Diffs, line(Stream::Diffs, 11));
    // Both other streams moved on: block 11 is whole, yet a fills line of 11 may still be unread.
    a.push(Stream::Diffs, line(Stream::Diffs, 12));
    a.push(Stream::Statuses, line(Stream::Statuses, 12));
    assert_eq!(ready(&mut a).first(), Some(&("fills", 11)));
    assert_eq!(a.fills_through(), 10, "the fills stream is only past 10");
    a.push(Stream::Fills, line(Stream::Fills, 12));
    assert_eq!(a.fills_through(), 11, "it showed 12: every fills line of 11 came before");
    // Two drained passes since a line of 13: every line of 12 was read too.
    a.push(Stream::Statuses, line(Stream::Statuses, 13));
    a.drained();
    a.drained();
    assert_eq!(a.fills_through(), 12);
    // By-block, a block is whole with its fills line.
    assert_eq!(Assembler::new(Mode::ByBlock, 10).fills_through(), u64::MAX);
}
