//! `hlsim`: the node simulator. See `hlbook::sim`.

use clap::Parser;
use hlbook::sim::{SimArgs, run};

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    run(SimArgs::parse())
}
