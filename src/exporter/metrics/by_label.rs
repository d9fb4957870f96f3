//! A pair's counters by the value of one more label of a fixed set (`reason`): one series of a
//! [`SeriesFamily`] holds them all, so a pair costs the family one entry and one allocation,
//! not one per value. The exposition is the same as one counter per (pair, value): a sample per
//! value, its label after the pair's, the values in their sorted order (as label sets sort).
//!
//! The failure reasons are 14: at 2,000 pairs one counter per (pair, reason) was 28,000
//! entries of a sorted map and 28,000 allocations, about 3 MiB (BENCHMARKS.md §30).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::{MetricType, TypedMetric};

use super::fast::protobuf;
use super::fast::{push_u64, FastMetric, Scratch, TextFormat};
use super::series::escape_label_value;

/// The label of a [`CountsByLabel`] and its values, sorted.
#[derive(Debug)]
pub struct LabelValues {
    name: &'static str,
    sorted: Vec<&'static str>,
}

impl LabelValues {
    /// `name` with `values` (any order; sorted here). Repeated values count once.
    pub fn new(name: &'static str, values: impl IntoIterator<Item = &'static str>) -> Self {
        let mut sorted: Vec<&'static str> = values.into_iter().collect();
        sorted.sort_unstable();
        sorted.dedup();
        LabelValues { name, sorted }
    }
}

/// One series' counters, one per value of [`LabelValues`], all at zero when made. Clones
/// share the counts.
#[derive(Clone)]
pub struct CountsByLabel {
    label: &'static LabelValues,
    counts: Arc<[AtomicU64]>,
}

impl CountsByLabel {
    /// Every value's counter at zero.
    pub fn new(label: &'static LabelValues) -> Self {
        CountsByLabel {
            label,
            counts: label.sorted.iter().map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Adds one to `value`'s counter (stopping at `u64::MAX` rather than wrapping). A value
    /// outside the set is a bug in the caller: counted nowhere, and a debug build panics.
    pub fn inc(&self, value: &str) {
        let Ok(i) = self.label.sorted.binary_search(&value) else {
            debug_assert!(false, "{value} is not a value of {}", self.label.name);
            return;
        };
        let _ = self.counts[i].fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            Some(n.saturating_add(1))
        });
    }

    /// `value`'s count; `None` for a value outside the set.
    #[cfg(test)]
    pub fn get(&self, value: &str) -> Option<u64> {
        let i = self.label.sorted.binary_search(&value).ok()?;
        Some(self.counts[i].load(Ordering::Relaxed))
    }

    /// `(value, count)` in label order.
    fn each(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        (self.label.sorted.iter().copied())
            .zip(self.counts.iter().map(|c| c.load(Ordering::Relaxed)))
    }
}

impl fmt::Debug for CountsByLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.each()).finish()
    }
}

impl TypedMetric for CountsByLabel {
    const TYPE: MetricType = MetricType::Counter;
}

/// The sum over the values, as one counter: what the family's `HELP`/`TYPE` lines are taken
/// from ([`super::fast::Catalog`] encodes one unlabelled series of the type for them). The
/// family's series are encoded per value ([`FastMetric::encode_reference`]).
impl EncodeMetric for CountsByLabel {
    fn encode(&self, encoder: MetricEncoder) -> fmt::Result {
        let total = self.each().fold(0u64, |sum, (_, n)| sum.saturating_add(n));
        ConstCounter::new(total).encode(encoder)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Counter
    }
}

/// The pair's labels, then this set's.
struct AndValue<'a, L> {
    base: &'a L,
    name: &'static str,
    value: &'static str,
}

impl<L: EncodeLabelSet> EncodeLabelSet for AndValue<'_, L> {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelSetEncoder,
    ) -> Result<(), fmt::Error> {
        self.base.encode(encoder)?;
        [(self.name, self.value)].encode(encoder)
    }
}

impl FastMetric for CountsByLabel {
    fn write_text(
        &self,
        _: TextFormat,
        name: &str,
        labels: &str,
        out: &mut String,
        _: &mut Scratch,
    ) {
        for (value, n) in self.each() {
            out.push_str(name);
            out.push_str("_total{");
            out.push_str(labels);
            out.push(',');
            out.push_str(self.label.name);
            out.push_str("=\"");
            escape_label_value(value, out);
            out.push_str("\"}");
            push_u64(out, n);
        }
    }

    /// Unused: [`CountsByLabel::write_protobuf_metrics`] writes a `Metric` per value.
    fn write_protobuf(&self, out: &mut Vec<u8>, _: &mut Scratch) {
        let total = self.each().fold(0u64, |sum, (_, n)| sum.saturating_add(n));
        protobuf::scalar(out, 3, total as f64);
    }

    fn write_protobuf_metrics(
        &self,
        out: &mut Vec<u8>,
        labels: &dyn Fn(&mut Vec<u8>),
        _: &mut Scratch,
    ) {
        for (value, n) in self.each() {
            protobuf::nested(out, 4, |m| {
                labels(m);
                protobuf::label(m, 1, self.label.name, value);
                protobuf::scalar(m, 3, n as f64);
            });
        }
    }

    fn encode_reference<L: EncodeLabelSet>(
        &self,
        labels: &L,
        encoder: &mut MetricEncoder<'_>,
    ) -> fmt::Result {
        for (value, n) in self.each() {
            let labels = AndValue {
                base: labels,
                name: self.label.name,
                value,
            };
            ConstCounter::new(n).encode(encoder.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::LazyLock;

    static COLOURS: LazyLock<LabelValues> =
        LazyLock::new(|| LabelValues::new("colour", ["red", "blue", "green", "blue"]));

    #[test]
    fn counts_each_value_in_sorted_order_and_saturates() {
        let c = CountsByLabel::new(&COLOURS);
        c.inc("red");
        c.inc("red");
        c.inc("blue");
        let shared = c.clone();
        shared.inc("green");
        assert_eq!(
            c.each().collect::<Vec<_>>(),
            [("blue", 1), ("green", 1), ("red", 2)]
        );
        assert_eq!(c.get("red"), Some(2));
        assert_eq!(c.get("violet"), None);
        c.counts[0].store(u64::MAX, Ordering::Relaxed);
        c.inc("blue");
        assert_eq!(c.get("blue"), Some(u64::MAX));
        let mut text = String::new();
        c.write_text(
            TextFormat::Prometheus,
            "x_failures",
            "pair=\"a\"",
            &mut text,
            &mut Scratch::default(),
        );
        assert_eq!(
            text,
            format!("x_failures_total{{pair=\"a\",colour=\"blue\"}} {}\nx_failures_total{{pair=\"a\",colour=\"green\"}} 1\nx_failures_total{{pair=\"a\",colour=\"red\"}} 2\n", u64::MAX)
        );
    }
}
