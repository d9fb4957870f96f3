//! Reading a run for `compare`: a `bench --output json` file (`"schema": "llm-probe.bench/v1"`,
//! read through the types that write it, [`crate::bench::json::BenchFile`]; documented in
//! docs/bench.md, "The JSON report") or a `probe-once --output json` collection (one
//! [`crate::report::ProbeRecord`] per line). Unknown fields are ignored; fields compare does
//! not need may be absent.
//!
//! What is read from the bench JSON:
//! - `metadata`: `target`, `model`, `scenario`, `prompt_tokens` (as the server counted them),
//!   `max_tokens`, and `endpoint` {`response_model`, `system_fingerprint`, `server`,
//!   `server_version`}.
//! - `levels[]`: `prompt_tokens_sent` (a prompt-length sweep's level) else `concurrency` or
//!   `rate` (the other `null`), and `requests` {`sent`, `failed`} (the level's failure ratio).
//! - `requests[]`: `level` (the index into `levels[]`), `warmup` (such requests are skipped, as
//!   bench's statistics skip them), `ok`, `reason` (failed requests), and per successful
//!   request `ttft_seconds`, `time_to_first_output_token_seconds`, `tpot_seconds`,
//!   `e2e_seconds`, `output_tokens_per_second` and `inter_token_latency_seconds`, the list of its
//!   gaps (compare's ITL of a request is the median of that list), and `prompt_tokens` (the
//!   server's count). `null` means unknown.
//!
//! A probe-once line has `success`, `failure_reason`, the same metric fields but its gaps as
//! `inter_token_latencies_seconds`, and the identity fields at the top level.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::Metric;
use crate::bench::json::{self as bench, BenchFile, Measured, Outcome};
use crate::bench::level::Criterion;
use crate::report::ProbeRecord;

/// The schema name prefix of `bench` JSON.
pub const BENCH_SCHEMA_PREFIX: &str = "llm-probe.bench/";

/// The one bench schema version this build reads (`bench --output json` writes it).
pub const BENCH_SCHEMA: &str = crate::bench::json::SCHEMA;

/// The largest latency a run may state, seconds (a day: the longest duration llm-probe
/// accepts anywhere); anything above is a damaged or hand-made file.
pub const MAX_SECONDS: f64 = 86_400.0;

/// The largest output tokens/s a run may state (far above any real stream).
pub const MAX_TOKENS_PER_SECOND: f64 = 1e9;

/// What a run file was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    /// `bench --output json`.
    Bench,
    /// `probe-once --output json` lines.
    ProbeOnce,
}

/// Which level of a sweep: matched between runs by this key.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LevelKey {
    /// Closed loop with this many virtual users.
    Concurrency(u64),
    /// Open loop at this many requests per second.
    Rate(f64),
    /// A prompt-length sweep's level: a generated prompt of this many tokens
    /// (`prompt_tokens_sent`).
    PromptTokens(u64),
    /// A run without levels (a `probe-once` collection).
    Single,
}

impl std::fmt::Display for LevelKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LevelKey::Concurrency(c) => write!(f, "concurrency {c}"),
            LevelKey::Rate(r) => write!(f, "rate {r}/s"),
            LevelKey::PromptTokens(t) => write!(f, "prompt {t} tokens"),
            LevelKey::Single => write!(f, "all probes"),
        }
    }
}

/// The endpoint identity a run saw (what the server said it is).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Identity {
    /// The model the responses named.
    pub response_model: Option<String>,
    /// OpenAI's `system_fingerprint`.
    pub system_fingerprint: Option<String>,
    /// The `Server` header (bench: `server`; probe-once: `server_header`).
    pub server_header: Option<String>,
    /// The server's reported version.
    pub server_version: Option<String>,
}

impl Identity {
    /// Whether nothing is known.
    pub fn is_empty(&self) -> bool {
        *self == Identity::default()
    }
}

impl From<bench::Endpoint> for Identity {
    fn from(e: bench::Endpoint) -> Self {
        Identity {
            response_model: e.response_model,
            system_fingerprint: e.system_fingerprint,
            server_header: e.server,
            server_version: e.server_version,
        }
    }
}

impl From<&ProbeRecord> for Identity {
    fn from(p: &ProbeRecord) -> Self {
        Identity {
            response_model: p.response_model.clone(),
            system_fingerprint: p.system_fingerprint.clone(),
            server_header: p.server_header.clone(),
            server_version: p.server_version.clone(),
        }
    }
}

