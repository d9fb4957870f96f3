//! Every metric the exporter publishes, owned by one [`Metrics`] value whose domain methods
//! (`observe`, `forget`, …) are the only way to change them. The only module that touches
//! `prometheus-client` types.
//!
//! The families come in groups, one file each: `timings.rs` (the latency and rate histograms),
//! `probes.rs` (the counters and the last probe's state), `turns.rs` (a multi-turn probe's turns), `server_load.rs` (the engine's own
//! load, and with `rate_limits.rs` a hosted API's quota left), `identity.rs` (credential reloads, schedule, SLO, endpoint identity, configuration
//! loads, shard), `baselines.rs`, `replicas.rs` (replica discovery) and `build.rs`. Each group registers, records and removes its
//! own families, so a new family is an edit to one group's file; the exposition lists the
//! families in the order they are registered, group after group ([`Metrics::with_histograms`]).
//! Every per-pair series is keyed by [`ProbeLabels`], alone or with one more label
//! (`labels.rs`), so a label every pair gains is a field of `ProbeLabels`. `tests.rs` checks that
//! a forgotten pair leaves no series behind in any family.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prometheus_client::metrics::gauge::Gauge;

use crate::config::Slo;
use crate::measure::ProbeOutcome;

pub mod accept;
mod baselines;
mod buckets;
mod build;
mod by_label;
pub mod exemplars;
pub mod fast;
pub mod histogram;
mod identity;
mod labels;
mod probes;
mod rate_limits;
mod replicas;
pub mod series;
mod server_load;
mod timings;
mod turns;
pub use accept::{negotiate, negotiate_text};
use baselines::Baselines;
pub use buckets::{
    Buckets, HistogramKinds, HistogramOptions, NativeBucketFactor, CONNECTION_SETUP_BUCKETS,
    E2E_BUCKETS, READ_DELAY_BUCKETS, TOKENS_PER_SECOND_BUCKETS, TOKEN_TIME_BUCKETS, TTFT_BUCKETS,
};
use fast::Catalog;
use identity::Identity;
pub use labels::ProbeLabels;
use labels::TargetLabels;
use probes::ProbeCounters;
use replicas::Discovery;
use server_load::ServerLoad;
use timings::Timings;
use turns::Turns;

type F64Gauge = Gauge<f64, std::sync::atomic::AtomicU64>;

/// The exporter's metrics. Cheap to share (`Arc<Metrics>`); all methods take `&self`.
pub struct Metrics {
    /// The latency and rate histograms.
    timings: Timings,
    /// The probe counters and the last probe's state.
    probes: ProbeCounters,
    /// The engine's own load (`server_metrics_url:`) and a hosted API's quota left (its
    /// rate-limit headers).
    server_load: ServerLoad,
    /// A multi-turn probe's turns.
    turns: Turns,
    /// Targets, schedule, SLO, endpoint identity, configuration loads, shard.
    identity: Identity,
    /// The pinned baselines.
    baselines: Baselines,
    /// Replica discovery.
    discovery: Discovery,
    /// Every family in exposition order, and the sizes of the last bodies.
    render: Render,
}

/// What the render keeps: every family and the sizes of the last bodies.
struct Render {
    /// Every family, in exposition order ([`fast`]).
    catalog: Catalog,
    /// Bytes of the last render per [`Exposition`]: the next one reserves this much up front, so a 15 MiB body is
    /// written once instead of being copied through every doubling of a growing `String`
    /// (which also held the old and the new buffer at once: a 2–3× peak in RSS).
    last_len: [AtomicUsize; 3],
    /// The same for the gzip-compressed bodies ([`Metrics::render_gzip`]).
    last_gzip_len: [AtomicUsize; 3],
}

impl Metrics {
    /// Registers every metric. Each SLO threshold in `slos` (TTFT in seconds, tokens/s floor)
    /// is added to the bucket boundaries so that "P95 above the SLO" and "share under the SLO
    /// below 95 %" are the same question.
    pub fn new(slos: &[Slo]) -> Self {
        Self::with_histograms(slos, HistogramOptions::default())
    }

