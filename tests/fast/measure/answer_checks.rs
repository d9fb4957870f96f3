//! Answer checks end to end against the simulator: each degenerate-output fault
//! fails its check with `wrong_answer` and clean output passes; `expect:` checks; tool-call and
//! structured-output scenarios; cold vs warm schemas with a scripted grammar compilation; the
//! per-check counter and the tool timing histograms; config errors that name the field.

use crate::common;
use common::ScriptExt;

use std::time::Duration;

use llm_probe::config;
use llm_probe::measure::{FailureReason, ProbeOutcome};
use llm_probe::metrics::Metrics;
use llm_probe::probe::Prober;
use llm_probe::simulate::{Fault, Script};

/// Probes each scenario of `scenarios_yaml` once, in order, against `script`.
async fn probe_all(script: Script, scenarios_yaml: &str) -> Vec<ProbeOutcome> {
    let sim = common::simulator(script).await;
    let yaml = common::yaml(&sim.base_url(), "10s", scenarios_yaml, "    timeout: 5s\n");
    let cfg = common::parse(&yaml);
    let t = cfg.targets[0].clone();
    let prober = Prober::new(t.clone()).unwrap();
    let mut out = Vec::new();
    for s in &t.scenarios {
        out.push(prober.probe(s).await);
    }
    out
}

async fn probe_one(script: Script, scenario_yaml: &str) -> ProbeOutcome {
    probe_all(script, scenario_yaml).await.remove(0)
}

fn check_of(o: &ProbeOutcome) -> Option<&'static str> {
    o.observations.answer.failed_check
}

#[tokio::test]
async fn each_degenerate_fault_fails_its_check_and_clean_output_passes() {
    let plain = common::scenario("chat", 64);
    let clean = probe_one(common::stream(20, 2, 20).fault(Fault::None), &plain).await;
    assert!(clean.is_success(), "{:?}", clean.result);
    assert_eq!(check_of(&clean), None);

    for (fault, check) in [
        (Fault::RepetitionLoop, "repetition_loop"),
        (Fault::PunctuationOnly, "punctuation_only"),
        (Fault::SpecialToken, "special_tokens"),
        (Fault::EmptyAfterReasoning, "empty_after_reasoning"),
    ] {
        let o = probe_one(common::stream(20, 2, 20).fault(fault), &plain).await;
        assert_eq!(
            o.failure_reason(),
            Some(FailureReason::WrongAnswer),
            "{fault:?}"
        );
        assert_eq!(check_of(&o), Some(check), "{fault:?}");
        let detail = &o.result.as_ref().unwrap_err().detail;
        assert!(detail.starts_with(&format!("check {check}: ")), "{detail}");
    }
}

#[tokio::test]
async fn a_degeneration_check_can_be_turned_off_per_scenario() {
    let s = "  - name: loops-ok\n    messages: [{role: user, content: hi}]\n    max_tokens: 64\n    expect: {degeneration: {repetition_loop: false}}\n";
    let o = probe_one(common::stream(20, 2, 20).fault(Fault::RepetitionLoop), s).await;
    assert!(o.is_success(), "{:?}", o.result);
}

#[tokio::test]
async fn expect_contains_and_regex() {
    let scenarios = "  - name: right\n    messages: [{role: user, content: hi}]\n    max_tokens: 64\n    expect: {contains: [\"T19\"], case_insensitive: true, regex: '^ t0 t1'}\n  - name: impossible\n    messages: [{role: user, content: hi}]\n    max_tokens: 64\n    expect: {contains: \"Paris\"}\n";
    let out = probe_all(common::stream(20, 2, 20).fault(Fault::None), scenarios).await;
    assert!(out[0].is_success(), "{:?}", out[0].result);
    assert_eq!(out[1].failure_reason(), Some(FailureReason::WrongAnswer));
    let detail = &out[1].result.as_ref().unwrap_err().detail;
    assert!(
        detail.starts_with("check contains: expected \"Paris\", the answer was \" t0 t1"),
        "{detail}"
    );
}

#[tokio::test]
async fn a_wrong_answer_is_counted_by_check_and_not_observed_as_a_success() {
    let o = probe_one(
        common::stream(20, 2, 20).fault(Fault::PunctuationOnly),
        &common::scenario("chat", 64),
    )
    .await;
    let metrics = Metrics::new(&[]);
    metrics.observe(&o);
    let (_, text) = metrics.render(None);
    let labels = [("scenario", "chat"), ("check", "punctuation_only")];
    assert_eq!(
        common::sample(&text, "llm_probe_answer_check_failures_total", &labels),
        Some(1.0)
    );
    let reason = [("scenario", "chat"), ("reason", "wrong_answer")];
    assert_eq!(
        common::sample(&text, "llm_probe_probe_failures_total", &reason),
        Some(1.0)
    );
    let ttft = [("scenario", "chat")];
    assert_eq!(
        common::sample(&text, "llm_probe_time_to_first_token_seconds_count", &ttft),
        None,
        "a wrong answer's TTFT is not a success sample"
    );
}

