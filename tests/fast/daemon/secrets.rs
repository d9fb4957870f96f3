//! A unique API key and unique values of secret headers (built-in ones and one marked with
//! `secret_headers`) are set and every output channel is searched for them: stdout and stderr
//! of `check-config`, `probe-once` (text and JSON, success and failure) and `run` at trace
//! level, `/metrics` in both formats, and the landing page. The simulator's log of received
//! requests proves the key and headers were really sent, so the test cannot pass vacuously.
//!
//! Config errors get the same search: files whose URL fields hold credentials (user-info,
//! query values, in every URL-taking field and scheme) are checked, probed and run, and loaded
//! by a running daemon on SIGHUP and `POST /-/reload`; no message may quote the secret.

use crate::common;

use std::io::Read;
use std::process::Command;
use std::time::Duration;

use llm_probe::simulate::{Fault, Script};

const BIN: &str = env!("CARGO_BIN_EXE_llm-probe");
const KEY: &str = "sk-llmprobe-SECRET-7d41c9e2";
const KEY_ENV: &str = "LLM_PROBE_TEST_SECRET_KEY";

/// Secret header values: (header, value). `X-Tenant` is secret only because the file says so.
const HEADERS: &[(&str, &str)] = &[
    ("Cookie", "session=hdr-SECRET-cookie-51e2"),
    ("Proxy-Authorization", "Basic hdr-SECRET-proxy-9c07"),
    ("X-Goog-Api-Key", "hdr-SECRET-goog-44ad"),
    ("X-Tenant", "hdr-SECRET-tenant-b3f8"),
];

fn config(dir: &tempfile::TempDir, base_url: &str) -> std::path::PathBuf {
    let headers: Vec<String> = HEADERS
        .iter()
        .map(|(k, v)| format!("{k}: \"{v}\""))
        .collect();
    let yaml = common::yaml(
        base_url,
        "1s",
        &common::scenario("chat", 8),
        &format!(
            "    api_key_env: {KEY_ENV}\n    headers: {{{}}}\n    secret_headers: [X-Tenant]\n",
            headers.join(", ")
        ),
    );
    let p = dir.path().join("probes.yaml");
    std::fs::write(&p, yaml).unwrap();
    p
}

