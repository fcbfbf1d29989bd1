//! A Hyperliquid node simulator (`hlsim`): writes the three node streams exactly as a real non-validator does
//! (hour files, by-block or streaming lines, realistic volume) and answers its info server with exactly the types
//! a real node answers (`info`), with faults to inject on demand. On request (`--exchange-listen`) it also plays
//! the public API's info server over the same market, for tests of what hlbook asks upstream.
//!
//! It keeps its own books (`orders`), independent of the server's engine in `crate::book`: the server is tested
//! against the simulator, so the two must not share the code under test. The producer changes the books and
//! writes a block's lines under one lock, and publishes the block's height before releasing it; the info server
//! copies the books under that lock, so a snapshot's height always matches its books and all written lines.

pub mod accounts;
pub mod block;
pub mod cli;
pub mod coins;
pub mod ctxs;
pub mod events;
pub mod faults;
pub mod fmt;
pub mod info;
pub mod market;
pub mod misc;
mod misc_out;
pub mod nodes;
pub mod orders;
pub mod span;
pub mod writer;

#[cfg(test)]
#[path = "sim_faults_tests.rs"]
mod faults_tests;
#[cfg(test)]
#[path = "sim_tests.rs"]
mod tests;
#[cfg(test)]
#[path = "sim_twaps_tests.rs"]
mod twaps_tests;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use block::BlockOut;
pub use cli::SimArgs;
use coins::CoinSpec;
use faults::Faults;
use market::{Market, MarketConfig};
use nodes::{Delay, NodeSpec, NodeThread};
use writer::{HourClock, NodeFileWriter};

use crate::node::time::now_nanos;

/// What the producer and the info server share.
#[derive(Debug)]
pub struct SimShared {
    pub state: Mutex<ChainState>,
    pub coins: Vec<CoinSpec>,
    /// Coin whose snapshot answers are wrong while `ChainState::mismatch_left` > 0.
    pub mismatch: Option<String>,
}

#[derive(Debug)]
pub struct ChainState {
    pub market: Market,
    /// Last block whose lines were all written (start height − 1 before the first).
    pub height: u64,
    pub mismatch_left: u32,
}

/// The producer: builds each block, writes it, and keeps the cadence.
#[derive(Debug)]
pub struct Sim {
    shared: Arc<SimShared>,
    /// The `--out` node, written in the producer's thread (`None` when it has a write delay: then it is in
    /// `nodes`).
    writer: Option<NodeFileWriter>,
    /// Nodes with threads of their own (`--node`, a delayed `--out`), each handed every block.
    nodes: Vec<NodeThread>,
    out: BlockOut,
    faults: Faults,
    next: u64,
    last: Option<u64>,
    block_ms: u64,
    lag_ns: i64,
    /// The wall clock at start and `--time-scale`: block time runs `scale` times faster from `start`.
    clock: (i64, i64),
    jitter: Xoshiro256PlusPlus,
    /// `--write-misc-events`: fundings and ledger updates.
    misc: Option<misc::MiscSim>,
    /// `--write-twaps`: TWAP orders and their slices.
    twaps: Option<market::twap::TwapSim>,
    /// `--write-liquidations`: positions closed by the exchange.
    liquidations: Option<market::liquidations::LiquidationSim>,
}

