//! Generated long prompts against the simulator: the prompt's size as the server counts it, the
//! code word answered on every protocol, a context that refuses or truncates (the needle and
//! the count catch the truncation), the prefill speed against the simulator's own TTFT, the
//! metrics, probe-once's lines, and config errors that name the field.

use crate::common;

use std::time::Duration;

use llm_probe::config;
use llm_probe::measure::{Anomaly, FailureReason};
use llm_probe::metrics::Metrics;
use llm_probe::simulate::{ContextOverflow, Script};

/// A scenario `long` of `tokens` generated prompt tokens (with the needle unless `needle` says
/// otherwise), the cold-cache nonce on.
fn long_scenario(tokens: u32, extra: &str) -> String {
    format!("  - name: long\n    prompt_tokens: {tokens}\n    max_tokens: 48\n{extra}")
}

use common::probe_protocol as probe;

fn quick() -> Script {
    Script {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        tokens: 64,
        ..Script::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_code_word_is_answered_on_every_protocol() {
    for (protocol, _) in common::sim_protocols(&common::simulator(quick()).await) {
        let (o, req) = probe(quick(), protocol, &long_scenario(1000, "")).await;
        assert!(o.is_success(), "{protocol}: {:?}", o.result);
        let code = llm_probe::config::long_prompt::code_word("long");
        assert!(
            o.observations.answer.text.contains(&code),
            "{protocol}: {:?}",
            o.observations.answer.text
        );
        // The simulator counted what it received: the 1,000 words and the nonce's 2.
        let sent = llm_probe::simulate::prompt_tokens(&req.unwrap().body);
        assert_eq!(sent, 1002, "{protocol}");
        if protocol != "openai-completions" && protocol != "tgi" && protocol != "llama-cpp" {
            assert_eq!(o.observations.usage.prompt_tokens, Some(1002), "{protocol}");
        }
        assert!(!o.observations.anomalies.contains(&Anomaly::PromptTruncated));
    }
}

#[tokio::test]
async fn a_prompt_beyond_a_refusing_context_fails_with_the_servers_reason() {
    let script = Script {
        context_limit: 1000,
        ..quick()
    };
    let (o, _) = probe(script, "openai-chat", &long_scenario(4000, "")).await;
    assert_eq!(o.failure_reason(), Some(FailureReason::HttpStatus));
    assert_eq!(o.observations.http_status, Some(400));
    let detail = &o.result.as_ref().unwrap_err().detail;
    assert!(
        detail.contains("maximum context length is 1000 tokens"),
        "{detail}"
    );
    assert!(detail.contains("4002 tokens"), "{detail}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silently_truncated_prompt_is_caught_by_the_needle_and_the_count() {
    let script = || Script {
        context_limit: 1000,
        context_overflow: ContextOverflow::Truncate,
        ..quick()
    };
    for protocol in ["openai-chat", "anthropic", "ollama", "gemini"] {
        let (o, _) = probe(script(), protocol, &long_scenario(4000, "")).await;
        assert_eq!(
            o.failure_reason(),
            Some(FailureReason::WrongAnswer),
            "{protocol}: {:?}",
            o.result
        );
        assert_eq!(
            o.observations.answer.failed_check,
            Some("context_truncated")
        );
        assert!(
            o.observations.anomalies.contains(&Anomaly::PromptTruncated),
            "{protocol}: {:?}",
            o.observations.anomalies
        );
        let detail = &o.result.as_ref().unwrap_err().detail;
        assert!(
            detail.ends_with("the server counted 1000 prompt tokens of the about 4000 sent"),
            "{protocol}: {detail}"
        );
        // The count alone catches it when the needle is off: a success, with the anomaly.
        let (o, _) = probe(
            script(),
            protocol,
            &long_scenario(4000, "    needle: false\n"),
        )
        .await;
        assert!(o.is_success(), "{protocol}: {:?}", o.result);
        assert!(o.observations.anomalies.contains(&Anomaly::PromptTruncated));
    }
    // Within the context nothing is cut.
    let (o, _) = probe(script(), "openai-chat", &long_scenario(900, "")).await;
    assert!(o.is_success(), "{:?}", o.result);
    assert!(!o.observations.anomalies.contains(&Anomaly::PromptTruncated));
}

#[tokio::test]
async fn prefill_speed_follows_the_simulators_prefill_and_reaches_the_metrics() {
    // 0.1 ms of prefill per prompt token: 4,002 tokens take about 400 ms.
    let script = Script {
        load: llm_probe::simulate::Load {
            prefill_per_token: Duration::from_micros(100),
            ..Default::default()
        },
        ..quick()
    };
    let sim = common::simulator(script).await;
    let yaml = common::yaml(
        &sim.base_url(),
        "10s",
        &long_scenario(4000, ""),
        "    timeout: 5s\n    slo: {prefill_tokens_per_second_min: 2000}\n",
    );
    let cfg = common::parse(&yaml);
    let o = common::probe_first(&cfg, None).await;
    let m = o.result.as_ref().expect("a success");
    let truth = sim.received()[0].truth.get().cloned().expect("it streamed");
    assert_eq!(truth.prompt_tokens, 4002);
    // The simulator's TTFT is the ground truth; the client's is at least as long.
    assert!(m.ttft >= truth.ttft, "{:?} < {:?}", m.ttft, truth.ttft);
    let speed = m.prefill_tokens_per_second.expect("a prefill speed");
    let at_most = 4002.0 / truth.ttft.as_secs_f64();
    assert!(speed <= at_most, "{speed} > {at_most}");
    assert!(
        (speed - 4002.0 / m.ttft.as_secs_f64()).abs() < 1e-6,
        "{speed}"
    );

    let metrics = Metrics::new(&[cfg.targets[0].slo]);
    metrics.observe(&o);
    let (_, text) = metrics.render(None);
    let get = |name: &str| common::sample(&text, name, &[("scenario", "long")]);
    assert_eq!(get("llm_probe_prefill_tokens_per_second_count"), Some(1.0));
    assert_eq!(get("llm_probe_prompt_tokens_total"), Some(4002.0));
    // The floor is a bucket boundary, as every SLO threshold is.
    assert!(
        text.contains("llm_probe_prefill_tokens_per_second_bucket{target=\"sim\",model=\"sim-model\",scenario=\"long\",le=\"2000\"}"),
        "{text}"
    );
}

/// SmolLM2-135M on llama.cpp with `max_tokens: 16` said "The code word given at the very start
/// was "juniper-orchid" and ran out of tokens: the check fails (the word is not there), and
/// the detail says where the answer stopped instead of leaving a cut prompt the only suspect.
#[tokio::test]
async fn an_answer_cut_inside_the_code_word_says_so() {
    let code = llm_probe::config::long_prompt::code_word("long");
    let half = &code[..code.len() / 2];
    let script = |answer: String| Script {
        answer: Some(answer),
        tokens: 16,
        ..quick()
    };
    let scenario = "  - name: long\n    prompt_tokens: 256\n    max_tokens: 16\n";
    let (o, _) = probe(
        script(format!(
            "The code word given at the very start was \"{half}"
        )),
        "openai-chat",
        scenario,
    )
    .await;
    assert_eq!(
        o.observations.answer.failed_check,
        Some("context_truncated")
    );
    let detail = &o.result.as_ref().unwrap_err().detail;
    assert!(
        detail.ends_with("; the answer stopped inside the code word at max_tokens (16): give max_tokens room for the word and what the model says around it"),
        "{detail}"
    );
    // An answer that ends elsewhere, or that the cap did not cut, gets no such line.
    for (answer, max_tokens) in [
        ("The code word was \"A long text follows.\"", 16),
        (half, 48),
    ] {
        let (o, _) = probe(
            script(answer.to_string()),
            "openai-chat",
            &scenario.replace("max_tokens: 16", &format!("max_tokens: {max_tokens}")),
        )
        .await;
        let detail = &o.result.as_ref().unwrap_err().detail;
        assert!(detail.contains("check context_truncated"), "{detail}");
        assert!(!detail.contains("max_tokens"), "{answer}: {detail}");
    }
}

#[tokio::test]
async fn probe_once_says_what_was_sent_and_what_the_server_counted() {
    let script = Script {
        context_limit: 1000,
        context_overflow: ContextOverflow::Truncate,
        ..quick()
    };
    let (o, _) = probe(script, "openai-chat", &long_scenario(4000, "")).await;
    let text = llm_probe::report::to_text(&o);
    assert!(
        text.contains("prompt      1000 tokens by the server's count, of a generated prompt of about 4000: far fewer, the server cut the prompt (prompt_truncated)"),
        "{text}"
    );
    let json = llm_probe::report::to_json(&o);
    assert_eq!(json["prompt_tokens_sent"], 4000);
    assert_eq!(json["prompt_tokens"], 1000);
    assert!(json["anomalies"]
        .as_array()
        .unwrap()
        .contains(&"prompt_truncated".into()));
}

#[test]
fn config_errors_name_the_field_and_the_fix() {
    let err = |scenario: &str| {
        let yaml = format!(
            "scenarios:\n{scenario}targets:\n  - name: t\n    protocol: openai-chat\n    base_url: http://h\n    model: m\n"
        );
        config::parse(&yaml, "f.yaml", &|_| None)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let e = err("  - name: s\n    prompt_tokens: 10\n    max_tokens: 8\n");
    assert!(
        e.contains("scenarios[0].prompt_tokens: scenario \"s\": prompt_tokens is 10; set it between 64 and 1000000"),
        "{e}"
    );
    assert!(
        !e.contains("messages is required"),
        "one error, not two: {e}"
    );
    let e = err("  - name: s\n    prompt_tokens: 4000\n    max_tokens: 8\n    messages: [{role: user, content: hi}]\n");
    assert!(
        e.contains("scenarios[0].messages[0].role: scenario \"s\": messages[0] is a \"user\" message, but prompt_tokens generates the user message"),
        "{e}"
    );
    let e = err("  - name: s\n    needle: false\n    max_tokens: 8\n    messages: [{role: user, content: hi}]\n");
    assert!(
        e.contains("scenarios[0].needle: scenario \"s\": needle is set without prompt_tokens"),
        "{e}"
    );
    let e = err("  - name: s\n    prompt_tokens: 4000\n    max_tokens: 8\n").to_string()
        + &err("  - name: s\n    prompt_tokens: 4000\n    max_tokens: 8\n    messages: [{role: system, content: Be brief.}]\n");
    assert_eq!(
        e, "",
        "a long prompt alone, or with a system message, loads"
    );
    // The needle wants text; an answer that calls a tool has none.
    let tools = "  - name: s\n    prompt_tokens: 4000\n    max_tokens: 8\n    tools: [{type: function, function: {name: f}}]\n";
    let e = err(&format!("{tools}    tool_choice: required\n"));
    assert!(
        e.contains("scenarios[0].prompt_tokens: scenario \"s\": prompt_tokens with its needle (on by default) asks for the code word in text, but the scenario declares tools"),
        "{e}"
    );
    assert!(err(tools).contains("set needle: false or tool_choice: none"));
    let e = err(&format!("{tools}    needle: false\n"))
        + &err(&format!("{tools}    tool_choice: none\n"));
    assert_eq!(
        e, "",
        "without the needle, or with tools never called, it loads"
    );
    let slo = "  - name: s\n    prompt_tokens: 4000\n    max_tokens: 8\n";
    let yaml = format!("scenarios:\n{slo}targets:\n  - name: t\n    protocol: openai-chat\n    base_url: http://h\n    model: m\n    slo: {{prefill_tokens_per_second_min: -1}}\n");
    let e = config::parse(&yaml, "f.yaml", &|_| None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(
            "slo.prefill_tokens_per_second_min is -1; it must be a number greater than zero"
        ),
        "{e}"
    );
}

#[test]
fn the_generated_message_follows_the_system_message() {
    let yaml = "scenarios:\n  - name: s\n    prompt_tokens: 256\n    max_tokens: 8\n    messages: [{role: system, content: Be brief.}]\ntargets:\n  - name: t\n    protocol: openai-chat\n    base_url: http://h\n    model: m\n";
    let cfg = config::parse(yaml, "f.yaml", &|_| None).unwrap();
    let s = &cfg.scenarios[0];
    assert_eq!(s.messages.len(), 2);
    assert_eq!(s.messages[0].role, "system");
    assert_eq!(s.messages[1].role, "user");
    assert_eq!(s.messages[1].content.split_whitespace().count(), 256);
    let lp = s.long_prompt.as_ref().unwrap();
    assert_eq!(lp.tokens, 256);
    assert_eq!(s.checks.code_word, lp.code_word);
}
