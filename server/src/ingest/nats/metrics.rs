//! What `hlbook relay --nats` exposes on its own admin port (`--admin-listen`, `GET /metrics`, Prometheus text):
//! the last line published per node stream, JetStream's ack latency, publish errors, snapshot requests answered
//! and refused, and bytes before and after compression. The relay has no other HTTP server, and must not share
//! `hlbook serve`'s, so this is a small one of its own: one request per connection, nothing but `/metrics`.
//! Alert rules in deploy/prometheus/hlbook-alerts.yml read these names.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::node::Stream;

/// Upper bounds of the ack-latency histogram's buckets, in seconds.
const ACK_BUCKETS: [f64; 10] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2.0];

/// The relay's figures, shared by the publisher, the snapshot keeper and the metrics listener.
#[derive(Debug, Default)]
pub struct RelayMetrics {
    /// 1 while the publisher holds a connection and its stream.
    pub connected: AtomicU64,
    /// Per node stream (`Stream as usize`): last height and index acked, lines acked.
    pub height: [AtomicU64; 3],
    pub index: [AtomicU64; 3],
    pub lines: [AtomicU64; 3],
    /// Unix time (ms) of the last ack: a relay that stops publishing shows here even if it still answers.
    pub last_ack_ms: AtomicU64,
    pub publish_errors: AtomicU64,
    /// Line bytes read from the node, and bytes sent after compression.
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    pub compressed_lines: AtomicU64,
    pub snapshot_answered: AtomicU64,
    pub snapshot_refused: AtomicU64,
    pub snapshots_taken: AtomicU64,
    ack_buckets: [AtomicU64; ACK_BUCKETS.len()],
    ack_count: AtomicU64,
    ack_sum_us: AtomicU64,
}

impl RelayMetrics {
    pub fn new() -> Arc<RelayMetrics> {
        Arc::new(RelayMetrics::default())
    }

    /// One line (all its parts) acked by JetStream after `ack`, from a node line of `bytes` sent as `sent`.
    pub fn published(&self, s: Stream, key: (u64, u64), ack: Duration, bytes: usize, sent: usize) {
        let i = s as usize;
        self.height[i].store(key.0, Relaxed);
        self.index[i].store(key.1, Relaxed);
        self.lines[i].fetch_add(1, Relaxed);
        self.bytes_in.fetch_add(bytes as u64, Relaxed);
        self.bytes_out.fetch_add(sent as u64, Relaxed);
        self.compressed_lines.fetch_add(u64::from(sent < bytes), Relaxed);
        let secs = ack.as_secs_f64();
        if let Some(b) = ACK_BUCKETS.iter().position(|&le| secs <= le) {
            self.ack_buckets[b].fetch_add(1, Relaxed);
        }
        self.ack_count.fetch_add(1, Relaxed);
        self.ack_sum_us.fetch_add(u64::try_from(ack.as_micros()).unwrap_or(u64::MAX), Relaxed);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        self.last_ack_ms.store(u64::try_from(now.as_millis()).unwrap_or(0), Relaxed);
    }

    /// The Prometheus text exposition of everything above.
    pub fn render(&self) -> String {
        let mut o = String::new();
        let g = |o: &mut String, name: &str, kind: &str, help: &str| {
            let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
        };
        g(&mut o, "hlbook_relay_connected", "gauge", "1 while connected to NATS with the stream open.");
        let _ = writeln!(o, "hlbook_relay_connected {}", self.connected.load(Relaxed));
        for (name, kind, help, v) in [
            ("hlbook_relay_height", "gauge", "Height of the last line JetStream acked, per node stream.", &self.height),
            ("hlbook_relay_line_index", "gauge", "Its place among its block's lines.", &self.index),
            ("hlbook_relay_lines_published_total", "counter", "Lines JetStream acked.", &self.lines),
        ] {
            g(&mut o, name, kind, help);
            for s in Stream::ALL {
                let _ = writeln!(o, "{name}{{stream=\"{}\"}} {}", super::stream_word(s), v[s as usize].load(Relaxed));
            }
        }
        g(&mut o, "hlbook_relay_last_ack_timestamp_seconds", "gauge", "Unix time of the last ack.");
        let ms = self.last_ack_ms.load(Relaxed);
        let _ = writeln!(o, "hlbook_relay_last_ack_timestamp_seconds {}.{:03}", ms / 1000, ms % 1000);
        g(&mut o, "hlbook_relay_ack_seconds", "histogram", "From a line's first publish to its last part's ack.");
        let mut cumulative = 0;
        for (le, b) in ACK_BUCKETS.iter().zip(&self.ack_buckets) {
            cumulative += b.load(Relaxed);
            let _ = writeln!(o, "hlbook_relay_ack_seconds_bucket{{le=\"{le}\"}} {cumulative}");
        }
        let count = self.ack_count.load(Relaxed);
        let _ = writeln!(o, "hlbook_relay_ack_seconds_bucket{{le=\"+Inf\"}} {count}");
        let us = self.ack_sum_us.load(Relaxed);
        let _ = writeln!(o, "hlbook_relay_ack_seconds_sum {}.{:06}", us / 1_000_000, us % 1_000_000);
        let _ = writeln!(o, "hlbook_relay_ack_seconds_count {count}");
        for (name, help, v) in [
            (
                "hlbook_relay_publish_errors_total",
                "Publishes that failed (the publisher starts over).",
                &self.publish_errors,
            ),
            ("hlbook_relay_line_bytes_total", "Bytes of node lines published.", &self.bytes_in),
            ("hlbook_relay_sent_bytes_total", "Bytes sent for them, after compression.", &self.bytes_out),
            ("hlbook_relay_compressed_lines_total", "Lines sent compressed.", &self.compressed_lines),
            ("hlbook_relay_snapshots_taken_total", "Node snapshots stored in the object store.", &self.snapshots_taken),
        ] {
            g(&mut o, name, "counter", help);
            let _ = writeln!(o, "{name} {}", v.load(Relaxed));
        }
        let name = "hlbook_relay_snapshot_requests_total";
        g(&mut o, name, "counter", "Edges' snapshot requests, by answer.");
        let _ = writeln!(o, "{name}{{result=\"answered\"}} {}", self.snapshot_answered.load(Relaxed));
        let _ = writeln!(o, "{name}{{result=\"refused\"}} {}", self.snapshot_refused.load(Relaxed));
        o
    }
}

