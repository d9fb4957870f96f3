use super::*;

fn parse(text: &str) -> Result<Run, String> {
    parse_run(Path::new("run.json"), text)
}

/// Shaped as `bench::json::to_json` writes it (tests/fidelity/compare_measured.rs reads real bench output).
#[test]
fn bench_json_with_levels_requests_and_extra_fields() {
    let run = parse(
        r#"{"schema":"llm-probe.bench/v1","future_field":{"x":1},
            "metadata":{"target":"t","model":"m","protocol":"openai-chat","scenario":"s",
              "prompt_tokens":100,"max_tokens":64,"config_digest":"fnv1a64:00",
              "endpoint":{"response_model":"m1","system_fingerprint":null,"server":"vllm",
                          "server_version":"0.6"}},
            "levels":[{"concurrency":1,"rate":null,"requests":{"sent":2,"succeeded":1,"failed":1,
                       "failures_by_reason":{"timeout":1}},"ttft_seconds":{"p50":0.2}},
                      {"concurrency":null,"rate":2.5}],
            "sla_capacity":{"concurrency":1,"rate":null},
            "requests":[
              {"level":0,"concurrency":1,"rate":null,"index":0,"warmup":false,"ok":true,
               "ttft_seconds":0.2,"tpot_seconds":0.02,"inter_token_latency_seconds":[0.02]},
              {"level":0,"concurrency":1,"rate":null,"index":1,"warmup":false,"ok":false,
               "reason":"timeout","detail":"no byte for 5 s"},
              {"level":1,"warmup":false,"ok":true,"ttft_seconds":0.3,
               "inter_token_latency_seconds":[0.01,0.03,0.02]},
              {"level":1,"warmup":false,"ok":true,"ttft_seconds":0.4,
               "inter_token_latency_seconds":[]},
              {"level":1,"warmup":true,"ok":true,"ttft_seconds":9.0}]}"#,
    )
    .unwrap();
    assert_eq!(run.kind, RunKind::Bench);
    assert_eq!(run.target.as_deref(), Some("t"));
    assert_eq!(run.scenario.as_deref(), Some("s"));
    assert_eq!(run.prompt_tokens, Some(serde_json::json!(100)));
    assert_eq!(run.max_tokens, Some(serde_json::json!(64)));
    assert_eq!(run.identity.response_model.as_deref(), Some("m1"));
    assert_eq!(run.identity.server_header.as_deref(), Some("vllm"));
    assert_eq!(run.identity.server_version.as_deref(), Some("0.6"));
    assert_eq!(run.levels[0].key, LevelKey::Concurrency(1));
    assert_eq!(run.levels[1].key, LevelKey::Rate(2.5));
    assert_eq!(run.levels[0].sent_failed(), (2, 1));
    // `ok: false` is a failure with its `reason`, and has no values.
    let failed = &run.levels[0].requests[1];
    assert!(!failed.success);
    assert_eq!(failed.failure_reason.as_deref(), Some("timeout"));
    assert_eq!(run.levels[0].values(Metric::Ttft), vec![0.2]);
    // The warmup request is skipped; ITL is the median of each request's gap list.
    assert_eq!(run.levels[1].values(Metric::Ttft), vec![0.3, 0.4]);
    assert_eq!(run.levels[1].values(Metric::Itl), vec![0.02]);
    assert_eq!(run.levels[1].sent_failed(), (2, 0));
}

