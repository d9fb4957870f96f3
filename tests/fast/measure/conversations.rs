//! Multi-turn probes (`turns:`) against the simulator: each turn carries the earlier answers,
//! the simulator's prefix cache serves the earlier turns (cached tokens and a shorter TTFT,
//! against its own ground truth), a failed turn fails the probe and ends the conversation,
//! `expect:` checks the last turn, every turn is counted and exported by `turn`, and config
//! errors name the field.

use crate::common;

use std::time::Duration;

use llm_probe::config;
use llm_probe::measure::{FailureReason, ProbeOutcome};
use llm_probe::metrics::Metrics;
use llm_probe::simulate::{Fault, Load, ReceivedRequest, Script};

const THREE_TURNS: &str = r#"  - name: chat
    messages:
      - {role: system, content: "You answer in one short sentence."}
      - {role: user, content: "Name three rivers in France."}
    turns:
      - "Which of them is the longest?"
      - "How long is it?"
    max_tokens: 8
"#;

/// A simulator charging 1 ms of prefill per prompt word, its prefix cache `on` or not.
fn script(prefix_cache: bool) -> Script {
    Script {
        ttft: Duration::from_millis(20),
        itl: Duration::from_millis(1),
        tokens: 8,
        prefix_cache,
        load: Load {
            prefill_per_token: Duration::from_millis(1),
            ..Load::default()
        },
        ..Script::default()
    }
}

/// One probe of the first scenario of `scenarios` against `script`, with the requests the
/// simulator received.
async fn converse(script: Script, scenarios: &str) -> (ProbeOutcome, Vec<ReceivedRequest>) {
    let sim = common::simulator(script).await;
    let yaml = common::yaml(&sim.base_url(), "30s", scenarios, "    timeout: 5s\n");
    let o = common::probe_first(&common::parse(&yaml), None).await;
    (o, sim.received())
}

#[tokio::test]
async fn each_turn_carries_the_earlier_answers_and_the_cache_serves_them() {
    let (o, received) = converse(script(true), THREE_TURNS).await;
    assert!(o.is_success(), "{:?}", o.result);
    assert_eq!(received.len(), 3);
    // Turn 3: system, user, answer 1, follow-up 1, answer 2, follow-up 2; one nonce throughout.
    let msgs = received[2].body["messages"].as_array().unwrap();
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "user", "assistant", "user"]
    );
    assert_eq!(msgs[2]["content"], " t0 t1 t2 t3 t4 t5 t6 t7");
    assert_eq!(msgs[5]["content"], "How long is it?");
    assert_eq!(
        msgs[0]["content"], received[0].body["messages"][0]["content"],
        "the nonce is the same on every turn"
    );

    let turns = &o.observations.turns;
    assert_eq!(turns.len(), 3);
    assert_eq!(turns.iter().map(|t| t.turn).collect::<Vec<_>>(), [1, 2, 3]);
    // The server's counts: the conversation so far, of which the earlier requests' messages
    // were cached.
    let words = |r: &ReceivedRequest| llm_probe::simulate::prompt_tokens(&r.body);
    for (k, t) in turns.iter().enumerate() {
        assert_eq!(t.prompt_tokens, Some(words(&received[k])), "turn {}", k + 1);
        assert!(t.failure.is_none());
    }
    assert_eq!(turns[0].cached_prompt_tokens, Some(0));
    assert_eq!(turns[1].cached_prompt_tokens, Some(words(&received[0])));
    assert_eq!(
        turns[2].cached_prompt_tokens,
        Some(words(&received[0]) + 8 + 6)
    );
    // Ground truth: the simulator charged turn 2 for its new words only, and the client saw a
    // TTFT at least as long as the simulator's.
    let truth = |k: usize| received[k].truth.get().cloned().unwrap();
    assert_eq!(truth(1).prompt_tokens, 8 + 6);
    assert!(truth(1).ttft < truth(0).ttft, "{:?}", (truth(0), truth(1)));
    for (k, t) in turns.iter().enumerate() {
        assert!(t.ttft.unwrap() >= truth(k).ttft, "turn {}", k + 1);
    }
    // The probe's own numbers are the first turn's.
    assert_eq!(o.result.as_ref().unwrap().ttft, turns[0].ttft.unwrap());

    let metrics = Metrics::new(&[]);
    metrics.observe(&o);
    let (_, text) = metrics.render(None);
    let get = |name: &str, turn: &str| {
        common::sample(&text, name, &[("scenario", "chat"), ("turn", turn)])
    };
    for turn in ["1", "2", "3"] {
        assert_eq!(
            get("llm_probe_turn_time_to_first_token_seconds_count", turn),
            Some(1.0),
            "{turn}"
        );
    }
    assert_eq!(
        get("llm_probe_turn_prompt_cached_tokens_total", "2"),
        Some(words(&received[0]) as f64)
    );
    // Every turn was spent: the counters hold all three.
    let all: u64 = received.iter().map(words).sum();
    assert_eq!(
        common::sample(
            &text,
            "llm_probe_prompt_tokens_total",
            &[("scenario", "chat")]
        ),
        Some(all as f64)
    );
    assert_eq!(
        common::sample(
            &text,
            "llm_probe_output_tokens_total",
            &[("scenario", "chat")]
        ),
        Some(24.0)
    );
    assert_eq!(
        common::sample(&text, "llm_probe_time_to_first_token_seconds_count", &[]),
        Some(1.0),
        "one probe"
    );
    let report = llm_probe::report::to_text(&o);
    assert!(report.contains("  turn 2      TTFT "), "{report}");
    let json = llm_probe::report::to_json(&o);
    assert_eq!(json["turns"].as_array().unwrap().len(), 3, "{json}");
    assert_eq!(
        json["turns"][1]["cached_prompt_tokens"],
        words(&received[0])
    );
}

