//! `hlbook serve`: ingest, validation and the HTTP/WebSocket server, until SIGTERM or SIGINT.
//!
//! Threads: one ingest thread (blocking: files or relay → books), one validation thread, and the tokio runtime
//! for HTTP. Shutdown stops accepting, lets the runtime finish, then stops the threads; exit 0.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

use anyhow::Context;

use super::process::{Shutdown, init_logging};
use super::systemd;
use crate::book::Books;
use crate::config::{Config, ServerConfig, Source};
use crate::ingest::info_client::SnapshotFrom;
use crate::ingest::live::{Ingest, LiveConfig};
use crate::ingest::validate::{self, ValidateConfig};
use crate::node::Mode;
use crate::publish::{self, Hub};
use crate::state::Shared;
use crate::state::supervise::Supervisor;
use crate::store::{self, Store, Writer};
use crate::ws::WsContext;
use crate::ws::admin;
use crate::ws::http::{AppState, router};
use crate::ws::listen::{self, Deadlines};
use crate::ws::tcp_cap::TcpCap;

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
    /// `file` (the node's files in --node-dir), `file:PATH` (another node's data dir) or
    /// `nats://HOST:PORT[/STREAM]` (`hlbook relay --nats`; `[nats]` in --config) [default: file]. Repeat to race several nodes (by-block): each line is taken from the
    /// source that delivers it first and checked against the others.
    #[arg(long)]
    pub source: Vec<String>,
    /// The node's info server, for snapshots [default: http://127.0.0.1:3001/info]; "" with a nats:// source:
    /// snapshots come from that publisher's NATS object store.
    #[arg(long)]
    pub info_url: Option<String>,
    /// Where the node writes snapshots we ask for (it must be able to write there).
    #[arg(long)]
    pub snapshot_dir: Option<PathBuf>,
    /// Start from this snapshot file instead of asking the node.
    #[arg(long)]
    pub snapshot_file: Option<PathBuf>,
    /// Address of the public endpoints (/ws, POST /info, /health); repeat for several [default: 127.0.0.1:8000].
    #[arg(long)]
    pub listen: Vec<String>,
    /// Address of the operator's endpoints (/status, /metrics, /l4snapshot, the status page); repeat for several;
    /// `none` turns them off [default: 127.0.0.1:8001].
    #[arg(long)]
    pub admin_listen: Vec<String>,
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
        set(&mut i.node_dir, self.node_dir.as_ref());
        set(&mut i.mode, self.mode.as_ref());
        if !self.source.is_empty() {
            i.sources.clone_from(&self.source);
        }
        set(&mut i.info_url, self.info_url.as_ref());
        set(&mut i.snapshot_dir, self.snapshot_dir.as_ref());
        if self.snapshot_file.is_some() {
            i.snapshot_file.clone_from(&self.snapshot_file);
        }
        set(&mut i.stale_after_secs, self.stale_after.as_ref());
        set(&mut i.validate_interval_secs, self.validate_interval.as_ref());
        set(&mut c.log.format, self.log_format.as_ref());
        if !self.listen.is_empty() {
            c.server.listen.clone_from(&self.listen);
        }
        if !self.admin_listen.is_empty() {
            c.server.admin_listen = self.admin_listen.iter().filter(|a| *a != "none").cloned().collect();
        }
        c.validate()?;
        Ok(c)
    }
}

fn set<T: Clone>(slot: &mut T, flag: Option<&T>) {
    if let Some(v) = flag {
        *slot = v.clone();
    }
}

