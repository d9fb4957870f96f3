//! Every family of [`Metrics`] at once: pairs and their targets given a series in each, then one
//! of them removed the way the daemon removes it.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant, SystemTime};

use super::*;
use crate::config::baseline_file::{Baseline, Endpoint, Origin, Quantiles};
use crate::engine::{Engine, EngineLoad};
use crate::measure::{
    Anomaly, CacheCanary, Failure, FailureReason, Measurement, Observations, ServerTimingSource,
    TokenCountSource, TtftComponent, TtftSplit,
};

fn pair(target: &str, scenario: &str) -> ProbeLabels {
    ProbeLabels::new(target, "m", scenario, "")
}

/// A probe of `labels` that reaches every family its result can: a new connection, a kernel
/// read delay, usage, an anomaly, what the backend revealed, the engine's load, a cost, a
/// credential reload, a `Retry-After`, rate limits, a trace id, a tool call, a failed check, the
/// cache canary, two turns.
fn outcome(labels: &ProbeLabels, result: Result<Measurement, Failure>) -> ProbeOutcome {
    let sent = Instant::now();
    let at = |ms| sent + Duration::from_millis(ms);
    let mut o = Observations::new(sent);
    o.timeline.connect_started = Some(sent);
    o.timeline.connected = Some(at(3));
    o.read_delays = vec![Duration::from_micros(200)];
    o.usage.prompt_tokens = Some(12);
    o.usage.cached_prompt_tokens = Some(8);
    o.usage.completion_tokens = Some(2);
    o.anomalies = vec![Anomaly::ALL[0]];
    o.identity.response_model = Some("served".into());
    o.server_load = Some(Ok(EngineLoad {
        engine: Engine::Vllm,
        requests_waiting: Some(1.0),
        requests_running: Some(2.0),
        kv_cache_usage_ratio: Some(0.5),
    }));
    o.cost = Some(0.25);
    o.credentials_reloaded = true;
    o.retry_after = Some(Duration::from_secs(7));
    o.rate_limits = rate_limits(&[
        ("x-ratelimit-limit-requests", "100"),
        ("x-ratelimit-remaining-requests", "42"),
        ("x-ratelimit-reset-tokens", "1m30s"),
    ]);
    o.traceparent = Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into());
    o.answer.first_tool_call = Some(at(150));
    o.answer.last_tool_arguments = Some(at(170));
    o.answer.failed_check = Some("contains");
    o.cache_canary = Some(CacheCanary {
        cold_ttft: Duration::from_millis(200),
        warm_ttft: Some(Duration::from_millis(100)),
        warm_cached_tokens: Some(8),
    });
    o.turns = (1..=2)
        .map(|turn| crate::measure::Turn {
            turn,
            ttft: Some(Duration::from_millis(100)),
            output_tokens_per_second: Some(40.0),
            output_tokens: Some(2),
            prompt_tokens: Some(12 * turn as u64),
            cached_prompt_tokens: Some(8),
            server_prefill: None,
            failure: None,
        })
        .collect();
    ProbeOutcome {
        target: labels.target.clone(),
        scenario: labels.scenario.clone(),
        model: labels.model.clone(),
        replica: labels.replica.clone(),
        started_at: SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_000_000),
        observations: o,
        result,
    }
}

/// What a response head with `headers` says of its rate limits.
fn rate_limits(headers: &[(&str, &str)]) -> Option<crate::measure::RateLimits> {
    let headers = headers.iter().map(|(n, v)| (*n, v.as_bytes()));
    crate::measure::RateLimits::from_headers(headers, SystemTime::now())
}

/// A success with every optional number: time to first output token, TPOT, tokens/s, the
/// server's prefill, the TTFT overhead and split, the prefill speeds.
fn success() -> Measurement {
    let ms = Duration::from_millis;
    Measurement {
        ttft: ms(120),
        time_to_first_output_token: Some(ms(130)),
        tpot: Some(ms(20)),
        output_tokens_per_second: Some(50.0),
        e2e: ms(200),
        output_tokens: 4,
        token_count_source: TokenCountSource::Usage,
        token_events: 4,
        inter_token_latencies: vec![ms(19), ms(20), ms(21)],
        server_prefill: Some(ms(60)),
        ttft_overhead: Some(ms(50)),
        ttft_split: TtftSplit {
            source: Some(ServerTimingSource::VllmRequestMetrics),
            engine_queue: Some(ms(10)),
            model_load: None,
            engine_prefill: Some(ms(60)),
            remainder: Some(ms(50)),
            remainder_component: Some(TtftComponent::OutsideEngine),
            excess: Duration::ZERO,
        },
        prefill_tokens_per_second: Some(4000.0),
        server_prefill_tokens_per_second: Some(5000.0),
    }
}

