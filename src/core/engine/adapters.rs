//! Each engine's names for the three numbers of an [`EngineLoad`], and [`read`], which finds
//! them in an exposition. Sources (metric names as the engines publish them):
//!
//! | engine | waiting | running | KV-cache ratio |
//! |---|---|---|---|
//! | vLLM | `vllm:num_requests_waiting` | `vllm:num_requests_running` | `vllm:kv_cache_usage_perc` (before 0.10: `vllm:gpu_cache_usage_perc`) |
//! | SGLang | `sglang:num_queue_reqs` | `sglang:num_running_reqs` | `sglang:token_usage` |
//! | TGI | `tgi_queue_size` | `tgi_batch_current_size` | none published |
//! | llama.cpp (`--metrics`) | `llamacpp:requests_deferred` | `llamacpp:requests_processing` | `llamacpp:kv_cache_usage_ratio` (older builds only) |
//! | TensorRT-LLM (`trtllm-serve`, `/prometheus/metrics`) | `trtllm_num_requests_waiting` | `trtllm_num_requests_running` | `trtllm_kv_cache_utilization` |
//!
//! TensorRT-LLM's names are also read with Dynamo's `trtllm:` prefix and unprefixed (as older
//! releases published them).

use super::exposition;
use super::{EngineLoad, EngineScrape, ScrapeFailure, ScrapeFailureReason};

/// Which engine's names to read (`server_metrics_adapter:`); `Auto` picks the engine by the
/// names present.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Adapter {
    /// The first engine (in [`Engine::ALL`] order) with one of its names in the exposition.
    #[default]
    Auto,
    /// One engine's names only.
    Engine(Engine),
}

/// An inference engine whose `/metrics` names are known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Engine {
    /// vLLM (`vllm:` names).
    Vllm,
    /// SGLang (`sglang:` names).
    Sglang,
    /// Hugging Face Text Generation Inference (`tgi_` names).
    Tgi,
    /// llama.cpp's `llama-server --metrics` (`llamacpp:` names).
    LlamaCpp,
    /// NVIDIA TensorRT-LLM's `trtllm-serve` (`trtllm_` names).
    TensorrtLlm,
}

/// The names one engine publishes each number under, in order of preference (the first name
/// with a sample is read).
struct Names {
    waiting: &'static [&'static str],
    running: &'static [&'static str],
    kv_ratio: &'static [&'static str],
}

impl Engine {
    /// Every engine, in auto-detection order.
    pub const ALL: [Engine; 5] = [
        Engine::Vllm,
        Engine::Sglang,
        Engine::Tgi,
        Engine::LlamaCpp,
        Engine::TensorrtLlm,
    ];

    /// The configuration value (`vllm`, `sglang`, `tgi`, `llama-cpp`, `tensorrt-llm`).
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Vllm => "vllm",
            Engine::Sglang => "sglang",
            Engine::Tgi => "tgi",
            Engine::LlamaCpp => "llama-cpp",
            Engine::TensorrtLlm => "tensorrt-llm",
        }
    }

    fn names(self) -> Names {
        match self {
            Engine::Vllm => Names {
                waiting: &["vllm:num_requests_waiting"],
                running: &["vllm:num_requests_running"],
                kv_ratio: &["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
            },
            Engine::Sglang => Names {
                waiting: &["sglang:num_queue_reqs"],
                running: &["sglang:num_running_reqs"],
                kv_ratio: &["sglang:token_usage"],
            },
            Engine::Tgi => Names {
                waiting: &["tgi_queue_size"],
                running: &["tgi_batch_current_size"],
                kv_ratio: &[],
            },
            Engine::LlamaCpp => Names {
                waiting: &["llamacpp:requests_deferred"],
                running: &["llamacpp:requests_processing"],
                kv_ratio: &["llamacpp:kv_cache_usage_ratio"],
            },
            Engine::TensorrtLlm => Names {
                waiting: &[
                    "trtllm_num_requests_waiting",
                    "trtllm:num_requests_waiting",
                    "num_requests_waiting",
                ],
                running: &[
                    "trtllm_num_requests_running",
                    "trtllm:num_requests_running",
                    "num_requests_running",
                ],
                kv_ratio: &[
                    "trtllm_kv_cache_utilization",
                    "trtllm:kv_cache_utilization",
                    "kv_cache_utilization",
                ],
            },
        }
    }

    fn knows(self, name: &str) -> bool {
        let n = self.names();
        [n.waiting, n.running, n.kv_ratio]
            .iter()
            .any(|list| list.contains(&name))
    }
}

impl Adapter {
    /// Every configuration value, for error messages: `auto`, then each engine.
    pub const VALUES: [&'static str; 6] =
        ["auto", "vllm", "sglang", "tgi", "llama-cpp", "tensorrt-llm"];

    /// The configuration value.
    pub fn as_str(self) -> &'static str {
        match self {
            Adapter::Auto => "auto",
            Adapter::Engine(e) => e.as_str(),
        }
    }
}

