//! Pinned baselines outside Prometheus: `baseline save` as a command (exit codes, the file it
//! writes), the probes file's `baseline_file:` (read relative to the probes file, every problem
//! naming the probes file, the field and the baseline file), and the daemon's
//! `llm_probe_baseline_*` gauges across reloads (a bad baseline keeps the old one; a changed one
//! updates them; a removed one takes them away).

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use llm_probe::daemon::Daemon;
use llm_probe::reload::ReloadError;
use llm_probe::simulate::Script;

use common::baseline_json as baseline;

/// A probes file: target `sim` (scenarios chat, code) at `base_url`, with `extra` target keys.
fn probes(base_url: &str, extra: &str) -> String {
    format!(
        "defaults:\n  interval: 300ms\nscenarios:\n{}{}targets:\n  - name: sim\n    protocol: openai-chat\n    base_url: {base_url}\n    model: m\n{extra}",
        common::scenario("chat", 4),
        common::scenario("code", 4),
    )
}

fn load_error(dir: &Path, extra: &str) -> String {
    let path = dir.join("probes.yaml");
    std::fs::write(&path, probes("http://127.0.0.1:1/v1", extra)).unwrap();
    llm_probe::config::load(&path)
        .expect_err("the baseline problem is a config error")
        .to_string()
}

#[test]
fn baseline_file_is_read_relative_to_the_probes_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("b")).unwrap();
    std::fs::write(
        dir.path().join("b/chat.json"),
        baseline("sim", "chat", 0.25),
    )
    .unwrap();
    std::fs::write(dir.path().join("b/code.json"), baseline("sim", "code", 0.4)).unwrap();
    let path = dir.path().join("probes.yaml");
    std::fs::write(
        &path,
        probes(
            "http://127.0.0.1:1/v1",
            "    baseline_file: [b/chat.json, b/code.json]\n",
        ),
    )
    .unwrap();
    let cfg = llm_probe::config::load(&path).unwrap();
    let t = &cfg.targets[0];
    assert_eq!(t.baseline_for("chat").unwrap().ttft_seconds.p95, 0.25);
    assert_eq!(t.baseline_for("code").unwrap().ttft_seconds.p95, 0.4);
    assert!(
        t.summary().ends_with(" baselines=[chat, code]"),
        "check-config shows them: {}",
        t.summary()
    );
    // One path (not a list) works too.
    std::fs::write(
        &path,
        probes("http://127.0.0.1:1/v1", "    baseline_file: b/chat.json\n"),
    )
    .unwrap();
    let cfg = llm_probe::config::load(&path).unwrap();
    assert_eq!(cfg.targets[0].baselines.len(), 1);
    assert!(cfg.targets[0].baseline_for("code").is_none());
}

#[test]
fn every_baseline_problem_names_the_probes_file_the_field_and_the_baseline_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("other.json"), baseline("other", "chat", 0.3)).unwrap();
    std::fs::write(d.join("unrun.json"), baseline("sim", "summary", 0.3)).unwrap();
    std::fs::write(d.join("chat.json"), baseline("sim", "chat", 0.3)).unwrap();
    std::fs::write(
        d.join("bad.json"),
        baseline("sim", "chat", 0.3).replace("\"samples\":120", "\"samples\":0"),
    )
    .unwrap();
    std::fs::write(d.join("bench.json"), r#"{"schema":"llm-probe.bench/v1"}"#).unwrap();
    let probes_file = d.join("probes.yaml").display().to_string();
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "    baseline_file: missing.json\n",
            "missing.json",
            &["cannot be read (no such file)", "llm-probe baseline save"],
        ),
        (
            "    baseline_file: /dev/zero\n",
            "/dev/zero",
            &["cannot be read (not a regular file but a character device)"],
        ),
        (
            "    baseline_file: other.json\n",
            "other.json",
            &["pins target \"other\" (scenario \"chat\"), not \"sim\""],
        ),
        (
            "    baseline_file: unrun.json\n",
            "unrun.json",
            &["pins scenario \"summary\", which this target does not run (it runs: chat, code)"],
        ),
        (
            "    baseline_file: bad.json\n",
            "bad.json",
            &["is not a usable baseline: `samples` is 0"],
        ),
        (
            "    baseline_file: bench.json\n",
            "bench.json",
            &["unknown schema \"llm-probe.bench/v1\""],
        ),
        (
            "    baseline_file: [chat.json, chat.json]\n",
            "chat.json",
            &[
                "pins scenario \"chat\" again",
                "one baseline file per scenario",
            ],
        ),
        (
            "    baseline_file: {chat: chat.json}\n",
            "",
            &["baseline_file must be a path or a list of paths"],
        ),
    ];
    for (extra, file, wants) in cases {
        let e = load_error(d, extra);
        assert!(
            e.starts_with(&format!("{probes_file}:")),
            "names the probes file: {e}"
        );
        assert!(
            e.contains("targets[0].baseline_file"),
            "names the field: {e}"
        );
        assert!(
            e.contains(&d.join(file).display().to_string()),
            "names the baseline file: {e}"
        );
        for w in *wants {
            assert!(e.contains(w), "{w:?} not in {e}");
        }
    }
}

