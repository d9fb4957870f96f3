//! The process under hostile conditions: a closed stderr, config
//! files that are FIFOs, devices or huge, durations that overflow, a SIGHUP during start-up,
//! unknown log levels. Each test states what must keep working.

use crate::common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use llm_probe::cli::Cli;
use llm_probe::config;

const BIN: &str = env!("CARGO_BIN_EXE_llm-probe");

/// Waits up to `limit` for the child to exit.
fn wait_exit(child: &mut std::process::Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Starts `llm-probe run` on `config` on a free loopback port, with stderr piped.
fn run_daemon(config: &Path) -> (common::ChildGuard, BufReader<std::process::ChildStderr>) {
    let mut child = common::ChildGuard(
        Command::new(BIN)
            .args([
                "run",
                "--web.listen-address",
                "127.0.0.1:0",
                "--config.file",
            ])
            .arg(config)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stderr = BufReader::new(child.0.stderr.take().unwrap());
    (child, stderr)
}

/// Reads stderr lines until "serving metrics on http://ADDR/metrics"; returns ADDR.
fn serving_addr(r: &mut impl BufRead) -> SocketAddr {
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            r.read_line(&mut line).unwrap() > 0,
            "stderr ended before the daemon served"
        );
        if let Some(rest) = line.split("serving metrics on http://").nth(1) {
            return rest.split('/').next().unwrap().parse().unwrap();
        }
    }
}

async fn metric(addr: SocketAddr, name: &str, labels: &[(&str, &str)]) -> f64 {
    let (_, _, body) = common::get(addr, "/metrics", None).await;
    common::sample(&body, name, labels).unwrap_or(0.0)
}

/// Polls until `name{labels}` reaches `at_least` (or fails after 20 s).
async fn wait_metric(addr: SocketAddr, name: &str, labels: &[(&str, &str)], at_least: f64) {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        let v = metric(addr, name, labels).await;
        if v >= at_least {
            return;
        }
        assert!(
            Instant::now() < end,
            "{name}{labels:?} stayed at {v}, expected ≥ {at_least}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn down_target_config(dir: &Path) -> PathBuf {
    let port = common::free_port();
    let yaml = format!(
        "defaults:\n  interval: 200ms\n  timeout: 200ms\nscenarios:\n{}targets:\n  - name: down\n    protocol: openai-chat\n    base_url: http://127.0.0.1:{port}/v1\n    model: m\n",
        common::scenario("chat", 4)
    );
    let path = dir.join("probes.yaml");
    std::fs::write(&path, yaml).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread")]
async fn a_closed_stderr_drops_log_lines_and_the_daemon_keeps_probing_reloading_and_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = down_target_config(dir.path());
    let (mut child, mut stderr) = run_daemon(&cfg);
    let addr = serving_addr(&mut stderr);
    // A dead log shipper: the read end of the pipe goes away.
    drop(stderr);
    let labels = [("target", "down")];
    let before = metric(addr, "llm_probe_probes_total", &labels).await;
    // The first failure and every reload log a line; each is dropped and counted, and probing
    // and reloading go on. (A pair that keeps failing is logged on change only.)
    wait_metric(addr, "llm_probe_probes_total", &labels, before + 5.0).await;
    for _ in 0..3 {
        let reload = reqwest::Client::new()
            .post(format!("http://{addr}/-/reload"))
            .send()
            .await
            .unwrap();
        assert_eq!(
            reload.status().as_u16(),
            200,
            "{}",
            reload.text().await.unwrap()
        );
    }
    wait_metric(addr, "llm_probe_log_write_failures_total", &[], 3.0).await;
    let after_reload = metric(addr, "llm_probe_probes_total", &labels).await;
    wait_metric(addr, "llm_probe_probes_total", &labels, after_reload + 3.0).await;
    assert_eq!(common::get(addr, "/-/healthy", None).await.0, 200);
    common::signal(&child.0, libc::SIGTERM);
    let status = wait_exit(&mut child.0, Duration::from_secs(10)).expect("SIGTERM stops it");
    assert!(status.success(), "{status:?}");
}

#[test]
fn check_config_refuses_a_fifo_a_device_and_a_huge_file_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.yaml");
    common::mkfifo(&fifo);
    let huge = dir.path().join("huge.yaml");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(40 << 20)
        .unwrap();
    let cases = [
        (fifo.clone(), "not a regular file but a FIFO"),
        (
            PathBuf::from("/dev/zero"),
            "not a regular file but a character device",
        ),
        (huge.clone(), "larger than 32 MiB"),
    ];
    for (path, want) in cases {
        let mut child = common::ChildGuard(
            Command::new(BIN)
                .args(["check-config", "--config.file"])
                .arg(&path)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let status = wait_exit(&mut child.0, Duration::from_secs(15))
            .unwrap_or_else(|| panic!("check-config on {} did not end", path.display()));
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.0.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(1), "{err}");
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(err.contains(want), "{}: {err}", path.display());
    }
}

