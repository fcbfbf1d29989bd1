//! Taking back the open streaming block's parts, so readers that need whole orders get the last complete block.
//!
//! Streaming at line speed applies a block's diffs in parts as their lines come (`Books::apply_diffs_part`), and
//! only a later block's first line ends the block. Validation, l4Book snapshots and `/l4snapshot` need complete
//! books; when one of them waits while a block is open (and always while the node pauses or has stopped, when
//! the open block may stay open for seconds or for good), ingest rolls the parts back (`Books::roll_back`) and
//! applies them again once the reader has had its turn. Each part records, diff by diff, how to undo what it did;
//! undoing it all last first puts every order back in its place in its level, so the books are exactly those of
//! the last complete block again.

use std::sync::Arc;

use super::{Books, CoinBook, RestingOrder};
use crate::node::{Coin, Diff, DiffKind, Fixed, Side};

/// How to undo one change of an open block's part.
#[derive(Clone, Debug)]
pub(super) enum Undo {
    /// The part made this coin's book.
    Created(Coin),
    /// A `new` rested this order.
    Placed { coin: Coin, oid: u64, side: Side, px: Fixed },
    /// An `update` set its size from `old` to `new`.
    Resized { coin: Coin, oid: u64, side: Side, px: Fixed, old: Fixed, new: Fixed },
    /// A `remove` (or a `new` of an oid already resting) took it off; it rested before `next` in its level.
    Removed { coin: Coin, order: RestingOrder, children: Option<Box<str>>, next: Option<u64> },
}

impl Books {
    /// Notes how to undo `d` before it is applied to an open streaming block (a diff that will not fit changes
    /// nothing and is not noted).
    pub(super) fn note_undo(&mut self, d: &Diff) {
        let Some(book) = self.coins.get(&d.coin) else {
            self.undo.push(Undo::Created(d.coin.clone()));
            if matches!(d.kind, DiffKind::New { .. }) {
                self.undo.push(Undo::Placed { coin: d.coin.clone(), oid: d.oid, side: d.side, px: d.px });
            }
            return;
        };
        let resting =
            book.order(d.oid).filter(|o| matches!(d.kind, DiffKind::New { .. }) || (o.side, o.px) == (d.side, d.px));
        let removed = |o: &RestingOrder| Undo::Removed {
            coin: d.coin.clone(),
            order: o.clone(),
            children: book.children(o.oid).map(Into::into),
            next: book.next_in_level(o.oid),
        };
        match (d.kind, resting) {
            (DiffKind::New { .. }, resting) => {
                if let Some(o) = resting {
                    self.undo.push(removed(o));
                }
                self.undo.push(Undo::Placed { coin: d.coin.clone(), oid: d.oid, side: d.side, px: d.px });
            }
            (DiffKind::Update { new_sz, .. }, Some(o)) => {
                let (coin, oid, side, px, old) = (d.coin.clone(), d.oid, d.side, d.px, o.sz);
                self.undo.push(Undo::Resized { coin, oid, side, px, old, new: new_sz });
            }
            (DiffKind::Remove, Some(o)) => {
                let u = removed(o);
                self.undo.push(u);
            }
            (_, None) => {}
        }
    }

    /// Undoes the open streaming block's parts: the books are those of the last complete block again, and the
    /// block's diffs must be applied again from its first. False (nothing done) when no block is open.
    pub fn roll_back(&mut self) -> bool {
        if self.diffs_height != self.height + 1 || self.first.is_some() || !self.recording {
            return false;
        }
        for u in std::mem::take(&mut self.undo).into_iter().rev() {
            match u {
                Undo::Created(coin) => {
                    self.coins.remove(&coin);
                }
                Undo::Placed { coin, oid, side, px } => {
                    let _ = self.book_mut(&coin).map(|b| b.remove(oid, side, px));
                }
                Undo::Resized { coin, oid, side, px, old, new } => {
                    let _ = self.book_mut(&coin).map(|b| b.update(oid, side, px, new, old));
                }
                Undo::Removed { coin, order, children, next } => {
                    let book = self.coins.entry(coin.clone()).or_insert_with(|| Arc::new(CoinBook::new(coin)));
                    super::unshared(book, &mut self.counters.book_copies).insert(order, children, next);
                }
            }
        }
        self.pending.clear();
        self.diffs_height = self.height;
        self.recording = false;
        true
    }
}

#[cfg(test)]
#[path = "undo_tests.rs"]
mod tests;
