//! node_twap_statuses blocks on their way to subscribers, as misc_events' (`publish::misc_feed`): the reader's
//! thread leaves each whole block in an inbox, the publisher takes them at its next pass and turns each into one
//! feed tick (`TickKind::Twaps`) holding a userTwapHistory frame per followed user with events in it, so the
//! channel is delivered in order and once by the same feed and cursors as the other per-user streams.

use std::collections::BTreeMap;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::feed::{Tick, TickKind};
use super::frame::Frame;
use super::misc_feed::{SideInbox, side_tick};
use super::twap_frames::{history_entry, user_twap_history};
use super::users::{UserChannel, UserFrames, UserWants};
use crate::node::Address;
use crate::node::twap::{TwapBlock, TwapEvent};

pub type TwapInbox = SideInbox<TwapEvent>;

/// The ticks of `blocks`, numbered after `*seq` (advanced past them); blocks without followed users make none.
pub(super) fn twap_ticks(blocks: &[TwapBlock], wanted: &FxHashMap<Address, UserWants>, seq: &mut u64) -> Vec<Tick> {
    let mut out = Vec::new();
    for b in blocks {
        let users = user_history(b, wanted);
        if users.is_empty() {
            continue;
        }
        let (mut tick, audit) = side_tick(b, TickKind::Twaps, seq);
        for (user, json) in users {
            let f = UserFrames { twap_history: Some(Arc::new(Frame::new(*seq, json, audit))), ..UserFrames::default() };
            tick.users.insert(user, f);
        }
        out.push(tick);
    }
    out
}

/// The block's userTwapHistory frame of each user following the channel, its events in line order.
fn user_history(b: &TwapBlock, wanted: &FxHashMap<Address, UserWants>) -> Vec<(Address, Vec<u8>)> {
    let mut by_user: BTreeMap<Address, Vec<Vec<u8>>> = BTreeMap::new();
    for ev in &b.events {
        let user = ev.state.user;
        if wanted.get(&user).is_some_and(|w| w[UserChannel::TwapHistory.index()]) {
            by_user.entry(user).or_default().push(history_entry(ev));
        }
    }
    by_user
        .into_iter()
        .map(|(user, list)| {
            let entries: Vec<&[u8]> = list.iter().map(Vec::as_slice).collect();
            (user, user_twap_history(&user, &entries, false))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::misc::EventBlock;
    use crate::node::twap::parse_twap_line;

    const ALICE: &str = "0x00000000000000000000000000000000000000a1";
    const BOB: &str = "0x00000000000000000000000000000000000000b2";

    fn event(user: &str, id: u64, status: &str) -> String {
        format!(
            r#"{{"time":"2026-11-28T10:00:00.000000000","twap_id":{id},"state":{{"coin":"BTC","user":"{user}","side":"B","sz":"1.5","executedSz":"0.0","executedNtl":"0.0","minutes":5,"reduceOnly":false,"randomize":false,"timestamp":1795860000000}},"status":"{status}"}}"#
        )
    }

    fn block(events: &[String]) -> TwapBlock {
        let line = format!(
            r#"{{"local_time":"2026-11-28T10:00:00.000000001","block_time":"2026-11-28T10:00:00.000000000","block_number":7,"events":[{}]}}"#,
            events.join(",")
        );
        let l = parse_twap_line(&line).expect("the test's line parses");
        EventBlock { height: l.meta.height, block_time: l.meta.block_time, events: l.events }
    }

    fn wants(user: &str, ch: UserChannel) -> (Address, UserWants) {
        let mut w = UserWants::default();
        w[ch.index()] = true;
        (Address::parse(user).unwrap(), w)
    }

    #[test]
    fn a_block_is_one_tick_with_each_followed_users_events_in_order() {
        let b = block(&[event(ALICE, 1, "activated"), event(BOB, 2, "activated"), event(ALICE, 3, "terminated")]);
        let wanted: FxHashMap<_, _> = [wants(ALICE, UserChannel::TwapHistory)].into_iter().collect();
        let mut seq = 4;
        let ticks = twap_ticks(&[b], &wanted, &mut seq);
        assert_eq!((ticks.len(), seq, ticks[0].kind, ticks[0].height), (1, 5, TickKind::Twaps, 7));
        assert_eq!(ticks[0].users.len(), 1, "bob is not followed");
        let f = ticks[0].users[&Address::parse(ALICE).unwrap()].get(UserChannel::TwapHistory).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&f.json).unwrap();
        let ids: Vec<u64> =
            v["data"]["history"].as_array().unwrap().iter().map(|e| e["twapId"].as_u64().unwrap()).collect();
        assert_eq!(ids, [1, 3]);
        assert_eq!(v["data"]["history"][1]["status"]["status"], "terminated");
    }

    #[test]
    fn users_following_other_channels_make_no_tick() {
        let b = block(&[event(ALICE, 1, "activated")]);
        let wanted: FxHashMap<_, _> = [wants(ALICE, UserChannel::TwapSlices)].into_iter().collect();
        let mut seq = 0;
        assert!(twap_ticks(&[b], &wanted, &mut seq).is_empty());
        assert_eq!(seq, 0);
    }
}