#[test]
fn key_and_pem_files_that_are_fifos_devices_or_huge_are_named_problems() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("key-fifo");
    common::mkfifo(&fifo);
    let huge = dir.path().join("ca-huge.pem");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(2 << 20)
        .unwrap();
    let yaml = format!(
        "scenarios:\n{}targets:\n  - name: a\n    protocol: openai-chat\n    base_url: http://127.0.0.1:1/v1\n    model: m\n    api_key_file: {}\n  - name: b\n    protocol: openai-chat\n    base_url: https://127.0.0.1:1/v1\n    model: m\n    tls:\n      ca_file: /dev/zero\n  - name: c\n    protocol: openai-chat\n    base_url: https://127.0.0.1:1/v1\n    model: m\n    tls:\n      ca_file: {}\n",
        common::scenario("chat", 4),
        fifo.display(),
        huge.display()
    );
    let path = dir.path().join("probes.yaml");
    std::fs::write(&path, yaml).unwrap();
    let started = Instant::now();
    let err = config::load(&path).unwrap_err().to_string();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    for want in [
        format!(
            "api_key_file {} cannot be read (not a regular file but a FIFO",
            fifo.display()
        ),
        "tls.ca_file /dev/zero cannot be read (not a regular file but a character device".into(),
        format!(
            "tls.ca_file {} cannot be read (larger than 1 MiB)",
            huge.display()
        ),
    ] {
        assert!(err.contains(&want), "missing {want:?} in:\n{err}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reload_from_a_fifo_a_device_or_a_huge_file_fails_and_the_daemon_keeps_serving() {
    let sim = common::simulator(llm_probe::simulate::Script {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        tokens: 4,
        ..Default::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("probes.yaml");
    let yaml = common::yaml(&sim.base_url(), "200ms", &common::scenario("chat", 4), "");
    std::fs::write(&path, &yaml).unwrap();
    let cfg = config::load(&path).unwrap();
    let d =
        llm_probe::daemon::Daemon::start(cfg, "127.0.0.1:0".parse().unwrap(), Some(path.clone()))
            .await
            .unwrap();
    let huge = dir.path().join("huge.yaml");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(40 << 20)
        .unwrap();
    let cases: [(&dyn Fn(), &str); 3] = [
        (&|| common::mkfifo(&path), "not a regular file but a FIFO"),
        (
            &|| std::os::unix::fs::symlink("/dev/zero", &path).unwrap(),
            "not a regular file but a character device",
        ),
        (
            &|| std::os::unix::fs::symlink(&huge, &path).unwrap(),
            "larger than 32 MiB",
        ),
    ];
    let mut outcomes = d.subscribe();
    for (replace, want) in cases {
        std::fs::remove_file(&path).unwrap();
        replace();
        let reloaded = tokio::time::timeout(Duration::from_secs(15), d.reload())
            .await
            .expect("the reload ends");
        let err = reloaded.unwrap_err().to_string();
        assert!(
            err.contains(&path.display().to_string()) && err.contains(want),
            "{err}"
        );
        assert_eq!(common::get(d.addr, "/-/healthy", None).await.0, 200);
        let (_, _, body) = common::get(d.addr, "/metrics", None).await;
        assert_eq!(
            common::sample(&body, "llm_probe_config_last_reload_successful", &[]),
            Some(0.0)
        );
        // The old configuration keeps probing.
        for _ in 0..2 {
            let o = tokio::time::timeout(Duration::from_secs(10), outcomes.recv())
                .await
                .expect("probes go on")
                .unwrap();
            assert!(o.is_success(), "{o:?}");
        }
    }
    d.stop().await;
}

/// Every duration field of the probes file, with values that overflow, are zero or are below
/// the floor: each is a problem naming the field (never a config that then panics).
#[test]
fn every_config_duration_is_bounded() {
    let fields = [
        ("defaults", "interval"),
        ("defaults", "timeout"),
        ("defaults", "slo.ttft_p95"),
        ("target", "interval"),
        ("target", "timeout"),
        ("target", "connect_timeout"),
        ("target", "slo.ttft_p95"),
    ];
    for (place, field) in fields {
        for value in ["300000000000y", "0s", "1ns", "25h"] {
            let setting = match field.split_once('.') {
                Some((block, key)) => format!("{block}:\n      {key}: {value}"),
                None => format!("{field}: {value}"),
            };
            let (defaults, target) = match place {
                "defaults" => (
                    format!("defaults:\n  {}\n", setting.replace("\n    ", "\n  ")),
                    String::new(),
                ),
                _ => (String::new(), format!("    {setting}\n")),
            };
            let yaml = format!(
                "{defaults}scenarios:\n{}targets:\n  - name: t\n    protocol: openai-chat\n    base_url: http://127.0.0.1:1/v1\n    model: m\n{target}",
                common::scenario("chat", 4)
            );
            let err = match config::parse(&yaml, "<test>", &|_| None) {
                Ok(_) => panic!("{place} {field}: {value} was accepted:\n{yaml}"),
                Err(e) => e.to_string(),
            };
            let key = field.rsplit('.').next().unwrap();
            assert!(err.contains(key), "{place} {field} {value}: {err}");
            if value != "0s" {
                assert!(
                    err.contains("the minimum of") || err.contains("the maximum of 1day"),
                    "{place} {field} {value}: {err}"
                );
            }
        }
    }
    // The edges are accepted.
    let ok = format!(
        "defaults:\n  interval: 100ms\n  timeout: 1ms\nscenarios:\n{}targets:\n  - name: t\n    protocol: openai-chat\n    base_url: http://127.0.0.1:1/v1\n    model: m\n  - name: u\n    protocol: openai-chat\n    base_url: http://127.0.0.1:1/v1\n    model: m\n    interval: 24h\n    timeout: 24h\n    slo:\n      ttft_p95: 1ms\n",
        common::scenario("chat", 4)
    );
    config::parse(&ok, "<test>", &|_| None).unwrap();
}

/// Every duration flag: out-of-range values are usage errors that quote the value and the limit.
#[test]
fn every_duration_flag_is_bounded() {
    let parse = |args: &[&str]| Cli::try_parse_from([&["llm-probe"], args].concat());
    for flag in ["--ttft", "--itl"] {
        let e = parse(&["simulate", flag, "300000000000y"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("is longer than the maximum of 1h"),
            "{flag}: {e}"
        );
        for fine in ["0s", "1ns", "1h"] {
            assert!(parse(&["simulate", flag, fine]).is_ok(), "{flag} {fine}");
        }
    }
    for (value, want) in [
        ("300000000000y", "is longer than the maximum of 1day"),
        ("0s", "is shorter than the minimum of 1s"),
        ("1ns", "is shorter than the minimum of 1s"),
        ("soon", "is not a duration"),
    ] {
        let e = parse(&["demo", "--every", value]).unwrap_err().to_string();
        assert!(e.contains(want), "--every {value}: {e}");
    }
    assert!(parse(&["demo", "--every", "1s"]).is_ok());
}

#[test]
fn the_binary_rejects_an_out_of_range_flag_with_a_usage_error() {
    for args in [
        ["demo", "--every", "0s"],
        ["simulate", "--itl", "300000000000y"],
    ] {
        let out = Command::new(BIN).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(args[2]), "{args:?}: {err}");
    }
}

#[test]
fn log_levels_accept_the_usual_aliases_and_reject_the_rest() {
    let level = |v: &str| Cli::try_parse_from(["llm-probe", "--log.level", v, "healthcheck"]);
    for (given, want) in [
        ("warning", "warn"),
        ("WARN", "warn"),
        ("err", "error"),
        ("Information", "info"),
        ("debug", "debug"),
        ("info,llm_probe::probe=debug", "info,llm_probe::probe=debug"),
    ] {
        assert_eq!(level(given).unwrap().log_level, want, "{given}");
    }
    for bad in ["warnig", "verbose", "llm_probe", "", "info,loud"] {
        let e = level(bad).unwrap_err().to_string();
        assert!(
            e.contains("error, warn, info, debug, trace"),
            "{bad:?}: {e}"
        );
    }
    // The binary: a typo is a usage error, not a daemon with logging silently off.
    let out = Command::new(BIN)
        .args([
            "--log.level",
            "warnig",
            "check-config",
            "--config.file",
            "/nonexistent",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"warnig\" is not a log level"));
}

/// Bit of `sig` in a `/proc/PID/status` signal mask line (`SigCgt:` is the caught signals).
fn catches(pid: u32, sig: i32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (sig - 1)) != 0)
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread")]
async fn a_sighup_during_start_up_does_not_kill_the_daemon() {
    let dir = tempfile::tempdir().unwrap();
    // A config that takes a while to load (20,000 targets: over a second in a debug build).
    let mut yaml = format!(
        "defaults:\n  interval: 24h\nscenarios:\n{}targets:\n",
        common::scenario("chat", 4)
    );
    for i in 0..20_000 {
        yaml += &format!("  - name: t{i}\n    protocol: openai-chat\n    base_url: http://127.0.0.1:9/v1\n    model: m\n");
    }
    let path = dir.path().join("probes.yaml");
    std::fs::write(&path, yaml).unwrap();
    let (mut child, mut stderr) = run_daemon(&path);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let addr = serving_addr(&mut stderr);
        let _ = tx.send((addr, Instant::now()));
        // Keep draining so that the daemon never blocks on a full pipe.
        let _ = std::io::copy(&mut stderr, &mut std::io::sink());
    });
    // Send SIGHUP as soon as the process catches it, or after 300 ms at the latest (well
    // before the config has loaded): start-up must not die of it.
    let pid = child.0.id();
    let waited = Instant::now();
    while !catches(pid, libc::SIGHUP) && waited.elapsed() < Duration::from_millis(300) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let hup_sent = Instant::now();
    common::signal(&child.0, libc::SIGHUP);
    let (addr, served) = rx
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("the daemon did not start: {:?}", child.0.try_wait()));
    assert!(
        hup_sent < served,
        "the config loaded before the SIGHUP was sent; the test needs a larger config"
    );
    assert_eq!(common::get(addr, "/-/healthy", None).await.0, 200);
    assert!(child.0.try_wait().unwrap().is_none());
    common::signal(&child.0, libc::SIGTERM);
    let status = wait_exit(&mut child.0, Duration::from_secs(30)).expect("SIGTERM stops it");
    assert!(status.success(), "{status:?}");
}

