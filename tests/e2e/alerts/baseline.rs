//! Pinned baselines end to end: `llm-probe bench` against the
//! in-process simulator at TTFT 200 ms, `llm-probe baseline save` from its JSON, then the daemon
//! probing with that `baseline_file:` while a real Prometheus scrapes it and evaluates the
//! shipped rules (the shortened-window variant of `common::rules`: `[15s]` windows, a 3-probe
//! guard, `for: 2s`). At 200 ms LlmProbeTTFTWorseThanBaseline stays silent over Prometheus' own
//! evaluations; a reload pointing the same target at a simulator with TTFT 300 ms makes it fire.
//! The baseline gauges are on `/metrics` and every baseline query of the shipped dashboards
//! returns data from Prometheus.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::rules::{scalar, vector, Prometheus, Scrape};
use llm_probe::bench::level::Load;
use llm_probe::daemon::Daemon;
use llm_probe::simulate::{Script, Simulator};

const ALERT: &str = "LlmProbeTTFTWorseThanBaseline";

async fn sim(ttft_ms: u64) -> Simulator {
    common::simulator(Script {
        ttft: Duration::from_millis(ttft_ms),
        itl: Duration::from_millis(5),
        tokens: 8,
        ..Script::default()
    })
    .await
}

/// The probes file: `common::bench::yaml`'s target `sim` / scenario `chat` at `base_url`, every
/// 500 ms (about 30 probes per 15 s window, so one late probe cannot move the P95 on its own),
/// pinned to `baseline`.
fn probes(base_url: &str, baseline: &Path) -> String {
    common::bench::yaml(base_url).replace(
        "defaults:\n  timeout: 20s\n",
        "defaults:\n  interval: 500ms\n  timeout: 450ms\n",
    ) + &format!("    baseline_file: {}\n", baseline.display())
}

/// Waits (at most 60 s) until the live P95 TTFT of `sim` is computed over at least 3 probes;
/// returns it.
async fn live_p95(p: &Prometheus) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let count = scalar(
            p,
            r#"target_model_scenario:llm_probe_time_to_first_token_seconds_count:increase10m{target="sim"}"#,
        )
        .await
        .unwrap_or(0.0);
        let p95 = scalar(
            p,
            r#"target_model_scenario:llm_probe_time_to_first_token_seconds:p95_10m{target="sim"}"#,
        )
        .await;
        if let (true, Some(v)) = (count >= 3.0, p95) {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "the live P95 never got 3 probes (last count {count})"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baseline_alert_fires_at_300ms_and_stays_silent_at_200ms() {
    let dir = tempfile::tempdir().unwrap();
    let fast = sim(200).await;

    // 1. bench at 200 ms → JSON → baseline save (the binary).
    let report = common::bench::bench(
        &fast.base_url(),
        common::bench::plan(vec![Load::Concurrency(1)], 30, 2),
    )
    .await;
    let run = dir.path().join("run.json");
    std::fs::write(&run, llm_probe::bench::json::to_json(&report).to_string()).unwrap();
    let baseline = dir.path().join("sim-chat.baseline.json");
    let out = Command::new(env!("CARGO_BIN_EXE_llm-probe"))
        .args(["baseline", "save", "--from"])
        .arg(&run)
        .arg("--out")
        .arg(&baseline)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("concurrency 1"), "{stdout}");
    let pinned = llm_probe::baseline::parse(&std::fs::read_to_string(&baseline).unwrap()).unwrap();
    assert_eq!(pinned.samples, 30);
    let p95 = pinned.ttft_seconds.p95;
    assert!(
        (0.2..0.25).contains(&p95),
        "pinned P95 TTFT {p95} for a 200 ms simulator"
    );

    // 2. The daemon probes the same 200 ms simulator with the baseline pinned.
    let path = dir.path().join("probes.yaml");
    std::fs::write(&path, probes(&fast.base_url(), &baseline)).unwrap();
    let cfg = llm_probe::config::load(&path).unwrap();
    let d = Daemon::start(cfg, "127.0.0.1:0".parse().unwrap(), Some(path.clone()))
        .await
        .unwrap();
    let (_, _, text) = common::get(d.addr, "/metrics", None).await;
    let pair = [("target", "sim"), ("model", "m"), ("scenario", "chat")];
    let with_q = |q| [pair[0], pair[1], pair[2], ("quantile", q)];
    assert_eq!(
        common::sample(
            &text,
            "llm_probe_baseline_time_to_first_token_seconds",
            &with_q("0.95")
        ),
        Some(p95)
    );
    assert!(common::sample(
        &text,
        "llm_probe_baseline_output_tokens_per_second",
        &with_q("0.5")
    )
    .is_some());
    assert_eq!(
        common::sample(&text, "llm_probe_baseline_samples", &pair),
        Some(30.0)
    );
    assert!(common::sample(&text, "llm_probe_baseline_timestamp_seconds", &pair).unwrap() > 1.7e9);

    let prom = common::rules::start(
        dir.path(),
        &[Scrape {
            addr: d.addr,
            labels: &[],
        }],
    )
    .await;
    let rules = prom.api("/api/v1/rules", &[]).await;
    assert!(rules.to_string().contains(ALERT), "{ALERT} not loaded");

    // At 200 ms: the live P95 is within the bucket above 200 ms; over five of Prometheus' own
    // evaluations (longer than `for: 2s`) the alert is never pending or firing.
    let live = live_p95(&prom).await;
    eprintln!("pinned P95 TTFT {p95:.4} s; live P95 at 200 ms {live:.4} s");
    assert!(live < 0.26, "live P95 {live} at 200 ms");
    common::rules::assert_silent_over_evaluations(
        &prom,
        ALERT,
        "sim",
        &format!("at 200 ms (pinned P95 {p95})"),
    )
    .await;

    // The dashboards' baseline queries return data from Prometheus (classic dashboards; the
    // native variants run the same baseline queries, which read no histogram).
    let mut checked = 0;
    for file in common::dashboards::dashboard_files()
        .into_iter()
        .filter(|p| !common::dashboards::is_native_variant(p))
    {
        let dash = common::dashboards::read_json(&file);
        for q in common::dashboards::dashboard_exprs(&file, &dash) {
            if !q.expr.contains("llm_probe_baseline_") {
                continue;
            }
            let expr = common::dashboards::substitute_grafana_vars(&q.expr);
            let got = vector(&prom, &expr).await;
            assert!(!got.is_empty(), "{}: {expr} returned no data", q.place);
            checked += 1;
        }
    }
    assert!(
        checked >= 4,
        "only {checked} baseline queries in the dashboards"
    );

    // 3. The same target now answers at 300 ms (a reload to another simulator): it fires.
    let slow = sim(300).await;
    std::fs::write(&path, probes(&slow.base_url(), &baseline)).unwrap();
    d.reload().await.unwrap();
    common::rules::wait_until_firing(&prom, ALERT, "sim").await;
    let fired = common::rules::alerts(&prom, ALERT).await;
    let value: f64 = fired[0]["value"].as_str().unwrap().parse().unwrap();
    eprintln!("{ALERT} fired at 300 ms with live P95 {value:.4} s");
    assert!(
        value > 1.25 * p95 && value - p95 > 0.05,
        "alert value {value} vs pinned {p95}"
    );
    d.stop().await;
}
