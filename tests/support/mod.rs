//! Helpers shared by the integration tests: configs pointing at a local simulator, scraping
//! `/metrics`, reading one sample out of the text exposition.
#![allow(dead_code)]

pub mod alertmanager;
pub mod bedrock;
pub mod bench;
pub mod chromium;
pub mod dashboards;
pub mod fleet;
pub mod golden;
pub mod https;
pub mod long_prompts;
pub mod pki;
pub mod probe;
pub mod prometheus;
pub mod real_llm;
pub mod rules;
pub mod synthetic;
pub mod tool_round_trips;
pub mod web_tls;

#[allow(unused_imports)] // each tier uses its own part
pub use probe::{faulty, probe_first, OneProbe, ScriptExt};

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use llm_probe::config::{self, Config};
use llm_probe::daemon::Daemon;
use llm_probe::measure::ProbeOutcome;

/// A simulator script: the first token after `ttft_ms`, then `tokens` tokens `itl_ms` apart.
pub fn stream(ttft_ms: u64, itl_ms: u64, tokens: u32) -> llm_probe::simulate::Script {
    llm_probe::simulate::Script {
        ttft: Duration::from_millis(ttft_ms),
        itl: Duration::from_millis(itl_ms),
        tokens,
        ..Default::default()
    }
}

/// A probes file with one target `sim` (model `model`, quoted) at `base_url`, probed every
/// `interval` with a 1 s timeout, and one scenario `chat` (8 tokens).
pub fn sim_target_yaml(base_url: &str, model: &str, interval: &str) -> String {
    format!(
        "defaults:\n  interval: {interval}\n  timeout: 1s\nscenarios:\n{}targets:\n  - name: sim\n    protocol: openai-chat\n    base_url: {base_url}\n    model: '{}'\n",
        scenario("chat", 8),
        model.replace('\'', "''")
    )
}

/// The daemon running `cfg` with server `options`, listening on a free loopback port, without a
/// config file.
pub async fn daemon_with(cfg: Config, options: llm_probe::server::ServerOptions) -> Daemon {
    Daemon::start_with(cfg, "127.0.0.1:0".parse().unwrap(), None, options)
        .await
        .expect("daemon starts")
}

/// A probes file with `n` targets `t0`… on one simulator at `base_url`, one scenario `chat`.
pub fn many_targets(base_url: &str, n: usize, interval: &str) -> String {
    let mut y = format!(
        "defaults:\n  interval: {interval}\nscenarios:\n{}targets:\n",
        scenario("chat", 16)
    );
    for i in 0..n {
        y += &format!("  - name: t{i}\n    protocol: openai-chat\n    base_url: {base_url}\n    model: sim-model\n");
    }
    y
}

/// A probes file with one target `sim` at `base_url` and the given scenarios YAML (list items)
/// and extra target keys.
pub fn yaml(base_url: &str, interval: &str, scenarios: &str, target_extra: &str) -> String {
    format!(
        "defaults:\n  interval: {interval}\nscenarios:\n{scenarios}\ntargets:\n  - name: sim\n    protocol: openai-chat\n    base_url: {base_url}\n    model: sim-model\n{target_extra}"
    )
}

/// Every protocol's target keys (`base_url` and what else it needs, as YAML lines of a target)
/// for the simulator `sim`, by protocol name; the credentials they name are in [`sim_env`].
pub fn sim_protocols(sim: &llm_probe::simulate::Simulator) -> Vec<(&'static str, String)> {
    let v1 = sim.base_url();
    let root = sim.root_url();
    vec![
        ("openai-chat", format!("    base_url: {v1}\n")),
        ("openai-responses", format!("    base_url: {v1}\n")),
        ("openai-completions", format!("    base_url: {v1}\n")),
        ("anthropic", format!("    base_url: {v1}\n")),
        ("ollama", format!("    base_url: {root}\n")),
        ("tgi", format!("    base_url: {root}\n")),
        ("llama-cpp", format!("    base_url: {root}\n")),
        (
            "azure-openai",
            format!("    base_url: {root}\n    deployment: d\n    api_key_env: AZURE_TEST_KEY\n"),
        ),
        (
            "gemini",
            format!("    base_url: {root}\n    api_key_env: GEMINI_TEST_KEY\n"),
        ),
        (
            "bedrock",
            format!("    base_url: {root}\n    aws_region: us-east-1\n"),
        ),
    ]
}

