//! The fast `/metrics` encoder (`src/exporter/metrics/fast.rs`) against prometheus-client's own encoders
//! (`Metrics::render_reference`, one registry of every family): after random pairs (hostile
//! names included), random probe outcomes (successes with every histogram, failures of every
//! reason, anomalies, usage, costs, exemplars), schedules, baselines, engine load and removals,
//! the two bodies are identical byte for byte in all three formats and all histogram layouts.

use crate::common;

use std::time::{Duration, SystemTime};

use llm_probe::config::Slo;
use llm_probe::engine::{Engine, EngineLoad, ScrapeFailure, ScrapeFailureReason};
use llm_probe::measure::{Anomaly, Failure, FailureReason, ProbeOutcome};
use llm_probe::metrics::{
    Exposition, HistogramKinds, HistogramOptions, Metrics, NativeBucketFactor, ProbeLabels,
};
use proptest::prelude::*;

const FORMATS: [Exposition; 3] = [
    Exposition::Text,
    Exposition::OpenMetrics,
    Exposition::Protobuf,
];

/// One thing that happens to the metrics.
#[derive(Debug, Clone)]
enum Event {
    /// A probe of pair `pair` succeeded with TTFT `ttft_ms`, `tokens` tokens of `itl_ms` gaps.
    Success {
        pair: usize,
        ttft_ms: u32,
        itl_ms: u16,
        tokens: u8,
        prompt_tokens: Option<u32>,
        cost: Option<u16>,
        trace: Option<u8>,
    },
    /// A probe of `pair` failed with the `reason`-th failure reason.
    Failure { pair: usize, reason: usize },
    /// A probe of `pair` saw the `kind`-th anomaly.
    Anomaly { pair: usize, kind: usize },
    /// `pair` is registered (series at zero, SLO, schedule).
    Register { pair: usize, interval_s: u16 },
    /// `pair` leaves the configuration.
    Forget { pair: usize },
    /// A probe of `pair` read its engine's load first: `waiting` and `kv` (a KV-cache share in
    /// percent) when published, or the read failed with the `failed`-th reason.
    Engine {
        pair: usize,
        waiting: Option<u16>,
        kv: Option<u8>,
        failed: Option<usize>,
    },
}

fn event(pairs: usize) -> impl Strategy<Value = Event> {
    let p = 0..pairs;
    prop_oneof![
        4 => (p.clone(), 1u32..90_000, 0u16..3_000, 0u8..12, proptest::option::of(0u32..100_000),
              proptest::option::of(0u16..1_000), proptest::option::of(any::<u8>()))
            .prop_map(|(pair, ttft_ms, itl_ms, tokens, prompt_tokens, cost, trace)| Event::Success {
                pair, ttft_ms, itl_ms, tokens, prompt_tokens, cost, trace
            }),
        2 => (p.clone(), 0usize..64).prop_map(|(pair, reason)| Event::Failure { pair, reason }),
        1 => (p.clone(), 0usize..64).prop_map(|(pair, kind)| Event::Anomaly { pair, kind }),
        2 => (p.clone(), 1u16..3_600).prop_map(|(pair, interval_s)| Event::Register { pair, interval_s }),
        1 => p.clone().prop_map(|pair| Event::Forget { pair }),
        2 => (p, proptest::option::of(any::<u16>()), proptest::option::of(0u8..=100),
              proptest::option::weighted(0.25, 0usize..64))
            .prop_map(|(pair, waiting, kv, failed)| Event::Engine { pair, waiting, kv, failed }),
    ]
}

/// Label values a user could configure, quotes, backslashes, newlines and non-ASCII included.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z][a-z0-9-]{0,8}",
        Just("a\"b\\c\nd".to_string()),
        Just("modèle/ünïcode 🚀".to_string()),
        Just(String::new()),
    ]
}

fn outcome(
    labels: &ProbeLabels,
    result: Result<llm_probe::measure::Measurement, Failure>,
) -> ProbeOutcome {
    let mut o = common::synthetic::success(Duration::from_millis(100));
    o.target = labels.target.clone();
    o.model = labels.model.clone();
    o.scenario = labels.scenario.clone();
    o.replica = labels.replica.clone();
    o.started_at = SystemTime::UNIX_EPOCH + Duration::from_millis(1_764_000_000_123);
    o.result = result;
    o
}

