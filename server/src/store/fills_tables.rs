//! The per-day fills tables (`schema`): a block's fills written with its index entries, a user's newest fills read
//! back, and retention, which empties expired days in bounded steps so that no commit stalls the writer.

use redb::{ReadTransaction, ReadableTableMetadata, TableHandle, WriteTransaction};
use rustc_hash::FxHashSet;

use super::blocks;
use super::files::BlockFills;
use super::schema::{BlocksDef, FillsKind, UsersDef, day_of, fills_day, fills_table, user_key};
use super::user_events::{EventsDef, events_day};

/// Entries retention deletes per commit at most: a live commit holds one block, so this is many times what a
/// block adds, and expired days empty quickly without one commit freeing a whole day's pages.
const PRUNE_PER_COMMIT: usize = 8192;

/// Writes a block's fills (only those of `keep`'s users, when given) and its users' index entries into its day's
/// tables; the number of fills.
pub fn write_block(
    txn: &WriteTransaction,
    b: &BlockFills,
    keep: Option<&FxHashSet<[u8; 20]>>,
) -> Result<u64, redb::Error> {
    let kept: Vec<&(crate::node::Address, std::sync::Arc<str>)> =
        b.users.iter().filter(|(u, _)| keep.is_none_or(|k| k.contains(&u.0))).collect();
    if kept.is_empty() {
        return Ok(0);
    }
    let fills = kept.iter().map(|(u, raw)| (&u.0, &**raw));
    put_block(txn, b.height, b.time_ms, fills, kept.iter().map(|(u, _)| &u.0))?;
    Ok(kept.len() as u64)
}

/// Stores block `height`'s fills in its day's table, replacing what it held, and indexes `users` in it: the one
/// writer of both tables, for live blocks and for users read back into blocks already stored.
pub fn put_block<'a>(
    txn: &WriteTransaction,
    height: u64,
    time_ms: i64,
    fills: impl IntoIterator<Item = (&'a [u8; 20], &'a str)>,
    users: impl IntoIterator<Item = &'a [u8; 20]>,
) -> Result<(), redb::Error> {
    let day = day_of(time_ms);
    let value = blocks::encode(fills);
    txn.open_table(BlocksDef::new(&fills_table(FillsKind::Blocks, day)))?.insert(height, value.as_slice())?;
    let mut index = txn.open_table(UsersDef::new(&fills_table(FillsKind::Users, day)))?;
    let keys: FxHashSet<u64> = users.into_iter().map(user_key).collect();
    for k in keys {
        index.insert((k, height), ())?;
    }
    Ok(())
}

/// The fills tables' names by day, newest first.
pub(super) fn days(r: &ReadTransaction) -> Result<Vec<u32>, redb::Error> {
    let mut days: Vec<u32> = r
        .list_tables()?
        .filter_map(|t| fills_day(t.name()))
        .filter(|(k, _)| *k == FillsKind::Users)
        .map(|d| d.1)
        .collect();
    days.sort_unstable_by(|a, b| b.cmp(a));
    Ok(days)
}

/// The user's newest `max` fills of blocks below `before` that `keep` takes, oldest first, looking through the
/// newest `scan` of their fills at most.
pub fn user_fills(
    r: &ReadTransaction,
    user: &[u8; 20],
    before: u64,
    (max, scan): (usize, usize),
    keep: impl Fn(&str) -> bool,
) -> Result<Vec<Box<str>>, redb::Error> {
    let key = user_key(user);
    let (mut out, mut seen): (Vec<Box<str>>, usize) = (Vec::new(), 0);
    'days: for day in days(r)? {
        let index = r.open_table(UsersDef::new(&fills_table(FillsKind::Users, day)))?;
        let Ok(blocks) = r.open_table(BlocksDef::new(&fills_table(FillsKind::Blocks, day))) else { continue };
        for e in index.range((key, 0)..(key, before))?.rev() {
            let height = e?.0.value().1;
            let Some(v) = blocks.get(height)? else { continue };
            // A value this version cannot read is skipped: one block's fills missing, not the snapshot.
            let mine = blocks::decode(v.value(), Some(user)).unwrap_or_default();
            seen += mine.len();
            out.extend(mine.into_iter().rev().filter(|(_, f)| keep(f)).map(|(_, f)| f.into_boxed_str()));
            if out.len() >= max || seen >= scan {
                break 'days;
            }
        }
    }
    out.truncate(max);
    out.reverse();
    Ok(out)
}

/// The user's fills of each block of `lo..=hi` indexed for them, oldest first, as the node wrote them.
pub fn user_blocks(
    r: &ReadTransaction,
    user: &[u8; 20],
    lo: u64,
    hi: u64,
) -> Result<Vec<(u64, Vec<String>)>, redb::Error> {
    let key = user_key(user);
    let mut out = Vec::new();
    if lo > hi {
        return Ok(out);
    }
    for day in days(r)?.into_iter().rev() {
        let index = r.open_table(UsersDef::new(&fills_table(FillsKind::Users, day)))?;
        let Ok(blocks) = r.open_table(BlocksDef::new(&fills_table(FillsKind::Blocks, day))) else { continue };
        for e in index.range((key, lo)..=(key, hi))? {
            let height = e?.0.value().1;
            let Some(v) = blocks.get(height)? else { continue };
            // The index key is a hash of the user: decoding keeps only theirs.
            let mine = blocks::decode(v.value(), Some(user)).unwrap_or_default();
            if !mine.is_empty() {
                out.push((height, mine.into_iter().map(|(_, f)| f).collect()));
            }
        }
    }
    Ok(out)
}

