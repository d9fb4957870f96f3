//! The TTFT split: a probe's TTFT divided into what the server says it spent — waiting
//! in its engine's queue, loading the model, prefilling the prompt up to the first token — and
//! the rest, which no server accounts for (network, TLS, gateways, the server's HTTP frontend).
//! Pure arithmetic on [`ServerTimings`]; nothing is estimated: a part the server does not
//! report is `None`, and the remainder is then named [`TtftComponent::Unattributed`] because it
//! still contains the unreported part. Definitions per engine: docs/measurement.md "TTFT split".

use std::time::Duration;

use super::observations::ServerTimings;

/// Where the server's own account of a probe's time before its first token came from.
///
/// Each engine measures from a different instant (see docs/measurement.md "TTFT split"), so the
/// record names the source beside the numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerTimingSource {
    /// vLLM's per-request metrics (`--enable-per-request-metrics`): the `metrics` object of the
    /// final usage chunk (Chat Completions, completions) or of the Responses `response` object;
    /// `queue_time_ms` = engine queued → scheduled, `time_to_first_token_ms` = scheduled →
    /// first token. The simulator sends the same object.
    VllmRequestMetrics,
    /// llama.cpp's `timings` object: `prompt_ms` (prompt processing of the slot); no queue.
    LlamaCppTimings,
    /// Ollama's final line: `load_duration` and `prompt_eval_duration` (nanoseconds); no queue.
    Ollama,
    /// Text Generation Inference's `x-queue-time` response header (milliseconds); no prefill.
    TgiHeaders,
}

impl ServerTimingSource {
    /// `vllm_request_metrics`, `llama_cpp_timings`, `ollama` or `tgi_headers`, as records print it.
    pub fn as_str(self) -> &'static str {
        match self {
            ServerTimingSource::VllmRequestMetrics => "vllm_request_metrics",
            ServerTimingSource::LlamaCppTimings => "llama_cpp_timings",
            ServerTimingSource::Ollama => "ollama",
            ServerTimingSource::TgiHeaders => "tgi_headers",
        }
    }
}

/// One part of a TTFT: the values of the `component` label of
/// `llm_probe_ttft_component_seconds` (a fixed set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TtftComponent {
    /// TTFT minus the server's queue, load and prefill, when the server reported all of the
    /// parts it has (queue included): the network, TLS, gateways and proxies, and the server's
    /// HTTP frontend (request parsing, chat template, tokenisation, handing the first token
    /// back) — everything outside the engine's own account.
    OutsideEngine,
    /// The engine's queue wait as the server defines it (vLLM: queued → scheduled in the engine
    /// core; TGI: `x-queue-time`; the simulator: arrival → slot).
    EngineQueue,
    /// Loading the model before the prompt was processed (Ollama `load_duration`).
    ModelLoad,
    /// Prefill up to the first token as the server reports it (vLLM: scheduled → first token;
    /// llama.cpp `prompt_ms`; Ollama `prompt_eval_duration`).
    EnginePrefill,
    /// TTFT minus what the server reported, when it reported a prefill or load time but no
    /// queue wait (llama.cpp, Ollama) or a queue wait but no prefill (TGI): the outside part and
    /// the unreported part together, not separable.
    Unattributed,
}

impl TtftComponent {
    /// Every component, in label order.
    pub const ALL: [TtftComponent; 5] = [
        TtftComponent::OutsideEngine,
        TtftComponent::EngineQueue,
        TtftComponent::ModelLoad,
        TtftComponent::EnginePrefill,
        TtftComponent::Unattributed,
    ];

    /// The metric label value (`outside_engine`, `engine_queue`, `model_load`,
    /// `engine_prefill`, `unattributed`).
    pub fn as_str(self) -> &'static str {
        match self {
            TtftComponent::OutsideEngine => "outside_engine",
            TtftComponent::EngineQueue => "engine_queue",
            TtftComponent::ModelLoad => "model_load",
            TtftComponent::EnginePrefill => "engine_prefill",
            TtftComponent::Unattributed => "unattributed",
        }
    }
}

