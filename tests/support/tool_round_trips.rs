//! Tool round trips (docs/answer-checks.md "Tool round trips") on the real engines: the user asks
//! for the weather in Paris with the `get_weather` tool declared; a round trip adds the
//! assistant's call and the tool's result. What a round trip answered in text must show.

use std::sync::Arc;

use llm_probe::config::Scenario;
use llm_probe::probe::Prober;

/// The tool's result of [`round_trip`]s.
pub const RESULT: &str = r#"{"temperature_c": 18, "sky": "clear"}"#;
/// A longer result: more fields.
pub const LONGER_RESULT: &str = r#"{"temperature_c": 18, "sky": "clear", "wind_kmh": 12, "humidity_pct": 40, "station": "Paris-Montsouris"}"#;

/// A scenario `name` asking for the weather in Paris with the `get_weather` tool declared,
/// 32 output tokens at temperature 0: `then` (more messages, each a list item indented by six)
/// and `extra` (more keys, indented by four).
pub fn weather(name: &str, then: &str, extra: &str) -> String {
    format!(
        r#"  - name: {name}
    messages:
      - {{role: user, content: "What is the weather in Paris?"}}
{then}    max_tokens: 32
    temperature: 0
    tools:
      - type: function
        function:
          name: get_weather
          description: Current weather in a city
          parameters: {{type: object, properties: {{city: {{type: string}}}}, required: [city]}}
{extra}"#
    )
}

/// The assistant's call and its result `result` (a JSON object's text), as messages of
/// [`weather`].
pub fn round_trip(result: &str) -> String {
    format!(
        "      - role: assistant\n        tool_calls: [{{id: call_1, name: get_weather, arguments: {{city: Paris}}}}]\n      - {{role: tool, tool_call_id: call_1, content: '{result}'}}\n"
    )
}

/// Three [`weather`] scenarios with `extra`: `question` (the user's message alone), `round-trip`
/// ([`RESULT`]) and `round-trip-longer` ([`LONGER_RESULT`]).
pub fn scenarios(extra: &str) -> String {
    [
        weather("question", "", extra),
        weather("round-trip", &round_trip(RESULT), extra),
        weather("round-trip-longer", &round_trip(LONGER_RESULT), extra),
    ]
    .concat()
}

/// Probes the three [`scenarios`] (`three`) on `engine`: each is a success (HTTP 200) answered
/// in text, with no call, and the server's prompt count grows from the question to the round
/// trip and again with the longer result: it counted the result. Prints the answers; returns
/// the counts.
pub async fn answered_in_text(engine: &str, prober: &Prober, three: &[Arc<Scenario>]) -> [u64; 3] {
    let mut prompts = [0; 3];
    for (s, prompt) in three.iter().zip(&mut prompts) {
        let o = prober.probe(s).await;
        let answer = &o.observations.answer;
        assert!(o.is_success(), "{engine}, {}: {:?}", s.name, o.result);
        *prompt = (o.observations.usage.prompt_tokens).expect("usage.prompt_tokens");
        eprintln!(
            "{engine}, {}: {prompt} prompt tokens, TTFT {:?}, answer {:?}",
            s.name,
            o.result.as_ref().map(|m| m.ttft).unwrap(),
            answer.text
        );
        assert_eq!(o.observations.http_status, Some(200));
        assert!(
            !answer.text.trim().is_empty(),
            "{engine}, {}: no text",
            s.name
        );
        let calls = &answer.tool_calls;
        assert!(calls.is_empty(), "{engine}, {}: {calls:?}", s.name);
    }
    assert!(
        prompts[0] < prompts[1] && prompts[1] < prompts[2],
        "{engine}: {prompts:?}"
    );
    prompts
}