/// A schedule that stops (here: a zero interval, which the config never allows, makes the
/// schedule panic) is an error in the log and a 503 on `/-/healthy`, not a silent stop.
#[tokio::test(flavor = "multi_thread")]
async fn a_stopped_probe_schedule_makes_the_exporter_unhealthy() {
    let mut cfg = common::parse(&common::yaml(
        "http://127.0.0.1:1/v1",
        "10s",
        &common::scenario("chat", 4),
        "",
    ));
    std::sync::Arc::get_mut(&mut cfg.targets[0])
        .expect("the only reference")
        .interval = Duration::ZERO;
    let d = common::daemon(cfg).await;
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, _, body) = common::get(d.addr, "/-/healthy", None).await;
        if status == 503 {
            assert!(body.contains("probe schedule stopped"), "{body}");
            break;
        }
        assert!(Instant::now() < end, "/-/healthy still answers {status}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    d.stop().await;
}

/// Starts `llm-probe run --config.watch` on `config` (stderr piped).
fn run_watching(config: &Path) -> (common::ChildGuard, BufReader<std::process::ChildStderr>) {
    let mut child = common::ChildGuard(
        Command::new(BIN)
            .args([
                "run",
                "--web.listen-address",
                "127.0.0.1:0",
                "--config.watch",
                "--config.file",
            ])
            .arg(config)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let stderr = BufReader::new(child.0.stderr.take().unwrap());
    (child, stderr)
}

/// `run --config.watch --config.file FIFO` fails at once (it hung in the
/// watcher's first read), and a watched file that is a FIFO for a while blocks nothing: the
/// valid file written later is loaded, and SIGTERM still ends the process.
#[tokio::test(flavor = "multi_thread")]
async fn a_watched_file_that_is_a_fifo_blocks_neither_the_watcher_nor_the_exit() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.yaml");
    common::mkfifo(&fifo);
    let (mut child, _stderr) = run_watching(&fifo);
    let status = wait_exit(&mut child.0, Duration::from_secs(15))
        .expect("a FIFO at start-up is refused, not waited on");
    assert!(!status.success());

    let cfg = down_target_config(dir.path());
    let (mut child, mut stderr) = run_watching(&cfg);
    let addr = serving_addr(&mut stderr);
    // The file becomes a FIFO for a few polls (1 s each) …
    let aside = dir.path().join("aside.yaml");
    std::fs::rename(&cfg, &aside).unwrap();
    common::mkfifo(&cfg);
    tokio::time::sleep(Duration::from_secs(3)).await;
    // … then a valid file with a second target.
    let text = std::fs::read_to_string(&aside).unwrap().replace(
        "  - name: down\n",
        "  - name: down\n    protocol: openai-chat\n    base_url: http://127.0.0.1:9/v1\n    model: m\n  - name: second\n",
    );
    let tmp = dir.path().join("new.yaml");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, &cfg).unwrap();
    wait_metric(addr, "llm_probe_probes_total", &[("target", "second")], 1.0).await;
    common::signal(&child.0, libc::SIGTERM);
    let status = wait_exit(&mut child.0, Duration::from_secs(10)).expect("SIGTERM stops it");
    assert!(status.success(), "{status:?}");
}