/// A successful probe's TTFT, split. Either empty (the server reported nothing: `source` is
/// `None` and so is every part) or the reported parts plus the remainder, which sum to TTFT
/// (exactly, unless the server's parts add up to more than the client's TTFT: then the
/// remainder is 0 and `excess` says by how much).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TtftSplit {
    /// Who reported the server's parts; `None` = the server revealed nothing.
    pub source: Option<ServerTimingSource>,
    /// [`TtftComponent::EngineQueue`], when reported.
    pub engine_queue: Option<Duration>,
    /// [`TtftComponent::ModelLoad`], when reported.
    pub model_load: Option<Duration>,
    /// [`TtftComponent::EnginePrefill`], when reported.
    pub engine_prefill: Option<Duration>,
    /// TTFT minus the reported parts, clamped at 0; `None` when nothing was reported.
    pub remainder: Option<Duration>,
    /// What the remainder is: [`TtftComponent::OutsideEngine`] when the server reported both its
    /// queue and its prefill, else [`TtftComponent::Unattributed`].
    pub remainder_component: Option<TtftComponent>,
    /// How much the reported parts (those left out for being longer than TTFT included) exceed
    /// TTFT (0 when they do not): clocks that disagree, a server whose "first token" is later
    /// than the first byte the probe read, or an absurd report.
    pub excess: Duration,
}

impl TtftSplit {
    /// Splits `ttft` with what `timings` reports. Server numbers are untrusted input: a
    /// negative, NaN or absurd value counts as not reported.
    ///
    /// A single part longer than the whole TTFT cannot lie inside it (a server that reports
    /// `x-queue-time: 1e9`): it is left out of the split, so the components still sum to TTFT,
    /// and counted in [`TtftSplit::excess`], so the record says so.
    pub fn new(ttft: Duration, timings: &ServerTimings) -> TtftSplit {
        let secs = |s: Option<f64>| s.and_then(|s| Duration::try_from_secs_f64(s).ok());
        let raw = [
            secs(timings.queue_seconds),
            secs(timings.load_seconds),
            secs(timings.prompt_seconds),
        ];
        if raw.iter().all(Option::is_none) {
            return TtftSplit::default();
        }
        let sum = |parts: &[Option<Duration>]| {
            parts
                .iter()
                .flatten()
                .fold(Duration::ZERO, |a, b| a.saturating_add(*b))
        };
        let excess = sum(&raw).saturating_sub(ttft);
        let [engine_queue, model_load, engine_prefill] = raw.map(|d| d.filter(|d| *d <= ttft));
        if engine_queue.is_none() && model_load.is_none() && engine_prefill.is_none() {
            return TtftSplit {
                source: timings.source,
                excess,
                ..TtftSplit::default()
            };
        }
        let reported = sum(&[engine_queue, model_load, engine_prefill]);
        let remainder_component = if engine_queue.is_some() && engine_prefill.is_some() {
            TtftComponent::OutsideEngine
        } else {
            TtftComponent::Unattributed
        };
        TtftSplit {
            source: timings.source,
            engine_queue,
            model_load,
            engine_prefill,
            remainder: Some(ttft.saturating_sub(reported)),
            remainder_component: Some(remainder_component),
            excess,
        }
    }

