//! `hlbook replay`: the operator's capture checker and the oracle for later tests.
//!
//! Loads a snapshot, replays captured node files onto it, and prints one JSON line per applied block (per coin
//! for `l2` and `bbo`). Exits non-zero when any diff did not fit the book or a line or block was lost.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, bail};
use serde_json::json;

use crate::book::l2::{L2Params, LevelAgg, aggregate, write_l2_book_json};
use crate::book::snapshot::load_books;
use crate::book::{Books, CoinBook, Outcome};
use crate::ingest::replay::{ReplayedBlock, replay};
use crate::node::time::nanos_to_millis;
use crate::node::{Mode, Side};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Print {
    L2,
    Bbo,
    Summary,
}

#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// Node L4 snapshot file (`[height, [[coin, [bids, asks]], ...]]`); `.gz` is read as gzip.
    #[arg(long)]
    pub snapshot: PathBuf,
    /// The node's data dir, the one holding `node_raw_book_diffs_by_block/...`.
    #[arg(long)]
    pub node_dir: PathBuf,
    /// Which files to replay: `--batch-by-block` or `--stream-with-block-info` output.
    #[arg(long, value_enum, default_value = "by-block")]
    pub mode: Mode,
    /// Only this coin (default: every coin, one line each).
    #[arg(long)]
    pub coin: Option<String>,
    /// What to print per block.
    #[arg(long, value_enum, default_value = "summary")]
    pub print: Print,
    /// l2: aggregate to this many significant figures (2-5; default full precision).
    #[arg(long)]
    pub n_sig_figs: Option<u8>,
    /// l2: mantissa 1, 2 or 5 (only with --n-sig-figs 5).
    #[arg(long)]
    pub mantissa: Option<u8>,
    /// l2: levels per side (1-100).
    #[arg(long, default_value_t = 20)]
    pub n_levels: usize,
}

/// Runs the replay, writing JSON lines to `out`. Errors when the capture is not exactly replayable.
pub fn run(args: &ReplayArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let params = L2Params::new(args.n_sig_figs, args.mantissa, args.n_levels)?;
    let mut books = load_books(&args.snapshot).with_context(|| "loading the snapshot")?;
    if let Some(c) = &args.coin
        && books.coin(c).is_none()
    {
        eprintln!("note: coin {c:?} is not in the snapshot; it will be printed once it appears");
    }
    let mut printer = Printer { args, params, buf: Vec::with_capacity(1 << 16), levels: [Vec::new(), Vec::new()] };
    let mut write_err = None;
    let result = replay(&mut books, &args.node_dir, args.mode, |step| {
        if write_err.is_none()
            && let Err(e) = printer.step(&step, out)
        {
            write_err = Some(e);
        }
    });
    if let Some(e) = write_err {
        return Err(e).context("writing output");
    }
    result.context("replay stopped")?;
    let c = books.counters();
    eprintln!(
        "replayed to height {}: {} blocks applied, {} orders, {} inconsistencies, {} already applied, {} missing anchors",
        books.height(),
        c.blocks_applied,
        books.order_count(),
        c.inconsistencies,
        c.already_applied,
        c.anchors_missing
    );
    if c.inconsistencies > 0 {
        let untrusted: Vec<String> = books.untrusted().map(std::string::ToString::to_string).collect();
        bail!("{} inconsistencies; untrusted coins: {}", c.inconsistencies, untrusted.join(", "));
    }
    Ok(())
}

struct Printer<'a> {
    args: &'a ReplayArgs,
    params: L2Params,
    buf: Vec<u8>,
    levels: [Vec<LevelAgg>; 2],
}

impl Printer<'_> {
    fn step(&mut self, step: &ReplayedBlock<'_>, out: &mut impl Write) -> anyhow::Result<()> {
        let Outcome::Applied(applied) = step.outcome else {
            return Ok(());
        };
        for inc in &applied.inconsistencies {
            eprintln!("block {}: {} oid {}: {:?}", applied.height, inc.coin, inc.oid, inc.kind);
        }
        let books = step.books;
        match self.args.print {
            Print::Summary => {
                let c = books.counters();
                let line = json!({
                    "height": applied.height,
                    "orders": books.order_count(),
                    "coins": books.coin_names().len(),
                    "changed": applied.changed.iter().map(|c| &**c).collect::<Vec<_>>(),
                    "diffs": step.block.diffs.len(),
                    "statuses": step.block.statuses.len(),
                    "rejectedStatuses": step.block.rejected_statuses,
                    "fills": step.block.fills.len(),
                    "inconsistencies": applied.inconsistencies.len(),
                    "anchorsMissing": applied.anchors_missing,
                    "statuslessSystem": applied.statusless_system,
                    "totals": {"blocks": c.blocks_applied, "inconsistencies": c.inconsistencies, "alreadyApplied": c.already_applied},
                });
                serde_json::to_writer(&mut *out, &line)?;
                out.write_all(b"\n")?;
            }
            Print::L2 | Print::Bbo => {
                for coin in self.coins(books) {
                    if let Some(book) = books.coin(&coin) {
                        self.write_book(applied.height, books, book, out)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn coins(&self, books: &Books) -> Vec<crate::node::Coin> {
        match &self.args.coin {
            Some(c) => vec![c.as_str().into()],
            None => books.coin_names(),
        }
    }

    fn write_book(&mut self, height: u64, books: &Books, book: &CoinBook, out: &mut impl Write) -> anyhow::Result<()> {
        let time = nanos_to_millis(books.block_time());
        self.buf.clear();
        write!(self.buf, "{{\"height\":{height},")?;
        if self.args.print == Print::Bbo {
            let side = |s| book.best(s).map(|(px, l)| json!({"px": px, "sz": l.sz, "n": l.n}));
            let bbo = json!({"coin": &**book.coin(), "time": time, "bbo": [side(Side::Bid), side(Side::Ask)]});
            self.buf.extend_from_slice(b"\"bbo\":");
            serde_json::to_writer(&mut self.buf, &bbo)?;
        } else {
            for side in [Side::Bid, Side::Ask] {
                let levels = book.levels(side).map(|(px, l)| LevelAgg { px, sz: l.sz, n: l.n });
                aggregate(side, levels, &self.params, None, &mut self.levels[side.index()]);
            }
            self.buf.extend_from_slice(b"\"l2Book\":");
            write_l2_book_json(&mut self.buf, book.coin(), time, &self.levels[0], &self.levels[1]);
        }
        self.buf.extend_from_slice(b"}\n");
        out.write_all(&self.buf)?;
        Ok(())
    }
}
