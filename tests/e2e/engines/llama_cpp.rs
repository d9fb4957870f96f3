//! The daemon against a real inference server: llama.cpp's `llama-server` with
//! SmolLM2-135M-Instruct from `scripts/real-llm.sh` (started here if it is not running; the
//! first build takes about ten minutes and is cached). Three probe rounds of two scenarios;
//! every probe succeeds, N from usage equals the server's own `timings.predicted_n`, and the
//! client's TTFT is at least the server's own prompt time `timings.prompt_ms`.

use crate::common;

use std::time::Duration;

use llm_probe::measure::TokenCountSource;

/// The tests of this file share one server: one at a time, so that the load of one does not
/// move the other's numbers (the bench sweep compares levels).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_rounds_of_two_scenarios_on_llama_cpp() {
    let _serial = SERIAL.lock().await;
    let base_url = tokio::task::spawn_blocking(common::real_server)
        .await
        .unwrap();
    let scenarios = "  - name: chat_short\n    messages: [{role: user, content: \"Explain time to first token in one sentence.\"}]\n    max_tokens: 32\n    temperature: 0\n  - name: code_completion\n    messages: [{role: system, content: \"You complete Python code.\"}, {role: user, content: \"def fibonacci(n):\"}]\n    max_tokens: 48\n    temperature: 0\n";
    // A 30 s deadline and interval: the server (2 CPU threads) may be shared with other work on
    // the machine (bench_sweep below runs beside this test), and 48 tokens have taken more than
    // 20 s under parallel builds. Each wait below covers one interval plus a whole probe.
    let yaml = format!(
        "defaults:\n  interval: 30s\n  timeout: 30s\nscenarios:\n{scenarios}targets:\n  - name: llama\n    protocol: openai-chat\n    base_url: {base_url}\n    model: smollm2-135m-instruct\n"
    );
    let d = common::daemon(common::parse(&yaml)).await;
    let mut rx = d.subscribe();
    // Until both scenarios have finished three rounds.
    let mut outs: Vec<std::sync::Arc<llm_probe::measure::ProbeOutcome>> = Vec::new();
    while ["chat_short", "code_completion"]
        .iter()
        .any(|s| outs.iter().filter(|o| &*o.scenario == *s).count() < 3)
    {
        outs.extend(common::outcomes(&mut rx, 1, Duration::from_secs(75)).await);
    }
    let (status, _, scraped) = common::get(d.addr, "/metrics", None).await;
    assert_eq!(status, 200);
    assert!(scraped.contains("llm_probe_probes_total{target=\"llama\""));
    let metrics = d.metrics.clone();
    d.stop().await;
    // Probes that finished after the last receive are in the metrics too: take them as well.
    while let Ok(o) = rx.try_recv() {
        outs.push(o);
    }
    let (_, text) = metrics.render(None);

    for o in &outs {
        let m = o
            .result
            .as_ref()
            .unwrap_or_else(|f| panic!("{}/{}: {f}", o.target, o.scenario));
        let obs = &o.observations;
        assert_eq!(
            m.token_count_source,
            TokenCountSource::Usage,
            "llama.cpp reports usage"
        );
        let predicted = obs
            .server_timings
            .predicted_tokens
            .expect("llama.cpp sends timings.predicted_n");
        assert_eq!(
            m.output_tokens, predicted,
            "usage.completion_tokens = timings.predicted_n"
        );
        let prompt_s = obs
            .server_timings
            .prompt_seconds
            .expect("llama.cpp sends timings.prompt_ms");
        assert!(
            m.ttft.as_secs_f64() >= prompt_s,
            "client TTFT {:?} < server prompt time {prompt_s} s",
            m.ttft
        );
        // The split of TTFT: the server's prefill plus a non-negative overhead.
        let prefill = m
            .server_prefill
            .expect("server prefill from timings.prompt_ms");
        let overhead = m.ttft_overhead.expect("TTFT overhead");
        assert!((prefill.as_secs_f64() - prompt_s).abs() < 1e-6);
        assert_eq!(prefill + overhead, m.ttft, "prefill + overhead = TTFT");
        // A fresh connection per probe (the default); opening it happens before the server sees
        // the request, so it is inside the overhead.
        let setup = obs.timeline.connection_setup().expect("a new connection");
        assert!(setup <= overhead, "setup {setup:?} > overhead {overhead:?}");
        assert!(m.e2e >= m.ttft);
        assert!(m.output_tokens >= 1 && m.token_events >= 1);
        assert_eq!(obs.identity.server_header.as_deref(), Some("llama.cpp"));
        assert!(obs.usage.prompt_tokens.is_some_and(|n| n > 10));
    }
    for scenario in ["chat_short", "code_completion"] {
        let n = outs.iter().filter(|o| &*o.scenario == scenario).count();
        assert!(n >= 3, "{scenario}: {n} rounds");
        let l = [("scenario", scenario)];
        let count =
            common::sample(&text, "llm_probe_time_to_first_token_seconds_count", &l).unwrap();
        assert_eq!(
            count, n as f64,
            "{scenario}: every observed probe is in the histogram"
        );
        let overhead = common::sample(&text, "llm_probe_ttft_overhead_seconds_count", &l).unwrap();
        assert_eq!(
            overhead, n as f64,
            "{scenario}: the overhead histogram has every probe"
        );
        let setups = common::sample(&text, "llm_probe_connection_setup_seconds_count", &l).unwrap();
        assert_eq!(setups, n as f64, "{scenario}: one connection per probe");
    }
}