    /// The parts that are known, in waterfall order (remainder first: it is the part before the
    /// server's account starts, and after it ends), each with its component.
    pub fn components(&self) -> Vec<(TtftComponent, Duration)> {
        let mut out = Vec::with_capacity(4);
        if let (Some(c), Some(d)) = (self.remainder_component, self.remainder) {
            out.push((c, d));
        }
        let parts = [
            (TtftComponent::EngineQueue, self.engine_queue),
            (TtftComponent::ModelLoad, self.model_load),
            (TtftComponent::EnginePrefill, self.engine_prefill),
        ];
        out.extend(parts.into_iter().filter_map(|(c, d)| Some((c, d?))));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn timings(
        queue: Option<f64>,
        load: Option<f64>,
        prefill: Option<f64>,
        source: ServerTimingSource,
    ) -> ServerTimings {
        ServerTimings {
            queue_seconds: queue,
            load_seconds: load,
            prompt_seconds: prefill,
            source: Some(source),
            ..ServerTimings::default()
        }
    }

    #[test]
    fn vllm_parts_and_the_outside_sum_to_ttft() {
        let t = timings(
            Some(0.250),
            None,
            Some(0.100),
            ServerTimingSource::VllmRequestMetrics,
        );
        let s = TtftSplit::new(ms(400), &t);
        assert_eq!(s.engine_queue, Some(ms(250)));
        assert_eq!(s.engine_prefill, Some(ms(100)));
        assert_eq!(s.remainder, Some(ms(50)));
        assert_eq!(s.remainder_component, Some(TtftComponent::OutsideEngine));
        let sum: Duration = s.components().iter().map(|(_, d)| *d).sum();
        assert_eq!(sum, ms(400));
        assert_eq!(s.excess, Duration::ZERO);
        let j = crate::report::TtftSplitRecord::from(&s);
        assert_eq!(j.source.as_deref(), Some("vllm_request_metrics"));
        assert_eq!(j.outside_engine_seconds, Some(0.05));
    }

    #[test]
    fn without_a_queue_the_remainder_is_unattributed() {
        // llama.cpp: prefill only; Ollama: load and prefill; TGI: queue only.
        for (t, parts) in [
            (
                timings(None, None, Some(0.1), ServerTimingSource::LlamaCppTimings),
                1,
            ),
            (
                timings(None, Some(0.05), Some(0.1), ServerTimingSource::Ollama),
                2,
            ),
            (
                timings(Some(0.1), None, None, ServerTimingSource::TgiHeaders),
                1,
            ),
        ] {
            let s = TtftSplit::new(ms(300), &t);
            assert_eq!(s.remainder_component, Some(TtftComponent::Unattributed));
            assert_eq!(s.components().len(), parts + 1);
            let sum: Duration = s.components().iter().map(|(_, d)| *d).sum();
            assert_eq!(sum, ms(300));
        }
    }

    #[test]
    fn nothing_reported_is_no_split_and_says_so() {
        let s = TtftSplit::new(ms(300), &ServerTimings::default());
        assert_eq!(s, TtftSplit::default());
        assert!(s.components().is_empty());
        assert_eq!(crate::report::TtftSplitRecord::from(&s).source, None);
        // Garbage from the server is not a report either.
        let t = timings(
            Some(-1.0),
            Some(f64::NAN),
            None,
            ServerTimingSource::TgiHeaders,
        );
        assert!(TtftSplit::new(ms(300), &t).components().is_empty());
    }

    #[test]
    fn parts_above_ttft_clamp_the_remainder_and_report_the_excess() {
        let t = timings(
            Some(0.2),
            None,
            Some(0.2),
            ServerTimingSource::VllmRequestMetrics,
        );
        let s = TtftSplit::new(ms(350), &t);
        assert_eq!(s.remainder, Some(Duration::ZERO));
        assert_eq!(s.excess, ms(50));
    }

    /// Hostile server numbers (vLLM `queue_time_ms`, TGI `x-queue-time: 1e9`): a part longer
    /// than the whole TTFT is left out, so the components (what the metric observes) still sum
    /// to TTFT, and `excess` says by how much the report overshot.
    #[test]
    fn a_part_longer_than_ttft_is_left_out_and_counted_as_excess() {
        let t = timings(
            Some(1e6),
            None,
            Some(0.1),
            ServerTimingSource::VllmRequestMetrics,
        );
        let s = TtftSplit::new(ms(300), &t);
        assert_eq!(s.engine_queue, None);
        assert_eq!(s.engine_prefill, Some(ms(100)));
        assert_eq!(s.remainder_component, Some(TtftComponent::Unattributed));
        let sum: Duration = s.components().iter().map(|(_, d)| *d).sum();
        assert_eq!(sum, ms(300));
        assert!(s.excess > Duration::from_secs(999_999), "{:?}", s.excess);

        let tgi = timings(Some(1e6), None, None, ServerTimingSource::TgiHeaders);
        let s = TtftSplit::new(ms(300), &tgi);
        assert!(s.components().is_empty());
        let j = crate::report::TtftSplitRecord::from(&s);
        assert_eq!(j.source.as_deref(), Some("tgi_headers"));
        assert!(j.excess_seconds.unwrap() > 999_999.0, "{j:?}");
        // 1e308 ms does not fit a Duration: not reported at all.
        let huge = timings(Some(1e305), None, None, ServerTimingSource::TgiHeaders);
        assert_eq!(TtftSplit::new(ms(300), &huge), TtftSplit::default());
    }
}