#[test]
fn bench_errors_name_the_problem_and_the_fix() {
    let meta = r#""metadata":{"target":"t"}"#;
    let e = parse(&format!(
        r#"{{"schema":"llm-probe.bench/v1",{meta},"levels":[{{"rate":null}}]}}"#
    ))
    .unwrap_err();
    assert!(e.contains("levels[0]") && e.contains("concurrency"), "{e}");
    let e = parse(&format!(
        r#"{{"schema":"llm-probe.bench/v1",{meta},"levels":[{{"concurrency":1}}],
            "requests":[{{"level":3,"ok":true}}]}}"#
    ))
    .unwrap_err();
    assert!(e.contains("requests[0]") && e.contains("below 1"), "{e}");
    // A request without `ok` (e.g. one written with `success`) is refused, not taken as a
    // success.
    let e = parse(&format!(
        r#"{{"schema":"llm-probe.bench/v1",{meta},"levels":[{{"concurrency":1}}],
            "requests":[{{"level":0,"ok":true}},{{"level":0,"success":false}}]}}"#
    ))
    .unwrap_err();
    assert!(
        e.contains("requests[1]") && e.contains("`ok`") && e.contains("bench --output json"),
        "{e}"
    );
    let e = parse(r#"{"schema":"other/v9","levels":[]}"#).unwrap_err();
    assert!(
        e.contains("unknown schema") && e.contains("bench --output json"),
        "{e}"
    );
    let e = parse(&format!(r#"{{"schema":"llm-probe.bench/v1",{meta}}}"#)).unwrap_err();
    assert!(e.contains("levels"), "{e}");
    let e = parse(r#"{"schema":"llm-probe.bench/v1","target":"t","levels":[]}"#).unwrap_err();
    assert!(e.contains("metadata"), "{e}");
}

#[test]
fn probe_once_lines() {
    let run = parse(concat!(
        r#"{"target":"t","scenario":"s","model":"m","success":true,"failure_reason":null,"ttft_seconds":0.25,"tpot_seconds":0.02,"inter_token_latencies_seconds":[0.02,0.04],"prompt_tokens":50,"response_model":"m-2024","system_fingerprint":null,"server_header":"x","server_version":null}"#,
        "\n\n",
        r#"{"target":"t","scenario":"s","model":"m","success":false,"failure_reason":"timeout","ttft_seconds":null}"#,
        "\n"
    ))
    .unwrap();
    assert_eq!(run.kind, RunKind::ProbeOnce);
    assert_eq!(run.levels.len(), 1);
    assert_eq!(run.levels[0].key, LevelKey::Single);
    assert_eq!(run.levels[0].sent_failed(), (2, 1));
    assert_eq!(run.levels[0].values(Metric::Itl), vec![0.03]);
    assert_eq!(run.prompt_tokens, Some(serde_json::json!(50)));
    assert_eq!(run.identity.response_model.as_deref(), Some("m-2024"));
}

#[test]
fn probe_once_errors() {
    assert!(parse("").unwrap_err().contains("empty"));
    let e = parse("{\"target\":\"t\"}\nnot json\n").unwrap_err();
    assert!(e.starts_with("line 2:"), "{e}");
    let e = parse("{\"target\":\"a\",\"scenario\":\"s\"}\n{\"target\":\"b\",\"scenario\":\"s\"}\n")
        .unwrap_err();
    assert!(e.contains("a/s, b/s") && e.contains("--target"), "{e}");
}

#[test]
fn impossible_measurements_and_newer_schemas_are_refused() {
    let meta = r#""metadata":{"target":"t"},"levels":[{"concurrency":1}]"#;
    for (field, value) in [
        ("ttft_seconds", "-0.2"),
        ("e2e_seconds", "1e308"),
        ("tpot_seconds", "86401"),
        ("output_tokens_per_second", "1e12"),
    ] {
        let e = parse(&format!(
            r#"{{"schema":"llm-probe.bench/v1",{meta},
                "requests":[{{"level":0,"ok":true,"ttft_seconds":0.2}},{{"level":0,"ok":true,"{field}":{value}}}]}}"#
        ))
        .unwrap_err();
        assert!(
            e.contains("requests[1]") && e.contains(field),
            "{field}: {e}"
        );
    }
    let e = parse(&format!(
        r#"{{"schema":"llm-probe.bench/v1",{meta},
            "requests":[{{"level":0,"ok":true,"inter_token_latency_seconds":[0.02,-1]}}]}}"#
    ))
    .unwrap_err();
    assert!(e.contains("inter_token_latency_seconds"), "{e}");
    let e =
        parse("{\"target\":\"t\",\"ttft_seconds\":0.2}\n{\"target\":\"t\",\"ttft_seconds\":-3}\n")
            .unwrap_err();
    assert!(e.contains("probe 2") && e.contains("ttft_seconds"), "{e}");
    let e = parse(&format!(r#"{{"schema":"llm-probe.bench/v999",{meta}}}"#)).unwrap_err();
    assert!(
        e.contains("v999") && e.contains("llm-probe.bench/v1"),
        "{e}"
    );
    // A day and zero are still measurements.
    let run = parse(&format!(
        r#"{{"schema":"llm-probe.bench/v1",{meta},
            "requests":[{{"level":0,"ok":true,"ttft_seconds":86400,"tpot_seconds":0}}]}}"#
    ))
    .unwrap();
    assert_eq!(run.levels[0].values(Metric::Ttft), vec![86_400.0]);
}

#[test]
fn a_prompt_length_level_is_keyed_by_its_size() {
    let run = parse(
        r#"{"schema":"llm-probe.bench/v1","metadata":{"target":"t"},
            "levels":[{"concurrency":1,"rate":null,"prompt_tokens_sent":4000}],
            "sla_capacity":{"concurrency":1,"prompt_tokens_sent":4000},
            "requests":[{"level":0,"ok":true,"ttft_seconds":0.5,"prompt_tokens":4002},
                        {"level":0,"ok":true,"ttft_seconds":0.6,"prompt_tokens":4004}]}"#,
    )
    .unwrap();
    assert_eq!(run.levels[0].key, LevelKey::PromptTokens(4000));
    assert_eq!(run.levels[0].key.to_string(), "prompt 4000 tokens");
    assert_eq!(run.levels[0].counted_prompt(), Some(4003.0));
    let sla = run.sla.unwrap();
    assert_eq!(sla.capacity, Some(LevelKey::PromptTokens(4000)));
    let e = parse(
        r#"{"schema":"llm-probe.bench/v1","metadata":{"target":"t"},
            "levels":[{"concurrency":1,"prompt_tokens_sent":0}]}"#,
    )
    .unwrap_err();
    assert!(
        e.contains("levels[0]") && e.contains("prompt_tokens_sent"),
        "{e}"
    );
}