/// nats-server's figures from its monitoring port (`/varz`, loopback only) as `hlbook_nats_server_*`: nats-server
/// has no Prometheus endpoint of its own and Debian ships no exporter, so the relay beside it passes them on.
/// `hlbook_nats_server_up` is 0 when the port does not answer.
async fn nats_server(monitor: &str) -> String {
    let varz = async {
        let r = reqwest::Client::new().get(format!("{monitor}/varz")).timeout(Duration::from_secs(2)).send().await?;
        r.json::<serde_json::Value>().await
    };
    let v = varz.await.ok();
    let mut o = String::from("# TYPE hlbook_nats_server_up gauge\n");
    let _ = writeln!(o, "hlbook_nats_server_up {}", u8::from(v.is_some()));
    let Some(v) = v else { return o };
    for (field, name, kind) in [
        ("cpu", "cpu_percent", "gauge"),
        ("mem", "memory_bytes", "gauge"),
        ("connections", "connections", "gauge"),
        ("slow_consumers", "slow_consumers_total", "counter"),
        ("in_msgs", "in_msgs_total", "counter"),
        ("out_msgs", "out_msgs_total", "counter"),
        ("in_bytes", "in_bytes_total", "counter"),
        ("out_bytes", "out_bytes_total", "counter"),
    ] {
        if let Some(x) = v[field].as_f64() {
            let _ = writeln!(o, "# TYPE hlbook_nats_server_{name} {kind}\nhlbook_nats_server_{name} {x}");
        }
    }
    o
}

/// Serves `GET /metrics` on `listener` until the process ends, with nats-server's figures when `monitor` (its
/// `http://127.0.0.1:8222`) is given; anything else is a 404.
pub async fn serve(listener: tokio::net::TcpListener, m: Arc<RelayMetrics>, monitor: Option<String>) {
    loop {
        let Ok((mut conn, _)) = listener.accept().await else { continue };
        let (m, monitor) = (m.clone(), monitor.clone());
        tokio::spawn(async move {
            // A request head fits in 4 KiB; a client that sends none within 5 s is dropped.
            let mut buf = [0u8; 4096];
            let Ok(Ok(n)) = tokio::time::timeout(Duration::from_secs(5), conn.read(&mut buf)).await else { return };
            let head = String::from_utf8_lossy(&buf[..n]);
            let (status, body) = if head.starts_with("GET /metrics ") || head.starts_with("GET /metrics?") {
                let mut body = m.render();
                if let Some(url) = &monitor {
                    body.push_str(&nats_server(url).await);
                }
                ("200 OK", body)
            } else {
                ("404 Not Found", "not found: the relay serves /metrics only\n".to_string())
            };
            let reply = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = conn.write_all(reply.as_bytes()).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_published_line_shows_its_height_ack_and_bytes() {
        let m = RelayMetrics::default();
        m.published(Stream::Diffs, (42, 3), Duration::from_millis(2), 1000, 100);
        m.published(Stream::Diffs, (43, 0), Duration::from_secs(5), 10, 10);
        let text = m.render();
        for want in [
            "hlbook_relay_height{stream=\"diffs\"} 43",
            "hlbook_relay_height{stream=\"fills\"} 0",
            "hlbook_relay_lines_published_total{stream=\"diffs\"} 2",
            "hlbook_relay_ack_seconds_bucket{le=\"0.0025\"} 1",
            "hlbook_relay_ack_seconds_bucket{le=\"2\"} 1",
            "hlbook_relay_ack_seconds_bucket{le=\"+Inf\"} 2",
            "hlbook_relay_ack_seconds_count 2",
            "hlbook_relay_line_bytes_total 1010",
            "hlbook_relay_sent_bytes_total 110",
            "hlbook_relay_compressed_lines_total 1",
        ] {
            assert!(text.lines().any(|l| l == want), "{want} missing from:\n{text}");
        }
    }

    #[tokio::test]
    async fn the_listener_answers_metrics_and_nothing_else() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let m = RelayMetrics::new();
        m.connected.store(1, Relaxed);
        tokio::spawn(serve(l, m, Some("http://127.0.0.1:1".into())));
        let get = |path: &'static str| async move {
            let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
            c.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes()).await.unwrap();
            let mut out = String::new();
            c.read_to_string(&mut out).await.unwrap();
            out
        };
        let ok = get("/metrics").await;
        assert!(ok.starts_with("HTTP/1.1 200") && ok.contains("\nhlbook_relay_connected 1\n"), "{ok}");
        assert!(ok.contains("\nhlbook_nats_server_up 0\n"), "a monitor that does not answer is down: {ok}");
        assert!(get("/other").await.starts_with("HTTP/1.1 404"));
    }
}
