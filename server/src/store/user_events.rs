//! Per-user history entries of the streams other than fills: funding payments and non-funding ledger updates
//! (from `misc_events`), and room for a user's TWAP history (`EntryKind::TwapHistory`, from `node_twap_statuses`).
//! Each entry is kept as the bytes an info answer serves (for a funding, `{time, hash, delta}`), so a read
//! hands them out without rebuilding them, and any stream with per-user entries reuses the same tables.
//!
//! Layout (`schema`): `user_events_YYYYMMDD`, one table per UTC day of the entry's time, (user, kind, time ms,
//! height, seq) → the entry's bytes. Keyed by the whole address (no collisions to filter) and then by time, so a
//! user's entries of one kind in a time range are one range read per day, ascending. `seq` is the entry's place
//! among its block's entries, so two entries of one user in one block are both kept, in order. The day tables
//! fall under the fills' retention (`fills_tables::Pruner`).
//!
//! Beside them, per stream (`misc`, …): meta `<stream>_height` (the last block committed, the next start reads
//! the node's files after it), `<stream>_first_ms` and `<stream>_last_ms` (the first and last block's times); `user_event_gaps` (stream, after
//! ms) → before ms, holes where blocks were missing; and in followed mode `user_event_since` (stream, user) → the
//! time from which that user's entries are kept. A read is answered only when the store holds the whole range
//! (`Store::user_entries_whole_from`).

use redb::{ReadTransaction, ReadableTable, TableDefinition, TableHandle, WriteTransaction};
use rustc_hash::FxHashSet;

use super::Store;
use super::schema::{EVENTS_PREFIX, META, day_of};

/// What an entry is. The byte is part of the key: never renumber.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum EntryKind {
    /// A funding payment: `{time, hash, delta: {type: "funding", coin, usdc, szi, fundingRate, nSamples}}`.
    Funding = 0,
    /// A non-funding ledger update: `{time, hash, delta}`, the delta as the node wrote it.
    Ledger = 1,
    /// A user's TWAP history entry (reserved for `node_twap_statuses`).
    TwapHistory = 2,
}

/// A day's entries: (user, kind, time ms, height, seq) → the entry's bytes.
pub type EventsDef<'a> = TableDefinition<'a, (&'static [u8; 20], u8, i64, u64, u32), &'static [u8]>;
/// Holes per stream: (stream, after ms) → before ms.
pub const GAPS: TableDefinition<(&str, i64), i64> = TableDefinition::new("user_event_gaps");
/// Followed mode: (stream, user) → the time (ms) from which the user's entries are kept.
pub const SINCE: TableDefinition<(&str, &[u8; 20]), i64> = TableDefinition::new("user_event_since");

/// The day table of `day` (`YYYYMMDD`).
pub fn events_table(day: u32) -> String {
    format!("{EVENTS_PREFIX}{day}")
}

/// The day of an events table's name.
pub fn events_day(name: &str) -> Option<u32> {
    name.strip_prefix(EVENTS_PREFIX)?.parse().ok()
}

/// One entry to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewEntry {
    pub user: [u8; 20],
    pub kind: EntryKind,
    pub time_ms: i64,
    pub bytes: Vec<u8>,
}

/// A block's entries (in the block's order) and its time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EntryBlock {
    pub height: u64,
    pub time_ms: i64,
    pub entries: Vec<NewEntry>,
}

/// An entry read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub time_ms: i64,
    pub height: u64,
    pub bytes: Box<[u8]>,
}

