//! The daemon: metrics, the HTTP server and one probe task per (target, scenario), started
//! together and stopped together, and reloaded by validate-then-swap. `main` and the
//! integration tests both drive it in-process.
//!
//! A supervisor task owns the running set of probe tasks; reload requests (SIGHUP,
//! `POST /-/reload`, [`Daemon::reload`]) queue up in front of it and are applied one at a time.
//!
//! A target with `replicas:` runs one probe task per (target, replica, scenario). A discovery
//! task per such target ([`crate::replicas`]) hands each result to the supervisor, which
//! applies a changed set through the same one-at-a-time path as a reload. A replica gone from
//! discovery stops being probed at once and keeps its series for `replicas.grace`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::SystemTime;

use futures::FutureExt;
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::replicas::Replicas;
use crate::config::{self, Config, ConfigError, Scenario, Target};
use crate::failure_log::FailureLog;
use crate::history::History;
use crate::measure::ProbeOutcome;
use crate::metrics::{Metrics, ProbeLabels};
use crate::probe::{build_client, client_key, ClientKey, Prober};
use crate::reload::{ReloadError, ReloadRequest, ReloadResult};
use crate::replicas::{Discovered, DiscoveryError, Replica};
use crate::schedule::{panic_text, probe_loop};
use crate::server::{self, ExporterState, ListenError};
use crate::shard::Shard;

/// Why a daemon did not start. `Display` is the whole message.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The web config file is invalid (every problem, located).
    #[error(transparent)]
    WebConfig(ConfigError),
    /// The listen address cannot be bound.
    #[error(transparent)]
    Listen(#[from] ListenError),
    /// The configuration cannot be put in force (a target's HTTP client cannot be built).
    #[error(transparent)]
    Apply(ReloadError),
}

/// A running daemon.
pub struct Daemon {
    /// Where `/metrics` is served.
    pub addr: SocketAddr,
    /// The metrics it exports.
    pub metrics: Arc<Metrics>,
    /// Its recent probes.
    pub history: Arc<History>,
    /// The exporter's server: renders done, web config in force.
    pub server: Arc<ExporterState>,
    outcomes: broadcast::Sender<Arc<ProbeOutcome>>,
    reload_tx: mpsc::Sender<ReloadRequest>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

impl Daemon {
    /// Binds `listen`, registers every series, serves `/metrics` and starts probing.
    /// `config_file` is where reloads read from; without it a reload is refused.
    ///
    /// Errors: the address cannot be bound; a target's HTTP client cannot be built.
    pub async fn start(
        config: Config,
        listen: SocketAddr,
        config_file: Option<PathBuf>,
    ) -> Result<Daemon, StartError> {
        Self::start_full(
            config,
            listen,
            config_file,
            server::ServerOptions::default(),
            Shard::default(),
        )
        .await
    }

    /// [`Daemon::start`] with the exporter's server set up by `options` (web config file,
    /// on-demand probe policy, connection limits); the web config file is re-read on reload.
    ///
    /// Errors: as [`Daemon::start`]; the web config file is invalid (every problem, located).
    pub async fn start_with(
        config: Config,
        listen: SocketAddr,
        config_file: Option<PathBuf>,
        options: server::ServerOptions,
    ) -> Result<Daemon, StartError> {
        Self::start_full(config, listen, config_file, options, Shard::default()).await
    }

    /// [`Daemon::start`] for one replica of several reading the same file: it probes only the
    /// (target, scenario) pairs `shard` owns ([`crate::shard`]), exports
    /// `llm_probe_shard_info{index,count}`, and re-evaluates ownership on every reload.
    ///
    /// Errors: as [`Daemon::start`].
    pub async fn start_sharded(
        config: Config,
        listen: SocketAddr,
        config_file: Option<PathBuf>,
        shard: Shard,
    ) -> Result<Daemon, StartError> {
        Self::start_full(
            config,
            listen,
            config_file,
            server::ServerOptions::default(),
            shard,
        )
        .await
    }