fn baseline(labels: &ProbeLabels) -> Baseline {
    let q = |s: f64| Quantiles {
        p50: s,
        p95: 2.0 * s,
        p99: 3.0 * s,
    };
    Baseline {
        schema: crate::config::baseline_file::SCHEMA.into(),
        target: labels.target.to_string(),
        scenario: labels.scenario.to_string(),
        model: Some(labels.model.to_string()),
        measured_at: "2026-11-30T12:00:00.000Z".into(),
        saved_at: "2026-11-30T12:05:00.000Z".into(),
        source: Origin {
            kind: "bench".into(),
            file: "run.json".into(),
            level: "concurrency 1".into(),
            llm_probe_version: "0.1.0".into(),
        },
        endpoint: Endpoint::default(),
        samples: 120,
        ttft_seconds: q(0.2),
        tpot_seconds: Some(q(0.02)),
        output_tokens_per_second: Some(q(50.0)),
        e2e_seconds: Some(q(1.0)),
        prefill_tokens_per_second: Some(q(4000.0)),
    }
}

/// Gives `labels` and its target a series in every family the way the daemon does: registered,
/// scheduled with prices, engine metrics on, a success and a wrong answer observed (the
/// baselines are set for all pairs at once, [`Metrics::set_baselines`]).
fn populate(metrics: &Metrics, labels: &ProbeLabels) {
    let slo = crate::config::Slo {
        prefill_tokens_per_second_min: Some(500.0),
        ..crate::config::Slo::default()
    };
    metrics.register_probe(labels, &slo);
    metrics.set_schedule(labels, Duration::from_secs(15), true);
    metrics.register_server_metrics(&labels.target, &labels.model);
    metrics.register_discovery(&labels.target);
    metrics.replicas_discovered(&labels.target, 3, 2);
    metrics.replica_discovery_failed(&labels.target, "read");
    metrics.observe(&outcome(labels, Ok(success())));
    metrics.observe(&outcome(
        labels,
        Err(Failure::new(FailureReason::WrongAnswer, "no")),
    ));
}

/// For each family in `families` (full names), the `target` label values of its series in the
/// text exposition.
fn targets_by_family<'a>(
    metrics: &Metrics,
    families: &[&'a str],
) -> BTreeMap<&'a str, BTreeSet<String>> {
    let mut seen: BTreeMap<&str, BTreeSet<String>> =
        families.iter().map(|f| (*f, BTreeSet::new())).collect();
    for line in metrics.render(None).1.lines() {
        let Some((name, rest)) = line.split_once('{') else {
            continue;
        };
        let family = families.iter().find(|f| {
            name.strip_prefix(**f)
                .is_some_and(|s| ["", "_total", "_bucket", "_sum", "_count"].contains(&s))
        });
        let target = rest
            .strip_prefix("target=\"")
            .and_then(|t| t.split_once('"'))
            .map(|(t, _)| t.to_string());
        if let (Some(family), Some(target)) = (family, target) {
            seen.get_mut(family).unwrap().insert(target);
        }
    }
    seen
}

/// Every family with per-pair or per-target labels (every `SeriesFamily`) has a series of a
/// pair once the pair is registered and probed, and none once the daemon has removed the pair
/// (`forget`), its target (`forget_target`) and its baseline (`set_baselines` without it),
/// while the other pairs keep theirs. A family whose group records it and does not remove it
/// fails here by name; so does a new family the fixture does not reach (extend `populate`).
#[test]
fn a_removed_pair_leaves_no_series_in_any_family() {
    let metrics = Metrics::new(&[]);
    let gone = pair("gone", "s");
    let kept = [pair("alpha", "s"), pair("omega", "s")];
    for labels in kept.iter().chain([&gone]) {
        populate(&metrics, labels);
    }
    let baselines: Vec<Baseline> = kept.iter().chain([&gone]).map(baseline).collect();
    let pinned: Vec<(ProbeLabels, &Baseline)> = kept
        .iter()
        .chain([&gone])
        .cloned()
        .zip(&baselines)
        .collect();
    metrics.set_baselines(&pinned);
    let families = metrics.render.catalog.fast_family_names();
    assert!(families.contains(&"llm_probe_probes"), "{families:?}");
    let everyone: BTreeSet<String> = ["alpha", "gone", "omega"].map(String::from).into();
    for (family, targets) in targets_by_family(&metrics, &families) {
        assert_eq!(
            targets, everyone,
            "{family} has no series of some pair: make populate() give it one"
        );
    }

    metrics.forget(&gone);
    metrics.forget_target(&gone.target, &gone.model);
    metrics.forget_discovery(&gone.target);
    metrics.set_baselines(&pinned[..kept.len()]);

    let left: Vec<String> = metrics
        .render(None)
        .1
        .lines()
        .filter(|l| l.contains("target=\"gone\""))
        .map(String::from)
        .collect();
    assert!(
        left.is_empty(),
        "series of the removed pair are left:\n{}",
        left.join("\n")
    );
    let others: BTreeSet<String> = ["alpha", "omega"].map(String::from).into();
    for (family, targets) in targets_by_family(&metrics, &families) {
        assert_eq!(targets, others, "{family}: the other pairs' series");
    }
}

