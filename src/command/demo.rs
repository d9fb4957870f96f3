//! `llm-probe demo`: the first run. Starts the simulator in-process, probes it with a built-in
//! config, serves `/metrics`, and prints a live summary until Ctrl-C.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::config::{self, ConfigError};
use crate::daemon::{Daemon, StartError};
use crate::history::RecentProbe;
use crate::logging::stdout_text;
use crate::sanitize::terminal_safe;
use crate::server::ListenError;
use crate::simulate::{Script, Simulator};
use crate::stats::quantiles_type7;

/// The demo's probes file; `{BASE_URL}` is replaced by the simulator's address.
pub const DEMO_CONFIG: &str = r#"
defaults:
  interval: 3s
  timeout: 3s
scenarios:
  - name: chat_short
    messages: [{role: user, content: "Explain time to first token in one sentence."}]
    max_tokens: 32
  - name: long_generation
    messages: [{role: user, content: "Write a short story about a latency budget."}]
    max_tokens: 128
targets:
  - name: simulator
    protocol: openai-chat
    base_url: {BASE_URL}
    model: llm-probe-simulator
"#;

/// The simulator's script in the demo: TTFT 180 ms, a token every 12 ms (≈ 83 tokens/s), both
/// with mild lognormal jitter (sigma 0.1).
pub fn demo_script() -> Script {
    Script {
        ttft: Duration::from_millis(180),
        itl: Duration::from_millis(12),
        tokens: 256,
        // Mild jitter, so the numbers spread like a real server's.
        load: crate::simulate::Load {
            jitter: 0.1,
            seed: 1,
            ..Default::default()
        },
        ..Script::default()
    }
}

/// Why the demo did not run. `Display` is the whole message.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// `--every` is out of bounds; `why` is a fragment such as "is longer than the maximum of 1day".
    #[error("demo --every {every} {why}")]
    Every {
        /// The value given, as a duration.
        every: String,
        /// What is wrong with it.
        why: String,
    },
    /// The simulator's or the exporter's address cannot be bound.
    #[error(transparent)]
    Listen(#[from] ListenError),
    /// The built-in config does not load (a bug).
    #[error("built-in demo config: {0}")]
    Config(ConfigError),
    /// The daemon did not start.
    #[error(transparent)]
    Start(#[from] StartError),
}

/// Runs the demo until `shutdown`, printing a summary every `every` (1 s to 1 day).
///
/// Errors: `every` is out of bounds, `listen` cannot be bound, or the built-in config does not
/// load (a bug).
pub async fn run(
    listen: SocketAddr,
    every: Duration,
    shutdown: CancellationToken,
) -> Result<(), DemoError> {
    let every = config::durations::SUMMARY_EVERY
        .check(every)
        .map_err(|why| DemoError::Every {
            every: humantime::format_duration(every).to_string(),
            why,
        })?;
    let loopback = SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 0));
    let sim = Simulator::start(loopback, demo_script()).await?;
    let text = DEMO_CONFIG.replace("{BASE_URL}", &sim.base_url());
    let cfg = config::parse(&text, "<demo>", &|_| None).map_err(DemoError::Config)?;
    let daemon = Daemon::start(cfg, listen, None).await?;
    stdout_text(format_args!(
        "llm-probe demo\n  simulated endpoint  {} (scripted TTFT 180 ms, 12 ms per token ≈ 83 tokens/s, mild jitter)\n  status page         http://{}/\n  metrics             http://{}/metrics\n  probing every 3s; a summary every {}; Ctrl-C to stop\n",
        sim.base_url(),
        daemon.addr,
        daemon.addr,
        humantime::format_duration(every)
    ));
    let first = crate::clock::instant_after(tokio::time::Instant::now(), every);
    let mut ticker = tokio::time::interval_at(first, every);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = ticker.tick() => stdout_text(summary(&daemon.history.snapshot())),
        }
    }
    daemon.stop().await;
    Ok(())
}

/// One line per (target, scenario): probes, failures, TTFT P50/P95 and median tokens/s over the
/// recent probes.
pub fn summary(recent: &[RecentProbe]) -> String {
    let mut groups: BTreeMap<(&str, &str), Vec<&RecentProbe>> = BTreeMap::new();
    for p in recent {
        groups
            .entry((&*p.target, &*p.scenario))
            .or_default()
            .push(p);
    }
    if groups.is_empty() {
        return "  (no probe has finished yet)\n".into();
    }
    let mut out = String::new();
    for ((target, scenario), probes) in groups {
        let failed = probes.iter().filter(|p| p.failure.is_some()).count();
        let mut ttft: Vec<f64> = probes
            .iter()
            .filter_map(|p| p.ttft)
            .map(|d| d.as_secs_f64() * 1e3)
            .collect();
        let mut tps: Vec<f64> = probes
            .iter()
            .filter_map(|p| p.output_tokens_per_second)
            .collect();
        let [ttft_p50, ttft_p95] = quantiles_type7(&mut ttft, [0.5, 0.95]);
        let [tps_p50] = quantiles_type7(&mut tps, [0.5]);
        let fmt =
            |v: Option<f64>, unit: &str| v.map_or("-".to_string(), |v| format!("{v:.1} {unit}"));
        let (target, scenario) = (terminal_safe(target), terminal_safe(scenario));
        out += &format!(
            "  {target}/{scenario}: {} {}, {failed} failed | TTFT p50 {} p95 {} | {} (p50)\n",
            probes.len(),
            if probes.len() == 1 { "probe" } else { "probes" },
            fmt(ttft_p50, "ms"),
            fmt(ttft_p95, "ms"),
            fmt(tps_p50, "tokens/s"),
        );
    }
    out
}
