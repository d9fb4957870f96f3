//! `llm-probe baseline save`: a [`Baseline`] from a measurement, written to a file.
//!
//! Sources: a `bench --output json` file (one level of its sweep) or a `probe-once --output
//! json` collection, read by [`crate::compare::input`]. The percentiles are bench's own
//! ([`crate::bench::stats::Summary`]: type 7, linear interpolation between order statistics,
//! [`crate::stats::quantile_type7`]), over the level's successful, non-warmup requests.
//!
//! Any source yields a [`Measured`] (the pair, identity, end time, sample count and the
//! quantiles); [`Measured::into_baseline`], [`write()`] and [`finish`] (write and print the
//! summary) are shared. The other source, a window of the daemon's histogram buckets in
//! Prometheus, is [`super::prometheus`].

use std::path::Path;
use std::time::SystemTime;

use serde_json::Value;

use super::{Baseline, Endpoint, Origin, Quantiles, SCHEMA};
use crate::bench::stats::Summary;
use crate::compare::input::{self, Level, LevelKey, Run, RunKind};
use crate::compare::Metric;

/// Which level of a bench sweep to pin.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pick {
    /// The highest level within the SLA capacity (`sla_capacity`), else the first level.
    Default,
    /// The closed-loop level with this many virtual users (`--level`).
    Concurrency(u64),
    /// The open-loop level at this many requests per second (`--rate`).
    Rate(f64),
}

/// What any source measured for one (target, scenario): the baseline without its
/// bookkeeping.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured {
    /// Target name.
    pub target: String,
    /// Scenario name.
    pub scenario: String,
    /// Configured model, if known.
    pub model: Option<String>,
    /// When the measurement ended.
    pub measured_at: SystemTime,
    /// Where it came from.
    pub source: Origin,
    /// The endpoint identity.
    pub endpoint: Endpoint,
    /// Successful requests.
    pub samples: u64,
    /// TTFT quantiles, seconds.
    pub ttft: Quantiles,
    /// TPOT quantiles, seconds.
    pub tpot: Option<Quantiles>,
    /// Output tokens/s quantiles.
    pub output_tokens_per_second: Option<Quantiles>,
    /// E2E quantiles, seconds.
    pub e2e: Option<Quantiles>,
    /// Prefill speed quantiles (a scenario with a generated long prompt).
    pub prefill_tokens_per_second: Option<Quantiles>,
    /// Why this level was taken, for the summary line (`the highest level within the SLA
    /// capacity`, `--level 4`, …).
    pub why: String,
    /// Further lines for stdout after the summary (e.g. the bucket bounds around each
    /// percentile of a Prometheus window).
    pub notes: Vec<String>,
    /// Warnings for stderr (e.g. the endpoint identity changed inside the window).
    pub warnings: Vec<String>,
}

impl Measured {
    /// The baseline file's content, saved at `now`.
    pub fn into_baseline(self, now: SystemTime) -> Baseline {
        let rfc3339 = |t| humantime::format_rfc3339_millis(t).to_string();
        Baseline {
            schema: SCHEMA.into(),
            target: self.target,
            scenario: self.scenario,
            model: self.model,
            measured_at: rfc3339(self.measured_at),
            saved_at: rfc3339(now),
            source: self.source,
            endpoint: self.endpoint,
            samples: self.samples,
            ttft_seconds: self.ttft,
            tpot_seconds: self.tpot,
            output_tokens_per_second: self.output_tokens_per_second,
            e2e_seconds: self.e2e,
            prefill_tokens_per_second: self.prefill_tokens_per_second,
        }
    }
}

/// bench's P50/P95/P99 ([`Summary`]) of `metric` over `level`, to six decimals (a microsecond;
/// far below any timing's uncertainty), `None` without values.
fn quantiles(level: &Level, metric: Metric) -> Option<Quantiles> {
    pinned_of(&level.values(metric))
}

/// bench's P50/P95/P99 of `values`, to six decimals; `None` without values.
fn pinned_of(values: &[f64]) -> Option<Quantiles> {
    let s = Summary::of(values);
    let round = |v: f64| (v * 1e6).round() / 1e6;
    Some(Quantiles {
        p50: round(s.p50?),
        p95: round(s.p95?),
        p99: round(s.p99?),
    })
}

