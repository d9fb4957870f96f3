//! A pool of replicas for the replica tests: simulators on loopback addresses, a file_sd file,
//! the probes file of a target with `replicas:`, reading its series, and a real DNS server
//! (dnsmasq) serving A and SRV records on a loopback port.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use llm_probe::daemon::Daemon;
use llm_probe::simulate::{Script, Simulator};

/// A simulator with `script` on `ip` (a loopback address; Linux routes all of 127.0.0.0/8 to
/// the loopback interface) at `port` (0: chosen by the system).
pub async fn simulator_at(ip: &str, port: u16, script: Script) -> Simulator {
    Simulator::start(format!("{ip}:{port}").parse().unwrap(), script)
        .await
        .expect("the simulator starts")
}

/// Writes `bytes` to `path` whole at once (a temporary renamed over it), as Prometheus' own
/// file_sd writers are told to.
pub fn write_whole(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Writes a file_sd file listing `targets` at `path`, whole at once.
pub fn write_sd(path: &Path, targets: &[String]) {
    let body = serde_json::json!([{ "targets": targets, "labels": { "pool": "test" } }]);
    write_whole(path, body.to_string().as_bytes());
}

/// The addresses of `sims`, as `ip:port`.
pub fn addrs(sims: &[&Simulator]) -> Vec<String> {
    sims.iter().map(|s| s.addr.to_string()).collect()
}

/// A probes file: target `pool` (base URL host `pool.test` at `port`, which no system resolver
/// knows: every request must go to a replica's address) with `replicas:` as given, probed every
/// `interval` (the timeout too), and `extra` more targets (YAML list items).
pub fn pool_yaml_at(port: u16, replicas: &str, interval: &str, extra: &str) -> String {
    format!(
        "defaults:\n  interval: {interval}\n  timeout: {interval}\nscenarios:\n{}targets:\n  - name: pool\n    protocol: openai-chat\n    base_url: http://pool.test:{port}/v1\n    model: m\n    replicas:\n{replicas}{extra}",
        super::scenario("chat", 4)
    )
}

/// [`pool_yaml_at`] port 8000.
pub fn pool_yaml(replicas: &str, interval: &str, extra: &str) -> String {
    pool_yaml_at(8000, replicas, interval, extra)
}

/// A daemon started from `yaml`, which is written to `dir/probes.yaml` so that its reloads
/// (`Daemon::reload`) read that file: the daemon and the file.
pub async fn reloadable(dir: &Path, yaml: &str) -> (Daemon, PathBuf) {
    let probes = dir.join("probes.yaml");
    std::fs::write(&probes, yaml).unwrap();
    let d = Daemon::start(
        super::parse(yaml),
        "127.0.0.1:0".parse().unwrap(),
        Some(probes.clone()),
    )
    .await
    .unwrap();
    (d, probes)
}

/// The daemon's text exposition.
pub async fn scrape(d: &Daemon) -> String {
    super::get(d.addr, "/metrics", None).await.2
}

/// Polls the exposition until `ok` holds (at most `limit`); returns the exposition that
/// satisfied it.
pub async fn until(d: &Daemon, what: &str, limit: Duration, ok: impl Fn(&str) -> bool) -> String {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let text = scrape(d).await;
        if ok(&text) {
            return text;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("{what}: not within {limit:?}; /metrics:\n{text}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A per-target gauge's value.
pub fn gauge(text: &str, name: &str, target: &str) -> Option<f64> {
    super::sample(text, name, &[("target", target)])
}

/// The sum and count of replica `replica`'s TTFT histogram (target `pool`).
pub fn ttft(text: &str, replica: &str) -> (f64, f64) {
    let labels = [("target", "pool"), ("replica", replica)];
    let sum = super::sample(text, "llm_probe_time_to_first_token_seconds_sum", &labels);
    let count = super::sample(text, "llm_probe_time_to_first_token_seconds_count", &labels);
    (sum.unwrap_or(0.0), count.unwrap_or(0.0))
}

/// Whether any series of the exposition carries `replica`.
pub fn series_of(text: &str, replica: &str) -> bool {
    text.contains(&format!("replica=\"{replica}\""))
}

/// The distinct `replica` label values of the exposition.
pub fn replicas_in(text: &str) -> std::collections::BTreeSet<String> {
    text.split("replica=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_string)
        .collect()
}

/// A real DNS server: dnsmasq on a loopback port (UDP and TCP), answering only from its own
/// records: A records from a hosts directory it watches (a change is served at once), SRV
/// records from its command line (changed by [`Dnsmasq::restart`]). Killed when dropped.
pub struct Dnsmasq {
    /// Where it answers.
    pub addr: SocketAddr,
    dir: PathBuf,
    srv: Vec<String>,
    child: Option<super::GroupGuard>,
}

impl Dnsmasq {
    /// Starts dnsmasq with no record, its files in `dir`.
    pub fn start(dir: &Path) -> Dnsmasq {
        let hosts = dir.join("hosts.d");
        std::fs::create_dir_all(&hosts).unwrap();
        let mut d = Dnsmasq {
            addr: SocketAddr::new([127, 0, 0, 1].into(), super::free_port()),
            dir: dir.to_path_buf(),
            srv: Vec::new(),
            child: None,
        };
        d.spawn();
        d
    }

    fn spawn(&mut self) {
        self.child = None;
        let bin = super::require_tool("dnsmasq", "apt-get install dnsmasq-base");
        let mut cmd = Command::new(bin);
        cmd.args([
            "--keep-in-foreground",
            "--conf-file=/dev/null",
            "--no-resolv",
            "--no-hosts",
            "--no-poll",
            "--bind-interfaces",
            "--listen-address=127.0.0.1",
            "--user=root",
            "--group=root",
            "--pid-file=",
            "--log-facility=-",
            "--local-ttl=0",
            // Names under .test that it has no record of: NXDOMAIN, as a real zone answers.
            "--local=/test/",
        ])
        .arg(format!("--port={}", self.addr.port()))
        .arg(format!("--hostsdir={}", self.dir.join("hosts.d").display()));
        for s in &self.srv {
            cmd.arg(format!("--srv-host={s}"));
        }
        cmd.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        self.child = Some(super::spawn_listening(&mut cmd, self.addr.port()));
    }

    /// Serves `name`'s A records as `ips` (none: the name is gone). dnsmasq reads the change
    /// from its hosts directory by itself.
    pub fn set_a(&self, name: &str, ips: &[IpAddr]) {
        let body: String = ips.iter().map(|ip| format!("{ip} {name}\n")).collect();
        let file = self.dir.join("hosts.d").join(name);
        let tmp = self.dir.join(format!("{name}.tmp"));
        std::fs::write(&tmp, body).unwrap();
        std::fs::rename(&tmp, file).unwrap();
    }

    /// Serves the SRV records `records` (`(name, target host, port)`) from now on: dnsmasq
    /// reads SRV records only at start, so it is restarted on the same port.
    pub fn restart_with_srv(&mut self, records: &[(&str, &str, u16)]) {
        self.srv = records
            .iter()
            .map(|(name, host, port)| format!("{name},{host},{port}"))
            .collect();
        self.spawn();
    }
}

/// A real balancer: haproxy on a loopback port, round robin over `servers` (HTTP, SSE passed
/// through as it arrives: `option http-no-delay`). Killed when dropped.
pub struct Haproxy {
    /// Where it listens.
    pub addr: SocketAddr,
    _child: super::GroupGuard,
}

impl Haproxy {
    /// Starts haproxy in front of `servers`, its configuration in `dir`.
    pub fn start(dir: &Path, servers: &[SocketAddr]) -> Haproxy {
        let bin = super::require_tool("haproxy", "apt-get install haproxy");
        let port = super::free_port();
        let mut cfg = format!(
            "global\n  maxconn 256\ndefaults\n  mode http\n  timeout connect 2s\n  timeout client 30s\n  timeout server 30s\n  option http-no-delay\nfrontend front\n  bind 127.0.0.1:{port}\n  default_backend pool\nbackend pool\n  balance roundrobin\n"
        );
        for (i, s) in servers.iter().enumerate() {
            cfg += &format!("  server r{i} {s}\n");
        }
        let file = dir.join("haproxy.cfg");
        std::fs::write(&file, cfg).unwrap();
        let mut cmd = Command::new(bin);
        cmd.arg("-db")
            .arg("-f")
            .arg(&file)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        let child = super::spawn_listening(&mut cmd, port);
        Haproxy {
            addr: SocketAddr::new([127, 0, 0, 1].into(), port),
            _child: child,
        }
    }
}

/// What an [`SdServer`] answers: status, content type, body.
pub type SdAnswer = (u16, &'static str, Vec<u8>);

/// A Prometheus http_sd endpoint on a loopback port: every request gets the current answer
/// ([`SdServer::set`]); it counts the requests and keeps the last one's head.
pub struct SdServer {
    /// Where it listens.
    pub addr: SocketAddr,
    answer: std::sync::Arc<std::sync::Mutex<SdAnswer>>,
    /// The head of the last request (request line and headers).
    pub last_head: std::sync::Arc<std::sync::Mutex<String>>,
}

impl SdServer {
    /// Starts it answering `answer`.
    pub async fn start(answer: SdAnswer) -> SdServer {
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let answer = std::sync::Arc::new(std::sync::Mutex::new(answer));
        let last_head = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let (a, h) = (answer.clone(), last_head.clone());
        tokio::spawn(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                let (a, h) = (a.clone(), h.clone());
                tokio::spawn(async move {
                    let head = super::read_request_head(&mut tcp).await;
                    *h.lock().unwrap() = head;
                    let (status, ctype, body) = a.lock().unwrap().clone();
                    let head = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = tcp.write_all(head.as_bytes()).await;
                    let _ = tcp.write_all(&body).await;
                    let _ = tcp.shutdown().await;
                });
            }
        });
        SdServer {
            addr,
            answer,
            last_head,
        }
    }

    /// Answers `answer` from now on.
    pub fn set(&self, answer: SdAnswer) {
        *self.answer.lock().unwrap() = answer;
    }
}

/// An http_sd answer listing `targets` (200, application/json).
pub fn sd_json(targets: &[String]) -> SdAnswer {
    let body = serde_json::json!([{ "targets": targets, "labels": { "pool": "test" } }]);
    (200, "application/json", body.to_string().into_bytes())
}

/// The `Host` header a simulator received with `request`.
pub fn host_header(request: &llm_probe::simulate::ReceivedRequest) -> Option<String> {
    request
        .headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("host"))
        .map(|(_, v)| v.clone())
}
