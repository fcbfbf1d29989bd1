//! misc_events blocks on their way to subscribers: the reader's thread leaves each whole block in an inbox, the
//! publisher takes them at its next pass and turns each into one feed tick of user frames (`TickKind::Misc`), so
//! userFundings, userNonFundingLedgerUpdates and userEvents' fundings are delivered, in order and once, by the
//! same feed and cursors as the other per-user streams.
//!
//! The official userEvents frame holds one funding, so a user with several payments in the block gets them as
//! several userEvents frames of that one tick (`UserFrames::more_events`).

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;
use rustc_hash::FxHashMap;

use super::feed::{Tick, TickKind};
use super::frame::{Audit, Frame};
use super::misc_frames::{by_user, user_event_funding, user_fundings, user_ledger_updates};
use super::users::{UserChannel, UserFrames, UserWants};
use crate::node::Address;
use crate::node::misc::{EventBlock, MiscBlock};
use crate::node::time::now_nanos;
use crate::state::LineTimes;

/// Blocks the inbox holds while the publisher is held up; past this the oldest is dropped (and counted).
const MAX_WAITING: usize = 4096;

/// A side stream's whole blocks waiting for the publisher (misc_events here, node_twap_statuses in
/// `publish::twap_feed`).
#[derive(Debug)]
pub struct SideInbox<E> {
    blocks: Mutex<VecDeque<EventBlock<E>>>,
}

pub type MiscInbox = SideInbox<crate::node::misc::MiscEvent>;

impl<E> Default for SideInbox<E> {
    fn default() -> Self {
        SideInbox { blocks: Mutex::new(VecDeque::new()) }
    }
}

impl<E> SideInbox<E> {
    /// Leaves a block for the publisher; false when the oldest waiting block had to be dropped for it.
    pub fn push(&self, block: EventBlock<E>) -> bool {
        let mut q = self.blocks.lock();
        q.push_back(block);
        let full = q.len() > MAX_WAITING;
        if full {
            q.pop_front();
        }
        !full
    }

    pub fn take(&self) -> Vec<EventBlock<E>> {
        self.blocks.lock().drain(..).collect()
    }
}

/// One followed user's frames of a block, before they are numbered into ticks.
struct UserJson {
    user: Address,
    fundings: Option<Vec<u8>>,
    ledger: Option<Vec<u8>>,
    events: Vec<Vec<u8>>,
}

/// The ticks of `blocks`, numbered after `*seq` (advanced past them); blocks without followed users make none.
pub(super) fn misc_ticks(blocks: &[MiscBlock], wanted: &FxHashMap<Address, UserWants>, seq: &mut u64) -> Vec<Tick> {
    let mut out = Vec::new();
    if wanted.is_empty() {
        return out;
    }
    for b in blocks {
        let users = user_json(b, wanted);
        if users.is_empty() {
            continue;
        }
        let (mut tick, audit) = side_tick(b, TickKind::Misc, seq);
        let frame = |json: &Vec<u8>| Arc::new(Frame::new(*seq, json.clone(), audit));
        for u in &users {
            // userEvents holds one funding a frame: a user with several in the block gets them all in this tick.
            let mut events = u.events.iter().map(frame);
            let f = UserFrames {
                events: events.next(),
                more_events: events.collect(),
                fundings: u.fundings.as_ref().map(frame),
                ledger: u.ledger.as_ref().map(frame),
                ..UserFrames::default()
            };
            if f.events.is_some() || f.fundings.is_some() || f.ledger.is_some() {
                tick.users.insert(u.user, f);
            }
        }
        out.push(tick);
    }
    out
}

/// A side stream block's tick, numbered after `*seq` (advanced), and the audit its frames carry.
pub(super) fn side_tick<E>(b: &EventBlock<E>, kind: TickKind, seq: &mut u64) -> (Tick, Audit) {
    let audit = Audit {
        times: LineTimes { height: b.height, block_time: b.block_time, ..LineTimes::default() },
        published: now_nanos(),
    };
    *seq += 1;
    let mut tick = Tick::new(*seq, b.height);
    tick.kind = kind;
    (tick, audit)
}

