//! Every listener's accept loop (public and admin): each TCP connection is admitted by the per-IP cap (`tcp_cap`),
//! then served HTTP/1 by hyper with a deadline for every request's headers and an idle deadline, until the client
//! leaves, a deadline passes, the request upgrades to a WebSocket, or the server shuts down.
//!
//! This replaces `axum::serve`, which sets no header deadline: a client sending its headers a byte a second
//! (slowloris) held its connection and task for ever. The header deadline is hyper's own
//! (`header_read_timeout`); it runs from the moment hyper waits for a request, so it also bounds a keep-alive
//! connection waiting for its next one and a socket on which nothing was ever sent. The idle deadline is ours: no
//! request being answered and no byte moving either way, which catches what the header deadline does not see (a
//! request body that stalls, an answer the client does not read). Once a request upgrades, hyper hands the socket
//! to the WebSocket task (`upgrade`) and neither deadline applies any more; the connection keeps its place in the
//! per-IP cap until its socket closes. Shutdown is axum's: stop accepting, let each connection finish its request
//! (`graceful_shutdown`), and return once every connection task has ended.

use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::extract::connect_info::IntoMakeServiceWithConnectInfo;
use axum::middleware::AddExtension;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};
use tower_service::Service;

use super::WsContext;
use super::tcp_cap::{TcpCap, TcpPlace};

/// What every connection of a listener is held to.
#[derive(Clone, Debug)]
pub struct Deadlines {
    pub header: Duration,
    pub idle: Duration,
}

impl Deadlines {
    pub fn new(c: &crate::config::ServerConfig) -> Deadlines {
        Deadlines {
            header: Duration::from_secs(c.header_timeout_secs),
            idle: Duration::from_secs(c.http_idle_timeout_secs),
        }
    }
}

/// Serves `app` on `listener` until `closing` turns true, then waits for its connections to finish.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    ctx: Arc<WsContext>,
    cap: Arc<TcpCap>,
    deadlines: Deadlines,
    mut closing: watch::Receiver<bool>,
) {
    let mut make = app.into_make_service_with_connect_info::<SocketAddr>();
    // Every connection task holds a receiver; `closed()` returns once all are gone.
    let (all_done, done) = watch::channel(());
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    accept_failed(&e).await;
                    continue;
                }
            },
            () = shut(&mut closing) => break,
        };
        let Some(place) = cap.admit(peer.ip()) else {
            // Dropping the socket closes it: the client learns at once, and costs nothing more.
            ctx.counters().http_refused.inc();
            tracing::debug!(%peer, "connection refused: too many open from its IP");
            continue;
        };
        // Frames are small and latency is the product: never let Nagle hold one back.
        let _ = tcp.set_nodelay(true);
        let service = make_service(&mut make, peer).await;
        let conn = Connection { ctx: ctx.clone(), deadlines: deadlines.clone(), closing: closing.clone() };
        let done = done.clone();
        tokio::spawn(async move {
            conn.run(tcp, place, service).await;
            drop(done);
        });
    }
    drop(listener);
    drop(done);
    all_done.closed().await;
}

/// Returns once the server shuts down (the watch's guard is dropped here, never held across an await).
async fn shut(closing: &mut watch::Receiver<bool>) {
    let _ = closing.wait_for(|c| *c).await;
}

/// The router as one connection's hyper service, with the peer's address for `ConnectInfo`.
type AppService = TowerToHyperService<AddExtension<Router, ConnectInfo<SocketAddr>>>;

async fn make_service(make: &mut IntoMakeServiceWithConnectInfo<Router, SocketAddr>, peer: SocketAddr) -> AppService {
    let Ok(svc) = make.call(peer).await;
    TowerToHyperService::new(svc)
}

/// Accept errors are the listener's, not a reason to stop serving: a peer that reset before we accepted is
/// skipped; anything else (out of file descriptors) is logged and retried after a pause, as `axum::serve` does.
async fn accept_failed(e: &std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(e.kind(), ConnectionRefused | ConnectionAborted | ConnectionReset) {
        return;
    }
    tracing::warn!("accept failed: {e}");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

struct Connection {
    ctx: Arc<WsContext>,
    deadlines: Deadlines,
    closing: watch::Receiver<bool>,
}

impl Connection {
    async fn run(mut self, tcp: TcpStream, place: TcpPlace, service: AppService) {
        let activity = Arc::new(Activity::new());
        let busy = Arc::new(AtomicUsize::new(0));
        let io = Watched { io: tcp, activity: activity.clone(), _place: place };
        let in_flight = busy.clone();
        let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
            let answering = Busy::enter(&in_flight);
            let answer = hyper::service::Service::call(&service, req.map(Body::new));
            async move {
                let r = answer.await;
                drop(answering);
                r
            }
        });
        let mut builder = http1::Builder::new();
        builder.timer(TokioTimer::new()).header_read_timeout(self.deadlines.header);
        let mut conn = pin!(builder.serve_connection(TokioIo::new(io), service).with_upgrades());
        let idle = self.deadlines.idle;
        let mut shutting = false;
        loop {
            // While a request is being answered the connection is not idle; look again an idle period later.
            let deadline = if busy.load(Relaxed) > 0 { Instant::now() + idle } else { activity.last() + idle };
            tokio::select! {
                served = conn.as_mut() => {
                    match served {
                        Err(e) if e.is_timeout() => {
                            self.ctx.counters().http_header_timeouts.inc();
                        }
                        Err(e) => tracing::debug!("connection ended: {e}"),
                        Ok(()) => {}
                    }
                    break;
                }
                () = shut(&mut self.closing), if !shutting => {
                    shutting = true;
                    conn.as_mut().graceful_shutdown();
                }
                () = sleep_until(deadline) => {
                    if busy.load(Relaxed) == 0 && activity.last() + idle <= Instant::now() {
                        self.ctx.counters().http_closed_idle.inc();
                        break;
                    }
                }
            }
        }
        // Upgraded or over: the socket (if a WebSocket task has it now) need not be timed any more.
        activity.watched.store(false, Relaxed);
    }
}

/// Requests of a connection being answered.
struct Busy(Arc<AtomicUsize>);

impl Busy {
    fn enter(n: &Arc<AtomicUsize>) -> Busy {
        n.fetch_add(1, Relaxed);
        Busy(n.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

/// When a byte last moved on a connection, for the idle deadline.
#[derive(Debug)]
struct Activity {
    start: Instant,
    /// Since `start`.
    last_nanos: AtomicU64,
    /// False once hyper is done with the socket: an upgraded connection's reads and writes are not timed here.
    watched: AtomicBool,
}

impl Activity {
    fn new() -> Activity {
        Activity { start: Instant::now(), last_nanos: AtomicU64::new(0), watched: AtomicBool::new(true) }
    }

    fn touch(&self) {
        if self.watched.load(Relaxed) {
            let since = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
            self.last_nanos.store(since, Relaxed);
        }
    }

    fn last(&self) -> Instant {
        self.start + Duration::from_nanos(self.last_nanos.load(Relaxed))
    }
}

/// A connection's socket: notes each byte that moves, and holds the connection's place in the per-IP cap for as
/// long as the socket lives (past an upgrade too).
struct Watched {
    io: TcpStream,
    activity: Arc<Activity>,
    _place: TcpPlace,
}

impl AsyncRead for Watched {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.io).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.touch();
        }
        r
    }
}

impl AsyncWrite for Watched {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write(cx, data);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
