//! The second real engine of the suite: vLLM's CPU build serving SmolLM2-135M from
//! `scripts/real-vllm.sh` (started here on 127.0.0.1:18090 if it is not running: installing
//! takes about 6 minutes and starting 2–5, both cached/kept by the script; it runs with
//! `--enable-per-request-metrics`, `--max-num-seqs 2` and `--enable-auto-tool-choice
//! --tool-call-parser pythonic`; `REAL_VLLM_PORT` picks another port).
//!
//! - `probe-once` (the binary, `--output json`) on `openai-chat`, `openai-completions` and
//!   `openai-responses` succeeds, N comes from vLLM's usage, and the TTFT split (outside the
//!   engine + engine queue + engine prefill, from vLLM's per-request metrics) sums to the
//!   probe's TTFT within 1 ms.
//! - Eight probes at once on two sequences: the engine queue is the largest part of their TTFT;
//!   one at a time it is about zero. The probes' TTFT, queue and prefill sums are compared with
//!   vLLM's own histograms (`vllm:time_to_first_token_seconds`,
//!   `vllm:request_queue_time_seconds`, `vllm:request_prefill_time_seconds`) for the same
//!   requests (BENCHMARKS.md, "TTFT split on a real vLLM"), and their output tokens (from
//!   usage) with vLLM's `vllm:generation_tokens_total`.
//!
//! - Answer checks: `tool_choice: required` and a named function each yield a call whose
//!   arguments validate, a `json_schema` scenario valid JSON, an impossible `expect`
//!   `wrong_answer`.
//! - Long prompts (`prompt_tokens:`): 256, 1,000 and 2,000 tokens with prefill speeds, 4,000
//!   beyond `--max-model-len 4096` refused with vLLM's reason, and a prompt vLLM cuts on
//!   request caught by the prompt count and the needle.
//!
//! Never skipped: a server that cannot be installed or started fails the test with the reason.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use llm_probe::config::Target;
use llm_probe::measure::{FailureReason, ProbeOutcome, TokenCountSource};
use llm_probe::probe::Prober;

const BIN: &str = env!("CARGO_BIN_EXE_llm-probe");
const MAX_TOKENS: u64 = 12;

/// One test at a time: the queue test needs the server to itself.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// `scripts/real-vllm.sh start` (installs first when the cache is empty): the base URL.
fn real_vllm() -> String {
    common::start_real_engine("scripts/real-vllm.sh")
}

