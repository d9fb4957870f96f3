//! `llm-probe bench`: a load test on the daemon's measurement core. A sweep of levels (closed
//! loop concurrency or open loop Poisson rates) runs one (target, scenario) through the same
//! [`Prober`], decoders, timeline and math as the daemon; each level's statistics, the SLA
//! capacity and every request's record come out as a table, JSON, Markdown and SVG charts.
//!
//! Modules: [`plan`] (levels, bounds, validation, token spend), [`prompt`] (the prompt size the
//! plan's spend is computed with, and the generated prompts of a prompt-length sweep), [`run`]
//! (the load generator),
//! [`record`] (one request), [`stats`] (percentiles and their CIs), [`level`] (per-level
//! statistics and the SLA capacity), [`json`], [`table`] and [`chart`] (outputs).

pub mod chart;
pub mod command;
pub mod json;
pub mod level;
pub mod plan;
pub mod progress;
pub mod prompt;
pub mod record;
pub mod run;
pub mod stats;
pub mod table;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::SystemTime;

use tokio_util::sync::CancellationToken;

use crate::config::{Config, PrefixCache, Scenario, Target};
use crate::measure::Identity;
use crate::probe::Prober;
use level::{capacity, level_stats, verdict, Capacity, LevelStats, Verdict};
use plan::Plan;
use progress::Progress;
use record::RequestRecord;
use run::{run_level, LevelRun};

/// The finished (or interrupted) sweep: everything every output needs.
#[derive(Debug, Clone)]
pub struct Report {
    /// The target.
    pub target: Arc<Target>,
    /// The scenario (with the bench's prefix-cache choice).
    pub scenario: Arc<Scenario>,
    /// The plan that ran.
    pub plan: Plan,
    /// Each level that ran: its statistics and its SLA verdict.
    pub levels: Vec<(LevelStats, Verdict)>,
    /// The SLA capacity over the levels that ran.
    pub capacity: Capacity,
    /// Every request that ended, warmup included, in level order.
    pub records: Vec<RequestRecord>,
    /// What the endpoint said about itself (first successful request).
    pub identity: Identity,
    /// Prompt tokens as the server counted them (first successful request that reported it).
    pub prompt_tokens: Option<u64>,
    /// Wall-clock start and end of the sweep.
    pub started: SystemTime,
    /// Wall-clock end of the sweep.
    pub ended: SystemTime,
    /// Ctrl-C ended the sweep early.
    pub interrupted: bool,
    /// Stopped after a level broke the SLA (`--stop-on-slo-breach`).
    pub stopped_on_breach: bool,
    /// A digest of what was measured and how (config text, target, scenario, plan).
    pub config_digest: String,
}

/// The (target, scenario) pair named on the command line.
///
/// A scenario with `cache_canary` is benched without the canary's second request.
///
/// Errors: no target of that name (the known names are listed), the target does not run
/// that scenario, or the scenario has `turns` (a conversation is several requests).
pub fn select(
    cfg: &Config,
    target: Option<&str>,
    scenario: Option<&str>,
) -> Result<(Arc<Target>, Arc<Scenario>), String> {
    let names = |v: Vec<&str>| v.join(", ");
    let t = match target {
        Some(name) => cfg.targets.iter().find(|t| t.name == name).ok_or_else(|| {
            format!(
                "no target named {name:?} in {}; targets: {}",
                cfg.source,
                names(cfg.targets.iter().map(|t| t.name.as_str()).collect())
            )
        })?,
        None if cfg.targets.len() == 1 => &cfg.targets[0],
        None => {
            return Err(format!(
                "{} has {} targets: choose one with --target ({})",
                cfg.source,
                cfg.targets.len(),
                names(cfg.targets.iter().map(|t| t.name.as_str()).collect())
            ))
        }
    };
    let s = match scenario {
        Some(name) => t.scenarios.iter().find(|s| s.name == name).ok_or_else(|| {
            format!(
                "target {:?} has no scenario named {name:?}; its scenarios: {}",
                t.name,
                names(t.scenarios.iter().map(|s| s.name.as_str()).collect())
            )
        })?,
        None if t.scenarios.len() == 1 => &t.scenarios[0],
        None => {
            return Err(format!(
                "target {:?} runs {} scenarios: choose one with --scenario ({})",
                t.name,
                t.scenarios.len(),
                names(t.scenarios.iter().map(|s| s.name.as_str()).collect())
            ))
        }
    };
    if !s.turns.is_empty() {
        return Err(format!(
            "scenario {:?} is a multi-turn conversation (turns:), and bench measures one request per request it sends; bench a one-request scenario (the daemon and probe-once measure every turn)",
            s.name
        ));
    }
    // A bench request is one request: the prefix-cache canary's second, warm one would double
    // the spend and skew the pacing.
    let s = match s.cache_canary {
        true => Arc::new(Scenario {
            cache_canary: false,
            ..(**s).clone()
        }),
        false => s.clone(),
    };
    Ok((t.clone(), s))
}

