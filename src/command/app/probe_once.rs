//! `llm-probe probe-once`: each selected (target, scenario) once, what was measured printed.

use std::process::ExitCode;
use std::sync::Arc;

use crate::cli::Output;
use crate::config::Config;
use crate::logging::{self, stderr_line};
use crate::probe::Prober;
use crate::report;

/// Probes `probe-once` runs at the same time (the others wait; the output keeps config order).
pub const PROBE_ONCE_CONCURRENCY: usize = 8;

pub(super) async fn run(
    cfg: &Config,
    target: Option<&str>,
    scenario: Option<&str>,
    output: Output,
) -> ExitCode {
    let targets: Vec<_> = cfg
        .targets
        .iter()
        .filter(|t| target.is_none_or(|n| t.name == n))
        .collect();
    if targets.is_empty() {
        let names: Vec<_> = cfg.targets.iter().map(|t| t.name.as_str()).collect();
        stderr_line(format_args!(
            "llm-probe: no target named {:?} in {}; targets: {}",
            target.unwrap_or(""),
            cfg.source,
            names.join(", ")
        ));
        return ExitCode::FAILURE;
    }
    // Every selected pair, in config order; probed PROBE_ONCE_CONCURRENCY at a time and
    // printed in this order (each as soon as the ones before it are printed).
    let mut pairs = Vec::new();
    for t in targets {
        let prober = match Prober::new(Arc::clone(t)) {
            Ok(p) => p,
            Err(e) => {
                stderr_line(format_args!(
                    "llm-probe: target {:?}: cannot build an HTTP client: {e}",
                    t.name
                ));
                return ExitCode::FAILURE;
            }
        };
        for s in t
            .scenarios
            .iter()
            .filter(|s| scenario.is_none_or(|n| s.name == n))
        {
            pairs.push((prober.clone(), Arc::clone(s)));
        }
    }
    let slots = Arc::new(tokio::sync::Semaphore::new(PROBE_ONCE_CONCURRENCY));
    let probes: Vec<_> = pairs
        .into_iter()
        .map(|(prober, s)| {
            let slots = Arc::clone(&slots);
            tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
                let _slot = slots.acquire_owned().await;
                prober.probe(&s).await
            }))
        })
        .collect();
    let ran = probes.len();
    let mut failed = 0;
    for probe in probes {
        let outcome = match probe.await {
            Ok(o) => o,
            Err(e) => {
                stderr_line(format_args!(
                    "llm-probe: a probe panicked (a bug in llm-probe; please report it): {}",
                    crate::schedule::panic_message(e)
                ));
                return ExitCode::FAILURE;
            }
        };
        failed += usize::from(!outcome.is_success());
        let text = match output {
            Output::Json => report::json_line(&outcome),
            Output::Text => report::to_text(&outcome),
        };
        // A closed stdout (`| head`) ends the run quietly instead of panicking.
        if std::io::Write::write_all(&mut std::io::stdout(), text.as_bytes()).is_err() {
            logging::LOG_WRITE_FAILURES.inc();
            return ExitCode::FAILURE;
        }
    }
    if ran == 0 {
        stderr_line(format_args!(
            "llm-probe: no scenario named {:?} on the selected targets",
            scenario.unwrap_or("")
        ));
        return ExitCode::FAILURE;
    }
    if failed > 0 {
        stderr_line(format_args!("llm-probe: {failed} of {ran} probes failed"));
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