/// A replica's pairs carry `replica="…"` after `scenario` in every per-pair family; a departed
/// replica's series all go, its neighbours' stay, and a pair without a replica has no `replica`
/// label at all (not `replica=""`).
#[test]
fn a_departed_replica_leaves_no_series_and_a_plain_pair_has_no_replica_label() {
    let metrics = Metrics::new(&[]);
    let replica = |r: &str| pair("pool", "s").with_replica(r);
    let (gone, stays, plain) = (
        replica("127.0.0.2:80"),
        replica("127.0.0.3:80"),
        pair("solo", "s"),
    );
    for labels in [&gone, &stays, &plain] {
        populate(&metrics, labels);
    }
    let text = metrics.render(None).1;
    assert!(
        !text.contains("replica=\"\""),
        "an empty replica label:\n{text}"
    );
    for line in text.lines().filter(|l| l.contains("target=\"solo\"")) {
        assert!(!line.contains("replica="), "{line}");
    }
    assert!(
        text.contains("llm_probe_probes_total{target=\"pool\",model=\"m\",scenario=\"s\",replica=\"127.0.0.2:80\"} 2"),
        "{text}"
    );
    // Each replica says what it runs (a rolling upgrade shows old and new side by side).
    for r in ["127.0.0.2:80", "127.0.0.3:80"] {
        assert!(
            text.contains(&format!("llm_probe_endpoint_info{{target=\"pool\",model=\"m\",replica=\"{r}\",response_model=\"served\",")),
            "{text}"
        );
    }
    let per_pair = |text: &str, r: &str| {
        text.lines()
            .filter(|l| l.contains(&format!("replica=\"{r}\"")))
            .count()
    };
    let before = per_pair(&text, "127.0.0.3:80");
    assert!(before > 20, "{before}");
    assert_eq!(per_pair(&text, "127.0.0.2:80"), before);

    metrics.forget(&gone);
    let text = metrics.render(None).1;
    assert_eq!(per_pair(&text, "127.0.0.2:80"), 0, "{text}");
    assert_eq!(per_pair(&text, "127.0.0.3:80"), before);
    // The reference encoder agrees (the fast one skips an empty label the same way).
    let reference =
        String::from_utf8(metrics.render_reference(super::Exposition::Text).unwrap()).unwrap();
    assert_eq!(reference, text);
}

