//! systemd readiness for `Type=notify` units. `serve` sends READY=1 once it listens and serves books (the states
//! for which `/health` answers 200) and STATUS= with the health state on every change (`systemctl status` shows
//! it); the relay (the NATS publisher) once it starts publishing; both send STOPPING=1 on shutdown. Units ordered
//! `After=hlbook.service` (a trading bot on the same host) therefore start against live books, not an empty
//! server. Outside systemd (no NOTIFY_SOCKET) nothing is sent.

use std::sync::Arc;
use std::time::Duration;

use sd_notify::NotifyState;

use crate::state::Shared;

/// How often the health state is looked at; a state change reaches systemd within this.
const EVERY: Duration = Duration::from_millis(200);

/// Runs until the process ends; spawn it once the listeners are bound.
pub async fn follow_health(shared: Arc<Shared>) {
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return;
    }
    let mut ready = false;
    let mut last = None;
    let mut tick = tokio::time::interval(EVERY);
    loop {
        tick.tick().await;
        let state = shared.health().state();
        if last == Some(state) {
            continue;
        }
        last = Some(state);
        let status = format!("{} at height {}", state.as_str(), shared.health().height());
        let mut msg = vec![NotifyState::Status(&status)];
        if state.serving() && !ready {
            ready = true;
            msg.push(NotifyState::Ready);
        }
        send(&msg);
    }
}

/// READY=1 with a status, for the relay: it is ready once it runs (the node's files are its buffer).
pub fn ready(status: &str) {
    send(&[NotifyState::Status(status), NotifyState::Ready]);
}

/// Tells systemd the server is stopping (it then waits for the exit instead of counting a timeout).
pub fn stopping() {
    send(&[NotifyState::Stopping]);
}

fn send(msg: &[NotifyState]) {
    if let Err(e) = sd_notify::notify(msg) {
        tracing::warn!(error = %e, "could not notify systemd");
    }
}
