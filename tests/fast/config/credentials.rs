//! One target's unreadable credentials never stop the others,
//! and key files rotate live.
//!
//! - three targets (an unset key variable, a missing key file, a healthy one): `run`'s loading
//!   keeps all three, the healthy one is probed and succeeds, the two others fail every probe
//!   with the reason `credentials` naming the variable or the file; `check-config` exits 1
//!   naming both; a reload with a broken key applies the valid changes and names the target;
//! - a key file rewritten in place, and one swapped through a Kubernetes-style `..data`
//!   symlink, while the daemon runs: the next probes carry the new key (asserted at the
//!   simulator, which records every request's headers), the change is counted in
//!   `llm_probe_credential_reloads_total`, no restart or reload.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use llm_probe::config::{self, Secrets};
use llm_probe::daemon::Daemon;
use llm_probe::measure::{FailureReason, ProbeOutcome};
use llm_probe::simulate::{Script, Simulator};

/// A variable no test environment sets.
const UNSET_VAR: &str = "LLM_PROBE_TEST_NEVER_SET_KEY_24";

async fn simulator() -> Simulator {
    let script = Script {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        tokens: 4,
        ..Script::default()
    };
    Simulator::start("127.0.0.1:0".parse().unwrap(), script)
        .await
        .unwrap()
}

fn target(name: &str, base_url: &str, key: &str) -> String {
    format!("  - name: {name}\n    protocol: openai-chat\n    base_url: {base_url}\n    model: m\n{key}")
}

fn file(targets: &[String]) -> String {
    format!(
        "defaults:\n  interval: 200ms\n  timeout: 200ms\nscenarios:\n{}targets:\n{}",
        common::scenario("chat", 4),
        targets.concat()
    )
}

/// Outcomes from `rx` until every target in `names` has at least one (at most 20 s).
async fn one_each(
    rx: &mut tokio::sync::broadcast::Receiver<Arc<ProbeOutcome>>,
    names: &[&str],
) -> Vec<Arc<ProbeOutcome>> {
    let mut seen: Vec<Arc<ProbeOutcome>> = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !names.iter().all(|n| seen.iter().any(|o| &*o.target == *n)) {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Ok(o)) => seen.push(o),
            Ok(Err(e)) => panic!("outcome channel: {e}"),
            Err(_) => panic!("not every target was probed within 20 s: {seen:?}"),
        }
    }
    seen
}

fn last_for<'a>(outcomes: &'a [Arc<ProbeOutcome>], target: &str) -> &'a ProbeOutcome {
    outcomes
        .iter()
        .rev()
        .find(|o| &*o.target == target)
        .unwrap()
}

#[tokio::test]
async fn unreadable_credentials_fail_their_target_only() {
    let sim = simulator().await;
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("good.key");
    std::fs::write(&key_file, "sk-good-key\n").unwrap();
    let missing = dir.path().join("missing.key");
    let text = file(&[
        target(
            "healthy",
            &sim.base_url(),
            &format!("    api_key_file: {}\n", key_file.display()),
        ),
        target(
            "no-var",
            &sim.base_url(),
            &format!("    api_key_env: {UNSET_VAR}\n"),
        ),
        target(
            "no-file",
            &sim.base_url(),
            &format!("    api_key_file: {}\n", missing.display()),
        ),
    ]);
    let path = dir.path().join("probes.yaml");
    std::fs::write(&path, &text).unwrap();

    // check-config: an error (exit 1) naming both, for CI.
    let out = Command::new(env!("CARGO_BIN_EXE_llm-probe"))
        .args(["check-config", "--config.file"])
        .arg(&path)
        .env_remove(UNSET_VAR)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(UNSET_VAR), "{stderr}");
    assert!(stderr.contains(&missing.display().to_string()), "{stderr}");

    // run: loads with the two targets isolated, probes all three.
    let cfg = config::load_with(&path, Secrets::Isolate).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.targets.len(), 3);
    assert_eq!(
        cfg.credential_problems.len(),
        2,
        "{:?}",
        cfg.credential_problems
    );
    let daemon = Daemon::start(cfg, "127.0.0.1:0".parse().unwrap(), Some(path.clone()))
        .await
        .unwrap();
    let mut rx = daemon.subscribe();
    let seen = one_each(&mut rx, &["healthy", "no-var", "no-file"]).await;
    let healthy = last_for(&seen, "healthy");
    assert!(healthy.is_success(), "{:?}", healthy.result);
    for (name, named) in [
        ("no-var", UNSET_VAR.to_string()),
        ("no-file", missing.display().to_string()),
    ] {
        let f = last_for(&seen, name).result.as_ref().unwrap_err();
        assert_eq!(f.reason, FailureReason::Credentials, "{name}: {f}");
        assert!(f.detail.contains(&named), "{name}: {}", f.detail);
    }
    // Only the healthy target reached the server, with its key.
    let auth: Vec<String> = sim
        .received()
        .iter()
        .filter_map(|r| {
            r.headers
                .iter()
                .find(|(k, _)| k == "authorization")
                .map(|(_, v)| v.clone())
        })
        .collect();
    assert!(
        !auth.is_empty() && auth.iter().all(|a| a == "Bearer sk-good-key"),
        "{auth:?}"
    );
    let (_, _, metrics) = common::get(daemon.addr, "/metrics", None).await;
    let failed = common::sample(
        &metrics,
        "llm_probe_probe_failures_total",
        &[("target", "no-file"), ("reason", "credentials")],
    );
    assert!(failed.unwrap_or(0.0) >= 1.0, "{metrics}");

    // A reload that adds a target and breaks the healthy one's key: applied, broken one named.
    std::fs::write(
        &path,
        file(&[
            target(
                "healthy",
                &sim.base_url(),
                &format!("    api_key_env: {UNSET_VAR}\n"),
            ),
            target(
                "no-file",
                &sim.base_url(),
                &format!("    api_key_file: {}\n", missing.display()),
            ),
            target("added", &sim.base_url(), ""),
        ]),
    )
    .unwrap();
    let summary = daemon
        .reload()
        .await
        .unwrap_or_else(|e| panic!("reload rejected: {e}"));
    assert!(
        summary.contains("healthy") && summary.contains("no-file"),
        "{summary}"
    );
    assert!(summary.contains("credentials"), "{summary}");
    let seen = one_each(&mut rx, &["added"]).await;
    assert!(last_for(&seen, "added").is_success());
    // A syntax error still rejects the whole file (validate-then-swap).
    std::fs::write(&path, "targets: [").unwrap();
    assert!(daemon.reload().await.is_err());
    daemon.stop().await;
}

