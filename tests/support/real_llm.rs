//! llama.cpp servers of a test's own, beside the shared one on 18080 ([`super::real_server`]):
//! `scripts/real-llm.sh` on a port the test chose (a free one), with the server's slots and
//! context set by the environment the script reads (`REAL_LLM_PARALLEL`, `REAL_LLM_CTX`),
//! stopped when the test ends, passed or not. The script stops only a server its cache started
//! on that port, so a server someone else runs is never touched.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The cache the script uses: `REAL_LLM_CACHE`, else its default.
pub fn cache() -> PathBuf {
    match std::env::var_os("REAL_LLM_CACHE") {
        Some(c) => PathBuf::from(c),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
            .join(".cache/llm-probe-real-llm"),
    }
}

/// `scripts/real-llm.sh ARGS…` with `env` and `REAL_LLM_CACHE` set (so that the stop hint it
/// prints names the cache).
pub fn script(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/real-llm.sh"))
        .args(args)
        .env("REAL_LLM_CACHE", cache())
        .envs(env.iter().copied())
        .output()
        .expect("bash runs")
}

/// Stops the server on its port when dropped (the end of a test, passed or not), and removes
/// its log: the log of a port chosen at random would only clutter the shared cache.
pub struct StopOnDrop(pub u16);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let _ = script(&["stop", &self.0.to_string()], &[]);
        let _ = std::fs::remove_file(cache().join(format!("llama-server.{}.log", self.0)));
    }
}

/// `scripts/real-llm.sh start PORT` with `env`; returns the base URL it prints and its stderr.
/// Blocking; panics with the script's reason when the server does not start (a real engine is
/// required, never skipped). The caller holds a [`StopOnDrop`] for the port.
pub fn start(port: u16, env: &[(&str, &str)]) -> (String, String) {
    let out = script(&["start", &port.to_string()], env);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "scripts/real-llm.sh start {port} failed (a real engine is required, never skipped):\n{err}"
    );
    (String::from_utf8_lossy(&out.stdout).trim().to_string(), err)
}

/// A server of the test's own on `port` with `env` (e.g. `[("REAL_LLM_PARALLEL", "1"),
/// ("REAL_LLM_CTX", "8192")]`): its guard, made before the start so that a start that fails
/// halfway still stops what it started, and its base URL. Blocking.
pub fn own_server(port: u16, env: &[(&str, &str)]) -> (StopOnDrop, String) {
    let guard = StopOnDrop(port);
    let (base_url, _) = start(port, env);
    (guard, base_url)
}

/// The server's own prefill of each of the `n` requests it finished on `port`, in order:
/// the `prompt eval time = X ms / N tokens` lines of its log, as (N, X in seconds). N is the
/// request's `timings.prompt_n` (the tokens it evaluated, its cached ones left out) and X its
/// `timings.prompt_ms`, to the log's hundredth of a millisecond: for the requests whose response
/// llm-probe does not keep (a multi-turn probe records the server timings of its first turn
/// only). llama.cpp writes its log from a thread of its own, so a line can come after the response
/// that it times: this waits up to 30 s for the `n`th line. Panics with the lines it found when there are fewer, or more.
pub fn prefills(port: u16, n: usize) -> Vec<(u64, f64)> {
    let path = cache().join(format!("llama-server.{port}.log"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let log =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let found: Vec<(u64, f64)> = log
            .lines()
            .filter_map(|l| l.split_once("prompt eval time =").map(|(_, r)| r))
            .map(|r| {
                let parsed = r.split_once(" ms /").and_then(|(ms, rest)| {
                    let n = rest.trim_start().split(' ').next()?;
                    Some((n.parse().ok()?, ms.trim().parse::<f64>().ok()? / 1000.0))
                });
                parsed
                    .unwrap_or_else(|| panic!("unexpected timing line in {}: {r}", path.display()))
            })
            .collect();
        if found.len() >= n {
            assert_eq!(found.len(), n, "{}: {found:?}", path.display());
            return found;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} has {} prefill lines of {n} after 30 s: {found:?}",
            path.display(),
            found.len()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
