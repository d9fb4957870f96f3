//! A real Alertmanager (Debian `prometheus-alertmanager`) running the shipped example
//! configuration (dashboards/alertmanager/alertmanager.example.yml) with its receivers pointed
//! at a loopback webhook that records every notification, and its `group_wait`,
//! `group_interval` and `repeat_interval` divided by [`TIME_SCALE`] like the test rules'
//! durations. Killed and reaped when dropped.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::rules::{scale_rules, TIME_SCALE};

/// One notification: when it arrived, the receiver path (`/page`, `/ticket`), the payload.
#[derive(Debug, Clone)]
pub struct Note {
    pub at: Instant,
    pub path: String,
    pub body: Value,
}

impl Note {
    /// The value of label `key` common to the notification's group (`groupLabels`).
    pub fn group(&self, key: &str) -> &str {
        self.body["groupLabels"][key].as_str().unwrap_or("")
    }

    /// `(alertname, replica)` of each firing alert the notification carries.
    pub fn firing(&self) -> Vec<(String, String)> {
        self.body["alerts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["status"] == "firing")
            .map(|a| {
                let l = &a["labels"];
                let s = |k: &str| l[k].as_str().unwrap_or("").to_string();
                (s("alertname"), s("replica"))
            })
            .collect()
    }
}

/// The notifications received so far, in arrival order.
pub type Notes = Arc<Mutex<Vec<Note>>>;

/// A webhook receiver on a loopback port: every POST is recorded as a [`Note`] and answered 200.
pub async fn webhook() -> (SocketAddr, Notes) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let notes: Notes = Arc::new(Mutex::new(Vec::new()));
    let n = notes.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let n = n.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                loop {
                    let Ok(k) = s.read(&mut chunk).await else {
                        return;
                    };
                    if k == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..k]);
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        continue;
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).to_string();
                    let len: usize = head
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse().ok())?
                        })
                        .unwrap_or(0);
                    if buf.len() < end + 4 + len {
                        continue;
                    }
                    let path = head.split(' ').nth(1).unwrap_or("").to_string();
                    let body =
                        serde_json::from_slice(&buf[end + 4..end + 4 + len]).unwrap_or(Value::Null);
                    n.lock().unwrap().push(Note {
                        at: Instant::now(),
                        path,
                        body,
                    });
                    let _ = s
                        .write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                        )
                        .await;
                    return;
                }
            });
        }
    });
    (addr, notes)
}

/// The shipped Alertmanager example with the receivers' URLs at `hook` and its timers divided
/// by `k`.
pub fn config(hook: SocketAddr, k: u64) -> String {
    let text = std::fs::read_to_string(
        super::dashboards::root().join("dashboards/alertmanager/alertmanager.example.yml"),
    )
    .unwrap();
    assert!(text.contains("http://127.0.0.1:9095/"));
    let mut timers = 0;
    let text: String = text
        .replace("http://127.0.0.1:9095/", &format!("http://{hook}/"))
        .lines()
        .map(|l| {
            let t = l.trim_start();
            for key in ["group_wait: ", "group_interval: ", "repeat_interval: "] {
                if let Some(d) = t.strip_prefix(key) {
                    timers += 1;
                    let (rules, _) = scale_rules(&format!("for: {d}\n"), k, "am");
                    let d = rules.trim().trim_start_matches("for: ").to_string();
                    return format!("{}{key}{d}\n", &l[..l.len() - t.len()]);
                }
            }
            format!("{l}\n")
        })
        .collect();
    assert_eq!(timers, 3, "group_wait, group_interval, repeat_interval");
    text
}

/// Waits until `url/-/ready` answers 200 (at most 30 s); `what` names the program.
pub async fn wait_ready(url: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(r) = reqwest::get(format!("{url}/-/ready")).await {
            if r.status().is_success() {
                return;
            }
        }
        assert!(Instant::now() < deadline, "{what} not ready in 30 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A running Alertmanager, stopped on drop.
pub struct Alertmanager {
    _child: super::ChildGuard,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
}

impl Alertmanager {
    /// Starts the shipped example (timers divided by [`TIME_SCALE`]) in `dir`, notifying `hook`;
    /// returns once it is ready.
    pub async fn start(dir: &Path, hook: SocketAddr) -> Alertmanager {
        let bin = super::require_tool(
            "prometheus-alertmanager",
            "apt-get install prometheus-alertmanager",
        );
        let cfg = dir.join("alertmanager.yml");
        std::fs::write(&cfg, config(hook, TIME_SCALE)).unwrap();
        let port = super::free_port();
        let child = std::process::Command::new(bin)
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!("--storage.path={}", dir.join("am-data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--cluster.listen-address=")
            .arg("--log.level=warn")
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("start prometheus-alertmanager");
        let am = Alertmanager {
            _child: super::ChildGuard(child),
            url: format!("http://127.0.0.1:{port}"),
        };
        wait_ready(&am.url, "alertmanager").await;
        am
    }

    /// `host:port`, as Prometheus' `alertmanagers` static config wants it.
    pub fn host_port(&self) -> &str {
        self.url.trim_start_matches("http://")
    }
}