fn live_config(c: &Config) -> anyhow::Result<LiveConfig> {
    let sources = c.sources()?;
    let mut snapshots = Vec::new();
    if let Some(f) = &c.ingest.snapshot_file {
        snapshots.push(SnapshotFrom::File(f.clone()));
    }
    let dir = c.ingest.snapshot_dir.clone();
    if !c.ingest.info_url.is_empty() {
        snapshots.push(SnapshotFrom::Info { url: c.ingest.info_url.clone(), dir });
    } else if let Some(target) = sources.iter().find_map(|s| match s {
        Source::Nats(t) => Some(t.clone()),
        Source::Files(_) => None,
    }) {
        snapshots.push(SnapshotFrom::Nats { target, dir });
    }
    Ok(LiveConfig {
        sources,
        mode: c.ingest.mode,
        race_grace: Duration::from_millis(c.ingest.race_grace_ms),
        poll_interval: Duration::from_millis(c.ingest.poll_interval_ms),
        stale_after: c.stale_after(),
        snapshots,
        stream_lines: c.ingest.stream_lines,
        resync_min_interval: Duration::from_secs_f64(c.ingest.resync_min_interval_secs),
        limits: crate::ingest::limits::Limits {
            max_line_bytes: c.ingest.max_line_bytes,
            max_height_jump: c.ingest.max_height_jump,
            race_max_parked_blocks: c.ingest.race_max_parked_blocks,
            max_pending_bytes: c.ingest.max_pending_bytes,
        },
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
    let store = open_store(&c, &shared);
    let ingest = Ingest::new(live_config(&c)?, shared.clone());
    let watch = Supervisor::new(shared.clone(), stop.clone());
    let w = watch.clone();
    threads.push(std::thread::Builder::new().name("hlbook-ingest".into()).spawn(move || {
        w.run("ingest", || ingest.run(w.stop()));
    })?);
    // Validation also repairs the coins racing sources disagree about, so it runs whenever there is a node (or a
    // publisher over NATS) to ask, periodic or not.
    if let Some(from) = live_config(&c)?.snapshots.pop().filter(|f| !matches!(f, SnapshotFrom::File(_))) {
        let vc = ValidateConfig {
            from,
            interval: c.validate_interval(),
            repair_min_interval: Duration::from_secs_f64(c.ingest.resync_min_interval_secs),
        };
        let (w, s) = (watch.clone(), shared.clone());
        threads.push(std::thread::Builder::new().name("hlbook-validate".into()).spawn(move || {
            w.run("validation", || validate::run(vc, s, w.stop()));
        })?);
    }
    let names: Vec<String> = live_config(&c)?.sources.iter().map(Source::label).collect();
    tracing::info!(sources = ?names, mode = ?c.ingest.mode, "hlbook starting");
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let history_wait = std::time::Duration::from_millis(c.server.history_wait_ms);
    let hub = Hub::new(shared.clone(), c.server.backlog_blocks + FEED_MARGIN, c.server.backlog_bytes);
    let hub = hub.with_status_window(Duration::from_secs(c.server.status_window_secs));
    let hub = hub.with_resume_window(Duration::from_secs(c.server.resume_window_secs), c.server.max_users_per_ip);
    let hub = Arc::new(hub.with_history_limits(c.server.history_reads, c.server.history_queue, history_wait));
    threads.extend(start_store(&c, &hub, store, &watch)?);
    threads.extend(start_side_streams(&c, &hub, &watch)?);
    threads.extend(start_store_misc(&c, &hub, &watch)?);
    let publisher = {
        let (hub, w) = (hub.clone(), watch.clone());
        rt.spawn_blocking(move || w.run("publisher", || publish::run(hub, w.stop())))
    };
    let (closing_tx, closing) = tokio::sync::watch::channel(false);
    let ws = Arc::new(WsContext::new(&c.server, &c.ingest.info_url, hub, closing));
    let state = AppState::new(ws.clone());
    let served = rt.block_on(serve_http(&c.server, state, closing_tx, shared.clone()));
    rt.block_on(drain(&ws));
    stop.store(true, Relaxed);
    let _ = rt.block_on(publisher);
    for t in threads {
        let _ = t.join();
    }
    served?;
    if let Some(why) = shared.health().failure() {
        anyhow::bail!("stopped because {why}");
    }
    tracing::info!("hlbook stopped");
    Ok(())
}

/// Opens the history store before ingest starts. A store that cannot be opened (another process holds it, a disk
/// error) leaves the server running without history, said loudly in the log and on `/status`.
fn open_store(c: &Config, shared: &Shared) -> Option<Arc<Store>> {
    let dir = c.store.dir_beside(&c.ingest.snapshot_dir);
    match Store::open(&dir) {
        Ok(store) => {
            tracing::info!(path = %store.path().display(), height = store.height(), "history store open");
            if c.store.fills_users == crate::config::FillsUsers::Followed {
                if let Err(e) = store.follow_only(c.store.fills_follow_max) {
                    tracing::error!("no history store: {e}; candles and userFills start from what is served live");
                    return None;
                }
                for u in c.store.follow_users() {
                    store.follow.pin(&u.0);
                }
                tracing::info!(users = store.follow.len(), "history store: keeping followed users' fills only");
            }
            // Every user's fills, not only the followed users', reach the writer verbatim, from the first line.
            shared.watched().keep_all_fills();
            Some(store)
        }
        Err(e) => {
            tracing::error!("no history store: {e}; candles and userFills start from what is served live");
            None
        }
    }
}

/// Starts the store's writer (before the publisher, which takes the writer's channel).
fn start_store(
    c: &Config,
    hub: &Arc<Hub>,
    store: Option<Arc<Store>>,
    watch: &Supervisor,
) -> anyhow::Result<Option<std::thread::JoinHandle<()>>> {
    let Some(store) = store else { return Ok(None) };
    let (feeder, rx) = store::writer::channel(&store);
    hub.set_store(store.clone(), feeder);
    let seeding = hub.clone();
    std::thread::Builder::new()
        .name("liquidations-seed".into())
        .spawn(move || seeding.seed_liquidations(std::time::Duration::from_secs(300)))
        .context("starting the liquidations seed thread")?;
    // Missed blocks are read back from the node's files on this host: the first file source's.
    let files = first_files_dir(c)?.map(|node_dir| store::files::FillsDir {
        node_dir,
        mode: c.ingest.mode,
        max_line_bytes: c.ingest.max_line_bytes,
    });
    if !c.store.seed_url.is_empty() {
        let seed = store::seed::Seed {
            url: c.store.seed_url.clone(),
            coins: c.store.seed_coins.clone(),
            pause: Duration::from_millis(c.store.seed_pause_ms),
        };
        store::seed::spawn(store.clone(), hub.shared().clone(), seed);
    }
    let writer = Writer::new(store, files, c.store.fills_retention_days).keep_candles(c.store.candles_kept);
    let w = watch.clone();
    Ok(Some(std::thread::Builder::new().name("hlbook-store".into()).spawn(move || {
        w.run("history store", || writer.run(&rx, w.stop()));
    })?))
}

/// Starts following the optional side streams (misc_events, node_twap_statuses) of the first file source (the
/// node's files on this host), one thread each; without one, says on the health that they are not read.
fn start_side_streams(
    c: &Config,
    hub: &Arc<Hub>,
    watch: &Supervisor,
) -> anyhow::Result<Vec<std::thread::JoinHandle<()>>> {
    use crate::ingest::side::{MiscEvents, SideStream, TwapStatuses, follow};
    let shared = hub.shared().clone();
    let Some(node_dir) = first_files_dir(c)? else {
        tracing::info!("no file source: misc_events (userFundings, ledger updates) and TWAP statuses are not read");
        shared.health().misc().set_read(crate::state::misc_stream::MiscRead::Absent);
        shared.health().twaps().set_read(crate::state::misc_stream::MiscRead::Absent);
        return Ok(Vec::new());
    };
    let (mode, poll) = (c.ingest.mode, Duration::from_millis(c.ingest.poll_interval_ms));
    let (dir, h, w, s) = (node_dir.clone(), hub.clone(), watch.clone(), shared.clone());
    let misc = std::thread::Builder::new().name("hlbook-misc".into()).spawn(move || {
        w.run(MiscEvents::NAME, || follow::<MiscEvents>(&dir, mode, poll, &s, w.stop(), &mut |b| h.push_misc(b)));
    })?;
    let (h, w) = (hub.clone(), watch.clone());
    let twaps = std::thread::Builder::new().name("hlbook-twaps".into()).spawn(move || {
        w.run(TwapStatuses::NAME, || {
            follow::<TwapStatuses>(&node_dir, mode, poll, &shared, w.stop(), &mut |b| h.push_twaps(b));
        });
    })?;
    Ok(vec![misc, twaps])
}

/// Starts the store's side stream writers (`cli::store_misc`): each user's fundings and ledger updates from
/// misc_events, and TWAP history from node_twap_statuses, kept from the node's files of the first file source.
/// Without a store or a file source, nothing.
fn start_store_misc(
    c: &Config,
    hub: &Arc<Hub>,
    watch: &Supervisor,
) -> anyhow::Result<Vec<std::thread::JoinHandle<()>>> {
    use super::store_misc::{MiscFiles, run};
    use crate::ingest::side::{MiscEvents, TwapStatuses};
    let (Some(store), Some(node_dir)) = (hub.store(), first_files_dir(c)?) else { return Ok(Vec::new()) };
    let files = MiscFiles { node_dir, mode: c.ingest.mode, poll: Duration::from_millis(c.ingest.poll_interval_ms) };
    let days = c.store.fills_retention_days;
    let (s, f, w) = (store.clone(), files.clone(), watch.clone());
    let misc = std::thread::Builder::new().name("hlbook-store-misc".into()).spawn(move || {
        let kept = (store::misc_writer::STREAM, publish::misc_frames::entries_of as fn(&_) -> _);
        w.run("history store misc_events", || run::<MiscEvents>(&s, &f, days, w.stop(), kept));
    })?;
    let w = watch.clone();
    let twaps = std::thread::Builder::new().name("hlbook-store-twap".into()).spawn(move || {
        let kept = (publish::twap_frames::STREAM, publish::twap_frames::entries_of as fn(&_) -> _);
        w.run("history store node_twap_statuses", || run::<TwapStatuses>(&store, &files, days, w.stop(), kept));
    })?;
    Ok(vec![misc, twaps])
}

/// The data dir of the first source that is a node's files on this host.
fn first_files_dir(c: &Config) -> anyhow::Result<Option<PathBuf>> {
    Ok(c.sources()?.into_iter().find_map(|s| match s {
        Source::Files(dir) => Some(dir),
        Source::Nats(_) => None,
    }))
}

/// Feed ticks kept beyond one connection's backlog, so a connection at its limit still finds its next tick.
const FEED_MARGIN: usize = 64;

/// How long a failed server keeps answering `/health` (503, with the reason) before it exits, so balancers and
/// operators see why.
const FAILED_GRACE: Duration = Duration::from_secs(1);

async fn serve_http(
    cfg: &ServerConfig,
    state: AppState,
    closing: tokio::sync::watch::Sender<bool>,
    shared: Arc<Shared>,
) -> anyhow::Result<()> {
    let signals = Shutdown::register()?;
    let ws = state.ws.clone();
    let public = (router(state.clone()), TcpCap::new(cfg));
    let admin = (admin::router(state), TcpCap::new(cfg));
    let mut tasks = Vec::new();
    // Tests and scripts read the bound addresses (port 0 picks one) from stdout.
    for (addrs, (app, cap), what) in [(&cfg.listen, public, "hlbook"), (&cfg.admin_listen, admin, "hlbook admin")] {
        for addr in addrs {
            let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("binding {addr}"))?;
            let local = listener.local_addr()?;
            println!("{what} listening on {local}");
            tracing::info!(%local, "{what} listening");
            let serving =
                listen::serve(listener, app.clone(), ws.clone(), cap.clone(), Deadlines::new(cfg), closing.subscribe());
            let shared = shared.clone();
            // A listener that dies would leave a process that answers nothing, or no operator endpoints.
            tasks.push(tokio::spawn(async move {
                shared.health().supervised_task(&format!("{what} listener on {local}"), serving).await;
            }));
        }
    }
    let readiness = {
        let shared = shared.clone();
        tokio::spawn(async move {
            shared.health().supervised_task("systemd readiness task", systemd::follow_health(shared.clone())).await;
        })
    };
    // Stop accepting on the first signal, or once a thread the service needs has died; upgraded connections are
    // told to close below.
    tokio::select! {
        () = signals.wait() => {}
        // A needed thread or a supervised worker (candle backfills, userFills snapshots, a listener) died.
        () = shared.health().failed() => tokio::time::sleep(FAILED_GRACE).await,
    }
    readiness.abort();
    systemd::stopping();
    let _ = closing.send(true);
    for t in tasks {
        t.await?;
    }
    Ok(())
}

/// Waits (at most 3 s) for the connections to send their close frames and end.
async fn drain(ws: &WsContext) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(3);
    while ws.limits().open() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
