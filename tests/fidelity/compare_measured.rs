//! `compare` on real measurements: the daemon probes simulators, the outcomes are written as
//! `probe-once --output json` lines, and `llm-probe compare` judges them. Two models (A: TTFT
//! 200 ms, ITL 33 ms; B: TTFT 600 ms, ITL 17 ms): B's TTFT regression, its tokens/s improvement
//! and the crossover output length near the analytic 1 + 0.4 s ÷ (0.033 − 0.017) s = 26 tokens.
//! One model before and after (TTFT 200 → 240 ms): a ≈ +20 % regression; 200 → 200 ms: `~` —
//! from probe-once collections, and from real `bench --output json` reports (the
//! simulator's load model with jitter).

use crate::common;
use common::ScriptExt;

use std::time::Duration;

use llm_probe::bench::{self, level::Load as BenchLoad};
use llm_probe::compare::stats::hodges_lehmann;
use llm_probe::simulate::{Load as SimLoad, Script};
use llm_probe::stats::median;

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
    let a = common::simulator(common::stream(200, 33, 10).model("model-a")).await;
    let b = common::simulator(common::stream(600, 17, 10).model("model-b")).await;
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
    let before = common::simulator(common::stream(200, 20, 10).model("m")).await;
    let slower = common::simulator(common::stream(240, 20, 10).model("m")).await;
    let again = common::simulator(common::stream(200, 20, 10).model("m")).await;
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
    assert_eq!(
        level["ttft_seconds"]["median_verdict"], "no_change",
        "{level:#}"
    );
    // The simulator names the same model both times: compare says the identity did not change.
    assert!(doc["warnings"][0]
        .as_str()
        .unwrap()
        .contains("did not change"));
}

/// The simulator's load model at TTFT `ttft_ms`, 6 tokens 20 ms apart, each TTFT and gap
/// scaled by a seeded lognormal factor (σ = 0.1, median 1); no slots: nobody queues.
fn jittered(ttft_ms: u64, seed: u64) -> Script {
    Script {
        ttft: Duration::from_millis(ttft_ms),
        itl: Duration::from_millis(20),
        tokens: 6,
        model: "m".into(),
        load: SimLoad {
            jitter: 0.1,
            seed,
            ..SimLoad::default()
        },
        ..Script::default()
    }
}

/// `bench` (the library path `bench --output json` takes) at concurrency 2 and 4, 80 requests
/// per level after 2 warmup requests; the report as `bench --output json` prints it.
async fn bench_json(base_url: String) -> serde_json::Value {
    let levels = vec![BenchLoad::Concurrency(2), BenchLoad::Concurrency(4)];
    let report = common::bench::bench(&base_url, common::bench::plan(levels, 80, 2)).await;
    bench::json::to_json(&report)
}

/// Each TTFT as the simulator produced it: from the request's arrival to its first event.
fn simulated_ttfts(sim: &llm_probe::simulate::Simulator) -> Vec<f64> {
    sim.received()
        .iter()
        .map(|q| (q.events_sent.lock().unwrap()[0] - q.arrived).as_secs_f64())
        .collect()
}

/// The keys of the objects at `pointer` in `doc` (`requests` / `levels`: of all items).
fn keys(doc: &serde_json::Value, pointer: &str) -> std::collections::BTreeSet<String> {
    let v = doc.pointer(pointer).unwrap();
    let objects = v.as_array().cloned().unwrap_or_else(|| vec![v.clone()]);
    objects
        .iter()
        .flat_map(|o| o.as_object().unwrap().keys().cloned())
        .collect()
}

/// `bench` against the simulator at TTFT 200 ms (jitter on), then at
/// 240 ms → `compare` exits 1 with a TTFT regression of ≈ +20 % whose Hodges–Lehmann interval
/// contains the truth: the scripted +20 % (with σ = 0.1 the population shift of
/// 1.2·X − Y, X and Y lognormal, is +19.9 % of the median) and the shift of the TTFTs as the
/// simulators actually produced them. The same configuration twice (another jitter seed) → exit
/// 0, TTFT `~`. The three runs go at once so that they share the machine's load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_at_200_then_240_ms_is_a_regression_and_the_same_setup_is_not() {
    let before = common::simulator(jittered(200, 1)).await;
    let slower = common::simulator(jittered(240, 2)).await;
    let again = common::simulator(jittered(200, 3)).await;
    let (b, s, a) = tokio::join!(
        bench_json(before.base_url()),
        bench_json(slower.base_url()),
        bench_json(again.base_url())
    );
    for run in [&b, &s, &a] {
        assert_eq!(run["metadata"]["endpoint"]["response_model"], "m");
        for level in run["levels"].as_array().unwrap() {
            assert_eq!(level["requests"]["succeeded"], 80, "{level:#}");
        }
    }

    // The fixtures of tests/fast/tools/compare_cli.rs use only keys a real bench run writes.
    let fixture: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/compare/before.json"),
        )
        .unwrap(),
    )
    .unwrap();
    for pointer in [
        "",
        "/metadata",
        "/metadata/endpoint",
        "/levels",
        "/levels/0/requests",
        "/requests",
    ] {
        let missing: Vec<_> = keys(&fixture, pointer)
            .difference(&keys(&b, pointer))
            .cloned()
            .collect();
        assert!(
            missing.is_empty(),
            "fixture keys at {pointer:?} that bench does not write: {missing:?}"
        );
    }

    let (code, doc) = compare_docs(&b, &s);
    assert_eq!(code, Some(1), "{doc:#}");
    let truth = {
        let (tb, ts) = (simulated_ttfts(&before), simulated_ttfts(&slower));
        let shift = hodges_lehmann(&tb, &ts, 0.95).unwrap().estimate;
        shift / median(&tb).unwrap()
    };
    for level in doc["levels"].as_array().unwrap() {
        let ttft = &level["ttft_seconds"];
        assert_eq!(ttft["verdict"], "regression", "{ttft:#}");
        let hl = &ttft["hodges_lehmann"];
        let (rel, lo, hi) = (
            hl["relative"].as_f64().unwrap(),
            hl["relative_low"].as_f64().unwrap(),
            hl["relative_high"].as_f64().unwrap(),
        );
        println!(
            "concurrency {}: TTFT {:+.1} % [{:+.1} %, {:+.1} %]; the simulators' own TTFTs {:+.1} %",
            level["concurrency"],
            rel * 100.0,
            lo * 100.0,
            hi * 100.0,
            truth * 100.0
        );
        assert!((rel - 0.20).abs() < 0.04, "≈ +20 % expected: {hl}");
        // The truth is the shift the jittered simulators really produced (+18.6 % in one CI
        // run, whose interval [+12.8, +19.8] % rightly missed the nominal +20 %).
        assert!(
            lo <= truth && truth <= hi,
            "the interval misses {truth}: {hl}"
        );
    }

    let (code, doc) = compare_docs(&b, &a);
    assert_eq!(code, Some(0), "{doc:#}");
    for level in doc["levels"].as_array().unwrap() {
        assert_eq!(
            level["ttft_seconds"]["median_verdict"], "no_change",
            "{level:#}"
        );
    }
}

/// `compare` of two bench reports, as JSON, with the exit code.
fn compare_docs(
    before: &serde_json::Value,
    after: &serde_json::Value,
) -> (Option<i32>, serde_json::Value) {
    compare_files(&format!("{before:#}\n"), &format!("{after:#}\n"))
}