/// One probe of the first of `scenarios` (list items) on `protocol` against a simulator
/// running `script` (interval 10 s, timeout 5 s), with the first request the simulator received.
pub async fn probe_protocol(
    script: llm_probe::simulate::Script,
    protocol: &str,
    scenarios: &str,
) -> (ProbeOutcome, Option<llm_probe::simulate::ReceivedRequest>) {
    let sim = simulator(script).await;
    let keys = sim_protocols(&sim)
        .into_iter()
        .find(|(p, _)| *p == protocol)
        .map(|(_, k)| k)
        .unwrap_or_else(|| panic!("no protocol {protocol}"));
    let yaml = format!(
        "defaults:\n  interval: 10s\n  timeout: 5s\nscenarios:\n{scenarios}targets:\n  - name: sim\n    protocol: {protocol}\n    model: sim-model\n{keys}"
    );
    let cfg = config::parse(&yaml, "<test>", &sim_env)
        .unwrap_or_else(|e| panic!("config should load:\n{e}\n---\n{yaml}"));
    let o = probe_first(&cfg, None).await;
    (o, sim.received().first().cloned())
}

/// The environment of [`sim_protocols`]' targets: made-up keys.
pub fn sim_env(var: &str) -> Option<String> {
    match var {
        "GEMINI_TEST_KEY" | "AZURE_TEST_KEY" => Some("test-key".into()),
        "AWS_ACCESS_KEY_ID" => Some("AKIDEXAMPLE".into()),
        "AWS_SECRET_ACCESS_KEY" => Some("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into()),
        _ => None,
    }
}

/// One scenario list item.
pub fn scenario(name: &str, max_tokens: u32) -> String {
    format!("  - name: {name}\n    messages: [{{role: user, content: \"Say something.\"}}]\n    max_tokens: {max_tokens}\n")
}

/// A baseline file's text (`llm-probe.baseline/v1`) pinning `target`/`scenario` (model `m`,
/// 120 samples, measured 2026-11-30T12:00:00Z): TTFT 0.2 / `ttft_p95` / `ttft_p95` + 0.01 s,
/// TPOT 5 / 6 / 7 ms, 200 / 210 / 220 tokens/s, no E2E.
pub fn baseline_json(target: &str, scenario: &str, ttft_p95: f64) -> String {
    format!(
        r#"{{"schema":"llm-probe.baseline/v1","target":"{target}","scenario":"{scenario}","model":"m",
            "measured_at":"2026-11-30T12:00:00.000Z","saved_at":"2026-11-30T12:05:00.000Z",
            "source":{{"kind":"bench","file":"run.json","level":"concurrency 1","llm_probe_version":"0.1.0"}},
            "endpoint":{{"response_model":"sim","system_fingerprint":null,"server":null,"server_version":null}},
            "samples":120,
            "ttft_seconds":{{"p50":0.2,"p95":{ttft_p95},"p99":{}}},
            "tpot_seconds":{{"p50":0.005,"p95":0.006,"p99":0.007}},
            "output_tokens_per_second":{{"p50":200.0,"p95":210.0,"p99":220.0}},
            "e2e_seconds":null}}"#,
        ttft_p95 + 0.01
    )
}

/// Writes [`baseline_json`] to `dir/NAME` and returns the target key line
/// `    baseline_file: ABSOLUTE-PATH\n` for a probes file.
pub fn baseline_file_line(dir: &std::path::Path, target: &str, scenario: &str) -> String {
    let path = dir.join(format!("{target}-{scenario}.baseline.json"));
    std::fs::write(&path, baseline_json(target, scenario, 0.25)).unwrap();
    format!("    baseline_file: {}\n", path.display())
}

