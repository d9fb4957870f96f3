//! `bench` against the simulator where only `--jitter` changes (the
//! median stays, the tail widens) → `compare` exits 1 naming the P95 rows, with the SLA
//! capacity drop in the summary; the same setup twice → exit 0; 10 requests per level with
//! `--fail-on inconclusive` → exit 3. The runs go through the library path of
//! `bench --output json`, `compare` through the binary.

use crate::common;

use std::time::Duration;

use llm_probe::bench::{self, level::Load as BenchLoad};
use llm_probe::simulate::{Load as SimLoad, Script};

/// TTFT 200 ms, 8 tokens 20 ms apart, each TTFT and gap scaled by a seeded lognormal factor
/// (median 1, log-sd `jitter`); no slots, so nobody queues and the level does not matter.
fn jittered(jitter: f64, seed: u64) -> Script {
    Script {
        ttft: Duration::from_millis(200),
        itl: Duration::from_millis(20),
        tokens: 8,
        model: "m".into(),
        load: SimLoad {
            jitter,
            seed,
            ..SimLoad::default()
        },
        ..Script::default()
    }
}

/// `bench` at concurrency 1 and 2, `requests` per level after 2 warmup requests (the SLO is
/// the default: TTFT P95 ≤ 300 ms, tokens/s ≥ 30), as `bench --output json` writes it.
async fn bench_json(base_url: String, requests: u64) -> String {
    let levels = vec![BenchLoad::Concurrency(1), BenchLoad::Concurrency(2)];
    let report = common::bench::bench(&base_url, common::bench::plan(levels, requests, 2)).await;
    format!("{:#}\n", bench::json::to_json(&report))
}

/// `llm-probe compare BEFORE AFTER ARGS…`: exit code and stdout.
fn compare(before: &str, after: &str, args: &[&str]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let (pb, pa) = (
        dir.path().join("before.json"),
        dir.path().join("after.json"),
    );
    std::fs::write(&pb, before).unwrap();
    std::fs::write(&pa, after).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_llm-probe"))
        .arg("compare")
        .args([&pb, &pa])
        .args(args)
        .output()
        .unwrap();
    // Only warnings (the simulator names the same model before and after) on stderr.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr
            .lines()
            .all(|l| l.starts_with("llm-probe compare: warning: ")),
        "{stderr}"
    );
    (out.status.code(), String::from_utf8(out.stdout).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wider_tail_with_the_same_median_is_a_p95_regression_and_a_capacity_drop() {
    // jitter 0.1 → 0.4: P95 TTFT ≈ 200·e^(1.645·0.1) = 236 ms → 200·e^(1.645·0.4) = 386 ms.
    let before = common::simulator(jittered(0.1, 1)).await;
    let wider = common::simulator(jittered(0.4, 2)).await;
    let again = common::simulator(jittered(0.1, 3)).await;
    let (b, w, a) = tokio::join!(
        bench_json(before.base_url(), 120),
        bench_json(wider.base_url(), 120),
        bench_json(again.base_url(), 120)
    );

    let (code, text) = compare(&b, &w, &[]);
    assert_eq!(code, Some(1), "{text}");
    // The summary: the first line and its indented continuations.
    let summary: String = text
        .lines()
        .enumerate()
        .take_while(|(i, l)| *i == 0 || l.starts_with("  "))
        .map(|(_, l)| l.trim())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(summary.starts_with("REGRESSION: TTFT P95 +"), "{text}");
    assert!(
        summary.contains("(C=1)") && summary.contains("(C=2)"),
        "{text}"
    );
    assert!(summary.contains("SLA capacity 2 → none"), "{text}");
    assert!(
        text.contains("AFTER breaks the SLA at concurrency 1: TTFT P95 > 300 ms"),
        "{text}"
    );
    let ttft_rows: Vec<&str> = text.lines().filter(|l| l.starts_with("TTFT ")).collect();
    assert_eq!(ttft_rows.len(), 2, "{text}");
    for row in &ttft_rows {
        assert!(row.ends_with("regression (P95)"), "{row}");
    }
    for line in text.lines() {
        if !line.starts_with("BEFORE ") && !line.starts_with("AFTER ") {
            assert!(
                line.chars().count() <= 120,
                "{} columns: {line}",
                line.chars().count()
            );
        }
    }
    // The first output token is the first token here: no row of its own.
    assert!(!text.contains("TTFOT"), "{text}");

    let (code, doc) = compare(&b, &w, &["--output", "json"]);
    assert_eq!(code, Some(1));
    let doc: serde_json::Value = serde_json::from_str(&doc).unwrap();
    assert_eq!(doc["sla_capacity"]["verdict"], "regression", "{doc:#}");
    for level in doc["levels"].as_array().unwrap() {
        let ttft = &level["ttft_seconds"];
        assert_eq!(ttft["tail"]["verdict"], "regression", "{ttft:#}");
        // The median did not move (its interval may still be wide: σ 0.4 after).
        assert_ne!(ttft["median_verdict"], "regression", "{ttft:#}");
        assert_eq!(ttft["verdict_by"], serde_json::json!(["P95"]), "{ttft:#}");
        let change = ttft["tail"]["relative"].as_f64().unwrap();
        // The scripted change is e^(1.645·0.3) − 1 = +64 %.
        assert!((0.35..1.0).contains(&change), "{ttft:#}");
    }

    let (code, text) = compare(&b, &a, &[]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("SLA capacity 2 → 2"), "{text}");
    assert!(!text.starts_with("REGRESSION"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_requests_per_level_are_inconclusive_and_fail_a_strict_gate() {
    // The same simulator setup and seed twice (10 requests, jitter 0.4): nothing can be
    // told at ±10 % from 10 requests.
    let one = common::simulator(jittered(0.4, 7)).await;
    let two = common::simulator(jittered(0.4, 7)).await;
    let (b, a) = tokio::join!(
        bench_json(one.base_url(), 10),
        bench_json(two.base_url(), 10)
    );
    let (code, text) = compare(&b, &a, &[]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.starts_with("INCONCLUSIVE: "), "{text}");
    assert!(
        text.contains("--fail-on inconclusive (exit status 3)"),
        "{text}"
    );
    let (code, text) = compare(&b, &a, &["--fail-on", "inconclusive"]);
    assert_eq!(code, Some(3), "{text}");
    assert!(text.ends_with("exit status 3\n"), "{text}");
}
