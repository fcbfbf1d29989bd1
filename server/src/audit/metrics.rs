//! `/metrics`: everything the server counts, in the Prometheus/OpenMetrics text format, through the
//! `prometheus-client` exposition crate. Values are read at scrape time from the counters the stages already keep
//! (no second bookkeeping); stage latencies are exported as histograms built from the `hdrhistogram`s.

use std::collections::HashMap;
use std::sync::Arc;

use prometheus_client::collector::Collector;

use hdrhistogram::Histogram;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::exemplar::Exemplar;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use super::{Exposed, STAGES};
use crate::node::Stream;
use crate::state::health::HealthState;
use crate::state::sources::SourceEntry;

/// Upper bounds (seconds) of the exported stage histograms: 50 µs to ~100 s, doubling.
#[allow(clippy::float_arithmetic)]
fn bounds() -> Vec<f64> {
    (0..22).map(|i| 0.000_05 * f64::from(1u32 << i)).collect()
}

#[derive(Debug)]
struct Hlbook(Arc<dyn Exposed>);

fn gauge(e: &mut DescriptorEncoder, name: &str, help: &str, v: i64) -> Result<(), std::fmt::Error> {
    let g = ConstGauge::new(v);
    g.encode(e.encode_descriptor(name, help, None, g.metric_type())?)
}

fn counter(e: &mut DescriptorEncoder, name: &str, help: &str, v: u64) -> Result<(), std::fmt::Error> {
    let c = ConstCounter::new(v);
    c.encode(e.encode_descriptor(name, help, None, c.metric_type())?)
}

impl Collector for Hlbook {
    // Seconds are floats in the exposition format; no money is involved here.
    #[allow(clippy::float_arithmetic)]
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let ctx = &*self.0;
        let h = ctx.health();
        let state = h.state();
        {
            let mut m =
                e.encode_descriptor("hlbook_state", "1 for the current health state", None, MetricType::Gauge)?;
            for s in [
                HealthState::Starting,
                HealthState::CatchingUp,
                HealthState::Live,
                HealthState::Stale,
                HealthState::Resyncing,
                HealthState::Failed,
            ] {
                let labels = [("state", s.as_str())];
                ConstGauge::new(i64::from(s == state)).encode(m.encode_family(&labels)?)?;
            }
        }
        gauge(&mut e, "hlbook_height", "Height of the last applied block", h.height() as i64)?;
        {
            let recent = ctx.stages().recent(crate::node::time::now_nanos());
            let g = ConstGauge::new(recent.blocks_per_sec);
            g.encode(e.encode_descriptor(
                "hlbook_blocks_per_second",
                "Blocks settled in the last minute of wall time, per second (0 when the node is quiet)",
                None,
                g.metric_type(),
            )?)?;
        }
        let (block_lag, node_lag) = h.lag();
        {
            let mut m =
                e.encode_descriptor("hlbook_lag_seconds", "now minus the last block's time", None, MetricType::Gauge)?;
            for (kind, v) in [("block", block_lag), ("node_write", node_lag)] {
                prometheus_client::metrics::gauge::ConstGauge::new(v as f64 / 1e9)
                    .encode(m.encode_family(&[("since", kind)])?)?;
            }
        }
        for c in h.counters().to_list() {
            counter(&mut e, &format!("hlbook_ingest_{}", c.name), c.help, c.value)?;
        }
        for c in h.misc().counters().to_list() {
            counter(&mut e, &format!("hlbook_misc_{}", c.name), c.help, c.value)?;
        }
        let misc_read = i64::from(h.misc().read() == crate::state::misc_stream::MiscRead::Read);
        gauge(&mut e, "hlbook_misc_read", "1 while the node's misc_events stream is read", misc_read)?;
        for c in h.twaps().counters().to_list() {
            counter(&mut e, &format!("hlbook_twap_{}", c.name), c.help, c.value)?;
        }
        let twap_read = i64::from(h.twaps().read() == crate::state::misc_stream::MiscRead::Read);
        gauge(&mut e, "hlbook_twap_read", "1 while the node's node_twap_statuses stream is read", twap_read)?;
        for c in ctx.publish_counters() {
            counter(&mut e, &format!("hlbook_publish_{}", c.name), c.help, c.value)?;
        }
        gauge(
            &mut e,
            "hlbook_feed_bytes",
            "Bytes of trades/l4Book frames kept for slow connections",
            ctx.feed_bytes() as i64,
        )?;
        for c in ctx.ws_counters() {
            counter(&mut e, &format!("hlbook_ws_{}", c.name), c.help, c.value)?;
        }
        gauge(&mut e, "hlbook_connections", "Open WebSocket connections", ctx.connections() as i64)?;
        {
            let mut m =
                e.encode_descriptor("hlbook_subscriptions", "Subscriptions by channel", None, MetricType::Gauge)?;
            for (channel, n) in ctx.subscriptions() {
                ConstGauge::new(n).encode(m.encode_family(&[("channel", channel)])?)?;
            }
        }
        sources(&mut e, &h.sources().entries())?;
        for (name, help, is_counter, v) in ctx.store_metrics() {
            let name = format!("hlbook_store_{name}");
            if is_counter { counter(&mut e, &name, help, v)? } else { gauge(&mut e, &name, help, v as i64)? }
        }
        let mut m = e.encode_descriptor(
            "hlbook_stage_latency_seconds",
            "Per-block latency of each pipeline stage, by the block's line it started from (docs/latency.md)",
            None,
            MetricType::Histogram,
        )?;
        let bounds = bounds();
        let per_line = ctx.stages().histograms();
        for (line, hists) in Stream::ALL.into_iter().zip(per_line) {
            for (stage, hist) in STAGES.iter().zip(hists) {
                let labels = [("stage", *stage), ("line", line.short())];
                histogram(m.encode_family(&labels)?, &hist, &bounds)?;
            }
        }
        Ok(())
    }
}