/// Parses `text` with no environment variables.
pub fn parse(text: &str) -> Config {
    config::parse(text, "<test>", &|_| None)
        .unwrap_or_else(|e| panic!("test config should load:\n{e}\n---\n{text}"))
}

/// Starts a daemon on a free loopback port.
pub async fn daemon(cfg: Config) -> Daemon {
    Daemon::start(cfg, "127.0.0.1:0".parse().unwrap(), None)
        .await
        .expect("daemon starts")
}

/// Waits for `n` outcomes from `rx` (at most `limit`).
pub async fn outcomes(
    rx: &mut tokio::sync::broadcast::Receiver<Arc<ProbeOutcome>>,
    n: usize,
    limit: Duration,
) -> Vec<Arc<ProbeOutcome>> {
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + limit;
    while out.len() < n {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Ok(o)) => out.push(o),
            Ok(Err(e)) => panic!("outcome channel: {e}"),
            Err(_) => panic!("only {} of {n} probes finished within {limit:?}", out.len()),
        }
    }
    out
}

/// GETs `http://addr/path` with an optional Accept header; returns (status, content type, body).
pub async fn get(addr: SocketAddr, path: &str, accept: Option<&str>) -> (u16, String, String) {
    let client = reqwest::Client::new();
    let mut req = client.get(format!("http://{addr}{path}"));
    if let Some(a) = accept {
        req = req.header("accept", a);
    }
    let resp = req.send().await.expect("GET succeeds");
    let status = resp.status().as_u16();
    let ct = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (status, ct, resp.text().await.unwrap())
}

/// The value of the sample `name{labels…}` in a text exposition, where every `k="v"` in
/// `labels` must appear in the sample's label set.
pub fn sample(exposition: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    exposition
        .lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (metric, rest) = match series.find('{') {
                Some(i) => (&series[..i], &series[i..]),
                None => (series, ""),
            };
            if metric != name {
                return None;
            }
            if !labels
                .iter()
                .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")))
            {
                return None;
            }
            value.parse().ok()
        })
}

/// The path of a tool on PATH, or a panic that says how to install it: a real component is
/// never skipped silently.
pub fn require_tool(name: &str, install: &str) -> std::path::PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    // scripts/install-test-deps.sh puts tools it installs itself (hadolint) here.
    let own = std::env::var_os("HOME")
        .map(|h| std::path::Path::new(&h).join(".cache/llm-probe-tools/bin"));
    std::env::split_paths(&path)
        .chain(own)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("`{name}` is not installed; this test needs the real thing: {install} (scripts/test.sh installs it)"))
}

/// A loopback port that was free a moment ago, for programs (Prometheus) that need a port on
/// their command line rather than binding port 0 themselves.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts the real llama.cpp server with the repository's own `scripts/real-llm.sh start` (built
/// once into `~/.cache/llm-probe-real-llm`, about ten minutes; reused when it is already running)
/// and returns its OpenAI-compatible base URL, `http://127.0.0.1:18080/v1`. Blocking. Never
/// skipped: a server that does not start fails the test with the script's reason.
pub fn real_server() -> String {
    start_real_engine("scripts/real-llm.sh")
}

