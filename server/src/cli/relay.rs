//! `hlbook relay`: serves this host's node files to `hlbook serve` on other hosts: publishes them into NATS
//! JetStream with `--nats` (`ingest::nats::publish`), with the node's snapshots beside them
//! (`ingest::nats::keeper`), or serves them over the older TCP protocol.

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use anyhow::Context;

use crate::ingest::nats::keeper::{self, KeeperConfig};
use crate::ingest::nats::publish::PublishConfig;
use crate::ingest::relay::{RelayConfig, serve};
use crate::node::Mode;

#[derive(Debug, clap::Args)]
pub struct RelayArgs {
    /// The node's data dir.
    #[arg(long, default_value = "~/hl/data")]
    pub node_dir: PathBuf,
    /// The node's output mode: by-block or streaming.
    #[arg(long, value_enum, default_value = "by-block")]
    pub mode: Mode,
    /// Address to accept servers on.
    #[arg(long, default_value = "127.0.0.1:8100")]
    pub listen: String,
    /// At most this many servers at once.
    #[arg(long, default_value_t = 64)]
    pub max_clients: usize,
    /// Lines longer than this many bytes are not forwarded (the client is told they are lost).
    #[arg(long, default_value_t = crate::ingest::limits::MAX_LINE_BYTES)]
    pub max_line_bytes: usize,
    /// Publish into NATS JetStream at these servers (comma-separated `nats://HOST:PORT`) instead of serving TCP.
    #[arg(long)]
    pub nats: Option<String>,
    /// A config file whose `[nats]` section names the stream, credentials files, TLS CA and retention (see
    /// config/hlbook.toml); credentials are never taken from the command line.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// With an empty stream, publish the lines of blocks after this height (0: every node file present).
    #[arg(long, default_value_t = 0)]
    pub start_after: u64,
    /// With --nats: the node's info server, asked for the snapshots edges fetch over NATS (default: the config's
    /// `ingest.info_url`; "" for none).
    #[arg(long)]
    pub info_url: Option<String>,
    /// With --nats: where the node writes those snapshots before they go to NATS (default: `ingest.snapshot_dir`).
    #[arg(long)]
    pub snapshot_dir: Option<PathBuf>,
    /// Log format: human or json.
    #[arg(long, default_value = "human")]
    pub log_format: String,
}

pub fn run(args: &RelayArgs) -> anyhow::Result<()> {
    super::process::init_logging(&args.log_format, "info");
    let node_dir = crate::config::expand_home(&args.node_dir);
    if let Some(url) = &args.nats {
        return publish(args, node_dir, url);
    }
    let listener = TcpListener::bind(&args.listen).with_context(|| format!("binding {}", args.listen))?;
    let local = listener.local_addr()?;
    println!("relay listening on {local}");
    tracing::info!(%local, node_dir = %node_dir.display(), mode = ?args.mode, "relay serving node lines");
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let signals = rt.block_on(async { super::process::Shutdown::register() })?;
    super::systemd::ready(&format!("relaying {} on {local}", node_dir.display()));
    std::thread::spawn(move || {
        rt.block_on(signals.wait());
        super::systemd::stopping();
        st.store(true, Relaxed);
    });
    let cfg =
        RelayConfig { node_dir, mode: args.mode, max_clients: args.max_clients, max_line_bytes: args.max_line_bytes };
    serve(listener, cfg, stop)?;
    tracing::info!("relay stopped");
    Ok(())
}

fn publish(args: &RelayArgs, node_dir: PathBuf, url: &str) -> anyhow::Result<()> {
    let cfg = crate::config::Config::load(args.config.as_deref(), &[])?;
    let pc = PublishConfig {
        node_dir,
        mode: args.mode,
        url: url.to_string(),
        nats: cfg.nats.clone(),
        start_after: args.start_after,
        max_line_bytes: args.max_line_bytes,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let signals = rt.block_on(async { super::process::Shutdown::register() })?;
    super::systemd::ready(&format!("publishing {} to NATS", pc.node_dir.display()));
    std::thread::spawn(move || {
        rt.block_on(signals.wait());
        super::systemd::stopping();
        st.store(true, Relaxed);
    });
    let info_url = args.info_url.clone().unwrap_or(cfg.ingest.info_url);
    if !info_url.is_empty() {
        let kc = KeeperConfig {
            url: url.to_string(),
            nats: pc.nats.clone(),
            info_url,
            snapshot_dir: args.snapshot_dir.clone().unwrap_or(cfg.ingest.snapshot_dir),
        };
        let st = stop.clone();
        std::thread::Builder::new().name("hlbook-snapshots".into()).spawn(move || keeper::run(&kc, &st))?;
    }
    crate::ingest::nats::publish::run(&pc, &stop)?;
    tracing::info!("publisher stopped");
    Ok(())
}