/// Each replica is its own engine: its queue and KV cache are its own series, so two replicas'
/// reads never overwrite each other; a target's own engine (no `replicas:`) keeps no `replica`
/// label; a departed replica's load goes, and a change of engine takes every replica's.
#[test]
fn each_replica_s_engine_load_is_its_own_series() {
    let metrics = Metrics::new(&[]);
    let replica = |r: &str| pair("pool", "s").with_replica(r);
    let loaded = |labels: &ProbeLabels, waiting: f64| {
        let mut o = outcome(labels, Ok(success()));
        o.observations.server_load = Some(Ok(EngineLoad {
            engine: Engine::Vllm,
            requests_waiting: Some(waiting),
            requests_running: Some(1.0),
            kv_cache_usage_ratio: None,
        }));
        o
    };
    let (busy, idle, solo) = (
        replica("127.0.0.2:80"),
        replica("127.0.0.3:80"),
        pair("solo", "s"),
    );
    for labels in [&busy, &idle, &solo] {
        populate(&metrics, labels);
    }
    metrics.observe(&loaded(&busy, 9.0));
    metrics.observe(&loaded(&idle, 0.0));
    metrics.observe(&loaded(&solo, 4.0));
    let waiting = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with("llm_probe_server_requests_waiting{"))
            .map(String::from)
            .collect()
    };
    let text = metrics.render(None).1;
    assert_eq!(
        waiting(&text),
        [
            "llm_probe_server_requests_waiting{target=\"pool\",model=\"m\",replica=\"127.0.0.2:80\"} 9.0",
            "llm_probe_server_requests_waiting{target=\"pool\",model=\"m\",replica=\"127.0.0.3:80\"} 0.0",
            "llm_probe_server_requests_waiting{target=\"solo\",model=\"m\"} 4.0",
        ],
        "{text}"
    );
    // The failure counters stay per target: a sum over the replicas' reads.
    assert!(
        text.contains("llm_probe_server_metrics_scrape_failures_total{target=\"pool\",model=\"m\",reason=\"timeout\"} 0"),
        "{text}"
    );
    let reference =
        String::from_utf8(metrics.render_reference(super::Exposition::Text).unwrap()).unwrap();
    assert_eq!(reference, text);

    metrics.forget(&busy);
    let text = metrics.render(None).1;
    assert_eq!(waiting(&text).len(), 2, "{text}");
    assert!(!text.contains("127.0.0.2:80"), "{text}");
    // Another engine behind the pool: none of its replicas' old numbers stand.
    metrics.forget_server_load("pool", "m");
    let text = metrics.render(None).1;
    assert_eq!(
        waiting(&text),
        ["llm_probe_server_requests_waiting{target=\"solo\",model=\"m\"} 4.0"],
        "{text}"
    );
    assert!(
        text.contains("llm_probe_server_requests_running{target=\"solo\",model=\"m\"} 1.0"),
        "{text}"
    );
}

#[test]
fn every_series_of_a_pair_shares_the_registered_label_set() {
    let metrics = Metrics::new(&[]);
    let labels = pair("t", "s");
    populate(&metrics, &labels);
    // The probe counter, the 14 failure reasons, the interval, the cost, the histograms, the
    // token counters … each keyed by a clone of the one registered instance, not by a copy
    // made from a probe's outcome.
    let shared = labels.instances();
    assert!(
        shared > 30,
        "the registered labels are shared {shared} times"
    );
    // A probe's own copy is dropped once its series are found.
    metrics.observe(&outcome(&labels, Ok(success())));
    assert_eq!(labels.instances(), shared);
    // Removing the pair lets go of every clone.
    metrics.forget(&labels);
    assert_eq!(labels.instances(), 1);
}

