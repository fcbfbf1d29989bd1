//! The `hlbook` command line: subcommands over the library. `main.rs` only parses and dispatches.

pub mod process;
pub mod relay;
pub mod replay;
pub mod serve;
mod store_misc;
pub mod systemd;

use clap::{Parser, Subcommand};

/// Self-hosted Hyperliquid order-book server with built-in latency auditing.
#[derive(Debug, Parser)]
#[command(name = "hlbook", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Replay captured node files from a snapshot and print each block's book (the capture checker).
    Replay(replay::ReplayArgs),
    /// Serve books to WebSocket clients from a node's files or NATS.
    Serve(serve::ServeArgs),
    /// Publish this host's node files into NATS JetStream for servers on other hosts (docs/scale-out.md).
    Relay(relay::RelayArgs),
}

/// Runs a parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Replay(args) => {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
            replay::run(&args, &mut out)?;
            std::io::Write::flush(&mut out)?;
            Ok(())
        }
        Command::Serve(args) => serve::run(&args),
        Command::Relay(args) => relay::run(&args),
    }
}
