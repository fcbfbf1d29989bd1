//! Which users' fills the store keeps (`store.fills_users`): every user's ("all"), or only followed users'
//! ("followed": those of `store.fills_follow` and those any client subscribed to with userFills, the one channel
//! whose first frame reads the store).
//!
//! Why: every user's fills are about 5 GB a day at mainnet volume; a store that keeps only the users someone reads
//! stays far under the 1 GB a month. The followed set is a table (`followed`), so a restart keeps
//! following; it is capped (`store.fills_follow_max`) so anonymous subscribers cannot grow the store without
//! limit. A full set makes room by dropping the user nobody has wanted for longest: no userFills subscription
//! now, not in `store.fills_follow`, the oldest last subscription (`followed_seen`, kept across restarts). So
//! subscribers who left cannot hold the set: a new user is refused only while every followed user has a
//! subscriber or is configured. A dropped user's stored fills stay until retention; followed again, its fills are
//! read back from the files as for any new user.
//!
//! A newly followed user's older fills are read back from the node's fills files (`files::read_blocks`, the
//! backfill's reader) on a thread of their own, and merged into the blocks already stored. The writer takes new
//! users at a commit: blocks it commits after include them, blocks up to that height are the read-back's. A
//! userFills read of a user being read back waits for it (`wait_read_back`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use redb::{ReadableTable, TableDefinition, WriteTransaction};
use rustc_hash::{FxHashMap, FxHashSet};

use super::Store;
use super::blocks;
use super::candle::DAY;
use super::files::{BlockFills, FillsDir, read_blocks};
use super::fills_tables::put_block;
use super::schema::{BlocksDef, FillsKind, day_of, fills_table};
use crate::node::time::now_nanos;

/// Followed users: address → the height up to which their older fills were read back (0: not yet).
pub const FOLLOWED: TableDefinition<&[u8], u64> = TableDefinition::new("followed");
/// Followed users: address → when a client last subscribed to it or left it (ms); the order in which a full set
/// drops users.
pub const FOLLOWED_SEEN: TableDefinition<&[u8], u64> = TableDefinition::new("followed_seen");

/// Blocks of read-back fills merged per transaction.
const MERGE_BLOCKS: usize = 500;

type User = [u8; 20];

/// What a follow request came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Follow {
    /// "all" mode, or a user followed before: its fills are in the store.
    Kept,
    /// Newly followed: fills before now come from the node's files, as far back as they still go.
    New,
    /// The followed set is full: this user's fills are not stored.
    Refused { max: usize },
}

#[derive(Debug, Default)]
struct Sets {
    /// Every followed user (the writer's filter once taken), with when it was last wanted (ms).
    users: FxHashMap<User, i64>,
    /// Followed, not yet taken by the writer.
    requested: Vec<User>,
    /// Taken by the writer, older fills still being read back.
    reading: FxHashSet<User>,
    /// `store.fills_follow`: never dropped.
    pinned: FxHashSet<User>,
    /// userFills subscriptions open now, per user: never dropped while any is.
    live: FxHashMap<User, usize>,
    /// Dropped to make room, not yet taken by the writer.
    dropped: Vec<User>,
    /// Last-wanted times changed since the writer last took them.
    seen: FxHashSet<User>,
}

impl Sets {
    fn wanted(&mut self, user: &User) {
        if let Some(t) = self.users.get_mut(user) {
            *t = now_nanos() / 1_000_000;
            self.seen.insert(*user);
        }
    }

    /// The user nobody has wanted for longest, and that may go: no subscriber, not configured, not being added.
    fn least_wanted(&self) -> Option<User> {
        let free = |u: &User| {
            !self.pinned.contains(u)
                && !self.live.contains_key(u)
                && !self.reading.contains(u)
                && !self.requested.contains(u)
        };
        self.users.iter().filter(|(u, _)| free(u)).min_by_key(|(u, t)| (**t, **u)).map(|(u, _)| *u)
    }
}

/// What the writer takes at a commit: users added and dropped since, and last-wanted times to store.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    pub added: Vec<User>,
    pub dropped: Vec<User>,
    pub seen: Vec<(User, u64)>,
}

/// The followed users, shared by the writer, the read-back thread and the userFills reads.
#[derive(Debug, Default)]
pub struct Followed {
    only: AtomicBool,
    max: AtomicU64,
    sets: Mutex<Sets>,
    read_back: Condvar,
    pub refused: AtomicU64,
    /// Users dropped to make room for others.
    pub dropped: AtomicU64,
}

