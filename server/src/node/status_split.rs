//! A byte-level split of an order-status line into its events, so rejections are counted without being parsed.
//!
//! Rejections are over 95% of status bytes; at mainnet load a by-block status line is about 4 MB, and tokenizing
//! it (even skipping the rejected `order` objects) was most of the time from a line written to its block applied.
//! No JSON library skips an object without tokenizing it, so this is written by hand, and it is only a fast path:
//! whatever does not have the node's exact layout returns `None` and takes the full serde parse, which accepts any
//! key order and gives the error messages.
//!
//! Why searching bytes is sound: a raw `"` cannot occur inside a JSON string, so the patterns searched for here
//! (`,"events":[`, `},{"time":"`, `"status":"`), each holding quotes, only ever match structure. The split is
//! then checked: every event holds exactly one `"status":"` (child orders and builders carry none), so it is the
//! event's own. A boundary the split missed (say whitespace between events) leaves two statuses in one piece and
//! fails the check; a boundary inside an event cuts a kept piece that no longer parses. Either falls back. What
//! the fast path does not check is the JSON inside rejected events: the book never reads them.

use memchr::memmem::Finder;
use rustc_hash::FxHashSet;

use super::event::Address;
use super::user_events::piece_user;

const EVENTS_KEY: &[u8] = br#","events":["#;
const BOUNDARY: &[u8] = br#"},{"time":""#;
const STATUS_KEY: &[u8] = br#""status":""#;

/// A status line cut into its parts, all borrowed from the line.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Split<'a> {
    /// The envelope up to (not including) `,"events":[`: `{"local_time":…,"block_number":N`.
    pub head: &'a str,
    /// Each kept (not rejected) event's whole JSON object, in line order.
    pub kept: Vec<&'a str>,
    pub rejected: u32,
    /// Rejected events of watched users, each with the number of kept events before it.
    pub watched: Vec<(u32, &'a str)>,
}

/// The three searchers, built once per parser.
#[derive(Debug)]
pub(crate) struct StatusSplitter {
    events_key: Finder<'static>,
    boundary: Finder<'static>,
    status_key: Finder<'static>,
}

impl Default for StatusSplitter {
    fn default() -> StatusSplitter {
        StatusSplitter {
            events_key: Finder::new(EVENTS_KEY),
            boundary: Finder::new(BOUNDARY),
            status_key: Finder::new(STATUS_KEY),
        }
    }
}

