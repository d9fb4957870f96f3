//! `llm-probe bench` against the simulator: the JSON schema's names, the charts, a server that
//! fails every request, Ctrl-C, open loop, the errors for bad input and what no output may
//! carry. (The queueing-model sweep is in the fidelity tier, `bench_sweep`; the charts in
//! Chromium in the end-to-end tier, `browser::bench_chart`.)

use crate::common;

use common::bench::{bench, plan, yaml};

use std::process::Command;
use std::time::Duration;

use llm_probe::bench::level::Load;
use llm_probe::bench::progress::Progress;
use llm_probe::bench::{json, select, sweep};
use llm_probe::config::PrefixCache;
use llm_probe::simulate::{Fault, Script};
use tokio_util::sync::CancellationToken;

/// The JSON report keeps the names the issue fixes, and the charts are SVG.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_schema_names_and_charts() {
    let sim = common::simulator(common::stream(20, 2, 8)).await;
    let r = bench(&sim.base_url(), plan(vec![Load::Rate(20.0)], 10, 0)).await;
    let v = json::to_json(&r);
    assert_eq!(v["schema"], "llm-probe.bench/v1");
    let level = &v["levels"][0];
    assert!(level["concurrency"].is_null());
    assert_eq!(level["rate"], 20.0);
    for k in ["sent", "succeeded", "failed", "failures_by_reason"] {
        assert!(!level["requests"][k].is_null(), "requests.{k}");
    }
    for m in [
        "ttft_seconds",
        "time_to_first_output_token_seconds",
        "tpot_seconds",
        "inter_token_latency_seconds",
        "e2e_seconds",
        "output_tokens_per_second",
    ] {
        for k in ["p50", "p90", "p95", "p99", "mean", "min", "max", "n"] {
            assert!(!level[m][k].is_null(), "{m}.{k}");
        }
        assert!(level[m]["p95_ci"].is_array(), "{m}.p95_ci");
    }
    for k in [
        "output_throughput_tokens_per_second",
        "request_throughput_per_second",
        "goodput_requests_per_second",
        "slo_attainment",
    ] {
        assert!(level[k].as_f64().unwrap() > 0.0, "{k}");
    }
    let cap = &v["sla_capacity"];
    assert_eq!(cap["rate"], 20.0);
    assert!(cap["broken_at"].is_null() && cap["broken_by"].is_array());
    assert_eq!(v["requests"].as_array().unwrap().len(), 10);
    assert_eq!(v["requests"][0]["output_tokens"], 8);
    let meta = &v["metadata"];
    assert_eq!(meta["endpoint"]["server"], "llm-probe-simulator");
    assert_eq!(meta["endpoint"]["response_model"], "llm-probe-simulator");
    assert!(meta["config_digest"]
        .as_str()
        .unwrap()
        .starts_with("fnv1a64:"));
    assert!(meta["started"].as_str().unwrap().ends_with('Z'));
    // Open loop: latency from the scheduled send, with the generator's lateness beside it
    // (how late it is on a loaded machine is a benchmark's number, not this test's: it must be
    // there, and no longer than the slowest request's latency, which includes it).
    let late = level["generator_lateness_seconds"]["max"].as_f64().unwrap();
    let slowest = level["e2e_seconds"]["max"].as_f64().unwrap();
    assert!(
        late >= 0.0 && late <= slowest,
        "lateness {late}, slowest E2E {slowest}"
    );

    let dir = tempfile::tempdir().unwrap();
    let n = llm_probe::bench::command::write_all(&r, dir.path()).unwrap();
    assert_eq!(n, 6);
    for f in [
        "ttft.svg",
        "tokens_per_second.svg",
        "throughput_latency.svg",
    ] {
        let svg = std::fs::read_to_string(dir.path().join(f)).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("</svg>"), "{f}");
        assert!(
            svg.contains("<polyline") || svg.contains("<path"),
            "{f} has no line"
        );
    }
    let ttft = std::fs::read_to_string(dir.path().join("ttft.svg")).unwrap();
    // Labelled on the line and in the legend.
    assert_eq!(
        ttft.matches("SLO: P95 ≤ 300 ms").count(),
        2,
        "the SLO line's labels"
    );
}