/// Runs `bash SCRIPT start` (a path under the repository: `scripts/real-llm.sh`,
/// `scripts/real-vllm.sh`) and returns the base URL it prints on stdout. Blocking; panics with
/// the script's stderr when it fails (a real engine is required, never skipped). A llama.cpp
/// server of a test's own, on a port and with a context of its choosing: [`real_llm::own_server`].
pub fn start_real_engine(script: &str) -> String {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(script);
    let out = std::process::Command::new("bash")
        .arg(&script)
        .arg("start")
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "{} start failed (a real engine is required, never skipped):\n{}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A child process killed (and reaped) on drop.
pub struct ChildGuard(pub std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Spawns `cmd` (stderr piped) as a [`GroupGuard`] and blocks until `port` on 127.0.0.1
/// accepts connections; panics with the child's stderr if it exits first, or after 30 s.
pub fn spawn_listening(cmd: &mut std::process::Command, port: u16) -> GroupGuard {
    use std::io::Read;
    let mut child = GroupGuard::spawn(cmd).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(status) = child.0.try_wait().unwrap() {
            let mut err = String::new();
            let _ = child.0.stderr.take().unwrap().read_to_string(&mut err);
            panic!("{cmd:?} exited with {status} before listening:\n{err}");
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{cmd:?} is not listening on {port} after 30 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    child
}

/// Starts `cmd` as the leader of a new process group and kills the whole group on drop, so a
/// server that forks helpers (uvicorn's multiprocessing workers and resource tracker) leaves
/// none running after the test.
pub struct GroupGuard(pub std::process::Child);

impl GroupGuard {
    pub fn spawn(cmd: &mut std::process::Command) -> std::io::Result<GroupGuard> {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0).spawn().map(GroupGuard)
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        let group = -(self.0.id() as i32);
        // SAFETY: kill(2) with a negative pid signals every process of that group; it touches
        // no memory of ours.
        unsafe {
            libc::kill(group, libc::SIGKILL);
        }
        let _ = self.0.wait();
    }
}

/// This process's resident set size, in KiB (Linux `/proc/self/status`).
pub fn rss_kib() -> u64 {
    rss_kib_of("self")
}

/// The resident set size of process `pid` (a number, or `self`), in KiB (Linux
/// `/proc/PID/status`).
pub fn rss_kib_of(pid: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Sends `sig` to a child we started.
pub fn signal(child: &std::process::Child, sig: i32) {
    // SAFETY: kill(2) only sends a signal to the child we started.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0, "kill");
}

/// Sends SIGINT to a child (a user's Ctrl-C).
pub fn interrupt(child: &std::process::Child) {
    signal(child, libc::SIGINT);
}

/// Makes a FIFO at `path` (nobody writes to it: a plain read blocks for ever).
pub fn mkfifo(path: &std::path::Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo(3) reads the NUL-terminated path and touches no other memory.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// Starts the simulator with `script` on a free loopback port.
pub async fn simulator(script: llm_probe::simulate::Script) -> llm_probe::simulate::Simulator {
    llm_probe::simulate::Simulator::start("127.0.0.1:0".parse().unwrap(), script)
        .await
        .expect("the simulator starts")
}

/// The stderr of a child, read line by line, everything read so far kept in `text`.
pub struct StderrLines {
    reader: std::io::BufReader<std::process::ChildStderr>,
    pub text: String,
}

impl StderrLines {
    /// Reads up to and including the first line containing `needle` and returns that line;
    /// panics (with the log) when the child closes stderr first.
    pub fn until(&mut self, needle: &str) -> String {
        use std::io::BufRead;
        loop {
            let mut line = String::new();
            assert!(
                self.reader.read_line(&mut line).unwrap() > 0,
                "the process ended before logging {needle:?}:\n{}",
                self.text
            );
            self.text += &line;
            if line.contains(needle) {
                return line;
            }
        }
    }

    /// The first line containing `needle`, whether already read (by an earlier [`Self::until`]
    /// that waited for another line) or still to come: for lines whose order is not fixed.
    pub fn seen_or_until(&mut self, needle: &str) -> String {
        match self.text.lines().find(|l| l.contains(needle)) {
            Some(line) => format!("{line}\n"),
            None => self.until(needle),
        }
    }

    /// Waits for `run`'s "serving metrics on http://ADDR/metrics" line and returns ADDR.
    pub fn served_addr(&mut self) -> String {
        let line = self.until("serving metrics on http://");
        let rest = line.split("http://").nth(1).unwrap();
        rest.split('/').next().unwrap().to_string()
    }

    /// Reads the rest (after the child ended) and returns the whole log.
    pub fn finish(mut self) -> String {
        use std::io::Read;
        self.reader.read_to_string(&mut self.text).unwrap();
        self.text
    }
}

/// Starts `bin args --config.file config` with `env`, stdout and stderr piped.
pub fn spawn_logged(
    bin: &str,
    args: &[&str],
    config: &std::path::Path,
    env: &[(&str, &str)],
) -> (ChildGuard, StderrLines) {
    let mut child = ChildGuard(
        std::process::Command::new(bin)
            .args(args)
            .arg("--config.file")
            .arg(config)
            .envs(env.iter().copied())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let reader = std::io::BufReader::new(child.0.stderr.take().unwrap());
    let lines = StderrLines {
        reader,
        text: String::new(),
    };
    (child, lines)
}

/// A probes file with one target `sim` that no probe reaches within a test (port 1, a 60 s
/// interval): for tests of the exporter's own endpoints.
pub fn idle_yaml() -> String {
    yaml("http://127.0.0.1:1/v1", "60s", &scenario("chat", 8), "")
}

/// Queries a Prometheus on loopback `port` through its HTTP API; returns the `data.result`
/// array (empty while it starts or when the query fails).
pub async fn prometheus_query(port: u16, promql: &str) -> Vec<serde_json::Value> {
    let url = format!("http://127.0.0.1:{port}/api/v1/query");
    // A bounded wait, so that a caller's own deadline is reached even if Prometheus accepts
    // the connection and never answers.
    let Ok(resp) = reqwest::Client::new()
        .get(url)
        .query(&[("query", promql)])
        .timeout(std::time::Duration::from_secs(10))
        .send()
        .await
    else {
        return vec![];
    };
    let Ok(v) = resp.json::<serde_json::Value>().await else {
        return vec![];
    };
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

/// `llm-probe healthcheck --url URL EXTRA…` as parsed and mapped by the command line.
pub fn healthcheck_args(url: &str, extra: &[String]) -> llm_probe::healthcheck::Options {
    use clap::Parser;
    let argv = ["llm-probe", "healthcheck", "--url", url]
        .into_iter()
        .map(String::from)
        .chain(extra.iter().cloned());
    match llm_probe::cli::Cli::try_parse_from(argv).unwrap().command {
        llm_probe::cli::Command::Healthcheck(a) => a.into(),
        _ => unreachable!(),
    }
}

/// Reads one HTTP request from `tcp` (its head, then a `Content-Length` body); returns the head
/// as received, or everything read when the peer closes first.
pub async fn read_request_head(tcp: &mut tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = tcp.read(&mut chunk).await.unwrap_or(0);
        if n == 0 {
            return String::from_utf8_lossy(&buf).into_owned();
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let len = text[..end]
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().to_string())
                })
                .map_or(0, |v| v.parse::<usize>().unwrap());
            if buf.len() >= end + 4 + len {
                return text[..end].to_string();
            }
        }
    }
}

/// `input` split at `offsets` (any order, duplicates allowed, clamped to the length): the
/// reads a decoder is fed.
pub fn split_at_offsets(input: &[u8], offsets: &[usize]) -> Vec<Vec<u8>> {
    let mut cuts: Vec<usize> = offsets.iter().map(|&o| o.min(input.len())).collect();
    cuts.sort_unstable();
    let mut parts = Vec::new();
    let mut start = 0;
    for cut in cuts {
        parts.push(input[start..cut].to_vec());
        start = cut;
    }
    parts.push(input[start..].to_vec());
    parts
}

/// Server options with on-demand probes (`/probe`) on and no period between two of a target.
pub fn on_demand_probes() -> llm_probe::server::ServerOptions {
    llm_probe::server::ServerOptions {
        debug_probe: llm_probe::server::DebugProbePolicy {
            enabled: true,
            min_interval: Some(Duration::ZERO),
        },
        ..Default::default()
    }
}
