//! The incident suite: the shipped alerting, end to end with real parts. A real
//! Prometheus loads the shipped rule files with only their durations divided by 15
//! (`common::rules::scale_rules`: a 1 s probe interval, scrape and evaluation stand for
//! production's 15 s) and sends to a real Alertmanager (Debian `prometheus-alertmanager`) that
//! runs the shipped example configuration (dashboards/alertmanager/alertmanager.example.yml)
//! with its receivers pointed at a loopback webhook recording every notification, and its
//! group_wait / group_interval / repeat_interval divided by the same 15. Three daemons (two
//! `location`s) probe simulators behind switchable relays.
//!
//! Every incident starts after a healthy warm-up (the guards are met, as in production), all at
//! once, and each is judged by the notifications of its own target's group: the time to the first
//! one (reported in production seconds: ×15), that there is exactly one firing notification in
//! exactly one group, with at most one critical alert; and the silent cases send nothing.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::alertmanager::{self, Alertmanager, Note};
use common::prometheus::{Options, Prometheus, Scrape};
use common::rules::TIME_SCALE;
use llm_probe::daemon::Daemon;
use llm_probe::simulate::{Fault, Load, Script, Simulator};
use serde_json::Value;
use tokio::net::{TcpListener, TcpStream};

// ---- a switchable TCP relay in front of the simulators ---------------------------------------

#[derive(Clone, Copy)]
enum Mode {
    /// Every connection to this upstream.
    To(SocketAddr),
    /// Connections alternate between the two (a flapping backend: every other probe).
    Alternate(SocketAddr, SocketAddr),
}

struct Relay {
    addr: SocketAddr,
    mode: Arc<Mutex<Mode>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Relay {
    async fn start(mode: Mode) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mode = Arc::new(Mutex::new(mode));
        let m = mode.clone();
        let n = Arc::new(AtomicUsize::new(0));
        let accept = tokio::spawn(async move {
            while let Ok((mut down, _)) = listener.accept().await {
                let up = match *m.lock().unwrap() {
                    Mode::To(a) => a,
                    Mode::Alternate(a, b) => {
                        if n.fetch_add(1, Ordering::Relaxed).is_multiple_of(2) {
                            a
                        } else {
                            b
                        }
                    }
                };
                tokio::spawn(async move {
                    if let Ok(mut up) = TcpStream::connect(up).await {
                        let _ = tokio::io::copy_bidirectional(&mut down, &mut up).await;
                    }
                });
            }
        });
        Relay { addr, mode, accept }
    }

    fn set(&self, mode: Mode) {
        *self.mode.lock().unwrap() = mode;
    }

    /// Closes the listening socket: connections are refused from now on.
    fn refuse(&self) {
        self.accept.abort();
    }
}

/// Prometheus with the scaled shipped rules, sending to `am`, scraping each (address,
/// location) under a job that is not called llm-probe (the rules must not depend on it).
async fn start_prometheus(
    dir: &Path,
    am: &Alertmanager,
    scrapes: &[(SocketAddr, &str)],
) -> Prometheus {
    let labels: Vec<[(&str, &str); 1]> = scrapes.iter().map(|(_, l)| [("location", *l)]).collect();
    let targets: Vec<Scrape> = scrapes
        .iter()
        .zip(&labels)
        .map(|((addr, _), labels)| Scrape {
            addr: *addr,
            labels,
        })
        .collect();
    let options = Options {
        alertmanager: Some(am.host_port()),
        job: "llm-endpoints",
        ..Options::default()
    };
    let rules = common::rules::write_test_rules(dir);
    Prometheus::start_options(dir, &rules, &targets, &options).await
}

// ---- the probes ---------------------------------------------------------------------------

/// One target line set of a probes file.
struct T<'a> {
    name: &'a str,
    url: String,
    extra: &'a str,
}

fn probes_yaml(targets: &[T]) -> String {
    let mut y = String::from(
        "defaults:\n  interval: 1s\n  timeout: 900ms\nscenarios:\n  - name: chat\n    messages: [{role: user, content: \"Say something.\"}]\n    max_tokens: 8\ntargets:\n",
    );
    for t in targets {
        y += &format!(
            "  - name: {}\n    protocol: openai-chat\n    base_url: {}\n    model: m\n{}",
            t.name, t.url, t.extra
        );
    }
    y
}

/// A loopback address whose port was free a moment ago (a daemon restarted on it keeps its
/// scrape target).
fn free_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], common::free_port()))
}