#[test]
fn rate_limit_gauges_follow_the_last_response_that_described_them() {
    let metrics = Metrics::new(&[]);
    let labels = pair("hosted", "s");
    populate(&metrics, &labels);
    let text = || metrics.render(None).1;
    let has = |t: &str, line: &str| t.lines().any(|l| l == line);
    let t = text();
    assert!(
        has(
            &t,
            r#"llm_probe_rate_limit_limit{target="hosted",model="m",kind="requests"} 100.0"#
        ),
        "{t}"
    );
    assert!(has(
        &t,
        r#"llm_probe_rate_limit_remaining{target="hosted",model="m",kind="requests"} 42.0"#
    ));
    assert!(has(
        &t,
        r#"llm_probe_rate_limit_reset_seconds{target="hosted",model="m",kind="tokens"} 90.0"#
    ));
    assert!(!t.contains(r#"llm_probe_rate_limit_limit{target="hosted",model="m",kind="tokens"}"#));
    // A response without rate-limit headers changes nothing; one with other numbers replaces
    // them, and what it does not say is gone.
    let mut o = outcome(&labels, Ok(success()));
    o.observations.rate_limits = None;
    metrics.observe(&o);
    assert!(has(
        &text(),
        r#"llm_probe_rate_limit_remaining{target="hosted",model="m",kind="requests"} 42.0"#
    ));
    o.observations.rate_limits = rate_limits(&[("x-ratelimit-remaining-requests", "7")]);
    metrics.observe(&o);
    let t = text();
    assert!(
        has(
            &t,
            r#"llm_probe_rate_limit_remaining{target="hosted",model="m",kind="requests"} 7.0"#
        ),
        "{t}"
    );
    assert!(!t.contains("llm_probe_rate_limit_limit{"), "{t}");
    assert!(!t.contains("llm_probe_rate_limit_reset_seconds{"), "{t}");
    // A response whose rate-limit headers are all unreadable leaves no number standing.
    o.observations.rate_limits = rate_limits(&[("x-ratelimit-remaining-requests", "-1")]);
    metrics.observe(&o);
    assert!(!text().contains("llm_probe_rate_limit_"), "{}", text());
}

#[test]
fn a_scenario_that_lost_its_turns_or_long_prompt_loses_their_series() {
    let metrics = Metrics::new(&[]);
    let labels = pair("alpha", "s");
    populate(&metrics, &labels);
    let has = |name: &str| {
        let text = metrics.render(None).1;
        text.lines()
            .any(|l| l.starts_with(name) && l.contains("target=\"alpha\""))
    };
    let families = [
        "llm_probe_turn_time_to_first_token_seconds",
        "llm_probe_turn_prompt_tokens_total",
        "llm_probe_prefill_tokens_per_second",
        "llm_probe_server_prefill_tokens_per_second",
    ];
    for f in families {
        assert!(has(f), "{f} before");
    }
    // Still a multi-turn scenario with a generated prompt: nothing goes.
    metrics.forget_shape(&labels, true, true);
    assert!(families.iter().all(|f| has(f)));
    metrics.forget_shape(&labels, true, false);
    assert!(has(families[0]) && !has(families[2]) && !has(families[3]));
    metrics.forget_shape(&labels, false, false);
    assert!(!has(families[0]) && !has(families[1]));
    // The pair's other series stay.
    assert!(has("llm_probe_time_to_first_token_seconds"));
}

/// A replica probed with two scenarios keeps its engine load and its `endpoint_info` when one
/// of its pairs goes (a reload took that scenario out): they are the replica's, not the pair's,
/// and go with its last pair. Its other pair's next probe may be an interval away (up to a
/// day), and the gauges must not be absent meanwhile.
#[test]
fn a_replica_still_probed_with_another_scenario_keeps_its_engine_load() {
    let metrics = Metrics::new(&[]);
    let (s1, s2) = (
        pair("pool", "s1").with_replica("127.0.0.2:80"),
        pair("pool", "s2").with_replica("127.0.0.2:80"),
    );
    for labels in [&s1, &s2] {
        populate(&metrics, labels);
    }
    let replica_s = |text: &str, family: &str| {
        text.lines()
            .filter(|l| l.starts_with(&format!("{family}{{")))
            .filter(|l| l.contains("replica=\"127.0.0.2:80\""))
            .count()
    };
    let families = [
        "llm_probe_server_requests_waiting",
        "llm_probe_server_requests_running",
        "llm_probe_server_kv_cache_usage_ratio",
        "llm_probe_endpoint_info",
    ];
    let text = metrics.render(None).1;
    for family in families {
        assert_eq!(replica_s(&text, family), 1, "{family}:\n{text}");
    }

    metrics.forget(&s2);
    let text = metrics.render(None).1;
    assert!(!text.contains("scenario=\"s2\""), "{text}");
    for family in families {
        assert_eq!(
            replica_s(&text, family),
            1,
            "{family} went with s2:\n{text}"
        );
    }

    // The replica's last pair takes them.
    metrics.forget(&s1);
    let text = metrics.render(None).1;
    assert!(!text.contains("127.0.0.2:80"), "{text}");
}

/// The daemon forgets the engine metrics of a target without `server_metrics_url` each time
/// one of its pairs starts (a reload that adds a scenario or changes a setting, a replica that
/// joins). Its quota left comes from its response heads, not from an engine: it stays (an
/// exhausted quota held back by a 429's `Retry-After` must not vanish from the gauges and end
/// its alert).
#[test]
fn forgetting_a_target_s_engine_metrics_keeps_its_quota_left() {
    let metrics = Metrics::new(&[]);
    let hosted = pair("hosted", "s");
    populate(&metrics, &hosted);
    let quota = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with("llm_probe_rate_limit_"))
            .filter(|l| l.contains("target=\"hosted\""))
            .map(String::from)
            .collect()
    };
    let before = quota(&metrics.render(None).1);
    assert!(before.len() >= 3, "{before:#?}");

    metrics.forget_server_metrics("hosted", "m");
    let text = metrics.render(None).1;
    assert_eq!(quota(&text), before, "{text}");
    for family in [
        "llm_probe_server_requests_waiting{",
        "llm_probe_server_metrics_scrape_failures_total{",
    ] {
        assert!(
            !text.lines().any(|l| l.starts_with(family)),
            "{family}: {text}"
        );
    }
    // The target's removal takes the quota too.
    metrics.forget_target("hosted", "m");
    assert_eq!(quota(&metrics.render(None).1), Vec::<String>::new());
}
