//! The simulator's load model: how a loaded inference server's timing departs from the script.
//! A fixed number of slots generate at once and further requests wait FIFO (the wait is part of
//! their TTFT, as on vLLM or llama.cpp with `--parallel`); prefill grows with the prompt; the
//! token gap grows with the number of active streams (bigger decode batches); and seeded
//! lognormal jitter perturbs both. Every perturbed value is recorded per request ([`Truth`]), so
//! a benchmark compares a client's numbers with what the simulator actually did.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, LogNormal};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Load-model parameters (flags of `llm-probe simulate`). The default is an idle server with
/// unlimited slots and no jitter: the script's timing exactly.
#[derive(Debug, Clone, PartialEq)]
pub struct Load {
    /// Streams generated at once (`--slots`); further requests queue FIFO. 0 = unlimited.
    pub slots: u32,
    /// Added to the scripted TTFT per prompt token (`--prefill-per-token`). The prompt's
    /// tokens are its whitespace-separated words (see [`prompt_tokens`]).
    pub prefill_per_token: Duration,
    /// Fractional ITL increase per additional active stream (`--itl-slowdown-per-stream`): with
    /// `a` streams generating, each gap is `itl · (1 + s·(a − 1))`. ≥ 0.
    pub itl_slowdown_per_stream: f64,
    /// Sigma of the lognormal factor (median 1) applied to each TTFT and each gap
    /// (`--jitter`); 0 = none. ≥ 0.
    pub jitter: f64,
    /// Seed of the jitter (`--seed`): the same seed and arrival order give the same values.
    pub seed: u64,
    /// Report each request's queue wait and prefill the way vLLM does with
    /// `--enable-per-request-metrics` (`--per-request-metrics`): a `metrics` object with
    /// `queue_time_ms` (arrival → slot) and `time_to_first_token_ms` (slot → the first token
    /// event handed to the connection) on the final usage chunk of Chat Completions and
    /// completions streams and on the `response` of a Responses stream's `response.completed`.
    pub per_request_metrics: bool,
}

impl Default for Load {
    fn default() -> Self {
        Load {
            slots: 0,
            prefill_per_token: Duration::ZERO,
            itl_slowdown_per_stream: 0.0,
            jitter: 0.0,
            seed: 0,
            per_request_metrics: false,
        }
    }
}

/// What the simulator did for one request: the ground truth of a load test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Truth {
    /// From the request's arrival until it got a slot (0 without `--slots` or a free slot).
    pub queue_wait: Duration,
    /// From getting a slot to the first token: scripted TTFT + prefill, jittered.
    pub ttft: Duration,
    /// Prompt tokens the prefill was charged for.
    pub prompt_tokens: u64,
}

impl Truth {
    /// The TTFT a perfect client would measure (from the request's arrival): queue wait + TTFT.
    pub fn ttft_from_arrival(&self) -> Duration {
        self.queue_wait + self.ttft
    }
}

/// The shared state of the load model of one simulator.
#[derive(Debug)]
pub(crate) struct Engine {
    load: Load,
    slots: Option<Arc<Semaphore>>,
    active: Arc<AtomicUsize>,
    /// Requests waiting for a slot now.
    waiting: AtomicUsize,
    jitter: Option<(LogNormal<f64>, Mutex<StdRng>)>,
}

/// A request's hold on a slot: while alive, the stream counts as active.
pub(crate) struct Admission {
    _permit: Option<OwnedSemaphorePermit>,
    active: Arc<AtomicUsize>,
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.active.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Engine {
    /// The engine of `load`; a `jitter` that is not a finite non-negative number counts as 0
    /// (the command line rejects it before).
    pub(crate) fn new(load: Load) -> Self {
        let slots = (load.slots > 0).then(|| Arc::new(Semaphore::new(load.slots as usize)));
        let jitter = (load.jitter.is_finite() && load.jitter > 0.0)
            .then(|| LogNormal::new(0.0, load.jitter).ok())
            .flatten()
            .map(|d| (d, Mutex::new(StdRng::seed_from_u64(load.seed))));
        Engine {
            load,
            slots,
            active: Arc::new(AtomicUsize::new(0)),
            waiting: AtomicUsize::new(0),
            jitter,
        }
    }

    /// Takes a slot, waiting for one (FIFO: tokio's semaphore is fair) when all are busy, and
    /// marks the stream active. The flag is true when the request had to wait.
    pub(crate) async fn admit(&self) -> (Admission, bool) {
        let (permit, queued) = match &self.slots {
            Some(s) => match s.clone().try_acquire_owned() {
                Ok(p) => (Some(p), false),
                Err(_) => {
                    // Counted while it waits, also when the client gives up meanwhile.
                    struct Waiting<'a>(&'a AtomicUsize);
                    impl Drop for Waiting<'_> {
                        fn drop(&mut self) {
                            self.0.fetch_sub(1, Ordering::SeqCst);
                        }
                    }
                    self.waiting.fetch_add(1, Ordering::SeqCst);
                    let _waiting = Waiting(&self.waiting);
                    (s.clone().acquire_owned().await.ok(), true)
                }
            },
            None => (None, false),
        };
        self.active.fetch_add(1, Ordering::SeqCst);
        let admission = Admission {
            _permit: permit,
            active: self.active.clone(),
        };
        (admission, queued)
    }

    /// The engine's load as vLLM's `/metrics` names it (ground truth for the engine-metrics
    /// adapters, `crate::engine`): requests waiting for a slot, streams active, and the share
    /// of slots in use as the KV-cache ratio (0 without slots). `model` is the `model_name`
    /// label.
    pub(crate) fn exposition(&self, model: &str) -> String {
        let waiting = self.waiting.load(Ordering::SeqCst);
        let running = self.active.load(Ordering::SeqCst);
        let ratio = match self.load.slots {
            0 => 0.0,
            n => (running as f64 / f64::from(n)).min(1.0),
        };
        let model = model
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n");
        format!(
            "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{model_name=\"{model}\"}} {waiting}.0\n\
             # TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{model_name=\"{model}\"}} {running}.0\n\
             # TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{{model_name=\"{model}\"}} {ratio}\n"
        )
    }

    fn factor(&self) -> f64 {
        match &self.jitter {
            Some((d, rng)) => d.sample(&mut *rng.lock().unwrap_or_else(|e| e.into_inner())),
            None => 1.0,
        }
    }

    /// TTFT from getting a slot: `ttft + prefill_per_token · prompt_tokens`, jittered.
    pub(crate) fn ttft(&self, ttft: Duration, prompt_tokens: u64) -> Duration {
        let prefill = self
            .load
            .prefill_per_token
            .saturating_mul(u32::try_from(prompt_tokens).unwrap_or(u32::MAX));
        scale(ttft.saturating_add(prefill), self.factor())
    }

    /// The next token gap: `itl · (1 + s·(active − 1))`, jittered.
    pub(crate) fn itl(&self, itl: Duration) -> Duration {
        let others = self.active.load(Ordering::SeqCst).saturating_sub(1) as f64;
        let slowdown = 1.0 + self.load.itl_slowdown_per_stream.max(0.0) * others;
        scale(itl, slowdown * self.factor())
    }
}