async fn daemon_at(file: &Path, yaml: &str, addr: SocketAddr) -> Daemon {
    std::fs::write(file, yaml).unwrap();
    let cfg = llm_probe::config::load(file).expect("probes file loads");
    Daemon::start(cfg, addr, Some(file.to_path_buf()))
        .await
        .expect("daemon starts")
}

async fn sim(ttft_ms: u64, itl_ms: u64, fault: Fault, jitter: f64) -> Simulator {
    common::simulator(Script {
        ttft: Duration::from_millis(ttft_ms),
        itl: Duration::from_millis(itl_ms),
        tokens: 8,
        fault,
        load: Load {
            jitter,
            seed: 7,
            ..Load::default()
        },
        ..Script::default()
    })
    .await
}

/// The simulator's base URL with the relay's address instead of its own.
fn via(relay: &Relay, s: &Simulator) -> String {
    s.base_url()
        .replace(&s.addr.to_string(), &relay.addr.to_string())
}

// ---- judging --------------------------------------------------------------------------------

/// The notifications of `target`'s group(s).
fn of_target(notes: &[Note], target: &str) -> Vec<Note> {
    notes
        .iter()
        .filter(|n| n.body["groupLabels"]["target"] == target)
        .cloned()
        .collect()
}

/// (seconds to the first notification in production time, firing notifications, groups,
/// critical alert names) of `target` since `onset`.
fn judge(
    notes: &[Note],
    target: &str,
    onset: Instant,
) -> (Option<f64>, usize, usize, BTreeSet<String>) {
    let mine = of_target(notes, target);
    let first = mine
        .first()
        .map(|n| n.at.saturating_duration_since(onset).as_secs_f64() * TIME_SCALE as f64);
    let firing = mine.iter().filter(|n| n.body["status"] == "firing").count();
    let groups: BTreeSet<String> = mine
        .iter()
        .map(|n| format!("{} {}", n.path, n.body["groupKey"]))
        .collect();
    let criticals = mine
        .iter()
        .flat_map(|n| n.body["alerts"].as_array().cloned().unwrap_or_default())
        .filter(|a| a["labels"]["severity"] == "critical" && a["status"] == "firing")
        .map(|a| a["labels"]["alertname"].as_str().unwrap_or("").to_string())
        .collect();
    (first, firing, groups.len(), criticals)
}

