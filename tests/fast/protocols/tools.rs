//! Tool-call scenarios on every protocol with tools: the scenario's OpenAI-shaped
//! `tools`/`tool_choice` go out in each protocol's own request fields, the simulator answers in
//! each protocol's tool-call shape, and the probe assembles the call and validates it: arguments
//! that match the tool's schema pass and the tool-call histograms observe the call; arguments
//! that do not fail the probe with `wrong_answer` and the check `tool_arguments`.

use crate::common;

use std::time::Duration;

use llm_probe::config;
use llm_probe::measure::{FailureReason, ProbeOutcome};
use llm_probe::metrics::Metrics;
use llm_probe::simulate::Script;
use serde_json::{json, Value};

const TOOL_SCENARIO: &str = r#"  - name: tool
    messages: [{role: user, content: "What is the weather in Paris?"}]
    max_tokens: 64
    tools:
      - type: function
        function:
          name: get_weather
          description: Current weather in a city
          parameters:
            type: object
            properties: {city: {type: string}}
            required: [city]
            additionalProperties: false
    tool_choice: required
"#;

/// One probe of the tool scenario on `protocol` against a simulator answering `arguments`,
/// with the request body the simulator received.
async fn probe_tools(protocol: &str, arguments: &str, scenario: &str) -> (ProbeOutcome, Value) {
    let sim = common::simulator(Script {
        ttft: Duration::from_millis(20),
        itl: Duration::from_millis(2),
        tokens: 40,
        answer: Some(arguments.into()),
        ..Script::default()
    })
    .await;
    let keys = common::sim_protocols(&sim)
        .into_iter()
        .find(|(p, _)| *p == protocol)
        .map(|(_, k)| k)
        .unwrap();
    let yaml = format!(
        "defaults:\n  interval: 10s\n  timeout: 5s\nscenarios:\n{scenario}targets:\n  - name: sim\n    protocol: {protocol}\n    model: sim-model\n{keys}"
    );
    let cfg = config::parse(&yaml, "<test>", &common::sim_env)
        .unwrap_or_else(|e| panic!("config should load:\n{e}\n---\n{yaml}"));
    let o = common::probe_first(&cfg, None).await;
    let body = match sim.received().first() {
        Some(r) => r.body.clone(),
        None => panic!(
            "{protocol}: no request reached the simulator: {:?}",
            o.result
        ),
    };
    (o, body)
}