/// One request's outcome and measurements (seconds, or tokens per second).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestRecord {
    /// Whether the request succeeded.
    pub success: bool,
    /// The failure reason (failed requests).
    pub failure_reason: Option<String>,
    /// The value of each metric ([`Metric::ALL`] order); `None` when unknown.
    pub values: [Option<f64>; Metric::ALL.len()],
    /// Prompt tokens as the server counted them, if it did.
    pub prompt_tokens: Option<u64>,
    /// Prefill speed, prompt tokens per second of TTFT (a generated long prompt only; not a
    /// compared metric: at one prompt size it moves with TTFT), for a baseline.
    pub prefill_tokens_per_second: Option<f64>,
}

/// One level of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Level {
    /// Its key.
    pub key: LevelKey,
    /// `(sent, failed)` from the level's summary, when the file has one.
    pub counts: Option<(u64, u64)>,
    /// Its requests.
    pub requests: Vec<RequestRecord>,
}

impl Level {
    /// `(sent, failed)`: the summary's counts, else counted from the requests.
    pub fn sent_failed(&self) -> (u64, u64) {
        self.counts.unwrap_or_else(|| {
            let failed = self.requests.iter().filter(|r| !r.success).count();
            (self.requests.len() as u64, failed as u64)
        })
    }

    /// The median of the server's prompt counts over successful requests; `None` without any.
    pub fn counted_prompt(&self) -> Option<f64> {
        let counts: Vec<f64> = (self.requests.iter())
            .filter(|r| r.success)
            .filter_map(|r| r.prompt_tokens.map(|n| n as f64))
            .collect();
        crate::stats::median(&counts)
    }

    /// The finite values of `metric` over successful requests.
    pub fn values(&self, metric: Metric) -> Vec<f64> {
        self.requests
            .iter()
            .filter(|r| r.success)
            .filter_map(|r| r.values[metric.index()])
            .filter(|v| v.is_finite())
            .collect()
    }

    /// The prefill speeds of the successful requests that have one.
    pub fn prefill_values(&self) -> Vec<f64> {
        (self.requests.iter())
            .filter(|r| r.success)
            .filter_map(|r| r.prefill_tokens_per_second)
            .collect()
    }
}

/// A run read from a file.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// The file it came from.
    pub path: PathBuf,
    /// Bench or probe-once.
    pub kind: RunKind,
    /// Target name.
    pub target: Option<String>,
    /// Configured model.
    pub model: Option<String>,
    /// Scenario name.
    pub scenario: Option<String>,
    /// Prompt size as the file states it (any JSON value; compared for equality).
    pub prompt_tokens: Option<Value>,
    /// `max_tokens` as the file states it.
    pub max_tokens: Option<Value>,
    /// The endpoint identity.
    pub identity: Identity,
    /// Its levels (one for probe-once).
    pub levels: Vec<Level>,
    /// The SLA the run was judged on and the capacity it found (bench runs that state them).
    pub sla: Option<Sla>,
}

/// A bench run's SLA (`metadata.slo`) and SLA capacity (`sla_capacity`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sla {
    /// `slo.ttft_p95_seconds`.
    pub ttft_p95: Option<f64>,
    /// `slo.output_tokens_per_second_min`.
    pub output_tokens_per_second_min: Option<f64>,
    /// `slo.max_failure_ratio`.
    pub max_failure_ratio: Option<f64>,
    /// The highest level meeting the SLA below the first breaking one; `None`: the first level
    /// already broke it.
    pub capacity: Option<LevelKey>,
    /// The first level that broke the SLA; `None`: every level met it.
    pub broken_at: Option<LevelKey>,
    /// The criteria that broke there.
    pub broken_by: Vec<Criterion>,
    /// Levels whose interval crosses a threshold (the knee is not established there).
    pub straddles: Vec<(LevelKey, Vec<Criterion>)>,
}

/// A run file that cannot be compared: names the file, what is wrong and what to do.
#[derive(Debug, thiserror::Error)]
#[error("{}: {problem}", path.display())]
pub struct InputError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong, and the fix.
    pub problem: String,
}

/// The largest run file `compare` reads, bytes (a bench run of 100,000 requests is about 50 MiB).
pub const MAX_RUN_BYTES: u64 = 256 << 20;

