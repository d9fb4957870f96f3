//! Build script: the git commit for `llm-probe --version`.
//!
//! `LLM_PROBE_GIT_COMMIT` from the environment wins (a container build without `.git` passes
//! it as a build argument); else `git rev-parse --short=12 HEAD` when the source is a git
//! checkout and git is installed; else nothing, and the version says `commit unknown`.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=LLM_PROBE_GIT_COMMIT");
    let from_env = std::env::var("LLM_PROBE_GIT_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty());
    let commit = from_env.or_else(|| {
        let commit = git(&["rev-parse", "--short=12", "HEAD"])?;
        // Rebuild when HEAD moves (a commit, a checkout); paths work in worktrees too.
        for path in ["HEAD", "logs/HEAD"] {
            if let Some(p) = git(&["rev-parse", "--git-path", path]) {
                println!("cargo:rerun-if-changed={p}");
            }
        }
        Some(commit)
    });
    if let Some(c) = commit {
        println!("cargo:rustc-env=LLM_PROBE_GIT_COMMIT={}", c.trim());
    }
}
