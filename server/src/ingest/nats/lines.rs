//! Node lines put back together from NATS messages that reach an edge two ways.
//!
//! The stream (an ordered JetStream consumer) is the record: it holds every line in order, from any height, and
//! is what an edge catches up from. But JetStream hands a message to consumers only after storing it, which on a
//! busy box costs more than the rest of the hop together. The same publish also reaches plain subscribers of the
//! subject at once. So an edge subscribes to the subject too and takes a line from there when, and only when,
//! it is the next line of its stream: the publisher names the line before it (`Hl-Prev`), and that must be the
//! last line the edge took. Anything else from the subject (an edge still catching up, a message dropped by a
//! slow subscriber, a publisher that restarted and does not know its predecessor) is left to the stream, whose
//! copy of a line already taken is dropped as seen. Either way each line is handed on once, in order.
//!
//! `Pos` is where a new consumer resumes after a reconnect: the stream sequence after what the stream brought
//! (or the first part of a line still open), with the last line taken per stream, so lines read again are
//! dropped.

use async_nats::HeaderMap;
use bytes::Bytes;

use super::codec;
use super::{H_ENC, H_HEIGHT, H_INDEX, H_LEN, H_LOST, H_PREV, header_key, header_part, header_u64, word_stream};
use crate::node::Stream;

/// Where a line sits: its block, and its place among that block's lines in its stream.
type Key = (u64, u64);

/// How a message reached the edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Via {
    /// From the stream, through the ordered consumer: complete and in order.
    Stream,
    /// Straight from the subject, as published: first, but only usable in sequence.
    Subject,
}

/// What a message completes.
#[derive(Debug)]
pub(super) enum Whole {
    Line(Stream, Bytes),
    /// A line over the edge's limit, one the publisher refused, or one that does not decode: (stream, height,
    /// bytes).
    TooLong(Stream, u64, u64),
    /// A stream message that is not a node line of ours (no height, a bad part header, a subject of no node
    /// stream), and why: skipped, so one stray message cannot stop every edge at the same sequence. Had it been a
    /// real line, its block breaks and is resynced.
    Foreign(String),
}

/// Where the stream stands: the sequence to read next, and the last line (height, index) handed on per stream,
/// so a copy of it read again (a republished line, a resumed consumer) is dropped.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Pos {
    pub(super) next: u64,
    seen: [Option<Key>; 3],
}

/// A line being put back together from its parts.
#[derive(Debug, Default)]
struct Parts {
    buf: Vec<u8>,
    next: u64,
    /// From the stream: the sequence of its first part, where a consumer that stops mid-line resumes.
    first_seq: Option<u64>,
    /// Over `max_line`: the rest of its parts are dropped and the line reported lost.
    over: bool,
}

#[derive(Debug)]
pub(super) struct Lines {
    /// Lines of blocks up to here are ingest's already.
    after: u64,
    max_line: usize,
    pos: Pos,
    /// Parts in progress per way and stream: the two ways interleave.
    parts: [[Parts; 3]; 2],
}

impl Lines {
    /// Reading lines of blocks after `after`, or right after `pos` when resuming.
    pub(super) fn new(after: u64, max_line: usize, pos: Option<Pos>) -> Lines {
        Lines { after, max_line, pos: pos.unwrap_or_default(), parts: Default::default() }
    }

    pub(super) fn pos(&self) -> Pos {
        self.pos
    }

    /// The line or loss a message completes, if any; `seq` is a stream message's sequence (None from the
    /// subject). A stream message that is not a node line of ours is reported `Foreign`; such a message on the
    /// subject is ignored (the stream decides).
    pub(super) fn take(
        &mut self,
        via: Via,
        seq: Option<u64>,
        subject: &str,
        headers: Option<&HeaderMap>,
        payload: &Bytes,
    ) -> Option<Whole> {
        let whole = self.complete(via, seq, subject, headers, payload);
        if let (Via::Stream, Some(seq)) = (via, seq) {
            // Past this message, unless a line the stream brought is still partly read: then at its first part,
            // so it is read whole again (its stream's lines read since are dropped as seen).
            let open = self.parts[Via::Stream as usize].iter().filter_map(|p| p.first_seq).min();
            self.pos.next = open.map_or(seq + 1, |o| o.min(seq + 1));
        }
        whole
    }