fn scale(d: Duration, f: f64) -> Duration {
    Duration::try_from_secs_f64(d.as_secs_f64() * f).unwrap_or(d)
}

/// Whitespace-separated words of every string in `v` (keys `role` and `type` left out).
pub(super) fn words(v: &serde_json::Value) -> u64 {
    match v {
        serde_json::Value::String(s) => s.split_whitespace().count() as u64,
        serde_json::Value::Array(a) => a.iter().map(words).sum(),
        serde_json::Value::Object(o) => o
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "role" | "type"))
            .map(|(_, v)| words(v))
            .sum(),
        _ => 0,
    }
}

/// The prompt's token count as the simulator charges prefill: whitespace-separated words of
/// every string under the request's `messages`, `prompt`, `input`, `inputs`, `system`,
/// `contents` and `systemInstruction` fields (what each protocol carries its prompt in).
pub fn prompt_tokens(body: &serde_json::Value) -> u64 {
    [
        "messages",
        "prompt",
        "input",
        "inputs",
        "system",
        "contents",
        "systemInstruction",
    ]
    .iter()
    .filter_map(|k| body.get(*k))
    .map(words)
    .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_load_the_script_is_exact() {
        let e = Engine::new(Load::default());
        assert_eq!(
            e.ttft(Duration::from_millis(200), 50),
            Duration::from_millis(200)
        );
        assert_eq!(e.itl(Duration::from_millis(20)), Duration::from_millis(20));
    }

    #[test]
    fn prefill_is_charged_per_prompt_token() {
        let e = Engine::new(Load {
            prefill_per_token: Duration::from_millis(1),
            ..Load::default()
        });
        let body = serde_json::json!({"messages": [{"role": "user", "content": "one two three"}]});
        assert_eq!(prompt_tokens(&body), 3);
        assert_eq!(
            e.ttft(Duration::from_millis(100), prompt_tokens(&body)),
            Duration::from_millis(103)
        );
    }

    #[tokio::test]
    async fn itl_grows_with_active_streams() {
        let e = Engine::new(Load {
            itl_slowdown_per_stream: 0.5,
            ..Load::default()
        });
        let _a = e.admit().await;
        let (b, queued) = e.admit().await;
        assert!(!queued, "unlimited slots made a stream wait");
        let _c = e.admit().await;
        assert_eq!(e.itl(Duration::from_millis(10)), Duration::from_millis(20));
        drop(b);
        assert_eq!(e.itl(Duration::from_millis(10)), Duration::from_millis(15));
    }

    #[tokio::test]
    async fn slots_queue_fifo() {
        let e = Arc::new(Engine::new(Load {
            slots: 1,
            ..Load::default()
        }));
        let (first, queued) = e.admit().await;
        assert!(!queued);
        let e2 = e.clone();
        let waiting = tokio::spawn(async move { e2.admit().await.1 });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "a second stream got the only slot");
        drop(first);
        let queued = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the slot was not handed on")
            .unwrap();
        assert!(queued, "the second stream did not report its wait");
    }

    #[test]
    fn jitter_is_seeded_and_has_median_one() {
        let load = Load {
            jitter: 0.2,
            seed: 7,
            ..Load::default()
        };
        let draw = |e: &Engine| -> Vec<Duration> {
            (0..101)
                .map(|_| e.itl(Duration::from_millis(100)))
                .collect()
        };
        let (a, b) = (draw(&Engine::new(load.clone())), draw(&Engine::new(load)));
        assert_eq!(a, b, "the same seed gave different jitter");
        let mut s = a.clone();
        s.sort();
        let median = s[50].as_secs_f64();
        assert!((0.08..0.12).contains(&median), "median {median}");
        assert!(s[0] < s[100]);
    }
}
