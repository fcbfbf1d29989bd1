//! `hlbook relay`: publishes this host's node files into NATS JetStream (`ingest::nats::publish`), with the
//! node's snapshots beside them (`ingest::nats::snapshot_keeper`), for `hlbook serve --source nats://…` on any
//! host. The older TCP protocol is retired; `--listen` only says so.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use anyhow::Context;

use crate::ingest::nats::metrics::{self, RelayMetrics};
use crate::ingest::nats::publish::PublishConfig;
use crate::ingest::nats::snapshot_keeper::{self, FreshSnapshot, KeeperConfig};
use crate::node::Mode;

#[derive(Debug, clap::Args)]
pub struct RelayArgs {
    /// The node's data dir.
    #[arg(long, default_value = "~/hl/data")]
    pub node_dir: PathBuf,
    /// The node's output mode: by-block or streaming.
    #[arg(long, value_enum, default_value = "by-block")]
    pub mode: Mode,
    /// Lines longer than this many bytes are not published (edges are told they are lost).
    #[arg(long, default_value_t = crate::ingest::limits::MAX_LINE_BYTES)]
    pub max_line_bytes: usize,
    /// The NATS servers to publish into (comma-separated `nats://HOST:PORT`).
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
    /// With --nats: serve `GET /metrics` (Prometheus) on this address, e.g. 127.0.0.1:8002 (relay.env's
    /// ADMIN_LISTEN); "none": no listener. Keep it private.
    #[arg(long, default_value = "none")]
    pub admin_listen: String,
    /// With --admin-listen: nats-server's monitoring port, whose figures /metrics passes on ("" for none).
    #[arg(long, default_value = "http://127.0.0.1:8222")]
    pub nats_monitor: String,
    /// Instead of publishing: create or update, in the JetStream domain of the servers at --nats (a leaf node or
    /// regional cluster), mirrors of the stream and its snapshot store from this domain (the hub's), then exit.
    #[arg(long)]
    pub mirror_from: Option<String>,
    /// Log format: human or json.
    #[arg(long, default_value = "human")]
    pub log_format: String,
    /// Retired with the TCP relay: an error that points to the migration note.
    #[arg(long, hide = true)]
    pub listen: Option<String>,
}

pub fn run(args: &RelayArgs) -> anyhow::Result<()> {
    if args.listen.is_some() {
        anyhow::bail!("hlbook relay --listen: {}", crate::config::TCP_RETIRED);
    }
    let Some(url) = &args.nats else {
        anyhow::bail!("hlbook relay needs --nats nats://HOST:PORT (the NATS servers to publish into)");
    };
    super::process::init_logging(&args.log_format, "info");
    let cfg = crate::config::Config::load(args.config.as_deref(), &[])?;
    if let Some(from) = &args.mirror_from {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        return rt.block_on(crate::ingest::nats::mirror::ensure(url, &cfg.nats, from));
    }
    let metrics = RelayMetrics::new();
    let info_url = args.info_url.clone().unwrap_or(cfg.ingest.info_url);
    let fresh = Arc::new(FreshSnapshot::default());
    let pc = PublishConfig {
        node_dir: crate::config::expand_home(&args.node_dir),
        mode: args.mode,
        url: url.clone(),
        nats: cfg.nats.clone(),
        start_after: args.start_after,
        max_line_bytes: args.max_line_bytes,
        metrics: metrics.clone(),
        fresh: (!info_url.is_empty()).then(|| fresh.clone()),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let st = stop.clone();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let signals = rt.block_on(async { super::process::Shutdown::register() })?;
    if args.admin_listen != "none" {
        let l = rt
            .block_on(tokio::net::TcpListener::bind(&args.admin_listen))
            .with_context(|| format!("relay --admin-listen {}: cannot listen", args.admin_listen))?;
        println!("relay admin listening on {}", l.local_addr()?);
        let monitor = (!args.nats_monitor.is_empty()).then(|| args.nats_monitor.clone());
        rt.spawn(metrics::serve(l, metrics.clone(), monitor));
    }
    std::thread::spawn(move || {
        rt.block_on(signals.wait());
        super::systemd::stopping();
        st.store(true, Relaxed);
    });
    if !info_url.is_empty() {
        let kc = KeeperConfig {
            url: url.clone(),
            nats: pc.nats.clone(),
            info_url,
            snapshot_dir: args.snapshot_dir.clone().unwrap_or(cfg.ingest.snapshot_dir),
            metrics,
            fresh,
        };
        let st = stop.clone();
        std::thread::Builder::new().name("hlbook-snapshots".into()).spawn(move || snapshot_keeper::run(&kc, &st))?;
    }
    // READY=1 once connected with the stream open, not before: `systemctl start` then means publishing.
    let ready = || super::systemd::ready(&format!("publishing {} to NATS", pc.node_dir.display()));
    crate::ingest::nats::publish::run(&pc, &stop, ready)?;
    tracing::info!("publisher stopped");
    Ok(())
}
