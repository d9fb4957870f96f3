//! A family of labelled series whose label sets are kept sorted and pre-escaped, so the fast
//! encoder ([`super::fast`]) can write each series' label text once per render instead of once per
//! sample line.
//!
//! [`SeriesFamily`] is the exporter's own replacement for prometheus-client's `Family`: that type
//! keeps its map private, so nothing outside the crate can iterate it. It still implements the
//! crate's [`EncodeMetric`], so the same family registered in a prometheus-client `Registry`
//! encodes through the crate's own encoders: the reference the fast encoder is tested against
//! (`Metrics::render_reference`).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard};

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::{MetricType, TypedMetric};

use super::fast::FastMetric;

/// A label set the fast encoder can write: its `(name, value)` pairs, in the order its
/// [`EncodeLabelSet`] implementation writes them (field order).
pub trait SeriesLabels: EncodeLabelSet + Clone + Ord + fmt::Debug + Send + Sync + 'static {
    /// Calls `f` with each label's name and value, in encoding order.
    fn for_each_label(&self, f: &mut dyn FnMut(&'static str, &str));

    /// Appends the label set as it appears between the braces of a text sample line
    /// ([`text_labels`]); a label set that keeps its text made (a pair's) copies it.
    fn write_text(&self, out: &mut String) {
        append_text_labels(|f| self.for_each_label(f), out);
    }
}

/// Declares [`SeriesLabels`] for a label struct from its fields, in declaration order (the order
/// `#[derive(EncodeLabelSet)]` writes them). Fields are `String` or `&'static str`.
macro_rules! series_labels {
    ($ty:ty { $($field:ident),+ $(,)? }) => {
        impl $crate::metrics::series::SeriesLabels for $ty {
            fn for_each_label(&self, f: &mut dyn FnMut(&'static str, &str)) {
                $(f(stringify!($field), &self.$field);)+
            }
        }
    };
}
pub(crate) use series_labels;

/// The series of one metric family, keyed and iterated by label set (sorted, so every render
/// lists them in the same order). Cloning shares the series (like prometheus-client's
/// `Family`). `M` is a handle type whose clones share one value (`Counter`, `Gauge`,
/// `Arc<ProbeHistogram>`).
pub struct SeriesFamily<L, M> {
    series: Arc<RwLock<BTreeMap<L, M>>>,
    new_metric: Arc<dyn Fn() -> M + Send + Sync>,
}

impl<L, M> Clone for SeriesFamily<L, M> {
    fn clone(&self) -> Self {
        SeriesFamily {
            series: self.series.clone(),
            new_metric: self.new_metric.clone(),
        }
    }
}

impl<L: fmt::Debug, M: fmt::Debug> fmt::Debug for SeriesFamily<L, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SeriesFamily")
            .field("series", &self.read().len())
            .finish()
    }
}

impl<L: SeriesLabels, M: Default + Clone + 'static> Default for SeriesFamily<L, M> {
    fn default() -> Self {
        Self::new(M::default)
    }
}

impl<L: SeriesLabels, M: Clone> SeriesFamily<L, M> {
    /// An empty family whose series are made by `new_metric`.
    pub fn new(new_metric: impl Fn() -> M + Send + Sync + 'static) -> Self {
        SeriesFamily {
            series: Arc::new(RwLock::new(BTreeMap::new())),
            new_metric: Arc::new(new_metric),
        }
    }

    /// The series of `labels`, created (at zero) if it does not exist.
    pub fn get_or_create(&self, labels: &L) -> M {
        if let Some(m) = self.read().get(labels) {
            return m.clone();
        }
        let mut map = self.series.write().unwrap_or_else(PoisonError::into_inner);
        map.entry(labels.clone())
            .or_insert_with(|| (self.new_metric)())
            .clone()
    }

    /// The label set the family keeps for `labels` (equal to it, perhaps another instance), if
    /// it has a series of it: a caller that keys other series by the kept instance shares it.
    pub fn kept_labels(&self, labels: &L) -> Option<L> {
        self.read().get_key_value(labels).map(|(k, _)| k.clone())
    }

    /// A new series' metric, not part of the family.
    pub fn new_metric(&self) -> M {
        (self.new_metric)()
    }

    /// The series of `labels`, if it exists.
    pub fn get(&self, labels: &L) -> Option<M> {
        self.read().get(labels).cloned()
    }

    /// Removes the series of `labels`; whether it existed.
    pub fn remove(&self, labels: &L) -> bool {
        self.series
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(labels)
            .is_some()
    }

