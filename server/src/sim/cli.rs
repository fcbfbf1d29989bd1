//! `hlsim` command line: what to simulate, where to write it, and which faults to inject.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;

use crate::node::Mode;

/// Which stream `--drop-block` drops (`all`: the whole block, every stream's line).
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DropStream {
    Diffs,
    Statuses,
    Fills,
    All,
}

impl DropStream {
    /// Whether a line of `stream` is dropped.
    pub fn covers(self, stream: crate::node::Stream) -> bool {
        use crate::node::Stream;
        match self {
            DropStream::Diffs => stream == Stream::Diffs,
            DropStream::Statuses => stream == Stream::Statuses,
            DropStream::Fills => stream == Stream::Fills,
            DropStream::All => true,
        }
    }
}

/// Simulates a Hyperliquid non-validator node: its three hourly output streams and its info server.
#[derive(Clone, Debug, Parser)]
#[command(name = "hlsim", version)]
// Independent on/off switches of the command line, not the states of one thing.
#[allow(clippy::struct_excessive_bools)]
pub struct SimArgs {
    /// Data dir that plays the node's `~/hl/data`.
    #[arg(long)]
    pub out: PathBuf,
    #[arg(long, value_enum, default_value = "by-block")]
    pub mode: Mode,
    /// Number of coins, 3 to 1000: BTC, a spot pair and a builder-dex perp come first, then the other named coins,
    /// then quiet perps `C13`, `C14`, … (mainnet lists about 400 coins, most of them quiet).
    #[arg(long, default_value_t = 8)]
    pub coins: usize,
    /// Resting BTC orders at start.
    #[arg(long, default_value_t = 50_000)]
    pub btc_orders: usize,
    /// Resting orders at start on every other coin.
    #[arg(long, default_value_t = 3_000)]
    pub orders_per_coin: usize,
    /// Mean block cadence (each interval jitters ±25%); 0 = as fast as possible.
    #[arg(long, default_value_t = 80)]
    pub block_ms: u64,
    /// local_time − block_time.
    #[arg(long, default_value_t = 150)]
    pub node_lag_ms: u64,
    /// Block times (and the fill, order and status times within) advance this many times faster than the wall
    /// clock from the simulator's start, so tests see candles close in seconds; `local_time` stays the wall clock.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub time_scale: u32,
    /// Activity relative to mainnet (1.0 ≈ 450 raw diffs per block).
    #[arg(long, default_value_t = 1.0)]
    pub rate: f64,
    /// Rejected order statuses per raw diff (mainnet ≈ 20).
    #[arg(long, default_value_t = 20)]
    pub reject_ratio: u32,
    #[arg(long, default_value_t = 1_000_000_000)]
    pub start_height: u64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Distinct users placing orders.
    #[arg(long, default_value_t = super::market::USERS)]
    pub users: usize,
    /// Stop producing after this many blocks (0 = never).
    #[arg(long, default_value_t = 0)]
    pub blocks: u64,
    /// Exit once the last block is written instead of serving the info API until a signal.
    #[arg(long)]
    pub exit_when_done: bool,
    /// The node's info server: answers exactly the types a real node's `--serve-info` does.
    #[arg(long, default_value = "127.0.0.1:3001")]
    pub info_listen: SocketAddr,
    /// Also serve the public API's info server here (the node's types but fileSnapshot, plus asset contexts,
    /// l2Book, allMids, candleSnapshot, fundingHistory), for tests of what hlbook asks the official API. Prints
    /// `exchange listening on ADDR`. Off by default.
    #[arg(long)]
    pub exchange_listen: Option<SocketAddr>,
    /// Hold every answer of both info servers this long (a busy node), to test what reaches them.
    #[arg(long, default_value_t = 0)]
    pub info_delay_ms: u64,
    /// CSV of when each block's lines were written: per stream (fills, statuses, diffs) and the block's last line,
    /// in Unix ns. By-block lines are written in the node's order, fills → diffs → statuses (as every block of the
    /// mainnet capture is, by its lines' `local_time`), so the status line is the last.
    #[arg(long)]
    pub timing: Option<PathBuf>,

