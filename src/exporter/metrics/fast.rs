//! The `/metrics` encoder of the per-pair families: each series' label text is written
//! once per sample line from its pre-escaped form ([`SeriesFamily`]), numbers through `itoa` and
//! `dtoa` (what prometheus-client uses), the protobuf `Metric` messages straight into the body
//! (`fast/protobuf.rs`), no intermediate `MetricFamily` list: 8–13× faster than prometheus-client's
//! encoder at 1,000 pairs (BENCHMARKS §13).
//!
//! prometheus-client stays the source of truth: [`Catalog`] registers every family in one
//! complete `Registry` as well (the reference), each family's `HELP`/`TYPE`/`UNIT` lines and
//! protobuf descriptor are taken from the crate's own encoding of it at registration, and tests
//! compare the fast body with the reference body byte for byte in all three formats
//! (`tests/fast/exporter/exposition_equivalence.rs`). Families without per-pair labels (build, reload, shard,
//! the read delay, the endpoint identity) are encoded by the crate itself, in order, between
//! the fast ones.

use prometheus_client::encoding::prometheus_protobuf::prometheus_data_model as pb;
use prometheus_client::encoding::{prometheus_text, text, EncodeLabelSet, MetricEncoder};
use prometheus_client::registry::{Metric, Registry, Unit};

use super::series::{SeriesFamily, SeriesLabels};

mod histogram;
pub(super) mod protobuf;

/// The text exposition formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextFormat {
    /// The Prometheus text format 0.0.4.
    Prometheus,
    /// OpenMetrics 1.0.0 text (the `# EOF` is the caller's).
    OpenMetrics,
}

/// Reused buffers of one render.
#[derive(Default)]
pub struct Scratch {
    /// `le` label values of the current histogram family, per text format.
    pub le: Vec<String>,
    /// The bounds `le` was made for.
    pub le_bounds: Vec<f64>,
    /// The label text of the series being written.
    pub labels: String,
    /// Protobuf body of the family being written.
    pub body: Vec<u8>,
    /// A series' exemplars, oldest first (indices).
    pub order: Vec<usize>,
    /// Native bucket spans and deltas of one side.
    pub spans: Vec<(i32, u32)>,
    /// See `spans`.
    pub deltas: Vec<i64>,
}

/// A metric type the fast encoder writes: its sample lines in the text formats and its value in
/// a protobuf `Metric`, exactly as prometheus-client's encoders would.
pub trait FastMetric: Metric + prometheus_client::metrics::TypedMetric + Clone {
    /// Appends the sample lines of one series to `out`: `name` is the full family name (prefix
    /// and unit included), `labels` the series' escaped label pairs.
    fn write_text(
        &self,
        format: TextFormat,
        name: &str,
        labels: &str,
        out: &mut String,
        scratch: &mut Scratch,
    );

    /// Appends the value fields of this series' protobuf `Metric` (after its labels).
    fn write_protobuf(&self, out: &mut Vec<u8>, scratch: &mut Scratch);

    /// Appends this series' protobuf `Metric` messages (field 4 of its family), `labels`
    /// writing its label pairs into each: one message, unless the series holds one metric per
    /// value of a label of its own (`CountsByLabel`: a pair's failure counts by reason).
    fn write_protobuf_metrics(
        &self,
        out: &mut Vec<u8>,
        labels: &dyn Fn(&mut Vec<u8>),
        scratch: &mut Scratch,
    ) {
        protobuf::nested(out, 4, |m| {
            labels(m);
            self.write_protobuf(m, scratch);
        });
    }

    /// Encodes this series under `labels` with prometheus-client's encoder (the reference the
    /// fast path is tested against): one metric, unless it holds one per value of a label of
    /// its own.
    ///
    /// Errors: the crate's encoder failed.
    fn encode_reference<L: EncodeLabelSet>(
        &self,
        labels: &L,
        encoder: &mut MetricEncoder<'_>,
    ) -> std::fmt::Result {
        self.encode(encoder.encode_family(labels)?)
    }
}

/// One family on the fast path, with the descriptors the crate wrote for it.
struct FastFamily<L, M> {
    family: SeriesFamily<L, M>,
    /// Full name: prefix, name, unit.
    name: String,
    /// `# HELP`/`# TYPE` (and `# UNIT`) lines, per text format.
    header: [String; 2],
    /// The protobuf family without metrics and without unit (written after the metrics).
    pb_family: pb::MetricFamily,
    pb_unit: String,
}

