use super::*;
use crate::node::{Events, LineMeta};

fn line(stream: Stream, h: u64) -> Line {
    let meta = LineMeta { height: h, block_time: h as i64 * 1000, local_time: h as i64 * 1000 + 7 };
    let events = match stream {
        Stream::Diffs => Events::Diffs(vec![]),
        Stream::Statuses => Events::Statuses { kept: vec![], rejected: 2 },
        Stream::Fills => Events::Fills(vec![]),
    };
    Line { meta, events, users: Default::default() }
}

fn drain(a: &mut Assembler) -> Vec<(u64, bool)> {
    std::iter::from_fn(|| a.next_block())
        .map(|x| match x {
            Assembled::Block(b) => (b.height, true),
            Assembled::Broken { height, .. } => (height, false),
            Assembled::Line { .. } | Assembled::Fills(_) => panic!("lines are handed out only with split"),
        })
        .collect()
}

#[test]
fn split_hands_out_fills_and_diffs_lines_before_the_block() {
    let mut a = Assembler::new(Mode::ByBlock, 10).split_lines();
    a.push(Stream::Fills, line(Stream::Fills, 11));
    assert_eq!(a.next_block(), Some(Assembled::Line { height: 11, stream: Stream::Fills }));
    assert_eq!(a.next_block(), None);
    a.push(Stream::Diffs, line(Stream::Diffs, 11));
    assert_eq!(a.next_block(), Some(Assembled::Line { height: 11, stream: Stream::Diffs }));
    assert_eq!(a.pending(11).map(|b| b.node_written), Some([Some(11_007), Some(11_007), None]));
    assert_eq!(a.next_block(), None);
    a.push(Stream::Diffs, line(Stream::Diffs, 12));
    assert_eq!(a.next_block(), None, "12 waits for 11's statuses");
    a.push(Stream::Statuses, line(Stream::Statuses, 11));
    assert!(matches!(a.next_block(), Some(Assembled::Block(b)) if b.height == 11));
    // Block 12's diffs were read long ago: handed out now that 11 is done, before its fills.
    assert_eq!(a.next_block(), Some(Assembled::Line { height: 12, stream: Stream::Diffs }));
    a.push(Stream::Fills, line(Stream::Fills, 12));
    assert_eq!(a.next_block(), Some(Assembled::Line { height: 12, stream: Stream::Fills }));
    // A lost status line still breaks the block.
    a.push(Stream::Statuses, line(Stream::Statuses, 13));
    assert_eq!(a.next_block(), Some(Assembled::Broken { height: 12, missing: vec![Stream::Statuses] }));
}

#[test]
fn streaming_never_splits() {
    let mut a = Assembler::new(Mode::Streaming, 10).split_lines();
    a.push(Stream::Fills, line(Stream::Fills, 11));
    a.push(Stream::Diffs, line(Stream::Diffs, 11));
    assert_eq!(a.next_block(), None);
}

#[test]
fn by_block_waits_for_all_three_streams() {
    let mut a = Assembler::new(Mode::ByBlock, 10);
    a.push(Stream::Fills, line(Stream::Fills, 11));
    a.push(Stream::Diffs, line(Stream::Diffs, 11));
    assert_eq!(a.next_block(), None);
    a.push(Stream::Statuses, line(Stream::Statuses, 11));
    let Some(Assembled::Block(b)) = a.next_block() else { panic!("no block") };
    assert_eq!((b.height, b.rejected_statuses), (11, 2));
    assert_eq!(b.node_written, [Some(11_007); 3]);
    assert_eq!(a.emitted(), 11);
}

#[test]
fn by_block_reports_a_stream_that_skipped_a_height() {
    let mut a = Assembler::new(Mode::ByBlock, 10);
    for s in Stream::ALL {
        a.push(s, line(s, 11));
    }
    a.push(Stream::Fills, line(Stream::Fills, 12));
    a.push(Stream::Diffs, line(Stream::Diffs, 12));
    // Statuses jump from 11 to 13: its line of 12 is lost.
    a.push(Stream::Statuses, line(Stream::Statuses, 13));
    assert_eq!(a.next_block().map(|x| matches!(x, Assembled::Block(_))), Some(true));
    assert_eq!(a.next_block(), Some(Assembled::Broken { height: 12, missing: vec![Stream::Statuses] }));
    assert_eq!(a.counters().broken_blocks, 1);
}

#[test]
fn lines_at_or_below_emitted_heights_are_dropped() {
    let mut a = Assembler::new(Mode::ByBlock, 10);
    for s in Stream::ALL {
        a.push(s, line(s, 9));
        a.push(s, line(s, 11));
    }
    assert_eq!(drain(&mut a), vec![(11, true)]);
    // A restarted node re-emits 11, then goes on.
    for s in Stream::ALL {
        a.push(s, line(s, 11));
        a.push(s, line(s, 12));
        a.push(s, line(s, 12));
    }
    assert_eq!(drain(&mut a), vec![(12, true)]);
    assert_eq!(a.counters().stale_lines, 9);
}

#[test]
fn streaming_completes_a_block_when_diffs_and_statuses_move_on() {
    let mut a = Assembler::new(Mode::Streaming, 10);
    a.push(Stream::Diffs, line(Stream::Diffs, 11));
    a.push(Stream::Diffs, line(Stream::Diffs, 11));
    a.push(Stream::Statuses, line(Stream::Statuses, 11));
    a.push(Stream::Diffs, line(Stream::Diffs, 13));
    assert_eq!(a.next_block(), None, "statuses has not moved past 11");
    a.push(Stream::Statuses, line(Stream::Statuses, 14));
    // 12 had no line in any stream: an empty block keeps heights contiguous.
    // 13 waits: the diff stream has not moved past it.
    assert_eq!(drain(&mut a), vec![(11, true), (12, true)]);
    a.finish();
    assert_eq!(drain(&mut a), vec![(13, true), (14, true)]);
    assert_eq!(a.next_block(), None);
}

#[test]
fn finished_by_block_input_with_a_missing_line_is_broken() {
    let mut a = Assembler::new(Mode::ByBlock, 10);
    a.push(Stream::Diffs, line(Stream::Diffs, 11));
    a.finish();
    assert_eq!(a.next_block(), Some(Assembled::Broken { height: 11, missing: vec![Stream::Fills, Stream::Statuses] }));
    assert_eq!(a.next_block(), None);
}

#[test]
fn streaming_re_emission_of_pending_blocks_is_skipped() {
    let mut a = Assembler::new(Mode::Streaming, 10);
    let push = |a: &mut Assembler, heights: &[u64]| {
        for &h in heights {
            a.push(Stream::Diffs, line(Stream::Diffs, h));
            a.push(Stream::Statuses, line(Stream::Statuses, h));
        }
    };
    // Two lines per block for 11..=13; a restarted node then writes 12 and 13 again before going on to 14.
    push(&mut a, &[11, 11, 12, 12, 13, 13]);
    assert_eq!(drain(&mut a), vec![(11, true), (12, true)]);
    push(&mut a, &[12, 12, 13, 13, 14]);
    let blocks: Vec<_> = std::iter::from_fn(|| a.next_block()).collect();
    let Some(Assembled::Block(b13)) = blocks.first() else { panic!("13 not emitted: {blocks:?}") };
    assert_eq!(b13.height, 13);
    assert_eq!(b13.rejected_statuses, 4, "13's two status lines once, not twice");
    assert_eq!(a.counters().stale_lines, 8);
}

#[path = "assemble_lines_tests.rs"]
mod lines;
