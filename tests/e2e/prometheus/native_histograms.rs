//! Native histograms end to end: a real Prometheus 2.42 started with
//! `--enable-feature=native-histograms` scrapes the daemon over the protobuf exposition and
//! answers `histogram_quantile` from native buckets; what it keeps of the classic series; the
//! shipped native recording rules evaluated on what it scraped; the native rule and dashboard
//! variants read no classic series; and the `--metrics.*` flags reject bad values clearly.

use crate::common;

use std::time::Duration;

use common::dashboards::{
    dashboard_exprs, dashboard_files, is_native_variant, names_in, read_json, read_yaml, root,
    rule_files, rules_of, substitute_grafana_vars, QueryKind,
};
use common::prometheus::Prometheus;
use llm_probe::simulate::Script;

/// What Prometheus 2.42 sends with the feature flag (as in `src/exporter/server/accept.rs`).
const PROMETHEUS_NATIVE_ACCEPT: &str = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// Polls `promql` until it has a finite value (at most `limit`).
async fn eventually(prom: &Prometheus, promql: &str, limit: Duration) -> f64 {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = common::rules::scalar(prom, promql).await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no value for {promql} in {limit:?}; last: {:?}",
            common::rules::vector(prom, promql).await
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The native recording rules with the 10-minute and 1-hour windows shortened to 20 s.
fn native_recording_rules(dir: &std::path::Path) -> Vec<String> {
    let path = root().join("dashboards/prometheus/llm-probe-recording-native.rules.yml");
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains("[10m]") && text.contains("[1h]"));
    let text = text.replace("[10m]", "[20s]").replace("[1h]", "[20s]");
    std::fs::write(dir.join("native.yml"), text).unwrap();
    vec!["native.yml".into()]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_with_native_histograms_scrapes_protobuf_and_answers_from_native_buckets() {
    common::require_tool("prometheus", "apt-get install prometheus");
    let sim = common::simulator(Script {
        ttft: Duration::from_millis(250),
        itl: Duration::from_millis(5),
        tokens: 10,
        ..Script::default()
    })
    .await;
    // And the same simulator as a pool of one replica (the dashboards' replica panels).
    let sd_dir = tempfile::tempdir().unwrap();
    let sd = sd_dir.path().join("pool.json");
    common::fleet::write_sd(&sd, &[sim.addr.to_string()]);
    let pool = format!(
        "  - name: pool\n    protocol: openai-chat\n    base_url: http://pool.test:8000/v1\n    model: sim-model\n    replicas: {{file_sd: {}}}\n",
        sd.display()
    );
    // And a generated long prompt (the Long prompts row reads the prefill speed histogram), and
    // a conversation of two turns (the Conversations row reads the per-turn histograms).
    let scenarios = common::scenario("chat", 16)
        + "  - name: long\n    prompt_tokens: 256\n    max_tokens: 16\n"
        + "  - name: conversation\n    messages: [{role: user, content: \"Say something.\"}]\n    turns: [\"And once more.\"]\n    max_tokens: 16\n";
    let cfg = common::parse(&common::yaml(&sim.base_url(), "500ms", &scenarios, &pool));
    let d = common::daemon(cfg).await;

    // What the scraper will be served.
    let resp = reqwest::Client::new()
        .get(format!("http://{}/metrics", d.addr))
        .header("accept", PROMETHEUS_NATIVE_ACCEPT)
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.headers()["content-type"],
        llm_probe::metrics::PROTOBUF_CONTENT_TYPE
    );

    let dir = tempfile::tempdir().unwrap();
    let rules = native_recording_rules(dir.path());
    let prom = Prometheus::start_with(
        dir.path(),
        &rules,
        d.addr,
        &["--enable-feature=native-histograms"],
    )
    .await;

    let p95 = eventually(
        &prom,
        "histogram_quantile(0.95, sum(rate(llm_probe_time_to_first_token_seconds[1m])))",
        Duration::from_secs(90),
    )
    .await;
    // Every TTFT is 250 ms plus a little: the native bucket (0.25, 0.2726] (schema 3) holds
    // them; a busy machine may push a few into the next ones, never below 0.25.
    assert!((0.25..=0.33).contains(&p95), "P95 TTFT {p95}");

    // The series is a native histogram sample (the API's `histogram`, not `value`).
    let raw = common::rules::vector(&prom, "llm_probe_time_to_first_token_seconds").await;
    assert!(
        raw.first().is_some_and(|s| s.get("histogram").is_some()),
        "a native histogram sample: {raw:?}"
    );
    // Prometheus 2.42 with the flag keeps nothing of the classic series when a histogram has
    // native buckets: no _bucket, _count or _sum series (2.45+ can keep them with
    // scrape_classic_histograms: true; see README). The native rules do not need them.
    for classic in ["_bucket", "_count", "_sum"] {
        let q = format!("count(llm_probe_time_to_first_token_seconds{classic})");
        assert!(
            common::rules::vector(&prom, &q).await.is_empty(),
            "{q} is not empty"
        );
    }
    // Series of other types are unaffected.
    assert!(
        common::rules::scalar(&prom, "sum(llm_probe_probes_total)")
            .await
            .unwrap()
            >= 1.0
    );

    // The shipped native recording rules, evaluated on what was scraped: TTFT ≈ 250 ms, all
    // within the 300 ms SLO; ~100 tokens/s (5 ms per token), none at or below the 30 floor.
    let ttft = "target_model_scenario:llm_probe_time_to_first_token_seconds";
    let tps = "target_model_scenario:llm_probe_output_tokens_per_second";
    let expected: [(String, std::ops::RangeInclusive<f64>); 4] = [
        (format!("{ttft}:p95_10m"), 0.25..=0.33),
        // The SLI (every probe within the SLO): its quantile 0.7 is under 300 ms.
        (
            "target_model_scenario:llm_probe_ttft_slo_sli:p70_10m".to_string(),
            0.2..=0.3,
        ),
        (format!("{ttft}_count:increase10m"), 1e-9..=f64::MAX),
        (format!("{tps}:p05_10m"), 50.0..=250.0),
    ];
    for (record, range) in expected {
        let v = eventually(&prom, &record, Duration::from_secs(30)).await;
        assert!(range.contains(&v), "{record} = {v}, expected {range:?}");
    }

    // The native dashboards' histogram queries return data. (Server prefill, the server's
    // prefill speed and TTFT overhead stay empty: the simulator's OpenAI protocol reports no
    // prefill time.)
    let histograms: Vec<String> = HISTOGRAMS
        .iter()
        .filter(|n| !n.contains("server_prefill") && !n.contains("ttft_overhead"))
        .map(|n| n.to_string())
        .collect();
    let mut checked = 0;
    for f in dashboard_files()
        .into_iter()
        .filter(|f| is_native_variant(f))
    {
        for e in dashboard_exprs(&f, &read_json(&f)) {
            let reads_histogram = names_in(&e.expr).iter().any(|n| histograms.contains(n));
            if e.kind == QueryKind::Variable || !reads_histogram || e.expr.contains("offset 1w") {
                continue;
            }
            let expr = substitute_grafana_vars(&e.expr);
            assert!(
                !common::rules::vector(&prom, &expr).await.is_empty(),
                "{}: no data from {expr}",
                e.place
            );
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} dashboard queries checked");
    d.stop().await;
}

/// The expressions of the native variants (rules and dashboards) read no classic histogram
/// series, so they give the same answers whether or not Prometheus keeps them.
#[test]
fn native_variants_read_no_classic_series() {
    let classic = classic_series_names();
    let mut checked = 0;
    for f in rule_files().into_iter().filter(|f| is_native_variant(f)) {
        for r in rules_of(&read_yaml(&f)) {
            let expr = r["expr"].as_str().unwrap();
            checked += 1;
            // Whole names: a recorded name such as `…:llm_probe_…_seconds_count:increase10m`
            // reads no classic series.
            let names = names_in(expr);
            for c in &classic {
                assert!(!names.contains(c), "{}: {c} in {expr}", f.display());
            }
        }
    }
    for f in dashboard_files()
        .into_iter()
        .filter(|f| is_native_variant(f))
    {
        for e in dashboard_exprs(&f, &read_json(&f)) {
            checked += 1;
            for c in &classic {
                assert!(
                    !e.expr.contains(c.as_str()),
                    "{}: {c} in {}",
                    e.place,
                    e.expr
                );
            }
        }
    }
    assert!(checked > 40, "only {checked} expressions checked");
}

/// Every histogram the daemon exports (the golden tests pin the names).
const HISTOGRAMS: [&str; 13] = [
    "llm_probe_time_to_first_token_seconds",
    "llm_probe_time_to_first_output_token_seconds",
    "llm_probe_time_per_output_token_seconds",
    "llm_probe_inter_token_latency_seconds",
    "llm_probe_output_tokens_per_second",
    "llm_probe_request_duration_seconds",
    "llm_probe_server_prefill_seconds",
    "llm_probe_prefill_tokens_per_second",
    "llm_probe_server_prefill_tokens_per_second",
    "llm_probe_ttft_overhead_seconds",
    "llm_probe_connection_setup_seconds",
    "llm_probe_turn_time_to_first_token_seconds",
    "llm_probe_turn_output_tokens_per_second",
];

/// `<histogram>_bucket`, `_count` and `_sum` of every histogram the daemon exports.
fn classic_series_names() -> Vec<String> {
    HISTOGRAMS
        .iter()
        .flat_map(|h| ["_bucket", "_count", "_sum"].map(|s| format!("{h}{s}")))
        .collect()
}

#[test]
fn bad_histogram_flags_are_rejected_with_the_flag_named() {
    let bin = env!("CARGO_BIN_EXE_llm-probe");
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["--metrics.histograms=sparse"],
            &["--metrics.histograms", "classic", "native", "both"],
        ),
        (
            &["--metrics.native-histogram-bucket-factor=1"],
            &["--metrics.native-histogram-bucket-factor", "above 1"],
        ),
        (
            &["--metrics.native-histogram-bucket-factor=wide"],
            &["--metrics.native-histogram-bucket-factor", "not a number"],
        ),
        (
            &["--metrics.native-histogram-bucket-factor=1e9"],
            &["at most 65536"],
        ),
    ];
    for (args, wants) in cases {
        let out = std::process::Command::new(bin)
            .arg("run")
            .arg("--config.file=/nonexistent/probes.yaml")
            .args(*args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        for w in *wants {
            assert!(err.contains(w), "{args:?}: {w:?} not in {err}");
        }
    }
}

