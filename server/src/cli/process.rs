//! What every long-running command (`serve`, `relay`) needs from the process around it: logging set up once, and
//! a clean stop on SIGTERM or SIGINT.

/// Logging for long-running commands: human by default, JSON lines on request.
pub fn init_logging(format: &str, level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let b = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    let _ = if format == "json" { b.json().try_init() } else { b.try_init() };
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