#[tokio::test]
async fn without_a_prefix_cache_a_later_turn_pays_for_the_whole_conversation() {
    let (o, received) = converse(script(false), THREE_TURNS).await;
    assert!(o.is_success(), "{:?}", o.result);
    let truth = |k: usize| received[k].truth.get().cloned().unwrap();
    assert!(truth(1).ttft > truth(0).ttft, "{:?}", (truth(0), truth(1)));
    assert!(o
        .observations
        .turns
        .iter()
        .all(|t| t.cached_prompt_tokens.is_none()));
}

#[tokio::test]
async fn a_failed_turn_fails_the_probe_and_ends_the_conversation() {
    // Every second request fails: turn 2 of 3.
    let s = Script {
        fault: Fault::Http500,
        fault_every: 2,
        ..script(false)
    };
    let (o, received) = converse(s, THREE_TURNS).await;
    assert_eq!(received.len(), 2, "no third turn");
    assert_eq!(o.failure_reason(), Some(FailureReason::HttpStatus));
    assert_eq!(o.observations.http_status, Some(500));
    let detail = &o.result.as_ref().unwrap_err().detail;
    assert!(detail.starts_with("turn 2 of 3: "), "{detail}");
    let turns = &o.observations.turns;
    assert_eq!(turns.len(), 2);
    assert!(turns[0].failure.is_none());
    assert_eq!(turns[1].failure, Some(FailureReason::HttpStatus));
    // The per-turn families hold the turn that succeeded only.
    let metrics = Metrics::new(&[]);
    metrics.observe(&o);
    let (_, text) = metrics.render(None);
    let turn = |name: &str, turn: &str| common::sample(&text, name, &[("turn", turn)]);
    assert!(turn("llm_probe_turn_prompt_tokens_total", "1").is_some());
    assert_eq!(turn("llm_probe_turn_prompt_tokens_total", "2"), None);
    assert_eq!(
        turn("llm_probe_turn_time_to_first_token_seconds_count", "2"),
        None
    );
}

#[tokio::test]
async fn expect_checks_the_last_turn_only() {
    let s = THREE_TURNS.to_string() + "    expect: {contains: \"the Loire\"}\n";
    let (o, received) = converse(script(false), &s).await;
    assert_eq!(received.len(), 3, "turns 1 and 2 passed");
    assert_eq!(o.failure_reason(), Some(FailureReason::WrongAnswer));
    let detail = &o.result.as_ref().unwrap_err().detail;
    assert!(
        detail.starts_with("turn 3 of 3: check contains: "),
        "{detail}"
    );
    assert_eq!(o.observations.answer.failed_check, Some("contains"));
}

#[test]
fn turns_config_errors_name_the_field_and_the_fix() {
    let err = |extra: &str| {
        let yaml = format!("scenarios:\n  - name: s\n    max_tokens: 8\n    messages: [{{role: user, content: hi}}]\n{extra}targets:\n  - name: t\n    protocol: openai-chat\n    base_url: http://h\n    model: m\n");
        config::parse(&yaml, "f.yaml", &|_| None)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    assert_eq!(err("    turns: [\"and then?\"]\n"), "");
    for (extra, want) in [
        ("    turns: []\n", "scenarios[0].turns: scenario \"s\": turns has 0 entries; give 1 to 7 follow-up user messages"),
        ("    turns: [a, b, c, d, e, f, g, h]\n", "turns has 8 entries; give 1 to 7"),
        ("    turns: [\"  \"]\n", "scenarios[0].turns[0]: scenario \"s\": turns[0] is empty"),
        ("    turns: [a]\n    cache_canary: true\n", "turns cannot be combined with cache_canary"),
        ("    turns: [a]\n    prefix_cache: warm\n", "turns cannot be combined with prefix_cache: warm"),
        ("    turns: [a]\n    tools: [{type: function, function: {name: f}}]\n", "turns cannot be combined with tools"),
    ] {
        let e = err(extra);
        assert!(e.contains(want), "want {want:?} in:\n{e}");
    }
    let yaml = "scenarios:\n  - name: s\n    max_tokens: 8\n    prompt_tokens: 100\n    turns: [a]\ntargets:\n  - name: t\n    protocol: openai-chat\n    base_url: http://h\n    model: m\n";
    let e = config::parse(yaml, "f.yaml", &|_| None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("turns cannot be combined with prompt_tokens"),
        "{e}"
    );
}

#[tokio::test]
async fn a_later_turns_quota_and_retry_after_reach_the_probe() {
    use llm_probe::measure::RateLimitKind;
    // A key of 2 requests a minute: turn 1 leaves 1, turn 2 leaves 0, turn 3 is refused.
    let s = Script {
        rate_limit: 2,
        ..script(false)
    };
    let (o, received) = converse(s, THREE_TURNS).await;
    assert_eq!(received.len(), 3);
    assert_eq!(o.observations.http_status, Some(429));
    let detail = &o.result.as_ref().unwrap_err().detail;
    assert!(detail.starts_with("turn 3 of 3: "), "{detail}");
    // The scheduler holds the pair back as the refusing turn asked, not as turn 1 (which
    // asked nothing) left it.
    let wait = o.observations.retry_after.expect("the 429's Retry-After");
    assert!(
        wait > Duration::ZERO && wait <= Duration::from_secs(60),
        "{wait:?}"
    );
    // The quota as the latest turn's head described it: nothing left, not turn 1's 1.
    let limits = o.observations.rate_limits.as_ref().unwrap();
    let requests = limits.window(RateLimitKind::Requests).unwrap();
    assert_eq!(requests.remaining, Some(0), "{limits:?}");
}