/// What [`Catalog`] needs of a fast family, type-erased.
trait RenderFamily: Send + Sync {
    fn render_text(&self, format: TextFormat, out: &mut String, scratch: &mut Scratch);
    fn render_protobuf(&self, out: &mut Vec<u8>, scratch: &mut Scratch);
    #[cfg(test)]
    fn name(&self) -> &str;
}

impl<L: SeriesLabels, M: FastMetric> RenderFamily for FastFamily<L, M> {
    #[cfg(test)]
    fn name(&self) -> &str {
        &self.name
    }

    fn render_text(&self, format: TextFormat, out: &mut String, scratch: &mut Scratch) {
        let series = self.family.read();
        if series.is_empty() {
            return;
        }
        out.push_str(&self.header[format as usize]);
        let mut text = std::mem::take(&mut scratch.labels);
        for (labels, metric) in series.iter() {
            text.clear();
            labels.write_text(&mut text);
            metric.write_text(format, &self.name, &text, out, scratch);
        }
        scratch.labels = text;
    }

    fn render_protobuf(&self, out: &mut Vec<u8>, scratch: &mut Scratch) {
        use prost::Message;
        let series = self.family.read();
        if series.is_empty() {
            return;
        }
        let mut body = std::mem::take(&mut scratch.body);
        body.clear();
        self.pb_family
            .encode(&mut body)
            .expect("a Vec grows as needed");
        for (labels, s) in series.iter() {
            let labels = |m: &mut Vec<u8>| {
                labels.for_each_label(&mut |name, value| protobuf::label(m, 1, name, value));
            };
            s.write_protobuf_metrics(&mut body, &labels, scratch);
        }
        if !self.pb_unit.is_empty() {
            prost::encoding::string::encode(5, &self.pb_unit, &mut body);
        }
        prost::encoding::encode_varint(body.len() as u64, out);
        out.extend_from_slice(&body);
        scratch.body = body;
    }
}

/// The parts of the exposition, in registration order.
enum Section {
    /// Families the crate encodes (no per-pair labels).
    Library(Registry),
    /// One per-pair family.
    Fast(Box<dyn RenderFamily>),
}

/// Every registered family, twice: in one prometheus-client [`Registry`] (the reference the
/// fast path is tested against) and as sections the fast render walks in the same order.
pub struct Catalog {
    prefix: &'static str,
    reference: Registry,
    sections: Vec<Section>,
}

impl Catalog {
    /// An empty catalog whose family names start with `prefix_`.
    pub fn new(prefix: &'static str) -> Self {
        Catalog {
            prefix,
            reference: Registry::with_prefix(prefix),
            sections: Vec::new(),
        }
    }

    /// The complete registry, encoded by prometheus-client alone.
    pub fn reference(&self) -> &Registry {
        &self.reference
    }

    /// The full names of the families on the fast path (every [`SeriesFamily`]: the families
    /// with per-pair or per-target labels), in exposition order.
    #[cfg(test)]
    pub(crate) fn fast_family_names(&self) -> Vec<&str> {
        self.sections
            .iter()
            .filter_map(|s| match s {
                Section::Fast(f) => Some(f.name()),
                Section::Library(_) => None,
            })
            .collect()
    }

    /// Registers `metric` under `name` (a [`SeriesFamily`] on the fast path, anything else in a
    /// library section); the same call shape as `Registry::register`. Returns `metric` (its
    /// clones share its series), for the caller to keep and record into.
    pub fn register<M: Registrable + Clone>(&mut self, name: &str, help: &str, metric: M) -> M {
        metric.clone().add_to(self, name, help, None);
        metric
    }

    /// [`Catalog::register`] with `unit` appended to the name.
    pub fn register_with_unit<M: Registrable + Clone>(
        &mut self,
        name: &str,
        help: &str,
        unit: Unit,
        metric: M,
    ) -> M {
        metric.clone().add_to(self, name, help, Some(unit));
        metric
    }

    /// Registers a family the crate encodes.
    fn register_library(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<Unit>,
        metric: impl Metric + Clone,
    ) {
        register_in(
            &mut self.reference,
            name,
            help,
            unit.clone(),
            metric.clone(),
        );
        if !matches!(self.sections.last(), Some(Section::Library(_))) {
            self.sections
                .push(Section::Library(Registry::with_prefix(self.prefix)));
        }
        let Some(Section::Library(r)) = self.sections.last_mut() else {
            unreachable!("a library section was just pushed");
        };
        register_in(r, name, help, unit, metric);
    }