impl StatusSplitter {
    /// Splits `line`, or `None` when it is not laid out exactly as the node writes it. The head and the kept
    /// events are checked to be UTF-8 (serde reads them); rejected events are not looked into at all, except for
    /// the user field when `watch` names users whose rejections are wanted.
    pub fn split<'a>(&self, line: &'a [u8], watch: Option<&FxHashSet<Address>>) -> Option<Split<'a>> {
        let key = self.events_key.find(line)?;
        let start = key + EVENTS_KEY.len();
        let end = line.trim_ascii_end().len().checked_sub(2)?;
        if start > end || &line[end..end + 2] != b"]}" {
            return None;
        }
        let head = std::str::from_utf8(&line[..key]).ok()?;
        let body = &line[start..end];
        if body.is_empty() {
            return Some(Split { head, kept: Vec::new(), rejected: 0, watched: Vec::new() });
        }
        if !body.starts_with(&BOUNDARY[2..]) || body.last() != Some(&b'}') {
            return None;
        }
        let (kept, rejected, watched) = self.events(body, watch)?;
        Some(Split { head, kept, rejected, watched })
    }

    /// Kept events, the rejected count and watched users' rejections of `body`, a run of whole events joined
    /// by `,`.
    #[allow(clippy::type_complexity)]
    fn events<'a>(
        &self,
        body: &'a [u8],
        watch: Option<&FxHashSet<Address>>,
    ) -> Option<(Vec<&'a str>, u32, Vec<(u32, &'a str)>)> {
        let (mut kept, mut rejected, mut watched) = (Vec::new(), 0, Vec::new());
        let mut statuses = self.status_key.find_iter(body).peekable();
        let ends = self.boundary.find_iter(body).map(|b| b + 1).chain(std::iter::once(body.len()));
        let mut from = 0;
        for to in ends {
            // Exactly one status in [from, to).
            let at = statuses.next().filter(|&p| p >= from && p < to)?;
            if statuses.peek().is_some_and(|&p| p < to) {
                return None;
            }
            let value = body.get(at + STATUS_KEY.len()..to)?;
            let value = &value[..memchr::memchr(b'"', value)?];
            if value.contains(&b'\\') {
                return None;
            }
            if value.ends_with(b"Rejected") {
                rejected += 1;
                if let Some(users) = watch {
                    let piece = &body[from..to];
                    if piece_user(piece).is_some_and(|u| users.contains(&u)) {
                        watched.push((kept.len() as u32, std::str::from_utf8(piece).ok()?));
                    }
                }
            } else {
                kept.push(std::str::from_utf8(&body[from..to]).ok()?);
            }
            from = to + 1;
        }
        statuses.next().is_none().then_some((kept, rejected, watched))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = r#"{"local_time":"2026-05-05T17:39:13.3","block_time":"2026-05-05T17:39:13.0","block_number":7"#;

    fn event(status: &str, order: &str) -> String {
        format!(r#"{{"time":"t","user":"0x01","hash":null,"builder":null,"status":"{status}","order":{order}}}"#)
    }

    #[test]
    fn watched_users_rejections_are_picked_with_their_place() {
        let (a, b) = ("0x5eaac7c475b1fad85701f02c4e9e796a53f94bd5", "0x1624aac7c475b1fad85701f02c4e9e796a53f94b");
        let ev = |u: &str, st: &str| event(st, "{}").replace("0x01", u);
        let l = line(&[ev(a, "badAloPxRejected"), ev(b, "open"), ev(b, "iocCancelRejected"), ev(a, "tickRejected")]);
        let users: FxHashSet<Address> = [Address::parse(a).unwrap()].into_iter().collect();
        let s = StatusSplitter::default().split(l.as_bytes(), Some(&users)).unwrap();
        let (r0, r3) = (ev(a, "badAloPxRejected"), ev(a, "tickRejected"));
        assert_eq!(s.watched, vec![(0, r0.as_str()), (1, r3.as_str())]);
        assert_eq!(s.rejected, 3);
        let none = StatusSplitter::default().split(l.as_bytes(), None).unwrap();
        assert!(none.watched.is_empty());
    }

    fn line(events: &[String]) -> String {
        format!("{HEAD},\"events\":[{}]}}", events.join(","))
    }

    #[test]
    fn keeps_what_is_not_rejected_and_counts_the_rest() {
        let open = event("open", r#"{"oid":1,"children":[{"coin":"BTC"}]}"#)
            .replace("null,\"status", "{\"b\":\"0x1\",\"f\":5},\"status");
        let l = line(&[event("badAloPxRejected", "{}"), open.clone(), event("minTradeNtlRejected", "{}")]);
        let s = StatusSplitter::default().split(l.as_bytes(), None).unwrap();
        assert_eq!(s, Split { head: HEAD, kept: vec![open.as_str()], rejected: 2, watched: vec![] });
    }

    #[test]
    fn empty_events_and_trailing_newline() {
        let l = format!("{}\n", line(&[]));
        let s = StatusSplitter::default().split(l.as_bytes(), None).unwrap();
        assert_eq!(s, Split { head: HEAD, kept: vec![], rejected: 0, watched: vec![] });
    }

    #[test]
    fn anything_off_layout_is_refused() {
        let splitter = StatusSplitter::default();
        let rej = event("badAloPxRejected", "{}");
        let open = event("open", "{}");
        let refused = [
            // Whitespace between events: one piece would hold two statuses (the open one would be lost).
            format!("{HEAD},\"events\":[{rej}, {open}]}}"),
            // A nested status beside the event's own (two in one piece).
            format!(r#"{HEAD},"events":[{{"time":"t","order":{{"status":"x"}},"status":"open"}}]}}"#),
            // An event without a status.
            format!(r#"{HEAD},"events":[{{"time":"t","order":{{}}}}]}}"#),
            // An escaped quote in the status.
            line(&[event(r#"a\"Rejected"#, "{}")]),
            // Events not last, not an array, or cut short.
            format!(r#"{HEAD},"events":[{rej}],"x":1}}"#),
            format!(r#"{HEAD},"events":{{}}}}"#),
            format!("{HEAD},\"events\":[{rej}"),
            // Events not starting with `time`.
            format!(r#"{HEAD},"events":[{{"user":"0x01","status":"open"}}]}}"#),
        ];
        for l in &refused {
            assert_eq!(splitter.split(l.as_bytes(), None), None, "{l}");
        }
    }
}
