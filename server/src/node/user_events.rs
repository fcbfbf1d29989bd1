//! What a line holds for watched users beyond what the book needs: their rejections (decoded only for them) and
//! their fills exactly as the node wrote them (userFills passes every field through).
//!
//! Rejections are kept apart from the book's statuses, each with its place among them, so a user's status changes
//! can be replayed in line order without the book ever seeing a rejection.

use std::borrow::Cow;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::event::{Address, HexBytes, OrderStatus};
use super::user_watch::WatchView;
use super::wire::{Envelope, is_rejection};

/// A line's (or a block's) events of watched users.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserEvents {
    /// The watch generation the line was parsed under; for a block the lowest of its lines. `None`: parsed
    /// without a watch set (nothing of any user was looked for), or a line of no user stream.
    pub generation: Option<u64>,
    /// Rejected statuses of watched users, each with the number of book statuses before it (in the block).
    pub rejected: Vec<(u32, OrderStatus)>,
    /// Fills of watched users (every user's while the history store is open), `[user, fill]`'s fill object
    /// verbatim, in stream order. Shared (`Arc`): a block's fills go to the publisher and the store uncopied.
    pub fills: Vec<(Address, Arc<str>)>,
    /// Every user's fills that carry a `liquidation` object, watched or not (the market-wide `liquidations`
    /// channel), verbatim, in stream order.
    pub liquidations: Vec<(Address, Arc<str>)>,
}

impl UserEvents {
    /// Adds one line's user events to a block's, whose book statuses so far number `before`.
    pub fn absorb(&mut self, line: UserEvents, before: u32) {
        if let Some(g) = line.generation {
            self.generation = Some(self.generation.map_or(g, |m| m.min(g)));
        }
        self.rejected.extend(line.rejected.into_iter().map(|(at, s)| (at + before, s)));
        self.fills.extend(line.fills);
        self.liquidations.extend(line.liquidations);
    }

    /// Whether every event of a user watched since `generation` is here.
    pub fn complete_since(&self, generation: u64) -> bool {
        self.generation.is_none_or(|g| g >= generation)
    }
}

/// Just whose event it is and its status.
#[derive(Deserialize)]
struct WhoWire<'a> {
    user: HexBytes<20>,
    #[serde(borrow)]
    status: Cow<'a, str>,
}

/// The user of a status event piece as the node lays it out (`{"time":"…","user":"0x…",…`), without reading the
/// rest of the piece; `None` when it is not there in that form.
pub(crate) fn piece_user(piece: &[u8]) -> Option<Address> {
    const KEY: &[u8] = br#""user":""#;
    let at = memchr::memmem::find(piece.get(..128.min(piece.len()))?, KEY)? + KEY.len();
    let hex = piece.get(at..at + 42)?;
    if piece.get(at + 42) != Some(&b'"') {
        return None;
    }
    Address::parse_bytes(hex)
}

/// The watched users' rejections of a status line taken by the full parse, each with the number of book statuses
/// before it: every event is looked at again, which only happens for lines off the node's layout while someone is
/// watched. The parser decodes the pieces (`NodeParser::rejected_in_full`).
pub(crate) fn watched_rejections<'a>(line: &'a str, view: &WatchView) -> Vec<(u32, &'a RawValue)> {
    let Ok(env) = serde_json::from_str::<Envelope<&RawValue>>(line) else { return Vec::new() };
    let (mut out, mut kept) = (Vec::new(), 0u32);
    for ev in env.events {
        let Ok(who) = serde_json::from_str::<WhoWire<'_>>(ev.get()) else { continue };
        if !is_rejection(&who.status) {
            kept += 1;
        } else if view.users.contains(&who.user) {
            out.push((kept, ev));
        }
    }
    out
}

/// The watched users' fills of a fills line, verbatim.
pub(crate) fn watched_fills(line: &str, view: &WatchView) -> Vec<(Address, Arc<str>)> {
    let Ok(env) = serde_json::from_str::<Envelope<(HexBytes<20>, &RawValue)>>(line) else { return Vec::new() };
    let keep = |u: &Address| view.all_fills || view.users.contains(u);
    env.events.into_iter().filter(|(u, _)| keep(u)).map(|(u, f)| (u, Arc::from(f.get()))).collect()
}

/// Whether a fill object carries a `liquidation` object (a fill of an ordinary trade has none, or `null`), for a
/// line off the node's layout and the store's read-back (the fast path sees the key as it steps over it). No other
/// field of a fill is an object, so a fill without a `{` past its first byte is answered by one `memchr`.
pub fn is_liquidation(raw: &[u8]) -> bool {
    static KEY: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(br#""liquidation":{"#));
    raw.get(1..).is_some_and(|rest| memchr::memchr(b'{', rest).is_some()) && KEY.find(raw).is_some()
}

/// The liquidation fills of a line off the node's exact layout.
pub(crate) fn liquidation_fills(line: &str) -> Vec<(Address, Arc<str>)> {
    let Ok(env) = serde_json::from_str::<Envelope<(HexBytes<20>, &RawValue)>>(line) else { return Vec::new() };
    env.events
        .into_iter()
        .filter(|(_, f)| is_liquidation(f.get().as_bytes()))
        .map(|(u, f)| (u, Arc::from(f.get())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_of_a_piece() {
        let a = "0x5eaac7c475b1fad85701f02c4e9e796a53f94bd5";
        let piece = format!(r#"{{"time":"2026-05-05T17:39:13.0","user":"{a}","status":"badAloPxRejected"}}"#);
        assert_eq!(piece_user(piece.as_bytes()), Address::parse(a));
        assert_eq!(piece_user(br#"{"time":"t","user":"0x5e"}"#), None);
        assert_eq!(piece_user(br#"{"time":"t"}"#), None);
    }

    #[test]
    fn only_fills_with_a_liquidation_object_are_liquidations() {
        let a = "0x5eaac7c475b1fad85701f02c4e9e796a53f94bd5";
        let liq = format!(r#"{{"tid":1,"liquidation":{{"liquidatedUser":"{a}","markPx":"1.0","method":"market"}}}}"#);
        let line = format!(
            r#"{{"local_time":"2026-05-05T17:39:13.0","block_time":"2026-05-05T17:39:13.0","block_number":7,"events":[["{a}",{{"tid":2,"liquidation":null}}],["{a}",{liq}],["{a}",{{"tid":3}}]]}}"#
        );
        let got = liquidation_fills(&line);
        assert_eq!(got, vec![(Address::parse(a).unwrap(), Arc::from(liq.as_str()))]);
        assert!(!is_liquidation(br#"{"tid":2,"liquidation":null}"#));
    }

    #[test]
    fn absorb_offsets_and_takes_the_lowest_generation() {
        let mut b = UserEvents::default();
        assert!(b.complete_since(5));
        b.absorb(UserEvents { generation: Some(7), ..UserEvents::default() }, 0);
        b.absorb(UserEvents { generation: Some(4), ..UserEvents::default() }, 3);
        b.absorb(UserEvents::default(), 3);
        assert_eq!(b.generation, Some(4));
        assert!(b.complete_since(4));
        assert!(!b.complete_since(5));
    }
}