    fn complete(
        &mut self,
        via: Via,
        seq: Option<u64>,
        subject: &str,
        headers: Option<&HeaderMap>,
        payload: &Bytes,
    ) -> Option<Whole> {
        let foreign = |why: String| (via == Via::Stream).then_some(Whole::Foreign(why));
        let s = subject.rsplit('.').next().and_then(word_stream);
        let (Some(s), Some(h)) = (s, headers) else {
            return foreign(format!("a message on {subject} without a node line's headers"));
        };
        let Some(height) = header_u64(h, H_HEIGHT) else {
            return foreign(format!("no {H_HEIGHT} header on {subject}"));
        };
        let key = (height, header_u64(h, H_INDEX).unwrap_or(0));
        let Some((part, n)) = header_part(h) else {
            return foreign(format!("a bad part header on {subject}"));
        };
        let i = s as usize;
        let seen = &mut self.pos.seen[i];
        if height <= self.after || seen.is_some_and(|k| key <= k) {
            return None;
        }
        if via == Via::Subject && (seen.is_none() || header_key(h, H_PREV) != *seen) {
            return None;
        }
        if let Some(bytes) = header_u64(h, H_LOST) {
            *seen = Some(key);
            return Some(Whole::TooLong(s, height, bytes));
        }
        // The line's length: named on a compressed line and on every part, else the payload's.
        let len = header_u64(h, H_LEN);
        if n == 1 {
            *seen = Some(key);
            return Some(self.whole(s, height, h, len, payload.clone()));
        }
        let p = &mut self.parts[via as usize][i];
        if part == 0 {
            *p = Parts { first_seq: seq, over: len.is_some_and(|l| l > self.max_line as u64), ..Parts::default() };
        } else if part != p.next {
            // A part of a line we did not see begin (a publisher restarted mid-line): its whole copy follows.
            *p = Parts { next: u64::MAX, ..Parts::default() };
            return None;
        }
        p.next = part + 1;
        p.over |= p.buf.len() + payload.len() > self.max_line;
        if !p.over {
            p.buf.extend_from_slice(payload);
        }
        if part + 1 < n {
            return None;
        }
        self.pos.seen[i] = Some(key);
        let p = std::mem::take(p);
        Some(if p.over {
            Whole::TooLong(s, height, len.unwrap_or(n * payload.len() as u64))
        } else {
            self.whole(s, height, h, len, p.buf.into())
        })
    }