/// Per source (labelled by its `file:PATH` / `nats://HOST:PORT/STREAM` name): the lines it delivered first and by how much
/// it led the next source to deliver each (per line of the block), copies compared, disagreements, height.
fn sources(e: &mut DescriptorEncoder, entries: &[Arc<SourceEntry>]) -> Result<(), std::fmt::Error> {
    {
        let mut m = e.encode_descriptor(
            "hlbook_source_wins",
            "Lines this source delivered before every other source (racing sources, docs/operations.md)",
            None,
            MetricType::Counter,
        )?;
        for s in entries {
            for line in Stream::ALL {
                ConstCounter::new(s.wins(line))
                    .encode(m.encode_family(&[("source", &*s.name), ("line", line.short())])?)?;
            }
        }
    }
    {
        let mut m = e.encode_descriptor(
            "hlbook_source_lead_seconds",
            "How long before the next source this source delivered the lines it won",
            None,
            MetricType::Histogram,
        )?;
        let bounds = bounds();
        for s in entries {
            let leads = s.leads();
            for line in Stream::ALL {
                let labels = [("source", &*s.name), ("line", line.short())];
                histogram(m.encode_family(&labels)?, &leads[line.index()], &bounds)?;
            }
        }
    }
    type Read = fn(&SourceEntry) -> u64;
    let per_source: [(&str, &str, MetricType, Read); 5] = [
        (
            "hlbook_source_copies",
            "Lines another source had delivered first: compared and dropped",
            MetricType::Counter,
            |s| s.copies.get(),
        ),
        (
            "hlbook_source_disagreements",
            "Lines whose copies from this source and another differed (counted on both)",
            MetricType::Counter,
            |s| s.disagreements.get(),
        ),
        (
            "hlbook_source_refused_lines",
            "Lines refused: over ingest.max_line_bytes or past ingest.max_height_jump",
            MetricType::Counter,
            |s| s.refused.get(),
        ),
        ("hlbook_source_lines", "Lines read from this source", MetricType::Counter, |s| s.lines.get()),
        (
            "hlbook_source_height",
            "Highest block this source delivered a line of",
            MetricType::Gauge,
            SourceEntry::height,
        ),
    ];
    for (name, help, kind, read) in per_source {
        let mut m = e.encode_descriptor(name, help, None, kind)?;
        for s in entries {
            let labels = [("source", &*s.name)];
            let fam = m.encode_family(&labels)?;
            match kind {
                MetricType::Counter => ConstCounter::new(read(s)).encode(fam)?,
                _ => ConstGauge::new(read(s) as i64).encode(fam)?,
            }
        }
    }
    Ok(())
}

/// One `hdrhistogram` (nanoseconds) as a Prometheus histogram in seconds over `bounds`.
#[allow(clippy::float_arithmetic)]
fn histogram(mut fam: MetricEncoder<'_>, hist: &Histogram<u64>, bounds: &[f64]) -> Result<(), std::fmt::Error> {
    let mut buckets: Vec<(f64, u64)> = bounds.iter().map(|&b| (b, 0)).collect();
    let mut sum = 0.0;
    for v in hist.iter_recorded() {
        let secs = v.value_iterated_to() as f64 / 1e9;
        sum += secs * v.count_at_value() as f64;
        let i = bounds.iter().position(|&b| secs <= b).unwrap_or(bounds.len());
        if let Some(b) = buckets.get_mut(i) {
            b.1 += v.count_at_value();
        }
    }
    buckets.push((f64::MAX, 0)); // +Inf to the encoder
    // prometheus-client wants per-bucket counts and accumulates them itself.
    let last = buckets.len() - 1;
    buckets[last].1 = hist.len() - buckets[..last].iter().map(|b| b.1).sum::<u64>();
    fam.encode_histogram::<NoLabelSet>(sum, hist.len(), &buckets, None::<&HashMap<usize, Exemplar<NoLabelSet, f64>>>)
}

/// A registry over the server's state; render it with `render`.
pub fn registry(ctx: Arc<dyn Exposed>) -> Registry {
    let mut r = Registry::default();
    r.register_collector(Box::new(Hlbook(ctx)));
    r
}

pub fn render(r: &Registry) -> String {
    let mut out = String::new();
    let _ = prometheus_client::encoding::text::encode(&mut out, r);
    out
}