/// Prometheus before 2.45 has no setting to keep the classic series of a histogram that has
/// native buckets (`scrape_classic_histograms` came in 2.45, `always_scrape_classic_histograms`
/// in 3.0): its config parser rejects the key. Checked on the installed version if it is one.
#[test]
fn prometheus_before_2_45_cannot_keep_classic_series() {
    let promtool = common::require_tool("promtool", "apt-get install prometheus");
    let version = std::process::Command::new(&promtool)
        .arg("--version")
        .output()
        .unwrap();
    let version = String::from_utf8_lossy(&version.stdout).to_string()
        + &String::from_utf8_lossy(&version.stderr);
    let minor = version
        .split_whitespace()
        .find_map(|w| w.strip_prefix("2."))
        .and_then(|w| w.split('.').next()?.parse::<u32>().ok());
    let Some(minor @ 40..=44) = minor else {
        eprintln!("skipped: not Prometheus 2.40-2.44: {version}");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("p.yml");
    std::fs::write(
        &cfg,
        "scrape_configs:\n  - job_name: x\n    scrape_classic_histograms: true\n    static_configs:\n      - targets: ['127.0.0.1:1']\n",
    )
    .unwrap();
    let out = std::process::Command::new(&promtool)
        .args(["check", "config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && text.contains("field scrape_classic_histograms not found"),
        "2.{minor}: {text}"
    );
}