fn probes_yaml(v1: &str) -> String {
    let mut yaml = format!(
        "defaults:\n  interval: 5m\n  timeout: 4m\nscenarios:\n  - name: short\n    messages: [{{role: user, content: \"Explain time to first token in one sentence.\"}}]\n    max_tokens: {MAX_TOKENS}\n    temperature: 0\ntargets:\n"
    );
    for p in ["openai-chat", "openai-completions", "openai-responses"] {
        yaml.push_str(&format!(
            "  - name: {p}\n    protocol: {p}\n    base_url: {v1}\n    model: smollm2-135m-instruct\n"
        ));
    }
    yaml
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_once_on_three_protocols_splits_ttft_by_vllm_request_metrics() {
    let _serial = SERIAL.lock().await;
    let v1 = tokio::task::spawn_blocking(real_vllm).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("probes.yaml");
    std::fs::write(&path, probes_yaml(&v1)).unwrap();
    let out = tokio::process::Command::new(BIN)
        .args(["probe-once", "--output", "json", "--config.file"])
        .arg(&path)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    for o in &lines {
        let ctx = format!("{}: {o}", o["target"]);
        assert_eq!(o["success"], true, "{ctx}");
        assert_eq!(o["token_count_source"], "usage", "{ctx}");
        let n = o["output_tokens"].as_u64().unwrap();
        assert!((1..=MAX_TOKENS).contains(&n), "{ctx}");
        // vLLM names itself in `system_fingerprint` (not on Responses streams).
        if o["target"] != "openai-responses" {
            assert!(
                o["system_fingerprint"]
                    .as_str()
                    .is_some_and(|f| f.starts_with("vllm-")),
                "{ctx}"
            );
        }
        let split = &o["ttft_split"];
        assert_eq!(split["source"], "vllm_request_metrics", "{ctx}");
        let part = |k: &str| split[k].as_f64().unwrap_or_else(|| panic!("{ctx}: no {k}"));
        let (outside, queue, prefill) = (
            part("outside_engine_seconds"),
            part("engine_queue_seconds"),
            part("engine_prefill_seconds"),
        );
        let ttft = o["ttft_seconds"].as_f64().unwrap();
        assert!(
            (outside + queue + prefill - ttft).abs() < 1e-3,
            "{ctx}: {outside} + {queue} + {prefill} != TTFT {ttft}"
        );
        assert_eq!(part("excess_seconds"), 0.0, "{ctx}");
        assert!(prefill > 0.0 && outside > 0.0, "{ctx}");
        // The split's queue is vLLM's `queue_time_ms` (to the nanosecond the split keeps).
        let reported = o["server_queue_seconds"].as_f64().unwrap();
        assert!((reported - queue).abs() < 1e-6, "{ctx}");
    }
}

/// vLLM's `/metrics`: the sum and count of each histogram family named in `families`, and
/// the counter `vllm:generation_tokens_total` last.
async fn vllm_sums(v1: &str, families: &[&str]) -> Vec<(f64, f64)> {
    let root = v1.trim_end_matches('/').trim_end_matches("/v1");
    let text = reqwest::get(format!("{root}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let value = |name: &str| {
        common::sample(&text, name, &[]).unwrap_or_else(|| panic!("vLLM's /metrics has no {name}"))
    };
    let mut out: Vec<(f64, f64)> = families
        .iter()
        .map(|f| (value(&format!("{f}_sum")), value(&format!("{f}_count"))))
        .collect();
    out.push((value("vllm:generation_tokens_total"), 0.0));
    out
}

/// `streams` probes at once, `rounds` times, of the chat target; every one must succeed.
async fn burst(t: &Arc<Target>, streams: usize, rounds: usize) -> Vec<ProbeOutcome> {
    let mut out = Vec::new();
    for _ in 0..rounds {
        let tasks: Vec<_> = (0..streams)
            .map(|_| {
                let t = t.clone();
                tokio::spawn(
                    async move { Prober::new(t.clone()).unwrap().probe(&t.scenarios[0]).await },
                )
            })
            .collect();
        for task in tasks {
            let o = task.await.unwrap();
            let m = o.result.as_ref().unwrap_or_else(|f| panic!("{f}"));
            assert_eq!(m.token_count_source, TokenCountSource::Usage);
            assert_eq!(
                Some(m.output_tokens),
                o.observations.usage.completion_tokens
            );
            out.push(o);
        }
    }
    out
}

/// Sums of (TTFT, outside, queue, prefill) over `outcomes`, seconds.
fn split_sums(outcomes: &[ProbeOutcome]) -> [f64; 4] {
    let mut s = [0.0; 4];
    for o in outcomes {
        let m = o.result.as_ref().unwrap();
        let split = &m.ttft_split;
        let off = split
            .components()
            .iter()
            .map(|(_, d)| *d)
            .sum::<Duration>()
            .abs_diff(m.ttft);
        assert!(off < Duration::from_millis(1), "split off TTFT by {off:?}");
        s[0] += m.ttft.as_secs_f64();
        s[1] += split.remainder.unwrap().as_secs_f64();
        s[2] += split.engine_queue.unwrap().as_secs_f64();
        s[3] += split.engine_prefill.unwrap().as_secs_f64();
    }
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_dominates_at_eight_streams_on_two_sequences() {
    let _serial = SERIAL.lock().await;
    let v1 = tokio::task::spawn_blocking(real_vllm).await.unwrap();
    let cfg = common::parse(&probes_yaml(&v1));
    let chat = cfg.targets[0].clone();
    let families = [
        "vllm:time_to_first_token_seconds",
        "vllm:request_queue_time_seconds",
        "vllm:request_prefill_time_seconds",
    ];
    // Warm up (the first request after a start pays for lazy initialisation).
    burst(&chat, 1, 1).await;
    for (streams, rounds) in [(1usize, 4usize), (8, 1)] {
        let before = vllm_sums(&v1, &families).await;
        let outcomes = burst(&chat, streams, rounds).await;
        let after = vllm_sums(&v1, &families).await;
        let [ttft, outside, queue, prefill] = split_sums(&outcomes);
        let n = outcomes.len() as f64;
        let delta: Vec<(f64, f64)> = after
            .iter()
            .zip(&before)
            .map(|(a, b)| (a.0 - b.0, a.1 - b.1))
            .collect();
        eprintln!(
            "real vLLM, {streams} streams × {rounds}: probe TTFT {ttft:.3} s = outside {outside:.3} + queue {queue:.3} + prefill {prefill:.3} over {n} requests; \
             vLLM's own histograms for the same requests: TTFT {:.3} s ({} obs), queue {:.3} s ({}), prefill {:.3} s ({})",
            delta[0].0, delta[0].1, delta[1].0, delta[1].1, delta[2].0, delta[2].1
        );
        for (family, (_, count)) in families.iter().zip(&delta) {
            assert_eq!(*count, n, "{family}: one observation per probe");
        }
        // Output tokens: ours (from usage) add up to what vLLM counted as generated.
        let ours: u64 = outcomes
            .iter()
            .map(|o| o.result.as_ref().unwrap().output_tokens)
            .sum();
        assert_eq!(
            ours as f64, delta[3].0,
            "output tokens vs vllm:generation_tokens_total"
        );
        // The server's TTFT starts when its frontend has the request: inside the probe's.
        assert!(
            delta[0].0 <= ttft + 0.001 * n,
            "vLLM's TTFT sum {} above the probes' {ttft}",
            delta[0].0
        );
        // Our queue is vLLM's own per-request queue time: its histogram has the same sum.
        assert!(
            (delta[1].0 - queue).abs() <= 0.005 * n,
            "queue: probes {queue} vs vLLM {}",
            delta[1].0
        );
        if streams == 1 {
            assert!(
                queue < 0.05 * ttft,
                "alone, the queue is {queue} s of {ttft} s"
            );
        } else if delta[1].0 >= 0.5 * ttft {
            // vLLM's own histogram says these requests waited in its queue for most of their
            // TTFT: the split says so too.
            assert!(
                queue > outside && queue > prefill,
                "8 streams on 2 sequences: queue {queue} s is not the largest part (outside {outside}, prefill {prefill})"
            );
        } else {
            // On a loaded machine vLLM's frontend can take the 8 requests one at a time, so that
            // none waits in its queue: its own histogram is the ground truth, and the sums of
            // queue time already agree (above).
            eprintln!(
                "8 streams on 2 sequences did not queue in vLLM this time (its own queue sum {:.3} s of {ttft:.3} s TTFT): nothing more to check",
                delta[1].0
            );
        }
    }
}

/// vLLM does not report a port that is taken (it logs "startup complete" and never listens):
/// the script checks first and names the port and the way out.
#[test]
fn start_on_a_taken_port_fails_with_the_reason() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/real-vllm.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .args(["start", &port])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(out.stdout.is_empty(), "no URL printed");
    assert!(
        err.contains(&format!("port {port} is taken")),
        "the reason names the port: {err}"
    );
}

/// Engine metrics beside the probe on the real vLLM: with `server_metrics_url` pointing at
/// vLLM's own `/metrics`, the probe record (`probe-once` JSON) carries what vLLM said just
/// before the request — counts ≥ 0 and a KV-cache ratio in [0, 1] — read by the auto-detected
/// vLLM adapter, and the probe itself succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_once_records_vllms_own_load() {
    let _serial = SERIAL.lock().await;
    let v1 = tokio::task::spawn_blocking(real_vllm).await.unwrap();
    let root = v1.trim_end_matches("/v1");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("probes.yaml");
    let yaml = format!(
        "defaults:\n  interval: 5m\n  timeout: 4m\nscenarios:\n  - name: short\n    messages: [{{role: user, content: \"Say hi.\"}}]\n    max_tokens: {MAX_TOKENS}\n    temperature: 0\ntargets:\n  - name: vllm\n    protocol: openai-chat\n    base_url: {v1}\n    model: smollm2-135m-instruct\n    server_metrics_url: {root}/metrics\n"
    );
    std::fs::write(&path, yaml).unwrap();
    let out = tokio::process::Command::new(BIN)
        .args(["probe-once", "--output", "json", "--config.file"])
        .arg(&path)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let o: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(o["success"], true, "{o}");
    let load = &o["server_load"];
    assert_eq!(load["error"], serde_json::Value::Null, "{o}");
    assert_eq!(load["engine"], "vllm", "{o}");
    let waiting = load["requests_waiting"]
        .as_f64()
        .expect("vLLM publishes its queue");
    let running = load["requests_running"]
        .as_f64()
        .expect("vLLM publishes its batch");
    let kv = load["kv_cache_usage_ratio"]
        .as_f64()
        .expect("vLLM publishes its KV cache usage");
    assert!(waiting >= 0.0 && running >= 0.0, "{load}");
    assert!((0.0..=1.0).contains(&kv), "{load}");
}

/// A probes file of one `openai-chat` target `vllm` at `v1` with `scenarios` (list items).
fn chat_yaml(v1: &str, scenarios: &str) -> String {
    format!(
        "defaults:\n  interval: 5m\n  timeout: 4m\nscenarios:\n{scenarios}targets:\n  - name: vllm\n    protocol: openai-chat\n    base_url: {v1}\n    model: smollm2-135m-instruct\n"
    )
}

/// Answer checks on vLLM: a tool scenario with `tool_choice:
/// required` and one naming the function each yield a call whose arguments validate against the
/// tool's schema (vLLM constrains both with structured outputs; it accepts them only when started
/// with `--tool-call-parser`, which `scripts/real-vllm.sh` passes), a `json_schema` scenario
/// yields valid JSON, and an `expect` that cannot match fails with `wrong_answer`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_structured_output_and_an_impossible_expect_on_vllm() {
    let _one = SERIAL.lock().await;
    let v1 = tokio::task::spawn_blocking(real_vllm).await.unwrap();
    let tool = |name: &str, choice: &str| {
        format!(
            r#"  - name: {name}
    messages: [{{role: user, content: "What is the weather in Paris? Use the tool."}}]
    max_tokens: 96
    temperature: 0
    tools:
      - type: function
        function:
          name: get_weather
          description: Current weather in a city
          parameters:
            type: object
            properties: {{city: {{type: string, maxLength: 24}}}}
            required: [city]
            additionalProperties: false
    tool_choice: {choice}
"#
        )
    };
    let scenarios = format!(
        r#"{}{}  - name: structured
    messages: [{{role: user, content: "Name the capital of France as JSON."}}]
    max_tokens: 48
    temperature: 0
    response_format:
      type: json_schema
      json_schema:
        name: capital
        schema:
          type: object
          properties: {{city: {{type: string, maxLength: 24}}}}
          required: [city]
          additionalProperties: false
  - name: impossible
    messages: [{{role: user, content: "Say hello."}}]
    max_tokens: 8
    temperature: 0
    expect: {{contains: "zq-no-model-says-this-qz"}}
"#,
        tool("required", "required"),
        tool("named", "{type: function, function: {name: get_weather}}"),
    );
    let cfg = common::parse(&chat_yaml(&v1, &scenarios));
    let t = cfg.targets[0].clone();
    let prober = Prober::new(t.clone()).unwrap();

    for s in &t.scenarios[..2] {
        let o = prober.probe(s).await;
        let answer = &o.observations.answer;
        assert!(
            o.is_success(),
            "{}: {:?} (check {:?}, text {:?})",
            s.name,
            o.result,
            answer.failed_check,
            answer.text
        );
        assert_eq!(answer.tool_calls.len(), 1, "{}: {:?}", s.name, answer);
        assert_eq!(answer.tool_calls[0].name, "get_weather");
        let args: serde_json::Value =
            serde_json::from_str(&answer.tool_calls[0].arguments).unwrap();
        assert!(args["city"].is_string(), "{}: {args}", s.name);
        assert!(answer.first_tool_call.is_some() && answer.last_tool_arguments.is_some());
    }

    let structured = prober.probe(&t.scenarios[2]).await;
    assert!(
        structured.is_success(),
        "structured: {:?}",
        structured.result
    );
    let doc: serde_json::Value =
        serde_json::from_str(structured.observations.answer.text.trim()).unwrap();
    assert!(doc["city"].is_string(), "{doc}");

    let impossible = prober.probe(&t.scenarios[3]).await;
    assert_eq!(
        impossible.failure_reason(),
        Some(llm_probe::measure::FailureReason::WrongAnswer),
        "{:?}",
        impossible.result
    );
    assert_eq!(
        impossible.observations.answer.failed_check,
        Some("contains")
    );
}

