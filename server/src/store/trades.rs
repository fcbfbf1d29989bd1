//! The stored blocks read back by height, for `tradesByHeight` (`ws::trades_info`): every block of a height range
//! with its fills, newest first, the heights a time range covers, and the oldest block held.
//!
//! The fills tables are keyed by height (with a per-user index) and have no per-coin index, so a coin's trades are
//! the blocks of the range decoded whole and filtered by the caller, which caps how many blocks a read may span.
//! A block's time is its fills' `time` (the node writes the block time in ms on every fill), so a time range
//! becomes heights by a binary search over heights, each probe one block decoded.

use redb::{ReadOnlyTable, ReadableTable};

use super::Store;
use super::blocks;
use super::schema::{BlocksDef, FillsKind, fills_table};
use crate::node::event::HexBytes;
use crate::node::fills_light::fill_of_coin;
use crate::node::{Coin, Fill};

/// One stored block's fills: every user's, in the node's order, each object as the node wrote it.
pub type StoredFills = Vec<([u8; 20], String)>;

/// The fills tables of every day held, oldest first: heights rise with days, so together they are one sequence.
struct Days(Vec<ReadOnlyTable<u64, &'static [u8]>>);

impl Days {
    fn open(r: &redb::ReadTransaction) -> Result<Days, redb::Error> {
        let mut days = super::fills_tables::days(r)?;
        days.reverse();
        let mut tables = Vec::with_capacity(days.len());
        for d in days {
            if let Ok(t) = r.open_table(BlocksDef::new(&fills_table(FillsKind::Blocks, d))) {
                tables.push(t);
            }
        }
        Ok(Days(tables))
    }

    /// Every stored block of `lo..=hi`, newest first, until `visit` returns false.
    fn newest_first(
        &self,
        lo: u64,
        hi: u64,
        mut visit: impl FnMut(u64, StoredFills) -> bool,
    ) -> Result<(), redb::Error> {
        for t in self.0.iter().rev() {
            for e in t.range(lo..=hi)?.rev() {
                let (h, v) = e?;
                // A value this version cannot read holds no fills it can give.
                let fills = blocks::decode(v.value(), None).unwrap_or_default();
                if !visit(h.value(), fills) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// The first (`last`: the last) block of `lo..=hi` whose fills say its time: (height, time).
    fn timed(&self, lo: u64, hi: u64, last: bool) -> Result<Option<(u64, i64)>, redb::Error> {
        let mut found = None;
        let mut take = |h: u64, fills: StoredFills| {
            found = fills.first().and_then(|f| time_of(&f.1)).map(|t| (h, t));
            found.is_none()
        };
        if last {
            self.newest_first(lo, hi, take)?;
        } else {
            'days: for t in &self.0 {
                for e in t.range(lo..=hi)? {
                    let (h, v) = e?;
                    if !take(h.value(), blocks::decode(v.value(), None).unwrap_or_default()) {
                        break 'days;
                    }
                }
            }
        }
        Ok(found)
    }

    fn oldest(&self) -> Result<Option<u64>, redb::Error> {
        for t in &self.0 {
            if let Some((h, _)) = t.first()? {
                return Ok(Some(h.value()));
            }
        }
        Ok(None)
    }

    fn newest(&self) -> Result<Option<u64>, redb::Error> {
        for t in self.0.iter().rev() {
            if let Some((h, _)) = t.last()? {
                return Ok(Some(h.value()));
            }
        }
        Ok(None)
    }

    /// The first stored block whose time is at least `ms` (`after`), or the last whose time is at most `ms`.
    fn at_time(&self, ms: i64, after: bool) -> Result<Option<u64>, redb::Error> {
        let (Some(mut lo), Some(mut hi)) = (self.oldest()?, self.newest()?) else { return Ok(None) };
        let mut found = None;
        // The answer, if any, is in lo..=hi, which every probe (one block decoded) narrows.
        while lo <= hi {
            let mid = lo + (hi - lo) / 2;
            let (next_lo, next_hi) = if after {
                match self.timed(mid, hi, false)? {
                    None => (lo, mid.checked_sub(1)),
                    Some((h, t)) if t >= ms => {
                        found = Some(h);
                        (lo, mid.checked_sub(1))
                    }
                    Some((h, _)) => (h + 1, Some(hi)),
                }
            } else {
                match self.timed(lo, mid, true)? {
                    None => (mid + 1, Some(hi)),
                    Some((h, t)) if t <= ms => {
                        found = Some(h);
                        (mid + 1, Some(hi))
                    }
                    Some((h, _)) => (lo, h.checked_sub(1)),
                }
            };
            let Some(next_hi) = next_hi else { break };
            (lo, hi) = (next_lo, next_hi);
        }
        Ok(found)
    }
}

/// A fill object's `time`.
pub(crate) fn time_of(fill: &str) -> Option<i64> {
    #[derive(serde::Deserialize)]
    struct At {
        time: i64,
    }
    serde_json::from_str::<At>(fill).ok().map(|a| a.time)
}

impl Store {
    /// Every stored block of heights `lo..=hi` with its fills, newest first, until `visit` returns false. Blocks
    /// without a kept fill are not stored, so they are not visited.
    pub fn blocks_newest_first(
        &self,
        lo: u64,
        hi: u64,
        visit: impl FnMut(u64, StoredFills) -> bool,
    ) -> Result<(), String> {
        let read = || Days::open(&self.db.begin_read()?)?.newest_first(lo, hi, visit);
        read().map_err(|e: redb::Error| format!("store read: {e}"))
    }

    /// The heights of the stored blocks with times in `start..=end` (ms): the first and the last; `None` when no
    /// stored block is in it.
    pub fn heights_of_times(&self, start: i64, end: i64) -> Result<Option<(u64, u64)>, String> {
        let read = || -> Result<Option<(u64, u64)>, redb::Error> {
            let days = Days::open(&self.db.begin_read()?)?;
            let (Some(lo), Some(hi)) = (days.at_time(start, true)?, days.at_time(end, false)?) else {
                return Ok(None);
            };
            Ok((lo <= hi).then_some((lo, hi)))
        };
        read().map_err(|e| format!("store read: {e}"))
    }

    /// The last stored block at or below `height` (`after`: the first at or above it) whose fills say its time:
    /// (height, time).
    pub fn block_near(&self, height: u64, after: bool) -> Result<Option<(u64, i64)>, String> {
        let read = || -> Result<Option<(u64, i64)>, redb::Error> {
            let days = Days::open(&self.db.begin_read()?)?;
            if after { days.timed(height, u64::MAX, false) } else { days.timed(0, height, true) }
        };
        read().map_err(|e| format!("store read: {e}"))
    }

    /// `coin`'s fills of every stored block of `lo..=hi` that has some, oldest first, each read as the live trades
    /// channel reads a fill (`node::fills_light::fill_of_coin`): a resumed trades subscription's catch-up.
    pub fn coin_fills(&self, coin: &Coin, lo: u64, hi: u64) -> Result<Vec<(u64, Vec<Fill>)>, String> {
        let mut out = Vec::new();
        self.blocks_newest_first(lo, hi, |height, fills| {
            let mine: Vec<Fill> =
                fills.into_iter().filter_map(|(user, raw)| fill_of_coin(HexBytes(user), &raw, coin)).collect();
            if !mine.is_empty() {
                out.push((height, mine));
            }
            true
        })?;
        out.reverse();
        Ok(out)
    }

    /// The height of the oldest block the store holds fills of (retention drops whole days from the oldest).
    pub fn oldest_height(&self) -> Result<Option<u64>, String> {
        let read = || Days::open(&self.db.begin_read()?)?.oldest();
        read().map_err(|e: redb::Error| format!("store read: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::fills_tables::put_block;

    const DAY: i64 = 86_400_000;

    /// A fill object at `time` with `n` as its tid.
    fn fill(time: i64, n: u64) -> String {
        format!(
            r#"{{"coin":"BTC","px":"1.0","sz":"1.0","side":"B","time":{time},"hash":"0x00","oid":1,"crossed":true,"tid":{n}}}"#
        )
    }

    /// A store holding blocks at the given (height, time) pairs, one fill each.
    fn store_of(blocks: &[(u64, i64)]) -> (tempfile::TempDir, std::sync::Arc<Store>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let w = store.db.begin_write().unwrap();
        for &(h, t) in blocks {
            let f = fill(t, h);
            put_block(&w, h, t, [(&[7u8; 20], f.as_str())], [&[7u8; 20]]).unwrap();
        }
        w.commit().unwrap();
        (dir, store)
    }

    #[test]
    fn blocks_come_newest_first_across_days_and_stop_when_asked() {
        // Heights 10..=20 over a midnight, 15 missing (no kept fill).
        let midnight = 20_000 * DAY;
        let blocks: Vec<(u64, i64)> =
            (10..=20).filter(|h| *h != 15).map(|h| (h, midnight + (h as i64 - 13) * 1000)).collect();
        let (_dir, store) = store_of(&blocks);
        let mut seen = Vec::new();
        store
            .blocks_newest_first(12, 18, |h, fills| {
                assert_eq!(fills, vec![([7u8; 20], fill(midnight + (h as i64 - 13) * 1000, h))]);
                seen.push(h);
                true
            })
            .unwrap();
        assert_eq!(seen, [18, 17, 16, 14, 13, 12]);
        let mut first_two = Vec::new();
        store
            .blocks_newest_first(0, u64::MAX, |h, _| {
                first_two.push(h);
                first_two.len() < 2
            })
            .unwrap();
        assert_eq!(first_two, [20, 19]);
        assert_eq!(store.oldest_height().unwrap(), Some(10));
    }

    #[test]
    fn times_become_the_heights_of_the_blocks_inside_them() {
        let midnight = 20_000 * DAY;
        // Two blocks a second, some heights without a stored block.
        let blocks: Vec<(u64, i64)> =
            (100..400).filter(|h| h % 7 != 0).map(|h| (h, midnight + (h as i64 - 250) * 500)).collect();
        let (_dir, store) = store_of(&blocks);
        let time = |h: u64| midnight + (h as i64 - 250) * 500;
        for (start, end) in
            [(time(120), time(300)), (time(120) + 1, time(300) - 1), (0, i64::MAX), (time(398), i64::MAX)]
        {
            let want: Vec<u64> = blocks.iter().filter(|b| (start..=end).contains(&b.1)).map(|b| b.0).collect();
            let got = store.heights_of_times(start, end).unwrap();
            assert_eq!(got, Some((want[0], *want.last().unwrap())), "{start}..={end}");
        }
        assert_eq!(store.heights_of_times(time(200) + 1, time(200) + 2).unwrap(), None, "between two blocks");
        assert_eq!(store.heights_of_times(time(400), i64::MAX).unwrap(), None, "after the last");
        assert_eq!(store.heights_of_times(0, time(100) - 1).unwrap(), None, "before the first");
        assert_eq!(store.block_near(140, false).unwrap(), Some((139, time(139))), "140 is not stored");
        assert_eq!(store.block_near(140, true).unwrap(), Some((141, time(141))));
        assert_eq!(store.block_near(141, true).unwrap(), Some((141, time(141))));
        assert_eq!(store.block_near(99, false).unwrap(), None);
        let (_empty_dir, empty) = store_of(&[]);
        assert_eq!((empty.heights_of_times(0, i64::MAX).unwrap(), empty.oldest_height().unwrap()), (None, None));
    }
}
