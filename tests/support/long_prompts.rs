//! Generated long prompts (`prompt_tokens:`) on the real engines: the probes file of SmolLM2
//! targets, and what every successful probe of one must show against the server's own numbers.

use std::sync::Arc;
use std::time::Duration;

use llm_probe::config::Scenario;
use llm_probe::measure::{Anomaly, ProbeOutcome};
use llm_probe::metrics::Metrics;
use llm_probe::probe::Prober;

/// One scenario list item `name` with a generated prompt of `n` tokens, the needle on or off,
/// 8 output tokens at temperature 0, and `extra` (more keys, each line indented by four).
pub fn scenario(name: &str, n: u64, needle: bool, extra: &str) -> String {
    format!("  - name: {name}\n    prompt_tokens: {n}\n    needle: {needle}\n    max_tokens: 8\n    temperature: 0\n{extra}")
}

/// A probes file of one `openai-chat` target `target` at `base_url` serving SmolLM2 as
/// `smollm2-135m-instruct` (both scripts name it so), with `scenarios` (list items). A 4 min
/// timeout: 4,000 tokens took 40–60 s to prefill on llama.cpp on a 2-core machine while other
/// builds ran.
pub fn probes_yaml(target: &str, base_url: &str, scenarios: &str) -> String {
    format!(
        "defaults:\n  interval: 10m\n  timeout: 4m\nscenarios:\n{scenarios}targets:\n  - name: {target}\n    protocol: openai-chat\n    base_url: {base_url}\n    model: smollm2-135m-instruct\n"
    )
}

/// What [`check_success`] read off a probe.
#[derive(Debug, Clone, Copy)]
pub struct Checked {
    /// The server's prompt count.
    pub counted: u64,
    /// Prompt tokens it served from its cache (0 when not reported).
    pub cached: u64,
    pub ttft: Duration,
    /// The server's own prefill time.
    pub server_prefill: Duration,
}

/// `a` within a millionth of `b`.
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs()
}

/// One successful probe of a generated prompt of `n` tokens on the engine `engine`: the server
/// counted between N and 1.5 N prompt tokens (its chat template and the nonce on top of about
/// 1.1 tokens a word) and no `prompt_truncated`; the prefill speed is its count less its cached
/// tokens over TTFT, the server's is the tokens it says it evaluated (else the same count) over
/// its own prefill time, which TTFT holds; `probe-once`'s record has the sizes and speeds.
/// Prints the numbers.
pub fn check_success(engine: &str, o: &ProbeOutcome, n: u64) -> Checked {
    let ctx = format!("{engine}, {n} tokens");
    let m = o.result.as_ref().unwrap_or_else(|f| panic!("{ctx}: {f}"));
    let obs = &o.observations;
    let counted = obs
        .usage
        .prompt_tokens
        .unwrap_or_else(|| panic!("{ctx}: no usage.prompt_tokens"));
    let ratio = counted as f64 / n as f64;
    assert!(
        (1.0..=1.5).contains(&ratio),
        "{ctx}: the server counted {counted} prompt tokens, {ratio:.3} × the generated size"
    );
    assert!(
        !obs.anomalies.contains(&Anomaly::PromptTruncated),
        "{ctx}: {:?}",
        obs.anomalies
    );
    let cached = obs.usage.cached_prompt_tokens.unwrap_or(0);
    let server_prefill = m
        .server_prefill
        .unwrap_or_else(|| panic!("{ctx}: no server prefill time"));
    assert!(
        m.ttft >= server_prefill,
        "{ctx}: TTFT {:?} < server prefill {server_prefill:?}",
        m.ttft
    );
    let speed = m
        .prefill_tokens_per_second
        .unwrap_or_else(|| panic!("{ctx}: no prefill speed"));
    let server_speed = m
        .server_prefill_tokens_per_second
        .unwrap_or_else(|| panic!("{ctx}: no server prefill speed"));
    let evaluated = obs.server_timings.prompt_tokens.unwrap_or(counted - cached);
    assert!(
        close(speed, (counted - cached) as f64 / m.ttft.as_secs_f64()),
        "{ctx}: {speed}"
    );
    assert!(
        close(
            server_speed,
            evaluated as f64 / server_prefill.as_secs_f64()
        ),
        "{ctx}: {server_speed}"
    );

    let json = llm_probe::report::to_json(o);
    assert_eq!(json["prompt_tokens_sent"], n, "{json}");
    assert_eq!(json["prompt_tokens"], counted, "{json}");
    assert_eq!(json["prefill_tokens_per_second"], speed, "{json}");
    assert_eq!(
        json["server_prefill_tokens_per_second"], server_speed,
        "{json}"
    );
    // The count was believed (a collapsed stream, the server's batching under load, is not
    // this test's subject).
    let anomalies = json["anomalies"].as_array().unwrap();
    assert!(!anomalies.contains(&"prompt_truncated".into()), "{json}");
    eprintln!(
        "{ctx}: the server counted {counted} ({ratio:.3} × N, {cached} cached), TTFT {:.3} s, \
         server prefill {:.3} s; {speed:.0} tokens/s of TTFT, {server_speed:.0} by the server's clock",
        m.ttft.as_secs_f64(),
        server_prefill.as_secs_f64()
    );
    Checked {
        counted,
        cached,
        ttft: m.ttft,
        server_prefill,
    }
}

/// Probes each scenario of `scenarios` (a generated prompt of the matching size of `sizes`)
/// in turn, `rounds` times, one probe at a time; checks each with [`check_success`] and
/// `more`, observes it in `metrics`; then, per size, takes the least server prefill time and
/// TTFT (a busy machine slows one probe, seldom every one) and asserts that the server's own
/// prefill time grows with the prompt and that TTFT at the largest size is above TTFT at the
/// smallest.
pub async fn sweep(
    engine: &str,
    prober: &Prober,
    scenarios: &[Arc<Scenario>],
    sizes: &[u64],
    rounds: usize,
    metrics: &Metrics,
    more: impl Fn(&ProbeOutcome, &Checked),
) {
    assert_eq!(scenarios.len(), sizes.len());
    let mut prefill = vec![Duration::MAX; sizes.len()];
    let mut ttft = vec![Duration::MAX; sizes.len()];
    for _ in 0..rounds {
        for (i, (s, &n)) in scenarios.iter().zip(sizes).enumerate() {
            let o = prober.probe(s).await;
            metrics.observe(&o);
            let c = check_success(engine, &o, n);
            more(&o, &c);
            prefill[i] = prefill[i].min(c.server_prefill);
            ttft[i] = ttft[i].min(c.ttft);
        }
    }
    eprintln!("{engine}, least per size {sizes:?}: server prefill {prefill:?}, TTFT {ttft:?}");
    assert!(
        prefill.windows(2).all(|w| w[0] < w[1]),
        "{engine}: the server's own prefill time does not grow with the prompt ({sizes:?} tokens): {prefill:?}"
    );
    assert!(
        ttft[0] < ttft[ttft.len() - 1],
        "{engine}: TTFT at {} tokens is not above TTFT at {}: {ttft:?}",
        sizes[sizes.len() - 1],
        sizes[0]
    );
    // Every probe is observed in both prefill-speed histograms.
    let (_, text) = metrics.render(None);
    for s in scenarios {
        let l = [("scenario", s.name.as_str())];
        for family in [
            "llm_probe_prefill_tokens_per_second_count",
            "llm_probe_server_prefill_tokens_per_second_count",
        ] {
            assert_eq!(
                super::sample(&text, family, &l),
                Some(rounds as f64),
                "{engine}: {family} {l:?}"
            );
        }
    }
}