    /// A whole payload as the line it holds, or as lost when it is over the limit or does not decode.
    fn whole(&self, s: Stream, height: u64, h: &HeaderMap, len: Option<u64>, payload: Bytes) -> Whole {
        let bytes = len.unwrap_or(payload.len() as u64);
        if payload.len() > self.max_line || bytes > self.max_line as u64 {
            return Whole::TooLong(s, height, bytes);
        }
        match codec::decode(payload, h.get(H_ENC).map(async_nats::HeaderValue::as_str), len, self.max_line) {
            Ok(line) => Whole::Line(s, line),
            Err(why) => {
                tracing::error!(stream = %s, height, "a line from NATS is unreadable ({why}); it counts as lost");
                Whole::TooLong(s, height, bytes)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(height: u64, index: u64, prev: Option<(u64, u64)>, part: Option<(u64, u64)>) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(H_HEIGHT, height.to_string().as_str());
        h.insert(H_INDEX, index.to_string().as_str());
        if let Some((ph, pi)) = prev {
            h.insert(H_PREV, format!("{ph}:{pi}").as_str());
        }
        if let Some((p, n)) = part {
            h.insert(super::super::H_PART, format!("{p}/{n}").as_str());
        }
        h
    }

    fn line(w: Option<Whole>) -> Option<(Stream, Vec<u8>)> {
        match w {
            Some(Whole::Line(s, b)) => Some((s, b.to_vec())),
            _ => None,
        }
    }

    const FILLS: &str = "hl.by-block.fills";
    const DIFFS: &str = "hl.by-block.diffs";

    #[test]
    fn the_resume_position_follows_the_stream() {
        let mut l = Lines::new(0, 1 << 20, None);
        let b = Bytes::from_static(b"x");
        assert!(l.take(Via::Stream, Some(5), FILLS, Some(&msg(1, 0, None, None)), &b).is_some());
        assert_eq!(l.pos().next, 6);
        // A line from the subject leaves the stream's place alone; its copy from the stream, dropped, moves it on.
        assert!(l.take(Via::Subject, None, FILLS, Some(&msg(2, 0, Some((1, 0)), None)), &b).is_some());
        assert_eq!(l.pos().next, 6);
        assert!(l.take(Via::Stream, Some(6), FILLS, Some(&msg(2, 0, Some((1, 0)), None)), &b).is_none());
        assert_eq!(l.pos().next, 7);
        // A line of another stream partly read: a consumer resuming reads it from its first part.
        assert!(l.take(Via::Stream, Some(7), DIFFS, Some(&msg(2, 0, None, Some((0, 2)))), &b).is_none());
        assert!(l.take(Via::Stream, Some(8), FILLS, Some(&msg(3, 0, Some((2, 0)), None)), &b).is_some());
        assert_eq!(l.pos().next, 7);
        assert!(l.take(Via::Stream, Some(9), DIFFS, Some(&msg(2, 0, None, Some((1, 2)))), &b).is_some());
        assert_eq!(l.pos().next, 10);
        // Resumed there, the lines already handed on are dropped.
        let mut again = Lines::new(0, 1 << 20, Some(l.pos()));
        assert!(again.take(Via::Stream, Some(8), FILLS, Some(&msg(3, 0, Some((2, 0)), None)), &b).is_none());
    }

    #[test]
    fn the_subject_is_used_only_for_the_next_line() {
        let mut l = Lines::new(10, 1 << 20, None);
        let b = Bytes::from_static(b"x");
        // Nothing taken yet in this stream: the subject waits for the stream.
        assert!(l.take(Via::Subject, None, FILLS, Some(&msg(11, 0, Some((10, 0)), None)), &b).is_none());
        assert!(line(l.take(Via::Stream, Some(101), FILLS, Some(&msg(11, 0, Some((10, 0)), None)), &b)).is_some());
        // Next in sequence: taken from the subject, and the stream's copy is dropped.
        assert!(line(l.take(Via::Subject, None, FILLS, Some(&msg(12, 0, Some((11, 0)), None)), &b)).is_some());
        assert!(l.take(Via::Stream, Some(102), FILLS, Some(&msg(12, 0, Some((11, 0)), None)), &b).is_none());
        // A line whose predecessor the edge has not taken (13 was missed on the subject): left to the stream.
        assert!(l.take(Via::Subject, None, FILLS, Some(&msg(14, 0, Some((13, 0)), None)), &b).is_none());
        assert!(line(l.take(Via::Stream, Some(103), FILLS, Some(&msg(13, 0, Some((12, 0)), None)), &b)).is_some());
        assert!(line(l.take(Via::Stream, Some(104), FILLS, Some(&msg(14, 0, Some((13, 0)), None)), &b)).is_some());
        // No predecessor named (a publisher that restarted mid-line): the stream only.
        assert!(l.take(Via::Subject, None, FILLS, Some(&msg(15, 0, None, None)), &b).is_none());
    }

    #[test]
    fn parts_from_both_ways_do_not_mix() {
        let mut l = Lines::new(0, 1 << 20, None);
        let (a, b) = (Bytes::from_static(b"ab"), Bytes::from_static(b"cd"));
        assert!(line(l.take(Via::Stream, Some(105), FILLS, Some(&msg(1, 0, None, None)), &a)).is_some());
        // The stream is mid-line 2 when the subject brings line 2 whole (both parts): taken once, whole.
        assert!(l.take(Via::Stream, Some(106), FILLS, Some(&msg(2, 0, Some((1, 0)), Some((0, 2)))), &a).is_none());
        assert!(l.take(Via::Subject, None, FILLS, Some(&msg(2, 0, Some((1, 0)), Some((0, 2)))), &a).is_none());
        let got = line(l.take(Via::Subject, None, FILLS, Some(&msg(2, 0, Some((1, 0)), Some((1, 2)))), &b));
        assert_eq!(got, Some((Stream::Fills, b"abcd".to_vec())));
        assert!(l.take(Via::Stream, Some(107), FILLS, Some(&msg(2, 0, Some((1, 0)), Some((1, 2)))), &b).is_none());
    }

    #[test]
    fn compressed_lines_in_parts_are_inflated_and_an_oversized_one_is_refused_at_its_first_part() {
        let text = Bytes::from("{\"oid\":1,\"px\":\"81307.0\"},".repeat(400));
        let mut enc = codec::Encoder::new(1).unwrap();
        let (z, compressed) = enc.encode(text.clone());
        assert!(compressed);
        let half = z.len() / 2;
        let with = |part, len: usize| {
            let mut h = msg(1, 0, None, Some((part, 2)));
            h.insert(H_ENC, codec::ZSTD);
            h.insert(H_LEN, len.to_string().as_str());
            h
        };
        let mut l = Lines::new(0, text.len(), None);
        assert!(l.take(Via::Stream, Some(1), FILLS, Some(&with(0, text.len())), &z.slice(..half)).is_none());
        let got = line(l.take(Via::Stream, Some(2), FILLS, Some(&with(1, text.len())), &z.slice(half..)));
        assert_eq!(got, Some((Stream::Fills, text.to_vec())));
        // An edge whose limit is below the named length buffers nothing and reports the line lost at its size.
        let mut l = Lines::new(0, text.len() - 1, None);
        assert!(l.take(Via::Stream, Some(1), FILLS, Some(&with(0, text.len())), &z.slice(..half)).is_none());
        assert!(l.parts[Via::Stream as usize][Stream::Fills as usize].buf.is_empty());
        match l.take(Via::Stream, Some(2), FILLS, Some(&with(1, text.len())), &z.slice(half..)) {
            Some(Whole::TooLong(Stream::Fills, 1, n)) => assert_eq!(n, text.len() as u64),
            other => panic!("{other:?}"),
        }
        // A payload that does not inflate is a lost line, not an error that stops the stream.
        let mut l = Lines::new(0, 1 << 20, None);
        let mut h = msg(1, 0, None, None);
        h.insert(H_ENC, codec::ZSTD);
        h.insert(H_LEN, "10");
        let bad = Bytes::from_static(b"not zstd at all");
        assert!(matches!(l.take(Via::Stream, Some(3), FILLS, Some(&h), &bad), Some(Whole::TooLong(..))));
    }

    #[test]
    fn a_stranger_on_the_subject_is_ignored_but_not_in_the_stream() {
        let mut l = Lines::new(0, 1 << 20, None);
        let b = Bytes::from_static(b"x");
        assert!(l.take(Via::Subject, None, FILLS, None, &b).is_none());
        assert!(matches!(l.take(Via::Stream, Some(108), FILLS, None, &b), Some(Whole::Foreign(_))));
        let other = l.take(Via::Stream, Some(109), "hl.by-block.other", Some(&msg(1, 0, None, None)), &b);
        assert!(matches!(other, Some(Whole::Foreign(_))));
        // Skipped, not a stop: the stream goes on past it, and the next line of ours is taken.
        assert_eq!(l.pos().next, 110);
        assert!(line(l.take(Via::Stream, Some(110), FILLS, Some(&msg(1, 0, None, None)), &b)).is_some());
    }
}