/// A tool round trip (docs/answer-checks.md "Tool round trips") on vLLM's chat endpoint, with
/// `tool_choice` left to `auto` (the pythonic tool-call parser finds no call in a text answer):
/// a success answered in text, and vLLM's prompt count grows with the round trip and again with
/// a longer result. SmolLM2's built-in template, which vLLM applies, renders the result as a
/// `tool` turn but an assistant message's `tool_calls` not at all (an empty assistant turn):
/// without the nonce the question is 37 tokens, the question and the call alone 43, the round
/// trip 63 (with it, measured: 58, 81 and 115 with the longer result). SmolLM2 answered the
/// longer one from the result ("The weather in Paris is quite pleasant, with a temperature of
/// 18°C and a clear sky.").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_round_trip_on_vllm_is_answered_in_text() {
    let _one = SERIAL.lock().await;
    let v1 = tokio::task::spawn_blocking(real_vllm).await.unwrap();
    let cfg = common::parse(&chat_yaml(&v1, &common::tool_round_trips::scenarios("")));
    let t = cfg.targets[0].clone();
    let prober = Prober::new(t.clone()).unwrap();
    common::tool_round_trips::answered_in_text("vLLM", &prober, &t.scenarios).await;
}

/// Long prompts (`prompt_tokens:`) on vLLM, whose context is `--max-model-len 4096`
/// (`scripts/real-vllm.sh`; a second vLLM with a smaller one would cost another 2–5 minutes of
/// start on two cores, and 4,000 generated tokens are about 4,500 by SmolLM2's tokenizer, well
/// beyond 4,096 already):
///
/// - 256, 1,000 and 2,000 tokens, twice each: every probe succeeds with both prefill speeds (the
///   server's prefill is vLLM's own, from its per-request metrics), and that prefill time grows
///   with the prompt;
/// - 4,000 tokens are refused before prefill: HTTP 400, "This model's maximum context length is
///   4096 tokens. However, your prompt contains at least 4097 input tokens, …", failure reason
///   `http_status` with those words;
/// - 4,000 tokens with `truncate_prompt_tokens: 1000` (vLLM keeps the last 1,000 tokens, a cut
///   from the left as a silent context limit makes): the server counts 1,000, the anomaly
///   `prompt_truncated`; the needle's check fails (`wrong_answer`, check `context_truncated`).
///   Only the count is proof here: SmolLM2-135M misses the code word of an uncut long prompt
///   too (tests/e2e/engines/llama_cpp_long_prompts.rs), so the sweep runs without the needle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_prompts_within_and_beyond_vllms_context() {
    use common::long_prompts::{check_success, probes_yaml, scenario, sweep};

    const SIZES: [u64; 3] = [256, 1000, 2000];
    let _serial = SERIAL.lock().await;
    let v1 = tokio::task::spawn_blocking(real_vllm).await.unwrap();
    let mut scenarios: String = SIZES
        .iter()
        .map(|n| scenario(&format!("long-{n}"), *n, false, ""))
        .collect();
    scenarios += &scenario("beyond", 4000, false, "");
    scenarios += &scenario(
        "cut",
        4000,
        true,
        "    extra_body: {truncate_prompt_tokens: 1000}\n",
    );
    let cfg = common::parse(&probes_yaml("vllm", &v1, &scenarios));
    let t = cfg.targets[0].clone();
    let prober = Prober::new(t.clone()).unwrap();
    // Warm up (the first request after a start pays for lazy initialisation).
    check_success("vLLM", &prober.probe(&t.scenarios[0]).await, SIZES[0]);
    let metrics = llm_probe::metrics::Metrics::new(&[]);
    sweep(
        "vLLM",
        &prober,
        &t.scenarios[..3],
        &SIZES,
        2,
        &metrics,
        |o, _| {
            let split = &o.result.as_ref().unwrap().ttft_split;
            assert_eq!(
                split.source,
                Some(llm_probe::measure::ServerTimingSource::VllmRequestMetrics)
            );
        },
    )
    .await;

    let beyond = prober.probe(&t.scenarios[3]).await;
    let f = beyond
        .result
        .as_ref()
        .expect_err("4,000 tokens beyond 4,096");
    eprintln!("vLLM, 4,000 tokens with --max-model-len 4096: {f}");
    assert_eq!(f.reason, FailureReason::HttpStatus, "{f}");
    assert_eq!(beyond.observations.http_status, Some(400), "{f}");
    assert!(
        f.detail.contains("maximum context length is 4096 tokens"),
        "{f}"
    );
    assert!(beyond.observations.anomalies.is_empty(), "{f}");

    let cut = prober.probe(&t.scenarios[4]).await;
    let f = cut.result.as_ref().expect_err("the needle was cut off");
    eprintln!("vLLM, 4,000 tokens cut to the last 1,000: {f}");
    assert_eq!(f.reason, FailureReason::WrongAnswer, "{f}");
    assert_eq!(
        cut.observations.answer.failed_check,
        Some("context_truncated")
    );
    assert_eq!(cut.observations.usage.prompt_tokens, Some(1000), "{f}");
    assert!(
        cut.observations
            .anomalies
            .contains(&llm_probe::measure::Anomaly::PromptTruncated),
        "{:?}",
        cut.observations.anomalies
    );
    assert!(
        f.detail
            .contains("the server counted 1000 prompt tokens of the about 4000 sent"),
        "{f}"
    );
    let json = llm_probe::report::to_json(&cut);
    assert_eq!(json["prompt_tokens_sent"], 4000, "{json}");
    assert_eq!(json["prompt_tokens"], 1000, "{json}");
    assert_eq!(
        json["anomalies"],
        serde_json::json!(["prompt_truncated"]),
        "{json}"
    );
}