fn apply(metrics: &Metrics, pairs: &[ProbeLabels], e: &Event) {
    match e.clone() {
        Event::Success {
            pair,
            ttft_ms,
            itl_ms,
            tokens,
            prompt_tokens,
            cost,
            trace,
        } => {
            let l = &pairs[pair];
            let ms = |v: u64| Duration::from_micros(v * 1000 + 7);
            let ttft = ms(u64::from(ttft_ms));
            let mut o = common::synthetic::success(ttft);
            let mut m = o.result.expect("synthetic success");
            let gap = ms(u64::from(itl_ms));
            m.output_tokens = u64::from(tokens);
            m.token_events = usize::from(tokens);
            m.inter_token_latencies = vec![gap; usize::from(tokens.saturating_sub(1))];
            m.tpot = (tokens > 1).then_some(gap);
            m.output_tokens_per_second =
                (tokens > 1 && itl_ms > 0).then(|| 1.0 / gap.as_secs_f64());
            m.e2e = ttft + gap * u32::from(tokens);
            o = outcome(l, Ok(m));
            o.observations.usage.prompt_tokens = prompt_tokens.map(u64::from);
            o.observations.cost = cost.map(|c| f64::from(c) / 7.0);
            if let Some(t) = trace {
                o.observations.traceparent =
                    Some(format!("00-{:032x}-00f067aa0ba902b7-01", u128::from(t) + 1));
                o.observations.request_id = Some(format!("req-\"{t}\""));
            }
            metrics.observe(&o);
        }
        Event::Failure { pair, reason } => {
            let r = FailureReason::ALL[reason % FailureReason::ALL.len()];
            metrics.observe(&outcome(&pairs[pair], Err(Failure::new(r, "x"))));
        }
        Event::Anomaly { pair, kind } => {
            let mut o = outcome(&pairs[pair], Err(Failure::new(FailureReason::ALL[0], "x")));
            o.observations.anomalies = vec![Anomaly::ALL[kind % Anomaly::ALL.len()]];
            metrics.observe(&o);
        }
        Event::Register { pair, interval_s } => {
            metrics.register_probe(&pairs[pair], &Slo::default());
            metrics.set_schedule(
                &pairs[pair],
                Duration::from_secs(u64::from(interval_s)),
                interval_s % 2 == 0,
            );
        }
        Event::Forget { pair } => metrics.forget(&pairs[pair]),
        Event::Engine {
            pair,
            waiting,
            kv,
            failed,
        } => {
            let l = &pairs[pair];
            metrics.register_server_metrics(&l.target, &l.model);
            let mut o = outcome(l, Err(Failure::new(FailureReason::ALL[0], "x")));
            o.observations.server_load = Some(match failed {
                Some(r) => Err(ScrapeFailure {
                    reason: ScrapeFailureReason::ALL[r % ScrapeFailureReason::ALL.len()],
                    detail: "x".into(),
                }),
                None => Ok(EngineLoad {
                    engine: Engine::Vllm,
                    requests_waiting: waiting.map(f64::from),
                    requests_running: waiting.map(|w| f64::from(w) / 3.0),
                    kv_cache_usage_ratio: kv.map(|k| f64::from(k) / 100.0),
                }),
            });
            metrics.observe(&o);
        }
    }
}

/// `body` decompressed (gzip).
fn gunzip(body: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(body)
        .read_to_end(&mut out)
        .expect("a valid gzip stream");
    out
}