impl Followed {
    /// Whether the store keeps followed users' fills only.
    pub fn only(&self) -> bool {
        self.only.load(Relaxed)
    }

    /// Followed mode with at most `max` users, starting from the `stored` table's users (`to`: their read-back
    /// was done up to, 0: to do again; and when they were last wanted, ms).
    pub(super) fn set_mode(&self, max: usize, stored: Vec<Stored>) {
        self.only.store(true, Relaxed);
        self.max.store(max as u64, Relaxed);
        let mut s = self.sets.lock();
        for f in stored {
            s.users.insert(f.user, f.seen_ms as i64);
            if f.to == 0 {
                s.requested.push(f.user);
            }
        }
    }

    /// Follows `user` for good (`store.fills_follow`): never dropped to make room.
    pub fn pin(&self, user: &User) -> Follow {
        let f = self.follow(user);
        if !matches!(f, Follow::Refused { .. }) {
            self.sets.lock().pinned.insert(*user);
        }
        f
    }

    /// Whether the store holds `user`'s fills (every user's are kept, or it is followed with none still being read
    /// back), without following it.
    pub fn keeps(&self, user: &User) -> bool {
        if !self.only() {
            return true;
        }
        let s = self.sets.lock();
        s.users.contains_key(user) && !s.reading.contains(user) && !s.requested.contains(user)
    }

    /// Follows `user`; what came of it. A full set drops its least wanted user to make room, if it has one.
    pub fn follow(&self, user: &User) -> Follow {
        if !self.only() {
            return Follow::Kept;
        }
        let mut s = self.sets.lock();
        if s.users.contains_key(user) {
            s.wanted(user);
            return Follow::Kept;
        }
        let max = self.max.load(Relaxed) as usize;
        while s.users.len() >= max {
            let Some(out) = s.least_wanted() else {
                self.refused.fetch_add(1, Relaxed);
                return Follow::Refused { max };
            };
            s.users.remove(&out);
            s.seen.remove(&out);
            s.dropped.push(out);
            self.dropped.fetch_add(1, Relaxed);
            let out = crate::node::event::HexBytes(out);
            tracing::info!(user = %out, "history store: the followed set is full; dropped the user wanted longest ago");
        }
        s.users.insert(*user, now_nanos() / 1_000_000);
        s.seen.insert(*user);
        s.requested.push(*user);
        Follow::New
    }

    /// A userFills subscription to `user` opened: it is not dropped until the last one closes.
    pub fn subscribed(&self, user: &User) {
        let mut s = self.sets.lock();
        *s.live.entry(*user).or_default() += 1;
        s.wanted(user);
    }

    /// A userFills subscription to `user` closed.
    pub fn unsubscribed(&self, user: &User) {
        let mut s = self.sets.lock();
        if let Some(n) = s.live.get_mut(user) {
            *n -= 1;
            if *n == 0 {
                s.live.remove(user);
            }
        }
        s.wanted(user);
    }

    pub fn len(&self) -> usize {
        self.sets.lock().users.len()
    }

    /// Every followed user (the writer's filter on start).
    pub(super) fn users(&self) -> FxHashSet<User> {
        self.sets.lock().users.keys().copied().collect()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The writer: what changed since it last asked. Added users are from now on in its filter and being read
    /// back; dropped ones are out of it.
    pub(super) fn take_changes(&self) -> Changes {
        let mut s = self.sets.lock();
        let added = std::mem::take(&mut s.requested);
        s.reading.extend(added.iter().copied());
        let dropped = std::mem::take(&mut s.dropped);
        let seen = std::mem::take(&mut s.seen);
        let seen = seen.into_iter().filter_map(|u| s.users.get(&u).map(|t| (u, (*t).max(0) as u64))).collect();
        Changes { added, dropped, seen }
    }

    pub(super) fn read_back_done(&self, users: &[User]) {
        let mut s = self.sets.lock();
        for u in users {
            s.reading.remove(u);
        }
        self.read_back.notify_all();
    }

    /// Waits until `user`'s older fills are read back, at most `timeout`; whether they are.
    pub fn wait_read_back(&self, user: &User, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut s = self.sets.lock();
        while s.reading.contains(user) || s.requested.contains(user) {
            if self.read_back.wait_until(&mut s, deadline).timed_out() {
                return false;
            }
        }
        true
    }
}

/// A followed user as the store holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stored {
    pub user: User,
    /// Read back up to this height (0: not yet).
    pub to: u64,
    /// Last wanted (ms; 0: before this was kept).
    pub seen_ms: u64,
}