/// Read `path`: bench JSON or probe-once JSON lines (decided by content).
pub fn read_run(path: &Path) -> Result<Run, InputError> {
    let err = |problem: String| InputError {
        path: path.to_path_buf(),
        problem,
    };
    // Regular files only, at most MAX_RUN_BYTES, off a hanging mount within the time limit:
    // `/dev/zero` or a FIFO must not eat memory or hang (the probes file's reader).
    let bytes = crate::config::files::read(path, MAX_RUN_BYTES)
        .map_err(|e| err(format!("cannot read: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|_| err("not UTF-8 text (a JSON file?)".into()))?;
    parse_run(path, &text).map_err(err)
}

/// Parse a run from `text` (see [`read_run`]); the error is the problem without the path.
pub fn parse_run(path: &Path, text: &str) -> Result<Run, String> {
    if let Ok(whole) = serde_json::from_str::<Value>(text) {
        if let Some(schema) = whole.get("schema").and_then(Value::as_str) {
            if !schema.starts_with(BENCH_SCHEMA_PREFIX) {
                return Err(format!(
                    "unknown schema {schema:?}: compare reads `llm-probe bench --output json` \
                     ({BENCH_SCHEMA}) or `llm-probe probe-once --output json` lines"
                ));
            }
            if schema != BENCH_SCHEMA {
                return Err(format!(
                    "schema {schema:?} is not one this llm-probe reads ({BENCH_SCHEMA}): a \
                     newer llm-probe wrote it; compare it with that version"
                ));
            }
            return parse_bench(path, whole);
        }
    }
    parse_probe_lines(path, text)
}

/// The metric fields a bench `requests[]` item and a probe-once line share.
#[derive(Default)]
struct MetricFields {
    ttft_seconds: Option<f64>,
    time_to_first_output_token_seconds: Option<f64>,
    tpot_seconds: Option<f64>,
    e2e_seconds: Option<f64>,
    output_tokens_per_second: Option<f64>,
    prefill_tokens_per_second: Option<f64>,
}

impl From<&Measured> for MetricFields {
    fn from(m: &Measured) -> Self {
        MetricFields {
            ttft_seconds: m.ttft_seconds,
            time_to_first_output_token_seconds: m.time_to_first_output_token_seconds,
            tpot_seconds: m.tpot_seconds,
            e2e_seconds: m.e2e_seconds,
            output_tokens_per_second: m.output_tokens_per_second,
            prefill_tokens_per_second: m.prefill_tokens_per_second,
        }
    }
}

impl From<&ProbeRecord> for MetricFields {
    fn from(p: &ProbeRecord) -> Self {
        MetricFields {
            ttft_seconds: p.ttft_seconds,
            time_to_first_output_token_seconds: p.time_to_first_output_token_seconds,
            tpot_seconds: p.tpot_seconds,
            e2e_seconds: p.e2e_seconds,
            output_tokens_per_second: p.output_tokens_per_second,
            prefill_tokens_per_second: p.prefill_tokens_per_second,
        }
    }
}

impl MetricFields {
    /// The record of a request with these fields, its outcome and its inter-token gaps.
    fn record(
        &self,
        success: bool,
        failure_reason: Option<String>,
        gaps: Option<&[f64]>,
    ) -> Result<RequestRecord, String> {
        if let Some(gaps) = gaps {
            for g in gaps {
                check_value(Metric::Itl, *g)?;
            }
        }
        let itl = gaps.and_then(crate::stats::median);
        let mut values = [None; Metric::ALL.len()];
        for m in Metric::ALL {
            let v = match m {
                Metric::Ttft => self.ttft_seconds,
                Metric::TimeToFirstOutputToken => self.time_to_first_output_token_seconds,
                Metric::Tpot => self.tpot_seconds,
                Metric::Itl => itl,
                Metric::E2e => self.e2e_seconds,
                Metric::OutputTokensPerSecond => self.output_tokens_per_second,
            };
            if let Some(v) = v {
                check_value(m, v)?;
            }
            values[m.index()] = v;
        }
        let prefill = self.prefill_tokens_per_second;
        if let Some(v) = prefill.filter(|v| !(v.is_finite() && *v >= 0.0 && *v <= MAX_PREFILL)) {
            return Err(format!(
                "prefill_tokens_per_second is {v}; no stream measures that (finite, ≥ 0, at most {MAX_PREFILL})"
            ));
        }
        Ok(RequestRecord {
            success,
            failure_reason,
            values,
            prompt_tokens: None,
            prefill_tokens_per_second: prefill,
        })
    }
}

/// The highest prefill speed a file may hold (what the probe believes, see
/// `crate::measure`'s prefill speeds).
const MAX_PREFILL: f64 = 1e8;

/// A measurement no stream can produce (negative, not finite, beyond [`MAX_SECONDS`] or
/// [`MAX_TOKENS_PER_SECOND`]) is an error naming the field: a damaged or hand-edited file must
/// not become a verdict.
fn check_value(metric: Metric, v: f64) -> Result<(), String> {
    let max = match metric {
        Metric::OutputTokensPerSecond => MAX_TOKENS_PER_SECOND,
        _ => MAX_SECONDS,
    };
    if v.is_finite() && (0.0..=max).contains(&v) {
        Ok(())
    } else {
        Err(format!(
            "`{}` is {v}: a measurement must be between 0 and {max}",
            metric.json_name()
        ))
    }
}

/// A capacity's or a straddle's level: `prompt_tokens_sent`, else `concurrency` or `rate` (the
/// other `null`).
fn load_key(k: bench::LoadKey) -> Option<LevelKey> {
    match (k.prompt_tokens_sent, k.concurrency, k.rate) {
        (Some(t), _, _) => Some(LevelKey::PromptTokens(t)),
        (None, Some(c), _) => Some(LevelKey::Concurrency(c)),
        (None, None, Some(r)) => Some(LevelKey::Rate(r)),
        _ => None,
    }
}

/// The record of a probe-once line.
fn probe_record(p: &ProbeRecord) -> Result<RequestRecord, String> {
    let mut r = MetricFields::from(p).record(
        p.success.unwrap_or(p.failure_reason.is_none()),
        p.failure_reason.clone(),
        p.inter_token_latencies_seconds.as_deref(),
    )?;
    r.prompt_tokens = p.prompt_tokens;
    Ok(r)
}

fn parse_bench(path: &Path, whole: Value) -> Result<Run, String> {
    let file: BenchFile<Value> = serde_json::from_value(whole).map_err(|e| {
        format!("not a readable bench JSON ({e}); write it with `llm-probe bench --output json`")
    })?;
    let meta = file.metadata;
    let mut levels: Vec<Level> = file
        .levels
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let key = match (l.prompt_tokens_sent, l.concurrency, l.rate) {
                (Some(0), _, _) => Err(format!(
                    "levels[{i}] has `prompt_tokens_sent` 0, not a prompt size; write the file with `llm-probe bench --output json`"
                )),
                (Some(t), _, _) => Ok(LevelKey::PromptTokens(t)),
                (None, Some(c), _) => Ok(LevelKey::Concurrency(c)),
                (None, None, Some(r)) if r.is_finite() && r > 0.0 => Ok(LevelKey::Rate(r)),
                (None, None, Some(r)) => Err(format!(
                    "levels[{i}] has the rate {r}, not a number of requests per second above 0; write the file with `llm-probe bench --output json`"
                )),
                (None, None, None) => Err(format!(
                    "levels[{i}] has neither `concurrency` nor `rate`; one of them is required"
                )),
            }?;
            Ok(Level {
                key,
                counts: l.requests.as_ref().map(|c| (c.sent, c.failed)),
                requests: Vec::new(),
            })
        })
        .collect::<Result<_, String>>()?;
    for (i, item) in file.requests.into_iter().enumerate() {
        let r: bench::Request = serde_json::from_value(item).map_err(|e| {
            format!(
                "requests[{i}] is not a bench request ({e}); write the file with \
                 `llm-probe bench --output json`"
            )
        })?;
        if r.warmup {
            continue;
        }
        let below = levels.len();
        let level = levels.get_mut(r.level).ok_or_else(|| {
            format!(
                "requests[{i}] names no level of `levels[]` (its `level` {} must be an index \
                 below {below})",
                r.level
            )
        })?;
        let record = match &r.outcome {
            Outcome::Measured(m) => MetricFields::from(m)
                .record(r.ok, None, Some(&m.inter_token_latency_seconds))
                .map(|rec| RequestRecord {
                    prompt_tokens: m.prompt_tokens,
                    ..rec
                }),
            Outcome::Failed { reason, .. } => {
                MetricFields::default().record(r.ok, Some(reason.clone()), None)
            }
        }
        .map_err(|e| format!("requests[{i}]: {e}"))?;
        level.requests.push(record);
    }
    // The summaries are bench's counts of these very requests: a file where they disagree
    // was edited or damaged, and neither can be trusted.
    for (i, l) in levels.iter().enumerate() {
        if levels[..i].iter().any(|o| o.key == l.key) {
            return Err(format!(
                "levels[{i}] ({}) is listed twice; each level appears once in a bench file",
                l.key
            ));
        }
        let Some((sent, failed)) = l.counts else {
            continue;
        };
        if failed > sent {
            return Err(format!(
                "levels[{i}] ({}) says {failed} requests failed of {sent} sent: more failed than sent",
                l.key
            ));
        }
        let held = l.requests.len() as u64;
        let held_failed = l.requests.iter().filter(|r| !r.success).count() as u64;
        if (held, held_failed) != (sent, failed) {
            return Err(format!(
                "levels[{i}] ({}) says {sent} requests sent and {failed} failed, but requests[] holds {held} measured requests of that level ({held_failed} failed): the counts contradict the records; write the file again with `llm-probe bench --output json`",
                l.key
            ));
        }
    }
    let sla = file.sla_capacity.map(|c| {
        let slo = meta.slo.as_ref();
        Sla {
            ttft_p95: slo.and_then(|s| s.ttft_p95_seconds),
            output_tokens_per_second_min: slo.and_then(|s| s.output_tokens_per_second_min),
            max_failure_ratio: slo.and_then(|s| s.max_failure_ratio),
            capacity: load_key(c.capacity()),
            broken_at: c.broken_at.and_then(load_key),
            broken_by: c.broken_by,
            straddles: (c.straddles.into_iter())
                .filter_map(|s| Some((load_key(s.level())?, s.criteria)))
                .collect(),
        }
    });
    Ok(Run {
        sla,
        path: path.to_path_buf(),
        kind: RunKind::Bench,
        target: meta.target,
        model: meta.model,
        scenario: meta.scenario,
        prompt_tokens: meta.prompt_tokens.map(Value::from),
        max_tokens: meta.max_tokens.map(Value::from),
        identity: meta.endpoint.map(Identity::from).unwrap_or_default(),
        levels,
    })
}

fn parse_probe_lines(path: &Path, text: &str) -> Result<Run, String> {
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let fields: ProbeRecord = serde_json::from_str(line).map_err(|e| {
            format!(
                "line {}: not a probe-once JSON object ({e}); compare reads \
                 `llm-probe bench --output json` files or `llm-probe probe-once --output json` \
                 lines",
                i + 1
            )
        })?;
        lines.push(fields);
    }
    let first = lines
        .first()
        .ok_or("empty: no probes to compare; collect some with `llm-probe probe-once --output json >> FILE`")?;
    let mut by_pair: BTreeMap<(Option<&str>, Option<&str>), usize> = BTreeMap::new();
    for l in &lines {
        *by_pair
            .entry((l.target.as_deref(), l.scenario.as_deref()))
            .or_default() += 1;
    }
    if by_pair.len() > 1 {
        let pairs: Vec<String> = by_pair
            .keys()
            .map(|(t, s)| format!("{}/{}", t.unwrap_or("?"), s.unwrap_or("?")))
            .collect();
        return Err(format!(
            "probes of several target/scenario pairs ({}); collect one pair per file with \
             `probe-once --target T --scenario S`",
            pairs.join(", ")
        ));
    }
    let requests = (lines.iter().enumerate())
        .map(|(i, l)| probe_record(l).map_err(|e| format!("probe {}: {e}", i + 1)))
        .collect::<Result<Vec<_>, String>>()?;
    let identity = lines
        .iter()
        .filter(|l| l.success == Some(true))
        .map(Identity::from)
        .find(|id| !id.is_empty())
        .unwrap_or_default();
    Ok(Run {
        path: path.to_path_buf(),
        kind: RunKind::ProbeOnce,
        target: first.target.clone(),
        model: first.model.clone(),
        scenario: first.scenario.clone(),
        prompt_tokens: lines.iter().find_map(|l| l.prompt_tokens.map(Value::from)),
        max_tokens: None,
        identity,
        sla: None,
        levels: vec![Level {
            key: LevelKey::Single,
            counts: None,
            requests,
        }],
    })
}

#[cfg(test)]
mod tests;