/// What a commit of a stream's blocks brings.
#[derive(Debug, Default)]
pub struct Commit<'a> {
    pub stream: &'a str,
    /// The stream's last height once committed (it may be past the last block: blocks without entries).
    pub height: u64,
    pub blocks: &'a [EntryBlock],
    /// Blocks were missing between these times (ms).
    pub gap: Option<(i64, i64)>,
    /// Followed mode: the users whose entries are kept (`None`: every user's).
    pub keep: Option<&'a FxHashSet<[u8; 20]>>,
    /// Followed mode: users kept from this commit on, whole from `since_ms` (no earlier block of theirs after it).
    pub new_users: &'a [[u8; 20]],
    pub since_ms: i64,
    /// Followed mode: users no longer kept.
    pub dropped_users: &'a [[u8; 20]],
    /// Entries before this day are past retention: not written.
    pub cutoff_day: u32,
}

fn meta_key(stream: &str, what: &str) -> String {
    format!("{stream}_{what}")
}

/// Writes a commit's entries, gap, followed users and height in `txn`; the number of entries written.
pub fn write(txn: &WriteTransaction, c: &Commit<'_>) -> Result<u64, redb::Error> {
    let mut meta = txn.open_table(META)?;
    let first = c.blocks.first();
    if let Some(b) = first
        && meta.get(meta_key(c.stream, "first_ms").as_str())?.is_none()
    {
        meta.insert(meta_key(c.stream, "first_ms").as_str(), b.time_ms.max(0) as u64)?;
    }
    if let Some((after, before)) = c.gap {
        txn.open_table(GAPS)?.insert((c.stream, after), before)?;
    }
    {
        let mut since = txn.open_table(SINCE)?;
        for u in c.dropped_users {
            since.remove((c.stream, u))?;
        }
        for u in c.new_users {
            since.insert((c.stream, u), c.since_ms)?;
        }
    }
    let mut written = 0;
    let mut day_open: Option<(u32, redb::Table<'_, _, _>)> = None;
    for b in c.blocks {
        for (seq, e) in b.entries.iter().enumerate() {
            let day = day_of(e.time_ms);
            if day < c.cutoff_day || c.keep.is_some_and(|k| !k.contains(&e.user)) {
                continue;
            }
            if day_open.as_ref().is_none_or(|(d, _)| *d != day) {
                day_open = Some((day, txn.open_table(EventsDef::new(&events_table(day)))?));
            }
            let (_, t) = day_open.as_mut().expect("just opened");
            t.insert((&e.user, e.kind as u8, e.time_ms, b.height, seq as u32), e.bytes.as_slice())?;
            written += 1;
        }
    }
    if let Some(b) = c.blocks.last() {
        meta.insert(meta_key(c.stream, "last_ms").as_str(), b.time_ms.max(0) as u64)?;
    }
    let key = meta_key(c.stream, "height");
    let old = meta.get(key.as_str())?.map_or(0, |v| v.value());
    meta.insert(key.as_str(), c.height.max(old))?;
    Ok(written)
}

/// Every events day table, ascending.
fn days(r: &ReadTransaction) -> Result<Vec<u32>, redb::Error> {
    let mut days: Vec<u32> = r.list_tables()?.filter_map(|t| events_day(t.name())).collect();
    days.sort_unstable();
    Ok(days)
}

/// The user's entries of `kind` with times in `start..=end`: the oldest `limit` ascending, or with
/// `newest_first` the newest `limit`, newest first.
pub fn read(
    r: &ReadTransaction,
    user: &[u8; 20],
    kind: EntryKind,
    (start, end): (i64, i64),
    limit: usize,
    newest_first: bool,
) -> Result<Vec<Entry>, redb::Error> {
    let mut out = Vec::new();
    if start > end || limit == 0 {
        return Ok(out);
    }
    let mut list = days(r)?;
    // `day_of` is 0 for a time past year 9999: no upper bound then.
    let last = Some(day_of(end)).filter(|d| *d > 0).unwrap_or(u32::MAX);
    list.retain(|d| (day_of(start)..=last).contains(d));
    if newest_first {
        list.reverse();
    }
    let k = kind as u8;
    for day in list {
        let t = r.open_table(EventsDef::new(&events_table(day)))?;
        let range = t.range((user, k, start, 0, 0)..=(user, k, end, u64::MAX, u32::MAX))?;
        let mut take = |e: Result<(redb::AccessGuard<'_, _>, redb::AccessGuard<'_, &[u8]>), redb::StorageError>| {
            let (key, v) = e?;
            let (_, _, time_ms, height, _) = key.value();
            out.push(Entry { time_ms, height, bytes: v.value().into() });
            Ok::<bool, redb::Error>(out.len() >= limit)
        };
        if newest_first {
            for e in range.rev() {
                if take(e)? {
                    return Ok(out);
                }
            }
        } else {
            for e in range {
                if take(e)? {
                    return Ok(out);
                }
            }
        }
    }
    Ok(out)
}

/// The user's newest `limit` entries of `kind` of blocks up to `max_height`, newest first.
pub fn read_upto(
    r: &ReadTransaction,
    user: &[u8; 20],
    kind: EntryKind,
    max_height: u64,
    limit: usize,
) -> Result<Vec<Entry>, redb::Error> {
    let (mut out, k) = (Vec::new(), kind as u8);
    for day in days(r)?.into_iter().rev() {
        let t = r.open_table(EventsDef::new(&events_table(day)))?;
        // Newer blocks than `max_height` come first: a reader's bound is at most a few blocks behind the writer.
        for e in t.range((user, k, i64::MIN, 0, 0)..=(user, k, i64::MAX, u64::MAX, u32::MAX))?.rev() {
            let (key, v) = e?;
            let (_, _, time_ms, height, _) = key.value();
            if height <= max_height {
                out.push(Entry { time_ms, height, bytes: v.value().into() });
                if out.len() >= limit {
                    return Ok(out);
                }
            }
        }
    }
    Ok(out)
}

/// The stream's holes (after, before), ms.
fn gaps(r: &ReadTransaction, stream: &str) -> Result<Vec<(i64, i64)>, redb::Error> {
    let t = match r.open_table(GAPS) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let mut out = Vec::new();
    for e in t.range((stream, i64::MIN)..=(stream, i64::MAX))? {
        let (k, v) = e?;
        out.push((k.value().1, v.value()));
    }
    Ok(out)
}

fn since(r: &ReadTransaction, stream: &str, user: &[u8; 20]) -> Result<Option<i64>, redb::Error> {
    match r.open_table(SINCE) {
        Ok(t) => Ok(t.get((stream, user))?.map(|v| v.value())),
        Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

impl Store {
    /// The stream's last height committed (0: none yet; its writer reads the node's files from the oldest).
    pub fn stream_height(&self, stream: &str) -> u64 {
        self.meta(&meta_key(stream, "height")).unwrap_or(0)
    }

    /// The time (ms) of the stream's last block committed (0: none yet).
    pub fn stream_last_ms(&self, stream: &str) -> i64 {
        self.meta(&meta_key(stream, "last_ms")).unwrap_or(0) as i64
    }

    /// The users whose entries of `stream` a followed-mode store keeps (`user_event_since`).
    pub fn user_entries_since_users(&self, stream: &str) -> Result<Vec<[u8; 20]>, String> {
        let run = || -> Result<Vec<[u8; 20]>, redb::Error> {
            let r = self.db.begin_read()?;
            let t = match r.open_table(SINCE) {
                Ok(t) => t,
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
                Err(e) => return Err(e.into()),
            };
            let mut out = Vec::new();
            for e in t.range((stream, &[0u8; 20])..=(stream, &[0xff; 20]))? {
                out.push(*e?.0.value().1);
            }
            Ok(out)
        };
        run().map_err(|e| format!("store read: {e}"))
    }

    /// Commits a stream's blocks (ascending, after `stream_height`) with its new height; the entries written.
    pub fn commit_user_entries(&self, c: &Commit<'_>) -> Result<u64, String> {
        let run = || -> Result<u64, redb::Error> {
            let mut txn = self.db.begin_write()?;
            txn.set_durability(redb::Durability::Eventual);
            let n = write(&txn, c)?;
            txn.commit()?;
            Ok(n)
        };
        run().map_err(|e| format!("writing the store's {} entries: {e}", c.stream))
    }

    /// The user's entries of `kind` with times in `start_ms..=end_ms`: the oldest `limit`, ascending; or with
    /// `newest_first`, the newest `limit`, newest first. Entries as written (`NewEntry::bytes`).
    pub fn user_entries(
        &self,
        user: &[u8; 20],
        kind: EntryKind,
        (start_ms, end_ms): (i64, i64),
        limit: usize,
        newest_first: bool,
    ) -> Result<Vec<Entry>, String> {
        let run = || read(&self.db.begin_read()?, user, kind, (start_ms, end_ms), limit, newest_first);
        run().map_err(|e: redb::Error| format!("store read: {e}"))
    }

    /// The user's newest `limit` entries of `kind` of blocks up to `max_height`, newest first (a snapshot that
    /// live frames of later blocks continue).
    pub fn user_entries_upto(
        &self,
        user: &[u8; 20],
        kind: EntryKind,
        max_height: u64,
        limit: usize,
    ) -> Result<Vec<Entry>, String> {
        let run = || read_upto(&self.db.begin_read()?, user, kind, max_height, limit);
        run().map_err(|e: redb::Error| format!("store read: {e}"))
    }

    /// From when (ms) the store holds every entry of `stream` for `user` up to `end_ms`: the stream's first
    /// block, the retention's cut (counted from `now_ms`, a day early), the time it began keeping a followed user,
    /// and the end of any hole before `end_ms`, whichever is latest. `None`: it holds none of the user's (no
    /// block of the stream yet, or a user it does not keep).
    pub fn user_entries_whole_from(&self, stream: &str, user: &[u8; 20], end_ms: i64, now_ms: i64) -> Option<i64> {
        let run = || -> Result<Option<i64>, redb::Error> {
            let r = self.db.begin_read()?;
            let meta = r.open_table(META)?;
            let Some(first) = meta.get(meta_key(stream, "first_ms").as_str())?.map(|v| v.value() as i64) else {
                return Ok(None);
            };
            // The retention cut as `fills_kept_from_ms` counts it (the fills' first block does not count here).
            let days = i64::from(self.status.retention_days.load(std::sync::atomic::Ordering::Relaxed));
            if days == 0 {
                return Ok(None);
            }
            let mut from = first.max(now_ms - days * super::candle::DAY);
            if self.follow.only() {
                match since(&r, stream, user)? {
                    Some(s) => from = from.max(s),
                    None => return Ok(None),
                }
            }
            for (_, before) in gaps(&r, stream)?.into_iter().filter(|(after, _)| *after < end_ms) {
                from = from.max(before);
            }
            Ok(Some(from))
        };
        run().ok().flatten()
    }

    /// Entries and bytes of the events tables, for `/status?store_tables=1`.
    pub fn user_entries_table_bytes(&self) -> Result<serde_json::Value, String> {
        use redb::ReadableTableMetadata;
        let run = || -> Result<serde_json::Value, redb::Error> {
            let r = self.db.begin_read()?;
            let (mut entries, mut stored, mut overhead, mut n) = (0, 0, 0, 0);
            for day in days(&r)? {
                let t = r.open_table(EventsDef::new(&events_table(day)))?;
                let st = t.stats()?;
                (entries, n) = (entries + t.len()?, n + 1);
                (stored, overhead) =
                    (stored + st.stored_bytes(), overhead + st.metadata_bytes() + st.fragmented_bytes());
            }
            Ok(serde_json::json!({"days": n, "entries": entries, "stored_bytes": stored, "overhead_bytes": overhead}))
        };
        run().map_err(|e| format!("store read: {e}"))
    }
}

#[cfg(test)]
#[path = "user_events_tests.rs"]
mod tests;
