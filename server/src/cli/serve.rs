//! `hlbook serve`: ingest, validation and the HTTP/WebSocket server, until SIGTERM or SIGINT.
//!
//! Threads: one ingest thread (blocking: files or relay → books), one validation thread, and the tokio runtime
//! for HTTP. Shutdown stops accepting, lets the runtime finish, then stops the threads; exit 0.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

use anyhow::Context;
use axum::serve::ListenerExt;

use super::systemd;
use crate::book::Books;
use crate::config::{Config, Source};
use crate::ingest::info::SnapshotFrom;
use crate::ingest::live::{Ingest, LiveConfig, Shared, SourceSpec};
use crate::ingest::validate::{self, ValidateConfig};
use crate::node::Mode;
use crate::publish::{self, Hub};
use crate::ws::http::{AppState, router};
use crate::ws::info::Passthrough;
use crate::ws::limits::Limits;
use crate::ws::{WsContext, WsCounters};

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// TOML config file; flags override its values (see config/hlbook.toml for every setting).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The node's data dir [default: ~/hl/data].
    #[arg(long)]
    pub node_dir: Option<PathBuf>,
    /// The node's output mode: by-block (--batch-by-block) or streaming (--stream-with-block-info).
    #[arg(long, value_enum)]
    pub mode: Option<Mode>,
    /// `file` (the node's files in --node-dir) or `tcp://HOST:PORT` (an `hlbook relay`) [default: file].
    #[arg(long)]
    pub source: Option<String>,
    /// The node's info server, for snapshots [default: http://127.0.0.1:3001/info].
    #[arg(long)]
    pub info_url: Option<String>,
    /// Where the node writes snapshots we ask for (it must be able to write there).
    #[arg(long)]
    pub snapshot_dir: Option<PathBuf>,
    /// Start from this snapshot file instead of asking the node.
    #[arg(long)]
    pub snapshot_file: Option<PathBuf>,
    /// Address to serve on; repeat for several [default: 127.0.0.1:8000].
    #[arg(long)]
    pub listen: Vec<String>,
    /// Seconds without a block before the state is `stale` [default: 10].
    #[arg(long)]
    pub stale_after: Option<f64>,
    /// Seconds between validations against a node snapshot; 0 disables [default: 60].
    #[arg(long)]
    pub validate_interval: Option<f64>,
    /// Log format: human or json [default: human].
    #[arg(long)]
    pub log_format: Option<String>,
    /// Set any config key, e.g. `--set server.max_connections=50000 --set server.token=s3cret` (every key, its
    /// default and meaning: config/hlbook.toml). Applied over the file, before the flags above.
    #[arg(long = "set", value_name = "SECTION.KEY=VALUE")]
    pub set: Vec<String>,
    /// Check the configuration (file and flags), print it, and exit: 0 when valid.
    #[arg(long)]
    pub check: bool,
}

impl ServeArgs {
    /// Defaults, then the file, then the flags; validated.
    pub fn config(&self) -> anyhow::Result<Config> {
        let mut c = Config::load(self.config.as_deref(), &self.set)?;
        let i = &mut c.ingest;
        set(&mut i.node_dir, &self.node_dir);
        set(&mut i.mode, &self.mode);
        set(&mut i.source, &self.source);
        set(&mut i.info_url, &self.info_url);
        set(&mut i.snapshot_dir, &self.snapshot_dir);
        if self.snapshot_file.is_some() {
            i.snapshot_file = self.snapshot_file.clone();
        }
        set(&mut i.stale_after_secs, &self.stale_after);
        set(&mut i.validate_interval_secs, &self.validate_interval);
        set(&mut c.log.format, &self.log_format);
        if !self.listen.is_empty() {
            c.server.listen = self.listen.clone();
        }
        c.validate()?;
        Ok(c)
    }
}

fn set<T: Clone>(slot: &mut T, flag: &Option<T>) {
    if let Some(v) = flag {
        *slot = v.clone();
    }
}

/// Logging for long-running commands: human by default, JSON lines on request.
pub fn init_logging(format: &str, level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let b = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    let _ = if format == "json" { b.json().try_init() } else { b.try_init() };
}

fn live_config(c: &Config) -> anyhow::Result<LiveConfig> {
    let source = match c.source()? {
        Source::File => SourceSpec::Files(c.node_dir()),
        Source::Tcp(addr) => SourceSpec::Tcp(addr),
    };
    let mut snapshots = Vec::new();
    if let Some(f) = &c.ingest.snapshot_file {
        snapshots.push(SnapshotFrom::File(f.clone()));
    }
    if !c.ingest.info_url.is_empty() {
        snapshots.push(SnapshotFrom::Info { url: c.ingest.info_url.clone(), dir: c.ingest.snapshot_dir.clone() });
    }
    Ok(LiveConfig {
        source,
        mode: c.ingest.mode,
        poll_interval: Duration::from_millis(c.ingest.poll_interval_ms),
        stale_after: c.stale_after(),
        snapshots,
    })
}

pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    let c = args.config()?;
    if args.check {
        println!("configuration is valid:\n{c:#?}");
        return Ok(());
    }
    init_logging(&c.log.format, &c.log.level);
    let shared = Arc::new(Shared::new(Books::default(), c.stale_after()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    let ingest = Ingest::new(live_config(&c)?, shared.clone());
    let (s, st) = (shared.clone(), stop.clone());
    threads.push(std::thread::Builder::new().name("hlbook-ingest".into()).spawn(move || ingest.run(&st))?);
    if let Some(interval) = c.validate_interval() {
        let vc = ValidateConfig {
            info_url: c.ingest.info_url.clone(),
            snapshot_dir: c.ingest.snapshot_dir.clone(),
            interval,
        };
        let st = stop.clone();
        threads
            .push(std::thread::Builder::new().name("hlbook-validate".into()).spawn(move || validate::run(vc, s, &st))?);
    }
    tracing::info!(source = %c.ingest.source, mode = ?c.ingest.mode, "hlbook starting");
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let hub = Arc::new(Hub::new(shared.clone(), c.server.backlog_blocks + FEED_MARGIN, c.server.backlog_bytes));
    // userFills snapshots read the node's fills files back (empty when they are not on this host).
    let _ =
        hub.fills_dir.set(publish::user_history::FillsDir { node_dir: c.ingest.node_dir.clone(), mode: c.ingest.mode });
    let publisher = {
        let (hub, st) = (hub.clone(), stop.clone());
        rt.spawn_blocking(move || publish::run(hub, &st))
    };
    let (closing_tx, closing) = tokio::sync::watch::channel(false);
    let passthrough = (c.server.info_passthrough && !c.ingest.info_url.is_empty())
        .then(|| Passthrough { client: reqwest::Client::new(), url: c.ingest.info_url.clone() });
    let ws = Arc::new(WsContext {
        hub,
        cfg: c.server.clone(),
        passthrough,
        limits: Arc::new(Limits::new(&c.server)),
        counters: WsCounters::default(),
        closing,
        user_cap: Default::default(),
    });
    let state = AppState::new(shared.clone(), ws.clone());
    let served = rt.block_on(serve_http(&c.server.listen, state, closing_tx, shared));
    rt.block_on(drain(&ws));
    stop.store(true, Relaxed);
    let _ = rt.block_on(publisher);
    for t in threads {
        let _ = t.join();
    }
    tracing::info!("hlbook stopped");
    served
}

/// Feed ticks kept beyond one connection's backlog, so a connection at its limit still finds its next tick.
const FEED_MARGIN: usize = 64;

async fn serve_http(
    listen: &[String],
    state: AppState,
    closing: tokio::sync::watch::Sender<bool>,
    shared: Arc<Shared>,
) -> anyhow::Result<()> {
    let signals = Shutdown::register()?;
    let app = router(state).into_make_service_with_connect_info::<SocketAddr>();
    let mut tasks = Vec::new();
    for addr in listen {
        let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("binding {addr}"))?;
        let local = listener.local_addr()?;
        // Tests and scripts read the bound address (port 0 picks one) from stdout.
        println!("hlbook listening on {local}");
        tracing::info!(%local, "listening");
        // Frames are small and latency is the product: never let Nagle hold one back.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let (app, mut done) = (app.clone(), closing.subscribe());
        let stopped = async move {
            let _ = done.wait_for(|c| *c).await;
        };
        tasks.push(tokio::spawn(async move { axum::serve(listener, app).with_graceful_shutdown(stopped).await }));
    }
    let readiness = tokio::spawn(systemd::follow_health(shared));
    // Stop accepting on the first signal; upgraded connections are told to close below.
    signals.wait().await;
    readiness.abort();
    systemd::stopping();
    let _ = closing.send(true);
    for t in tasks {
        t.await??;
    }
    Ok(())
}

/// Waits (at most 3 s) for the connections to send their close frames and end.
async fn drain(ws: &WsContext) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(3);
    while ws.limits.open() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// SIGTERM and SIGINT. The handlers are registered when this is made, so a signal that arrives after a
/// readiness notice always means a clean shutdown rather than the default action (death by signal).
#[derive(Debug)]
pub struct Shutdown {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Shutdown {
    /// Registers the handlers; needs a tokio runtime context.
    pub fn register() -> std::io::Result<Shutdown> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Shutdown { term: signal(SignalKind::terminate())?, int: signal(SignalKind::interrupt())? })
    }

    /// Resolves on the first of them.
    pub async fn wait(mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}