/// Where each protocol's request carries the tool's name, its schema, and the required choice.
fn assert_request_shape(protocol: &str, body: &Value) {
    let (name, schema, choice) = match protocol {
        "openai-chat" => (
            &body["tools"][0]["function"]["name"],
            &body["tools"][0]["function"]["parameters"],
            &body["tool_choice"],
        ),
        "openai-responses" => (
            &body["tools"][0]["name"],
            &body["tools"][0]["parameters"],
            &body["tool_choice"],
        ),
        "anthropic" => (
            &body["tools"][0]["name"],
            &body["tools"][0]["input_schema"],
            &body["tool_choice"]["type"],
        ),
        "ollama" => (
            &body["tools"][0]["function"]["name"],
            &body["tools"][0]["function"]["parameters"],
            &Value::Null,
        ),
        "gemini" => (
            &body["tools"][0]["functionDeclarations"][0]["name"],
            &body["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"],
            &body["toolConfig"]["functionCallingConfig"]["mode"],
        ),
        "bedrock" => (
            &body["toolConfig"]["tools"][0]["toolSpec"]["name"],
            &body["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"],
            &body["toolConfig"]["toolChoice"],
        ),
        _ => unreachable!(),
    };
    assert_eq!(name, "get_weather", "{protocol}: {body}");
    assert_eq!(schema["required"], json!(["city"]), "{protocol}: {body}");
    let want = match protocol {
        "openai-chat" | "openai-responses" => json!("required"),
        "anthropic" => json!("any"),
        "ollama" => Value::Null,
        "gemini" => json!("ANY"),
        "bedrock" => json!({"any": {}}),
        _ => unreachable!(),
    };
    assert_eq!(choice, &want, "{protocol}: {body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_validates_on_every_protocol_with_tools() {
    for protocol in [
        "openai-chat",
        "openai-responses",
        "anthropic",
        "ollama",
        "gemini",
        "bedrock",
    ] {
        let (o, body) = probe_tools(protocol, r#"{"city":"Paris"}"#, TOOL_SCENARIO).await;
        assert_request_shape(protocol, &body);
        assert!(o.is_success(), "{protocol}: {:?}", o.result);
        let answer = &o.observations.answer;
        assert_eq!(answer.tool_calls.len(), 1, "{protocol}: {answer:?}");
        assert_eq!(answer.tool_calls[0].name, "get_weather", "{protocol}");
        let args: Value = serde_json::from_str(&answer.tool_calls[0].arguments).unwrap();
        assert_eq!(args, json!({"city": "Paris"}), "{protocol}");
        assert!(answer.text.is_empty(), "{protocol}: {:?}", answer.text);
        let first = answer.first_tool_call.expect("a first tool-call event");
        assert!(first >= o.observations.timeline.sent + Duration::from_millis(20));

        let metrics = Metrics::new(&[]);
        metrics.observe(&o);
        let (_, text) = metrics.render(None);
        for name in [
            "llm_probe_time_to_first_tool_call_seconds_count",
            "llm_probe_tool_call_arguments_seconds_count",
        ] {
            assert_eq!(
                common::sample(&text, name, &[("scenario", "tool")]),
                Some(1.0),
                "{protocol}: {name}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_arguments_are_a_wrong_answer_on_every_protocol_with_tools() {
    for protocol in [
        "openai-chat",
        "openai-responses",
        "anthropic",
        "ollama",
        "gemini",
        "bedrock",
    ] {
        let (o, _) = probe_tools(protocol, r#"{"town":"Paris"}"#, TOOL_SCENARIO).await;
        assert_eq!(
            o.failure_reason(),
            Some(FailureReason::WrongAnswer),
            "{protocol}: {:?}",
            o.result
        );
        assert_eq!(
            o.observations.answer.failed_check,
            Some("tool_arguments"),
            "{protocol}"
        );
    }
}

/// `tool_choice: none` reaches each protocol in its own spelling (where it has one), and the
/// simulator then answers with text, which passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_choice_none_is_sent_and_text_passes() {
    let scenario = TOOL_SCENARIO.replace("tool_choice: required", "tool_choice: none");
    for (protocol, pointer, want) in [
        ("openai-responses", "/tool_choice", json!("none")),
        ("anthropic", "/tool_choice/type", json!("none")),
        (
            "gemini",
            "/toolConfig/functionCallingConfig/mode",
            json!("NONE"),
        ),
    ] {
        let (o, body) = probe_tools(protocol, "It is sunny.", &scenario).await;
        assert_eq!(body.pointer(pointer), Some(&want), "{protocol}: {body}");
        assert!(o.is_success(), "{protocol}: {:?}", o.result);
        assert!(o.observations.answer.tool_calls.is_empty(), "{protocol}");
        assert_eq!(o.observations.answer.text, "It is sunny.", "{protocol}");
    }
}

/// A named function: Anthropic `{type: tool, name}`, Gemini `ANY` with the allowed name,
/// Bedrock `{tool: {name}}`, Responses `{type: function, name}`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_tool_choice_is_mapped_per_protocol() {
    let scenario = TOOL_SCENARIO.replace(
        "tool_choice: required",
        "tool_choice: {type: function, function: {name: get_weather}}",
    );
    for (protocol, pointer, want) in [
        (
            "openai-responses",
            "/tool_choice",
            json!({"type": "function", "name": "get_weather"}),
        ),
        (
            "anthropic",
            "/tool_choice",
            json!({"type": "tool", "name": "get_weather"}),
        ),
        (
            "gemini",
            "/toolConfig/functionCallingConfig",
            json!({"mode": "ANY", "allowedFunctionNames": ["get_weather"]}),
        ),
        (
            "bedrock",
            "/toolConfig/toolChoice",
            json!({"tool": {"name": "get_weather"}}),
        ),
    ] {
        let (o, body) = probe_tools(protocol, r#"{"city":"Oslo"}"#, &scenario).await;
        assert_eq!(body.pointer(pointer), Some(&want), "{protocol}: {body}");
        assert!(o.is_success(), "{protocol}: {:?}", o.result);
    }
}

/// `simulate --answer TEXT` scripts what the answer says: an exact-answer canary passes against
/// it and an `expect` it does not meet fails with `wrong_answer`; to a request with tools it is
/// the call's arguments (here valid for the tool's schema).
#[test]
fn simulate_answer_scripts_the_answer_and_the_tool_arguments() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    const BIN: &str = env!("CARGO_BIN_EXE_llm-probe");
    let mut child = common::ChildGuard(
        Command::new(BIN)
            .args(["simulate", "--web.listen-address", "127.0.0.1:0"])
            .args(["--ttft", "5ms", "--itl", "1ms", "--tokens", "32"])
            .args(["--answer", r#"{"city":"Paris"}"#])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut err = BufReader::new(child.0.stderr.take().unwrap());
    let base_url = loop {
        let mut line = String::new();
        assert_ne!(err.read_line(&mut line).unwrap(), 0, "simulate ended early");
        if let Some(rest) = line.split("endpoint at ").nth(1) {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    let scenarios = format!(
        "  - name: canary\n    messages: [{{role: user, content: \"Say the JSON.\"}}]\n    max_tokens: 32\n    expect: {{json_schema: {{type: object, required: [city]}}}}\n  - name: miss\n    messages: [{{role: user, content: \"Say the JSON.\"}}]\n    max_tokens: 32\n    expect: {{contains: Oslo}}\n{TOOL_SCENARIO}"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("probes.yaml");
    std::fs::write(&path, common::yaml(&base_url, "5s", &scenarios, "")).unwrap();
    let once = |scenario: &str| {
        let out = Command::new(BIN)
            .args(["probe-once", "--output", "json", "--scenario", scenario])
            .arg("--config.file")
            .arg(&path)
            .output()
            .unwrap();
        let o: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        o
    };
    assert_eq!(once("canary")["failure_reason"], Value::Null);
    assert_eq!(once("miss")["failure_reason"], "wrong_answer");
    assert_eq!(once("tool")["failure_reason"], Value::Null);
}
