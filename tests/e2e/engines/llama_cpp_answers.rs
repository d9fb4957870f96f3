//! Answer checks against a real inference server: llama.cpp's
//! `llama-server --jinja` with SmolLM2-135M-Instruct from `scripts/real-llm.sh` (started here if
//! it is not running). A tool scenario with `tool_choice: required` yields a real tool call whose
//! arguments validate against the tool's schema, and the tool-call histograms observe it; a
//! `json_schema` scenario yields valid JSON that the check accepts; an `expect` that cannot match
//! fails with `wrong_answer`.
//!
//! The tool call needs the chat template `scripts/real-llm.sh` passes (`scripts/chatml-tools.jinja`:
//! SmolLM2's built-in template has no tools section, and this llama.cpp build has no generic
//! fallback, so without it the tools never reach the prompt). The template renders a call as
//! `<function=NAME>{ARGS}</function>` with no marker before it, so llama.cpp's `required` grammar
//! allows no free text first and even a 135M model emits the call. The scenario sends
//! `parallel_tool_calls: false`: the template can render several calls, so llama.cpp's default is
//! to allow them, and SmolLM2 then repeats the call until `max_tokens` cuts the last one. A named
//! function in `tool_choice` is not understood by this build (it falls back to `auto`):
//! `required` is used.

use crate::common;

use llm_probe::measure::FailureReason;
use llm_probe::metrics::Metrics;
use llm_probe::probe::Prober;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_structured_output_and_an_impossible_expect_on_llama_cpp() {
    let base_url = tokio::task::spawn_blocking(common::real_server)
        .await
        .unwrap();
    // Short strings (maxLength) so that the grammar-constrained answer fits in max_tokens.
    let scenarios = r#"  - name: tool
    messages: [{role: user, content: "What is the weather in Paris? Use the tool."}]
    max_tokens: 48
    temperature: 0
    tools:
      - type: function
        function:
          name: get_weather
          description: Current weather in a city
          parameters:
            type: object
            properties: {city: {type: string, maxLength: 24}}
            required: [city]
            additionalProperties: false
    tool_choice: required
    extra_body: {parallel_tool_calls: false}
  - name: structured
    messages: [{role: user, content: "Name the capital of France as JSON."}]
    max_tokens: 96
    temperature: 0
    response_format:
      type: json_schema
      json_schema:
        name: capital
        schema:
          type: object
          properties: {city: {type: string, maxLength: 24}}
          required: [city]
          additionalProperties: false
    schema_cache: cold
  - name: impossible
    messages: [{role: user, content: "Say hello."}]
    max_tokens: 16
    temperature: 0
    expect: {contains: "zq-no-model-says-this-qz"}
"#;
    let yaml = format!(
        "defaults:\n  interval: 120s\n  timeout: 120s\nscenarios:\n{scenarios}targets:\n  - name: llama\n    protocol: openai-chat\n    base_url: {base_url}\n    model: smollm2-135m-instruct\n"
    );
    let cfg = common::parse(&yaml);
    let t = cfg.targets[0].clone();
    let prober = Prober::new(t.clone()).unwrap();

    let tool = prober.probe(&t.scenarios[0]).await;
    let answer = &tool.observations.answer;
    assert!(
        tool.is_success(),
        "tool: {:?} (check {:?}, text {:?})",
        tool.result,
        answer.failed_check,
        answer.text
    );
    let calls = &answer.tool_calls;
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].name, "get_weather");
    let args: serde_json::Value = serde_json::from_str(&calls[0].arguments).unwrap();
    assert!(args["city"].is_string(), "{args}");
    let (first, last) = (
        answer.first_tool_call.expect("a first tool-call event"),
        answer.last_tool_arguments.expect("a last arguments event"),
    );
    assert!(first > tool.observations.timeline.sent && last >= first);
    let metrics = Metrics::new(&[]);
    metrics.observe(&tool);
    let (_, text) = metrics.render(None);
    for name in [
        "llm_probe_time_to_first_tool_call_seconds_count",
        "llm_probe_tool_call_arguments_seconds_count",
    ] {
        assert_eq!(
            common::sample(&text, name, &[("scenario", "tool")]),
            Some(1.0),
            "{name}"
        );
    }

    let structured = prober.probe(&t.scenarios[1]).await;
    assert!(
        structured.is_success(),
        "structured: {:?}",
        structured.result
    );
    let doc: serde_json::Value =
        serde_json::from_str(structured.observations.answer.text.trim()).unwrap();
    assert!(doc["city"].is_string(), "{doc}");

    let impossible = prober.probe(&t.scenarios[2]).await;
    assert_eq!(
        impossible.failure_reason(),
        Some(FailureReason::WrongAnswer),
        "{:?}",
        impossible.result
    );
    assert_eq!(
        impossible.observations.answer.failed_check,
        Some("contains")
    );
}