fn describe(notes: &[Note], target: &str) -> String {
    of_target(notes, target)
        .iter()
        .map(|n| {
            let alerts: Vec<String> = n.body["alerts"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|a| format!("{}({})", a["labels"]["alertname"], a["status"]))
                .collect();
            format!("{} {} {}", n.path, n.body["status"], alerts.join(","))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[test]
fn scaling_divides_every_duration_and_multiplies_the_interval() {
    let text = "groups:\n  - name: g\n    interval: 1m\n    rules:\n      # offset by [10m] stays\n      - alert: A\n        expr: max_over_time(x[30s]) == 0 and y offset 1h and (llm_probe_probe_interval_seconds) > 15\n        for: 2m\n        keep_firing_for: 45s\n";
    let (out, n) = common::rules::scale_rules(text, 15, "t");
    assert_eq!(n, 5, "{out}");
    assert!(out.contains("interval: 4000ms"), "{out}");
    assert!(out.contains("x[2000ms]"), "{out}");
    assert!(out.contains("offset 240000ms"), "{out}");
    assert!(
        out.contains("(llm_probe_probe_interval_seconds * 15) > 15"),
        "{out}"
    );
    assert!(
        out.contains("for: 8000ms") && out.contains("keep_firing_for: 3000ms"),
        "{out}"
    );
    assert!(
        out.contains("# offset by [10m] stays"),
        "comments are kept: {out}"
    );
    // The shipped files: every window is rewritten (no duration of a minute or more is left in
    // an expression), the interval is read once, and promtool accepts the result.
    common::require_tool("promtool", "apt-get install prometheus");
    let dir = tempfile::tempdir().unwrap();
    for name in common::rules::write_test_rules(dir.path()) {
        let text = std::fs::read_to_string(dir.path().join(&name)).unwrap();
        for line in text.lines().filter(|l| !l.trim_start().starts_with('#')) {
            if line.contains("description") || line.contains("summary") {
                continue;
            }
            for unit in ["m]", "h]", "d]", "w]"] {
                assert!(!line.contains(unit), "{name}: unscaled window in {line}");
            }
        }
        let out = std::process::Command::new("promtool")
            .args(["check", "rules"])
            .arg(dir.path().join(&name))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let rec = std::fs::read_to_string(dir.path().join("recording.yml")).unwrap();
    assert_eq!(
        rec.matches("llm_probe_probe_interval_seconds * 15").count(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incidents_page_once_and_fast_and_the_quiet_stay_quiet() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (hook, notes) = alertmanager::webhook().await;
    let am = Alertmanager::start(d, hook).await;

    // Backends.
    let fast = sim(50, 5, Fault::None, 0.0).await;
    let slow = sim(450, 5, Fault::None, 0.0).await; // 1.5× the 300 ms SLO
    let six = sim(600, 5, Fault::None, 0.0).await; // under a 1 s SLO
    let decode = sim(50, 80, Fault::None, 0.0).await; // ~12 tokens/s, floor 30
    let jitter = sim(120, 5, Fault::None, 0.3).await; // lognormal jitter, ~0.1 % above 300 ms
    let e500 = sim(50, 5, Fault::Http500, 0.0).await;
    let stall = sim(50, 5, Fault::Stall, 0.0).await;
    let mut relays: BTreeMap<&str, Relay> = BTreeMap::new();
    for name in [
        "down-refused",
        "down-500",
        "down-stall",
        "slow-ttft",
        "slow-decode",
        "flapping",
        "one-location",
        "restart",
        "quiet-healthy",
        "quiet-jitter",
        "quiet-1s-slo",
    ] {
        let to = match name {
            "quiet-jitter" => jitter.addr,
            "quiet-1s-slo" => six.addr,
            _ => fast.addr,
        };
        relays.insert(name, Relay::start(Mode::To(to)).await);
    }
    let slow_us = Relay::start(Mode::To(fast.addr)).await;
    let t = |name: &'static str, extra: &'static str| T {
        name,
        url: via(&relays[name], &fast),
        extra,
    };
    let eu_targets = [
        t("down-refused", ""),
        t("down-500", ""),
        t("down-stall", ""),
        t("slow-ttft", ""),
        t("slow-decode", ""),
        t("flapping", ""),
        t("one-location", ""),
        t("quiet-healthy", ""),
        t("quiet-jitter", ""),
        t("quiet-1s-slo", "    slo: {ttft_p95: 1s}\n"),
    ];
    let us_targets = [T {
        name: "one-location",
        url: via(&slow_us, &fast),
        extra: "",
    }];
    let c_targets = [t("restart", "")];
    let files: Vec<PathBuf> = ["eu.yaml", "us.yaml", "c.yaml"]
        .iter()
        .map(|f| d.join(f))
        .collect();
    let eu = daemon_at(&files[0], &probes_yaml(&eu_targets), free_addr()).await;
    let us = daemon_at(&files[1], &probes_yaml(&us_targets), free_addr()).await;
    let c_addr = free_addr();
    let c_yaml = probes_yaml(&c_targets);
    let mut c = Some(daemon_at(&files[2], &c_yaml, c_addr).await);
    let prom = start_prometheus(d, &am, &[(eu.addr, "eu"), (us.addr, "us"), (c_addr, "eu")]).await;

    // Warm-up: healthy until every pair's fast-burn guard is met (as in production, where a
    // target has been probed for longer than the windows), and nothing has been sent.
    let client = reqwest::Client::new();
    let judged = |url: String| {
        let client = client.clone();
        async move {
            let v: Value = client
                .get(format!("{url}/api/v1/query"))
                .query(&[(
                    "query",
                    "count(target_model_scenario:llm_probe_ttft_slo:judged)",
                )])
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            v["data"]["result"][0]["value"][1]
                .as_str()
                .and_then(|s| s.parse::<f64>().ok())
                .unwrap_or(0.0)
        }
    };
    let deadline = Instant::now() + Duration::from_secs(90);
    while judged(prom.url.clone()).await < 12.0 {
        assert!(
            Instant::now() < deadline,
            "the guards were not met within 90 s"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        notes.lock().unwrap().is_empty(),
        "notifications during the healthy warm-up: {:?}",
        notes.lock().unwrap()
    );

    // Every incident at once.
    let onset = Instant::now();
    relays["down-refused"].refuse();
    relays["down-500"].set(Mode::To(e500.addr));
    relays["down-stall"].set(Mode::To(stall.addr));
    relays["slow-ttft"].set(Mode::To(slow.addr));
    relays["slow-decode"].set(Mode::To(decode.addr));
    relays["flapping"].set(Mode::Alternate(fast.addr, e500.addr));
    slow_us.set(Mode::To(slow.addr));
    relays["restart"].refuse();
    // The exporter probing `restart` is restarted during the outage, before detection.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    c.take().unwrap().stop().await;
    c = Some(daemon_at(&files[2], &c_yaml, c_addr).await);

    // Until every incident has notified, then one group_interval (20 s) more, to catch any
    // second notification.
    let loud = [
        "down-refused",
        "down-500",
        "down-stall",
        "slow-ttft",
        "slow-decode",
        "flapping",
        "one-location",
        "restart",
    ];
    let quiet = ["quiet-healthy", "quiet-jitter", "quiet-1s-slo"];
    let deadline = onset + Duration::from_secs(120);
    let mut restarted_again = false;
    loop {
        let n = notes.lock().unwrap().clone();
        if !restarted_again && !of_target(&n, "restart").is_empty() {
            // And once more while its alert fires: it must not resolve and page again.
            restarted_again = true;
            c.take().unwrap().stop().await;
            c = Some(daemon_at(&files[2], &c_yaml, c_addr).await);
        }
        if loud.iter().all(|t| !of_target(&n, t).is_empty()) {
            break;
        }
        let missing: Vec<_> = loud
            .iter()
            .filter(|t| of_target(&n, t).is_empty())
            .collect();
        assert!(
            Instant::now() < deadline,
            "no notification for {missing:?} within 120 s"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    tokio::time::sleep(Duration::from_secs(22)).await;

    let n = notes.lock().unwrap().clone();
    let mut report = Vec::new();
    for target in loud {
        let (first, firing, groups, criticals) = judge(&n, target, onset);
        let first = first.unwrap();
        report.push(format!(
            "{target}: first notification after {first:.0} s (production time), {firing} firing notification(s), {groups} group(s), criticals {criticals:?}"
        ));
        let what = describe(&n, target);
        assert_eq!(firing, 1, "{target}: {what}");
        assert_eq!(groups, 1, "{target}: {what}");
        assert!(criticals.len() <= 1, "{target}: {what}");
        let (bound, page): (f64, Option<&str>) = match target {
            // Down: within 2 minutes at a 15 s interval (the stall: plus its 900 ms × 15 timeout).
            "down-refused" | "down-500" | "restart" => (120.0, Some("LlmProbeEndpointDown")),
            "down-stall" => (
                120.0 + 0.9 * TIME_SCALE as f64,
                Some("LlmProbeEndpointDown"),
            ),
            "slow-ttft" | "flapping" => (15.0 * 60.0, Some("LlmProbeTTFTP95AboveSLO")),
            _ => (20.0 * 60.0, None),
        };
        // A flapping backend pages once. With strict alternation that page is the fast burn
        // (failed probes are bad events); on a loaded machine two probes in a row can fail (or
        // two scrapes see one failed probe), and then the one page is LlmProbeEndpointDown,
        // which inhibits the burn alert. Either is one critical in one group.
        let page = match page {
            Some(_) if target == "flapping" && criticals.contains("LlmProbeEndpointDown") => {
                Some("LlmProbeEndpointDown")
            }
            page => page,
        };
        assert!(
            first <= bound,
            "{target}: first notification after {first:.0} s > {bound} s: {what}"
        );
        let names: BTreeSet<String> = of_target(&n, target)
            .iter()
            .flat_map(|n| n.body["alerts"].as_array().cloned().unwrap_or_default())
            .map(|a| a["labels"]["alertname"].as_str().unwrap_or("").to_string())
            .collect();
        let expected = match target {
            "slow-decode" => "LlmProbeOutputTokensPerSecondBelowFloor",
            "one-location" => "LlmProbeTTFTP95AboveSLOFromOneLocation",
            _ => page.unwrap(),
        };
        assert!(
            names.contains(expected),
            "{target}: expected {expected}: {what}"
        );
        match page {
            Some(alert) => assert_eq!(
                criticals,
                BTreeSet::from([alert.to_string()]),
                "{target}: {what}"
            ),
            None => assert!(criticals.is_empty(), "{target}: a warning only: {what}"),
        }
    }
    for target in quiet {
        assert!(
            of_target(&n, target).is_empty(),
            "{target} must stay silent: {}",
            describe(&n, target)
        );
    }
    eprintln!("{}", report.join("\n"));
    eu.stop().await;
    us.stop().await;
    c.take().unwrap().stop().await;
}