    /// [`Daemon::start_with`] and [`Daemon::start_sharded`] in one: the server set up by
    /// `options`, probing the pairs `shard` owns.
    ///
    /// Errors: as [`Daemon::start_with`].
    pub async fn start_full(
        config: Config,
        listen: SocketAddr,
        config_file: Option<PathBuf>,
        options: server::ServerOptions,
        shard: Shard,
    ) -> Result<Daemon, StartError> {
        let web = match &options.web_config_file {
            Some(p) => server::WebState::load(p.clone())
                .await
                .map_err(StartError::WebConfig)?,
            None => server::WebConfig::default(),
        };
        let slos: Vec<_> = config.targets.iter().map(|t| t.slo).collect();
        let metrics = Arc::new(Metrics::with_histograms(&slos, options.histograms));
        metrics.set_shard(shard);
        let history = Arc::new(History::new(options.history));
        let listener = server::bind(listen).await?;
        let addr = listener.local_addr().map_err(ListenError::LocalAddr)?;
        let shutdown = CancellationToken::new();
        let (outcomes, _) = broadcast::channel(256);
        let (reload_tx, reload_rx) = mpsc::channel(8);
        let (discovery_tx, discovery_rx) = mpsc::channel(64);
        let state = Arc::new(ExporterState::new(
            metrics.clone(),
            history.clone(),
            Some(reload_tx.clone()),
            &options,
            web,
        ));
        let tasks = TaskTracker::new();
        let failure_log = Arc::new(FailureLog::new(crate::failure_log::Timing::default()));
        tasks.spawn(failure_log.clone().run(shutdown.clone()));
        tasks.spawn(crate::trim::run(crate::trim::TRIM_EVERY, shutdown.clone()));
        let mut supervisor = Supervisor {
            metrics: metrics.clone(),
            history: history.clone(),
            outcomes: outcomes.clone(),
            state: state.clone(),
            shutdown: shutdown.clone(),
            tasks: tasks.clone(),
            config_file,
            running: HashMap::new(),
            failure_log: failure_log.clone(),
            probers: HashMap::new(),
            clients: HashMap::new(),
            shard,
            applied: None,
            pools: HashMap::new(),
            next_pool_id: 0,
            discovery_tx,
            lingering: HashMap::new(),
            replica_probers: HashMap::new(),
        };
        supervisor.apply(&config).map_err(StartError::Apply)?;
        supervisor.applied = Some(config.clone());
        metrics.config_loaded(true, SystemTime::now());
        tasks.spawn(server::serve_exporter(
            listener,
            state.clone(),
            shutdown.clone(),
        ));
        tasks.spawn(supervisor.run(reload_rx, discovery_rx));
        state.ready.store(true, Ordering::Release);
        tracing::info!(%addr, targets = config.targets.len(), source = %config.source, %shard, "llm-probe started");
        Ok(Daemon {
            addr,
            metrics,
            history,
            server: state,
            outcomes,
            reload_tx,
            shutdown,
            tasks,
        })
    }

    /// Every probe outcome from now on (a lagging receiver misses the oldest).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<ProbeOutcome>> {
        self.outcomes.subscribe()
    }

    /// A sender for reload requests (SIGHUP handling uses it).
    pub fn reloader(&self) -> mpsc::Sender<ReloadRequest> {
        self.reload_tx.clone()
    }

    /// Reloads the configuration file: validate first; if valid, swap (unchanged pairs keep
    /// their schedule and series, removed ones lose their series, new ones start); if not,
    /// keep running the old one and set `llm_probe_config_last_reload_successful` to 0.
    ///
    /// Returns a one-line summary, or the reason the file was rejected.
    pub async fn reload(&self) -> ReloadResult {
        crate::reload::request(&self.reload_tx).await
    }

    /// Stops probing (in-flight probes are dropped, not observed) and serving, and waits for
    /// every task to end.
    pub async fn stop(self) {
        self.shutdown.cancel();
        self.tasks.close();
        self.tasks.wait().await;
    }
}

/// At most `replicas.max` × the target's scenarios departed pairs of one target keep their
/// series through the grace: a discovery whose every answer names new replicas (a churning or
/// hostile source) would otherwise keep the series of every replica it ever named. The pairs
/// that departed first lose theirs first.
fn cap_lingering(
    lingering: &mut HashMap<ProbeLabels, tokio::time::Instant>,
    config: &Config,
    metrics: &Metrics,
) {
    let mut by_target: HashMap<&str, Vec<(tokio::time::Instant, &ProbeLabels)>> = HashMap::new();
    for (labels, until) in lingering.iter() {
        by_target
            .entry(&*labels.target)
            .or_default()
            .push((*until, labels));
    }
    let mut evict = Vec::new();
    for (name, mut pairs) in by_target {
        let Some(t) = config.targets.iter().find(|t| *t.name == *name) else {
            continue;
        };
        let limit = t
            .replicas
            .as_ref()
            .map_or(0, |r| r.max)
            .saturating_mul(t.scenarios.len().max(1));
        if pairs.len() > limit {
            pairs.sort_by_key(|(until, _)| *until);
            let over = pairs.len() - limit;
            evict.extend(pairs.into_iter().take(over).map(|(_, l)| l.clone()));
        }
    }
    for labels in evict {
        metrics.forget(&labels);
        lingering.remove(&labels);
    }
}

/// How long the series of `run`'s pair stay after it stopped: its target's `replicas.grace`
/// when it probed a replica of a target `config` still discovers replicas of (same model) with
/// the same scenario; `None`: they go at once (a removed scenario's alerts end with it).
fn grace_of(config: &Config, run: &Running) -> Option<std::time::Duration> {
    run.replica.as_ref()?;
    let t = config.targets.iter().find(|t| t.name == run.target.name)?;
    let probed = t.scenarios.iter().any(|s| s.name == run.scenario.name);
    (t.model == run.target.model && probed).then_some(t.replicas.as_ref()?.grace)
}

/// Sleeps until `at`, forever when `None`.
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// After a target's replicas changed: its expected spend with `count` replicas, when priced.
fn log_replica_spend(t: &Target, count: usize) {
    if let Some(s) = config::cost::spend(t) {
        let n = count as f64;
        tracing::info!(
            target = %t.name, replicas = count,
            "expected spend with {count} replicas ~{}/day, ~{}/month (every replica is probed with every scenario)",
            config::cost::amount(s.per_day * n),
            config::cost::amount(s.per_month * n)
        );
    }
}

/// Logs one warning per credential of `cfg` that could not be read (it names the variable or
/// file, never a value); its target is probed anyway and fails with reason `credentials`.
pub fn log_credential_problems(cfg: &Config) {
    for p in &cfg.credential_problems {
        tracing::warn!(problem = %p, "the credentials of a target cannot be read; it is probed anyway and fails with reason credentials until they can");
    }
}

