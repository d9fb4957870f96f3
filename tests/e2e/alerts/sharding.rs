//! Sharding across replicas (`run --shard.count N --shard.index I`): three in-process daemons
//! read the same 30-pair probes file and split it by rendezvous hashing; one real Prometheus
//! scrapes all three with the shipped rules.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::rules::Scrape;
use llm_probe::daemon::Daemon;
use llm_probe::shard::{owner, Shard};
use llm_probe::simulate::{Script, Simulator};

const SCENARIOS: [&str; 3] = ["chat", "short", "long"];

/// A probes file with targets `t{i}` for `i` in `targets`, each with the three scenarios, all
/// pointing at `base_url`, probed every second.
fn probes_yaml(base_url: &str, targets: impl IntoIterator<Item = usize>) -> String {
    let mut y = "defaults:\n  interval: 1s\nscenarios:\n".to_string();
    for s in SCENARIOS {
        y += &common::scenario(s, 4);
    }
    y += "targets:\n";
    for i in targets {
        y += &format!(
            "  - name: t{i}\n    protocol: openai-chat\n    base_url: {base_url}\n    model: sim-model\n"
        );
    }
    y
}

async fn fast_simulator() -> Simulator {
    common::simulator(Script {
        ttft: Duration::from_millis(20),
        itl: Duration::from_millis(1),
        tokens: 4,
        ..Script::default()
    })
    .await
}

/// Starts replica `index` of 3 reading `file`.
async fn replica(file: &std::path::Path, index: u32) -> Daemon {
    let cfg = llm_probe::config::load(file).expect("loads");
    Daemon::start_sharded(
        cfg,
        "127.0.0.1:0".parse().unwrap(),
        Some(file.to_path_buf()),
        Shard::new(index, 3).unwrap(),
    )
    .await
    .expect("daemon starts")
}

/// The simulator, the probes file (10 targets × 3 scenarios, in a temporary directory) and
/// replicas 0, 1 and 2 of 3 reading it.
async fn three_replicas() -> (
    Simulator,
    tempfile::TempDir,
    std::path::PathBuf,
    Vec<Daemon>,
) {
    let sim = fast_simulator().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("probes.yaml");
    std::fs::write(&file, probes_yaml(&sim.base_url(), 0..10)).unwrap();
    let mut daemons = Vec::new();
    for i in 0..3 {
        daemons.push(replica(&file, i).await);
    }
    (sim, dir, file, daemons)
}

