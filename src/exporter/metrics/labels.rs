//! The label sets of the per-pair and per-target series. Every per-pair family is keyed by
//! [`ProbeLabels`], alone or with one more label ([`WithLabel`]: `reason`, `kind`, `check`,
//! `component`, `quantile`), so a label that every pair's series gains is a field of
//! `ProbeLabels` and a change to no family.

use std::fmt;
use std::sync::Arc;

use prometheus_client::encoding::{EncodeLabelSet, LabelSetEncoder};

use super::series::{
    append_text_labels, escape_label_value, series_labels, SeriesFamily, SeriesLabels,
};
use crate::measure::ProbeOutcome;

/// Labels of every probe series: the config's names, never a URL or prompt text; and, for a
/// target with `replicas:`, the replica probed.
///
/// One shared allocation per pair: every per-pair family keys its series by a clone of the
/// same `ProbeLabels` (a pointer, not four), and the label text the encoder writes on each
/// sample line is escaped once, when the labels are made, and kept here for all of them (at
/// 2,000 pairs the per-series copies cost about 12 MiB: BENCHMARKS §24). Ordered, compared and hashed by the four names alone.
#[derive(Clone)]
pub struct ProbeLabels(Arc<PairNames>);

/// The names of [`ProbeLabels`], readable through it (`labels.target`).
pub struct PairNames {
    /// Target name.
    pub target: Arc<str>,
    /// Configured model.
    pub model: Arc<str>,
    /// Scenario name.
    pub scenario: Arc<str>,
    /// The replica (`ip:port`, or the file_sd entry as written) of a target with `replicas:`;
    /// empty for every other target, whose series then have no `replica` label at all (not
    /// `replica=""`): what they exported before replicas existed.
    pub replica: Arc<str>,
    /// The label text of a sample line (`target="…",model="…",…`, values escaped).
    text: Box<str>,
}

impl ProbeLabels {
    /// The labels of one pair (`replica` empty for a target without `replicas:`).
    pub fn new(
        target: impl Into<Arc<str>>,
        model: impl Into<Arc<str>>,
        scenario: impl Into<Arc<str>>,
        replica: impl Into<Arc<str>>,
    ) -> Self {
        let mut names = PairNames {
            target: target.into(),
            model: model.into(),
            scenario: scenario.into(),
            replica: replica.into(),
            text: Box::default(),
        };
        let mut text = String::new();
        append_text_labels(|f| names.for_each_label(f), &mut text);
        names.text = text.into();
        ProbeLabels(Arc::new(names))
    }

    /// The same pair with another replica.
    pub fn with_replica(&self, replica: impl Into<Arc<str>>) -> Self {
        ProbeLabels::new(
            self.target.clone(),
            self.model.clone(),
            self.scenario.clone(),
            replica,
        )
    }

    /// How many clones of this instance exist (itself included).
    #[cfg(test)]
    pub(super) fn instances(&self) -> usize {
        Arc::strong_count(&self.0)
    }

    fn key(&self) -> (&str, &str, &str, &str) {
        (&self.target, &self.model, &self.scenario, &self.replica)
    }
}

impl PairNames {
    fn for_each_label(&self, f: &mut dyn FnMut(&'static str, &str)) {
        f("target", &self.target);
        f("model", &self.model);
        f("scenario", &self.scenario);
        if !self.replica.is_empty() {
            f("replica", &self.replica);
        }
    }
}

impl std::ops::Deref for ProbeLabels {
    type Target = PairNames;
    fn deref(&self) -> &PairNames {
        &self.0
    }
}

impl PartialEq for ProbeLabels {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.key() == other.key()
    }
}

impl Eq for ProbeLabels {}

impl PartialOrd for ProbeLabels {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ProbeLabels {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        if Arc::ptr_eq(&self.0, &other.0) {
            return std::cmp::Ordering::Equal;
        }
        self.key().cmp(&other.key())
    }
}

impl std::hash::Hash for ProbeLabels {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

impl fmt::Debug for ProbeLabels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProbeLabels")
            .field("target", &self.target)
            .field("model", &self.model)
            .field("scenario", &self.scenario)
            .field("replica", &self.replica)
            .finish()
    }
}