/// (target name, replica label (empty for a target without `replicas:`), scenario name).
type PairKey = (String, String, String);

/// What the supervisor keeps of a target with `replicas:`.
struct Pool {
    /// What its discovery task discovers with, and where.
    spec: Replicas,
    base_url: reqwest::Url,
    /// Tells this discovery task's results from an earlier one's.
    id: u64,
    stop: CancellationToken,
    /// The last good set (empty before the first).
    replicas: Vec<Replica>,
    /// The last failure logged, so that a failure repeated every refresh is logged once.
    last_error: Option<String>,
    /// How many replicas the last good discovery found before the cap.
    last_found: usize,
}

/// One discovery's result, from a target's discovery task to the supervisor.
struct DiscoveryUpdate {
    target: String,
    id: u64,
    result: Result<Discovered, DiscoveryError>,
}

/// One running (target, scenario) probe task.
struct Running {
    target: Arc<Target>,
    /// The replica probed, for a target with `replicas:`.
    replica: Option<Replica>,
    scenario: Arc<Scenario>,
    stop: CancellationToken,
    /// Whether the schedule's outcomes are still recorded; closed (under its lock) by
    /// [`Running::close`] before the pair's series are forgotten.
    recording: Arc<std::sync::Mutex<bool>>,
}

impl Running {
    /// Stops the schedule and, once any outcome being recorded right now is in, refuses the
    /// later ones: a probe that ends while its pair is being removed cannot bring the pair's
    /// series or history back after they are forgotten (the schedule's own cancellation
    /// check races with a probe that has just ended).
    fn close(&self) {
        *self.recording.lock().unwrap_or_else(|e| e.into_inner()) = false;
        self.stop.cancel();
    }

    fn labels(&self) -> ProbeLabels {
        labels(&self.target, self.replica.as_ref(), &self.scenario)
    }
}

fn labels(t: &Target, replica: Option<&Replica>, s: &Scenario) -> ProbeLabels {
    ProbeLabels::new(
        t.name.as_str(),
        t.model.as_str(),
        s.name.as_str(),
        replica.map_or_else(|| "".into(), |r| r.label.clone()),
    )
}

/// The label of `replica`, empty for a target without `replicas:`.
fn replica_label(replica: Option<&Replica>) -> String {
    replica.map_or_else(String::new, |r| r.label.to_string())
}

/// Owns the probe tasks; applies configurations one at a time.
struct Supervisor {
    metrics: Arc<Metrics>,
    history: Arc<History>,
    outcomes: broadcast::Sender<Arc<ProbeOutcome>>,
    state: Arc<ExporterState>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
    config_file: Option<PathBuf>,
    running: HashMap<PairKey, Running>,
    /// Logs failing probes on change, not on every probe.
    failure_log: Arc<FailureLog>,
    probers: HashMap<String, Prober>,
    /// One HTTP client per [`ClientKey`], shared by the targets that have it.
    clients: HashMap<ClientKey, reqwest::Client>,
    /// Which pairs this replica probes.
    shard: Shard,
    /// The configuration last applied in full: what a reload that panicked restores.
    applied: Option<Config>,
    /// The targets with `replicas:`, by name.
    pools: HashMap<String, Pool>,
    next_pool_id: u64,
    /// Where discovery tasks send their results.
    discovery_tx: mpsc::Sender<DiscoveryUpdate>,
    /// The series of departed replicas' pairs, kept until the instant given (`replicas.grace`).
    lingering: HashMap<ProbeLabels, tokio::time::Instant>,
    /// The probers of the replicas, by (target, replica label).
    replica_probers: HashMap<(String, String), Prober>,
}

impl Supervisor {
    async fn run(
        mut self,
        mut requests: mpsc::Receiver<ReloadRequest>,
        mut discoveries: mpsc::Receiver<DiscoveryUpdate>,
    ) {
        loop {
            let expiry = self.lingering.values().min().copied();
            let reply = tokio::select! {
                _ = self.shutdown.cancelled() => return,
                r = requests.recv() => match r { Some(r) => r, None => return },
                Some(update) = discoveries.recv() => {
                    self.on_discoveries(update, &mut discoveries);
                    continue;
                }
                _ = sleep_until(expiry) => {
                    self.expire();
                    continue;
                }
            };
            // Reading the files happens off the runtime; a shutdown does not wait for it. The
            // web config too: validate both files, then swap both.
            let shutdown = self.shutdown.clone();
            let result = tokio::select! {
                _ = shutdown.cancelled() => return,
                r = async {
                    let web = self.state.web.prepare().await.map_err(ReloadError::WebConfig)?;
                    // A bug that panics while a file is read or applied must not take the
                    // supervisor with it: later reloads would do nothing and nothing would say
                    // so. The reload fails, and the configuration it may have half applied is
                    // put back.
                    let summary = match AssertUnwindSafe(self.reload()).catch_unwind().await {
                        Ok(result) => result?,
                        Err(panic) => return Err(self.restore(panic_text(panic.as_ref()))),
                    };
                    self.state.web.swap(web);
                    Ok(summary)
                } => r,
            };
            crate::reload::log_outcome(&result);
            let now = SystemTime::now();
            if result.is_ok() {
                self.history.note_reload(now);
            }
            self.metrics.config_loaded(result.is_ok(), now);
            let _ = reply.send(result);
        }
    }