fn run(args: &[&str], config: &std::path::Path) -> String {
    let out = Command::new(BIN)
        .args(["--log.level", "trace"])
        .args(args)
        .arg("--config.file")
        .arg(config)
        .env(KEY_ENV, KEY)
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `run` at trace level on `config` with the key in its environment, once it serves: the
/// process, its log, and the address it serves on.
fn trace_daemon(config: &std::path::Path) -> (common::ChildGuard, common::StderrLines, String) {
    let args = [
        "--log.level",
        "trace",
        "run",
        "--web.listen-address",
        "127.0.0.1:0",
    ];
    let (child, mut err) = common::spawn_logged(BIN, &args, config, &[(KEY_ENV, KEY)]);
    let addr = err.served_addr();
    (child, err, addr)
}

fn assert_no_key(channel: &str, text: &str) {
    assert!(
        !text.contains(KEY),
        "the API key leaked into {channel}:\n{text}"
    );
    assert!(
        !text.contains("7d41c9e2"),
        "part of the API key leaked into {channel}"
    );
    assert!(
        !text.contains("hdr-SECRET"),
        "a secret header value leaked into {channel}:\n{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_never_appears_in_any_output() {
    let script = Script {
        ttft: Duration::from_millis(10),
        itl: Duration::from_millis(1),
        tokens: 5,
        ..Script::default()
    };
    let ok = common::simulator(script.clone()).await;
    let bad = common::simulator(Script {
        fault: Fault::Http500,
        ..script
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let ok_cfg = config(&dir, &ok.base_url());
    let bad_dir = tempfile::tempdir().unwrap();
    let bad_cfg = config(&bad_dir, &bad.base_url());

    let checks = tokio::task::spawn_blocking(move || {
        let mut outputs = vec![
            ("check-config", run(&["check-config"], &ok_cfg)),
            ("probe-once text", run(&["probe-once"], &ok_cfg)),
            (
                "probe-once json",
                run(&["probe-once", "--output", "json"], &ok_cfg),
            ),
            (
                "probe-once failing",
                run(&["probe-once", "--output", "json"], &bad_cfg),
            ),
            (
                "check-config --log.format json",
                run(&["--log.format", "json", "check-config"], &ok_cfg),
            ),
        ];
        // The daemon at trace level, its /metrics and landing page.
        let (mut child, err, addr) = trace_daemon(&ok_cfg);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let get = |path: &str, accept: &str| {
            rt.block_on(async {
                reqwest::Client::new()
                    .get(format!("http://{addr}{path}"))
                    .header("accept", accept)
                    .send()
                    .await
                    .unwrap()
                    .text()
                    .await
                    .unwrap()
            })
        };
        // Until the daemon has counted a probe and its last probe succeeded (the series is
        // registered at 0 when the daemon starts, so its presence alone proves nothing).
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        let metrics = loop {
            let metrics = get("/metrics", "text/plain");
            let probes = common::sample(&metrics, "llm_probe_probes_total", &[("target", "sim")]);
            let ok = common::sample(
                &metrics,
                "llm_probe_last_probe_success",
                &[("target", "sim")],
            );
            if probes.is_some_and(|n| n >= 1.0) && ok == Some(1.0) {
                break metrics;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the daemon finished no successful probe within 15 s:\n{metrics}"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        outputs.push(("/metrics", metrics));
        outputs.push((
            "/metrics openmetrics",
            get("/metrics", "application/openmetrics-text"),
        ));
        outputs.push(("landing page", get("/", "text/html")));
        outputs.push(("target page", get("/targets/sim", "text/html")));
        outputs.push((
            "/api/v1/targets",
            get("/api/v1/targets", "application/json"),
        ));
        outputs.push(("/api/v1/probes", get("/api/v1/probes", "application/json")));
        common::interrupt(&child.0);
        child.0.wait().unwrap();
        let log = err.finish();
        let mut stdout = String::new();
        child
            .0
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut stdout)
            .unwrap();
        assert!(log.contains("level=trace"), "trace logging was on: {log}");
        outputs.push(("daemon stderr at trace", log));
        outputs.push(("daemon stdout", stdout));
        outputs
    })
    .await
    .unwrap();

    for (channel, text) in &checks {
        assert_no_key(channel, text);
    }
    // And the key was really used: every probe carried it in its Authorization header.
    let sent = ok.received();
    assert!(
        sent.len() >= 3,
        "probe-once twice and the daemon at least once: {}",
        sent.len()
    );
    for r in sent.iter().chain(bad.received().iter()) {
        let auth = r
            .headers
            .iter()
            .find(|(k, _)| k == "authorization")
            .map(|(_, v)| v.as_str());
        assert_eq!(auth, Some(format!("Bearer {KEY}").as_str()));
        for (name, value) in HEADERS {
            let sent = r
                .headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str());
            assert_eq!(sent, Some(*value), "{name} was sent");
        }
    }
}

/// Gemini on AI Studio (the key in `x-goog-api-key`, from the environment) and on Vertex AI (an
/// access token in `Authorization: Bearer`, from a file): `check-config` and `probe-once`
/// (text and JSON, a success, an HTTP 500 and an error inside the stream) never print the key or
/// the token, and the simulator shows each was sent in its one header and not in the URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_and_vertex_credentials_never_appear_in_any_output() {
    const TOKEN: &str = "ya29.vertex-SECRET-token-0b6e";
    let script = Script {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        tokens: 4,
        reasoning_tokens: 1,
        ..Script::default()
    };
    let mut sims = Vec::new();
    for fault in [Fault::None, Fault::Http500, Fault::ErrorAfterTokens] {
        sims.push(
            common::simulator(Script {
                fault,
                ..script.clone()
            })
            .await,
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let token_file = dir.path().join("vertex-token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let mut configs = Vec::new();
    for (i, sim) in sims.iter().enumerate() {
        let yaml = format!(
            "scenarios:\n{}targets:\n  - name: studio\n    protocol: gemini\n    base_url: {}\n    model: gemini-2.5-flash\n    api_key_env: {KEY_ENV}\n  - name: vertex\n    protocol: vertex-gemini\n    base_url: {}/v1/projects/p-1/locations/us-central1\n    model: gemini-2.5-pro\n    api_key_file: {}\n",
            common::scenario("chat", 8),
            sim.root_url(),
            sim.root_url(),
            token_file.display(),
        );
        let p = dir.path().join(format!("probes-{i}.yaml"));
        std::fs::write(&p, yaml).unwrap();
        configs.push(p);
    }
    let outputs = tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        for cfg in &configs {
            out.push(run(&["check-config"], cfg));
            out.push(run(&["probe-once"], cfg));
            out.push(run(&["probe-once", "--output", "json"], cfg));
        }
        out
    })
    .await
    .unwrap();
    // Not vacuous: the clean run succeeded on both, the others failed as scripted.
    let successes = |t: &str| t.replace(' ', "").matches("\"success\":true").count();
    assert_eq!(successes(&outputs[2]), 2, "{}", outputs[2]);
    assert_eq!(successes(&outputs[5]) + successes(&outputs[8]), 0);
    assert!(outputs[5].contains("http_status"), "{}", outputs[5]);
    assert!(outputs[8].contains("stream_error"), "{}", outputs[8]);
    for text in &outputs {
        assert_no_key("gemini/vertex output", text);
        assert!(!text.contains("0b6e"), "the Vertex token leaked:\n{text}");
    }
    for sim in &sims {
        let received = sim.received();
        assert_eq!(received.len(), 4, "two probe-once runs × two targets");
        for r in received.iter() {
            let header = |name: &str| {
                (r.headers.iter())
                    .find(|(k, _)| k.eq_ignore_ascii_case(name))
                    .map(|(_, v)| v.as_str())
            };
            assert!(
                !r.path.contains(KEY) && !r.path.contains(TOKEN),
                "{}",
                r.path
            );
            if r.path.starts_with("/v1beta/") {
                assert_eq!(header("x-goog-api-key"), Some(KEY));
                assert_eq!(header("authorization"), None);
            } else {
                assert!(r.path.contains("/publishers/google/models/"), "{}", r.path);
                assert_eq!(
                    header("authorization"),
                    Some(format!("Bearer {TOKEN}").as_str())
                );
                assert_eq!(header("x-goog-api-key"), None);
            }
        }
    }
}

// ---- config errors ------------------------------------------------------------------

/// The secret every bad config below hides in a field: a URL, a key field, a header.
const CONFIG_SECRET: &str = "cfg-SECRET-8e31d0";

/// Config files that are wrong in a field holding [`CONFIG_SECRET`], with a phrase each one's
/// error must contain (so the search is not vacuous).
fn bad_configs() -> Vec<(&'static str, String, &'static str)> {
    let s = CONFIG_SECRET;
    let head = "scenarios:\n  - {name: chat, messages: [{role: user, content: hi}], max_tokens: 8}\ntargets:\n";
    let target = |name: &str, extra: &str| {
        format!("  - name: {name}\n    protocol: openai-chat\n    model: m\n{extra}")
    };
    vec![
        (
            "url fields",
            format!(
                "{head}{}{}{}{}{}{}{}{}",
                target("userinfo", &format!("    base_url: \"http://admin:{s}@/v1\"\n")),
                target("query", &format!("    base_url: \"https://api.example.com/v1?key={s}\"\n")),
                target("fragment", &format!("    base_url: \"https://h/v1#access_token={s}\"\n")),
                target("ftp", &format!("    base_url: \"ftp://user:{s}@host/\"\n")),
                target("no-scheme", &format!("    base_url: \"user:{s}@host:8000/v1\"\n")),
                target("port", &format!("    base_url: \"http://u:{s}@h:99999/v1\"\n")),
                target("slash", &format!("    base_url: \"http://u:pa/{s}@h/v1\"\n")),
                target(
                    "version",
                    &format!("    base_url: http://h/v1\n    version_path: \"/version?key={s}\"\n"),
                ),
            ),
            "contains a user name or password",
        ),
        (
            "azure fields",
            format!(
                "{head}  - {{name: az, protocol: azure-openai, base_url: 'https://h', model: m, deployment: 'd?api-key={s}', api_version: '2024-10-21&api-key={s}'}}\n"
            ),
            "is not a valid Azure deployment name",
        ),
        (
            "key pasted into api_key_env",
            format!("{head}{}", target("k", &format!("    base_url: http://h/v1\n    api_key_env: sk-proj-{s}\n"))),
            "not the key itself",
        ),
        (
            "key pasted into api_key_file",
            format!("{head}{}", target("k", &format!("    base_url: http://h/v1\n    api_key_file: sk-ant-{s}\n"))),
            "may be the key itself|not shown",
        ),
        (
            "header written as one string",
            format!("{head}{}", target("h", &format!("    base_url: http://h/v1\n    headers: \"Authorization: Bearer {s}\"\n"))),
            "headers must be",
        ),
        (
            "header name holding its value",
            format!("{head}{}", target("h", &format!("    base_url: http://h/v1\n    headers: {{\"Authorization: Bearer {s}\": x}}\n"))),
            "is not a valid HTTP header name",
        ),
    ]
}

/// Every channel a config error reaches: `check-config` (both log formats), `probe-once` (text
/// and JSON), `run` at start-up, and a running daemon's log and `POST /-/reload` answer when
/// the file turns bad under it (SIGHUP and HTTP).
#[test]
fn config_errors_never_echo_a_secret_on_any_channel() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("probes.yaml");
    let mut outputs: Vec<(String, String)> = Vec::new();
    for (what, yaml, phrase) in bad_configs() {
        std::fs::write(&path, &yaml).unwrap();
        let runs: [(&str, &[&str]); 7] = [
            ("check-config", &["check-config"]),
            (
                "check-config --skip-secrets",
                &["check-config", "--skip-secrets"],
            ),
            (
                "check-config json log",
                &["--log.format", "json", "check-config"],
            ),
            ("probe-once", &["probe-once"]),
            ("probe-once json", &["probe-once", "--output", "json"]),
            ("run", &["run", "--web.listen-address", "127.0.0.1:0"]),
            (
                "run json log",
                &[
                    "--log.format",
                    "json",
                    "run",
                    "--web.listen-address",
                    "127.0.0.1:0",
                ],
            ),
        ];
        for (channel, args) in runs {
            let out = run(args, &path);
            assert!(
                phrase.split('|').any(|p| out.contains(p)),
                "{what} / {channel}: {phrase:?} not reported:\n{out}"
            );
            outputs.push((format!("{what} / {channel}"), out));
        }
    }

    // A running daemon whose file turns bad: the reload is refused, and logged.
    let sim_dir = tempfile::tempdir().unwrap();
    let good = std::fs::read_to_string(config(&sim_dir, "http://127.0.0.1:9/v1")).unwrap();
    std::fs::write(&path, good).unwrap();
    let (mut child, mut err, addr) = trace_daemon(&path);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // Each bad file is loaded by `POST /-/reload` and by SIGHUP (the HTTP round trip first, so
    // the SIGHUP handler, installed just after the daemon starts serving, is in place).
    for (what, yaml, phrase) in bad_configs() {
        std::fs::write(&path, &yaml).unwrap();
        let body = rt.block_on(async {
            let r = reqwest::Client::new()
                .post(format!("http://{addr}/-/reload"))
                .send()
                .await
                .unwrap();
            format!("HTTP {} {}", r.status(), r.text().await.unwrap())
        });
        assert!(!body.starts_with("HTTP 200"), "{what}: {body}");
        outputs.push((format!("{what} / POST /-/reload"), body));
        let line = err.until("reload failed");
        assert!(
            phrase.split('|').any(|p| line.contains(p)),
            "{what}: {line}"
        );
        common::signal(&child.0, libc::SIGHUP);
        let line = err.until("reload failed");
        assert!(
            phrase.split('|').any(|p| line.contains(p)),
            "{what}: {line}"
        );
    }
    common::interrupt(&child.0);
    child.0.wait().unwrap();
    outputs.push(("daemon log, reloads".into(), err.finish()));

    for (channel, text) in &outputs {
        assert!(
            !text.contains(CONFIG_SECRET) && !text.contains("8e31d0"),
            "the secret leaked into {channel}:\n{text}"
        );
    }
}

// ---- AWS credentials (protocol bedrock) ------------------------------------------------

const AWS_ID: &str = "AKIDsecretsTEST4f19";
const AWS_SECRET: &str = "aws-SECRET-key/0b7e+c2d9a61f3";
const AWS_TOKEN: &str = "aws-SESSION-token/9d2c+77e1ab4==";
/// Pieces each credential would leak as, cut or whole.
const AWS_MARKERS: &[&str] = &[
    "AKIDsecrets",
    "4f19",
    "aws-SECRET",
    "0b7e",
    "aws-SESSION",
    "9d2c",
];

fn bedrock_config(dir: &tempfile::TempDir, root_url: &str) -> std::path::PathBuf {
    let yaml = format!(
        "defaults:\n  interval: 1s\nscenarios:\n{}\ntargets:\n  - name: sim\n    protocol: bedrock\n    base_url: {root_url}\n    model: anthropic.claude-3-haiku-20240307-v1:0\n    aws_region: us-east-1\n",
        common::scenario("chat", 8)
    );
    let p = dir.path().join("probes.yaml");
    std::fs::write(&p, yaml).unwrap();
    p
}

const AWS_ENV: &[(&str, &str)] = &[
    ("AWS_ACCESS_KEY_ID", AWS_ID),
    ("AWS_SECRET_ACCESS_KEY", AWS_SECRET),
    ("AWS_SESSION_TOKEN", AWS_TOKEN),
];

fn run_aws(args: &[&str], config: &std::path::Path, env: &[(&str, &str)]) -> String {
    run_aws_at("trace", args, config, env)
}

fn run_aws_at(
    level: &str,
    args: &[&str],
    config: &std::path::Path,
    env: &[(&str, &str)],
) -> String {
    let out = Command::new(BIN)
        .args(["--log.level", level])
        .args(args)
        .arg("--config.file")
        .arg(config)
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env_remove("AWS_SESSION_TOKEN")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn assert_no_aws_secret(channel: &str, text: &str) {
    for m in AWS_MARKERS {
        assert!(
            !text.contains(m),
            "an AWS credential ({m}) leaked into {channel}:\n{text}"
        );
    }
}

/// A bedrock target's access key id, secret access key and session token never appear in any
/// output channel (check-config, probe-once text and JSON, success, HTTP error, stream
/// exception, incomplete credentials, the daemon at trace level, /metrics, the pages and the
/// API, and the `Debug` of the config and of a built request), and a server that echoes them
/// back has them redacted; the simulator proves they were really used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_credentials_never_appear_in_any_output() {
    let script = Script {
        ttft: Duration::from_millis(10),
        itl: Duration::from_millis(1),
        tokens: 5,
        ..Script::default()
    };
    let ok = common::simulator(script.clone()).await;
    let http500 = common::simulator(Script {
        fault: Fault::Http500,
        ..script.clone()
    })
    .await;
    let throttled = common::simulator(Script {
        fault: Fault::ErrorOnly,
        ..script
    })
    .await;
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let ok_cfg = bedrock_config(&dirs[0], &ok.root_url());
    let http500_cfg = bedrock_config(&dirs[1], &http500.root_url());
    let throttled_cfg = bedrock_config(&dirs[2], &throttled.root_url());

    // Debug of the loaded config and of a signed request.
    let env = |v: &str| {
        AWS_ENV
            .iter()
            .find(|(k, _)| *k == v)
            .map(|(_, val)| val.to_string())
    };
    let cfg = llm_probe::config::parse(
        &std::fs::read_to_string(&ok_cfg).unwrap(),
        "probes.yaml",
        &env,
    )
    .unwrap();
    let t = &cfg.targets[0];
    let spec = llm_probe::protocol::build_request(t, &t.scenarios[0], None);
    assert!(spec
        .headers
        .iter()
        .any(|(k, v)| k == "authorization" && v.contains(AWS_ID)));
    assert_no_aws_secret("Debug of the config", &format!("{cfg:?}"));
    assert_no_aws_secret("Debug of the request", &format!("{spec:?}"));
    assert_no_aws_secret("check-config summary", &t.summary());

    let checks = tokio::task::spawn_blocking(move || {
        let mut outputs = vec![
            ("check-config", run_aws(&["check-config"], &ok_cfg, AWS_ENV)),
            (
                "probe-once text",
                run_aws(&["probe-once"], &ok_cfg, AWS_ENV),
            ),
            (
                // The signer logs its parameters at trace: asking for it by name changes nothing.
                "probe-once, aws_sigv4=trace asked for",
                run_aws_at(
                    "trace,aws_sigv4=trace,aws_smithy_runtime_api=trace",
                    &["probe-once"],
                    &ok_cfg,
                    AWS_ENV,
                ),
            ),
            (
                "probe-once json",
                run_aws(&["probe-once", "--output", "json"], &ok_cfg, AWS_ENV),
            ),
            (
                "probe-once HTTP 500",
                run_aws(&["probe-once", "--output", "json"], &http500_cfg, AWS_ENV),
            ),
            (
                "probe-once throttled",
                run_aws(&["probe-once"], &throttled_cfg, AWS_ENV),
            ),
            (
                "check-config, secret missing",
                run_aws(&["check-config"], &ok_cfg, &AWS_ENV[..1]),
            ),
            (
                "probe-once, secret missing",
                run_aws(&["probe-once"], &ok_cfg, &[AWS_ENV[0], AWS_ENV[2]]),
            ),
        ];
        let (mut child, mut err) = common::spawn_logged(
            BIN,
            &[
                "--log.level",
                "trace",
                "run",
                "--web.listen-address",
                "127.0.0.1:0",
            ],
            &ok_cfg,
            AWS_ENV,
        );
        let addr = err.served_addr();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let get = |path: &str| {
            rt.block_on(async {
                reqwest::get(format!("http://{addr}{path}"))
                    .await
                    .unwrap()
                    .text()
                    .await
                    .unwrap()
            })
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        let metrics = loop {
            let metrics = get("/metrics");
            let ok = common::sample(
                &metrics,
                "llm_probe_last_probe_success",
                &[("target", "sim")],
            );
            if ok == Some(1.0) {
                break metrics;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no successful bedrock probe within 15 s:\n{metrics}"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        outputs.push(("/metrics", metrics));
        outputs.push(("landing page", get("/")));
        outputs.push(("target page", get("/targets/sim")));
        outputs.push(("/api/v1/probes", get("/api/v1/probes")));
        common::interrupt(&child.0);
        child.0.wait().unwrap();
        outputs.push(("daemon stderr at trace", err.finish()));
        outputs
    })
    .await
    .unwrap();
    for (channel, text) in &checks {
        assert_no_aws_secret(channel, text);
    }
    // Not vacuous: the incomplete credentials were reported (naming the variable), the
    // exception and the HTTP error were reached, and every request to the healthy simulator was
    // signed with the access key and carried the session token.
    let text = |name: &str| &checks.iter().find(|(c, _)| *c == name).unwrap().1;
    assert!(text("check-config, secret missing").contains("AWS_SECRET_ACCESS_KEY"));
    assert!(text("probe-once, secret missing").contains("AWS_SECRET_ACCESS_KEY"));
    assert!(text("probe-once throttled").contains("throttlingException"));
    assert!(text("probe-once HTTP 500").contains("http_status"));
    let sent = ok.received();
    assert!(sent.len() >= 3, "{}", sent.len());
    for r in &sent {
        let header = |n: &str| {
            r.headers
                .iter()
                .find(|(k, _)| k == n)
                .map(|(_, v)| v.as_str())
        };
        assert!(
            header("authorization").is_some_and(|a| a.contains(&format!("Credential={AWS_ID}/")))
        );
        assert_eq!(header("x-amz-security-token"), Some(AWS_TOKEN));
    }
}
