//! The label sets of the per-pair and per-target series. Every per-pair family is keyed by
//! [`ProbeLabels`], alone or with one more label ([`WithLabel`]: `reason`, `kind`, `check`,
//! `component`, `quantile`), so a label that every pair's series gains is a field of
//! `ProbeLabels` and a change to no family.

use std::fmt;
use std::sync::Arc;

use prometheus_client::encoding::{EncodeLabelSet, LabelSetEncoder};

use super::series::{series_labels, SeriesFamily, SeriesLabels};
use crate::measure::ProbeOutcome;

/// Labels of every probe series: the config's names, never a URL or prompt text; and, for a
/// target with `replicas:`, the replica probed.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub struct ProbeLabels {
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
}

impl SeriesLabels for ProbeLabels {
    fn for_each_label(&self, f: &mut dyn FnMut(&'static str, &str)) {
        f("target", &self.target);
        f("model", &self.model);
        f("scenario", &self.scenario);
        if !self.replica.is_empty() {
            f("replica", &self.replica);
        }
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
        ProbeLabels {
            target: outcome.target.clone(),
            model: outcome.model.clone(),
            scenario: outcome.scenario.clone(),
            replica: outcome.replica.clone(),
        }
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
}

impl<L: SeriesLabels, M: Clone> SeriesFamily<WithLabel<L>, M> {
    /// Removes every series of `base`, whatever its extra label says.
    pub(super) fn remove_all_of(&self, base: &L) {
        // The smallest label set of `base`: its series follow it, in one run.
        let first = WithLabel::new(base, "", "");
        self.remove_run(&first, |l| l.base == *base);
    }
}