    /// `first` and every result already waiting behind it: only each target's newest is
    /// applied (an older set would be replaced at once, and applying a large set takes a
    /// while: results would queue up and go stale); the older failures are still counted.
    fn on_discoveries(
        &mut self,
        first: DiscoveryUpdate,
        waiting: &mut mpsc::Receiver<DiscoveryUpdate>,
    ) {
        let mut batch = vec![first];
        while let Ok(u) = waiting.try_recv() {
            batch.push(u);
        }
        let mut newest: HashMap<(String, u64), usize> = HashMap::new();
        for (i, u) in batch.iter().enumerate() {
            newest.insert((u.target.clone(), u.id), i);
        }
        for (i, u) in batch.into_iter().enumerate() {
            if newest.get(&(u.target.clone(), u.id)) == Some(&i) {
                self.on_discovery(u);
            } else if let (Err(e), Some(_)) = (
                &u.result,
                self.pools.get(&u.target).filter(|p| p.id == u.id),
            ) {
                self.metrics.replica_discovery_failed(&u.target, e.reason());
            }
        }
    }

    /// A discovery's result: a failure is counted (and logged once until it changes), the
    /// last good set staying probed; a new set is applied to the running pairs.
    fn on_discovery(&mut self, update: DiscoveryUpdate) {
        let Some(pool) = (self.pools.get_mut(&update.target)).filter(|p| p.id == update.id) else {
            return;
        };
        let name = update.target;
        let found = match update.result {
            Err(e) => {
                self.metrics.replica_discovery_failed(&name, e.reason());
                let message = e.to_string();
                if pool.last_error.as_deref() != Some(message.as_str()) {
                    // An empty set is never a good discovery: empty is "none yet".
                    let warning = match pool.replicas.is_empty() {
                        true => "replica discovery failed; no replica was discovered yet, so this target probes nothing until a discovery succeeds",
                        false => "replica discovery failed; the last good set of replicas stays probed",
                    };
                    tracing::warn!(target = %name, reason = e.reason(), error = %message, replicas = pool.replicas.len(), "{warning}");
                    pool.last_error = Some(message);
                }
                return;
            }
            Ok(found) => found,
        };
        pool.last_error = None;
        self.metrics
            .replicas_discovered(&name, found.found, found.replicas.len());
        if found.capped() && pool.last_found != found.found {
            tracing::warn!(target = %name, found = found.found, max = pool.spec.max, "more replicas were discovered than replicas.max: the first max of them (sorted) are probed, the others are not; raise replicas.max to probe them all");
        }
        pool.last_found = found.found;
        if found.replicas == pool.replicas {
            return;
        }
        let count = found.replicas.len();
        pool.replicas = found.replicas;
        let Some(config) = self.applied.clone() else {
            return;
        };
        match std::panic::catch_unwind(AssertUnwindSafe(|| self.apply(&config))) {
            Ok(Ok(summary)) => {
                tracing::info!(target = %name, replicas = count, %summary, "the replicas of a target changed");
                if let Some(t) = config.targets.iter().find(|t| t.name == name) {
                    log_replica_spend(t, count);
                }
            }
            Ok(Err(e)) => {
                tracing::error!(target = %name, error = %e, "the new replicas of a target cannot be probed; the running pairs are kept")
            }
            Err(panic) => {
                let e = self.restore(panic_text(panic.as_ref()));
                tracing::error!(target = %name, error = %e, "applying the new replicas of a target failed");
            }
        }
    }

    /// Removes the series of departed replicas whose grace has passed.
    fn expire(&mut self) {
        let now = tokio::time::Instant::now();
        let metrics = &self.metrics;
        self.lingering.retain(|labels, until| {
            let keep = *until > now;
            if !keep {
                metrics.forget(labels);
            }
            keep
        });
    }

    /// Starts, restarts and stops the discovery tasks so that each target of `config` with
    /// `replicas:` has one discovering as configured. A target whose source and base URL are
    /// unchanged keeps its last good set.
    fn sync_pools(&mut self, config: &Config) {
        let mut old = std::mem::take(&mut self.pools);
        for t in &config.targets {
            let Some(spec) = &t.replicas else {
                continue;
            };
            if let Some(pool) = old.remove(&t.name) {
                if pool.spec == *spec && pool.base_url == t.base_url {
                    self.pools.insert(t.name.clone(), pool);
                    continue;
                }
                pool.stop.cancel();
                let mut replicas = Vec::new();
                let mut found = 0;
                if pool.spec.source == spec.source && pool.base_url == t.base_url {
                    replicas = pool.replicas;
                    replicas.truncate(spec.max);
                    found = pool.last_found.max(replicas.len());
                }
                // The gauges say what is probed from now on (a smaller max, a new source with
                // nothing discovered yet), not what the old settings probed.
                self.metrics
                    .replicas_discovered(&t.name, found, replicas.len());
                self.start_pool(t, spec, replicas);
            } else {
                self.metrics.register_discovery(&t.name);
                self.start_pool(t, spec, Vec::new());
            }
        }
        for (name, pool) in old {
            pool.stop.cancel();
            self.metrics.forget_discovery(&name);
        }
    }