/// The followed table's users, their read-back heights and when they were last wanted.
pub(super) fn stored(store: &Store) -> Result<Vec<Stored>, redb::Error> {
    let r = store.db.begin_read()?;
    let t = match r.open_table(FOLLOWED) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let seen = match r.open_table(FOLLOWED_SEEN) {
        Ok(t) => Some(t),
        Err(redb::TableError::TableDoesNotExist(_)) => None,
        Err(e) => return Err(e.into()),
    };
    let mut out = Vec::new();
    for e in t.iter()? {
        let (k, v) = e?;
        if let Ok(user) = <User>::try_from(k.value()) {
            let seen_ms = match &seen {
                Some(t) => t.get(k.value())?.map_or(0, |v| v.value()),
                None => 0,
            };
            out.push(Stored { user, to: v.value(), seen_ms });
        }
    }
    Ok(out)
}

/// In the writer's transaction: the new users (not yet read back), the dropped ones, and last-wanted times.
pub(super) fn write_changes(txn: &WriteTransaction, c: &Changes) -> Result<(), redb::Error> {
    let mut t = txn.open_table(FOLLOWED)?;
    let mut seen = txn.open_table(FOLLOWED_SEEN)?;
    for u in &c.dropped {
        t.remove(u.as_slice())?;
        seen.remove(u.as_slice())?;
    }
    for u in &c.added {
        t.insert(u.as_slice(), 0)?;
    }
    for (u, ms) in &c.seen {
        seen.insert(u.as_slice(), *ms)?;
    }
    Ok(())
}

/// A read-back job: users, and the height the writer committed before it took them.
pub type Job = (Vec<User>, u64);

/// Reads back the jobs' users' older fills from `files` until the channel closes. Without files (a NATS source)
/// nothing is read: their history begins when they were followed.
pub fn run_read_back(
    store: &Store,
    files: Option<&FillsDir>,
    retention_days: u32,
    jobs: &Receiver<Job>,
    stop: &AtomicBool,
) {
    while let Ok((mut users, mut to)) = jobs.recv() {
        // Jobs queued meanwhile share one pass over the files: merging is idempotent, and a user's fills of blocks
        // past its own height were written live, so they are skipped.
        while let Ok((more, t)) = jobs.try_recv() {
            users.extend(more);
            to = to.max(t);
        }
        let outcome = match files {
            Some(dir) => read_back(store, dir, (&users, to), retention_days, stop),
            None => Ok(0),
        };
        match outcome {
            Ok(n) => {
                tracing::info!(users = users.len(), to, fills = n, "history store: followed users read back");
                if let Err(e) = mark(store, &users, to) {
                    tracing::error!("history store: marking followed users read back: {e}");
                }
            }
            Err(e) => tracing::error!("history store: reading followed users back from the node's files: {e}"),
        }
        store.follow.read_back_done(&users);
        if stop.load(Relaxed) {
            return;
        }
    }
}

fn mark(store: &Store, users: &[User], to: u64) -> Result<(), redb::Error> {
    let w = store.db.begin_write()?;
    {
        let mut t = w.open_table(FOLLOWED)?;
        for u in users {
            t.insert(u.as_slice(), to.max(1))?;
        }
    }
    w.commit()?;
    Ok(())
}

/// The users' fills of blocks up to `to` still in the files and within retention, merged into the store; the
/// number of fills.
pub(super) fn read_back(
    store: &Store,
    dir: &FillsDir,
    (users, to): (&[User], u64),
    retention_days: u32,
    stop: &AtomicBool,
) -> Result<u64, redb::Error> {
    let want: FxHashSet<User> = users.iter().copied().collect();
    let last_ms = store.meta("last_ms").unwrap_or(0) as i64;
    let cutoff = day_of(last_ms - i64::from(retention_days) * DAY);
    let (mut batch, mut fills, mut err) = (Vec::new(), 0u64, None);
    let read = read_blocks(dir, (0, to), &|| stop.load(Relaxed), &mut |_, _| {}, &mut |b| {
        if err.is_some() || day_of(b.time_ms) < cutoff {
            return;
        }
        let mine: Vec<_> = b.users.into_iter().filter(|(u, _)| want.contains(&u.0)).collect();
        if mine.is_empty() {
            return;
        }
        fills += mine.len() as u64;
        batch.push(BlockFills { height: b.height, time_ms: b.time_ms, trades: Vec::new(), users: mine });
        if batch.len() >= MERGE_BLOCKS
            && let Err(e) = merge(store, &std::mem::take(&mut batch))
        {
            err = Some(e);
        }
    });
    store.status.lines_too_long.fetch_add(read.too_long, Relaxed);
    if let Some(e) = err {
        return Err(e);
    }
    merge(store, &batch)?;
    Ok(fills)
}

