//! The real llama.cpp server (`scripts/real-llm.sh`, SmolLM2-135M) through every protocol it
//! speaks: OpenAI chat, OpenAI completions, OpenAI Responses, Anthropic Messages and its native
//! `/completion`. Each is probed three times (temperature 0, 24 tokens); every probe succeeds,
//! N equals the server's own `timings.predicted_n` where the protocol carries it (and comes
//! from usage or the server count, never from events), the server's prefill is at most the
//! client's TTFT, and no anomaly is reported. Anthropic carries no `timings`: its usage count
//! is checked against the chat endpoint's `predicted_n` for the same warm prompt.
//! Never skipped: a server that does not start fails with the reason.

use crate::common;

use std::sync::Arc;

use llm_probe::config::{Protocol, Scenario, Target};
use llm_probe::measure::{ProbeOutcome, TokenCountSource};
use llm_probe::probe::Prober;

const MAX_TOKENS: u64 = 24;

/// One target per protocol (the native one at the server root), each with a cold and a warm
/// scenario.
fn targets(v1: &str) -> Vec<Arc<Target>> {
    let root = v1.trim_end_matches('/').trim_end_matches("/v1");
    let protocols = [
        ("openai-chat", v1),
        ("openai-completions", v1),
        ("openai-responses", v1),
        ("anthropic", v1),
        ("llama-cpp", root),
    ];
    let mut yaml = format!(
        "defaults:\n  interval: 30s\n  timeout: 20s\nscenarios:\n  - name: cold\n    messages: [{{role: user, content: \"Explain time to first token in one sentence.\"}}]\n    max_tokens: {MAX_TOKENS}\n    temperature: 0\n  - name: warm\n    messages: [{{role: user, content: \"What is 2+2?\"}}]\n    max_tokens: {MAX_TOKENS}\n    temperature: 0\n    prefix_cache: warm\ntargets:\n"
    );
    for (p, base) in protocols {
        yaml.push_str(&format!(
            "  - name: {p}\n    protocol: {p}\n    base_url: {base}\n    model: smollm2-135m-instruct\n"
        ));
    }
    common::parse(&yaml).targets
}

fn scenario<'a>(t: &'a Target, name: &str) -> &'a Scenario {
    t.scenarios.iter().find(|s| s.name == name).unwrap()
}

/// The checks every probe of every protocol passes; returns N.
fn check(o: &ProbeOutcome, protocol: Protocol) -> u64 {
    let ctx = format!("{}/{}", o.target, o.scenario);
    let m = o.result.as_ref().unwrap_or_else(|f| panic!("{ctx}: {f}"));
    let obs = &o.observations;
    assert_eq!(obs.anomalies, vec![], "{ctx}");
    assert_eq!(
        obs.identity.server_header.as_deref(),
        Some("llama.cpp"),
        "{ctx}"
    );
    assert!(
        m.output_tokens >= 1 && m.output_tokens <= MAX_TOKENS,
        "{ctx}: N {}",
        m.output_tokens
    );
    assert!(
        m.token_events >= 1 && m.token_events as u64 <= m.output_tokens,
        "{ctx}: {m:?}"
    );
    assert!(m.e2e >= m.ttft, "{ctx}");
    let predicted = obs.server_timings.predicted_tokens;
    match protocol {
        Protocol::Anthropic => {
            assert_eq!(m.token_count_source, TokenCountSource::Usage, "{ctx}");
            assert_eq!(predicted, None, "{ctx}: Anthropic carries no timings");
            assert_eq!(m.server_prefill, None, "{ctx}");
        }
        _ => {
            let want = if protocol == Protocol::LlamaCpp {
                TokenCountSource::Server
            } else {
                TokenCountSource::Usage
            };
            assert_eq!(m.token_count_source, want, "{ctx}");
            assert_eq!(
                Some(m.output_tokens),
                predicted,
                "{ctx}: N = the server's timings.predicted_n"
            );
            let prefill = m
                .server_prefill
                .unwrap_or_else(|| panic!("{ctx}: llama.cpp sends timings.prompt_ms"));
            assert!(
                prefill <= m.ttft,
                "{ctx}: server prefill {prefill:?} > client TTFT {:?}",
                m.ttft
            );
        }
    }
    m.output_tokens
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_protocol_llama_cpp_speaks() {
    let v1 = tokio::task::spawn_blocking(common::real_server)
        .await
        .unwrap();
    let mut warm_n = Vec::new();
    for t in targets(&v1) {
        let prober = Prober::new(t.clone()).unwrap();
        for round in 0..3 {
            let o = prober.probe(scenario(&t, "cold")).await;
            let n = check(&o, t.protocol);
            eprintln!(
                "{} cold #{round}: N {n} ({}), TTFT {:?}, prefill {:?}",
                t.protocol.as_str(),
                o.result.as_ref().unwrap().token_count_source.as_str(),
                o.result.as_ref().unwrap().ttft,
                o.result.as_ref().unwrap().server_prefill
            );
        }
        if matches!(t.protocol, Protocol::OpenAiChat | Protocol::Anthropic) {
            let o = prober.probe(scenario(&t, "warm")).await;
            warm_n.push((t.protocol, check(&o, t.protocol)));
        }
    }
    // The same chat-templated prompt at temperature 0 generates the same tokens on both
    // endpoints: Anthropic's usage count equals the chat endpoint's timings.predicted_n.
    eprintln!("warm: {warm_n:?}");
    assert_eq!(warm_n.len(), 2);
    assert_eq!(
        warm_n[0].1, warm_n[1].1,
        "Anthropic output_tokens vs chat predicted_n: {warm_n:?}"
    );
}