    /// Starts the discovery task of `t` (a target with `replicas:` as `spec`).
    fn start_pool(&mut self, t: &Target, spec: &Replicas, replicas: Vec<Replica>) {
        self.next_pool_id += 1;
        let pool = Pool {
            spec: spec.clone(),
            base_url: t.base_url.clone(),
            id: self.next_pool_id,
            stop: self.shutdown.child_token(),
            replicas,
            last_error: None,
            last_found: 0,
        };
        let (tx, stop, name, id) = (
            self.discovery_tx.clone(),
            pool.stop.clone(),
            t.name.clone(),
            pool.id,
        );
        let (spec, base_url) = (pool.spec.clone(), pool.base_url.clone());
        self.tasks.spawn(async move {
            loop {
                let discovered = AssertUnwindSafe(crate::replicas::discover(&spec, &base_url));
                let result = tokio::select! {
                    _ = stop.cancelled() => return,
                    r = discovered.catch_unwind() => r,
                };
                let Ok(result) = result else {
                    tracing::error!(target = %name, "replica discovery panicked (a bug in llm-probe; please report it); this target's replicas are no longer discovered until a reload");
                    return;
                };
                // DNS records are asked for again once their TTL runs out, if before `refresh`.
                let wait = match &result {
                    Ok(found) => found.next_refresh(spec.refresh),
                    Err(_) => spec.refresh,
                };
                let update = DiscoveryUpdate {
                    target: name.clone(),
                    id,
                    result,
                };
                if tx.send(update).await.is_err() {
                    return;
                }
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(wait) => {}
                }
            }
        });
        self.pools.insert(t.name.clone(), pool);
    }

    async fn reload(&mut self) -> ReloadResult {
        let Some(path) = &self.config_file else {
            return Err(ReloadError::NoConfigFile);
        };
        let config = config::load_off_runtime(path.clone(), config::Secrets::Isolate)
            .await
            .map_err(ReloadError::Config)?;
        self.check_buckets(&config)?;
        let summary = self.apply(&config)?;
        // A changed price or budget changes the spend and may stretch an interval: say so.
        config::cost::log_spend(&config);
        // Credentials that cannot be read do not reject the file: every valid change is applied
        // and the broken targets are named (they fail with reason credentials).
        log_credential_problems(&config);
        let broken: Vec<&str> = (config.targets.iter())
            .filter(|t| t.credentials_error.is_some())
            .map(|t| t.name.as_str())
            .collect();
        let summary = match broken.is_empty() {
            true => summary,
            false => format!(
                "{summary}; credentials cannot be read for {} (probes fail with reason credentials): {}",
                broken.len(),
                broken.join(", ")
            ),
        };
        // Last: a panic before here restores the configuration that ran before.
        self.applied = Some(config);
        Ok(summary)
    }

    /// After a reload that panicked (`what`): applies the configuration last applied in full
    /// again, so that every pair the reload may have stopped or changed runs as before, and
    /// returns the reload's error.
    fn restore(&mut self, what: String) -> ReloadError {
        let Some(old) = self.applied.clone() else {
            return ReloadError::Internal {
                what,
                restored: false,
            };
        };
        let restored = std::panic::catch_unwind(AssertUnwindSafe(|| self.apply(&old)));
        let restored = matches!(restored, Ok(Ok(_)));
        ReloadError::Internal { what, restored }
    }

    /// SLO thresholds must be classic bucket boundaries (when there are classic buckets);
    /// buckets are fixed when the exporter starts.
    fn check_buckets(&self, config: &Config) -> Result<(), ReloadError> {
        if !self.metrics.has_classic_buckets() {
            return Ok(());
        }
        for t in &config.targets {
            let ttft = t.slo.ttft_p95.as_secs_f64();
            if !self.metrics.ttft_boundaries().contains(&ttft) {
                return Err(ReloadError::NeedsRestart(format!("{}: target \"{}\": slo.ttft_p95 {} is not a TTFT bucket boundary of the running exporter (buckets are fixed at start so that the SLO line is exact); restart llm-probe to apply it", config.source, t.name, humantime::format_duration(t.slo.ttft_p95))));
            }
            let tps = t.slo.output_tokens_per_second_min;
            if !self.metrics.tokens_per_second_boundaries().contains(&tps) {
                return Err(ReloadError::NeedsRestart(format!("{}: target \"{}\": slo.output_tokens_per_second_min {tps} is not a bucket boundary of the running exporter (buckets are fixed at start); restart llm-probe to apply it", config.source, t.name)));
            }
            if let Some(floor) = t.slo.prefill_tokens_per_second_min {
                if !self.metrics.prefill_boundaries().contains(&floor) {
                    return Err(ReloadError::NeedsRestart(format!("{}: target \"{}\": slo.prefill_tokens_per_second_min {floor} is not a prefill bucket boundary of the running exporter (buckets are fixed at start so that LlmProbePrefillBelowFloor is exact); restart llm-probe to apply it", config.source, t.name)));
                }
            }
        }
        Ok(())
    }

    /// Makes the running set match `config`. Returns a one-line summary.
    ///
    /// Errors: a new target's HTTP client cannot be built (nothing is changed then).
    fn apply(&mut self, config: &Config) -> ReloadResult {
        // Build every prober first, so that a failure changes nothing.
        let mut probers = HashMap::new();
        for t in &config.targets {
            let prober = match self.probers.get(&t.name) {
                // The new target: its scenario list is what `/probe` and the status pages
                // offer.
                Some(p) if p.target().same_settings(t) => p.retargeted(t.clone()),
                _ => Prober::with_client(t.clone(), self.client(t)?),
            };
            probers.insert(t.name.clone(), prober);
        }
        // Each replica of a target with `replicas:` has a prober of its own that connects to
        // the replica's address; they share the target's settings (one `Arc<Target>`).
        self.sync_pools(config);
        let mut replica_probers = HashMap::new();
        for t in config.targets.iter().filter(|t| t.replicas.is_some()) {
            // Each replica's client is built when first needed (most never need one): the
            // target's own, built here, fails the reload where theirs would.
            self.client(t)?;
            let replicas = self.pools.get(&t.name).map(|p| p.replicas.clone());
            for r in replicas.unwrap_or_default() {
                let key = (t.name.clone(), r.label.to_string());
                let prober = match self.replica_probers.get(&key) {
                    Some(p) if p.target().same_settings(t) && p.replica() == Some(&r) => {
                        p.retargeted(t.clone())
                    }
                    _ => Prober::for_replica(t.clone(), r),
                };
                replica_probers.insert(key, prober);
            }
        }
        let shard = self.shard;
        let mut all_pairs = 0;
        // Every pair of the configuration this shard owns, with its prober.
        let mut wanted: HashMap<PairKey, (Arc<Target>, Arc<Scenario>, Prober)> = HashMap::new();
        for t in &config.targets {
            let copies: Vec<Prober> = match &t.replicas {
                None => vec![probers[&t.name].clone()],
                Some(_) => (replica_probers.iter())
                    .filter(|((name, _), _)| *name == t.name)
                    .map(|(_, p)| p.clone())
                    .collect(),
            };
            for prober in copies {
                let target = prober.target().clone();
                let replica = replica_label(prober.replica());
                for s in &t.scenarios {
                    all_pairs += 1;
                    if shard.owns_replica(&t.name, &replica, &s.name) {
                        let key = (t.name.clone(), replica.clone(), s.name.clone());
                        wanted.insert(key, (target.clone(), s.clone(), prober.clone()));
                    }
                }
            }
        }
        let owned_targets: std::collections::HashSet<&str> =
            wanted.keys().map(|(t, _, _)| t.as_str()).collect();
        let (mut kept, mut changed, mut started, mut removed) = (0, 0, 0, 0);
        let now = tokio::time::Instant::now();
        // Stop what is gone or different; forget the series whose labels no longer exist, but
        // keep a departed replica's for its target's grace.
        let (metrics, lingering) = (&self.metrics, &mut self.lingering);
        let failure_log = &self.failure_log;
        self.running.retain(|key, run| match wanted.get(key) {
            Some((t, s, p))
                if run.target.same_settings(t)
                    && run.replica.as_ref() == p.replica()
                    && run.scenario == *s =>
            {
                kept += 1;
                true
            }
            other => {
                run.close();
                let still_labelled =
                    other.is_some_and(|(t, s, p)| labels(t, p.replica(), s) == run.labels());
                if let Some((_, s, _)) = other.filter(|_| still_labelled) {
                    // The same labels, another scenario: its turns or its generated prompt may
                    // be gone, and their series with them.
                    metrics.forget_shape(
                        &run.labels(),
                        !s.turns.is_empty(),
                        s.long_prompt.is_some(),
                    );
                }
                if !still_labelled {
                    let l = run.labels();
                    failure_log.forget(&l.target, &l.scenario, &l.replica);
                    match grace_of(config, run) {
                        Some(grace) => {
                            // Its series stay for the grace; its engine's load is a now, not
                            // a history: a departed replica's last numbers would stand in a
                            // pool's `max` for the whole grace.
                            metrics.forget_replica_load(&run.labels());
                            lingering.insert(run.labels(), now + grace);
                        }
                        None => metrics.forget(&run.labels()),
                    }
                }
                if other.is_some() {
                    changed += 1;
                } else {
                    removed += 1;
                }
                false
            }
        });
        // Lingering series of a target that no longer has replicas (or another model), or of a
        // scenario it no longer has, go now.
        lingering.retain(|l, _| {
            let key = (
                l.target.to_string(),
                l.replica.to_string(),
                l.scenario.to_string(),
            );
            if wanted
                .get(&key)
                .is_some_and(|(t, _, _)| *t.model == *l.model)
            {
                // A replica back within its grace: probed again with its series kept, and no
                // longer departed (the cap below counts only departed pairs).
                return false;
            }
            let keep = (config.targets.iter()).any(|t| {
                *t.name == *l.target
                    && *t.model == *l.model
                    && t.replicas.is_some()
                    && t.scenarios.iter().any(|s| *s.name == *l.scenario)
            });
            if !keep {
                metrics.forget(l);
            }
            keep
        });
        cap_lingering(lingering, config, metrics);
        #[cfg(test)]
        if config
            .targets
            .iter()
            .any(|t| t.name == tests::PANIC_IN_APPLY)
        {
            panic!("a bug injected by a test, after the old pairs were stopped");
        }
        // Per-target series go with the target's last owned pair.
        for (name, old) in &self.probers {
            match config.targets.iter().find(|t| &t.name == name) {
                Some(t)
                    if t.model == old.target().model && owned_targets.contains(name.as_str()) =>
                {
                    // Another engine (or adapter): its load is unknown until its first read.
                    if t.server_metrics != old.target().server_metrics {
                        self.metrics.forget_server_load(name, &t.model);
                    }
                }
                _ => self.metrics.forget_target(name, &old.target().model),
            }
        }
        // Pinned baselines of the owned pairs, from the new config (a kept run's target may be
        // the old value: baselines do not change how a pair is probed).
        let pinned: Vec<_> = wanted
            .values()
            .filter_map(|(t, s, p)| {
                let configured = config.targets.iter().find(|c| c.name == t.name)?;
                Some((
                    labels(t, p.replica(), s),
                    &**configured.baseline_for(&s.name)?,
                ))
            })
            .collect();
        self.metrics.set_baselines(&pinned);
        // Start what is new or changed.
        for (key, (t, s, prober)) in &wanted {
            if self.running.contains_key(key) {
                continue;
            }
            let run = Running {
                target: t.clone(),
                replica: prober.replica().cloned(),
                scenario: s.clone(),
                stop: self.shutdown.child_token(),
                recording: Arc::new(std::sync::Mutex::new(true)),
            };
            // A replica back within its grace keeps its series.
            self.lingering.remove(&run.labels());
            self.metrics.register_probe(&run.labels(), &t.slo);
            self.metrics
                .set_schedule(&run.labels(), t.effective_interval(), t.cost.is_some());
            match &t.server_metrics {
                Some(_) => self.metrics.register_server_metrics(&t.name, &t.model),
                None => self.metrics.forget_server_metrics(&t.name, &t.model),
            }
            self.spawn(prober.clone(), &run);
            self.running.insert(key.clone(), run);
            started += 1;
        }
        // Clients no target uses any more (e.g. after a TLS change, a departed replica) are
        // dropped.
        let used: std::collections::HashSet<ClientKey> = (config.targets.iter())
            .map(|t| client_key(t, None))
            .collect();
        self.clients.retain(|k, _| used.contains(k));
        *self
            .state
            .probers
            .write()
            .unwrap_or_else(|e| e.into_inner()) = probers.clone();
        // The status pages' history of pairs no longer configured is freed (on any shard: an
        // on-demand probe may probe a configured pair this replica does not schedule), after
        // the served targets are replaced: an on-demand probe that ends checks them before it
        // keeps its outcome.
        let configured: std::collections::HashSet<(&str, &str)> = config
            .targets
            .iter()
            .flat_map(|t| {
                t.scenarios
                    .iter()
                    .map(|s| (t.name.as_str(), s.name.as_str()))
            })
            .collect();
        self.history
            .retain_pairs(|target, scenario| configured.contains(&(target, scenario)));
        self.probers = probers;
        self.replica_probers = replica_probers;
        let mut owned: Vec<(String, String)> = (self.running.keys())
            .map(|(t, _, s)| (t.clone(), s.clone()))
            .collect();
        // A pool without replicas (its discovery has not succeeded yet, or failed from the
        // start) still has a status card, "no data", on the shard that owns the pair itself:
        // a configured pool never vanishes from the status pages.
        let empty_pools = (config.targets.iter()).filter(|t| {
            t.replicas.is_some() && (self.pools.get(&t.name)).is_none_or(|p| p.replicas.is_empty())
        });
        for t in empty_pools {
            for sc in t
                .scenarios
                .iter()
                .filter(|sc| shard.owns(&t.name, &sc.name))
            {
                owned.push((t.name.clone(), sc.name.to_string()));
            }
        }
        owned.sort();
        owned.dedup();
        *self.state.shard.write().unwrap_or_else(|e| e.into_inner()) = server::ShardView {
            shard,
            owned,
            all_pairs,
        };
        let n = config.targets.len();
        let share = if shard.count > 1 {
            format!(" ({shard}: {} of {all_pairs} pairs)", self.running.len())
        } else {
            String::new()
        };
        Ok(format!(
            "{}: {n} target{}{share}; probes kept {kept}, restarted with new settings {changed}, started {}, removed {removed}",
            config.source,
            if n == 1 { "" } else { "s" },
            started - changed
        ))
    }

    /// The shared HTTP client of `t`'s [`ClientKey`], built if there is none yet.
    ///
    /// Errors: the client cannot be built.
    fn client(&mut self, t: &Target) -> Result<reqwest::Client, ReloadError> {
        let key = client_key(t, None);
        if let Some(c) = self.clients.get(&key) {
            return Ok(c.clone());
        }
        let c = build_client(t).map_err(|source| ReloadError::Client {
            target: t.name.clone(),
            source,
        })?;
        self.clients.insert(key, c.clone());
        Ok(c)
    }

    fn spawn(&self, prober: Prober, run: &Running) {
        let (metrics, history, tx, log) = (
            self.metrics.clone(),
            self.history.clone(),
            self.outcomes.clone(),
            self.failure_log.clone(),
        );
        let recording = run.recording.clone();
        let record = move |o: ProbeOutcome| {
            let open = recording.lock().unwrap_or_else(|e| e.into_inner());
            if !*open {
                return;
            }
            log.record(&o);
            metrics.observe(&o);
            history.push(&o);
            let _ = tx.send(Arc::new(o));
        };
        let schedule = probe_loop(prober, run.scenario.clone(), record, run.stop.clone());
        // A schedule that ends other than by its stop token (a panic outside a probe) no longer
        // probes: say so in the log and on /-/healthy. Caught in the schedule's own task (one
        // task per pair, not a second one to watch it).
        let (state, target, scenario) =
            (self.state.clone(), run.target.clone(), run.scenario.clone());
        self.tasks.spawn(async move {
            if let Err(panic) = AssertUnwindSafe(schedule).catch_unwind().await {
                state.stopped_schedules.fetch_add(1, Ordering::AcqRel);
                tracing::error!(
                    target = %target.name, scenario = %scenario.name, panic = %panic_text(panic.as_ref()),
                    "a probe schedule stopped (a bug in llm-probe; please report it); this pair is no longer probed and /-/healthy answers 503 until a restart"
                );
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A target of this name makes [`Supervisor::apply`] panic half way, in unit tests only.
    pub(super) const PANIC_IN_APPLY: &str = "panic-in-apply";

    fn probes_file(target: &str, scenario: &str) -> String {
        format!(
            "defaults:\n  interval: 100ms\n  timeout: 100ms\nscenarios:\n  - name: {scenario}\n    messages: [{{role: user, content: \"Hi\"}}]\n    max_tokens: 8\ntargets:\n  - name: {target}\n    protocol: openai-chat\n    base_url: http://127.0.0.1:1/v1\n    model: m\n"
        )
    }

    fn reload_successful(daemon: &Daemon) -> bool {
        let (_, text) = daemon.metrics.render(None);
        let line = (text.lines())
            .find(|l| l.starts_with("llm_probe_config_last_reload_successful "))
            .expect("the reload gauge");
        line.ends_with(" 1")
    }

    /// Waits for a probe of `target` to be recorded.
    async fn probed(outcomes: &mut broadcast::Receiver<Arc<ProbeOutcome>>, target: &str) {
        let next = async {
            loop {
                match outcomes.recv().await {
                    Ok(o) if &*o.target == target => return,
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(e) => panic!("{e}"),
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(30), next)
            .await
            .unwrap_or_else(|_| panic!("no probe of {target}"));
    }

    /// The log lines written while it is the thread's subscriber.
    #[derive(Clone, Default)]
    struct Log(Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Log {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Log {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
        }
    }

    /// A schedule that panics outside a probe (a zero interval, which the config refuses)
    /// ends its own task: the log names the pair, `/-/healthy` counts it, the other pair goes
    /// on, and the daemon still stops (no task is left waiting on it). One runtime thread: the
    /// thread's log subscriber sees every task.
    #[tokio::test]
    async fn a_schedule_that_panics_is_logged_and_counted_and_the_daemon_still_stops() {
        let log = Log::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer({
                let log = log.clone();
                move || log.clone()
            })
            .with_ansi(false)
            .finish();
        let _guard = tracing::subscriber::set_default(subscriber);
        let mut config = config::parse(
            &probes_file("broken", "s").replace(
                "targets:\n",
                "targets:\n  - name: fine\n    protocol: openai-chat\n    base_url: http://127.0.0.1:1/v1\n    model: m\n",
            ),
            "<test>",
            &|_| None,
        )
        .unwrap();
        let broken = (config.targets.iter_mut())
            .find(|t| t.name == "broken")
            .unwrap();
        Arc::get_mut(broken).unwrap().interval = Duration::ZERO;
        let listen = "127.0.0.1:0".parse().unwrap();
        let daemon = Daemon::start(config, listen, None).await.unwrap();
        let mut outcomes = daemon.subscribe();
        let stopped = async {
            while daemon.server.stopped_schedules.load(Ordering::Acquire) == 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(30), stopped)
            .await
            .expect("the schedule's panic is counted");
        let text = log.text();
        let line = (text.lines())
            .find(|l| l.contains("a probe schedule stopped"))
            .unwrap_or_else(|| panic!("no log line of the stopped schedule:\n{text}"));
        assert!(
            line.contains("ERROR") && line.contains("target=broken"),
            "{line}"
        );
        assert!(line.contains("a probe interval of zero"), "{line}");
        // The other pair is still probed.
        probed(&mut outcomes, "fine").await;
        assert_eq!(daemon.server.stopped_schedules.load(Ordering::Acquire), 1);
        tokio::time::timeout(Duration::from_secs(30), daemon.stop())
            .await
            .expect("the daemon stops");
    }

    #[tokio::test]
    async fn a_reload_that_panics_fails_keeps_the_old_pairs_and_the_next_reload_works() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("probes.yaml");
        std::fs::write(&path, probes_file("old", "s")).unwrap();
        let config = config::parse(&probes_file("old", "s"), "<test>", &|_| None).unwrap();
        let listen = "127.0.0.1:0".parse().unwrap();
        let daemon = Daemon::start(config, listen, Some(path.clone()))
            .await
            .unwrap();
        let mut outcomes = daemon.subscribe();
        probed(&mut outcomes, "old").await;

        // The new file stops the old pair, then the bug strikes.
        std::fs::write(&path, probes_file(PANIC_IN_APPLY, "s2")).unwrap();
        let err = daemon.reload().await.expect_err("the reload panicked");
        assert!(
            matches!(err, ReloadError::Internal { restored: true, .. }),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(text.contains("a bug injected by a test"), "{text}");
        assert!(text.contains("the configuration that ran before"), "{text}");
        assert!(!reload_successful(&daemon));
        // The old pair runs again, and its series are there.
        let mut outcomes = daemon.subscribe();
        probed(&mut outcomes, "old").await;
        let (_, metrics) = daemon.metrics.render(None);
        assert!(!metrics.contains(PANIC_IN_APPLY));
        assert!(metrics.contains("llm_probe_probe_interval_seconds{target=\"old\""));

        // The supervisor is alive: the next reload is applied.
        std::fs::write(&path, probes_file("new", "s")).unwrap();
        let summary = daemon.reload().await.expect("a good file reloads");
        assert!(reload_successful(&daemon), "{summary}");
        probed(&mut outcomes, "new").await;
        daemon.stop().await;
    }
}
