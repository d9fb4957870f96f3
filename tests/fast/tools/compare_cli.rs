//! `llm-probe compare` end to end on bench JSON fixtures (tests/fixtures/compare/, in the shape
//! `bench --output json` writes, by `python3 tests/fixtures/compare/generate.py`: seeded
//! lognormal TTFT, σ = 0.25, 200 requests per level at concurrency 1 and 4 after 2 warmup
//! requests of 5 s) and on probe-once JSON lines. tests/fidelity/compare_measured.rs checks the fixtures' keys
//! against a real bench run.

use crate::common;

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/compare")
        .join(name)
}

fn compare(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_llm-probe"))
        .arg("compare")
        .args(args)
        .output()
        .expect("run llm-probe compare")
}

fn compare_json(before: &str, after: &str, extra: &[&str]) -> (Option<i32>, Value, String) {
    let (b, a) = (fixture(before), fixture(after));
    let mut args = vec![b.to_str().unwrap(), a.to_str().unwrap(), "--output", "json"];
    args.extend_from_slice(extra);
    let out = compare(&args);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (
        out.status.code(),
        doc,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn contains(interval: &Value, truth: f64) -> bool {
    let (lo, hi) = (interval[0].as_f64().unwrap(), interval[1].as_f64().unwrap());
    lo <= truth && truth <= hi
}

#[test]
fn ttft_plus_20_percent_is_a_regression_whose_intervals_contain_the_truth() {
    let (code, doc, _) = compare_json("before.json", "after_ttft_plus20.json", &[]);
    assert_eq!(code, Some(1), "a regression exits 1");
    assert_eq!(doc["schema"], "llm-probe.compare/v1");
    assert_eq!(doc["regression"], true);
    let levels = doc["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2);
    for level in levels {
        let ttft = &level["ttft_seconds"];
        assert_eq!(ttft["verdict"], "regression", "{ttft:#}");
        let hl = &ttft["hodges_lehmann"];
        let rel = [hl["relative_low"].clone(), hl["relative_high"].clone()];
        assert!(
            contains(&Value::from(rel.to_vec()), 0.20),
            "HL interval misses +20 %: {hl}"
        );
        assert!(
            contains(&ttft["change_ci"]["p50"], 0.20),
            "bootstrap P50 interval misses +20 %: {ttft}"
        );
        assert_eq!(ttft["change_ci_method"], "bootstrap");
        // The P95 moved too: the row says which parts regressed.
        assert_eq!(ttft["verdict_by"][0], "P50", "{ttft:#}");
        assert!(contains(
            &Value::from(vec![
                ttft["tail"]["relative_low"].clone(),
                ttft["tail"]["relative_high"].clone()
            ]),
            0.20
        ));
        // Order-statistic intervals of each run's percentiles: around the point estimate.
        let p95 = ttft["after"]["p95"].as_f64().unwrap();
        let ci = &ttft["after"]["p95_ci"];
        assert!(
            ci[0].as_f64().unwrap() <= p95 && p95 <= ci[1].as_f64().unwrap(),
            "{ttft}"
        );
        // The decode side did not change.
        assert_eq!(level["tpot_seconds"]["verdict"], "no_change");
        assert_eq!(level["output_tokens_per_second"]["verdict"], "no_change");
        assert_eq!(level["failure_ratio"]["verdict"], "no_change");
    }
}

#[test]
fn the_same_configuration_twice_is_no_change_with_an_identity_warning() {
    let (code, doc, stderr) = compare_json("before.json", "after_same.json", &[]);
    assert_eq!(code, Some(0));
    assert_eq!(doc["regression"], false);
    for level in doc["levels"].as_array().unwrap() {
        for metric in ["ttft_seconds", "tpot_seconds", "e2e_seconds"] {
            let m = &level[metric];
            assert_eq!(m["median_verdict"], "no_change", "{metric}: {level:#}");
            // 200 requests cannot rule out a +10 % P95 everywhere: inconclusive is allowed,
            // a regression is not.
            assert!(
                ["no_change", "inconclusive"].contains(&m["verdict"].as_str().unwrap()),
                "{metric}: {level:#}"
            );
        }
    }
    assert_eq!(doc["exit_status"], 0);
    assert!(stderr.contains("did not change"), "{stderr}");
    assert!(doc["warnings"][0].as_str().unwrap().contains("identity"));
}

#[test]
fn different_scenario_and_max_tokens_are_refused_unless_forced() {
    let (b, a) = (fixture("before.json"), fixture("after_other_scenario.json"));
    let out = compare(&[b.to_str().unwrap(), a.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("scenario short vs long"), "{stderr}");
    assert!(stderr.contains("max_tokens 64 vs 256"), "{stderr}");
    assert!(stderr.contains("--force"), "{stderr}");

    let (code, doc, _) = compare_json("before.json", "after_other_scenario.json", &["--force"]);
    assert_eq!(code, Some(0));
    assert!(doc["warnings"][0]
        .as_str()
        .unwrap()
        .contains("compared with --force"));
}

#[test]
fn text_and_markdown_outputs_carry_the_verdicts() {
    let (b, a) = (fixture("before.json"), fixture("after_ttft_plus20.json"));
    let text = compare(&[b.to_str().unwrap(), a.to_str().unwrap()]);
    assert_eq!(text.status.code(), Some(1));
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("concurrency 4"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("TTFT ") && l.ends_with("regression (P50, P95)")),
        "{text}"
    );
    assert!(
        text.starts_with("REGRESSION: TTFT median +22 % (C=1), +22 % (C=4), P95 +"),
        "{text}"
    );
    assert!(text.ends_with("\nexit status 1\n"), "{text}");
    for line in text.lines() {
        if !line.starts_with("BEFORE ") && !line.starts_with("AFTER ") {
            assert!(line.chars().count() <= 120, "{line}");
        }
    }
    // Every symbol is explained under the tables, once.
    for symbol in ["Δ P50:", "Δ P95:", "–: no value", "≈ N more"] {
        assert_eq!(text.matches(symbol).count(), 1, "{symbol}: {text}");
    }

    let md = compare(&[
        b.to_str().unwrap(),
        a.to_str().unwrap(),
        "--output",
        "markdown",
    ]);
    let md = String::from_utf8_lossy(&md.stdout);
    assert!(md.contains("#### concurrency 1"), "{md}");
    assert!(
        md.lines()
            .any(|l| l.starts_with("| TTFT |") && l.ends_with("| regression (P50, P95) |")),
        "{md}"
    );
    assert!(md.contains("|---|"), "{md}");
}

#[test]
fn two_endpoints_get_a_crossover_that_contains_the_analytic_value() {
    // A: TTFT 200 ms, 30 tokens/s; B: TTFT 600 ms, 60 tokens/s → N* = 1 + 0.4 ÷ (1/30 − 1/60) = 25
    // output tokens (24 after the first).
    let (_, doc, _) = compare_json("endpoint_a.json", "endpoint_b.json", &[]);
    let sel = &doc["selection"];
    let x = &sel["crossover_output_tokens"];
    let (value, lo, hi) = (
        x["value"].as_f64().unwrap(),
        x["low"].as_f64().unwrap(),
        x["high"].as_f64().unwrap(),
    );
    assert!((value - 25.0).abs() < 3.0, "{x}");
    assert!(lo <= 25.0 && 25.0 <= hi, "{x}");
    let e2e = sel["expected_e2e_seconds"].as_array().unwrap();
    let at = |n: u64| e2e.iter().find(|r| r["output_tokens"] == n).unwrap();
    // Short answers: A faster; long ones: B faster.
    assert!(at(5)["before"]["value"].as_f64() < at(5)["after"]["value"].as_f64());
    assert!(at(2000)["before"]["value"].as_f64() > at(2000)["after"]["value"].as_f64());
}

#[test]
fn probe_once_collections_and_unreadable_files() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, scale: f64| {
        let lines: Vec<String> = (0..60)
            .map(|i| {
                let ttft = scale * (0.18 + 0.04 * f64::from(i % 20) / 20.0);
                format!(
                    r#"{{"target":"t","scenario":"s","model":"m","success":true,"failure_reason":null,"ttft_seconds":{ttft},"tpot_seconds":0.02,"e2e_seconds":{}}}"#,
                    ttft + 1.0
                )
            })
            .collect();
        let path = dir.path().join(name);
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        path
    };
    let (b, a) = (write("b.jsonl", 1.0), write("a.jsonl", 1.5));
    let out = compare(&[b.to_str().unwrap(), a.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("all probes"), "{text}");

    // A hostile name in a run file cannot reach the terminal as a control sequence.
    let evil = dir.path().join("evil.jsonl");
    std::fs::write(
        &evil,
        "{\"target\":\"t\\u001b[2J\\u202e\",\"scenario\":\"s\",\"model\":\"m\\u001b]0;x\\u0007\",\"success\":true,\"ttft_seconds\":0.2,\"tpot_seconds\":0.03}\n",
    )
    .unwrap();
    for output in ["text", "markdown", "json"] {
        let out = compare(&[
            evil.to_str().unwrap(),
            b.to_str().unwrap(),
            "--output",
            output,
        ]);
        for stream in [&out.stdout, &out.stderr] {
            let text = String::from_utf8_lossy(stream);
            assert!(
                !text.contains('\u{1b}') && !text.contains('\u{7}') && !text.contains('\u{202e}'),
                "{output}: {text:?}"
            );
        }
    }

    // Markup in a hand-made name is shown in a Markdown report, not rendered (no link, image,
    // HTML or heading injected into a pull-request comment).
    let markup = dir.path().join("markup.jsonl");
    std::fs::write(
        &markup,
        "{\"target\":\"t\",\"scenario\":\"s\",\"model\":\"[x](https://evil.example) <img src=x>\\n# owned ```\",\"success\":true,\"ttft_seconds\":0.2,\"tpot_seconds\":0.03}\n",
    )
    .unwrap();
    let out = compare(&[
        markup.to_str().unwrap(),
        b.to_str().unwrap(),
        "--output",
        "markdown",
        "--force",
    ]);
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(
        md.contains("\\[x\\]\\(https://evil.example\\) &lt;img src=x&gt;"),
        "{md}"
    );
    // Outside the fenced selection block (whose fence outgrows the name's backticks), nothing
    // renders.
    let (mut fence, mut outside) = (None::<String>, String::new());
    for line in md.lines() {
        match &fence {
            Some(f) if line == f => fence = None,
            Some(_) => {}
            None if line.starts_with("```") => fence = Some(line.to_string()),
            None => outside += &format!("{line}\n"),
        }
    }
    assert!(fence.is_none(), "a fence left open: {md}");
    assert!(
        md.contains("\n````\n"),
        "the fence outgrows ``` in the name: {md}"
    );
    assert!(
        !outside.contains("<img") && !outside.contains("](https"),
        "{md}"
    );
    assert!(!outside.lines().any(|l| l.starts_with("# owned")), "{md}");

    let missing = dir.path().join("missing.json");
    let out = compare(&[missing.to_str().unwrap(), a.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("missing.json") && stderr.contains("cannot read"),
        "{stderr}"
    );
}

/// A stream as input (`/dev/zero`, a FIFO nobody writes to) is refused at once, not read until
/// memory runs out or forever (a hostile-input finding).
#[test]
fn a_device_or_a_fifo_as_input_is_refused_at_once() {
    let fixture_path = fixture("before.json");
    let good = fixture_path.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    common::mkfifo(&fifo);
    for input in ["/dev/zero", fifo.to_str().unwrap()] {
        let started = std::time::Instant::now();
        let out = compare(&[input, good]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{input}: {err}");
        assert!(err.contains("not a regular file"), "{input}: {err}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{input} took {:?}",
            started.elapsed()
        );
    }
}

/// `--prometheus.url` where nothing listens: exit 2 with the URL (redacted), the query and the
/// cause; no report on stdout.
#[test]
fn unreachable_prometheus_is_a_clear_error_exit_2() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://admin:hunter2@127.0.0.1:{port}/?token=s3cret");
    let out = compare(&[
        "--prometheus.url",
        &url,
        "--target",
        "sim",
        "--before",
        "now-2h/now-1h",
        "--after",
        "now-1h/now",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("http://***@127.0.0.1:{port}/?token=***")),
        "names the URL, redacted: {err}"
    );
    assert!(
        err.contains("llm_probe_time_to_first_token_seconds_bucket"),
        "names the query: {err}"
    );
    assert!(
        err.contains("cannot connect") && err.contains("refused"),
        "{err}"
    );
    assert!(!err.contains("hunter2") && !err.contains("s3cret"), "{err}");
}

/// Bad windows and missing flags: exit 2 with what is wrong, before any request.
#[test]
fn bad_prometheus_windows_are_usage_errors_exit_2() {
    let base = ["--prometheus.url", "http://127.0.0.1:9", "--target", "sim"];
    let cases: &[(&[&str], &str)] = &[
        (
            &["--before", "yesterday/now", "--after", "now-1h/now"],
            "\"yesterday\" is not a time",
        ),
        (
            &["--before", "now-1h", "--after", "now-1h/now"],
            "START/END",
        ),
        (
            &["--before", "now-1h/now-2h", "--after", "now-1h/now"],
            "its start must be before its end",
        ),
        (&["--before", "now-2h/now-1h"], "--after"),
        (&[], "--around-change"),
        (&["--around-change", "--window", "0s"], "--window"),
        (
            &[
                "--around-change",
                "--before",
                "now-2h/now-1h",
                "--after",
                "now-1h/now",
            ],
            "cannot be used with",
        ),
    ];
    for (extra, says) in cases {
        let args: Vec<&str> = base.iter().chain(extra.iter()).copied().collect();
        let out = compare(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(says), "{extra:?} should say {says:?}: {err}");
        assert!(
            !err.contains("cannot connect"),
            "{extra:?}: refused before any request: {err}"
        );
    }
    // --prometheus.url with run files, or without --target: usage errors too.
    let out = compare(&["a.json", "b.json", "--prometheus.url", "http://127.0.0.1:9"]);
    assert_eq!(out.status.code(), Some(2));
    let out = compare(&["--prometheus.url", "http://127.0.0.1:9", "--around-change"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--target"));
}

/// Two prompt-length sweeps (`bench --prompt-tokens`), before and after the simulator's prefill
/// tripled: compared per prompt length, the long prompt's TTFT a regression and the longest
/// prompt within the SLA lower; a level where the server counted the same generated prompt
/// otherwise is warned about. A prompt-length sweep matches no load sweep.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_prompt_length_sweeps_compare_per_prompt_length() {
    use common::bench::{bench_config, plan, prompts, yaml};
    let sim = |micros| {
        let mut script = common::stream(5, 1, 40);
        script.load.prefill_per_token = std::time::Duration::from_micros(micros);
        common::simulator(script)
    };
    let (fast, slow) = (sim(100).await, sim(300).await);
    // An objective the fast run's 2,000 tokens (≈ 205 ms) meet with room to spare, and the
    // slow run's (at least 5 ms + 2,009 × 0.3 ms) cannot.
    let config = |base_url: &str| {
        yaml(base_url).replace(
            "    model: m\n",
            "    model: m\n    slo: {ttft_p95: 500ms, output_tokens_per_second_min: 1}\n",
        )
    };
    let levels = || plan(prompts(&[64, 2000]), 5, 0);
    let before_config = config(&fast.base_url());
    // AFTER's scenario has a system message of 7 words: 66 → 73 counted at 64 tokens.
    let after_config = config(&slow.base_url()).replace(
        "messages: [{role: user",
        "messages: [{role: system, content: \"Answer in as few words as possible.\"}, {role: user",
    );
    let (before, after) = tokio::join!(
        bench_config(&before_config, levels()),
        bench_config(&after_config, levels())
    );
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, r: &llm_probe::bench::Report| {
        let p = dir.path().join(name);
        std::fs::write(&p, format!("{:#}\n", llm_probe::bench::json::to_json(r))).unwrap();
        p.to_str().unwrap().to_string()
    };
    let (b, a) = (write("before.json", &before), write("after.json", &after));
    let out = compare(&[&b, &a, "--output", "json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let levels = doc["levels"].as_array().unwrap();
    let keys: Vec<&Value> = levels.iter().map(|l| &l["prompt_tokens_sent"]).collect();
    assert_eq!(keys, [64, 2000], "{doc:#}");
    assert!(levels.iter().all(|l| l["concurrency"].is_null()));
    assert_eq!(
        levels[1]["ttft_seconds"]["verdict"], "regression",
        "{doc:#}"
    );
    let cap = &doc["sla_capacity"];
    assert_eq!(cap["before"]["prompt_tokens_sent"], 2000, "{cap}");
    assert_eq!(cap["after"]["prompt_tokens_sent"], 64, "{cap}");
    assert_eq!(cap["after_broken_at"]["prompt_tokens_sent"], 2000, "{cap}");
    assert_eq!(cap["verdict"], "regression");
    let warnings: Vec<&str> = (doc["warnings"].as_array().unwrap().iter())
        .filter_map(Value::as_str)
        .collect();
    assert!(
        warnings.iter().any(|w| w
            .starts_with("at prompt 64 tokens the server counted 66 tokens BEFORE and 73 AFTER")),
        "{warnings:?}"
    );
    assert!(
        !warnings.iter().any(|w| w.contains("at prompt 2000")),
        "2002 against 2009 is within 5 %: {warnings:?}"
    );
    let text = compare(&[&b, &a]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("prompt 2000 tokens (requests sent 5 → 5)")
            && text.contains("SLA capacity: 2000 tok → 64 tok (regression)"),
        "{text}"
    );

    // A load sweep has no prompt length to match.
    let load = fixture("before.json");
    let out = compare(&[load.to_str().unwrap(), &a, "--force"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("AFTER has prompt 64 tokens, prompt 2000 tokens")
            && stderr.contains("--prompt-tokens"),
        "{stderr}"
    );
}
