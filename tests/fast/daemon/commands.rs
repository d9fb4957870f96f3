//! `check-config` warns on every
//! endpoint-path `base_url` (and a missing `/v1`) with the fix; a 404's detail names the path the
//! probe requested; the simulator answers 404 where a real server would; `--web.listen-address
//! :PORT` binds; `probe-once` probes pairs concurrently and prints them in config order;
//! `--version` names the commit.

use crate::common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use llm_probe::simulate::Script;

const BIN: &str = env!("CARGO_BIN_EXE_llm-probe");

fn write(dir: &tempfile::TempDir, text: &str) -> std::path::PathBuf {
    let path = dir.path().join("probes.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

fn llm_probe(args: &[&str], config: &std::path::Path) -> (Option<i32>, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .arg("--config.file")
        .arg(config)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn check_config_warns_on_every_endpoint_path_with_the_fix() {
    let ends = [
        ("openai-chat", "/v1/chat/completions"),
        ("openai-completions", "/v1/completions"),
        ("openai-responses", "/v1/responses"),
        ("anthropic", "/v1/messages"),
        ("ollama", "/api/chat"),
        ("tgi", "/generate_stream"),
        ("llama-cpp", "/completion"),
    ];
    let mut yaml = format!("scenarios:\n{}targets:\n", common::scenario("s", 4));
    for (i, (protocol, end)) in ends.iter().enumerate() {
        yaml += &format!("  - name: t{i}\n    protocol: {protocol}\n    base_url: http://127.0.0.1:9{end}\n    model: m\n");
    }
    yaml += "  - name: unversioned\n    protocol: openai-chat\n    base_url: http://127.0.0.1:9\n    model: m\n";
    yaml += "  - name: fine\n    protocol: openai-chat\n    base_url: http://127.0.0.1:9/v1\n    model: m\n";
    let dir = tempfile::tempdir().unwrap();
    let (code, stdout, stderr) = llm_probe(&["check-config"], &write(&dir, &yaml));
    assert_eq!(code, Some(0), "warnings do not fail the check: {stderr}");
    assert!(stdout.contains("OK, 9 targets"), "{stdout}");
    for (i, (_, end)) in ends.iter().enumerate() {
        let line = stderr
            .lines()
            .find(|l| l.contains(&format!("target \"t{i}\"")))
            .unwrap_or_else(|| panic!("no warning for {end}: {stderr}"));
        let path = if end.starts_with("/v1") { "/v1" } else { "" };
        assert!(
            line.contains("warning") && line.contains("ends in the endpoint path"),
            "{line}"
        );
        assert!(
            line.contains(&format!("set base_url to http://127.0.0.1:9{path}.")),
            "{line}"
        );
    }
    let unversioned = stderr
        .lines()
        .find(|l| l.contains("\"unversioned\""))
        .unwrap();
    assert!(
        unversioned.contains("no version segment") && unversioned.contains("http://127.0.0.1:9/v1"),
        "{unversioned}"
    );
    assert!(!stderr.contains("\"fine\""), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_404_names_the_path_and_the_simulator_serves_only_real_paths() {
    let sim = common::simulator(Script {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        tokens: 3,
        ..Script::default()
    })
    .await;
    let wrong = [
        format!("{}/chat/completions", sim.base_url()),
        sim.root_url(),
        format!("{}/v2", sim.root_url()),
    ];
    let mut yaml = format!("scenarios:\n{}targets:\n", common::scenario("s", 4));
    for (i, url) in wrong.iter().enumerate() {
        yaml += &format!(
            "  - name: w{i}\n    protocol: openai-chat\n    base_url: {url}\n    model: m\n"
        );
    }
    yaml += &format!(
        "  - name: right\n    protocol: openai-chat\n    base_url: {}\n    model: m\n",
        sim.base_url()
    );
    let dir = tempfile::tempdir().unwrap();
    let path = write(&dir, &yaml);
    let (code, stdout, stderr) =
        tokio::task::spawn_blocking(move || llm_probe(&["probe-once", "--output", "json"], &path))
            .await
            .unwrap();
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    let lines: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let names: Vec<&str> = lines
        .iter()
        .map(|v| v["target"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["w0", "w1", "w2", "right"], "config order");
    for (v, requested) in lines.iter().zip([
        "/v1/chat/completions/chat/completions",
        "/chat/completions",
        "/v2/chat/completions",
    ]) {
        assert_eq!(v["failure_reason"], "http_status", "{v}");
        let detail = v["failure_detail"].as_str().unwrap();
        assert!(
            detail.starts_with(&format!("HTTP 404 Not Found from POST {requested} ")),
            "{detail}"
        );
    }
    assert_eq!(lines[3]["success"], true, "{}", lines[3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_once_probes_pairs_at_once_and_prints_them_in_config_order() {
    // Nine pairs of 600 ms each: one after another at least 5.4 s.
    let sim = common::simulator(Script {
        ttft: Duration::from_millis(600),
        itl: Duration::from_millis(1),
        tokens: 2,
        ..Script::default()
    })
    .await;
    let mut yaml = String::from("defaults:\n  timeout: 5s\nscenarios:\n");
    for s in ["c", "a", "b"] {
        yaml += &common::scenario(s, 4);
    }
    yaml += "targets:\n";
    for t in ["z", "x", "y"] {
        yaml += &format!(
            "  - name: {t}\n    protocol: openai-chat\n    base_url: {}\n    model: m\n",
            sim.base_url()
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let path = write(&dir, &yaml);
    let started = Instant::now();
    let (code, stdout, stderr) =
        tokio::task::spawn_blocking(move || llm_probe(&["probe-once", "--output", "json"], &path))
            .await
            .unwrap();
    let took = started.elapsed();
    assert_eq!(code, Some(0), "{stderr}");
    let order: Vec<String> = stdout
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            format!(
                "{}/{}",
                v["target"].as_str().unwrap(),
                v["scenario"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        order,
        ["z/c", "z/a", "z/b", "x/c", "x/a", "x/b", "y/c", "y/a", "y/b"]
    );
    assert!(
        took < Duration::from_millis(4500),
        "nine 600 ms probes took {took:?}"
    );
}

#[test]
fn listen_address_takes_a_bare_port_and_version_names_the_commit() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = format!(
        "scenarios:\n{}targets:\n  - name: t\n    protocol: openai-chat\n    base_url: http://127.0.0.1:9/v1\n    model: m\n",
        common::scenario("s", 4)
    );
    let path = write(&dir, &yaml);
    for listen in [":0", "localhost:0", "[::1]:0"] {
        let mut child = common::ChildGuard(
            Command::new(BIN)
                .args(["run", "--web.listen-address", listen, "--config.file"])
                .arg(&path)
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let mut lines =
            std::io::BufRead::lines(std::io::BufReader::new(child.0.stderr.take().unwrap()));
        let addr = loop {
            let line = match lines.next() {
                Some(l) => l.unwrap(),
                // No IPv6 on this host: nothing to bind.
                None if listen.starts_with('[') => break None,
                None => panic!("{listen}: stderr ended before the daemon served"),
            };
            if let Some(rest) = line.split("serving metrics on http://").nth(1) {
                break Some(rest.split('/').next().unwrap().to_string());
            }
        };
        common::interrupt(&child.0);
        let _ = child.0.wait();
        let Some(addr) = addr else { continue };
        match listen {
            ":0" => assert!(addr.starts_with("0.0.0.0:"), "{addr}"),
            "localhost:0" => assert!(addr.starts_with("127.0.0.1:"), "{addr}"),
            _ => assert!(addr.starts_with("[::1]:"), "{addr}"),
        }
    }
    let out = Command::new(BIN).arg("--version").output().unwrap();
    let version = String::from_utf8_lossy(&out.stdout);
    assert!(
        version.starts_with(&format!("llm-probe {} (commit ", env!("CARGO_PKG_VERSION"))),
        "{version}"
    );
}