async fn metrics(d: &Daemon) -> String {
    common::get(d.addr, "/metrics", None).await.2
}

fn gauge(text: &str, name: &str, scenario: &str, quantile: Option<&str>) -> Option<f64> {
    let mut labels = vec![("target", "sim"), ("model", "m"), ("scenario", scenario)];
    labels.extend(quantile.map(|q| ("quantile", q)));
    common::sample(text, name, &labels)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gauges_follow_reloads_and_a_bad_baseline_keeps_the_old_one() {
    let sim = common::simulator(Script {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        tokens: 4,
        ..Script::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (path, chat) = (dir.path().join("probes.yaml"), dir.path().join("chat.json"));
    std::fs::write(&chat, baseline("sim", "chat", 0.25)).unwrap();
    let with_baseline = probes(&sim.base_url(), "    baseline_file: chat.json\n");
    std::fs::write(&path, &with_baseline).unwrap();
    let cfg = llm_probe::config::load(&path).unwrap();
    let d = Daemon::start(cfg, "127.0.0.1:0".parse().unwrap(), Some(path.clone()))
        .await
        .unwrap();

    let text = metrics(&d).await;
    let ttft = "llm_probe_baseline_time_to_first_token_seconds";
    assert_eq!(gauge(&text, ttft, "chat", Some("0.5")), Some(0.2));
    assert_eq!(gauge(&text, ttft, "chat", Some("0.95")), Some(0.25));
    assert_eq!(gauge(&text, ttft, "chat", Some("0.99")), Some(0.26));
    let tps = "llm_probe_baseline_output_tokens_per_second";
    assert_eq!(gauge(&text, tps, "chat", Some("0.5")), Some(200.0));
    let tpot = "llm_probe_baseline_time_per_output_token_seconds";
    assert_eq!(gauge(&text, tpot, "chat", Some("0.95")), Some(0.006));
    assert_eq!(
        gauge(&text, "llm_probe_baseline_samples", "chat", None),
        Some(120.0)
    );
    assert_eq!(
        gauge(&text, "llm_probe_baseline_timestamp_seconds", "chat", None),
        Some(1_796_040_000.0)
    );
    assert!(
        !text.contains("llm_probe_baseline_request_duration_seconds{"),
        "no E2E in the file, no E2E series"
    );
    assert!(
        gauge(&text, ttft, "code", Some("0.95")).is_none(),
        "no baseline for code"
    );

    // A broken baseline file: the reload is refused naming the probes file, the field and the
    // baseline file; the old baseline stays exported.
    std::fs::write(&chat, baseline("sim", "chat", 0.25).replace("0.2,", "0.9,")).unwrap();
    let err = d.reload().await.unwrap_err();
    assert!(matches!(err, ReloadError::Config(_)), "{err:?}");
    let err = err.to_string();
    for want in [
        path.display().to_string(),
        "targets[0].baseline_file".into(),
        chat.display().to_string(),
        "ttft_seconds is not in order".into(),
    ] {
        assert!(err.contains(&want), "{want:?} not in {err}");
    }
    let text = metrics(&d).await;
    assert_eq!(gauge(&text, ttft, "chat", Some("0.95")), Some(0.25));
    assert_eq!(
        common::sample(&text, "llm_probe_config_last_reload_successful", &[]),
        Some(0.0)
    );

    // A new baseline: the gauges follow.
    std::fs::write(&chat, baseline("sim", "chat", 0.3)).unwrap();
    d.reload().await.unwrap();
    let text = metrics(&d).await;
    assert_eq!(gauge(&text, ttft, "chat", Some("0.95")), Some(0.3));

    // No baseline_file any more: every baseline series is gone, probing goes on.
    std::fs::write(&path, probes(&sim.base_url(), "")).unwrap();
    d.reload().await.unwrap();
    let text = metrics(&d).await;
    let left: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("llm_probe_baseline_"))
        .collect();
    assert!(left.is_empty(), "baseline series left: {left:?}");
    assert!(text.contains("llm_probe_probes_total{"), "still probing");
    d.stop().await;
}

fn save(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_llm-probe"))
        .arg("baseline")
        .arg("save")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn baseline_save_writes_the_file_and_exits_2_on_unusable_input() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/compare/before.json"
    )
    .to_string();
    let out = dir.path().join("b.json");
    let out_s = out.display().to_string();

    // The committed bench fixture has no sla_capacity: the first level, and it says so.
    let (code, stdout, stderr) = save(&["--from", &fixture, "--out", &out_s]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(
            "target local scenario short: concurrency 1 (no level met the SLA: the first level)"
        ),
        "{stdout}"
    );
    assert!(
        stdout.ends_with(&format!("; written to {out_s}\n")),
        "one line: {stdout:?}"
    );
    let b = llm_probe::baseline::parse(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!((b.target.as_str(), b.scenario.as_str()), ("local", "short"));
    assert_eq!(b.source.file, fixture);
    assert_eq!(b.endpoint.system_fingerprint.as_deref(), Some("fp-1"));
    assert!(b.samples >= 100, "{}", b.samples);

    // Saving again replaces the baseline; the bench run itself, or any other file that is not
    // a baseline, is never replaced (exit 2, the file as it was).
    let (code, _, stderr) = save(&["--from", &fixture, "--out", &out_s]);
    assert_eq!(code, 0, "{stderr}");
    let run = dir.path().join("run.json");
    std::fs::copy(&fixture, &run).unwrap();
    let run_s = run.display().to_string();
    let (code, _, stderr) = save(&["--from", &run_s, "--out", &run_s]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("exists and is not a baseline file"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read(&run).unwrap(),
        std::fs::read(&fixture).unwrap(),
        "the bench run is untouched"
    );

    // The output's directory is created.
    let nested = dir.path().join("baselines/prod/b.json");
    let nested_s = nested.display().to_string();
    let (code, _, stderr) = save(&["--from", &fixture, "--out", &nested_s]);
    assert_eq!(code, 0, "{stderr}");
    assert!(nested.is_file());

    let (code, _, _) = save(&["--from", &fixture, "--level", "4", "--out", &out_s]);
    assert_eq!(code, 0);
    let b4 = llm_probe::baseline::parse(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(b4.source.level, "concurrency 4");

    let (code, _, stderr) = save(&["--from", &fixture, "--level", "16", "--out", &out_s]);
    assert_eq!(code, 2);
    assert!(stderr.contains("no level with concurrency 16"), "{stderr}");

    let failed = dir.path().join("failed.json");
    std::fs::write(
        &failed,
        r#"{"schema":"llm-probe.bench/v1","metadata":{"target":"t","scenario":"s"},
            "levels":[{"concurrency":1}],
            "requests":[{"level":0,"ok":false,"reason":"connect"}]}"#,
    )
    .unwrap();
    let (code, _, stderr) = save(&["--from", &failed.display().to_string(), "--out", &out_s]);
    assert_eq!(code, 2);
    assert!(stderr.contains("has no successful request"), "{stderr}");

    // A prompt-length sweep sent generated prompts, not the scenario's.
    let prompts = dir.path().join("prompts.json");
    std::fs::write(
        &prompts,
        r#"{"schema":"llm-probe.bench/v1","metadata":{"target":"t","scenario":"s"},
            "levels":[{"concurrency":1,"prompt_tokens_sent":4000}],
            "requests":[{"level":0,"ok":true,"ttft_seconds":0.5}]}"#,
    )
    .unwrap();
    let (code, _, stderr) = save(&["--from", &prompts.display().to_string(), "--out", &out_s]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("the file is a prompt-length sweep (bench --prompt-tokens)"),
        "{stderr}"
    );

    let unknown = dir.path().join("unknown.json");
    std::fs::write(&unknown, r#"{"schema":"genai-perf/v2"}"#).unwrap();
    let (code, _, stderr) = save(&["--from", &unknown.display().to_string(), "--out", &out_s]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("unknown schema \"genai-perf/v2\""),
        "{stderr}"
    );
    // Nothing was overwritten by the refusals.
    assert_eq!(
        llm_probe::baseline::parse(&std::fs::read_to_string(&out).unwrap())
            .unwrap()
            .source
            .level,
        "concurrency 4"
    );
}

#[tokio::test]
async fn a_long_prompt_baseline_pins_its_prefill_speed() {
    // Three probes of a 2,000-token scenario at 0.1 ms of prefill per word.
    let sim = common::simulator(Script {
        load: llm_probe::simulate::Load {
            prefill_per_token: Duration::from_micros(100),
            ..Default::default()
        },
        ..common::stream(5, 1, 4)
    })
    .await;
    let yaml = common::yaml(
        &sim.base_url(),
        "10s",
        "  - name: long\n    prompt_tokens: 2000\n    needle: false\n    max_tokens: 4\n",
        "",
    );
    let cfg = common::parse(&yaml);
    let prober = llm_probe::probe::Prober::new(cfg.targets[0].clone()).unwrap();
    let (mut lines, mut speeds) = (String::new(), Vec::new());
    for _ in 0..3 {
        let o = prober.probe(&cfg.targets[0].scenarios[0]).await;
        speeds.push(
            o.result
                .as_ref()
                .unwrap()
                .prefill_tokens_per_second
                .unwrap(),
        );
        lines += &llm_probe::report::json_line(&o);
    }
    speeds.sort_by(f64::total_cmp);
    let dir = tempfile::tempdir().unwrap();
    let (from, out) = (dir.path().join("once.json"), dir.path().join("b.json"));
    std::fs::write(&from, lines).unwrap();
    let (from_s, out_s) = (from.display().to_string(), out.display().to_string());
    let (code, _, stderr) = save(&["--from", &from_s, "--out", &out_s]);
    assert_eq!(code, 0, "{stderr}");
    let text = std::fs::read_to_string(&out).unwrap();
    let b = llm_probe::baseline::parse(&text).unwrap();
    let pinned = b.prefill_tokens_per_second.expect("a prefill speed");
    assert!(
        (pinned.p50 - speeds[1]).abs() < 1e-3,
        "{pinned:?} {speeds:?}"
    );

    // A scenario without a generated prompt leaves the field out of the file.
    assert!(!baseline("sim", "chat", 0.25).contains("prefill"));
    // And the daemon exports it.
    let metrics = llm_probe::metrics::Metrics::new(&[]);
    let labels = llm_probe::metrics::ProbeLabels::new("sim", "m", "long", "");
    metrics.set_baselines(&[(labels, &b)]);
    let (_, text) = metrics.render(None);
    assert_eq!(
        common::sample(
            &text,
            "llm_probe_baseline_prefill_tokens_per_second",
            &[("quantile", "0.5")]
        ),
        Some(pinned.p50)
    );
    // A speed no stream measures is refused.
    let bad = text_with_prefill(&std::fs::read_to_string(&out).unwrap(), -1.0);
    let e = llm_probe::baseline::parse(&bad).unwrap_err();
    assert!(
        e.contains("prefill_tokens_per_second quantile 0.5 is -1"),
        "{e}"
    );
}

/// `baseline` with its prefill P50 set to `v`.
fn text_with_prefill(baseline: &str, v: f64) -> String {
    let mut doc: serde_json::Value = serde_json::from_str(baseline).unwrap();
    doc["prefill_tokens_per_second"]["p50"] = serde_json::json!(v);
    doc.to_string()
}