    /// Registers a per-pair family the fast path encodes.
    fn register_fast<L: SeriesLabels, M: FastMetric>(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<Unit>,
        family: SeriesFamily<L, M>,
    ) {
        register_in(
            &mut self.reference,
            name,
            help,
            unit.clone(),
            family.clone(),
        );
        // The descriptors, as the crate writes them for one unlabelled series of this type.
        let mut one = Registry::with_prefix(self.prefix);
        register_in(&mut one, name, help, unit.clone(), family.new_metric());
        let header = |format| {
            let mut s = String::new();
            match format {
                TextFormat::Prometheus => prometheus_text::encode(&mut s, &one),
                TextFormat::OpenMetrics => text::encode_registry(&mut s, &one),
            }
            .expect("one unlabelled series encodes");
            s.split_inclusive('\n')
                .take_while(|l| l.starts_with('#'))
                .collect::<String>()
        };
        let header = [
            header(TextFormat::Prometheus),
            header(TextFormat::OpenMetrics),
        ];
        let mut families = prometheus_client::encoding::prometheus_protobuf::encode(&one)
            .expect("one unlabelled series encodes");
        let mut pb_family = families.pop().expect("one family registered");
        pb_family.metric.clear();
        let pb_unit = std::mem::take(&mut pb_family.unit);
        let full = match &unit {
            Some(u) => format!("{}_{name}_{}", self.prefix, u.as_str()),
            None => format!("{}_{name}", self.prefix),
        };
        self.sections.push(Section::Fast(Box::new(FastFamily {
            family,
            name: full,
            header,
            pb_family,
            pb_unit,
        })));
    }

    /// Appends the whole exposition in a text format (OpenMetrics with its `# EOF`).
    ///
    /// Errors: the crate's encoder failed on a library section (it does not for these metrics).
    pub fn render_text(&self, format: TextFormat, out: &mut String) -> std::fmt::Result {
        self.render_text_in_parts(format, out, &mut |_| Ok(()))
    }

    /// [`Catalog::render_text`] in parts: `part` is called with `out` after each section (a
    /// family, or a run of library families) and at the end; it may take the text and clear
    /// `out` (a compressor does), so the whole body need never be held at once. Sections are
    /// whole families, so a part never splits one.
    ///
    /// Errors: the crate's encoder failed on a library section, or `part` failed.
    pub fn render_text_in_parts(
        &self,
        format: TextFormat,
        out: &mut String,
        part: &mut dyn FnMut(&mut String) -> std::fmt::Result,
    ) -> std::fmt::Result {
        let mut scratch = Scratch::default();
        for section in &self.sections {
            match section {
                Section::Library(r) => match format {
                    TextFormat::Prometheus => prometheus_text::encode(out, r)?,
                    TextFormat::OpenMetrics => text::encode_registry(out, r)?,
                },
                Section::Fast(f) => f.render_text(format, out, &mut scratch),
            }
            part(out)?;
        }
        if format == TextFormat::OpenMetrics {
            text::encode_eof(out)?;
        }
        part(out)
    }

    /// Appends the whole exposition as length-delimited protobuf `MetricFamily` messages.
    ///
    /// Errors: the crate's encoder failed on a library section.
    pub fn render_protobuf(&self, out: &mut Vec<u8>) -> std::fmt::Result {
        self.render_protobuf_in_parts(out, &mut |_| Ok(()))
    }

    /// [`Catalog::render_protobuf`] in parts, as [`Catalog::render_text_in_parts`].
    ///
    /// Errors: the crate's encoder failed on a library section, or `part` failed.
    pub fn render_protobuf_in_parts(
        &self,
        out: &mut Vec<u8>,
        part: &mut dyn FnMut(&mut Vec<u8>) -> std::fmt::Result,
    ) -> std::fmt::Result {
        use prost::Message;
        let mut scratch = Scratch::default();
        for section in &self.sections {
            match section {
                Section::Library(r) => {
                    for family in prometheus_client::encoding::prometheus_protobuf::encode(r)? {
                        family
                            .encode_length_delimited(out)
                            .map_err(|_| std::fmt::Error)?;
                    }
                }
                Section::Fast(f) => f.render_protobuf(out, &mut scratch),
            }
            part(out)?;
        }
        Ok(())
    }
}

fn register_in(r: &mut Registry, name: &str, help: &str, unit: Option<Unit>, metric: impl Metric) {
    match unit {
        Some(u) => r.register_with_unit(name, help, u, metric),
        None => r.register(name, help, metric),
    }
}

/// Appends `name` `suffix` `{labels}`: a sample line up to its value.
fn series_name(out: &mut String, name: &str, suffix: &str, labels: &str) {
    out.push_str(name);
    out.push_str(suffix);
    out.push('{');
    out.push_str(labels);
    out.push('}');
}

