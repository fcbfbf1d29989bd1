//! Books from a node snapshot.
//!
//! Parsing is sequential (one JSON stream) but building a coin's book is independent of the others, so each coin
//! is built on the rayon pool as soon as the parser hands it over.

use std::path::Path;

use parking_lot::Mutex;

use super::{Books, CoinBook, RestingOrder};
use crate::node::snapshot::{SnapshotCoin, SnapshotError, read_snapshot_file};

/// Builds one coin's book; orders keep the snapshot's time priority and rest at their `limitPx`. Untriggered
/// trigger orders are held beside the levels.
pub fn coin_book(snap: SnapshotCoin) -> CoinBook {
    let mut book = CoinBook::new(snap.coin);
    for (user, o) in snap.triggers {
        book.triggers_mut().place(user, o);
    }
    for side in snap.sides {
        for (user, o) in side {
            book.insert(RestingOrder::at_limit(user, &o), o.children, None);
        }
    }
    // Bulk loading leaves up to half the capacity unused; live changes regrow it as needed.
    book.shrink_to_fit();
    book
}

/// Loads every coin of a snapshot file (`.gz` accepted) into books at the snapshot's height.
pub fn load_books(path: &Path) -> Result<Books, SnapshotError> {
    let built = Mutex::new(Vec::new());
    let height = rayon::scope(|s| {
        read_snapshot_file(path, |coin| {
            let built = &built;
            s.spawn(move |_| {
                let book = coin_book(coin);
                built.lock().push(book);
            });
        })
    })?;
    Ok(Books::new(height, built.into_inner()))
}