    /// [`Metrics::new`] with the histogram layout `histograms` (classic, native or both).
    pub fn with_histograms(slos: &[Slo], histograms: HistogramOptions) -> Self {
        let mut catalog = Catalog::new("llm_probe");
        let r = &mut catalog;
        // The exposition lists the families in this order.
        let timings = Timings::register(r, slos, histograms);
        let probes = ProbeCounters::register(r);
        let turns = Turns::register(r, histograms);
        let server_load = ServerLoad::register(r);
        let identity = Identity::register(r);
        let baselines = Baselines::register(r);
        let discovery = Discovery::register(r);
        build::register(r);
        Metrics {
            timings,
            probes,
            server_load,
            turns,
            identity,
            baselines,
            discovery,
            render: Render {
                catalog,
                last_len: Default::default(),
                last_gzip_len: Default::default(),
            },
        }
    }

    /// Exports `llm_probe_shard_info{index,count} 1` for `shard` (replacing any earlier one).
    pub fn set_shard(&self, shard: crate::shard::Shard) {
        self.identity.set_shard(shard);
    }

    /// Whether the histograms carry classic buckets (not with [`HistogramKinds::Native`]).
    pub fn has_classic_buckets(&self) -> bool {
        self.timings.has_classic_buckets()
    }

    /// Classic bucket boundaries of the TTFT histograms, seconds (for start-up checks and
    /// tests); what they would be when [`Metrics::has_classic_buckets`] is false.
    pub fn ttft_boundaries(&self) -> &[f64] {
        self.timings.ttft_boundaries()
    }

    /// Classic bucket boundaries of the output-tokens-per-second histogram, tokens/s.
    pub fn tokens_per_second_boundaries(&self) -> &[f64] {
        self.timings.tokens_per_second_boundaries()
    }

    /// Classic bucket boundaries of the prefill speed histograms, prompt tokens/s.
    pub fn prefill_boundaries(&self) -> &[f64] {
        self.timings.prefill_boundaries()
    }

    /// Creates the series of one (target, model, scenario) at zero, so that dashboards and
    /// `rate()` see them before the first probe (and the first failure) happens; exports the
    /// target's SLO.
    pub fn register_probe(&self, labels: &ProbeLabels, slo: &Slo) {
        self.probes.register_pair(labels);
        self.identity.register_pair(labels, slo);
    }

    /// Exports the interval one (target, model, scenario) is probed at as
    /// `llm_probe_probe_interval_seconds` (seconds between the starts of two probes: the
    /// configured interval, or longer when the target's `cost.monthly_budget` needs it), and
    /// creates its cost counter at zero when the target has prices (removes it when it has
    /// none). The alert rules scale their probe-count guards and windows with the interval, so
    /// a pair probed every 5 min gets latency alerts as well as one probed every 15 s.
    pub fn set_schedule(&self, labels: &ProbeLabels, interval: Duration, priced: bool) {
        let labels = &self.probes.kept_labels(labels.clone());
        self.identity.set_interval(labels, interval);
        self.probes.set_priced(labels, priced);
    }

    /// Creates the engine-metrics failure counters of a target with a `server_metrics_url` at
    /// zero (every reason), so that `rate()` and `increase()` see the first failure.
    pub fn register_server_metrics(&self, target: &str, model: &str) {
        self.server_load
            .register_target(&TargetLabels::new(target, model));
    }

    /// Removes a target's engine-metrics gauges and failure counters (it has no
    /// `server_metrics_url`); its quota left (rate-limit headers) stays.
    pub fn forget_server_metrics(&self, target: &str, model: &str) {
        self.server_load
            .forget_engine(&TargetLabels::new(target, model));
    }

    /// Removes a target's three engine-load gauges (its `server_metrics_url` or adapter
    /// changed: the old engine's numbers must not stand for the new one until its first read).
    /// The failure counters stay.
    pub fn forget_server_load(&self, target: &str, model: &str) {
        self.server_load
            .forget_load(&TargetLabels::new(target, model));
    }

    /// Removes every series of one (target, model, scenario), e.g. when it leaves the config;
    /// a replica's last pair also takes the replica's identity and engine load with it (a
    /// replica still probed with another scenario keeps them: its next probe of that scenario
    /// may be an interval away).
    pub fn forget(&self, labels: &ProbeLabels) {
        self.timings.forget(labels);
        self.probes.forget(labels);
        self.turns.forget(labels);
        self.identity.forget(labels);
        if !self.probes.has_pair_of_replica(labels) {
            self.identity.forget_replica(labels);
            self.server_load.forget_replica(labels);
        }
    }

    /// Removes the engine-load gauges of the replica `labels` probed (it left discovery: its
    /// other series stay for its grace, but its engine's numbers would be stale). Nothing for
    /// a pair without a replica.
    pub fn forget_replica_load(&self, labels: &ProbeLabels) {
        self.server_load.forget_replica(labels);
    }

