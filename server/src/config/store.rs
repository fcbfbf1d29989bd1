//! `[store]`: the embedded history store (candles of every coin and interval, users' fills) kept in hlbook's
//! state directory across restarts.

use std::path::{Path, PathBuf};

use serde::Deserialize;

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// The store's folder; empty: `hlbook-store` beside `ingest.snapshot_dir` (both are hlbook's own state).
    pub dir: PathBuf,
    /// Users' fills are kept this many days (whole UTC days of block time); candles are kept for good.
    pub fills_retention_days: u32,
    /// An info server (`POST …/info`, the official API in production) asked once for the candles older than the
    /// store's first block; empty: never.
    pub seed_url: String,
    /// The coins to seed; empty: every coin of the books.
    pub seed_coins: Vec<String>,
    /// Pause between two seed requests, in milliseconds (the official API limits requests per IP).
    pub seed_pause_ms: u64,
    /// Whose fills the store keeps: every user's, or followed users' only (`fills_follow` and userFills
    /// subscribers).
    pub fills_users: FillsUsers,
    /// Users always followed (`0x` and 40 hex digits), in followed mode.
    pub fills_follow: Vec<String>,
    /// Candles kept per coin and fixed interval, the newest (the exchange serves 5000); 0: every one, for good.
    pub candles_kept: u32,
    /// Most users followed at once, in followed mode. A full set drops the user whose last userFills subscriber left
    /// longest ago; only when every followed user has a subscriber is a new one refused (a notice).
    pub fills_follow_max: usize,
}

/// `store.fills_users`.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum FillsUsers {
    /// Every user's fills (about 5 GB a day at mainnet volume).
    #[default]
    All,
    /// Followed users' fills only: the way to keep the store under 1 GB a month.
    Followed,
}

impl Default for StoreConfig {
    fn default() -> StoreConfig {
        StoreConfig {
            dir: PathBuf::new(),
            fills_retention_days: 2,
            seed_url: String::new(),
            seed_coins: Vec::new(),
            seed_pause_ms: 500,
            fills_users: FillsUsers::All,
            fills_follow: Vec::new(),
            fills_follow_max: 1000,
            candles_kept: 5000,
        }
    }
}

impl StoreConfig {
    /// The folder to open: `dir`, or `hlbook-store` beside the snapshot dir.
    pub fn dir_beside(&self, snapshot_dir: &Path) -> PathBuf {
        if !self.dir.as_os_str().is_empty() {
            return super::expand_home(&self.dir);
        }
        let parent = snapshot_dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        parent.join("hlbook-store")
    }

    pub(super) fn check(&self) -> Result<(), super::ConfigError> {
        if self.fills_retention_days == 0 || self.fills_retention_days > 3650 {
            return Err(super::invalid("store.fills_retention_days", "must be 1..=3650"));
        }
        if !self.seed_url.is_empty() && !self.seed_url.starts_with("http") {
            return Err(super::invalid("store.seed_url", "must be an http:// or https:// URL, or empty"));
        }
        if let Some(bad) = self.fills_follow.iter().find(|u| crate::node::Address::parse(&u.to_lowercase()).is_none()) {
            return Err(super::invalid("store.fills_follow", &format!("{bad:?} is not 0x and 40 hex digits")));
        }
        if self.fills_follow_max == 0 || self.fills_follow_max < self.fills_follow.len() {
            return Err(super::invalid("store.fills_follow_max", "must be at least 1 and store.fills_follow's length"));
        }
        Ok(())
    }

    /// The users of `fills_follow`.
    pub fn follow_users(&self) -> Vec<crate::node::Address> {
        self.fills_follow.iter().filter_map(|u| crate::node::Address::parse(&u.to_lowercase())).collect()
    }
}
