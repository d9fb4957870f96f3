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

/// The protocols that have tools.
const WITH_TOOLS: [&str; 6] = [
    "openai-chat",
    "openai-responses",
    "anthropic",
    "ollama",
    "gemini",
    "bedrock",
];

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
    let script = Script {
        ttft: Duration::from_millis(20),
        itl: Duration::from_millis(2),
        tokens: 40,
        answer: Some(arguments.into()),
        ..Script::default()
    };
    let (o, received) = common::probe_protocol(script, protocol, scenario).await;
    let body = match received {
        Some(r) => r.body,
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
    for protocol in WITH_TOOLS {
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
    for protocol in WITH_TOOLS {
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

/// A conversation that already called the tool twice and carries both results: the model is to
/// answer in text.
const ROUND_TRIP: &str = r#"  - name: round-trip
    messages:
      - {role: user, content: "What is the weather in Paris and in Lyon?"}
      - role: assistant
        tool_calls:
          - {id: call_1, name: get_weather, arguments: {city: Paris}}
          - {id: call_2, name: get_weather, arguments: {city: Lyon}}
      - {role: tool, tool_call_id: call_1, content: '{"temperature_c": 18}'}
      - {role: tool, tool_call_id: call_2, content: "sunny"}
    max_tokens: 64
    tools:
      - type: function
        function:
          name: get_weather
          parameters: {type: object, properties: {city: {type: string}}}
"#;

/// Where each protocol's request carries the assistant's calls and the results: the calls'
/// shapes, and the results, merged into one message where the protocol wants that.
fn assert_round_trip_shape(protocol: &str, body: &Value) {
    let paris = json!({"city": "Paris"});
    match protocol {
        "openai-chat" => {
            let m = &body["messages"];
            assert_eq!(m[1]["role"], "assistant", "{body}");
            assert_eq!(m[1]["content"], Value::Null, "{body}");
            let call = &m[1]["tool_calls"][0];
            assert_eq!(call["id"], "call_1");
            assert_eq!(call["type"], "function");
            assert_eq!(call["function"]["name"], "get_weather");
            let args: Value =
                serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
            assert_eq!(args, paris);
            assert_eq!(
                m[2],
                json!({"role": "tool", "tool_call_id": "call_1", "content": "{\"temperature_c\": 18}"})
            );
            assert_eq!(m[3]["tool_call_id"], "call_2");
        }
        "openai-responses" => {
            let i = &body["input"];
            assert_eq!(i[1]["type"], "function_call", "{body}");
            assert_eq!(i[1]["call_id"], "call_1");
            assert_eq!(i[1]["name"], "get_weather");
            assert_eq!(i[2]["call_id"], "call_2");
            assert_eq!(
                i[3],
                json!({"type": "function_call_output", "call_id": "call_1", "output": "{\"temperature_c\": 18}"})
            );
            assert_eq!(i.as_array().unwrap().len(), 5, "{body}");
        }
        "anthropic" => {
            let m = &body["messages"];
            assert_eq!(
                m[1]["content"][0],
                json!({"type": "tool_use", "id": "call_1", "name": "get_weather", "input": paris}),
                "{body}"
            );
            assert_eq!(m[1]["content"][1]["id"], "call_2");
            // Both results in one user message.
            assert_eq!(m.as_array().unwrap().len(), 3, "{body}");
            assert_eq!(m[2]["role"], "user");
            assert_eq!(
                m[2]["content"][0],
                json!({"type": "tool_result", "tool_use_id": "call_1", "content": "{\"temperature_c\": 18}"})
            );
            assert_eq!(m[2]["content"][1]["tool_use_id"], "call_2");
        }
        "ollama" => {
            let m = &body["messages"];
            assert_eq!(
                m[1]["tool_calls"][0],
                json!({"function": {"name": "get_weather", "arguments": paris}}),
                "{body}"
            );
            assert_eq!(
                m[2],
                json!({"role": "tool", "content": "{\"temperature_c\": 18}", "tool_name": "get_weather"})
            );
        }
        "gemini" => {
            let c = &body["contents"];
            assert_eq!(
                c[1],
                json!({"role": "model", "parts": [
                    {"functionCall": {"name": "get_weather", "args": paris},
                     "thoughtSignature": "skip_thought_signature_validator"},
                    {"functionCall": {"name": "get_weather", "args": {"city": "Lyon"}},
                     "thoughtSignature": "skip_thought_signature_validator"},
                ]}),
                "{body}"
            );
            assert_eq!(c.as_array().unwrap().len(), 3, "{body}");
            assert_eq!(
                c[2]["parts"][0]["functionResponse"],
                json!({"name": "get_weather", "response": {"temperature_c": 18}})
            );
            // A result that is not a JSON object is wrapped.
            assert_eq!(
                c[2]["parts"][1]["functionResponse"]["response"],
                json!({"content": "sunny"})
            );
        }
        "bedrock" => {
            let m = &body["messages"];
            assert_eq!(
                m[1]["content"][0],
                json!({"toolUse": {"toolUseId": "call_1", "name": "get_weather", "input": paris}}),
                "{body}"
            );
            assert_eq!(m.as_array().unwrap().len(), 3, "{body}");
            assert_eq!(
                m[2]["content"][0],
                json!({"toolResult": {"toolUseId": "call_1", "content": [{"json": {"temperature_c": 18}}]}})
            );
            assert_eq!(
                m[2]["content"][1],
                json!({"toolResult": {"toolUseId": "call_2", "content": [{"text": "sunny"}]}})
            );
        }
        _ => unreachable!(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_round_trip_goes_out_in_each_protocols_shape_and_is_answered_in_text() {
    for protocol in WITH_TOOLS {
        let (o, body) = probe_tools(protocol, "It is 18 degrees in Paris.", ROUND_TRIP).await;
        assert_round_trip_shape(protocol, &body);
        assert!(o.is_success(), "{protocol}: {:?}", o.result);
        let answer = &o.observations.answer;
        assert!(answer.tool_calls.is_empty(), "{protocol}: {answer:?}");
        assert_eq!(answer.text, "It is 18 degrees in Paris.", "{protocol}");
    }
}

/// Bedrock wants the roles to alternate: a user message after the results (or after another
/// user message) joins the message before it instead of following it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bedrock_joins_a_user_message_to_the_results_before_it() {
    let scenario = ROUND_TRIP.replace(
        "      - {role: tool, tool_call_id: call_2, content: \"sunny\"}\n",
        "      - {role: tool, tool_call_id: call_2, content: \"sunny\"}\n      - {role: user, content: \"Which is warmer?\"}\n      - {role: user, content: \"One word.\"}\n",
    );
    let (o, body) = probe_tools("bedrock", "Paris.", &scenario).await;
    assert!(o.is_success(), "{:?}", o.result);
    let m = body["messages"].as_array().unwrap();
    let roles: Vec<&str> = m.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user"], "{body}");
    let last = m[2]["content"].as_array().unwrap();
    assert_eq!(last.len(), 4, "{body}");
    assert!(last[1]["toolResult"].is_object(), "{body}");
    assert_eq!(last[2], json!({"text": "Which is warmer?"}));
    assert_eq!(last[3], json!({"text": "One word."}));
}

#[test]
fn tool_round_trip_config_errors_name_the_field_and_the_fix() {
    let err = |messages: &str, tools: bool| {
        let tools = match tools {
            true => "    tools: [{type: function, function: {name: get_weather}}]\n",
            false => "",
        };
        let yaml = format!("scenarios:\n  - name: s\n    max_tokens: 8\n{tools}    messages:\n{messages}targets:\n  - name: t\n    protocol: openai-chat\n    base_url: http://h\n    model: m\n");
        config::parse(&yaml, "f.yaml", &|_| None)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let call = "      - {role: user, content: hi}\n      - {role: assistant, tool_calls: [{name: get_weather}]}\n";
    assert_eq!(
        err(
            &format!("{call}      - {{role: tool, tool_call_id: call_1_0, content: ok}}\n"),
            true
        ),
        "",
        "a call without an id is call_J_K"
    );
    for (messages, tools, want) in [
        (
            format!("{call}      - {{role: tool, tool_call_id: nope, content: ok}}\n"),
            true,
            "scenarios[0].messages[2].tool_call_id: scenario \"s\": messages[2].tool_call_id \"nope\" answers no earlier assistant tool call",
        ),
        (
            format!("{call}      - {{role: tool, content: ok}}\n"),
            true,
            "messages[2] is a tool result without tool_call_id; set it to the id of the assistant tool call it answers.",
        ),
        (
            call.to_string(),
            false,
            "messages[1].tool_calls[0] calls \"get_weather\", which is not a declared tool; the scenario declares no tools; add the tool to tools:.",
        ),
        (
            "      - {role: user, content: hi, tool_calls: [{name: get_weather}]}\n".into(),
            true,
            "messages[0] is a \"user\" message with tool_calls; only an assistant message calls tools.",
        ),
        (
            "      - {role: assistant, tool_calls: [{name: get_weather, arguments: [1]}]}\n".into(),
            true,
            "messages[0].tool_calls[0].arguments is not a mapping",
        ),
        (
            "      - {role: assistant, tool_calls: [{id: a, name: get_weather}, {id: a, name: get_weather}]}\n".into(),
            true,
            "messages[0].tool_calls[1].id \"a\" is used by an earlier call",
        ),
        // Every protocol wants each call answered once, right after it, before the
        // conversation goes on; Anthropic and Bedrock take ids of letters, digits, _ and -.
        (
            format!("{call}      - {{role: user, content: and?}}\n"),
            true,
            "scenarios[0].messages[1].tool_calls[0]: scenario \"s\": messages[1].tool_calls[0] (id \"call_1_0\") has no tool result after it; add {role: tool, tool_call_id: call_1_0, content: ...} right after messages[1]",
        ),
        (
            call.to_string(),
            true,
            "messages[1].tool_calls[0] (id \"call_1_0\") has no tool result after it",
        ),
        (
            format!("{call}      - {{role: user, content: and?}}\n      - {{role: tool, tool_call_id: call_1_0, content: ok}}\n"),
            true,
            "messages[3].tool_call_id \"call_1_0\" answers a call of an earlier turn; put each tool result right after the assistant message that made the call",
        ),
        (
            format!("{call}      - {{role: tool, tool_call_id: call_1_0, content: ok}}\n      - {{role: tool, tool_call_id: call_1_0, content: again}}\n"),
            true,
            "messages[3].tool_call_id \"call_1_0\" answers a call that messages[2] already answered",
        ),
        (
            "      - {role: user, content: hi}\n      - {role: assistant, tool_calls: [{id: \"call 1\", name: get_weather}]}\n      - {role: tool, tool_call_id: \"call 1\", content: ok}\n".into(),
            true,
            "messages[1].tool_calls[0].id \"call 1\" is not an id every protocol takes; use at most 64 ASCII letters, digits",
        ),
    ] {
        let e = err(&messages, tools);
        assert!(e.contains(want), "want {want:?} in:\n{e}");
    }
    // Two calls answered in either order, then the conversation goes on: fine.
    let two = "      - {role: user, content: hi}\n      - {role: assistant, tool_calls: [{id: a, name: get_weather}, {id: b-2, name: get_weather}]}\n      - {role: tool, tool_call_id: b-2, content: ok}\n      - {role: tool, tool_call_id: a, content: ok}\n      - {role: assistant, content: done}\n      - {role: user, content: thanks}\n";
    assert_eq!(err(two, true), "");
    // A round trip on a protocol without tools is the tools error.
    let yaml = format!("scenarios:\n  - name: s\n    max_tokens: 8\n    tools: [{{type: function, function: {{name: get_weather}}}}]\n    messages:\n{call}      - {{role: tool, tool_call_id: call_1_0, content: ok}}\ntargets:\n  - name: t\n    protocol: tgi\n    base_url: http://h\n    model: m\n");
    let e = config::parse(&yaml, "f.yaml", &|_| None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("declares tools, which this protocol has no field for"),
        "{e}"
    );
}