/// The level `pick` names in `run`, and why it was taken. `doc` is the whole bench JSON (for
/// `sla_capacity`).
fn pick_level<'a>(run: &'a Run, doc: &Value, pick: Pick) -> Result<(&'a Level, String), String> {
    let available = || {
        run.levels
            .iter()
            .map(|l| l.key.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let find = |key: LevelKey| run.levels.iter().find(|l| l.key == key);
    if crate::compare::by_prompt_length(run) {
        return Err("the file is a prompt-length sweep (bench --prompt-tokens): its levels sent generated prompts in place of the scenario's, so none measures what the daemon's probes of the scenario send; save a baseline from a --concurrency or --rate sweep".into());
    }
    match pick {
        Pick::Default if run.kind == RunKind::ProbeOnce => run
            .levels
            .first()
            .map(|l| (l, "a probe-once collection: all probes".to_string()))
            .ok_or_else(|| "no probes".to_string()),
        Pick::Default => {
            let cap = &doc["sla_capacity"];
            let key = match (cap["concurrency"].as_u64(), cap["rate"].as_f64()) {
                (Some(c), _) => Some(LevelKey::Concurrency(c)),
                (None, Some(r)) => Some(LevelKey::Rate(r)),
                _ => None,
            };
            match key.and_then(find) {
                Some(l) => Ok((l, "the highest level within the SLA capacity".into())),
                None => run
                    .levels
                    .first()
                    .map(|l| (l, "no level met the SLA: the first level".to_string()))
                    .ok_or_else(|| {
                        "the file has no levels; run `llm-probe bench --output json` again"
                            .to_string()
                    }),
            }
        }
        Pick::Concurrency(_) | Pick::Rate(_) if run.kind == RunKind::ProbeOnce => Err(
            "--level and --rate pick a level of a bench sweep; a probe-once collection has none (drop the flag)"
                .into(),
        ),
        Pick::Concurrency(c) => find(LevelKey::Concurrency(c))
            .map(|l| (l, format!("--level {c}")))
            .ok_or_else(|| {
                format!("no level with concurrency {c} in the file (it has: {}); pick one of those with --level or --rate", available())
            }),
        Pick::Rate(r) => find(LevelKey::Rate(r))
            .map(|l| (l, format!("--rate {r}")))
            .ok_or_else(|| {
                format!("no level at rate {r}/s in the file (it has: {}); pick one of those with --level or --rate", available())
            }),
    }
}

/// What `text` (the content of `file`: bench JSON or probe-once lines) measured at the level
/// `pick` names.
///
/// Errors: the file is not a run ([`input::parse_run`]'s messages: unknown schema, …); no target
/// or scenario named in it; the level does not exist; the level has no successful request.
pub fn from_text(file: &Path, text: &str, pick: Pick) -> Result<Measured, String> {
    let run = input::parse_run(file, text)?;
    let doc: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    let (level, why) = pick_level(&run, &doc, pick)?;
    let warnings: Vec<String> = beyond_capacity(&doc, &level.key, pick)
        .into_iter()
        .collect();
    let ok = level.requests.iter().filter(|r| r.success).count() as u64;
    let ttft = quantiles(level, Metric::Ttft).filter(|_| ok > 0).ok_or_else(|| {
        format!(
            "{} has no successful request ({} sent); a baseline needs measurements: fix the endpoint and run bench again, or pick another level",
            level.key,
            level.requests.len()
        )
    })?;
    let named = |v: &Option<String>, what: &str| {
        v.clone().filter(|s| !s.is_empty()).ok_or_else(|| {
            format!("the file names no {what}; write it with `llm-probe bench --output json`")
        })
    };
    let meta = &doc["metadata"];
    let measured_at = meta["ended"]
        .as_str()
        .and_then(|t| humantime::parse_rfc3339_weak(t).ok())
        .unwrap_or_else(SystemTime::now);
    let kind = match run.kind {
        RunKind::Bench => "bench",
        RunKind::ProbeOnce => "probe-once",
    };
    Ok(Measured {
        target: named(&run.target, "target")?,
        scenario: named(&run.scenario, "scenario")?,
        model: run.model.clone(),
        measured_at,
        source: Origin {
            kind: kind.into(),
            file: file.display().to_string(),
            level: level.key.to_string(),
            llm_probe_version: meta["llm_probe_version"]
                .as_str()
                .unwrap_or(env!("CARGO_PKG_VERSION"))
                .to_string(),
        },
        endpoint: Endpoint {
            response_model: run.identity.response_model.clone(),
            system_fingerprint: run.identity.system_fingerprint.clone(),
            server: run.identity.server_header.clone(),
            server_version: run.identity.server_version.clone(),
        },
        samples: ok,
        ttft,
        tpot: quantiles(level, Metric::Tpot),
        output_tokens_per_second: quantiles(level, Metric::OutputTokensPerSecond),
        prefill_tokens_per_second: pinned_of(&level.prefill_values()),
        e2e: quantiles(level, Metric::E2e),
        why,
        notes: Vec::new(),
        warnings,
    })
}

/// A warning when `--level` / `--rate` pins a level beyond the run's SLA capacity (or any level
/// of a run where none met the SLA): such a baseline accepts latencies that breach the SLO.
fn beyond_capacity(doc: &Value, key: &LevelKey, pick: Pick) -> Option<String> {
    if matches!(pick, Pick::Default) || !doc["sla_capacity"].is_object() {
        return None;
    }
    let cap = &doc["sla_capacity"];
    let beyond = match key {
        LevelKey::Concurrency(c) => cap["concurrency"].as_u64().is_none_or(|max| *c > max),
        LevelKey::Rate(r) => cap["rate"].as_f64().is_none_or(|max| *r > max),
        LevelKey::Single | LevelKey::PromptTokens(_) => false,
    };
    beyond.then(|| match (cap["concurrency"].as_u64(), cap["rate"].as_f64()) {
        (Some(c), _) => format!("{key} is beyond the run's SLA capacity (concurrency {c}): this baseline accepts latencies that breach the target's SLO; pin a level within the capacity unless that is what you want"),
        (None, Some(r)) => format!("{key} is beyond the run's SLA capacity (rate {r}/s): this baseline accepts latencies that breach the target's SLO; pin a level within the capacity unless that is what you want"),
        _ => format!("no level of the run met the SLA, so {key} is beyond its capacity: this baseline accepts latencies that breach the target's SLO"),
    })
}

/// Writes `baseline` to `out` whole (a randomly named temporary in the same directory, renamed
/// over `out`: [`crate::safe_write::replace_file`]), so a daemon reloading at that moment reads
/// the old file or the new one. Only a regular file at `out` is replaced.
///
/// Errors: `out` is a symlink, device, FIFO or directory; the directory cannot be written (the
/// message names the path).
pub fn write(baseline: &Baseline, out: &Path) -> Result<(), String> {
    let dir = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    // The directory is created (e.g. `--out baselines/prod.json` in a fresh checkout).
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("--out: cannot create the directory {}: {e}", dir.display()))?;
    refuse_to_replace_other_files(out)?;
    crate::safe_write::replace_file(out, baseline.to_json().as_bytes())
        .map_err(|e| format!("--out: {e}"))
}

/// `--out` may replace a baseline file (saving again), never anything else: not the bench run
/// it was made from (`--from run.json --out run.json`), not another file given by mistake.
fn refuse_to_replace_other_files(out: &Path) -> Result<(), String> {
    // Nothing there, or not a regular file (a link, a FIFO, a device, a directory): the safe
    // write refuses those itself, with their kind named.
    if !std::fs::symlink_metadata(out).is_ok_and(|m| m.is_file()) {
        return Ok(());
    }
    // Bounded: a baseline file is a few KiB; a larger file is not one.
    let is_baseline = crate::config::files::read(out, 1 << 20)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .is_some_and(|text| crate::config::baseline_file::parse(&text).is_ok());
    if is_baseline {
        Ok(())
    } else {
        Err(format!(
            "--out: {} exists and is not a baseline file (the bench run itself?); nothing was \
             written: give another path, or remove the file first",
            out.display()
        ))
    }
}

/// `llm-probe baseline save --from`: read `from`, pick the level, write `out`, print one summary
/// line ([`finish`]).
pub fn run(from: &Path, pick: Pick, out: &Path) -> std::process::ExitCode {
    let measured = crate::config::files::read(from, input::MAX_RUN_BYTES)
        .map_err(|e| format!("{}: cannot read: {e}; {}", from.display(), e.fix()))
        .and_then(|bytes| {
            String::from_utf8(bytes)
                .map_err(|_| format!("{}: not UTF-8 text (a JSON file?)", from.display()))
        })
        .and_then(|text| {
            from_text(from, &text, pick).map_err(|e| format!("{}: {e}", from.display()))
        });
    finish(measured, out)
}

/// The end of `baseline save` for any source: on `Ok`, write `out`, print one summary line and
/// the [`Measured::notes`] to stdout and the [`Measured::warnings`] to stderr; on `Err`, print
/// the reason to stderr. Exit status 0 when written, 2 when the input could not be used or `out`
/// cannot be written (nothing is written then).
pub fn finish(measured: Result<Measured, String>, out: &Path) -> std::process::ExitCode {
    use crate::logging::{stderr_line, stdout_text};
    use crate::sanitize::terminal_safe;
    let fail = |e: String| {
        stderr_line(format_args!(
            "llm-probe baseline save: {}",
            terminal_safe(&e)
        ));
        std::process::ExitCode::from(2)
    };
    let m = match measured {
        Ok(m) => m,
        Err(e) => return fail(e),
    };
    for w in &m.warnings {
        stderr_line(format_args!(
            "llm-probe baseline save: warning: {}",
            terminal_safe(w)
        ));
    }
    let why = m.why.clone();
    let notes = m.notes.clone();
    let b = m.into_baseline(SystemTime::now());
    if let Err(e) = write(&b, out) {
        return fail(e);
    }
    let ms = |s: f64| format!("{:.0} ms", s * 1000.0);
    let tps = b
        .output_tokens_per_second
        .map_or(String::new(), |q| format!(", tokens/s P50 {:.1}", q.p50));
    stdout_text(terminal_safe(&format!(
        "baseline for target {} scenario {}: {} ({why}), {} samples: TTFT P50 {} P95 {} P99 {}{tps}; written to {}",
        b.target,
        b.scenario,
        b.source.level,
        b.samples,
        ms(b.ttft_seconds.p50),
        ms(b.ttft_seconds.p95),
        ms(b.ttft_seconds.p99),
        out.display()
    )));
    stdout_text('\n');
    for n in notes {
        stdout_text(terminal_safe(&n));
        stdout_text('\n');
    }
    std::process::ExitCode::SUCCESS
}

#[cfg(test)]
mod capacity_tests {
    use super::*;

    #[test]
    fn pinning_beyond_the_sla_capacity_warns() {
        let doc = serde_json::json!({"sla_capacity": {"concurrency": 4, "rate": null}});
        let c = |n| LevelKey::Concurrency(n);
        assert_eq!(beyond_capacity(&doc, &c(4), Pick::Concurrency(4)), None);
        assert_eq!(beyond_capacity(&doc, &c(2), Pick::Concurrency(2)), None);
        let w = beyond_capacity(&doc, &c(8), Pick::Concurrency(8)).unwrap();
        assert!(
            w.contains("beyond the run's SLA capacity (concurrency 4)"),
            "{w}"
        );
        // The default pick never goes beyond; a run without capacity data says nothing.
        assert_eq!(beyond_capacity(&doc, &c(8), Pick::Default), None);
        let old = serde_json::json!({});
        assert_eq!(beyond_capacity(&old, &c(8), Pick::Concurrency(8)), None);
        let none_met = serde_json::json!({"sla_capacity": {"concurrency": null, "rate": null}});
        let w = beyond_capacity(&none_met, &c(1), Pick::Concurrency(1)).unwrap();
        assert!(w.contains("no level of the run met the SLA"), "{w}");
        let rate = serde_json::json!({"sla_capacity": {"concurrency": null, "rate": 2.0}});
        assert!(beyond_capacity(&rate, &LevelKey::Rate(4.0), Pick::Rate(4.0)).is_some());
        assert!(beyond_capacity(&rate, &LevelKey::Rate(1.0), Pick::Rate(1.0)).is_none());
    }
}
