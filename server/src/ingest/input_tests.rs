use std::io;

use super::*;
use crate::ingest::assemble::{Assembled, Assembler};
use crate::ingest::line_source::SourceCounters;

/// Lines (or refusals) handed over on the next poll: what any source would deliver.
#[derive(Debug, Default)]
struct Canned(Vec<(Stream, u64, bool)>);

impl LineSource for Canned {
    fn poll(&mut self, _: Duration, on: &mut dyn FnMut(SourceEvent<'_>)) -> io::Result<()> {
        for (stream, height, too_long) in self.0.drain(..) {
            if too_long {
                on(SourceEvent::TooLong { stream, height: Some(height), bytes: 1 << 31 });
                continue;
            }
            let line = format!(
                r#"{{"local_time":"2026-05-05T17:39:13.3","block_time":"2026-05-05T17:39:13.02","block_number":{height},"events":[]}}"#
            );
            on(SourceEvent::Line(stream, line.as_bytes()));
        }
        Ok(())
    }
    fn restart_after(&mut self, _: u64) {}
    fn set_resume_after(&mut self, _: u64) {}
    fn counters(&self) -> SourceCounters {
        SourceCounters::default()
    }
}

fn one(lines: Vec<(Stream, u64, bool)>, health: &Health) -> Input {
    Input::One(Box::new(One {
        spec: Source::Files("/test".into()),
        source: Box::new(Canned(lines)),
        parser: NodeParser::new(),
        entry: health.sources().add("test".into()),
        checked: Instant::now(),
        limits: Limits { max_height_jump: 1_000, ..Limits::default() },
    }))
}

#[test]
fn a_streaming_line_too_far_ahead_is_refused_not_filled_with_empty_blocks() {
    let health = Health::new(Duration::from_secs(5));
    let (d, s) = (Stream::Diffs, Stream::Statuses);
    let far = 100 + 1_001;
    let mut input =
        one(vec![(d, 101, false), (s, 101, false), (d, far, false), (s, far, false), (d, 102, false)], &health);
    let mut asm = Assembler::new(Mode::Streaming, 100);
    let mut out = Vec::new();
    input.read(Duration::ZERO, Mode::Streaming, 100, &health, &mut |ev| match ev {
        InputEvent::Line(stream, line, _, bytes) => asm.push_sized(stream, line, bytes),
        other => panic!("{other:?}"),
    });
    asm.finish();
    while let Some(a) = asm.next_block() {
        if let Assembled::Block(b) = a {
            out.push(b.height);
        }
    }
    assert_eq!(out, [101, 102], "only the blocks the source really gave");
    assert_eq!(health.counters().lines_too_far_ahead.get(), 2);
    let entry = &health.sources().entries()[0];
    assert_eq!((entry.refused.get(), entry.height()), (2, 102), "its height is not the refused one");
}

#[test]
fn a_line_refused_as_too_long_is_lost_unless_already_applied() {
    let health = Health::new(Duration::from_secs(5));
    let mut input = one(vec![(Stream::Statuses, 100, true), (Stream::Statuses, 101, true)], &health);
    let mut lost = Vec::new();
    input.read(Duration::ZERO, Mode::ByBlock, 100, &health, &mut |ev| match ev {
        InputEvent::LostLine(why) => lost.push(why),
        other => panic!("{other:?}"),
    });
    assert_eq!(lost, ["block 101's order_statuses line was refused as too long"]);
    assert_eq!(health.counters().lines_too_long.get(), 2);
}
