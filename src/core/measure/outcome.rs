//! The one result struct of a probe: it feeds metrics, the recent-probe history and the CLI.

use std::sync::Arc;
use std::time::SystemTime;

use super::derive::{derived_anomalies, discard_incredible_counts, measure, Measurement};
use super::failure::{Failure, FailureReason};
use super::observations::{Anomaly, Observations};

/// The result of one probe of one (target, scenario).
#[derive(Debug, Clone)]
pub struct ProbeOutcome {
    /// Target name from the config (a label value).
    pub target: Arc<str>,
    /// Scenario name from the config (a label value).
    pub scenario: Arc<str>,
    /// Configured model (a label value).
    pub model: Arc<str>,
    /// The replica probed (its `replica` label value) for a target with `replicas:`; empty
    /// for every other target.
    pub replica: Arc<str>,
    /// Wall-clock time the probe started, for `llm_probe_last_probe_timestamp_seconds` only.
    pub started_at: SystemTime,
    /// Everything seen on the wire.
    pub observations: Observations,
    /// The numbers, or why there are none.
    pub result: Result<Measurement, Failure>,
}

impl ProbeOutcome {
    /// Logs this finished probe: a failure once at warn with target, scenario, reason, status
    /// and detail (server-sent, so escaped with [`crate::sanitize::terminal_safe`]); a success
    /// at debug.
    pub fn log(&self) {
        match &self.result {
            Err(f) => tracing::warn!(
                target = %self.target, scenario = %self.scenario, reason = f.reason.as_str(),
                status = self.observations.http_status,
                detail = %crate::sanitize::terminal_safe(&f.detail), "probe failed"
            ),
            Ok(m) => tracing::debug!(
                target = %self.target, scenario = %self.scenario,
                ttft_seconds = m.ttft.as_secs_f64(), output_tokens = m.output_tokens,
                e2e_seconds = m.e2e.as_secs_f64(), "probe succeeded"
            ),
        }
    }

    /// Concludes a probe: counts the server reported far above what the probe asked for are
    /// forgotten first (`count_above_request`); then a transport `failure` wins; else an error inside the stream is a
    /// `stream_error` failure (its partial timings are not measured); else a stream without a
    /// token is `empty_stream`; else a stream that never ended is `truncated`; else the probe is
    /// measured and the anomalies that follow from its numbers are added to `observations`.
    pub fn conclude(
        target: Arc<str>,
        scenario: Arc<str>,
        model: Arc<str>,
        started_at: SystemTime,
        mut observations: Observations,
        failure: Option<Failure>,
    ) -> Self {
        if discard_incredible_counts(&mut observations) {
            observations.anomaly(Anomaly::CountAboveRequest);
        }
        let result = match failure {
            Some(f) => Err(f),
            None => match &observations.stream_error {
                Some(msg) if observations.overloaded => {
                    Err(Failure::new(FailureReason::Overloaded, msg.clone()))
                }
                Some(msg) => Err(Failure::new(FailureReason::StreamError, msg.clone())),
                None => match measure(&observations) {
                    Some(m) => {
                        for a in derived_anomalies(&observations, &m) {
                            observations.anomaly(a);
                        }
                        Ok(m)
                    }
                    None if observations.timeline.token_events.is_empty() => Err(Failure::new(
                        FailureReason::EmptyStream,
                        match &observations.finish_reason {
                            // A content filter or a refusal without text says why.
                            Some(r) => format!("the stream completed without a single token (the server's finish reason: \"{r}\")"),
                            None => "the stream completed without a single token".to_string(),
                        },
                    )),
                    None => Err(Failure::new(
                        FailureReason::Truncated,
                        "the stream stopped before it ended",
                    )),
                },
            },
        };
        ProbeOutcome {
            target,
            scenario,
            model,
            replica: "".into(),
            started_at,
            observations,
            result,
        }
    }

    /// True when the probe produced a measurement.
    pub fn is_success(&self) -> bool {
        self.result.is_ok()
    }

    /// The failure reason, if the probe failed.
    pub fn failure_reason(&self) -> Option<FailureReason> {
        self.result.as_ref().err().map(|f| f.reason)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::measure::TokenKind;

    fn conclude(obs: Observations, failure: Option<Failure>) -> ProbeOutcome {
        ProbeOutcome::conclude(
            "t".into(),
            "s".into(),
            "m".into(),
            SystemTime::now(),
            obs,
            failure,
        )
    }

    #[test]
    fn error_after_tokens_is_a_failure_not_a_fast_success() {
        let t0 = Instant::now();
        let mut o = Observations::new(t0);
        o.token(t0 + Duration::from_millis(5), TokenKind::Output);
        o.stream_error("overloaded");
        o.timeline.ended = Some(t0 + Duration::from_millis(6));
        let out = conclude(o, None);
        assert_eq!(out.failure_reason(), Some(FailureReason::StreamError));
        assert_eq!(out.result.unwrap_err().detail, "overloaded");
    }

    #[test]
    fn done_only_is_empty_stream() {
        let t0 = Instant::now();
        let mut o = Observations::new(t0);
        o.terminated = true;
        o.timeline.ended = Some(t0);
        assert_eq!(
            conclude(o, None).failure_reason(),
            Some(FailureReason::EmptyStream)
        );
    }

    #[test]
    fn tokens_without_end_are_truncated() {
        let t0 = Instant::now();
        let mut o = Observations::new(t0);
        o.token(t0, TokenKind::Output);
        assert_eq!(
            conclude(o, None).failure_reason(),
            Some(FailureReason::Truncated)
        );
    }

    #[test]
    fn transport_failure_wins() {
        let o = Observations::new(Instant::now());
        let f = Failure::new(FailureReason::Connect, "refused");
        assert_eq!(
            conclude(o, Some(f)).failure_reason(),
            Some(FailureReason::Connect)
        );
    }

    #[test]
    fn failure_detail_is_bounded_on_a_char_boundary() {
        let f = Failure::new(FailureReason::Decode, "é".repeat(1000));
        assert!(f.detail.len() <= Failure::MAX_DETAIL + '…'.len_utf8());
        assert!(f.detail.ends_with('…'));
    }
}