impl Sim {
    pub fn new(args: &SimArgs) -> anyhow::Result<Sim> {
        anyhow::ensure!(args.coins >= 3, "--coins must be at least 3 (BTC, a spot pair, a builder perp)");
        let coins = coins::universe(args.coins);
        anyhow::ensure!(args.coins <= coins::MAX_COINS, "--coins is at most {}", coins::MAX_COINS);
        let start = now_nanos();
        let market = Market::new(MarketConfig {
            coins: coins.clone(),
            btc_orders: args.btc_orders,
            orders_per_coin: args.orders_per_coin,
            diffs_per_block: market::scaled_diffs(args.rate),
            reject_ratio: args.reject_ratio,
            seed: args.seed,
            start_ms: (start / 1_000_000) as u64,
            users: args.users,
        });
        let faults = Faults::from_args(args);
        let mut writer = NodeFileWriter::new(
            &args.out,
            args.mode,
            HourClock::new(args.rollover_secs),
            args.prune_keep,
            faults.clone(),
        );
        if let Some(t) = &args.timing {
            writer.timing(t)?;
        }
        if !args.burst {
            writer.spread(span::Spans::new(args.block_ms, args.seed));
        }
        writer.write_misc_events(args.write_misc_events);
        writer.write_twaps(args.write_twaps);
        let mut nodes = Vec::new();
        let mut writer = Some(writer);
        if let Some(d) = &args.write_delay {
            let delay = Delay::parse(d).map_err(anyhow::Error::msg)?;
            // The producer itself pauses for --pause-at; the node thread must not pause again.
            let f = Faults { pause_at: None, ..faults.clone() };
            let w = writer.take().expect("the --out writer");
            nodes.push(NodeThread::start(w, f, delay, args.seed ^ 0x6f7574, "hlsim-node1".into()));
        }
        for (i, spec) in args.nodes.iter().enumerate() {
            let n = NodeSpec::parse(spec, i + 2).map_err(anyhow::Error::msg)?;
            let mut w = nodes::writer(&n.dir, args.mode, args.rollover_secs, args.prune_keep, &n.faults);
            w.write_misc_events(args.write_misc_events);
            w.write_twaps(args.write_twaps);
            if !args.burst {
                w.spread(span::Spans::new(args.block_ms, n.seed));
            }
            nodes.push(NodeThread::start(w, n.faults, n.delay, n.seed, format!("hlsim-node{}", i + 2)));
        }
        let state = ChainState {
            market,
            height: args.start_height.saturating_sub(1),
            mismatch_left: if args.snapshot_mismatch.is_some() { args.snapshot_mismatch_count } else { 0 },
        };
        let shared = Arc::new(SimShared { state: Mutex::new(state), coins, mismatch: args.snapshot_mismatch.clone() });
        Ok(Sim {
            shared,
            writer,
            nodes,
            out: BlockOut::default(),
            faults,
            next: args.start_height,
            last: (args.blocks > 0).then(|| args.start_height + args.blocks - 1),
            block_ms: args.block_ms,
            lag_ns: args.node_lag_ms as i64 * 1_000_000,
            clock: (start, i64::from(args.time_scale)),
            jitter: Xoshiro256PlusPlus::seed_from_u64(args.seed ^ 0x5eed),
            misc: args.write_misc_events.then(|| misc::MiscSim::new(args.seed, args.funding_every_blocks)),
            twaps: args.write_twaps.then(|| market::twap::TwapSim::new(args.seed)),
            liquidations: args.write_liquidations.then(|| market::liquidations::LiquidationSim::new(args.seed)),
        })
    }

    pub fn shared(&self) -> Arc<SimShared> {
        self.shared.clone()
    }

    /// Height of the next block to produce.
    pub fn next_height(&self) -> u64 {
        self.next
    }

    /// The last produced block's events (tests).
    pub fn last_block(&self) -> &BlockOut {
        &self.out
    }

    /// Whether `--blocks` have all been produced.
    pub fn done(&self) -> bool {
        self.last.is_some_and(|l| self.next > l)
    }

    /// Produces and writes one block, applying the faults due at its height (pauses sleep without the lock).
    pub fn step(&mut self) -> std::io::Result<[i64; 3]> {
        let h = self.next;
        if self.faults.pause_at == Some(h) {
            tracing::info!(height = h, secs = self.faults.pause.as_secs(), "pausing before block (node silence)");
            std::thread::sleep(self.faults.pause);
        }
        let written = {
            let mut st = self.shared.state.lock();
            let (start, scale) = self.clock;
            let block_time = start + (now_nanos() - start) * scale - self.lag_ns;
            st.market.block(h, block_time, &mut self.out);
            if let Some(t) = &mut self.twaps {
                t.block(&mut st.market, h, &mut self.out);
            }
            if let Some(l) = &mut self.liquidations {
                l.block(&mut st.market, &mut self.out);
            }
            if let Some(m) = &mut self.misc {
                m.block(&mut st.market, h, block_time, &mut self.out.misc);
            }
            let produced = Instant::now();
            let mut written = [0; 3];
            if let Some(w) = &mut self.writer {
                written = w.write_block(&self.out)?;
                if self.faults.restart_at == Some(h) {
                    tracing::info!(
                        height = h,
                        back = self.faults.restart_back,
                        "re-emitting blocks as a restarted node"
                    );
                    w.reemit()?;
                }
            }
            if !self.nodes.is_empty() {
                let block = Arc::new(self.out.clone());
                for n in &self.nodes {
                    n.send(block.clone(), produced);
                }
            }
            st.height = h;
            written
        };
        self.next += 1;
        if self.faults.stop_mid_line_at == Some(h) {
            tracing::info!(height = h, "stopped mid-line; pausing before carrying on");
            std::thread::sleep(self.faults.pause);
        }
        Ok(written)
    }

