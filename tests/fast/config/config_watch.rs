//! `run --config.watch`: a probes file mounted from a Kubernetes
//! ConfigMap is a symlink into a `..data` directory link that the kubelet swaps atomically. The
//! watcher reloads once per content change, through the daemon's validate-then-swap path.

use crate::common;

use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use llm_probe::daemon::Daemon;
use llm_probe::reload::ReloadRequest;
use llm_probe::watch::{fingerprint_off_runtime, watch};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const PERIOD: Duration = Duration::from_millis(50);

/// A ConfigMap volume as the kubelet lays it out: `probes.yaml` → `..data/probes.yaml`,
/// `..data` → `..<version>`.
struct ConfigMapVolume {
    dir: tempfile::TempDir,
    version: usize,
}

impl ConfigMapVolume {
    fn new(content: &str) -> ConfigMapVolume {
        let dir = tempfile::tempdir().unwrap();
        let v = dir.path().join("..v0");
        std::fs::create_dir(&v).unwrap();
        std::fs::write(v.join("probes.yaml"), content).unwrap();
        symlink("..v0", dir.path().join("..data")).unwrap();
        symlink("..data/probes.yaml", dir.path().join("probes.yaml")).unwrap();
        ConfigMapVolume { dir, version: 0 }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("probes.yaml")
    }

    /// The kubelet's update: a new version directory, a `..data_tmp` link to it renamed over
    /// `..data` (atomic), the old version removed.
    fn update(&mut self, content: &str) {
        let root = self.dir.path();
        let old = root.join(format!("..v{}", self.version));
        self.version += 1;
        let name = format!("..v{}", self.version);
        std::fs::create_dir(root.join(&name)).unwrap();
        std::fs::write(root.join(&name).join("probes.yaml"), content).unwrap();
        symlink(&name, root.join("..data_tmp")).unwrap();
        std::fs::rename(root.join("..data_tmp"), root.join("..data")).unwrap();
        std::fs::remove_dir_all(old).unwrap();
    }
}

fn probes(scenarios: &[&str]) -> String {
    let list: String = scenarios.iter().map(|s| common::scenario(s, 4)).collect();
    common::yaml("http://127.0.0.1:9/v1", "1m", &list, "")
}

/// A stand-in for the daemon's reload queue that counts requests and accepts each.
fn counting_reloader() -> (mpsc::Sender<ReloadRequest>, Arc<AtomicUsize>) {
    let (tx, mut rx) = mpsc::channel::<ReloadRequest>(8);
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    tokio::spawn(async move {
        while let Some(reply) = rx.recv().await {
            c.fetch_add(1, Ordering::SeqCst);
            let _ = reply.send(Ok("reloaded".into()));
        }
    });
    (tx, count)
}

async fn wait_for(what: &str, limit: Duration, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done().await {
        assert!(Instant::now() < deadline, "{what} within {limit:?}");
        tokio::time::sleep(PERIOD).await;
    }
}

#[tokio::test]
async fn a_kubelet_style_symlink_swap_reloads_exactly_once() {
    let mut volume = ConfigMapVolume::new(&probes(&["chat"]));
    let (tx, count) = counting_reloader();
    let shutdown = CancellationToken::new();
    let before = fingerprint_off_runtime(&volume.path()).await;
    let task = tokio::spawn(watch(volume.path(), before, tx, shutdown.clone(), PERIOD));

    // Nothing changed: no reload.
    tokio::time::sleep(PERIOD * 10).await;
    assert_eq!(count.load(Ordering::SeqCst), 0);

    // The same content in a new version directory (path and mtime change): no reload.
    volume.update(&probes(&["chat"]));
    tokio::time::sleep(PERIOD * 10).await;
    assert_eq!(count.load(Ordering::SeqCst), 0);

    volume.update(&probes(&["chat", "long"]));
    wait_for(
        "a reload after the swap",
        Duration::from_secs(10),
        async || count.load(Ordering::SeqCst) > 0,
    )
    .await;
    // And only one.
    tokio::time::sleep(PERIOD * 20).await;
    assert_eq!(count.load(Ordering::SeqCst), 1);

    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the watcher stops on shutdown")
        .unwrap();
}

async fn scrape(d: &Daemon) -> String {
    common::get(d.addr, "/metrics", None).await.2
}

fn has_pair(text: &str, scenario: &str) -> bool {
    common::sample(
        text,
        "llm_probe_probes_total",
        &[("target", "sim"), ("scenario", scenario)],
    )
    .is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_file_keeps_the_old_config_and_a_good_one_is_applied() {
    let mut volume = ConfigMapVolume::new(&probes(&["chat"]));
    let before = fingerprint_off_runtime(&volume.path()).await;
    let cfg = llm_probe::config::load(&volume.path()).unwrap();
    let daemon = Daemon::start(cfg, "127.0.0.1:0".parse().unwrap(), Some(volume.path()))
        .await
        .unwrap();
    let shutdown = CancellationToken::new();
    tokio::spawn(watch(
        volume.path(),
        before,
        daemon.reloader(),
        shutdown.clone(),
        PERIOD,
    ));
    let reload_ok =
        |text: &str| common::sample(text, "llm_probe_config_last_reload_successful", &[]);
    assert_eq!(reload_ok(&scrape(&daemon).await), Some(1.0));

    volume.update("targets: [this is not a probes file\n");
    wait_for(
        "llm_probe_config_last_reload_successful 0",
        Duration::from_secs(10),
        async || reload_ok(&scrape(&daemon).await) == Some(0.0),
    )
    .await;
    let text = scrape(&daemon).await;
    assert!(
        has_pair(&text, "chat"),
        "the old configuration keeps running"
    );

    volume.update(&probes(&["chat", "long"]));
    wait_for(
        "the new pair after a good file",
        Duration::from_secs(10),
        async || {
            let text = scrape(&daemon).await;
            has_pair(&text, "long") && reload_ok(&text) == Some(1.0)
        },
    )
    .await;
    shutdown.cancel();
    daemon.stop().await;
}

/// The flag on the binary: `run --config.watch` picks up a changed file without a signal.
#[test]
fn the_run_flag_enables_the_watcher() {
    use std::io::BufRead;
    let mut volume = ConfigMapVolume::new(&probes(&["chat"]));
    let mut child = common::ChildGuard(
        std::process::Command::new(env!("CARGO_BIN_EXE_llm-probe"))
            .args([
                "run",
                "--config.watch",
                "--web.listen-address=127.0.0.1:0",
                "--config.file",
            ])
            .arg(volume.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let lines = std::io::BufReader::new(child.0.stderr.take().unwrap()).lines();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in lines.map_while(Result::ok) {
            if tx.send(l).is_err() {
                return;
            }
        }
    });
    let wait_line = |needle: &str| -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no log line with {needle:?}"));
            if line.contains(needle) {
                return line;
            }
        }
    };
    wait_line("serving metrics on");
    volume.update(&probes(&["chat", "long"]));
    let line = wait_line("configuration reloaded");
    assert!(line.contains("started 1"), "{line}");
}