/// ` VALUE\n` for an integer.
pub(super) fn push_u64(out: &mut String, v: u64) {
    out.push(' ');
    out.push_str(itoa::Buffer::new().format(v));
    out.push('\n');
}

/// ` VALUE\n` for a float: OpenMetrics as `dtoa` writes it (`NaN`, `inf`), Prometheus 0.0.4
/// with `NaN`, `+Inf`, `-Inf` (prometheus-client's two rules).
pub fn push_f64(out: &mut String, format: TextFormat, v: f64) {
    out.push(' ');
    let mut b = dtoa::Buffer::new();
    match format {
        TextFormat::OpenMetrics => out.push_str(b.format(v)),
        TextFormat::Prometheus if v.is_finite() => out.push_str(b.format_finite(v)),
        TextFormat::Prometheus if v.is_nan() => out.push_str("NaN"),
        TextFormat::Prometheus if v > 0.0 => out.push_str("+Inf"),
        TextFormat::Prometheus => out.push_str("-Inf"),
    }
    out.push('\n');
}

mod scalar {
    //! Counters and gauges: a sample line `name[_total]{labels} value` and a protobuf
    //! `counter` (field 3) or `gauge` (field 2) with the value as a double.
    use super::*;
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::gauge::Gauge;
    use std::sync::atomic::AtomicU64;

    /// `FastMetric` for a counter or gauge type: its sample name suffix, its protobuf field,
    /// and how its value is written in text (`int` through itoa, `float` per format).
    macro_rules! scalar_metric {
        ($ty:ty, $suffix:literal, $field:literal, int) => {
            impl FastMetric for $ty {
                fn write_text(
                    &self,
                    _: TextFormat,
                    name: &str,
                    labels: &str,
                    out: &mut String,
                    _: &mut Scratch,
                ) {
                    series_name(out, name, $suffix, labels);
                    out.push(' ');
                    out.push_str(itoa::Buffer::new().format(self.get()));
                    out.push('\n');
                }
                fn write_protobuf(&self, out: &mut Vec<u8>, _: &mut Scratch) {
                    protobuf::scalar(out, $field, self.get() as f64);
                }
            }
        };
        ($ty:ty, $suffix:literal, $field:literal, float) => {
            impl FastMetric for $ty {
                fn write_text(
                    &self,
                    f: TextFormat,
                    name: &str,
                    labels: &str,
                    out: &mut String,
                    _: &mut Scratch,
                ) {
                    series_name(out, name, $suffix, labels);
                    push_f64(out, f, self.get());
                }
                fn write_protobuf(&self, out: &mut Vec<u8>, _: &mut Scratch) {
                    protobuf::scalar(out, $field, self.get());
                }
            }
        };
    }

    scalar_metric!(Counter, "_total", 3, int);
    scalar_metric!(Counter<f64, AtomicU64>, "_total", 3, float);
    scalar_metric!(Gauge, "", 2, int);
    scalar_metric!(Gauge<f64, AtomicU64>, "", 2, float);
}

/// A metric [`Catalog::register`] accepts: per-pair [`SeriesFamily`]s go to the fast path,
/// everything else to a library section.
pub trait Registrable {
    /// Adds `self` to `catalog` under `name` (`unit` appended).
    fn add_to(self, catalog: &mut Catalog, name: &str, help: &str, unit: Option<Unit>);
}

impl<L: SeriesLabels, M: FastMetric> Registrable for SeriesFamily<L, M> {
    fn add_to(self, catalog: &mut Catalog, name: &str, help: &str, unit: Option<Unit>) {
        catalog.register_fast(name, help, unit, self);
    }
}

/// Library types, encoded by prometheus-client itself.
macro_rules! library_registrable {
    ($($ty:ty),+ $(,)?) => {
        $(impl Registrable for $ty {
            fn add_to(self, catalog: &mut Catalog, name: &str, help: &str, unit: Option<Unit>) {
                catalog.register_library(name, help, unit, self);
            }
        })+
    };
}
library_registrable!(
    prometheus_client::metrics::counter::Counter,
    prometheus_client::metrics::gauge::Gauge,
    prometheus_client::metrics::gauge::Gauge<f64, std::sync::atomic::AtomicU64>,
    prometheus_client::metrics::histogram::Histogram,
);

impl<S, M, C> Registrable for prometheus_client::metrics::family::Family<S, M, C>
where
    prometheus_client::metrics::family::Family<S, M, C>: Metric + Clone,
{
    fn add_to(self, catalog: &mut Catalog, name: &str, help: &str, unit: Option<Unit>) {
        catalog.register_library(name, help, unit, self);
    }
}