/// The `Authorization` of the newest request the simulator received.
fn last_auth(sim: &Simulator) -> Option<String> {
    sim.received()
        .last()?
        .headers
        .iter()
        .find(|(k, _)| k == "authorization")
        .map(|(_, v)| v.clone())
}

/// Waits until the newest request carries `want` (at most 10 s); returns how many requests
/// had arrived before.
async fn wait_for_key(sim: &Simulator, want: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while last_auth(sim).as_deref() != Some(want) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no request with {want:?} within 10 s; last: {:?}",
            last_auth(sim)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn reloads(daemon: &Daemon) -> f64 {
    let (_, _, m) = common::get(daemon.addr, "/metrics", None).await;
    common::sample(&m, "llm_probe_credential_reloads_total", &[("target", "t")]).unwrap()
}

async fn rotate(key_path: &Path, rewrite: impl Fn(&str)) {
    let sim = simulator().await;
    let dir = key_path.parent().unwrap().parent().unwrap();
    let path = dir.join("probes.yaml");
    let text = file(&[target(
        "t",
        &sim.base_url(),
        &format!("    api_key_file: {}\n", key_path.display()),
    )]);
    std::fs::write(&path, text).unwrap();
    let cfg = config::load_with(&path, Secrets::Isolate).unwrap();
    let daemon = common::daemon(cfg).await;
    wait_for_key(&sim, "Bearer sk-old").await;
    assert_eq!(reloads(&daemon).await, 0.0);
    rewrite("sk-new");
    wait_for_key(&sim, "Bearer sk-new").await;
    // Every later request carries the new key.
    let n = sim.received().len();
    while sim.received().len() < n + 3 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let later: Vec<_> = sim.received()[n..]
        .iter()
        .map(|r| r.headers.clone())
        .collect();
    for h in later {
        assert!(
            h.contains(&("authorization".into(), "Bearer sk-new".into())),
            "{h:?}"
        );
    }
    assert!(reloads(&daemon).await >= 1.0);
    daemon.stop().await;
}

#[tokio::test]
async fn a_rewritten_key_file_is_used_by_the_next_probe() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("keys")).unwrap();
    let key = dir.path().join("keys/api.key");
    std::fs::write(&key, "sk-old\n").unwrap();
    let k = key.clone();
    rotate(&key, move |v| std::fs::write(&k, format!("{v}\n")).unwrap()).await;
}