const WEATHER: &str = r#"  - name: tool
    messages: [{role: user, content: "Weather in Paris?"}]
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

#[tokio::test]
async fn a_tool_scenario_sends_its_tools_and_validates_the_call() {
    let good = Script {
        answer: Some(r#"{"city":"Paris"}"#.into()),
        ..common::stream(20, 2, 20)
    };
    let sim = common::simulator(good).await;
    let yaml = common::yaml(&sim.base_url(), "10s", WEATHER, "    timeout: 5s\n");
    let cfg = common::parse(&yaml);
    let o = common::probe_first(&cfg, None).await;
    assert!(o.is_success(), "{:?}", o.result);
    let answer = &o.observations.answer;
    assert_eq!(answer.tool_calls.len(), 1);
    assert_eq!(answer.tool_calls[0].name, "get_weather");
    assert_eq!(answer.tool_calls[0].arguments, r#"{"city":"Paris"}"#);
    let (first, last) = (
        answer.first_tool_call.unwrap(),
        answer.last_tool_arguments.unwrap(),
    );
    assert!(first >= o.observations.timeline.sent + Duration::from_millis(20));
    assert!(last > first);
    let body = &sim.received()[0].body;
    assert_eq!(body["tools"][0]["function"]["name"], "get_weather");
    assert_eq!(body["tool_choice"], "required");

    let metrics = Metrics::new(&[]);
    metrics.observe(&o);
    let (_, text) = metrics.render(None);
    let l = [("scenario", "tool")];
    for name in [
        "llm_probe_time_to_first_tool_call_seconds_count",
        "llm_probe_tool_call_arguments_seconds_count",
    ] {
        assert_eq!(common::sample(&text, name, &l), Some(1.0), "{name}");
    }

    let bad = Script {
        answer: Some(r#"{"town":"Paris"}"#.into()),
        ..common::stream(20, 2, 20)
    };
    let o = probe_one(bad, WEATHER).await;
    assert_eq!(o.failure_reason(), Some(FailureReason::WrongAnswer));
    assert_eq!(check_of(&o), Some("tool_arguments"));
}

/// With `tool_choice: none` the simulator answers with text, and text is then a fine answer
/// (a required call that is missing is `tool_call_missing`: the unit tests in src/core/check).
#[tokio::test]
async fn tool_choice_none_takes_text() {
    let s = WEATHER.replace("tool_choice: required", "tool_choice: none");
    let o = probe_one(common::stream(20, 2, 20).fault(Fault::None), &s).await;
    assert!(o.is_success(), "{:?}", o.result);
    assert!(o.observations.answer.tool_calls.is_empty());
}

const STRUCTURED: &str = r#"    messages: [{role: user, content: "Name a city as JSON."}]
    max_tokens: 64
    response_format:
      type: json_schema
      json_schema:
        name: city
        schema:
          type: object
          properties: {city: {type: string}}
          required: [city]
"#;

#[tokio::test]
async fn a_structured_output_scenario_validates_its_json() {
    let s = format!("  - name: structured\n{STRUCTURED}");
    let good = Script {
        answer: Some(r#"{"city": "Paris"}"#.into()),
        ..common::stream(20, 2, 20)
    };
    let o = probe_one(good, &s).await;
    assert!(o.is_success(), "{:?}", o.result);
    let bad = Script {
        answer: Some(r#"{"city": 7}"#.into()),
        ..common::stream(20, 2, 20)
    };
    let o = probe_one(bad, &s).await;
    assert_eq!(check_of(&o), Some("json_schema"), "{:?}", o.result);
    let broken = Script {
        answer: Some(r#"{"city": "Par"#.into()),
        ..common::stream(20, 2, 20)
    };
    let o = probe_one(broken, &s).await;
    assert_eq!(check_of(&o), Some("json_schema"), "{:?}", o.result);
}

/// The scripted grammar compilation (600 ms) lands in the TTFT of every cold probe (a fresh
/// nonce in the schema) and only in the first warm one (the same schema again).
#[tokio::test]
async fn a_cold_schema_pays_the_grammar_compilation_on_every_probe_a_warm_one_once() {
    let compile = Duration::from_millis(600);
    let script = Script {
        answer: Some(r#"{"city": "Paris"}"#.into()),
        grammar_compile: compile,
        ..common::stream(20, 2, 20)
    };
    let scenarios =
        format!("  - name: warm\n{STRUCTURED}  - name: cold\n    schema_cache: cold\n{STRUCTURED}");
    let sim = common::simulator(script).await;
    let yaml = common::yaml(&sim.base_url(), "10s", &scenarios, "    timeout: 5s\n");
    let cfg = common::parse(&yaml);
    let t = cfg.targets[0].clone();
    let prober = Prober::new(t.clone()).unwrap();
    let ttft = |o: &ProbeOutcome| o.result.as_ref().expect("success").ttft;
    let (warm, cold) = (&t.scenarios[0], &t.scenarios[1]);
    let warm_first = ttft(&prober.probe(warm).await);
    let warm_again = ttft(&prober.probe(warm).await);
    let cold_1 = ttft(&prober.probe(cold).await);
    let cold_2 = ttft(&prober.probe(cold).await);
    assert!(warm_first >= compile, "{warm_first:?}");
    assert!(
        warm_again < compile,
        "the warm schema was compiled again: {warm_again:?}"
    );
    assert!(
        cold_1 >= compile && cold_2 >= compile,
        "{cold_1:?} {cold_2:?}"
    );
    // The cold schema differed on the wire; the warm one did not.
    let bodies: Vec<_> = sim.received().into_iter().map(|r| r.body).collect();
    let schema = |i: usize| bodies[i]["response_format"]["json_schema"]["schema"].clone();
    assert_eq!(schema(0), schema(1));
    assert_ne!(schema(2), schema(3));
}

fn load_error(yaml: &str) -> String {
    match config::parse(yaml, "probes.yaml", &|_| None) {
        Ok(_) => panic!("should not load:\n{yaml}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn config_errors_name_the_field_and_the_fix() {
    let base = |scenario_extra: &str, protocol: &str| {
        format!("scenarios:\n  - name: s\n    messages: [{{role: user, content: hi}}]\n    max_tokens: 8\n{scenario_extra}targets:\n  - name: t\n    protocol: {protocol}\n    base_url: http://127.0.0.1:9/v1\n    model: m\n")
    };
    let e = load_error(&base("    expect: {regex: '(unclosed'}\n", "openai-chat"));
    assert!(
        e.contains("expect.regex[0] is not a valid regular expression"),
        "{e}"
    );
    let e = load_error(&base(
        "    expect: {json_schema: {type: 12}}\n",
        "openai-chat",
    ));
    assert!(
        e.contains("expect.json_schema is not a valid JSON Schema"),
        "{e}"
    );
    let e = load_error(&base(
        "    tools: [{type: function, function: {name: f}}]\n    tool_choice: {type: function, function: {name: g}}\n",
        "openai-chat",
    ));
    assert!(e.contains("tool_choice names the function \"g\""), "{e}");
    let e = load_error(&base(
        "    tools: [{type: function, function: {name: f}}]\n",
        "tgi",
    ));
    assert!(
        e.contains("declares tools, which this protocol has no field for"),
        "{e}"
    );
    let e = load_error(&base(
        "    response_format: {type: json_schema, json_schema: {name: c, schema: {type: object}}}\n",
        "anthropic",
    ));
    assert!(
        e.contains("openai-chat and azure-openai targets only"),
        "{e}"
    );
    let e = load_error(&base("    schema_cache: cold\n", "openai-chat"));
    assert!(e.contains("schema_cache: cold needs a schema"), "{e}");
    let e = load_error(&base("    expect: {contians: x}\n", "openai-chat"));
    assert!(e.contains("contians"), "{e}");
}

/// The prefix-cache canary sends its prompt twice with one fresh nonce: with the simulator's
/// prefix cache on, the second request takes a quarter of the scripted TTFT, and the exported
/// warm/cold ratio shows it; with the cache switched off the ratio is about 1.
#[tokio::test]
async fn the_cache_canary_ratio_shows_whether_the_prefix_cache_works() {
    let scenario = "  - name: canary\n    messages: [{role: user, content: \"A long shared prefix.\"}]\n    max_tokens: 8\n    cache_canary: true\n";
    let ratio_with = |prefix_cache: bool| async move {
        let script = Script {
            ttft: Duration::from_millis(400),
            prefix_cache,
            ..common::stream(20, 2, 20)
        };
        let sim = common::simulator(script).await;
        let yaml = common::yaml(&sim.base_url(), "10s", scenario, "    timeout: 5s\n");
        let cfg = common::parse(&yaml);
        let o = common::probe_first(&cfg, None).await;
        assert!(o.is_success(), "{:?}", o.result);
        let bodies: Vec<_> = sim.received().into_iter().map(|r| r.body).collect();
        assert_eq!(bodies.len(), 2, "two requests per canary probe");
        assert_eq!(
            bodies[0]["messages"], bodies[1]["messages"],
            "one nonce for both"
        );
        let metrics = Metrics::new(&[]);
        metrics.observe(&o);
        let (_, text) = metrics.render(None);
        let l = [("scenario", "canary")];
        let gauge = common::sample(&text, "llm_probe_prefix_cache_warm_cold_ratio", &l);
        assert_eq!(gauge, o.observations.cache_canary.unwrap().ratio());
        gauge.unwrap()
    };
    let on = ratio_with(true).await;
    let off = ratio_with(false).await;
    assert!(on < 0.6, "cache on: warm/cold {on}");
    assert!(off > 0.6, "cache off: warm/cold {off}");
}