    /// Waits until every node with a thread of its own has written every block produced so far, and stops them.
    pub fn finish_nodes(&mut self) -> std::io::Result<()> {
        for n in &mut self.nodes {
            n.finish()?;
        }
        Ok(())
    }

    /// The gap before the next block: `--block-ms` ±25%.
    fn interval(&mut self) -> Duration {
        if self.block_ms == 0 {
            return Duration::ZERO;
        }
        let ms = self.block_ms;
        Duration::from_micros(self.jitter.random_range(ms * 750..=ms * 1250))
    }

    /// Produces blocks at the cadence until done or `stop` is set.
    pub fn produce(&mut self, stop: &AtomicBool) -> std::io::Result<()> {
        let mut due = Instant::now();
        while !self.done() && !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            let paused = self.faults.pause_at == Some(self.next) || self.faults.stop_mid_line_at == Some(self.next);
            self.step()?;
            due = if paused { Instant::now().max(due) } else { due } + self.interval();
        }
        Ok(())
    }
}

/// Runs the simulator: producer thread, info server, and signal handling. Exits 0 on SIGINT/SIGTERM.
pub fn run(args: SimArgs) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let r = rt.block_on(serve(args));
    rt.shutdown_timeout(Duration::from_millis(200));
    r
}

async fn serve(args: SimArgs) -> anyhow::Result<()> {
    let mut sim = Sim::new(&args)?;
    let listener = tokio::net::TcpListener::bind(args.info_listen).await?;
    let addr = listener.local_addr()?;
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        writeln!(out, "info listening on {addr}")?;
        out.flush()?;
    }
    let orders = sim.shared.state.lock().market.order_count();
    let names: Vec<&str> = sim.shared.coins.iter().map(|c| c.name).collect();
    tracing::info!(out = %args.out.display(), mode = ?args.mode, coins = ?names, orders, info = %addr,
        start_height = args.start_height, "hlsim started");
    let delay = Duration::from_millis(args.info_delay_ms);
    let app = info::router_with(sim.shared(), info::Role::Node, delay);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "info server failed");
        }
    });
    if let Some(addr) = args.exchange_listen {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            writeln!(out, "exchange listening on {addr}")?;
            out.flush()?;
        }
        let app = info::router_with(sim.shared(), info::Role::Exchange, delay);
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "exchange info server failed");
            }
        });
    }
    let stop = Arc::new(AtomicBool::new(false));
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    let producer_stop = stop.clone();
    std::thread::Builder::new().name("hlsim-producer".into()).spawn(move || {
        let r = sim.produce(&producer_stop).and_then(|()| sim.finish_nodes());
        let _ = done_tx.send((r, sim.next_height()));
    })?;
    tokio::select! {
        () = signal() => {
            stop.store(true, Ordering::Relaxed);
            tracing::info!("signal received; exiting");
            return Ok(());
        }
        r = done_rx => {
            let (r, next) = r?;
            r?;
            tracing::info!(last_height = next - 1, "all blocks produced");
        }
    }
    if args.exit_when_done {
        return Ok(());
    }
    signal().await;
    tracing::info!("signal received; exiting");
    Ok(())
}

/// SIGINT or SIGTERM.
async fn signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGTERM");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