/// Kubernetes' atomic writer: `key -> ..data/key`, `..data -> ..TIMESTAMP`; an update writes a
/// new `..TIMESTAMP2` directory and renames a new `..data` symlink over the old one.
#[tokio::test]
async fn a_key_swapped_through_a_data_symlink_is_used_by_the_next_probe() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let vol = dir.path().join("secret");
    std::fs::create_dir_all(vol.join("..2026_12_01_1")).unwrap();
    std::fs::write(vol.join("..2026_12_01_1/api.key"), "sk-old").unwrap();
    symlink("..2026_12_01_1", vol.join("..data")).unwrap();
    symlink("..data/api.key", vol.join("api.key")).unwrap();
    let v = vol.clone();
    rotate(&vol.join("api.key"), move |value| {
        std::fs::create_dir_all(v.join("..2026_12_01_2")).unwrap();
        std::fs::write(v.join("..2026_12_01_2/api.key"), value).unwrap();
        symlink("..2026_12_01_2", v.join("..data_tmp")).unwrap();
        std::fs::rename(v.join("..data_tmp"), v.join("..data")).unwrap();
        std::fs::remove_dir_all(v.join("..2026_12_01_1")).unwrap();
    })
    .await;
}

/// A key file that is missing at start is picked up once it appears: the target recovers
/// without a restart.
#[tokio::test]
async fn a_key_file_that_appears_later_is_picked_up() {
    let sim = simulator().await;
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("late.key");
    let path = dir.path().join("probes.yaml");
    let text = file(&[target(
        "t",
        &sim.base_url(),
        &format!("    api_key_file: {}\n", key.display()),
    )]);
    std::fs::write(&path, text).unwrap();
    let cfg = config::load_with(&path, Secrets::Isolate).unwrap();
    let daemon = common::daemon(cfg).await;
    let mut rx = daemon.subscribe();
    let first = common::outcomes(&mut rx, 1, Duration::from_secs(10)).await;
    let f = first[0].result.as_ref().unwrap_err();
    assert_eq!(f.reason, FailureReason::Credentials);
    std::fs::write(&key, "sk-late").unwrap();
    wait_for_key(&sim, "Bearer sk-late").await;
    daemon.stop().await;
}

/// Vertex AI (`vertex-gemini`): the access token comes from `api_key_file` as `Authorization:
/// Bearer`, and a job refreshing the file (the token lasts an hour) is picked up by the next
/// probe, without a reload: the probe mints no token, it only re-reads the file.
#[tokio::test]
async fn a_refreshed_vertex_access_token_file_is_used_by_the_next_probe() {
    let sim = simulator().await;
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("vertex-token");
    std::fs::write(&token, "ya29.old-token\n").unwrap();
    let path = dir.path().join("probes.yaml");
    let text = file(&[format!(
        "  - name: t\n    protocol: vertex-gemini\n    base_url: {}/v1/projects/p-1/locations/us-central1\n    model: gemini-2.5-flash\n    api_key_file: {}\n",
        sim.root_url(),
        token.display()
    )]);
    std::fs::write(&path, text).unwrap();
    let cfg = config::load_with(&path, Secrets::Isolate).unwrap();
    let daemon = common::daemon(cfg).await;
    wait_for_key(&sim, "Bearer ya29.old-token").await;
    assert!(sim.received().iter().all(|r| r.path
        == "/v1/projects/p-1/locations/us-central1/publishers/google/models/gemini-2.5-flash:streamGenerateContent"));
    std::fs::write(&token, "ya29.new-token\n").unwrap();
    wait_for_key(&sim, "Bearer ya29.new-token").await;
    assert!(reloads(&daemon).await >= 1.0);
    daemon.stop().await;
}

/// Every prober of a pool's replicas re-reads a rewritten CA bundle itself: the copies they
/// read must be one shared copy, or 1,000 replicas trusting a 200 KiB bundle hold 200 MB
/// after its first rotation (the bytes are shared among the replicas until then).
#[test]
fn a_rewritten_ca_bundle_read_by_every_replica_is_held_once() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, common::pki::pki().ca_pem).unwrap();
    let text = format!(
        "scenarios:\n{}targets:\n  - name: pool\n    protocol: openai-chat\n    base_url: https://pool.test:8443/v1\n    model: m\n    tls: {{ca_file: {}}}\n    replicas: {{dns: {{}}}}\n",
        common::scenario("chat", 4),
        ca.display()
    );
    let cfg = common::parse(&text);
    let target = &cfg.targets[0];
    // The bundle is rotated; two replicas' probers see the change and read it.
    std::fs::write(&ca, common::pki::pki().ca_pem).unwrap();
    let (_, first, _) = config::credentials::reread(target).unwrap();
    let (_, second, _) = config::credentials::reread(target).unwrap();
    let (first, second) = (first.ca_pem.unwrap(), second.ca_pem.unwrap());
    assert_ne!(
        Some(&first),
        target.tls.ca_pem.as_ref(),
        "the bundle was rewritten"
    );
    assert!(
        Arc::ptr_eq(&first, &second),
        "two copies of one {} byte bundle",
        first.len()
    );
}