/// Adds each block's fills of users it does not hold yet to the stored block (or stores it), with their index
/// entries. Idempotent: a user already in a block (written live after it was followed) is left as it is.
pub(super) fn merge(store: &Store, blocks: &[BlockFills]) -> Result<(), redb::Error> {
    if blocks.is_empty() {
        return Ok(());
    }
    let w = store.db.begin_write()?;
    for b in blocks {
        let held = {
            let t = w.open_table(BlocksDef::new(&fills_table(FillsKind::Blocks, day_of(b.time_ms))))?;
            t.get(b.height)?.and_then(|v| blocks::decode(v.value(), None)).unwrap_or_default()
        };
        let present: FxHashSet<User> = held.iter().map(|(u, _)| *u).collect();
        let added: Vec<(User, &str)> =
            b.users.iter().filter(|(u, _)| !present.contains(&u.0)).map(|(u, f)| (u.0, &**f)).collect();
        if added.is_empty() {
            continue;
        }
        let all = held.iter().map(|(u, f)| (u, f.as_str())).chain(added.iter().map(|(u, f)| (u, *f)));
        put_block(&w, b.height, b.time_ms, all, added.iter().map(|(u, _)| u))?;
    }
    w.commit()?;
    Ok(())
}

/// A new job channel for the writer and the read-back thread.
pub fn channel() -> (Sender<Job>, Receiver<Job>) {
    std::sync::mpsc::channel()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(user: u8, to: u64, seen_ms: u64) -> Stored {
        Stored { user: [user; 20], to, seen_ms }
    }

    #[test]
    fn followed_set_is_capped_and_all_mode_follows_everyone() {
        let f = Followed::default();
        assert_eq!(f.follow(&[1; 20]), Follow::Kept, "all mode keeps every user");
        f.set_mode(2, vec![stored(1, 5, 10), stored(2, 0, 20)]);
        f.subscribed(&[1; 20]);
        assert_eq!(f.follow(&[1; 20]), Follow::Kept, "followed before");
        assert_eq!(f.follow(&[3; 20]), Follow::Refused { max: 2 }, "1 has a subscriber, 2 is being read back");
        assert_eq!(f.refused.load(Relaxed), 1);
        assert_eq!(f.take_changes().added, [[2; 20]], "not read back before the restart: again");
        assert!(!f.wait_read_back(&[2; 20], Duration::ZERO), "being read back");
        f.read_back_done(&[[2; 20]]);
        assert!(f.wait_read_back(&[2; 20], Duration::ZERO));
        let f = Followed::default();
        f.set_mode(3, Vec::new());
        assert_eq!(f.follow(&[4; 20]), Follow::New);
        assert_eq!((f.follow(&[4; 20]), f.len()), (Follow::Kept, 1));
    }

    #[test]
    fn a_full_set_drops_the_user_wanted_longest_ago_that_nobody_holds() {
        let f = Followed::default();
        // 1 configured, 2 and 3 followed before (3 wanted longer ago), 4 subscribed now.
        f.set_mode(4, vec![stored(2, 9, 300), stored(3, 9, 200), stored(4, 9, 100)]);
        assert_eq!(f.pin(&[1; 20]), Follow::New);
        f.subscribed(&[4; 20]);
        f.read_back_done(&f.take_changes().added);
        assert_eq!(f.follow(&[5; 20]), Follow::New, "room made");
        assert_eq!(f.follow(&[6; 20]), Follow::New, "room made again");
        let c = f.take_changes();
        assert_eq!(c.dropped, [[3; 20], [2; 20]], "oldest first, never the subscribed 4 or the configured 1");
        assert_eq!(c.added, [[5; 20], [6; 20]]);
        assert!(c.seen.iter().any(|(u, _)| *u == [5; 20]) && !c.seen.iter().any(|(u, _)| *u == [3; 20]), "{c:?}");
        assert_eq!(f.dropped.load(Relaxed), 2);
        f.read_back_done(&c.added);
        f.subscribed(&[5; 20]);
        f.subscribed(&[6; 20]);
        assert_eq!(f.follow(&[7; 20]), Follow::Refused { max: 4 }, "everyone followed is held");
        // 4 is free once its subscriber leaves.
        f.unsubscribed(&[4; 20]);
        assert_eq!(f.follow(&[7; 20]), Follow::New);
        assert_eq!(f.take_changes().dropped, [[4; 20]]);
        assert_eq!(f.users().len(), 4);
    }
}
