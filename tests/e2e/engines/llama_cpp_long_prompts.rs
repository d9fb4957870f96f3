//! Long prompts (`prompt_tokens:`, docs/configuration.md "Long prompts") on the real llama.cpp
//! with SmolLM2-135M-Instruct (`scripts/real-llm.sh`), each test on a server of its own with
//! one slot (a free port, stopped at the end): `-c` is shared by the slots, so the shared
//! server on 18080 (four slots of 8,192) gives a request 2,048 tokens, too few for 4,000.
//!
//! - 256, 1,000 and 4,000 tokens, twice each, on one slot of 8,192: every probe succeeds; the
//!   server counts between N and 1.5 N prompt tokens (measured 1.37, 1.18 and 1.13 N: the chat
//!   template's default system prompt and the nonce are about 60 tokens, each sentence's full
//!   stop one more); its own counts add up (`timings.prompt_n` evaluated + cached = its prompt
//!   count); both prefill speeds are the server's numbers over TTFT and over `timings.prompt_ms`;
//!   and the server's own prefill time grows with the prompt, as does TTFT.
//! - 4,000 tokens on one slot of 1,024: llama.cpp refuses the request before prefilling it
//!   (HTTP 400 `exceed_context_size_error`, "request (4494 tokens) exceeds the available context
//!   size (1024 tokens), try increasing it"); this build never truncates a prompt. The probe
//!   fails with `http_status` and the server's words; 256 tokens on the same server succeed.
//!
//! `needle: false` throughout: SmolLM2-135M does not find the code word in a long text. Measured
//! on this server, at temperature 0: none of 7 probes at 256 tokens, 6 at 1,000 and 6 at 4,000
//! (it answers "The code word given at the very start was "A long text follows."" or makes one
//! up), and at 64 tokens 6 of 20 code words. The needle's check against a real cut is in
//! vllm.rs, where vLLM truncates on request (`truncate_prompt_tokens`).

use crate::common;

use common::long_prompts::{check_success, probes_yaml, scenario, sweep, Checked};
use llm_probe::measure::{FailureReason, ProbeOutcome};
use llm_probe::probe::Prober;

/// The sizes of the acceptance: prefill dominates TTFT from a few hundred tokens on.
const SIZES: [u64; 3] = [256, 1000, 4000];

/// The probes file of one llama.cpp target at `base_url` with a scenario `long-N` of each size
/// of `sizes`, without the needle.
fn yaml(base_url: &str, sizes: &[u64]) -> String {
    let scenarios: String = sizes
        .iter()
        .map(|n| scenario(&format!("long-{n}"), *n, false, ""))
        .collect();
    probes_yaml("llama", base_url, &scenarios)
}

/// What llama.cpp adds to [`check_success`]: its own counts add up (`timings.prompt_n`
/// evaluated plus the cached tokens, the template's system prompt before the nonce, are its
/// prompt count), and the server prefill is its `timings.prompt_ms`.
fn llama_cpps_own_numbers(o: &ProbeOutcome, c: &Checked) {
    let t = &o.observations.server_timings;
    let evaluated = t.prompt_tokens.expect("llama.cpp sends timings.prompt_n");
    assert_eq!(evaluated + c.cached, c.counted, "prompt_n + cached_tokens");
    let prompt_s = t.prompt_seconds.expect("llama.cpp sends timings.prompt_ms");
    assert!((c.server_prefill.as_secs_f64() - prompt_s).abs() < 1e-6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_of_256_1k_and_4k_tokens_on_llama_cpp() {
    let port = common::free_port();
    let env = [("REAL_LLM_PARALLEL", "1"), ("REAL_LLM_CTX", "8192")];
    let (_server, base_url) =
        tokio::task::spawn_blocking(move || common::real_llm::own_server(port, &env))
            .await
            .unwrap();
    let cfg = common::parse(&yaml(&base_url, &SIZES));
    let t = cfg.targets[0].clone();
    let prober = Prober::new(t.clone()).unwrap();
    let metrics = llm_probe::metrics::Metrics::new(&[]);
    sweep(
        "llama.cpp",
        &prober,
        &t.scenarios,
        &SIZES,
        2,
        &metrics,
        llama_cpps_own_numbers,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_beyond_llama_cpps_context_is_refused_with_its_reason() {
    let port = common::free_port();
    let env = [("REAL_LLM_PARALLEL", "1"), ("REAL_LLM_CTX", "1024")];
    let (_server, base_url) =
        tokio::task::spawn_blocking(move || common::real_llm::own_server(port, &env))
            .await
            .unwrap();
    let cfg = common::parse(&yaml(&base_url, &[4000, 256]));
    let t = cfg.targets[0].clone();
    let prober = Prober::new(t.clone()).unwrap();

    let beyond = prober.probe(&t.scenarios[0]).await;
    let f = beyond.result.as_ref().expect_err("4,000 tokens in 1,024");
    eprintln!("llama.cpp, 4,000 tokens in a context of 1,024: {f}");
    assert_eq!(f.reason, FailureReason::HttpStatus, "{f}");
    assert_eq!(beyond.observations.http_status, Some(400), "{f}");
    // The server's own words, with its count of the whole prompt: it did not cut it.
    assert!(
        f.detail
            .contains("exceeds the available context size (1024 tokens)"),
        "{f}"
    );
    let counted: u64 = f
        .detail
        .split("request (")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no \"request (N tokens)\" in {f}"));
    assert!(
        (4000..=6000).contains(&counted),
        "the server counted {counted} of 4,000"
    );
    assert!(
        beyond.observations.anomalies.is_empty(),
        "{:?}",
        beyond.observations.anomalies
    );
    let json = llm_probe::report::to_json(&beyond);
    assert_eq!(json["success"], false);
    assert_eq!(json["failure_reason"], "http_status");
    assert_eq!(json["prompt_tokens_sent"], 4000);
    assert_eq!(json["prefill_tokens_per_second"], serde_json::Value::Null);

    // The refusal is by length: a prompt that fits succeeds on the same server.
    let within = prober.probe(&t.scenarios[1]).await;
    let c = check_success("llama.cpp", &within, 256);
    llama_cpps_own_numbers(&within, &c);
}