impl SeriesLabels for ProbeLabels {
    fn for_each_label(&self, f: &mut dyn FnMut(&'static str, &str)) {
        self.0.for_each_label(f);
    }

    fn write_text(&self, out: &mut String) {
        out.push_str(&self.text);
    }
}

impl EncodeLabelSet for ProbeLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), fmt::Error> {
        [
            ("target", &*self.target),
            ("model", &*self.model),
            ("scenario", &*self.scenario),
        ]
        .encode(encoder)?;
        if !self.replica.is_empty() {
            [("replica", &*self.replica)].encode(encoder)?;
        }
        Ok(())
    }
}

impl ProbeLabels {
    /// The labels of the pair `outcome` probed.
    pub(super) fn of(outcome: &ProbeOutcome) -> Self {
        ProbeLabels::new(
            outcome.target.clone(),
            outcome.model.clone(),
            outcome.scenario.clone(),
            outcome.replica.clone(),
        )
    }

    /// The labels of the pair's target.
    pub(super) fn target(&self) -> TargetLabels {
        TargetLabels {
            target: self.target.clone(),
            model: self.model.clone(),
        }
    }

    /// These labels and `name="value"` after them.
    pub(super) fn with(&self, name: &'static str, value: &'static str) -> WithLabel<ProbeLabels> {
        WithLabel::new(self, name, value)
    }
}

/// Labels of the per-target series: the target's name and its configured model.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub(super) struct TargetLabels {
    pub(super) target: Arc<str>,
    pub(super) model: Arc<str>,
}

series_labels!(TargetLabels { target, model });

impl TargetLabels {
    /// The labels of target `target` configured with `model`.
    pub(super) fn new(target: &str, model: &str) -> Self {
        TargetLabels {
            target: target.into(),
            model: model.into(),
        }
    }

    /// These labels and `name="value"` after them.
    pub(super) fn with(&self, name: &'static str, value: &'static str) -> WithLabel<TargetLabels> {
        WithLabel::new(self, name, value)
    }
}

/// Labels of the replica-discovery series: the target's name alone (discovery does not depend
/// on the model).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub(super) struct DiscoveryLabels {
    pub(super) target: Arc<str>,
}

series_labels!(DiscoveryLabels { target });

impl DiscoveryLabels {
    /// These labels and `name="value"` after them.
    pub(super) fn with(
        &self,
        name: &'static str,
        value: &'static str,
    ) -> WithLabel<DiscoveryLabels> {
        WithLabel::new(self, name, value)
    }
}

/// The labels `L` of a pair or target and one more, `name="value"`, written after them: one of
/// several series of the pair in one family (a failure reason, an anomaly kind, a quantile …).
/// Within a family `name` is fixed, so the series sort by `L`, then by `value`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct WithLabel<L> {
    base: L,
    name: &'static str,
    value: &'static str,
}

impl<L: Clone> WithLabel<L> {
    fn new(base: &L, name: &'static str, value: &'static str) -> Self {
        WithLabel {
            base: base.clone(),
            name,
            value,
        }
    }
}

impl<L: EncodeLabelSet> EncodeLabelSet for WithLabel<L> {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), fmt::Error> {
        self.base.encode(encoder)?;
        [(self.name, self.value)].encode(encoder)
    }
}

impl<L: SeriesLabels> SeriesLabels for WithLabel<L> {
    fn for_each_label(&self, f: &mut dyn FnMut(&'static str, &str)) {
        self.base.for_each_label(f);
        f(self.name, self.value);
    }

    fn write_text(&self, out: &mut String) {
        self.base.write_text(out);
        out.push(',');
        out.push_str(self.name);
        out.push_str("=\"");
        escape_label_value(self.value, out);
        out.push('"');
    }
}

impl<L: SeriesLabels, M: Clone> SeriesFamily<WithLabel<L>, M> {
    /// Removes every series of `base`, whatever its extra label says.
    pub(super) fn remove_all_of(&self, base: &L) {
        // The smallest label set of `base`: its series follow it, in one run.
        let first = WithLabel::new(base, "", "");
        self.remove_run(&first, |l| l.base == *base);
    }
}
