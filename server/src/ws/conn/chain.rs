//! Each subscription's audit chain (docs/api.md "Audit fields"): the number of every frame the connection meant
//! for it, the height of the one before, and what the server conflated or dropped in between.
//!
//! The chain lets an auditor tell "nothing happened for this subscription between two heights" (the server
//! vouches for it) from loss, without assuming every block changes every coin. It is kept for every connection
//! (a few adds per frame); only `?audit=1` connections write it out.

/// One subscription's place in its chain.
#[derive(Debug, Default)]
pub(super) struct Chain {
    /// The subscription's number on its connection (1, 2, … in subscription order).
    sub: u32,
    /// Frames meant for it so far.
    n: u64,
    /// The height of the last of them.
    prev: u64,
    /// Heights whose frames were dropped since the last frame (the connection fell behind), not yet told.
    lost: Option<(u64, u64)>,
    /// Resumed from a height (docs/api.md "Resume"): the first frame names it as `prev`.
    resumed: bool,
    /// While resuming: (since, to) — frames of feed ticks up to `to` are replays, and those of heights up to
    /// `since` the client had already.
    replay: Option<(u64, u64)>,
}

/// What becomes of a feed tick's frame for a subscription that may be resuming.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Replay {
    /// The client had it before it resumed.
    Had,
    /// Sent again, marked as replayed.
    Again,
    Live,
}

/// A frame's place in its subscription's chain, written into its audit object.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Link {
    pub sub: u32,
    pub n: u64,
    /// 0 on a subscription's first frame.
    pub prev: u64,
    pub snapshot: bool,
    pub conflated: u64,
    pub lost: Option<(u64, u64)>,
    /// Sent again for a resumed subscription: the frame carries `"replayed":true`.
    pub replayed: bool,
}

impl Chain {
    pub(super) fn new(sub: u32) -> Chain {
        Chain { sub, ..Chain::default() }
    }

    /// The next frame of the subscription, at `height`: the link it carries.
    pub(super) fn next(&mut self, height: u64, snapshot: bool, conflated: u64) -> Link {
        self.n += 1;
        let link = Link {
            sub: self.sub,
            n: self.n,
            prev: if self.n == 1 && !self.resumed { 0 } else { self.prev },
            snapshot,
            conflated,
            lost: self.lost.take(),
            replayed: false,
        };
        self.prev = height;
        link
    }

    /// The subscription resumes after height `since`, replaying the feed's ticks up to `to`.
    pub(super) fn resume(&mut self, since: u64, to: u64) {
        (self.prev, self.resumed, self.replay) = (since, true, Some((since, to)));
    }

    /// After a catch-up from the store up to height `since`, the feed's ticks up to `to` are still replays.
    pub(super) fn replay_after(&mut self, since: u64, to: u64) {
        self.replay = Some((since, to));
    }

    /// Whether the frame of feed tick `seq`, at `height`, was had, is a replay, or is live.
    pub(super) fn replay_of(&mut self, seq: u64, height: u64) -> Replay {
        match self.replay {
            Some((since, to)) if seq <= to => {
                if height <= since {
                    Replay::Had
                } else {
                    Replay::Again
                }
            }
            Some(_) => {
                self.replay = None;
                Replay::Live
            }
            None => Replay::Live,
        }
    }

    /// The server skipped the subscription's frames of heights `first..=last`: the next frame says so.
    pub(super) fn dropped(&mut self, first: u64, last: u64) {
        self.lost = Some(match self.lost {
            Some((a, b)) => (a.min(first), b.max(last)),
            None => (first, last),
        });
    }

    /// The height of the subscription's last frame (0 before its first).
    pub(super) fn prev(&self) -> u64 {
        self.prev
    }
}

impl Link {
    /// `,"sub":…,"n":…` and the rest of the link, for the end of a frame's audit object (docs/api.md).
    pub fn write(&self, out: &mut Vec<u8>) {
        let mut b = itoa::Buffer::new();
        for (name, v) in
            [("sub", u64::from(self.sub)), ("n", self.n), ("prev", self.prev), ("conflated", self.conflated)]
        {
            if v == 0 && name != "n" {
                continue;
            }
            out.extend_from_slice(b",\"");
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b"\":");
            out.extend_from_slice(b.format(v).as_bytes());
        }
        if self.snapshot {
            out.extend_from_slice(b",\"snapshot\":true");
        }
        if let Some((first, last)) = self.lost {
            out.extend_from_slice(b",\"lost\":[");
            out.extend_from_slice(b.format(first).as_bytes());
            out.push(b',');
            out.extend_from_slice(b.format(last).as_bytes());
            out.push(b']');
        }
    }
}

/// Test hook `HLBOOK_TEST_DROP_FRAME=N`: on `?audit=1` connections every subscription's N-th frame is counted in
/// its chain but not written, as if lost on the way; the server logs which height it dropped. It lets a test check
/// that `latency_stats` names exactly that height. Only in `test-hooks` builds.
#[cfg(feature = "test-hooks")]
pub(super) fn test_drop_frame() -> Option<u64> {
    static DROP: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *DROP.get_or_init(|| std::env::var("HLBOOK_TEST_DROP_FRAME").ok().and_then(|v| v.parse().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_numbers_frames_and_names_the_previous_height() {
        let mut c = Chain::new(3);
        let a = c.next(100, true, 0);
        assert_eq!((a.sub, a.n, a.prev, a.snapshot), (3, 1, 0, true));
        let b = c.next(107, false, 2);
        assert_eq!((b.n, b.prev, b.snapshot, b.conflated), (2, 100, false, 2));
        assert_eq!(c.next(107, true, 0).prev, 107, "streaming: two frames of one height");
    }

    #[test]
    fn dropped_heights_ride_on_the_next_frame_once() {
        let mut c = Chain::new(1);
        c.next(10, false, 0);
        c.dropped(11, 20);
        c.dropped(21, 25);
        assert_eq!(c.next(26, true, 0).lost, Some((11, 25)));
        assert_eq!(c.next(27, false, 0).lost, None);
    }

    #[test]
    fn a_resumed_chain_continues_from_its_height_and_replays_up_to_the_newest_tick() {
        let mut c = Chain::new(1);
        c.resume(100, 50);
        assert_eq!(c.replay_of(48, 100), Replay::Had, "a frame of the height it resumed from");
        assert_eq!(c.replay_of(49, 101), Replay::Again);
        let first = c.next(101, false, 0);
        assert_eq!((first.n, first.prev, first.snapshot), (1, 100, false), "n restarts, prev is the resume point");
        assert_eq!(c.replay_of(50, 102), Replay::Again);
        assert_eq!(c.replay_of(51, 103), Replay::Live);
        assert_eq!(c.replay_of(52, 100), Replay::Live, "live frames are never held back");
    }

    #[test]
    fn a_link_writes_only_what_it_has() {
        let write = |l: Link| {
            let mut out = b"{\"height\":5".to_vec();
            l.write(&mut out);
            out.push(b'}');
            serde_json::from_slice::<serde_json::Value>(&out).unwrap()
        };
        let first = write(Link { sub: 2, n: 1, snapshot: true, ..Link::default() });
        assert_eq!(first, serde_json::json!({"height":5,"sub":2,"n":1,"snapshot":true}));
        let later = write(Link { sub: 2, n: 9, prev: 4, conflated: 3, lost: Some((6, 8)), ..Link::default() });
        assert_eq!(later, serde_json::json!({"height":5,"sub":2,"n":9,"prev":4,"conflated":3,"lost":[6,8]}));
    }
}