    /// Removes the series a pair keeps only for a scenario shape it no longer has: the turn
    /// families without `turns`, the prefill speeds without a generated prompt (a reload that
    /// changed the scenario but kept its labels).
    pub fn forget_shape(&self, labels: &ProbeLabels, turns: bool, long_prompt: bool) {
        if !turns {
            self.turns.forget(labels);
        }
        if !long_prompt {
            self.timings.forget_prefill(labels);
        }
    }

    /// Removes the per-target series (SLO, endpoint identity, engine metrics) of a target that
    /// left the config.
    pub fn forget_target(&self, target: &str, model: &str) {
        let t = TargetLabels::new(target, model);
        self.identity.forget_target(&t);
        self.server_load.forget_target(&t);
    }

    /// Exports exactly the pinned baselines in `pinned` (probe labels, baseline): sets their
    /// `llm_probe_baseline_*` gauges and removes those of pairs no longer in it (a baseline
    /// taken out of the probes file, a pair removed or moved to another shard). A metric the
    /// baseline has no value for (`null` TPOT) has no series.
    pub fn set_baselines(&self, pinned: &[(ProbeLabels, &crate::config::baseline_file::Baseline)]) {
        self.baselines.set(pinned);
    }

    /// Records one finished probe: counters and gauges always; connection setup whenever the
    /// probe opened a connection (it is complete even when the stream later fails); the latency
    /// and rate histograms only for a success (a failed stream's partial timings are never
    /// observed).
    pub fn observe(&self, outcome: &ProbeOutcome) {
        let labels = self.probes.kept_labels(ProbeLabels::of(outcome));
        self.probes.observe(&labels, outcome);
        self.identity.observe(&labels, outcome);
        self.server_load.observe(&labels, outcome);
        self.timings.observe(&labels, outcome);
        self.turns.observe(&labels, outcome);
    }

    /// Creates the discovery failure counters of a target with `replicas:` at zero (every
    /// reason).
    pub fn register_discovery(&self, target: &str) {
        self.discovery.register_target(target);
    }

    /// A good discovery of a target's replicas: `found` distinct replicas, `kept` (at most
    /// `replicas.max`) of them probed.
    pub fn replicas_discovered(&self, target: &str, found: usize, kept: usize) {
        self.discovery.discovered(target, found, kept);
    }

    /// A failed discovery of a target's replicas (`reason`: one of
    /// [`crate::replicas::REASONS`]).
    pub fn replica_discovery_failed(&self, target: &str, reason: &'static str) {
        self.discovery.failed(target, reason);
    }

    /// Removes a target's discovery series (it left the config or lost its `replicas:`).
    pub fn forget_discovery(&self, target: &str) {
        self.discovery.forget_target(target);
    }

    /// Records the result of loading the configuration at `at`.
    pub fn config_loaded(&self, success: bool, at: SystemTime) {
        self.identity.config_loaded(success, at);
    }

    /// Renders the registry in the text format the `Accept` header asks for (see
    /// [`negotiate_text`]): OpenMetrics 1.0.0 when the header prefers it, else
    /// the Prometheus text format 0.0.4 (a protobuf preference is not considered here; `/metrics`
    /// offers it, see [`Metrics::render_as`]). Returns `(content type, body)`.
    ///
    /// Panics if the encoder fails, which it does not for these formats (a `String` sink and
    /// histograms that always carry at least the `+Inf` bucket).
    pub fn render(&self, accept: Option<&str>) -> (&'static str, String) {
        let format = negotiate_text(accept);
        let body = self
            .render_as(format)
            .expect("the text formats encode every metric");
        let body = String::from_utf8(body).expect("the text formats are UTF-8");
        (format.content_type(), body)
    }

