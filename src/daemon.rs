//! The daemon: metrics, the HTTP server and one probe task per (target, scenario), started
//! together and stopped together. `main` and the integration tests both drive it in-process.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::SystemTime;

use tokio::sync::broadcast;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::history::History;
use crate::measure::ProbeOutcome;
use crate::metrics::{Metrics, ProbeLabels};
use crate::probe::Prober;
use crate::schedule::probe_loop;
use crate::server::{self, ExporterState};

/// How many recent probes the landing page and the demo keep.
pub const HISTORY_CAPACITY: usize = 200;

/// A running daemon.
pub struct Daemon {
    /// Where `/metrics` is served.
    pub addr: SocketAddr,
    /// The metrics it exports.
    pub metrics: Arc<Metrics>,
    /// Its recent probes.
    pub history: Arc<History>,
    outcomes: broadcast::Sender<Arc<ProbeOutcome>>,
    shutdown: CancellationToken,
    tasks: JoinSet<()>,
}

/// Logs one finished probe: a failure once at warn with target, scenario, reason and status;
/// a success at debug.
pub fn log_outcome(o: &ProbeOutcome) {
    match &o.result {
        Err(f) => tracing::warn!(
            target_name = %o.target, scenario = %o.scenario, reason = f.reason.as_str(),
            status = o.observations.http_status, detail = %f.detail, "probe failed"
        ),
        Ok(m) => tracing::debug!(
            target_name = %o.target, scenario = %o.scenario, ttft_seconds = m.ttft.as_secs_f64(),
            output_tokens = m.output_tokens, e2e_seconds = m.e2e.as_secs_f64(), "probe succeeded"
        ),
    }
}

impl Daemon {
    /// Binds `listen`, registers every series, serves `/metrics` and starts probing.
    ///
    /// Errors: the address cannot be bound; a target's HTTP client cannot be built.
    pub async fn start(config: Config, listen: SocketAddr) -> anyhow::Result<Daemon> {
        let slos: Vec<_> = config.targets.iter().map(|t| t.slo).collect();
        let metrics = Arc::new(Metrics::new(&slos));
        metrics.config_loaded(true, SystemTime::now());
        let history = Arc::new(History::new(HISTORY_CAPACITY));
        let listener = server::bind(listen).await?;
        let addr = listener.local_addr()?;
        let shutdown = CancellationToken::new();
        let (outcomes, _) = broadcast::channel(256);
        let state = Arc::new(ExporterState {
            metrics: metrics.clone(),
            history: history.clone(),
            ready: false.into(),
            targets: config
                .targets
                .iter()
                .map(|t| t.summary())
                .collect::<Vec<_>>()
                .into(),
        });
        let mut tasks = JoinSet::new();
        tasks.spawn(server::serve_exporter(
            listener,
            state.clone(),
            shutdown.clone(),
        ));
        for target in &config.targets {
            let prober = Prober::new(target.clone())?;
            for scenario in &target.scenarios {
                metrics.register_probe(
                    &ProbeLabels {
                        target: target.name.clone(),
                        model: target.model.clone(),
                        scenario: scenario.name.clone(),
                    },
                    &target.slo,
                );
                let (metrics, history, tx) = (metrics.clone(), history.clone(), outcomes.clone());
                let record = move |o: ProbeOutcome| {
                    log_outcome(&o);
                    metrics.observe(&o);
                    history.push(&o);
                    let _ = tx.send(Arc::new(o));
                };
                tasks.spawn(probe_loop(
                    prober.clone(),
                    scenario.clone(),
                    record,
                    shutdown.clone(),
                ));
            }
        }
        state.ready.store(true, Ordering::Release);
        tracing::info!(%addr, targets = config.targets.len(), source = %config.source, "llm-probe started");
        Ok(Daemon {
            addr,
            metrics,
            history,
            outcomes,
            shutdown,
            tasks,
        })
    }

    /// Every probe outcome from now on (a lagging receiver misses the oldest).
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<ProbeOutcome>> {
        self.outcomes.subscribe()
    }

    /// A token that stops the daemon when cancelled.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Stops probing (in-flight probes are dropped, not observed) and serving, and waits for
    /// every task to end.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        while self.tasks.join_next().await.is_some() {}
    }
}