fn assert_same(metrics: &Metrics) -> Result<(), TestCaseError> {
    for format in FORMATS {
        let fast = metrics.render_as(format).expect("fast render");
        // The gzip body, compressed whole or after every family, is the same body.
        for part in [1, usize::MAX] {
            let gz = metrics
                .render_gzip_in_parts_of(format, part)
                .expect("gzip render");
            prop_assert!(
                gunzip(&gz) == fast,
                "{format:?}: the gzip body (parts of {part} bytes) is not the plain body"
            );
        }
        let reference = metrics.render_reference(format).expect("reference render");
        if fast != reference {
            let byte = fast.iter().zip(&reference).position(|(a, b)| a != b);
            let (f, r) = (
                String::from_utf8_lossy(&fast),
                String::from_utf8_lossy(&reference),
            );
            let first = f
                .lines()
                .zip(r.lines())
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            let around = |s: &str| {
                s.lines()
                    .skip(first.saturating_sub(2))
                    .take(5)
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            return Err(TestCaseError::fail(format!(
                "{format:?}: the fast body ({} bytes) differs from the reference ({} bytes) at byte {byte:?}, line {first}:\nfast:\n{}\nreference:\n{}",
                fast.len(),
                reference.len(),
                around(&f),
                around(&r)
            )));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn fast_bodies_equal_prometheus_clients_own(
        names in proptest::collection::vec((name(), name(), name()), 1..5),
        kinds in prop_oneof![Just(HistogramKinds::Both), Just(HistogramKinds::Classic), Just(HistogramKinds::Native)],
        factor in prop_oneof![Just(1.1), Just(2.0), 1.001f64..100.0],
        slo_ms in 1u64..2_000,
        events in proptest::collection::vec(event(4), 0..40),
    ) {
        let pairs: Vec<ProbeLabels> = (0..4)
            .map(|i| {
                let (target, model, scenario) = names[i % names.len()].clone();
                // Every other pair is one replica of a target with `replicas:`.
                let replica = if i % 2 == 1 { format!("127.0.0.{i}:8000") } else { String::new() };
                ProbeLabels::new(target, model, format!("{scenario}{}", i / names.len()), replica)
            })
            .collect();
        let slo = Slo { ttft_p95: Duration::from_millis(slo_ms), output_tokens_per_second_min: 33.3, rate_limit_headroom_min: 0.1, prefill_tokens_per_second_min: None };
        let metrics = Metrics::with_histograms(
            &[slo],
            HistogramOptions { kinds, native_bucket_factor: NativeBucketFactor::new(factor).unwrap() },
        );
        assert_same(&metrics)?;
        for e in &events {
            apply(&metrics, &pairs, e);
        }
        assert_same(&metrics)?;
    }
}

/// A fixed case that exercises every family at once, so a failure here names the family.
#[test]
fn every_family_renders_the_same_as_the_reference() {
    let metrics = Metrics::new(&[Slo::default()]);
    let pairs = vec![
        ProbeLabels::new("t\"1", "m\\", "s\n", ""),
        ProbeLabels::new("t2", "m", "chat", "[::1]:8000"),
    ];
    for (i, _) in pairs.iter().enumerate() {
        apply(
            &metrics,
            &pairs,
            &Event::Register {
                pair: i,
                interval_s: 10,
            },
        );
        for reason in 0..FailureReason::ALL.len() {
            apply(&metrics, &pairs, &Event::Failure { pair: i, reason });
        }
        for kind in 0..Anomaly::ALL.len() {
            apply(&metrics, &pairs, &Event::Anomaly { pair: i, kind });
        }
        // The engine's load: the target's own, and a replica's (with its `replica` label).
        let engine = Event::Engine {
            pair: i,
            waiting: Some(3),
            kv: Some(41),
            failed: None,
        };
        apply(&metrics, &pairs, &engine);
        for t in 0..20u8 {
            apply(
                &metrics,
                &pairs,
                &Event::Success {
                    pair: i,
                    ttft_ms: 37 * u32::from(t) + 1,
                    itl_ms: 3 * u16::from(t),
                    tokens: t % 9,
                    prompt_tokens: Some(u32::from(t) * 11),
                    cost: Some(u16::from(t)),
                    trace: Some(t),
                },
            );
        }
    }
    assert_same(&metrics).unwrap();
    let text = String::from_utf8(metrics.render_as(Exposition::OpenMetrics).unwrap()).unwrap();
    assert!(
        text.contains(
            "llm_probe_probes_total{target=\"t\\\"1\",model=\"m\\\\\",scenario=\"s\\n\"}"
        ),
        "escaped labels"
    );
    assert!(text.contains(" # {trace_id=\""), "exemplars written");
    assert!(
        text.contains(
            "llm_probe_server_requests_waiting{target=\"t2\",model=\"m\",replica=\"[::1]:8000\"} 3.0"
        ),
        "a replica's engine load:\n{text}"
    );
    assert!(
        text.contains(
            "llm_probe_server_kv_cache_usage_ratio{target=\"t\\\"1\",model=\"m\\\\\"} 0.41"
        ),
        "a target's own engine load:\n{text}"
    );
    assert!(text.ends_with("# EOF\n"));
}