    /// Renders the registry in `format`: the text formats carry the classic buckets of each
    /// histogram, the protobuf format classic and native buckets (whichever are enabled).
    /// The per-pair families go through the fast encoder ([`fast`]), byte-identical to
    /// [`Metrics::render_reference`].
    ///
    /// Errors: the encoder failed (a histogram whose native buckets cannot be encoded).
    pub fn render_as(&self, format: Exposition) -> Result<Vec<u8>, RenderError> {
        let last_len = &self.render.last_len[format as usize];
        let last = last_len.load(Ordering::Relaxed);
        // Room for the last body plus growth (new series, longer numbers) of ~3 %.
        let capacity = (last + last / 32).max(16 * 1024);
        let out = match format {
            Exposition::OpenMetrics | Exposition::Text => {
                let mut out = String::with_capacity(capacity);
                advise_huge_pages(out.as_ptr(), out.capacity());
                let text = if format == Exposition::OpenMetrics {
                    fast::TextFormat::OpenMetrics
                } else {
                    fast::TextFormat::Prometheus
                };
                self.render
                    .catalog
                    .render_text(text, &mut out)
                    .map_err(|_| RenderError(format))?;
                out.into_bytes()
            }
            Exposition::Protobuf => {
                let mut out = Vec::with_capacity(capacity);
                advise_huge_pages(out.as_ptr(), out.capacity());
                self.render
                    .catalog
                    .render_protobuf(&mut out)
                    .map_err(|_| RenderError(format))?;
                out
            }
        };
        last_len.store(out.len(), Ordering::Relaxed);
        Ok(out)
    }

    /// Heap bytes of the per-pair histograms beyond their structs, summed over every series:
    /// `(native buckets, classic buckets and exemplars)` ([`ProbeHistogram::heap_bytes`]). For
    /// the scale benchmark's memory accounting (BENCHMARKS §17).
    ///
    /// [`ProbeHistogram::heap_bytes`]: histogram::ProbeHistogram::heap_bytes
    #[doc(hidden)]
    pub fn histogram_heap_bytes(&self) -> (usize, usize) {
        self.timings.heap_bytes()
    }

    /// [`Metrics::render_as`] compressed with gzip (RFC 1952, flate2 at its fastest level), as
    /// `/metrics` answers a scraper that accepts it (Prometheus does): the body is compressed
    /// family by family as it is rendered, so the uncompressed body (~18 KiB per pair in the
    /// text formats) is never held whole, only its largest family and the compressed output
    /// (5 % of the text at 1,000 pairs, BENCHMARKS.md §16; about 13 % of protobuf). Decompressed, it is
    /// byte for byte the body of [`Metrics::render_as`].
    ///
    /// Errors: as [`Metrics::render_as`].
    pub fn render_gzip(&self, format: Exposition) -> Result<Vec<u8>, RenderError> {
        self.render_gzip_in_parts_of(format, GZIP_PART_BYTES)
    }

    /// [`Metrics::render_gzip`], compressing whenever `part_bytes` or more of the body are
    /// waiting (tests use 1: after every family).
    #[doc(hidden)]
    pub fn render_gzip_in_parts_of(
        &self,
        format: Exposition,
        part_bytes: usize,
    ) -> Result<Vec<u8>, RenderError> {
        use flate2::write::GzEncoder;
        use std::io::Write;
        let last_len = &self.render.last_gzip_len[format as usize];
        let last = last_len.load(Ordering::Relaxed);
        let mut gz = GzEncoder::new(
            Vec::with_capacity((last + last / 32).max(4 * 1024)),
            flate2::Compression::fast(),
        );
        // Writing into a Vec fails only when memory runs out, which aborts first.
        let fail = |_| RenderError(format);
        match format {
            Exposition::OpenMetrics | Exposition::Text => {
                let text = if format == Exposition::OpenMetrics {
                    fast::TextFormat::OpenMetrics
                } else {
                    fast::TextFormat::Prometheus
                };
                let mut out = String::with_capacity(part_bytes.min(GZIP_PART_BYTES) * 2);
                self.render
                    .catalog
                    .render_text_in_parts(text, &mut out, &mut |out| {
                        if compress_part(&mut gz, out.as_bytes(), part_bytes)? {
                            out.clear();
                        }
                        Ok(())
                    })
                    .map_err(fail)?;
                gz.write_all(out.as_bytes())
                    .map_err(|_| RenderError(format))?;
            }
            Exposition::Protobuf => {
                let mut out = Vec::with_capacity(part_bytes.min(GZIP_PART_BYTES) * 2);
                self.render
                    .catalog
                    .render_protobuf_in_parts(&mut out, &mut |out| {
                        if compress_part(&mut gz, out, part_bytes)? {
                            out.clear();
                        }
                        Ok(())
                    })
                    .map_err(fail)?;
                gz.write_all(&out).map_err(|_| RenderError(format))?;
            }
        }
        let body = gz.finish().map_err(|_| RenderError(format))?;
        last_len.store(body.len(), Ordering::Relaxed);
        Ok(body)
    }