/// `llm-probe bench` against the real server: a sweep of 1, 2, 4, 8
/// virtual users with 8 requests per level on its 4 slots. Every request succeeds, the output
/// tokens (from usage) equal the server's own `timings.predicted_n`, TTFT's P95 at 8 users is
/// above its P95 at 1 (half of them queue for a slot), and per-request tokens/s falls as the
/// decode batch grows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_sweep_on_llama_cpp() {
    use llm_probe::bench::level::Load;
    use llm_probe::bench::plan::{Plan, Warmup};

    let _serial = SERIAL.lock().await;
    let base_url = tokio::task::spawn_blocking(common::real_server)
        .await
        .unwrap();
    let yaml = format!(
        "defaults:\n  timeout: 60s\nscenarios:\n  - name: chat_short\n    messages: [{{role: user, content: \"Explain time to first token in one sentence.\"}}]\n    max_tokens: 32\n    temperature: 0\ntargets:\n  - name: llama\n    protocol: openai-chat\n    base_url: {base_url}\n    model: smollm2-135m-instruct\n"
    );
    let cfg = common::parse(&yaml);
    let (t, s) = llm_probe::bench::select(&cfg, None, None).unwrap();
    let plan = Plan {
        levels: [1, 2, 4, 8].map(Load::Concurrency).to_vec(),
        duration: None,
        requests: Some(8),
        warmup: Warmup::Requests(1),
        pause: Duration::from_millis(500),
        seed: 0,
        max_concurrency: None,
        max_requests: 100,
        stop_on_slo_breach: false,
        max_failure_ratio: 0.0,
    };
    let r = llm_probe::bench::sweep(
        &yaml,
        t,
        s,
        llm_probe::config::PrefixCache::Cold,
        plan,
        tokio_util::sync::CancellationToken::new(),
        llm_probe::bench::progress::Progress::new(true),
    )
    .await
    .unwrap();
    eprint!("{}", llm_probe::bench::table::to_text(&r));
    assert_eq!(r.levels.len(), 4);
    for (l, _) in &r.levels {
        assert_eq!(
            l.requests.succeeded,
            8,
            "{}: {:?}",
            l.load.label(),
            l.requests
        );
    }
    for rec in &r.records {
        let s = rec.result.as_ref().unwrap_or_else(|f| panic!("{f:?}"));
        assert!(s.output_tokens >= 1);
        assert_eq!(
            Some(s.output_tokens),
            s.server_output_tokens,
            "usage = timings.predicted_n"
        );
    }
    let at = |i: usize| &r.levels[i].0;
    assert!(
        at(3).ttft.p95.unwrap() > at(0).ttft.p95.unwrap(),
        "P95 TTFT at 8 users ({:?}) is not above P95 at 1 ({:?})",
        at(3).ttft.p95,
        at(0).ttft.p95
    );
    let tps = |i: usize| at(i).output_tokens_per_second.p50.unwrap();
    assert!(
        tps(3) < tps(0) && tps(2) < tps(0),
        "per-request tokens/s P50 does not fall with concurrency: {:?}",
        (0..4).map(tps).collect::<Vec<_>>()
    );
    assert_eq!(r.identity.server_header.as_deref(), Some("llama.cpp"));
}

/// Engine metrics beside the probe on the real llama.cpp (`--metrics`): the record carries the
/// server's own `requests_deferred` / `requests_processing` (counts ≥ 0) read by the
/// auto-detected llama.cpp adapter; this build publishes no KV-cache ratio, so it is absent
/// (`None`), not 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_records_llama_cpps_own_load() {
    let _serial = SERIAL.lock().await;
    let base_url = tokio::task::spawn_blocking(common::real_server)
        .await
        .unwrap();
    let root = base_url.trim_end_matches("/v1");
    let yaml = format!(
        "defaults:\n  interval: 30s\n  timeout: 30s\nscenarios:\n  - name: hi\n    messages: [{{role: user, content: \"Say hi.\"}}]\n    max_tokens: 8\n    temperature: 0\ntargets:\n  - name: llama\n    protocol: openai-chat\n    base_url: {base_url}\n    model: smollm2-135m-instruct\n    server_metrics_url: {root}/metrics\n"
    );
    let cfg = common::parse(&yaml);
    let t = cfg.targets[0].clone();
    let o = llm_probe::probe::Prober::new(t.clone())
        .unwrap()
        .probe(&t.scenarios[0])
        .await;
    assert!(o.is_success(), "{:?}", o.result);
    let load = o
        .observations
        .server_load
        .clone()
        .expect("server_metrics_url is set")
        .unwrap_or_else(|f| panic!("{f:?}"));
    assert_eq!(load.engine, llm_probe::engine::Engine::LlamaCpp);
    assert!(load.requests_waiting.is_some_and(|v| v >= 0.0), "{load:?}");
    assert!(load.requests_running.is_some_and(|v| v >= 0.0), "{load:?}");
    assert!(
        load.kv_cache_usage_ratio
            .is_none_or(|r| (0.0..=1.0).contains(&r)),
        "{load:?}"
    );
    let json = llm_probe::report::to_json(&o);
    assert_eq!(json["server_load"]["engine"], "llama-cpp");
}
