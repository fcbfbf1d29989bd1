//! A TCP proxy that cuts every connection through it every `period`, abruptly: both sockets are dropped with
//! SO_LINGER 0, so each side gets a reset, never a WebSocket close (a NAT that forgot the flow, a middlebox that
//! restarted). Clients reconnect through it at once; the next tick cuts those too. Used where a test needs a
//! client to lose its connection several times while the server stays up. No crate cuts live TCP flows on a
//! timer for tests, and this is short.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};

#[derive(Debug)]
pub struct FaultProxy {
    /// `127.0.0.1:PORT`: connect here instead of the target.
    pub addr: String,
    cuts: Arc<AtomicU64>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl FaultProxy {
    /// Forwards connections to `target` (`HOST:PORT`) and cuts every live one each `period`.
    pub fn start(target: &str, period: Duration) -> FaultProxy {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let cuts = Arc::new(AtomicU64::new(0));
        let (stop, stopped) = oneshot::channel();
        let (target, counter) = (target.to_string(), cuts.clone());
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let listener = TcpListener::from_std(listener).unwrap();
                tokio::select! {
                    _ = stopped => {}
                    () = serve(listener, target, period, counter) => {}
                }
            });
            // Dropping the runtime drops every connection task and with it their sockets.
        });
        FaultProxy { addr, cuts, stop: Some(stop), thread: Some(thread) }
    }

    /// Connections cut so far (one per live connection per tick).
    pub fn cuts(&self) -> u64 {
        self.cuts.load(Ordering::Relaxed)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn serve(listener: TcpListener, target: String, period: Duration, cuts: Arc<AtomicU64>) {
    // Each tick bumps the epoch; every connection task waits for the next change.
    let (tick, epoch) = watch::channel(0u64);
    tokio::spawn(async move {
        let mut every = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        loop {
            every.tick().await;
            tick.send_modify(|e| *e += 1);
        }
    });
    loop {
        let Ok((client, _)) = listener.accept().await else { continue };
        let (target, cuts, mut epoch) = (target.clone(), cuts.clone(), epoch.clone());
        epoch.mark_unchanged();
        tokio::spawn(async move {
            let Ok(upstream) = TcpStream::connect(&target).await else { return }; // dropped: the client sees a close
            let _ = (client.set_nodelay(true), upstream.set_nodelay(true));
            let (mut client, mut upstream) = (client, upstream);
            let cut = tokio::select! {
                _ = tokio::io::copy_bidirectional(&mut client, &mut upstream) => false,
                _ = epoch.changed() => true,
            };
            if cut {
                // A reset on both sides: no FIN, no close frame, unsent bytes discarded.
                let _ = (client.set_zero_linger(), upstream.set_zero_linger());
                cuts.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
}