fn cli(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_llm-probe"))
        .arg("bench")
        .args(args)
        .output()
        .unwrap()
}

/// Bad input is refused with a message that names the problem.
#[test]
fn bad_input_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.yaml");
    // Nothing listens here: every case must be refused before a request is sent.
    std::fs::write(&file, yaml("http://127.0.0.1:9/v1")).unwrap();
    let f = file.to_str().unwrap();
    let cases: [(&[&str], &str); 12] = [
        (
            &["--target", "nope", "--concurrency", "1", "--requests", "1"],
            "no target named \"nope\"",
        ),
        (
            &[
                "--scenario",
                "nope",
                "--concurrency",
                "1",
                "--requests",
                "1",
            ],
            "no scenario named \"nope\"",
        ),
        (
            &["--concurrency", "1,0", "--requests", "1"],
            "--concurrency: a level of 0",
        ),
        (&["--rate", "1,2"], "--rate without a bound"),
        (
            &["--concurrency", "1,1", "--requests", "4"],
            "the levels must increase (concurrency 1 then concurrency 1)",
        ),
        (
            &["--concurrency", "1,64", "--requests", "4"],
            "--requests 4 is fewer than --concurrency 64",
        ),
        (
            &[
                "--concurrency",
                "1,2,4,8",
                "--requests",
                "100",
                "--max-requests",
                "300",
            ],
            "over --max-requests 300",
        ),
        (
            &["--prompt-tokens", "10", "--requests", "2"],
            "--prompt-tokens: 10 is not a size bench can generate; use 64 to 1000000 tokens",
        ),
        (
            &["--prompt-tokens", "4000,256", "--requests", "2"],
            "the levels must increase (prompt 4000 tokens then prompt 256 tokens)",
        ),
        (
            &["--prompt-tokens", "256", "--rate", "1", "--requests", "2"],
            "it does not combine with --rate: drop --rate",
        ),
        (
            &[
                "--prompt-tokens",
                "256,1000",
                "--concurrency",
                "1,2",
                "--requests",
                "2",
            ],
            "--prompt-tokens measures every prompt length at one concurrency, but --concurrency lists 1,2",
        ),
        (
            &["--prompt-tokens", "256", "--concurrency", "4", "--requests", "2"],
            "--requests 2 is fewer than --concurrency 4",
        ),
    ];
    for (args, expected) in cases {
        let mut all = vec!["--config.file", f];
        all.extend_from_slice(args);
        let out = cli(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
    // A scenario whose tools ask for a call cannot take a generated prompt.
    std::fs::write(
        &file,
        yaml("http://127.0.0.1:9/v1").replace(
            "    max_tokens: 32\n",
            "    max_tokens: 32\n    tools: [{type: function, function: {name: f, parameters: {type: object}}}]\n",
        ),
    )
    .unwrap();
    let out = cli(&[
        "--config.file",
        f,
        "--prompt-tokens",
        "256",
        "--requests",
        "2",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--prompt-tokens replaces the scenario's messages with a generated prompt, but scenario \"chat\" declares tools"),
        "{stderr}"
    );
}

/// A server that fails every request ends each level with the failure reasons
/// (exit 1, no panic, the report still written).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_fails_every_request_reports_the_reasons() {
    let sim = common::simulator(Script {
        fault: Fault::Http500,
        ..Script::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.yaml");
    std::fs::write(&file, yaml(&sim.base_url())).unwrap();
    let f = file.to_str().unwrap().to_string();
    let out_dir = dir.path().join("out");
    let o = out_dir.to_str().unwrap().to_string();
    let out = tokio::task::spawn_blocking(move || {
        cli(&[
            "--config.file",
            &f,
            "--concurrency",
            "1,2,4",
            "--requests",
            "4",
            "--pause",
            "0s",
            "--output",
            "json",
            "--out",
            &o,
            "--stop-on-slo-breach",
        ])
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("no request succeeded"), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // --stop-on-slo-breach: the first level broke the SLA (every request failed), so only it ran.
    assert_eq!(v["levels"].as_array().unwrap().len(), 1);
    assert_eq!(v["metadata"]["stopped_on_slo_breach"], true);
    assert_eq!(v["levels"][0]["broken_by"][0], "ttft_p95");
    for level in v["levels"].as_array().unwrap() {
        assert_eq!(level["requests"]["failed"], 4);
        assert_eq!(level["requests"]["failures_by_reason"]["http_status"], 4);
        assert!(level["ttft_seconds"]["p50"].is_null());
    }
    assert!(v["sla_capacity"]["concurrency"].is_null());
    assert_eq!(v["sla_capacity"]["broken_at"]["concurrency"], 1);
    assert!(out_dir.join("ttft.svg").is_file());
}

/// Ctrl-C in the middle of a sweep: the run ends cleanly and writes what was measured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_writes_what_was_measured() {
    let sim = common::simulator(Script {
        ttft: Duration::from_millis(50),
        itl: Duration::from_millis(10),
        tokens: 10,
        ..Script::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.yaml");
    std::fs::write(&file, yaml(&sim.base_url())).unwrap();
    let out_dir = dir.path().join("out");
    let child = Command::new(env!("CARGO_BIN_EXE_llm-probe"))
        .args(["bench", "--config.file"])
        .arg(&file)
        .args([
            "--concurrency",
            "2,4",
            "--duration",
            "60s",
            "--output",
            "json",
            "--out",
        ])
        .arg(&out_dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Until the simulator has answered a few requests.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while sim.received().len() < 6 {
        if std::time::Instant::now() > deadline {
            let _ = common::ChildGuard(child);
            panic!("no requests arrived");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    common::interrupt(&child);
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["metadata"]["interrupted"], true);
    let levels = v["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 1, "the sweep went on after Ctrl-C");
    assert!(levels[0]["requests"]["succeeded"].as_u64().unwrap() >= 2);
    assert!(out_dir.join("report.json").is_file());
}

/// Open loop behind `--max-concurrency 1`: requests that wait for the cap are late, and their
/// latencies count from the scheduled send (no coordinated omission).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_loop_counts_the_wait_from_the_schedule() {
    let sim = common::simulator(common::stream(50, 2, 8)).await;
    let mut p = plan(vec![Load::Rate(50.0)], 8, 0);
    p.max_concurrency = Some(1);
    let r = bench(&sim.base_url(), p).await;
    assert_eq!(r.records.len(), 8);
    let mut worst = Duration::ZERO;
    for rec in &r.records {
        let s = rec.result.as_ref().unwrap();
        // TTFT from the schedule = the wait + the server's 50 ms.
        let from_send = s.ttft - rec.lateness.as_secs_f64();
        assert!((0.045..0.5).contains(&from_send), "{rec:?}");
        worst = worst.max(rec.lateness);
    }
    // Eight requests of ≥ 64 ms each, one at a time, scheduled over ~140 ms.
    assert!(
        worst > Duration::from_millis(150),
        "worst lateness {worst:?}"
    );
    let level = &r.levels[0].0;
    assert!(level.ttft.max.unwrap() >= worst.as_secs_f64() + 0.045);
}

/// `--max-requests` is a hard cap even when the plan cannot count requests ahead (closed loop
/// bounded by time only): the sweep stops when it is spent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_requests_caps_a_time_bounded_sweep() {
    let sim = common::simulator(common::stream(5, 2, 8)).await;
    let mut p = plan(vec![Load::Concurrency(2), Load::Concurrency(4)], 1, 0);
    p.requests = None;
    p.duration = Some(Duration::from_secs(30));
    p.max_requests = 5;
    let started = std::time::Instant::now();
    let r = bench(&sim.base_url(), p).await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the cap did not end the level"
    );
    assert_eq!(r.records.len(), 5);
    assert_eq!(sim.received().len(), 5);
    assert_eq!(r.levels.len(), 1, "the sweep went on past the cap");
}

/// Secrets of the target (API key, a header value; the config refuses URL user-info and
/// queries) appear in no output of `bench`: table, Markdown, JSON (failure details included) or charts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_output_carries_a_secret() {
    for fault in [Fault::None, Fault::Http500] {
        let sim = common::simulator(Script {
            fault,
            ..common::stream(5, 2, 8)
        })
        .await;
        let text = yaml(&sim.base_url()).replace(
            "    model: m\n",
            "    model: m\n    api_key_env: BENCH_KEY\n    headers: {x-extra: HEADER-77c4}\n",
        );
        let cfg = llm_probe::config::parse(&text, "<test>", &|name| {
            (name == "BENCH_KEY").then(|| "KEY-0f3b9".to_string())
        })
        .unwrap();
        let (t, s) = select(&cfg, None, None).unwrap();
        let r = sweep(
            &text,
            t,
            s,
            PrefixCache::Cold,
            plan(vec![Load::Concurrency(1)], 2, 0),
            CancellationToken::new(),
            Progress::new(true),
        )
        .await
        .unwrap();
        // The requests really carried the key.
        let sent = sim.received();
        assert!(sent[0].headers.iter().any(|(_, v)| v.contains("KEY-0f3b9")));
        let dir = tempfile::tempdir().unwrap();
        llm_probe::bench::command::write_all(&r, dir.path()).unwrap();
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let body = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            for secret in ["KEY-0f3b9", "HEADER-77c4"] {
                assert!(!body.contains(secret), "{fault:?}: {secret} in the output");
            }
        }
    }
}

/// The simulator's load flags on the command line: `simulate --slots 1` makes the second of two
/// concurrent users wait a whole stream (100 ms + 7 × 2 ms), and a negative jitter is refused.
/// Judged on the instants bench recorded in the same run, not on scripted constants alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulate_load_flags_from_the_command_line() {
    let refused = Command::new(env!("CARGO_BIN_EXE_llm-probe"))
        .args(["simulate", "--jitter=-1"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("not a number ≥ 0"));

    let port = common::free_port();
    let sim = common::ChildGuard(
        Command::new(env!("CARGO_BIN_EXE_llm-probe"))
            .args([
                "simulate",
                "--web.listen-address",
                &format!("127.0.0.1:{port}"),
            ])
            .args([
                "--slots", "1", "--ttft", "100ms", "--itl", "2ms", "--tokens", "8",
            ])
            .args([
                "--jitter",
                "0",
                "--seed",
                "3",
                "--itl-slowdown-per-stream",
                "0.5",
            ])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let base = format!("http://127.0.0.1:{port}/v1");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the simulator did not start"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let r = bench(&base, plan(vec![Load::Concurrency(2)], 2, 0)).await;
    drop(sim);
    // Each request's send, first token and end on the level's clock, in first-token order.
    let mut seen: Vec<(f64, f64, f64)> = r
        .records
        .iter()
        .map(|q| {
            let m = q.result.as_ref().unwrap();
            let sent = (q.scheduled + q.lateness).as_secs_f64();
            (sent + m.ttft, m.ttft, q.ended.as_secs_f64())
        })
        .collect();
    seen.sort_by(|a, b| a.0.total_cmp(&b.0));
    let [(first_token, first_ttft, first_end), (second_token, _, _)] = seen[..] else {
        panic!("{seen:?}")
    };
    // Never early: the script's 100 ms TTFT.
    assert!(first_ttft >= 0.099, "{seen:?}");
    // One slot: the second request's stream began only when the first's had ended, and then
    // took its own 100 ms (less 5 ms for the first end's delivery to this client). Without
    // the slot it would start ~14 ms before the first ends.
    assert!(second_token >= first_end + 0.095, "{seen:?}");
    // `--itl 2ms` was taken: 7 gaps of 2 ms, where the default 20 ms makes at least 140 ms
    // (the client may see the first token late, so the stream it sees can be shorter).
    let stream = first_end - first_token;
    assert!(stream < 0.140, "{seen:?}");
}

/// Closed loop: the virtual users start `USER_SPACING` apart, so the first round is no burst of
/// C connections at one instant (BENCHMARKS §9b: a burst delayed the generator itself).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn virtual_users_start_spaced_apart() {
    let sim = common::simulator(common::stream(100, 2, 8)).await;
    let r = bench(&sim.base_url(), plan(vec![Load::Concurrency(8)], 8, 0)).await;
    let v = json::to_json(&r);
    let mut starts: Vec<f64> = v["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["scheduled_seconds"].as_f64().unwrap())
        .collect();
    assert_eq!(starts.len(), 8);
    starts.sort_by(f64::total_cmp);
    let spacing = llm_probe::bench::run::USER_SPACING.as_secs_f64();
    assert!(spacing >= 0.001, "the documented spacing is 1 ms");
    for (k, s) in starts.iter().enumerate() {
        assert!(
            *s >= spacing * k as f64 - 1e-4,
            "user {k} sent at {s} s, before {k} × the spacing: {starts:?}"
        );
    }
}

/// The plan's prompt size: bench sends the scenario once with max_tokens 1 and
/// prints the server's count, marked "measured", and computes the token spend with it; a
/// server without usage gets the text estimate, marked "estimated" with the reason; `--quiet`
/// prints no plan and sends no extra request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plan_measures_the_prompt_with_one_request_first() {
    let run = |base_url: String, quiet: bool| async move {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.yaml");
        std::fs::write(&file, yaml(&base_url)).unwrap();
        let f = file.to_str().unwrap().to_string();
        tokio::task::spawn_blocking(move || {
            let mut args = vec![
                "--config.file",
                &f,
                "--concurrency",
                "1",
                "--requests",
                "2",
                "--pause",
                "0s",
                "--output",
                "json",
            ];
            if quiet {
                args.push("--quiet");
            }
            cli(&args)
        })
        .await
        .unwrap()
    };
    let prompt_line = |stderr: &str| -> (String, u64) {
        let line = stderr
            .lines()
            .find(|l| l.starts_with("prompt: "))
            .unwrap_or_else(|| panic!("no prompt line in\n{stderr}"))
            .to_string();
        let n = line
            .trim_start_matches("prompt: ")
            .trim_start_matches("≈ ")
            .split_whitespace()
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{line}"));
        (line, n)
    };

    let sim = common::simulator(common::stream(5, 2, 8)).await;
    let out = run(sim.base_url(), false).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let (line, n) = prompt_line(&stderr);
    assert!(line.contains("measured"), "{line}");
    assert_eq!(Some(n), v["metadata"]["prompt_tokens"].as_u64(), "{line}");
    assert!(
        stderr.contains(&format!("({n} prompt + 32 max_tokens)")),
        "{stderr}"
    );
    let received = sim.received();
    let max_tokens: Vec<u64> = received
        .iter()
        .map(|r| r.body["max_tokens"].as_u64().unwrap())
        .collect();
    assert_eq!(
        max_tokens,
        [1, 32, 32],
        "one measuring request, then the sweep"
    );
    assert_eq!(
        v["levels"][0]["requests"]["sent"], 2,
        "the measuring request is not part of the sweep"
    );

    let out = run(sim.base_url(), true).await;
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(sim.received().len(), 3 + 2, "--quiet: no measuring request");

    let silent = common::simulator(Script {
        fault: Fault::NoUsage,
        ..common::stream(5, 2, 8)
    })
    .await;
    let out = run(silent.base_url(), false).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let (line, n) = prompt_line(&stderr);
    assert!(
        line.contains("estimated") && line.contains("the server reported no prompt token count"),
        "{line}"
    );
    // "Say hello": 9 characters → 3 tokens, plus 4 for the message.
    assert_eq!(n, 7, "{line}");
}

/// A prompt-length sweep (`--prompt-tokens`) against a simulator whose prefill grows with the
/// prompt: each level sends a generated prompt of its size after the scenario's system message,
/// the server counts exactly that, TTFT grows level by level as the simulator's own TTFT does,
/// and the prefill speeds are bounded by the simulator's ground truth of the same run. Judged
/// on what the simulator recorded per request, not on scripted constants alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_length_sweep_follows_the_simulators_prefill() {
    let mut script = common::stream(5, 1, 40);
    script.load.prefill_per_token = Duration::from_micros(250);
    script.load.per_request_metrics = true;
    let sim = common::simulator(script).await;
    let text = yaml(&sim.base_url()).replace(
        "messages: [{role: user, content: \"Say hello\"}]",
        "messages: [{role: system, content: \"Be brief.\"}, {role: user, content: \"Say hello\"}]",
    );
    let sizes = [64, 500, 2000];
    let r = common::bench::bench_config(&text, plan(common::bench::prompts(&sizes), 3, 0)).await;
    assert_eq!(r.levels.len(), 3);

    let code = llm_probe::config::long_prompt::code_word("chat");
    let received = sim.received();
    assert_eq!(received.len(), 9, "three requests per level, nothing else");
    // Per level, the simulator's truth of each request in send order (concurrency 1).
    let mut truth_medians = Vec::new();
    for (i, &tokens) in sizes.iter().enumerate() {
        // The generated words, the system message's 2 and the cold-cache nonce's 2.
        let words = u64::from(tokens) + 4;
        let truths: Vec<_> = (received.iter())
            .filter_map(|q| q.truth.get().copied())
            .filter(|t| t.prompt_tokens == words)
            .collect();
        assert_eq!(truths.len(), 3, "level {tokens}: {received:?}");
        let (stats, _) = &r.levels[i];
        assert_eq!(stats.load.prompt_tokens(), Some(tokens));
        assert_eq!(
            (stats.requests.sent, stats.requests.succeeded),
            (3, 3),
            "{:?}",
            stats.requests.failures_by_reason
        );
        assert_eq!(
            stats.prompt_tokens.p50,
            Some(words as f64),
            "the server's count"
        );
        let mut records: Vec<_> = r.records.iter().filter(|q| q.level == i).collect();
        records.sort_by_key(|q| q.index);
        for (q, truth) in records.iter().zip(&truths) {
            let s = q.result.as_ref().unwrap();
            assert_eq!(s.prompt_tokens, Some(words));
            // Never faster than the simulator: its TTFT is the floor of the client's.
            assert!(s.ttft >= truth.ttft.as_secs_f64(), "{s:?} {truth:?}");
            let speed = s.prefill_tokens_per_second.expect("a prefill speed");
            assert!(
                (speed - words as f64 / s.ttft).abs() < 1e-6 * speed,
                "{s:?}"
            );
            let ceiling = words as f64 / truth.ttft.as_secs_f64();
            assert!(speed <= ceiling, "{speed} > {ceiling}");
            // The server's own prefill (vLLM's per-request metrics) lies inside the client's
            // TTFT and is no shorter than the simulator's.
            let server = s
                .server_prefill_tokens_per_second
                .expect("the server's speed");
            assert!(
                speed <= server && server <= ceiling,
                "{speed} {server} {ceiling}"
            );
        }
        let mut t: Vec<f64> = truths.iter().map(|t| t.ttft.as_secs_f64()).collect();
        t.sort_by(f64::total_cmp);
        truth_medians.push(t[1]);
    }
    // The simulator's TTFT grows with the prompt, and so does the sweep's, level by level.
    let p50: Vec<f64> = r.levels.iter().map(|(s, _)| s.ttft.p50.unwrap()).collect();
    for i in 1..sizes.len() {
        assert!(truth_medians[i] > truth_medians[i - 1], "{truth_medians:?}");
        assert!(
            p50[i] > p50[i - 1],
            "TTFT P50 {p50:?}, the simulator's {truth_medians:?}"
        );
    }
    // The generated prompt follows the system message and carries the needle, answered.
    for q in &received {
        let messages = q.body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert_eq!(messages[0]["role"], "system");
        assert!(messages[1]["content"].as_str().unwrap().contains(&code));
    }

    let v = json::to_json(&r);
    for (i, &tokens) in sizes.iter().enumerate() {
        let level = &v["levels"][i];
        assert_eq!(level["prompt_tokens_sent"], tokens, "{level}");
        assert_eq!(level["concurrency"], 1);
        assert!(level["rate"].is_null());
        assert_eq!(level["prompt_tokens"]["p50"], f64::from(tokens + 4));
        assert!(level["prefill_tokens_per_second"]["p50"].as_f64().unwrap() > 0.0);
        assert!(
            level["server_prefill_tokens_per_second"]["p50"]
                .as_f64()
                .unwrap()
                > 0.0
        );
    }
    assert_eq!(v["requests"][8]["prompt_tokens_sent"], 2000);
    assert_eq!(v["metadata"]["plan"]["needle"], true);
    let text = llm_probe::bench::table::to_text(&r);
    assert!(
        text.contains("prompt-length sweep at concurrency 1")
            && text.contains("prompt  counted  ok/sent")
            && text.contains("\n2000    2004     3/3"),
        "{text}"
    );
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(
        llm_probe::bench::command::write_all(&r, dir.path()).unwrap(),
        7
    );
    let prefill = std::fs::read_to_string(dir.path().join("prefill.svg")).unwrap();
    assert!(
        prefill.contains("prompt tokens (generated, log scale)"),
        "{prefill}"
    );
    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(md.contains("| prompt | counted |"), "{md}");
}

/// A prompt-length sweep's plan, printed before any token is spent: the smallest generated
/// prompt measured with one request of max_tokens 1, the larger ones extrapolated from it, and
/// each level's size and token spend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_length_plan_shows_each_size_and_its_spend() {
    let sim = common::simulator(common::stream(5, 1, 8)).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.yaml");
    std::fs::write(&file, yaml(&sim.base_url())).unwrap();
    let f = file.to_str().unwrap().to_string();
    let out = tokio::task::spawn_blocking(move || {
        cli(&[
            "--config.file",
            &f,
            "--prompt-tokens",
            "64,1000",
            "--requests",
            "1",
            "--pause",
            "0s",
            "--output",
            "json",
        ])
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    for line in [
        "measuring the prompt: one request of the smallest generated prompt (64 tokens) with max_tokens 1".to_string(),
        "prompt: 66 tokens for the generated 64, measured".into(),
        // 66 for 64 words: 1.03 tokens per further word.
        "the larger prompts extrapolated from it (1.25 per further word at most): 1000 → ≈ 1032"
            .into(),
        format!(
            "{:<22} up to 1 requests ≈ 98 tokens (66 prompt + 32 max_tokens each)",
            "prompt 64 tokens"
        ),
        format!(
            "{:<22} up to 1 requests ≈ 1064 tokens (1032 prompt + 32 max_tokens each)",
            "prompt 1000 tokens"
        ),
        "token spend: up to 1162 tokens (2 requests × (their level's prompt + 32 max_tokens))"
            .into(),
    ] {
        assert!(stderr.contains(&line), "{line:?} not in\n{stderr}");
    }
    let words =
        |q: &llm_probe::simulate::ReceivedRequest| llm_probe::simulate::prompt_tokens(&q.body);
    let sent: Vec<(u64, u64)> = (sim.received().iter())
        .map(|q| (q.body["max_tokens"].as_u64().unwrap(), words(q)))
        .collect();
    assert_eq!(
        sent,
        [(1, 66), (32, 66), (32, 1002)],
        "the measuring request first"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["levels"][1]["prompt_tokens_sent"], 1000);
}

#[test]
fn a_conversation_is_refused_and_a_canary_benched_as_one_request() {
    let cfg = |extra: &str| {
        let yaml = format!("scenarios:\n  - name: chat\n    messages: [{{role: user, content: hi}}]\n    max_tokens: 8\n{extra}targets:\n  - name: sim\n    protocol: openai-chat\n    base_url: http://h/v1\n    model: m\n");
        llm_probe::config::parse(&yaml, "<test>", &|_| None).unwrap()
    };
    let e = select(&cfg("    turns: [\"and then?\"]\n"), None, None).unwrap_err();
    assert!(e.contains("is a multi-turn conversation (turns:)"), "{e}");
    let (_, s) = select(&cfg("    cache_canary: true\n"), None, None).unwrap();
    assert!(!s.cache_canary);
}