/// Runs the sweep of `plan` on `target` × `scenario`, until done or `cancel`.
///
/// A prompt-length level ([`Load::Prompt`](level::Load::Prompt)) sends the scenario with a
/// generated prompt of its size ([`prompt::sized`]).
///
/// Errors: the plan is invalid, a prompt-length sweep's scenario cannot take a generated prompt
/// ([`prompt::refuse_sized`]), or the HTTP client cannot be built.
pub async fn sweep(
    config_text: &str,
    target: Arc<Target>,
    scenario: Arc<Scenario>,
    prefix_cache: PrefixCache,
    plan: Plan,
    cancel: CancellationToken,
    progress: Progress,
) -> Result<Report, String> {
    plan.validate()?;
    if plan.levels.iter().any(|l| l.prompt_tokens().is_some()) {
        prompt::refuse_sized(&scenario)?;
    }
    let mut scenario = (*scenario).clone();
    scenario.prefix_cache = prefix_cache;
    let scenario = Arc::new(scenario);
    let prober = Prober::new(target.clone())
        .map_err(|e| format!("target {:?}: cannot build an HTTP client: {e}", target.name))?;
    let config_digest = digest(&[
        config_text,
        &target.name,
        &scenario.name,
        prefix_cache.as_str(),
        &format!("{plan:?}"),
    ]);
    let run = LevelRun {
        prober,
        scenario: scenario.clone(),
        plan: Arc::new(plan.clone()),
        sent_total: Arc::new(AtomicU64::new(0)),
        cancel: cancel.clone(),
        progress: progress.clone(),
    };
    let started = SystemTime::now();
    let mut levels = Vec::new();
    let mut records = Vec::new();
    let mut first = None;
    let mut stopped_on_breach = false;
    let mut interrupted_level = None;
    for (i, load) in plan.levels.iter().enumerate() {
        if i > 0 && !plan.pause.is_zero() {
            tokio::select! {
                _ = cancel.cancelled() => {}
                _ = tokio::time::sleep(plan.pause) => {}
            }
        }
        if cancel.is_cancelled() {
            break;
        }
        progress.level_start(&load.label(), plan.planned(load));
        let result = match load.prompt_tokens() {
            Some(tokens) => {
                let sized = LevelRun {
                    scenario: Arc::new(prompt::sized(&scenario, tokens)),
                    ..run.clone()
                };
                run_level(&sized, i, *load).await
            }
            None => run_level(&run, i, *load).await,
        };
        // Cut short by Ctrl-C: reported, but it did not run its course.
        let cut_short = cancel.is_cancelled();
        if first.is_none() {
            first = result.first_success;
        }
        let refs: Vec<&RequestRecord> = result.records.iter().collect();
        let stats = level_stats(*load, &refs, &target.slo);
        let v = verdict(&stats, &target.slo, plan.max_failure_ratio);
        progress.line(&table::progress_line(&stats, &v));
        records.extend(result.records);
        let broke = !v.broken_by.is_empty();
        levels.push((stats, v));
        if cut_short {
            interrupted_level = Some(i);
        }
        if broke && plan.stop_on_slo_breach {
            stopped_on_breach = i + 1 < plan.levels.len();
            break;
        }
        if run.sent_total.load(std::sync::atomic::Ordering::SeqCst) >= plan.max_requests {
            progress.line(&format!(
                "--max-requests {} reached: the sweep stops here",
                plan.max_requests
            ));
            break;
        }
    }
    progress.finish();
    // A level cut short (interrupted) is not evidence that the target holds its load.
    let capacity = capacity(&levels[..interrupted_level.unwrap_or(levels.len())]);
    let identity = first
        .as_ref()
        .map(|o| o.observations.identity.clone())
        .unwrap_or_default();
    let prompt_tokens = first.and_then(|o| o.observations.usage.prompt_tokens);
    Ok(Report {
        target,
        scenario,
        plan,
        levels,
        capacity,
        records,
        identity,
        prompt_tokens,
        started,
        ended: SystemTime::now(),
        interrupted: cancel.is_cancelled(),
        stopped_on_breach,
        config_digest,
    })
}

/// FNV-1a (64 bit) over `parts`, as 16 hex digits: identifies a configuration, not a secret
/// (API keys are never part of it: the config text names a variable or file, not the key).
pub fn digest(parts: &[&str]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain([0u8]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("fnv1a64:{h:016x}")
}
