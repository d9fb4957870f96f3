//! A real Prometheus (the Debian package's `prometheus` on PATH) for the tests: its own
//! temporary data directory, a loopback port, a 1 s scrape and rule-evaluation interval, and the
//! HTTP API. Killed and reaped when dropped.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// One scrape target of job `llm-probe` and the target labels Prometheus adds to its series.
pub struct Scrape<'a> {
    pub addr: SocketAddr,
    pub labels: &'a [(&'a str, &'a str)],
}

/// How a [`Prometheus`] runs beyond its rules and scrape targets.
pub struct Options<'a> {
    /// Extra command-line flags (e.g. `--enable-feature=native-histograms`).
    pub flags: &'a [&'a str],
    /// The Alertmanager (`host:port`) it sends alerts to, if any.
    pub alertmanager: Option<&'a str>,
    /// The scrape job's name (`llm-probe` by default; the shipped rules must not depend on it).
    pub job: &'a str,
}

impl Default for Options<'_> {
    fn default() -> Self {
        Options {
            flags: &[],
            alertmanager: None,
            job: "llm-probe",
        }
    }
}

/// A running Prometheus, stopped on drop.
pub struct Prometheus {
    _child: super::ChildGuard,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
}

impl Prometheus {
    /// Starts Prometheus in `dir` (config file and TSDB go there), scraping `scrape` (job
    /// `llm-probe`) every second and evaluating the rule files `rule_files` (paths relative to
    /// `dir`, or absolute) every second; returns once `/-/ready` answers (at most 20 s).
    pub async fn start(dir: &Path, rule_files: &[String], scrape: SocketAddr) -> Prometheus {
        Self::start_with(dir, rule_files, scrape, &[]).await
    }

    /// [`Prometheus::start`] with extra command-line flags (e.g.
    /// `--enable-feature=native-histograms`).
    pub async fn start_with(
        dir: &Path,
        rule_files: &[String],
        scrape: SocketAddr,
        flags: &[&str],
    ) -> Prometheus {
        let target = Scrape {
            addr: scrape,
            labels: &[],
        };
        Self::start_full(dir, rule_files, &[target], flags).await
    }

    /// [`Prometheus::start`] with several scrape targets of job `llm-probe`, each with the
    /// target labels Prometheus adds to its series (e.g. `location`).
    pub async fn start_scraping(
        dir: &Path,
        rule_files: &[String],
        targets: &[Scrape<'_>],
    ) -> Prometheus {
        Self::start_full(dir, rule_files, targets, &[]).await
    }

    /// Several scrape targets and extra command-line flags.
    pub async fn start_full(
        dir: &Path,
        rule_files: &[String],
        targets: &[Scrape<'_>],
        flags: &[&str],
    ) -> Prometheus {
        let options = Options {
            flags,
            ..Options::default()
        };
        Self::start_options(dir, rule_files, targets, &options).await
    }

    /// Several scrape targets with every [`Options`] knob.
    pub async fn start_options(
        dir: &Path,
        rule_files: &[String],
        targets: &[Scrape<'_>],
        options: &Options<'_>,
    ) -> Prometheus {
        let bin = super::require_tool("prometheus", "apt-get install prometheus");
        let mut config = "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n".to_string();
        if let Some(am) = options.alertmanager {
            config += &format!(
                "alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['{am}']\n"
            );
        }
        config += &format!(
            "rule_files: {rule_files:?}\nscrape_configs:\n  - job_name: {}\n    static_configs:\n",
            options.job
        );
        for t in targets {
            config += &format!("      - targets: ['{}']\n", t.addr);
            if !t.labels.is_empty() {
                config += "        labels:\n";
                for (k, v) in t.labels {
                    config += &format!("          {k}: {v:?}\n");
                }
            }
        }
        std::fs::write(dir.join("prometheus.yml"), config).unwrap();
        let port = super::free_port();
        let child = Command::new(bin)
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .args(options.flags)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start prometheus");
        let p = Prometheus {
            _child: super::ChildGuard(child),
            url: format!("http://127.0.0.1:{port}"),
        };
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(r) = client.get(format!("{}/-/ready", p.url)).send().await {
                if r.status().is_success() {
                    break;
                }
            }
            assert!(Instant::now() < deadline, "prometheus not ready in 20 s");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        p
    }

    /// The sum of the instant query `q`'s result values at `time` (Unix seconds; now when
    /// `None`), 0 without series.
    pub async fn sum(&self, q: &str, time: Option<f64>) -> f64 {
        let t = time.map(|t| t.to_string());
        let mut query = vec![("query", q)];
        if let Some(t) = &t {
            query.push(("time", t));
        }
        let d = self.api("/api/v1/query", &query).await;
        d["result"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|s| s["value"][1].as_str()?.parse::<f64>().ok())
            .sum()
    }

    /// GETs the API `path` with `query`; returns `data`, panicking unless `status` is `success`.
    pub async fn api(&self, path: &str, query: &[(&str, &str)]) -> Value {
        let r = reqwest::Client::new()
            .get(format!("{}{path}", self.url))
            .query(query)
            .send()
            .await
            .unwrap();
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["status"], "success", "{path} {query:?}: {v}");
        v["data"].clone()
    }

    /// `/api/v1/query_exemplars` for `query` over the last 10 minutes: the series list
    /// (`data`) and every exemplar in it, flattened.
    pub async fn exemplars(&self, query: &str) -> (Value, Vec<Value>) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let (start, end) = ((now - 600.0).to_string(), (now + 60.0).to_string());
        let data = self
            .api(
                "/api/v1/query_exemplars",
                &[("query", query), ("start", &start), ("end", &end)],
            )
            .await;
        let found = data
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|s| s["exemplars"].as_array().cloned().unwrap_or_default())
            .collect();
        (data, found)
    }
}

/// Runs `promtool check metrics` on an exposition; panics with its output unless it passes.
pub fn promtool_check_metrics(text: &str) {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let promtool = super::require_tool("promtool", "apt-get install prometheus");
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