/// Stored and overhead bytes of the blocks and of the index tables, and the days held.
pub fn table_bytes(r: &ReadTransaction) -> Result<serde_json::Value, redb::Error> {
    let size = |st: redb::TableStats| (st.stored_bytes(), st.metadata_bytes() + st.fragmented_bytes());
    let (mut blocks, mut index, mut days) = ((0, 0), (0, 0), 0);
    for t in r.list_tables()? {
        let (a, b) = match fills_day(t.name()) {
            Some((FillsKind::Blocks, _)) => {
                days += 1;
                size(r.open_table(BlocksDef::new(t.name()))?.stats()?)
            }
            Some((FillsKind::Users, _)) => {
                let (a, b) = size(r.open_table(UsersDef::new(t.name()))?.stats()?);
                (index.0, index.1) = (index.0 + a, index.1 + b);
                continue;
            }
            None => continue,
        };
        (blocks.0, blocks.1) = (blocks.0 + a, blocks.1 + b);
    }
    Ok(serde_json::json!({"days": days, "stored_bytes": blocks.0, "overhead_bytes": blocks.1,
        "index_stored_bytes": index.0, "index_overhead_bytes": index.1}))
}

/// Retention: the expired days' tables (fills, and the user entries of `user_events`), emptied a bounded number
/// of entries per commit, then deleted.
#[derive(Debug, Default)]
pub struct Pruner {
    /// Tables of days before the cutoff still to empty (`None`: a user entries table).
    expired: Vec<(Option<FillsKind>, String)>,
    /// The day of block time the expired tables were last listed for.
    listed_day: u32,
}

impl Pruner {
    /// Deletes up to `PRUNE_PER_COMMIT` entries of days before `cutoff_day`, in the commit's transaction. The
    /// tables are listed once per `today` (a day of block time).
    pub fn prune(&mut self, txn: &WriteTransaction, today: u32, cutoff_day: u32) -> Result<(), redb::Error> {
        if today != self.listed_day {
            self.listed_day = today;
            self.expired = txn
                .list_tables()?
                .filter_map(|t| {
                    let (kind, day) = match fills_day(t.name()) {
                        Some((k, d)) => (Some(k), d),
                        None => (None, events_day(t.name())?),
                    };
                    (day < cutoff_day).then(|| (kind, t.name().to_string()))
                })
                .collect();
        }
        let mut budget = PRUNE_PER_COMMIT;
        while budget > 0 {
            let Some((kind, name)) = self.expired.last().cloned() else { break };
            let left = match kind {
                Some(FillsKind::Blocks) => pop(&mut txn.open_table(BlocksDef::new(&name))?, &mut budget)?,
                Some(FillsKind::Users) => pop(&mut txn.open_table(UsersDef::new(&name))?, &mut budget)?,
                None => pop(&mut txn.open_table(EventsDef::new(&name))?, &mut budget)?,
            };
            if left {
                break;
            }
            match kind {
                Some(FillsKind::Blocks) => txn.delete_table(BlocksDef::new(&name))?,
                Some(FillsKind::Users) => txn.delete_table(UsersDef::new(&name))?,
                None => txn.delete_table(EventsDef::new(&name))?,
            };
            tracing::info!(table = name, "history store: fills past store.fills_retention_days dropped");
            self.expired.pop();
        }
        Ok(())
    }
}

/// Pops entries while `budget` lasts; whether any are left.
fn pop<K: redb::Key + 'static, V: redb::Value + 'static>(
    t: &mut redb::Table<'_, K, V>,
    budget: &mut usize,
) -> Result<bool, redb::Error> {
    while *budget > 0 {
        if t.pop_first()?.is_none() {
            return Ok(false);
        }
        *budget -= 1;
    }
    Ok(!t.is_empty()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expired_days_empty_in_bounded_steps_and_newer_days_stay() {
        let dir = tempfile::tempdir().unwrap();
        let db = redb::Database::create(dir.path().join("t.redb")).unwrap();
        let (old, kept) = (20_260_501, 20_260_505);
        let n = PRUNE_PER_COMMIT as u64 + 100;
        let w = db.begin_write().unwrap();
        for day in [old, kept] {
            let mut t = w.open_table(UsersDef::new(&fills_table(FillsKind::Users, day))).unwrap();
            for h in 0..n {
                t.insert((h % 7, h), ()).unwrap();
            }
            let mut b = w.open_table(BlocksDef::new(&fills_table(FillsKind::Blocks, day))).unwrap();
            b.insert(1, b"x".as_slice()).unwrap();
            let mut e = w.open_table(EventsDef::new(&crate::store::user_events::events_table(day))).unwrap();
            e.insert((&[1; 20], 0, 5, 1, 0), b"{}".as_slice()).unwrap();
        }
        w.commit().unwrap();
        let names = |db: &redb::Database| -> Vec<String> {
            let r = db.begin_read().unwrap();
            let mut v: Vec<String> = r.list_tables().unwrap().map(|t| t.name().to_string()).collect();
            v.sort();
            v
        };
        let mut p = Pruner::default();
        let mut commits = 0;
        while names(&db).len() > 3 {
            let w = db.begin_write().unwrap();
            p.prune(&w, kept, kept).unwrap();
            w.commit().unwrap();
            commits += 1;
            assert!(commits < 10, "retention never finishes: {:?}", names(&db));
        }
        assert_eq!(commits, 2, "{n} entries at {PRUNE_PER_COMMIT} a commit");
        let events = crate::store::user_events::events_table(kept);
        assert_eq!(names(&db), [fills_table(FillsKind::Blocks, kept), fills_table(FillsKind::Users, kept), events]);
    }
}