impl std::str::FromStr for Adapter {
    type Err = ();

    /// One of [`Adapter::VALUES`], exactly.
    fn from_str(s: &str) -> Result<Self, ()> {
        if s == "auto" {
            return Ok(Adapter::Auto);
        }
        Engine::ALL
            .into_iter()
            .find(|e| e.as_str() == s)
            .map(Adapter::Engine)
            .ok_or(())
    }
}

/// How one number aggregates over its label sets.
#[derive(Clone, Copy)]
enum Fold {
    Sum,
    Max,
}

/// Reads the three numbers of `adapter`'s engine from an exposition `text` (already bounded by
/// the caller). Errors: [`ScrapeFailureReason::Malformed`] (the text is not the exposition
/// format), `UnknownEngine` (auto found no known name), `MissingMetrics` (none of the
/// configured engine's names), `InvalidValue` (a read sample is NaN, infinite or negative, or a
/// ratio above 1, or a count's label sets sum past `f64::MAX`). A `-0` sample reads as 0.
pub fn read(adapter: Adapter, text: &str) -> EngineScrape {
    let samples = exposition::parse(text, |name| Engine::ALL.iter().any(|e| e.knows(name)))
        .map_err(|e| {
            ScrapeFailure::new(
                ScrapeFailureReason::Malformed,
                format!("not the Prometheus text format ({e})"),
            )
        })?;
    let engine = match adapter {
        Adapter::Engine(e) => e,
        Adapter::Auto => Engine::ALL
            .into_iter()
            .find(|e| samples.iter().any(|s| e.knows(s.name)))
            .ok_or_else(|| {
                ScrapeFailure::new(
                    ScrapeFailureReason::UnknownEngine,
                    "no metric name of a known engine (vLLM, SGLang, TGI, llama.cpp, TensorRT-LLM); set server_metrics_adapter",
                )
            })?,
    };
    let names = engine.names();
    let pick = |list: &[&'static str], fold: Fold| -> Result<Option<f64>, ScrapeFailure> {
        let Some(name) = list.iter().find(|n| samples.iter().any(|s| s.name == **n)) else {
            return Ok(None);
        };
        let mut acc: Option<f64> = None;
        for s in samples.iter().filter(|s| s.name == *name) {
            let v = s.value;
            let bad = !v.is_finite() || v < 0.0 || matches!(fold, Fold::Max) && v > 1.0;
            if bad {
                return Err(ScrapeFailure::new(
                    ScrapeFailureReason::InvalidValue,
                    format!(
                        "{name} is {v}, not a {}",
                        match fold {
                            Fold::Sum => "count (finite, not negative)",
                            Fold::Max => "ratio between 0 and 1",
                        }
                    ),
                ));
            }
            // `+ 0.0` turns a `-0` sample into 0 (IEEE 754: -0 + 0 = +0), so no gauge or JSON
            // field reads `-0`.
            acc = Some(match (acc, fold) {
                (None, _) => v + 0.0,
                (Some(a), Fold::Sum) => a + v,
                (Some(a), Fold::Max) => a.max(v + 0.0),
            });
        }
        // Finite samples may still sum past f64::MAX (a broken or hostile engine).
        if let Some(total) = acc.filter(|t| !t.is_finite()) {
            return Err(ScrapeFailure::new(
                ScrapeFailureReason::InvalidValue,
                format!(
                    "{name} sums to {total} over its label sets, not a count (finite, not negative)"
                ),
            ));
        }
        Ok(acc)
    };
    let load = EngineLoad {
        engine,
        requests_waiting: pick(names.waiting, Fold::Sum)?,
        requests_running: pick(names.running, Fold::Sum)?,
        kv_cache_usage_ratio: pick(names.kv_ratio, Fold::Max)?,
    };
    if load.requests_waiting.is_none()
        && load.requests_running.is_none()
        && load.kv_cache_usage_ratio.is_none()
    {
        return Err(ScrapeFailure::new(
            ScrapeFailureReason::MissingMetrics,
            format!(
                "none of the {} metrics ({}) is in the exposition",
                engine.as_str(),
                [names.waiting, names.running, names.kv_ratio]
                    .iter()
                    .filter_map(|l| l.first())
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    Ok(load)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_detects_and_aggregates_over_label_sets() {
        let text = "vllm:num_requests_waiting{engine=\"0\",model_name=\"a\"} 2.0\n\
                    vllm:num_requests_waiting{engine=\"1\",model_name=\"a\"} 3.0\n\
                    vllm:num_requests_running{engine=\"0\",model_name=\"a\"} 1.0\n\
                    vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"a\"} 0.25\n\
                    vllm:kv_cache_usage_perc{engine=\"1\",model_name=\"a\"} 0.5\n";
        let l = read(Adapter::Auto, text).unwrap();
        assert_eq!(l.engine, Engine::Vllm);
        assert_eq!(l.requests_waiting, Some(5.0));
        assert_eq!(l.requests_running, Some(1.0));
        assert_eq!(l.kv_cache_usage_ratio, Some(0.5));
    }

    #[test]
    fn a_series_repeated_in_one_exposition_counts_once() {
        // Three lines of one series (labels in any order): one engine core waiting 3, not 9.
        let text = "vllm:num_requests_waiting{engine=\"0\",model_name=\"a\"} 3\n\
                    vllm:num_requests_waiting{engine=\"0\",model_name=\"a\"} 3\n\
                    vllm:num_requests_waiting{model_name=\"a\",engine=\"0\",} 3\n\
                    vllm:num_requests_waiting{engine=\"1\",model_name=\"a\"} 1\n\
                    vllm:num_requests_running 2\n\
                    vllm:num_requests_running 5\n";
        let l = read(Adapter::Auto, text).unwrap();
        assert_eq!(l.requests_waiting, Some(4.0));
        // The first line of a series counts, as in Prometheus.
        assert_eq!(l.requests_running, Some(2.0));
    }

    #[test]
    fn older_vllm_name_and_tgi_without_ratio() {
        let l = read(Adapter::Auto, "vllm:gpu_cache_usage_perc 0.1\n").unwrap();
        assert_eq!(l.kv_cache_usage_ratio, Some(0.1));
        assert_eq!(l.requests_waiting, None);
        let l = read(
            Adapter::Auto,
            "tgi_queue_size 4\ntgi_batch_current_size 2\n",
        )
        .unwrap();
        assert_eq!(
            (
                l.engine,
                l.requests_waiting,
                l.requests_running,
                l.kv_cache_usage_ratio
            ),
            (Engine::Tgi, Some(4.0), Some(2.0), None)
        );
    }

    #[test]
    fn failures_are_typed() {
        let reason = |a: Adapter, t: &str| read(a, t).unwrap_err().reason;
        assert_eq!(
            reason(Adapter::Auto, "up 1\n"),
            ScrapeFailureReason::UnknownEngine
        );
        assert_eq!(
            reason(Adapter::Auto, ""),
            ScrapeFailureReason::UnknownEngine
        );
        assert_eq!(
            reason(
                Adapter::Engine(Engine::Sglang),
                "vllm:num_requests_waiting 1\n"
            ),
            ScrapeFailureReason::MissingMetrics
        );
        assert_eq!(
            reason(Adapter::Auto, "<html>oops</html>\n"),
            ScrapeFailureReason::Malformed
        );
        for v in ["NaN", "+Inf", "-1"] {
            let t = format!("vllm:num_requests_waiting {v}\n");
            assert_eq!(
                reason(Adapter::Auto, &t),
                ScrapeFailureReason::InvalidValue,
                "{v}"
            );
        }
        assert_eq!(
            reason(Adapter::Auto, "sglang:token_usage 85\n"),
            ScrapeFailureReason::InvalidValue,
            "a percentage is not a ratio"
        );
        let f = read(Adapter::Auto, "vllm:kv_cache_usage_perc NaN\n").unwrap_err();
        assert_eq!(
            f.detail,
            "vllm:kv_cache_usage_perc is NaN, not a ratio between 0 and 1"
        );
    }

    #[test]
    fn a_sum_that_overflows_is_invalid_not_infinite() {
        // Each sample is finite; their sum is not (a hostile or broken engine).
        let t = "vllm:num_requests_waiting{engine=\"0\"} 1e308\n\
                 vllm:num_requests_waiting{engine=\"1\"} 1e308\n";
        let f = read(Adapter::Auto, t).unwrap_err();
        assert_eq!(f.reason, ScrapeFailureReason::InvalidValue, "{}", f.detail);
        assert_eq!(
            f.detail,
            "vllm:num_requests_waiting sums to inf over its label sets, not a count (finite, not negative)"
        );
    }

    #[test]
    fn negative_zero_reads_as_zero() {
        let t = "vllm:num_requests_waiting -0\nvllm:num_requests_running -0.0\n\
                 vllm:kv_cache_usage_perc -0e0\n";
        let l = read(Adapter::Auto, t).unwrap();
        for v in [
            l.requests_waiting,
            l.requests_running,
            l.kv_cache_usage_ratio,
        ] {
            let v = v.unwrap();
            assert!(v == 0.0 && v.is_sign_positive(), "{v:?}");
        }
    }

    #[test]
    fn adapter_values_round_trip() {
        for v in Adapter::VALUES {
            assert_eq!(v.parse::<Adapter>().unwrap().as_str(), v);
        }
        assert!("vLLM".parse::<Adapter>().is_err());
    }
}
