//! `compare` on real measurements: the daemon probes simulators, the outcomes are written as
//! `probe-once --output json` lines, and `llm-probe compare` judges them. Two models (A: TTFT
//! 200 ms, ITL 33 ms; B: TTFT 600 ms, ITL 17 ms): B's TTFT regression, its tokens/s improvement
//! and the crossover output length near the analytic 1 + 0.4 s ÷ (0.033 − 0.017) s = 26 tokens.
//! One model before and after (TTFT 200 → 240 ms): a ≈ +20 % regression; 200 → 200 ms: `~`.

mod common;

use std::time::Duration;

use llm_probe::simulate::{Fault, Script};

fn script(ttft_ms: u64, itl_ms: u64, model: &str) -> Script {
    Script {
        ttft: Duration::from_millis(ttft_ms),
        itl: Duration::from_millis(itl_ms),
        tokens: 10,
        tokens_per_event: 1,
        reasoning_tokens: 0,
        model: model.into(),
        fault: Fault::None,
        ..Script::default()
    }
}

/// `n` outcomes of probing `base_url` as target `name` / model `model`, as JSON lines.
async fn collect(base_url: String, name: &str, model: &str, n: usize) -> String {
    let yaml = common::yaml(&base_url, "1s", &common::scenario("chat", 10), "")
        .replace("name: sim\n", &format!("name: {name}\n"))
        .replace("model: sim-model", &format!("model: {model}"));
    let d = common::daemon(common::parse(&yaml)).await;
    let mut rx = d.subscribe();
    let outs = common::outcomes(&mut rx, n, Duration::from_secs(60)).await;
    d.stop().await;
    outs.iter()
        .map(|o| llm_probe::report::json_line(o))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_simulated_models_give_the_analytic_crossover() {
    let a = common::simulator(script(200, 33, "model-a")).await;
    let b = common::simulator(script(600, 17, "model-b")).await;
    let (lines_a, lines_b) = tokio::join!(
        collect(a.base_url(), "a", "model-a", 12),
        collect(b.base_url(), "b", "model-b", 12)
    );
    let (code, doc) = compare_files(&lines_a, &lines_b);
    // B's first token is 3× later: a regression (exit 1); its decode twice as fast: improvement.
    assert_eq!(code, Some(1), "{doc:#}");
    let level = &doc["levels"][0];
    assert_eq!(level["ttft_seconds"]["verdict"], "regression", "{level:#}");
    assert_eq!(level["output_tokens_per_second"]["verdict"], "improvement");
    let rel = level["ttft_seconds"]["hodges_lehmann"]["relative"]
        .as_f64()
        .unwrap();
    assert!((rel - 2.0).abs() < 0.1, "TTFT +200 % expected, got {rel}");

    let x = &doc["selection"]["crossover_output_tokens"];
    let (value, lo, hi) = (
        x["value"].as_f64().unwrap(),
        x["low"].as_f64().unwrap(),
        x["high"].as_f64().unwrap(),
    );
    println!("crossover {value:.2} [{lo:.2}, {hi:.2}] output tokens (analytic 26)");
    assert!((value - 26.0).abs() < 1.5, "{x}");
    assert!(lo <= value && value <= hi, "{x}");
}

/// `compare` of two collections, as JSON, with the exit code.
fn compare_files(before: &str, after: &str) -> (Option<i32>, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let (pb, pa) = (
        dir.path().join("before.jsonl"),
        dir.path().join("after.jsonl"),
    );
    std::fs::write(&pb, before).unwrap();
    std::fs::write(&pa, after).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_llm-probe"))
        .args(["compare", "--output", "json"])
        .args([&pb, &pa])
        .output()
        .unwrap();
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    (out.status.code(), doc)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttft_200_to_240_ms_is_a_regression_and_the_same_setup_is_not() {
    // Same target and model name throughout: a before/after comparison, not a selection.
    let before = common::simulator(script(200, 20, "m")).await;
    let slower = common::simulator(script(240, 20, "m")).await;
    let again = common::simulator(script(200, 20, "m")).await;
    let (b, s, a) = tokio::join!(
        collect(before.base_url(), "sim", "m", 12),
        collect(slower.base_url(), "sim", "m", 12),
        collect(again.base_url(), "sim", "m", 12)
    );

    let (code, doc) = compare_files(&b, &s);
    assert_eq!(code, Some(1), "{doc:#}");
    let ttft = &doc["levels"][0]["ttft_seconds"];
    assert_eq!(ttft["verdict"], "regression", "{ttft:#}");
    let rel = ttft["hodges_lehmann"]["relative"].as_f64().unwrap();
    // ±10 ms on 200 ms: the probes of a busy 2-core machine are late by a few ms at times.
    assert!((rel - 0.20).abs() < 0.05, "+20 % expected, got {rel}");
    assert!(doc["selection"].is_null());

    let (code, doc) = compare_files(&b, &a);
    assert_eq!(code, Some(0), "{doc:#}");
    // TTFT `~`; the other metrics may wobble on a busy machine, but none is a regression (exit 0).
    let level = &doc["levels"][0];
    assert_eq!(level["ttft_seconds"]["verdict"], "no_change", "{level:#}");
    // The simulator names the same model both times: compare says the identity did not change.
    assert!(doc["warnings"][0]
        .as_str()
        .unwrap()
        .contains("did not change"));
}
