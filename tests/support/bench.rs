//! `llm-probe bench` through the library, as `bench --output …` runs it: a probes file for one
//! simulator, a plan, and the sweep.

use std::time::Duration;

use llm_probe::bench::level::Load;
use llm_probe::bench::plan::{Plan, Warmup};
use llm_probe::bench::progress::Progress;
use llm_probe::bench::{select, sweep, Report};
use llm_probe::config::PrefixCache;
use tokio_util::sync::CancellationToken;

/// A probes file with one target `sim` (model `m`, OpenAI chat at `base_url`) and one scenario
/// `chat` (`max_tokens` 32).
pub fn yaml(base_url: &str) -> String {
    format!(
        "defaults:\n  timeout: 20s\nscenarios:\n  - name: chat\n    messages: [{{role: user, content: \"Say hello\"}}]\n    max_tokens: 32\ntargets:\n  - name: sim\n    protocol: openai-chat\n    base_url: {base_url}\n    model: m\n"
    )
}

/// A sweep of `levels`, each `requests` measured requests after `warmup` warmup requests;
/// seed 1, no pause, no duration bound.
pub fn plan(levels: Vec<Load>, requests: u64, warmup: u64) -> Plan {
    Plan {
        levels,
        duration: None,
        requests: Some(requests),
        warmup: Warmup::Requests(warmup),
        pause: Duration::ZERO,
        seed: 1,
        max_concurrency: None,
        max_requests: 10_000,
        stop_on_slo_breach: false,
        max_failure_ratio: 0.0,
    }
}

/// The report of `plan` run on target `sim` × scenario `chat` of [`yaml`]`(base_url)`.
pub async fn bench(base_url: &str, plan: Plan) -> Report {
    bench_config(&yaml(base_url), plan).await
}

/// The report of `plan` run on target `sim` × scenario `chat` of the probes file `text` (e.g.
/// [`yaml`] with an SLO or a system message added).
pub async fn bench_config(text: &str, plan: Plan) -> Report {
    let cfg = super::parse(text);
    let (t, s) = select(&cfg, Some("sim"), Some("chat")).unwrap();
    sweep(
        text,
        t,
        s,
        PrefixCache::Cold,
        plan,
        CancellationToken::new(),
        Progress::new(true),
    )
    .await
    .unwrap()
}

/// Prompt-length levels (`--prompt-tokens`) of these sizes, at concurrency 1.
pub fn prompts(tokens: &[u32]) -> Vec<Load> {
    (tokens.iter())
        .map(|&tokens| Load::Prompt {
            tokens,
            concurrency: 1,
        })
        .collect()
}