    /// Removes the run of series that starts at the first label set not below `first` and
    /// lasts while `within` holds of their label sets (in label order); how many.
    pub fn remove_run(&self, first: &L, within: impl Fn(&L) -> bool) -> usize {
        let mut map = self.series.write().unwrap_or_else(PoisonError::into_inner);
        let run: Vec<L> = map
            .range(first..)
            .map(|(l, _)| l)
            .take_while(|l| within(l))
            .cloned()
            .collect();
        for l in &run {
            map.remove(l);
        }
        run.len()
    }

    /// Removes every series.
    pub fn clear(&self) {
        self.series
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

impl<L, M> SeriesFamily<L, M> {
    /// The series, sorted by label set, read-locked for the caller's iteration.
    pub fn read(&self) -> RwLockReadGuard<'_, BTreeMap<L, M>> {
        self.series.read().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `labels` as text-format label pairs: `name="value"`, comma-separated, values escaped.
pub fn text_labels(labels: &impl SeriesLabels) -> String {
    let mut out = String::new();
    append_text_labels(|f| labels.for_each_label(f), &mut out);
    out
}

/// Appends the text of the label pairs `each` calls its argument with ([`text_labels`]).
pub fn append_text_labels(each: impl FnOnce(&mut dyn FnMut(&'static str, &str)), out: &mut String) {
    let mut first = true;
    each(&mut |name, value| {
        if !first {
            out.push(',');
        }
        first = false;
        out.push_str(name);
        out.push_str("=\"");
        escape_label_value(value, out);
        out.push('"');
    });
}

/// Appends `value` escaped for a text-format label value: `\` → `\\`, `"` → `\"`, newline →
/// `\n` (the OpenMetrics and Prometheus 0.0.4 rule, as prometheus-client applies it).
pub fn escape_label_value(value: &str, out: &mut String) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

impl<L, M> EncodeMetric for SeriesFamily<L, M>
where
    L: SeriesLabels,
    M: FastMetric,
{
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), fmt::Error> {
        for (labels, metric) in self.read().iter() {
            metric.encode_reference(labels, &mut encoder)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        M::TYPE
    }

    fn is_empty(&self) -> bool {
        self.read().is_empty()
    }
}

impl<L, M: TypedMetric> TypedMetric for SeriesFamily<L, M> {
    const TYPE: MetricType = M::TYPE;
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::counter::Counter;

    #[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
    struct Two {
        target: String,
        reason: &'static str,
    }
    series_labels!(Two { target, reason });

    #[test]
    fn label_text_escapes_like_the_text_formats() {
        let l = Two {
            target: "a\"b\\c\nd é".into(),
            reason: "x",
        };
        assert_eq!(text_labels(&l), r#"target="a\"b\\c\nd é",reason="x""#);
    }

    #[test]
    fn series_are_shared_sorted_and_removable() {
        let f: SeriesFamily<Two, Counter> = SeriesFamily::default();
        let l = |t: &str| Two {
            target: t.into(),
            reason: "r",
        };
        f.get_or_create(&l("b")).inc();
        f.get_or_create(&l("a")).inc_by(2);
        f.clone().get_or_create(&l("b")).inc();
        let seen: Vec<(String, u64)> = f
            .read()
            .iter()
            .map(|(k, m)| (k.target.clone(), m.get()))
            .collect();
        assert_eq!(seen, vec![("a".into(), 2), ("b".into(), 2)]);
        assert!(f.remove(&l("a")));
        assert!(!f.remove(&l("a")));
        assert_eq!(f.get(&l("a")).map(|c| c.get()), None);
        f.clear();
        assert!(EncodeMetric::is_empty(&f));
    }

    #[test]
    fn a_run_of_series_goes_and_its_neighbours_stay() {
        let f: SeriesFamily<Two, Counter> = SeriesFamily::default();
        let l = |target: &str, reason| Two {
            target: target.into(),
            reason,
        };
        for (t, r) in [("a", "x"), ("b", "x"), ("b", "y"), ("c", "x")] {
            f.get_or_create(&l(t, r)).inc();
        }
        assert_eq!(f.remove_run(&l("b", ""), |k| k.target == "b"), 2);
        let left: Vec<(String, &str)> = f
            .read()
            .keys()
            .map(|k| (k.target.clone(), k.reason))
            .collect();
        assert_eq!(left, vec![("a".into(), "x"), ("c".into(), "x")]);
        assert_eq!(f.remove_run(&l("b", ""), |k| k.target == "b"), 0);
    }
}