    /// Write only the first half of this block's diffs line, pause, and glue the next block on to the fragment.
    #[arg(long)]
    pub stop_mid_line_at: Option<u64>,
    /// Sleep this long before producing `--pause-at`'s block (and after a `--stop-mid-line-at` fragment).
    #[arg(long, default_value_t = 2)]
    pub pause_secs: u64,
    #[arg(long)]
    pub pause_at: Option<u64>,
    /// After this block, write the last `--restart-back` blocks' lines again, byte-identical.
    #[arg(long)]
    pub restart_at: Option<u64>,
    #[arg(long, default_value_t = 5)]
    pub restart_back: u64,
    /// Don't write this block's line(s) of `--drop-stream`.
    #[arg(long)]
    pub drop_block: Option<u64>,
    #[arg(long, value_enum, default_value = "diffs")]
    pub drop_stream: DropStream,
    /// Write this block's statuses line corrupted (still newline-terminated).
    #[arg(long)]
    pub corrupt_at: Option<u64>,
    /// By-block: write this block's diffs line with one price changed (events that differ from other nodes').
    #[arg(long)]
    pub differ_at: Option<u64>,
    /// Another node writing the same blocks into its own data dir: `DIR[,key=value...]`, repeat for more. Keys:
    /// `delay` (ms after the block is produced, or `capture`: a draw per block from the mainnet capture's node
    /// lag, 324-578 ms), `seed` (of those draws), and its own faults: `pause_at`, `pause_secs`, `restart_at`,
    /// `restart_back`, `drop_block`, `drop_stream`, `corrupt_at`, `differ_at` (the flags of the same names apply
    /// to the --out node only).
    #[arg(long = "node", value_name = "DIR,KEY=VALUE...")]
    pub nodes: Vec<String>,
    /// Write delay of the --out node, as a --node's `delay` (it then writes from a thread of its own, and
    /// --pause-at still pauses the whole producer).
    #[arg(long)]
    pub write_delay: Option<String>,
    /// Write each block's lines in one burst, instead of spread over a processing span drawn from the mainnet
    /// capture's (p50 14.7 ms, at most 60% of --block-ms): streaming lines across the span, by-block lines at its end.
    /// `--burst` alone or `--burst true|false`.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set, default_value_t = false)]
    pub burst: bool,
    /// The first `--snapshot-mismatch-count` fileSnapshot answers are wrong for this coin.
    #[arg(long)]
    pub snapshot_mismatch: Option<String>,
    #[arg(long, default_value_t = 1)]
    pub snapshot_mismatch_count: u32,
    /// Advance the hour-file clock one hour every N real seconds, from 22:00 UTC today.
    #[arg(long)]
    pub rollover_secs: Option<u64>,
    /// After each rollover keep only the newest N hour files per stream (0 = keep all).
    #[arg(long, default_value_t = 0)]
    pub prune_keep: usize,
    /// Hold each delayed block's last line this many ms between stamping its `local_time` and writing it (node
    /// output buffering: the time belongs to hlbook's `node_write_to_read` stage).
    #[arg(long, default_value_t = 0.0)]
    pub delay_last_line_ms: f64,
    /// Delay only blocks whose height is a multiple of K (1 = every block).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub delay_every: u64,
    /// Also hold each delayed block's last line until FILE holds a height at or above the block's (nothing is held
    /// while FILE does not exist): a test releases the blocks itself, so what it checks happens before the line is
    /// written by cause, not because a hold was long enough.
    #[arg(long)]
    pub hold_last_line_until: Option<PathBuf>,
    /// Also write `misc_events` (fundings, deposits, withdrawals, transfers), as the node's flag of that name.
    #[arg(long)]
    pub write_misc_events: bool,
    /// With `--write-misc-events`: a funding round every N blocks (the exchange's is hourly).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    pub funding_every_blocks: u64,
    /// Also run TWAP orders: slices over later blocks whose fills carry the TWAP's `twapId`, and their
    /// `node_twap_statuses`, as a node with `--write-fills` writes them. Off: every stream stays as without it.
    #[arg(long)]
    pub write_twaps: bool,
    /// Liquidations: now and then an open perp position is closed by a market order whose fills carry the
    /// `liquidation` object, and (with --write-misc-events) the user's `liquidation` ledger update. Off: every
    /// stream stays as without it.
    #[arg(long)]
    pub write_liquidations: bool,
}

impl SimArgs {
    /// Defaults with `out` (tests and embedding).
    pub fn with_out(out: impl Into<PathBuf>) -> SimArgs {
        let mut a = SimArgs::parse_from(["hlsim", "--out", "."]);
        a.out = out.into();
        a
    }
}