    /// [`Metrics::render_as`] by prometheus-client's own encoders alone, over one registry of
    /// every family: the reference the fast encoder is tested against (slower: ~5× at 1,000
    /// pairs). Exemplars are added to the crate's output afterwards ([`exemplars`]).
    ///
    /// Errors: as [`Metrics::render_as`].
    pub fn render_reference(&self, format: Exposition) -> Result<Vec<u8>, RenderError> {
        let registry = self.render.catalog.reference();
        Ok(match format {
            Exposition::OpenMetrics | Exposition::Text => {
                let mut out = String::new();
                let written = if format == Exposition::OpenMetrics {
                    prometheus_client::encoding::text::encode(&mut out, registry)
                } else {
                    prometheus_client::encoding::prometheus_text::encode(&mut out, registry)
                };
                written.map_err(|_| RenderError(format))?;
                if format == Exposition::OpenMetrics {
                    exemplars::add_to_openmetrics(&mut out, &self.timings.traced());
                }
                out.into_bytes()
            }
            Exposition::Protobuf => {
                use prometheus_client::encoding::prometheus_protobuf::encode;
                use prost::Message;
                let mut families = encode(registry).map_err(|_| RenderError(format))?;
                exemplars::add_to_protobuf(&mut families, &self.timings.traced());
                let mut out = Vec::new();
                for family in families {
                    family
                        .encode_length_delimited(&mut out)
                        .map_err(|_| RenderError(format))?;
                }
                out
            }
        })
    }
}

/// Asks the kernel to back the body buffer at `ptr` (`capacity` bytes) with transparent huge
/// pages where it can. A render writes into freshly mapped memory each time (the buffer is
/// returned to the kernel after the response, `app::return_large_buffers_to_os`); faulting
/// 20 MiB in 4 KiB pages cost 14–25 ms on the benchmark VM, in 2 MiB pages 1.3–5.7 ms
/// (BENCHMARKS §13). Only buffers of at least 4 MiB; a no-op where THP is off or on other
/// systems. The contents are not affected.
fn advise_huge_pages(ptr: *const u8, capacity: usize) {
    #[cfg(target_os = "linux")]
    if capacity >= 4 << 20 {
        const HUGE: usize = 2 << 20;
        let start = (ptr as usize).next_multiple_of(HUGE);
        let end = (ptr as usize + capacity) / HUGE * HUGE;
        if end > start {
            // SAFETY: the range lies inside an allocation this function's caller owns and
            // has not written yet; MADV_HUGEPAGE only changes how its pages are backed.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, capacity);
}

/// Rendering the metrics in a format failed (an encoder error; nothing a scraper sent).
#[derive(Debug, thiserror::Error)]
#[error("encoding the metrics as {0:?} failed")]
pub struct RenderError(pub Exposition);

/// How much of an uncompressed body [`Metrics::render_gzip`] lets gather before compressing it
/// (it compresses at family boundaries, so a part is at least this and at most this plus one
/// family: ~2.4 MiB for a histogram family at 1,000 pairs).
const GZIP_PART_BYTES: usize = 256 * 1024;

/// Compresses `part` into `gz` when it has reached `part_bytes`; whether it did (the caller
/// then empties its buffer). Writing into a `Vec` fails only when memory runs out, which aborts
/// first; the error is the encoders' own type so that it ends their render.
fn compress_part(
    gz: &mut flate2::write::GzEncoder<Vec<u8>>,
    part: &[u8],
    part_bytes: usize,
) -> Result<bool, std::fmt::Error> {
    use std::io::Write;
    if part.len() < part_bytes {
        return Ok(false);
    }
    gz.write_all(part).map_err(|_| std::fmt::Error)?;
    Ok(true)
}

/// The exposition formats `/metrics` serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Exposition {
    /// The Prometheus text format 0.0.4 (the default).
    Text = 0,
    /// OpenMetrics 1.0.0 text.
    OpenMetrics = 1,
    /// The Prometheus protobuf format: length-delimited `io.prometheus.client.MetricFamily`
    /// messages, the only format that carries native histograms.
    Protobuf = 2,
}

impl Exposition {
    /// The `Content-Type` of a body in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Exposition::Text => "text/plain; version=0.0.4; charset=utf-8",
            Exposition::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Exposition::Protobuf => PROTOBUF_CONTENT_TYPE,
        }
    }
}

/// The media type of the Prometheus protobuf exposition.
pub const PROTOBUF_CONTENT_TYPE: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

/// Seconds since the Unix epoch (0 before it).
fn unix_seconds(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs_f64()
}

#[cfg(test)]
mod tests;