/// For every (target, scenario) with an `llm_probe_probes_total` series on any replica, the
/// replicas that export it.
async fn exporters_of_pairs(addrs: &[SocketAddr]) -> BTreeMap<(String, String), Vec<usize>> {
    let mut seen: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
    for (i, addr) in addrs.iter().enumerate() {
        let (_, _, body) = common::get(*addr, "/metrics", None).await;
        for line in body
            .lines()
            .filter(|l| l.starts_with("llm_probe_probes_total{"))
        {
            let label = |k: &str| {
                let start = line.find(&format!("{k}=\"")).unwrap() + k.len() + 2;
                line[start..start + line[start..].find('"').unwrap()].to_string()
            };
            seen.entry((label("target"), label("scenario")))
                .or_default()
                .push(i);
        }
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_split_the_pairs_and_a_reload_reevaluates_ownership() {
    let (sim, _dir, file, daemons) = three_replicas().await;
    let addrs: Vec<SocketAddr> = daemons.iter().map(|d| d.addr).collect();

    let seen = exporters_of_pairs(&addrs).await;
    assert_eq!(seen.len(), 30, "{seen:?}");
    for ((t, s), on) in &seen {
        assert_eq!(on, &[owner(t, s, 3) as usize], "({t}, {s})");
    }
    // Every replica owns some pairs, says which shard it is, and lists its pairs on /.
    for (i, addr) in addrs.iter().enumerate() {
        let owned: Vec<_> = seen.iter().filter(|(_, on)| on[0] == i).collect();
        assert!(!owned.is_empty(), "replica {i} owns nothing");
        let (_, _, body) = common::get(*addr, "/metrics", None).await;
        let index = i.to_string();
        assert_eq!(
            common::sample(
                &body,
                "llm_probe_shard_info",
                &[("index", &index), ("count", "3")]
            ),
            Some(1.0)
        );
        let (_, _, page) = common::get(*addr, "/", None).await;
        assert!(
            page.contains(&format!("shard {i} of 3: {} of 30 ", owned.len())),
            "{page}"
        );
        for ((t, s), _) in &owned {
            assert!(page.contains(&format!("<code>{t}</code> / <code>{s}</code>")));
        }
    }
    // Probes actually run only for owned pairs.
    for (i, d) in daemons.iter().enumerate() {
        let mut rx = d.subscribe();
        for o in common::outcomes(&mut rx, 5, Duration::from_secs(20)).await {
            assert_eq!(owner(&o.target, &o.scenario, 3) as usize, i);
        }
    }

    // Reload with t0 gone and t10, t11 new: t0's series leave their owner, the new pairs
    // appear on theirs only.
    std::fs::write(&file, probes_yaml(&sim.base_url(), 1..12)).unwrap();
    for d in &daemons {
        let summary = d.reload().await.expect("reload succeeds");
        assert!(summary.contains("of 33 pairs"), "{summary}");
    }
    let seen = exporters_of_pairs(&addrs).await;
    assert_eq!(seen.len(), 33, "{seen:?}");
    assert!(seen.keys().all(|(t, _)| t != "t0"));
    for ((t, s), on) in &seen {
        assert_eq!(on, &[owner(t, s, 3) as usize], "({t}, {s})");
    }
    for d in daemons {
        d.stop().await;
    }
}

/// The `instance` labels of the firing alerts named `name`.
async fn firing(p: &common::rules::Prometheus, name: &str) -> BTreeSet<String> {
    common::rules::alerts(p, name)
        .await
        .iter()
        .filter(|a| a["state"] == "firing")
        .map(|a| a["labels"]["instance"].as_str().unwrap_or("").to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_prometheus_sees_each_pair_once_and_a_dead_replica_alone_fires_exporter_down() {
    let (_sim, dir, _file, daemons) = three_replicas().await;
    let mut daemons: Vec<Option<Daemon>> = daemons.into_iter().map(Some).collect();
    let addrs: Vec<SocketAddr> = daemons.iter().flatten().map(|d| d.addr).collect();
    let scrapes: Vec<Scrape> = addrs
        .iter()
        .map(|&addr| Scrape { addr, labels: &[] })
        .collect();
    let prom = common::rules::start(dir.path(), &scrapes).await;

    // Every pair's probe counter comes from exactly one instance, the owner.
    let deadline = Instant::now() + Duration::from_secs(60);
    let p95 = "target_model_scenario:llm_probe_time_to_first_token_seconds:p95_10m";
    loop {
        let per_pair = common::rules::vector(
            &prom,
            "count by (target, scenario) (llm_probe_probes_total)",
        )
        .await;
        let p95s = common::rules::vector(&prom, &format!("{p95} > 0")).await;
        if per_pair.len() == 30 && p95s.len() == 30 {
            for series in &per_pair {
                assert_eq!(series["value"][1], "1", "{series}");
            }
            // One P95 per pair, each pair once.
            let pairs: BTreeSet<_> = p95s
                .iter()
                .map(|s| {
                    let m = &s["metric"];
                    (m["target"].to_string(), m["scenario"].to_string())
                })
                .collect();
            assert_eq!(pairs.len(), 30);
            for s in &p95s {
                let v: f64 = s["value"][1].as_str().unwrap().parse().unwrap();
                assert!(v > 0.0 && v <= 0.3, "P95 of a 20 ms TTFT: {s}");
            }
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after 60 s: {} pairs with probes, {} with a P95",
            per_pair.len(),
            p95s.len()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let by_instance = common::rules::vector(
        &prom,
        "count by (instance) (llm_probe_probes_total) * on (instance) group_left (index) llm_probe_shard_info",
    )
    .await;
    assert_eq!(by_instance.len(), 3, "{by_instance:?}");

    // Positive control: nothing is down yet.
    assert!(firing(&prom, "LlmProbeExporterDown").await.is_empty());
    daemons[1].take().unwrap().stop().await;
    let dead = addrs[1].to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let down = firing(&prom, "LlmProbeExporterDown").await;
        if !down.is_empty() {
            assert_eq!(down, BTreeSet::from([dead.clone()]));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "LlmProbeExporterDown did not fire for {dead}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // It stays that way: the live replicas never join it.
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let states: Vec<_> = common::rules::alerts(&prom, "LlmProbeExporterDown")
            .await
            .iter()
            .map(|a| a["labels"]["instance"].as_str().unwrap_or("").to_string())
            .collect();
        assert_eq!(states, std::slice::from_ref(&dead));
    }
    for d in daemons.into_iter().flatten() {
        d.stop().await;
    }
}

const BIN: &str = env!("CARGO_BIN_EXE_llm-probe");

#[test]
fn check_config_prints_each_pair_under_its_owner() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("probes.yaml");
    std::fs::write(&file, probes_yaml("http://127.0.0.1:9/v1", 0..10)).unwrap();
    let out = std::process::Command::new(BIN)
        .args(["check-config", "--shard.count", "3", "--config.file"])
        .arg(&file)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("shard assignment for --shard.count 3 (30 pairs)"),
        "{stdout}"
    );
    let mut shard = None;
    let mut listed = BTreeSet::new();
    for line in stdout.lines() {
        if let Some(rest) = line.strip_prefix("  shard ") {
            shard = Some(rest.split(':').next().unwrap().parse::<u32>().unwrap());
        } else if let Some(pair) = line.strip_prefix("    ") {
            let (t, s) = pair.split_once('/').unwrap();
            assert_eq!(Some(owner(t, s, 3)), shard, "{pair}");
            assert!(listed.insert(pair.to_string()), "{pair} listed twice");
        }
    }
    assert_eq!(listed.len(), 30);
    // Out of range: a clear error from the flag parser.
    let out = std::process::Command::new(BIN)
        .args(["check-config", "--shard.count", "0", "--config.file"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn run_takes_the_index_from_a_statefulset_host_name() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("probes.yaml");
    std::fs::write(&file, probes_yaml("http://127.0.0.1:9/v1", 0..10)).unwrap();
    let run = |hostname: &str| {
        let mut cmd = std::process::Command::new(BIN);
        cmd.args([
            "--log.level=info",
            "run",
            "--web.listen-address=127.0.0.1:0",
            "--shard.count=3",
            "--shard.index-from-hostname",
            "--config.file",
        ])
        .arg(&file)
        .env("HOSTNAME", hostname)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
        common::ChildGuard(cmd.spawn().unwrap())
    };
    // Not a StatefulSet name: exit 1 with the reason.
    let mut bad = run("probe-box");
    let status = bad.0.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(bad.0.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("does not end in -<ordinal>"), "{err}");

    let mut good = run("llm-probe-2");
    let mut lines = std::io::BufReader::new(good.0.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("a serving line").unwrap();
        if let Some(rest) = line.split("serving metrics on http://").nth(1) {
            break rest.split('/').next().unwrap().to_string();
        }
    };
    let body = blocking_get(&format!("http://{addr}/metrics"));
    assert!(
        body.contains("llm_probe_shard_info{index=\"2\",count=\"3\"} 1"),
        "{body}"
    );
    let owned = body
        .lines()
        .filter(|l| l.starts_with("llm_probe_probes_total{"))
        .count();
    let expected = (0..10)
        .flat_map(|i| SCENARIOS.map(|s| owner(&format!("t{i}"), s, 3)))
        .filter(|&o| o == 2)
        .count();
    assert_eq!(owned, expected);
}

/// A GET from a synchronous test (a one-off runtime).
fn blocking_get(url: &str) -> String {
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(async { reqwest::get(url).await.unwrap().text().await.unwrap() })
}
