//! The TTFT split end to end without a real server: vLLM's per-request metrics as
//! real vLLM 0.32 sent them (captures in tests/fixtures/captured/vllm-*.txt, from
//! `scripts/real-vllm.sh`), the simulator's load model reporting its queue wait and prefill the
//! vLLM way against its own ground truth at 1, 4 and 16 concurrent streams, and the
//! `llm_probe_ttft_component_seconds` family.

use crate::common;

use std::time::{Duration, Instant, SystemTime};

use llm_probe::config::Protocol;
use llm_probe::measure::{
    Observations, ProbeOutcome, ServerTimingSource, TokenCountSource, TtftComponent,
};
use llm_probe::probe::{Limits, Prober, StreamReader};
use llm_probe::simulate::{Load, Script};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

/// Feeds a captured stream in one read `ttft` after the request was sent and concludes it.
fn replay(protocol: Protocol, file: &str, ttft: Duration) -> ProbeOutcome {
    let bytes = std::fs::read(format!("{FIXTURES}/{file}")).unwrap();
    let t0 = Instant::now();
    let mut obs = Observations::new(t0);
    let mut r = StreamReader::new(protocol, &Limits::default());
    assert!(
        r.feed(&bytes, t0 + ttft, &mut obs).unwrap(),
        "{file}: no end"
    );
    ProbeOutcome::conclude(
        "t".into(),
        "s".into(),
        "m".into(),
        SystemTime::now(),
        obs,
        None,
    )
}

#[test]
fn vllm_per_request_metrics_split_every_openai_protocol() {
    // (protocol, capture, queue_time_ms, time_to_first_token_ms, completion tokens): the
    // numbers are the ones in the capture's `metrics` object.
    let cases = [
        (
            Protocol::OpenAiChat,
            "captured/vllm-chat.txt",
            0.037604000681312755,
            1919.942735999939,
            6,
        ),
        (
            Protocol::OpenAiCompletions,
            "captured/vllm-completions.txt",
            0.038226999095059,
            366.27670699999726,
            4,
        ),
        (
            Protocol::OpenAiResponses,
            "captured/vllm-responses.txt",
            0.1347960005659843,
            344.11652500057244,
            4,
        ),
    ];
    let ttft = Duration::from_millis(2500);
    for (protocol, file, queue_ms, first_ms, n) in cases {
        let o = replay(protocol, file, ttft);
        let m = o.result.as_ref().unwrap_or_else(|f| panic!("{file}: {f}"));
        assert_eq!(m.output_tokens, n, "{file}");
        assert_eq!(m.token_count_source, TokenCountSource::Usage, "{file}");
        let st = &o.observations.server_timings;
        assert_eq!(st.queue_seconds, Some(queue_ms / 1000.0), "{file}");
        assert_eq!(st.prompt_seconds, Some(first_ms / 1000.0), "{file}");
        let s = &m.ttft_split;
        assert_eq!(
            s.source,
            Some(ServerTimingSource::VllmRequestMetrics),
            "{file}"
        );
        assert_eq!(s.remainder_component, Some(TtftComponent::OutsideEngine));
        let parts = s.components();
        let names: Vec<_> = parts.iter().map(|(c, _)| c.as_str()).collect();
        assert_eq!(
            names,
            ["outside_engine", "engine_queue", "engine_prefill"],
            "{file}"
        );
        let sum: Duration = parts.iter().map(|(_, d)| *d).sum();
        let off = sum.abs_diff(m.ttft);
        assert!(
            off < Duration::from_micros(2),
            "{file}: sum {sum:?} vs TTFT {:?}",
            m.ttft
        );
        // The server's prefill is also the existing server-prefill number.
        assert_eq!(m.server_prefill, s.engine_prefill, "{file}");
        let json = llm_probe::report::to_json(&o);
        assert_eq!(json["ttft_split"]["source"], "vllm_request_metrics");
        assert!(json["ttft_split"]["engine_queue_seconds"].as_f64().unwrap() < 0.001);
    }
}

