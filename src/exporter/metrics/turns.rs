//! A multi-turn probe's turns (`turns:`): TTFT, output tokens per second and the prompt and
//! cached prompt tokens of each turn, by a bounded `turn` label (`1` to
//! [`crate::config::MAX_TURNS`]), so that "turn 2 is not faster than turn 1" shows a prefix
//! cache that does not serve the earlier turns. One-request scenarios have no series here.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::registry::Unit;

use super::buckets::{with_thresholds, HistogramOptions, TOKENS_PER_SECOND_BUCKETS, TTFT_BUCKETS};
use super::fast::Catalog;
use super::histogram::SharedHistogram;
use super::labels::{ProbeLabels, WithLabel};
use super::probes::add_saturating;
use super::series::SeriesFamily;
use crate::measure::ProbeOutcome;

/// The `turn` label's values.
const TURNS: [&str; crate::config::MAX_TURNS] = ["1", "2", "3", "4", "5", "6", "7", "8"];

/// The per-turn families.
pub(super) struct Turns {
    ttft: SeriesFamily<WithLabel<ProbeLabels>, SharedHistogram>,
    tokens_per_second: SeriesFamily<WithLabel<ProbeLabels>, SharedHistogram>,
    prompt_tokens: SeriesFamily<WithLabel<ProbeLabels>, Counter>,
    cached_prompt_tokens: SeriesFamily<WithLabel<ProbeLabels>, Counter>,
}

impl Turns {
    /// Registers the families in `r`, their histograms laid out as `histograms` says (the
    /// buckets of TTFT and tokens per second, without SLO thresholds).
    pub(super) fn register(r: &mut Catalog, histograms: HistogramOptions) -> Self {
        let ttft_b = with_thresholds(TTFT_BUCKETS, []);
        let tps_b = with_thresholds(TOKENS_PER_SECOND_BUCKETS, []);
        Turns {
            ttft: r.register_with_unit(
                "turn_time_to_first_token",
                "TTFT of each turn of a multi-turn probe (scenarios with turns), by turn: a later turn re-sends the earlier ones, which a working prefix cache serves",
                Unit::Seconds,
                histograms.buckets(&ttft_b).family(),
            ),
            tokens_per_second: r.register(
                "turn_output_tokens_per_second",
                "Output tokens per second of each turn of a multi-turn probe, by turn",
                histograms.buckets(&tps_b).family(),
            ),
            prompt_tokens: r.register(
                "turn_prompt_tokens",
                "Prompt tokens of each successful turn of a multi-turn probe as the server counted them (the conversation so far), by turn",
                SeriesFamily::default(),
            ),
            cached_prompt_tokens: r.register(
                "turn_prompt_cached_tokens",
                "Prompt tokens of each successful turn of a multi-turn probe that the server served from its prefix cache, by turn",
                SeriesFamily::default(),
            ),
        }
    }

    /// Records the turns of one finished probe (none for a one-request scenario) that
    /// succeeded: a failed turn's counts are in the probe's token counters only, so that the
    /// prompt tokens of a turn divide by its TTFT count.
    pub(super) fn observe(&self, labels: &ProbeLabels, outcome: &ProbeOutcome) {
        for t in outcome
            .observations
            .turns
            .iter()
            .filter(|t| t.failure.is_none())
        {
            let Some(turn) = t.turn.checked_sub(1).and_then(|i| TURNS.get(i)) else {
                continue;
            };
            let l = labels.with("turn", turn);
            if let Some(ttft) = t.ttft {
                self.ttft
                    .get_or_create(&l)
                    .observe(ttft.as_secs_f64(), None);
            }
            if let Some(r) = t.output_tokens_per_second {
                self.tokens_per_second.get_or_create(&l).observe(r, None);
            }
            if let Some(n) = t.prompt_tokens {
                add_saturating(&self.prompt_tokens.get_or_create(&l), n);
            }
            if let Some(n) = t.cached_prompt_tokens {
                add_saturating(&self.cached_prompt_tokens.get_or_create(&l), n);
            }
        }
    }

    /// Removes every series of one pair.
    pub(super) fn forget(&self, labels: &ProbeLabels) {
        self.ttft.remove_all_of(labels);
        self.tokens_per_second.remove_all_of(labels);
        self.prompt_tokens.remove_all_of(labels);
        self.cached_prompt_tokens.remove_all_of(labels);
    }
}
