//! Supervision of the service's threads and tasks, in one place so every worker is watched the same way: a panic in
//! any of them, or the end of a thread the service needs for its whole life, fails the service with the reason
//! (`/health` 503 and the log) instead of leaving a process that looks alive in front of a feature that stopped.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use super::Shared;
use super::health::Health;

/// What a panic said, as text.
pub fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    let text = p.downcast_ref::<&str>().map(|s| (*s).to_string()).or_else(|| p.downcast_ref::<String>().cloned());
    text.unwrap_or_else(|| "(no message)".into())
}

/// Runs `body`; a panic comes back as its message.
fn caught(body: impl FnOnce()) -> Result<(), String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).map_err(|p| panic_message(p.as_ref()))
}

impl Health {
    /// Runs `body` (a background thread's or job's work); if it panics, the service fails, naming `what`.
    pub fn supervised(&self, what: &str, body: impl FnOnce()) {
        if let Err(why) = caught(body) {
            self.fail(format!("the {what} panicked: {why}"));
        }
    }

    /// `supervised` for a background task: if `body` panics, the service fails, naming `what`.
    pub async fn supervised_task(&self, what: &str, body: impl std::future::Future<Output = ()>) {
        use futures_util::FutureExt;
        if let Err(p) = std::panic::AssertUnwindSafe(body).catch_unwind().await {
            self.fail(format!("the {what} panicked: {}", panic_message(p.as_ref())));
        }
    }
}

/// Watches the threads the service cannot do without (ingest, validation, the publisher, the store's writer): one
/// that panics, or returns while the server is not stopping, fails the service, so that `hlbook serve` exits
/// non-zero and systemd restarts it instead of serving frozen books behind a 200.
#[derive(Clone, Debug)]
pub struct Supervisor {
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
}

impl Supervisor {
    pub fn new(shared: Arc<Shared>, stop: Arc<AtomicBool>) -> Supervisor {
        Supervisor { shared, stop }
    }

    /// Set when the server stops: the watched threads return, and their ending is no failure.
    pub fn stop(&self) -> &AtomicBool {
        &self.stop
    }

    /// Runs the thread `name`'s whole work.
    pub fn run(&self, name: &str, body: impl FnOnce()) {
        let outcome = caught(body);
        if self.stop.load(Relaxed) {
            return;
        }
        let why = match outcome {
            Ok(()) => format!("the {name} thread ended"),
            Err(p) => format!("the {name} thread panicked: {p}"),
        };
        self.shared.health().fail(why);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::book::Books;

    fn watched() -> Supervisor {
        Supervisor::new(Arc::new(Shared::new(Books::default(), Duration::from_secs(10))), Arc::default())
    }

    #[test]
    fn a_panic_fails_the_service_with_its_message() {
        let w = watched();
        w.shared.health().supervised("test job", || panic!("boom"));
        assert_eq!(w.shared.health().failure().as_deref(), Some("the test job panicked: boom"));
    }

    #[test]
    fn a_needed_thread_that_ends_fails_the_service_unless_stopping() {
        let w = watched();
        w.stop.store(true, Relaxed);
        w.run("ingest", || {});
        assert_eq!(w.shared.health().failure(), None, "ending on stop is no failure");
        w.stop.store(false, Relaxed);
        w.run("ingest", || {});
        assert_eq!(w.shared.health().failure().as_deref(), Some("the ingest thread ended"));
    }

    #[test]
    fn a_needed_thread_that_panics_fails_the_service() {
        let w = watched();
        w.run("publisher", || panic!("at pass {}", 3));
        assert_eq!(w.shared.health().failure().as_deref(), Some("the publisher thread panicked: at pass 3"));
    }
}