#[test]
fn a_stream_without_server_timing_is_not_split_and_says_so() {
    let o = replay(
        Protocol::OpenAiChat,
        "captured/llm-mock-api.txt",
        Duration::from_millis(50),
    );
    let m = o.result.as_ref().unwrap();
    assert!(m.ttft_split.components().is_empty());
    let json = llm_probe::report::to_json(&o);
    assert_eq!(json["ttft_split"]["source"], serde_json::Value::Null);
    assert!(json["ttft_split"]["note"]
        .as_str()
        .unwrap()
        .contains("reported no queue"));
    assert!(llm_probe::report::to_text(&o).contains("not split"));
}

/// P99 (nearest rank) of absolute differences, in seconds.
fn p99(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 * 0.99).ceil() as usize).max(1) - 1]
}

/// The simulator with 2 slots, jittered TTFT and per-request metrics: at 1, 4 and 16
/// concurrent streams the split's queue equals the load model's queue wait, its prefill the
/// time from the slot to the first token event the simulator sent, and its outside part the
/// request's transit plus the first token's transit measured from both ends (each within 1 ms
/// at P99), and the parts sum to the probe's TTFT; at 16 streams on 2 slots the queue is the
/// largest part (a stream holds its slot about 90 ms; the outside part is the loopback and
/// the client, well under that even on a busy machine), at 1 it is zero.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulator_split_matches_its_ground_truth_at_1_4_and_16_streams() {
    let sim = common::simulator(Script {
        ttft: Duration::from_millis(60),
        itl: Duration::from_millis(10),
        tokens: 4,
        load: Load {
            slots: 2,
            jitter: 0.2,
            seed: 3,
            per_request_metrics: true,
            ..Load::default()
        },
        ..Script::default()
    })
    .await;
    // One scenario per probe, its prompt naming it: each received request is matched to its
    // probe by the prompt, not by how well the numbers agree.
    let scenarios: String = (0..60)
        .map(|i| format!("  - name: p{i}\n    messages: [{{role: user, content: \"probe {i}\"}}]\n    max_tokens: 16\n"))
        .collect();
    let cfg = common::parse(&common::yaml(
        &sim.base_url(),
        "30s",
        &scenarios,
        "    timeout: 20s\n",
    ));
    let target = cfg.targets[0].clone();
    let mut next = 0;
    for (streams, rounds) in [(1usize, 12usize), (4, 4), (16, 2)] {
        let mut outcomes = Vec::new();
        for _ in 0..rounds {
            let tasks: Vec<_> = (next..next + streams)
                .map(|i| {
                    let t = target.clone();
                    tokio::spawn(async move {
                        Prober::new(t.clone()).unwrap().probe(&t.scenarios[i]).await
                    })
                })
                .collect();
            next += streams;
            for task in tasks {
                outcomes.push(task.await.unwrap());
            }
        }
        let received = sim.received();
        let (mut queue_err, mut prefill_err, mut sum_err, mut outside_err) =
            (vec![], vec![], vec![], vec![]);
        let (mut queue_total, mut outside_total) = (Duration::ZERO, Duration::ZERO);
        let mut queued = 0usize;
        for o in &outcomes {
            let m = o.result.as_ref().unwrap_or_else(|f| panic!("{f}"));
            let prompt = format!("probe {}", &o.scenario[1..]);
            let request = received
                .iter()
                // The probe puts a cache-busting nonce before the prompt.
                .find(|r| {
                    r.body["messages"][0]["content"]
                        .as_str()
                        .is_some_and(|c| c.ends_with(&format!("] {prompt}")))
                })
                .unwrap_or_else(|| panic!("no request with {prompt:?}: {}", received[0].body));
            let truth = request.truth.get().copied().expect("the request streamed");
            let s = &m.ttft_split;
            let (q, p) = (s.engine_queue.unwrap(), s.engine_prefill.unwrap());
            // What the simulator did: the queue wait the load model recorded, and from the
            // slot to the instant it handed the first token event to the connection (its
            // timer may fire later than the scripted TTFT on a busy machine).
            let first_sent = request.events_sent.lock().unwrap()[0];
            let did = first_sent.saturating_duration_since(request.arrived + truth.queue_wait);
            queue_err.push(truth.queue_wait.abs_diff(q).as_secs_f64());
            prefill_err.push(did.abs_diff(p).as_secs_f64());
            // The outside part, measured independently: request sent → arrived, plus first
            // token handed over → read by the probe.
            let tl = &o.observations.timeline;
            let outside = request.arrived.saturating_duration_since(tl.sent)
                + tl.first_token()
                    .unwrap()
                    .saturating_duration_since(first_sent);
            outside_err.push(outside.abs_diff(s.remainder.unwrap()).as_secs_f64());
            let sum: Duration = s.components().iter().map(|(_, d)| *d).sum();
            sum_err.push(sum.abs_diff(m.ttft).as_secs_f64());
            queue_total += q;
            outside_total += s.remainder.unwrap();
            queued += usize::from(q >= Duration::from_millis(1));
        }
        let ms = 1e-3;
        assert!(
            p99(queue_err.clone()) <= ms,
            "{streams} streams: queue errors {queue_err:?}"
        );
        assert!(
            p99(prefill_err.clone()) <= ms,
            "{streams} streams: prefill errors {prefill_err:?}"
        );
        assert!(
            p99(outside_err.clone()) <= ms,
            "{streams} streams: outside errors {outside_err:?}"
        );
        assert!(
            p99(sum_err.clone()) <= 1e-6,
            "{streams} streams: sums {sum_err:?}"
        );
        if streams == 1 {
            assert!(queue_total < Duration::from_millis(1), "{queue_total:?}");
        }
        if streams == 16 {
            // 16 streams on 2 slots: most of them waited for a slot, and the split says so (its
            // queue part matched the simulator's record above). The share of the queue in TTFT
            // beside the outside part depends on the machine's load, so it is not judged here.
            assert!(
                queued >= 8,
                "{queued} of 16 queued: queue {queue_total:?}, outside {outside_total:?}"
            );
        }
    }
}

