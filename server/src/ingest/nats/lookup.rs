//! Height → stream sequence: where an edge starts reading so that it gets every line of the blocks after a
//! snapshot's height, found in O(log n) requests rather than by reading the stream from its start.
//!
//! Heights are not monotone over the whole stream (the publisher reads the node's three files in passes, so one
//! stream's lines can run a few blocks ahead of another's), but they are along each subject: the first message on
//! a subject at or after sequence `s` has a height that never decreases as `s` grows. So each subject is binary
//! searched for its first line above the height (STREAM.MSG.GET with `next_by_subj`), and reading starts at the
//! earliest of the three; the few lines of older blocks read before the others' start are dropped by height.

use async_nats::jetstream::stream::Stream as JsStream;

use super::{H_HEIGHT, header_u64, subject};
use crate::node::{Mode, Stream};

/// The sequence to start an ordered consumer at to see every line of blocks after `after`.
pub async fn start_sequence(stream: &mut JsStream, prefix: &str, mode: Mode, after: u64) -> anyhow::Result<u64> {
    let info = stream.get_info().await?;
    let (first, last) = (info.state.first_sequence, info.state.last_sequence);
    if info.state.messages == 0 {
        return Ok(last + 1);
    }
    let mut start = last + 1;
    for s in Stream::ALL {
        if let Some(seq) = first_above(stream, &subject(prefix, mode, s), first, last, after).await? {
            start = start.min(seq);
        }
    }
    Ok(start)
}

/// The first message on `subj` at or after `from`: (its sequence, its height); None past the subject's end.
async fn next_on(stream: &JsStream, subj: &str, from: u64) -> anyhow::Result<Option<(u64, u64)>> {
    use async_nats::jetstream::stream::RawMessageErrorKind;
    match stream.get_first_raw_message_by_subject(subj, from).await {
        Ok(m) => {
            let h = header_u64(&m.headers, H_HEIGHT)
                .ok_or_else(|| anyhow::anyhow!("message {} on {subj} has no {H_HEIGHT} header", m.sequence))?;
            Ok(Some((m.sequence, h)))
        }
        Err(e) if e.kind() == RawMessageErrorKind::NoMessageFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The sequence of the first message on `subj` whose height is above `after`, searching `[first, last]`.
async fn first_above(stream: &JsStream, subj: &str, first: u64, last: u64, after: u64) -> anyhow::Result<Option<u64>> {
    // Invariant: every message on `subj` before `lo` is at or below `after`; `found` is the best answer yet.
    let (mut lo, mut hi) = (first, last + 1);
    let mut found = None;
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        match next_on(stream, subj, mid).await? {
            Some((seq, h)) if h > after => {
                found = Some(seq);
                hi = mid;
            }
            Some((seq, _)) => lo = seq + 1,
            None => hi = mid,
        }
    }
    Ok(found)
}