fn user_json(b: &MiscBlock, wanted: &FxHashMap<Address, UserWants>) -> Vec<UserJson> {
    let mut out = Vec::new();
    for (user, m) in by_user(b) {
        let Some(w) = wanted.get(&user) else { continue };
        let on = |ch: UserChannel| w[ch.index()];
        let fundings =
            (on(UserChannel::Fundings) && !m.fundings.is_empty()).then(|| user_fundings(&user, &m.fundings, false));
        let ledger =
            (on(UserChannel::Ledger) && !m.ledger.is_empty()).then(|| user_ledger_updates(&user, &m.ledger, false));
        let events = if on(UserChannel::Events) {
            m.fundings.iter().map(|(ev, f)| user_event_funding(ev, f)).collect()
        } else {
            Vec::new()
        };
        if fundings.is_some() || ledger.is_some() || !events.is_empty() {
            out.push(UserJson { user, fundings, ledger, events });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::misc::parse_misc_line;

    const ALICE: &str = "0x00000000000000000000000000000000000000a1";
    const BOB: &str = "0x00000000000000000000000000000000000000b2";

    fn block() -> MiscBlock {
        let line = format!(
            r#"{{"local_time":"2026-11-28T10:00:00.000000001","block_time":"2026-11-28T10:00:00.000000000","block_number":7,"events":[{{"time":"2026-11-28T10:00:00.000000000","hash":"0x{z}","inner":{{"Funding":{{"deltas":[{{"user":"{ALICE}","coin":"BTC","funding_amount":"-1.5","szi":"2","funding_rate":"0.0000125"}},{{"user":"{ALICE}","coin":"ETH","funding_amount":"0.25","szi":"-3","funding_rate":"0.0000125"}}]}}}}}},{{"time":"2026-11-28T10:00:00.000000000","hash":"0x{z}","inner":{{"LedgerUpdate":{{"users":["{BOB}"],"delta":{{"type":"deposit","usdc":"10.0"}}}}}}}}]}}"#,
            z = "0".repeat(64)
        );
        let l = parse_misc_line(&line).expect("the test's line parses");
        assert!(l.skipped.is_empty(), "{:?}", l.skipped);
        MiscBlock { height: l.meta.height, block_time: l.meta.block_time, events: l.events }
    }

    fn wants(user: &str, chs: &[UserChannel]) -> (Address, UserWants) {
        let mut w = UserWants::default();
        for ch in chs {
            w[ch.index()] = true;
        }
        (Address::parse(user).unwrap(), w)
    }

    fn text(f: Option<&Arc<Frame>>) -> String {
        String::from_utf8(f.expect("a frame").json.to_vec()).unwrap()
    }

    #[test]
    fn a_misc_block_is_one_tick_with_every_userevents_funding_of_each_user() {
        let all = [UserChannel::Events, UserChannel::Fundings, UserChannel::Ledger];
        let wanted: FxHashMap<_, _> = [wants(ALICE, &all), wants(BOB, &all)].into_iter().collect();
        let mut seq = 10;
        let ticks = misc_ticks(&[block()], &wanted, &mut seq);
        assert_eq!((ticks.len(), seq), (1, 11), "one tick a block, whatever its fundings");
        assert!(ticks[0].kind == TickKind::Misc && ticks[0].height == 7);
        let (alice, bob) = (Address::parse(ALICE).unwrap(), Address::parse(BOB).unwrap());
        let a = &ticks[0].users[&alice];
        assert!(text(a.events.as_ref()).contains(r#""coin":"BTC""#));
        assert_eq!(a.more_events.len(), 1);
        assert!(text(a.more_events.first()).contains(r#""coin":"ETH""#), "the second funding, in the same tick");
        assert!(text(a.fundings.as_ref()).contains(r#""coin":"ETH""#), "both payments in one userFundings frame");
        assert!(text(ticks[0].users[&bob].ledger.as_ref()).contains(r#""type":"deposit""#));
    }

    #[test]
    fn nobody_followed_no_ticks_and_the_inbox_bounds_itself() {
        let mut seq = 0;
        assert!(misc_ticks(&[block()], &FxHashMap::default(), &mut seq).is_empty());
        let only_bob_fills: FxHashMap<_, _> = [wants(BOB, &[UserChannel::Fills])].into_iter().collect();
        assert!(misc_ticks(&[block()], &only_bob_fills, &mut seq).is_empty());
        assert_eq!(seq, 0);
        let inbox = MiscInbox::default();
        assert!((0..MAX_WAITING).all(|_| inbox.push(block())));
        assert!(!inbox.push(block()));
        assert_eq!(inbox.take().len(), MAX_WAITING);
        assert!(inbox.take().is_empty());
    }
}