/// `llm_probe_ttft_component_seconds`: one series per reported component, none for the
/// others, and the components' sums add up to the TTFT histogram's sum.
#[test]
fn the_component_family_sums_to_the_ttft_family() {
    let o = replay(
        Protocol::OpenAiChat,
        "captured/vllm-chat.txt",
        Duration::from_millis(2500),
    );
    let metrics = llm_probe::metrics::Metrics::new(&[]);
    metrics.observe(&o);
    let (_, text) = metrics.render(None);
    let l = |c: &'static str| [("target", "t"), ("scenario", "s"), ("component", c)];
    let mut sum = 0.0;
    for c in ["outside_engine", "engine_queue", "engine_prefill"] {
        let n = common::sample(&text, "llm_probe_ttft_component_seconds_count", &l(c));
        assert_eq!(n, Some(1.0), "{c}");
        sum += common::sample(&text, "llm_probe_ttft_component_seconds_sum", &l(c)).unwrap();
    }
    for c in ["unattributed", "model_load"] {
        assert_eq!(
            common::sample(&text, "llm_probe_ttft_component_seconds_count", &l(c)),
            None,
            "{c} was not reported"
        );
    }
    let ttft = common::sample(
        &text,
        "llm_probe_time_to_first_token_seconds_sum",
        &[("target", "t")],
    )
    .unwrap();
    assert!((sum - ttft).abs() < 1e-6, "components {sum} vs TTFT {ttft}");
}

/// The status page's probe page shows the waterfall of an on-demand probe of a server that
/// reports its queue and prefill (the simulator with per-request metrics), bars ending at TTFT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_page_shows_the_waterfall() {
    let sim = common::simulator(Script {
        ttft: Duration::from_millis(30),
        tokens: 3,
        load: Load {
            per_request_metrics: true,
            ..Load::default()
        },
        ..Script::default()
    })
    .await;
    let options = common::on_demand_probes();
    let d = llm_probe::daemon::Daemon::start_with(
        common::parse(&common::yaml(
            &sim.base_url(),
            "60s",
            &common::scenario("chat", 8),
            "",
        )),
        "127.0.0.1:0".parse().unwrap(),
        None,
        options,
    )
    .await
    .unwrap();
    let (status, ct, html) =
        common::get(d.addr, "/probe?target=sim&scenario=chat&format=html", None).await;
    assert_eq!(status, 200, "{html}");
    assert!(ct.starts_with("text/html"), "{ct}");
    assert!(html.contains("TTFT split"), "{html}");
    for c in ["outside_engine", "engine_queue", "engine_prefill"] {
        assert!(
            html.contains(&format!("class=\"split {c}\"")),
            "{c}: {html}"
        );
    }
    assert!(html.contains("vllm_request_metrics"));
    d.stop().await;
}
