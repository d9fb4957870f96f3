//! The JSON report, schema `llm-probe.bench/v1` (documented field by field in docs/bench.md,
//! "The JSON report"; its JSON Schema, generated from these types, is
//! docs/schemas/bench.schema.json).
//!
//! [`BenchFile`] is both what `bench --output json` writes and what `compare` and `baseline
//! save` read back ([`crate::compare::input`]): one set of types for the one schema. The writer
//! fills every field; fields a reader can do without carry `#[serde(default)]` (or are an
//! `Option`), so files from older llm-probe versions and hand-made ones with only what
//! `compare` needs still read. The JSON Schema describes what the writer writes.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::level::{Capacity, Criterion, LevelStats, Load, Verdict};
use super::record::RequestRecord;
use super::stats::Summary;
use super::Report;

/// The schema name and version.
pub const SCHEMA: &str = "llm-probe.bench/v1";

/// A whole bench file. `R` is the type of the items of `requests[]`: [`Request`], or
/// [`Value`] for a reader that parses each item on its own (to name the one that is wrong).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(bound(deserialize = "R: Deserialize<'de>"))]
#[schemars(
    title = "llm-probe.bench/v1",
    description = "`llm-probe bench --output json`"
)]
pub struct BenchFile<R = Request> {
    /// `llm-probe.bench/v1`.
    #[schemars(extend("const" = SCHEMA))]
    pub schema: String,
    /// What was loaded, when and how.
    pub metadata: Metadata,
    /// Each level that ran, in order.
    pub levels: Vec<Level>,
    /// Every request, warmup included, in level order.
    #[serde(default)]
    pub requests: Vec<R>,
    /// The SLA capacity over the levels that ran.
    #[serde(default)]
    #[schemars(with = "SlaCapacity")]
    pub sla_capacity: Option<SlaCapacity>,
}

/// `metadata`: what was loaded, when and how.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Metadata {
    /// The target's name.
    #[schemars(with = "String")]
    pub target: Option<String>,
    /// The configured model.
    #[schemars(with = "String")]
    pub model: Option<String>,
    /// The target's protocol.
    pub protocol: String,
    /// The scenario's name.
    #[schemars(with = "String")]
    pub scenario: Option<String>,
    /// The scenario's `max_tokens`.
    #[schemars(with = "u32")]
    pub max_tokens: Option<u32>,
    /// The prefix-cache policy (`cold`, `warm`).
    pub prefix_cache: String,
    /// Prompt tokens as the server counted them (first successful request; `null` without
    /// usage).
    pub prompt_tokens: Option<u64>,
    /// What the endpoint said about itself (first successful request).
    #[schemars(with = "Endpoint")]
    pub endpoint: Option<Endpoint>,
    /// The llm-probe version that ran the sweep.
    pub llm_probe_version: String,
    /// UTC start of the sweep (RFC 3339).
    pub started: String,
    /// UTC end of the sweep (RFC 3339).
    pub ended: String,
    /// Ctrl-C ended the sweep.
    pub interrupted: bool,
    /// `--stop-on-slo-breach` ended the sweep.
    pub stopped_on_slo_breach: bool,
    /// FNV-1a 64 of the probes file text, target, scenario, cache policy and plan.
    pub config_digest: String,
    /// The SLA the levels were judged on.
    #[schemars(with = "Slo")]
    pub slo: Option<Slo>,
    /// The plan that ran.
    pub plan: PlanSettings,
}

/// `metadata.endpoint`: the endpoint's identity; each `null` when it did not say.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Endpoint {
    /// The model the responses named.
    pub response_model: Option<String>,
    /// OpenAI's `system_fingerprint`.
    pub system_fingerprint: Option<String>,
    /// The `Server` header.
    pub server: Option<String>,
    /// The server's version (`version_path`).
    pub server_version: Option<String>,
}

/// `metadata.slo`: the SLA a level is judged on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Slo {
    /// The target's `slo.ttft_p95`, seconds.
    #[schemars(with = "f64")]
    pub ttft_p95_seconds: Option<f64>,
    /// The target's `slo.output_tokens_per_second_min`.
    #[schemars(with = "f64")]
    pub output_tokens_per_second_min: Option<f64>,
    /// `--max-failure-ratio`.
    #[schemars(with = "f64")]
    pub max_failure_ratio: Option<f64>,
}

/// `metadata.plan`: how each level ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct PlanSettings {
    /// Each level's time bound, seconds.
    pub duration_seconds: Option<f64>,
    /// Each level's measured requests.
    pub requests: Option<u64>,
    /// What each level excludes at its start.
    pub warmup: WarmupSetting,
    /// Idle time between levels, seconds.
    pub pause_seconds: f64,
    /// Seed of the Poisson arrivals.
    pub seed: u64,
    /// Open loop: most requests in flight at once.
    pub max_concurrency: Option<u32>,
    /// Cap on requests over the whole sweep, warmup included.
    pub max_requests: u64,
    /// A prompt-length sweep (`--prompt-tokens`): whether its generated prompts carry the
    /// needle (a code word the answer must repeat); `null` for other sweeps.
    pub needle: Option<bool>,
}

/// `metadata.plan.warmup`: `{"requests": N}` or `{"seconds": S}`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WarmupSetting {
    /// The first N requests of each level.
    Requests(u64),
    /// Requests scheduled in the first S seconds of each level.
    Seconds(f64),
}

impl Default for WarmupSetting {
    fn default() -> Self {
        WarmupSetting::Requests(0)
    }
}

/// A level's load: `concurrency` or `rate`, the other `null`; a prompt-length level has its
/// generated prompt's size in `prompt_tokens_sent` (and its fixed `concurrency`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct LoadKey {
    /// Virtual users (closed loop).
    pub concurrency: Option<u64>,
    /// Requests per second (open loop).
    pub rate: Option<f64>,
    /// The generated prompt's size, tokens (a prompt-length level), else `null`.
    pub prompt_tokens_sent: Option<u64>,
}

impl From<&Load> for LoadKey {
    fn from(l: &Load) -> Self {
        match *l {
            Load::Concurrency(c) => LoadKey {
                concurrency: Some(u64::from(c)),
                ..LoadKey::default()
            },
            Load::Rate(r) => LoadKey {
                rate: Some(r),
                ..LoadKey::default()
            },
            Load::Prompt {
                tokens,
                concurrency,
            } => LoadKey {
                concurrency: Some(u64::from(concurrency)),
                rate: None,
                prompt_tokens_sent: Some(u64::from(tokens)),
            },
        }
    }
}

/// One item of `levels[]`: the level's load, counts, summaries, rates and SLA verdict.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Level {
    /// Virtual users (closed loop, and a prompt-length level's fixed concurrency), else
    /// `null`.
    pub concurrency: Option<u64>,
    /// Requests per second (open loop), else `null`.
    pub rate: Option<f64>,
    /// The generated prompt's size, tokens (a prompt-length level, `--prompt-tokens`; the
    /// level's key), else `null`.
    pub prompt_tokens_sent: Option<u64>,
    /// The level's requests, warmup excluded.
    #[schemars(with = "LevelCounts")]
    pub requests: Option<LevelCounts>,
    /// TTFT from the scheduled send, seconds.
    pub ttft_seconds: MetricSummary,
    /// Time to first output token from the scheduled send, seconds.
    pub time_to_first_output_token_seconds: MetricSummary,
    /// TPOT, seconds.
    pub tpot_seconds: MetricSummary,
    /// Every gap between token events of every request, seconds.
    pub inter_token_latency_seconds: MetricSummary,
    /// E2E from the scheduled send, seconds.
    pub e2e_seconds: MetricSummary,
    /// Per-request output tokens per second.
    pub output_tokens_per_second: MetricSummary,
    /// How late each request was sent after its scheduled time, seconds.
    pub generator_lateness_seconds: MetricSummary,
    /// Prompt tokens as the server counted them, per successful request.
    pub prompt_tokens: MetricSummary,
    /// Prefill speed seen by the client, prompt tokens per second of TTFT (generated prompts
    /// only).
    pub prefill_tokens_per_second: MetricSummary,
    /// Prefill speed by the server's own clock (where it reports its prefill time).
    pub server_prefill_tokens_per_second: MetricSummary,
    /// Output tokens of the measured requests.
    pub output_tokens: u64,
    /// The level's window: earliest scheduled send to the last end, seconds.
    pub wall_seconds: f64,
    /// Output tokens across all streams per second of the window.
    pub output_throughput_tokens_per_second: f64,
    /// Successful requests per second of the window.
    pub request_throughput_per_second: f64,
    /// Requests meeting every SLO per second of the window.
    pub goodput_requests_per_second: f64,
    /// Share of sent requests meeting every SLO, 0 to 1.
    pub slo_attainment: f64,
    /// The level meets the SLA.
    pub meets_sla: bool,
    /// The criteria the level breaks.
    pub broken_by: Vec<Criterion>,
    /// The criteria whose 95 % CI crosses the threshold.
    pub straddles: Vec<Criterion>,
}

/// `levels[].requests`: the level's requests, warmup excluded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LevelCounts {
    /// Requests sent (completed or failed).
    pub sent: u64,
    /// Requests that produced a measurement.
    #[serde(default)]
    pub succeeded: u64,
    /// Requests that failed.
    pub failed: u64,
    /// Failures per reason (the daemon's `reason` labels).
    #[serde(default)]
    pub failures_by_reason: BTreeMap<String, u64>,
}

/// One metric over one level; values `null` when `n` is 0.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct MetricSummary {
    /// Median.
    pub p50: Option<f64>,
    /// 90th percentile.
    pub p90: Option<f64>,
    /// 95th percentile.
    pub p95: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
    /// 5th percentile.
    pub p5: Option<f64>,
    /// Arithmetic mean.
    pub mean: Option<f64>,
    /// Smallest sample.
    pub min: Option<f64>,
    /// Largest sample.
    pub max: Option<f64>,
    /// Samples.
    pub n: u64,
    /// 95 % CI of P50, `[low, high]`, a side `null` when `n` cannot bound it.
    pub p50_ci: [Option<f64>; 2],
    /// 95 % CI of P95.
    pub p95_ci: [Option<f64>; 2],
    /// 95 % CI of P99.
    pub p99_ci: [Option<f64>; 2],
    /// 95 % CI of P5.
    pub p5_ci: [Option<f64>; 2],
}

impl From<&Summary> for MetricSummary {
    fn from(s: &Summary) -> Self {
        MetricSummary {
            p50: s.p50,
            p90: s.p90,
            p95: s.p95,
            p99: s.p99,
            p5: s.p5,
            mean: s.mean,
            min: s.min,
            max: s.max,
            n: s.n as u64,
            p50_ci: s.p50_ci,
            p95_ci: s.p95_ci,
            p99_ci: s.p99_ci,
            p5_ci: s.p5_ci,
        }
    }
}

/// `sla_capacity`: the highest level meeting the SLA below the first one that breaks it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct SlaCapacity {
    /// The capacity's virtual users; all `null` when the first level breaks the SLA.
    pub concurrency: Option<u64>,
    /// The capacity's rate.
    pub rate: Option<f64>,
    /// The capacity's generated prompt size (a prompt-length sweep: the longest prompt
    /// within the SLA).
    pub prompt_tokens_sent: Option<u64>,
    /// The first level that broke the SLA; `null` when every level met it.
    pub broken_at: Option<LoadKey>,
    /// The criteria that broke there.
    pub broken_by: Vec<Criterion>,
    /// Levels whose CI crosses a threshold.
    pub straddles: Vec<Straddle>,
}

impl SlaCapacity {
    /// The capacity's level.
    pub fn capacity(&self) -> LoadKey {
        LoadKey {
            concurrency: self.concurrency,
            rate: self.rate,
            prompt_tokens_sent: self.prompt_tokens_sent,
        }
    }
}

/// `sla_capacity.straddles[]`: a level and the criteria its CI straddles.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Straddle {
    /// The level's virtual users.
    pub concurrency: Option<u64>,
    /// The level's rate.
    pub rate: Option<f64>,
    /// The level's generated prompt size.
    pub prompt_tokens_sent: Option<u64>,
    /// The criteria.
    pub criteria: Vec<Criterion>,
}

impl Straddle {
    /// The level.
    pub fn level(&self) -> LoadKey {
        LoadKey {
            concurrency: self.concurrency,
            rate: self.rate,
            prompt_tokens_sent: self.prompt_tokens_sent,
        }
    }
}

/// One item of `requests[]`: where and when it ran, then its measurement or its failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Request {
    /// The index into `levels[]`.
    pub level: usize,
    /// The level's virtual users.
    #[serde(default)]
    pub concurrency: Option<u64>,
    /// The level's rate.
    #[serde(default)]
    pub rate: Option<f64>,
    /// The level's generated prompt size (a prompt-length level).
    #[serde(default)]
    pub prompt_tokens_sent: Option<u64>,
    /// Order of sending within the level (0-based).
    #[serde(default)]
    pub index: u64,
    /// Excluded from the statistics (`--warmup`).
    #[serde(default)]
    pub warmup: bool,
    /// Scheduled send, seconds from the level's start.
    #[serde(default)]
    pub scheduled_seconds: f64,
    /// How late the request was sent after its scheduled time, seconds.
    #[serde(default)]
    pub lateness_seconds: f64,
    /// When the request ended, seconds from the level's start.
    #[serde(default)]
    pub ended_seconds: f64,
    /// The request succeeded.
    pub ok: bool,
    /// Its failure (`ok: false`) or its measurement.
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// A request's failure or measurement, beside its `ok`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Outcome {
    /// The failure reason (the daemon's `reason` label) and what happened.
    Failed {
        /// The failure reason.
        reason: String,
        /// What happened.
        #[serde(default)]
        detail: String,
    },
    /// The measurement.
    Measured(Measured),
}

/// A successful request's numbers; latencies in seconds from the scheduled send.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Measured {
    /// TTFT.
    #[schemars(with = "f64")]
    pub ttft_seconds: Option<f64>,
    /// Time to first output token.
    pub time_to_first_output_token_seconds: Option<f64>,
    /// TPOT (not moved by lateness).
    pub tpot_seconds: Option<f64>,
    /// E2E.
    #[schemars(with = "f64")]
    pub e2e_seconds: Option<f64>,
    /// Output tokens.
    pub output_tokens: u64,
    /// Prompt tokens the server reported.
    pub prompt_tokens: Option<u64>,
    /// The server's own count of generated tokens besides usage.
    pub server_output_tokens: Option<u64>,
    /// Output tokens per second (1 / TPOT).
    pub output_tokens_per_second: Option<f64>,
    /// Every gap between token events.
    pub inter_token_latency_seconds: Vec<f64>,
    /// Prefill speed seen by the client, prompt tokens per second of TTFT (a generated prompt
    /// only).
    pub prefill_tokens_per_second: Option<f64>,
    /// Prefill speed by the server's own clock (where it reports its prefill time).
    pub server_prefill_tokens_per_second: Option<f64>,
}

/// The whole report as JSON: [`BenchFile`], keys in serde_json's order (sorted).
pub fn to_json(r: &Report) -> Value {
    serde_json::to_value(file(r)).expect("a bench report serializes")
}

/// The whole report.
pub fn file(r: &Report) -> BenchFile {
    let rfc3339 = |t| humantime::format_rfc3339_millis(t).to_string();
    BenchFile {
        schema: SCHEMA.into(),
        metadata: Metadata {
            target: Some(r.target.name.clone()),
            model: Some(r.target.model.clone()),
            protocol: r.target.protocol.as_str().into(),
            scenario: Some(r.scenario.name.clone()),
            max_tokens: Some(r.scenario.max_tokens),
            prefix_cache: r.scenario.prefix_cache.as_str().into(),
            prompt_tokens: r.prompt_tokens,
            endpoint: Some(Endpoint {
                response_model: r.identity.response_model.clone(),
                system_fingerprint: r.identity.system_fingerprint.clone(),
                server: r.identity.server_header.clone(),
                server_version: r.identity.server_version.clone(),
            }),
            llm_probe_version: env!("CARGO_PKG_VERSION").into(),
            started: rfc3339(r.started),
            ended: rfc3339(r.ended),
            interrupted: r.interrupted,
            stopped_on_slo_breach: r.stopped_on_breach,
            config_digest: r.config_digest.clone(),
            slo: Some(Slo {
                ttft_p95_seconds: Some(r.target.slo.ttft_p95.as_secs_f64()),
                output_tokens_per_second_min: Some(r.target.slo.output_tokens_per_second_min),
                max_failure_ratio: Some(r.plan.max_failure_ratio),
            }),
            plan: plan(r),
        },
        levels: r.levels.iter().map(|(s, v)| level(s, v)).collect(),
        sla_capacity: Some(capacity(&r.capacity)),
        requests: r.records.iter().map(|q| request(r, q)).collect(),
    }
}

fn plan(r: &Report) -> PlanSettings {
    let p = &r.plan;
    PlanSettings {
        duration_seconds: p.duration.map(|d| d.as_secs_f64()),
        requests: p.requests,
        warmup: match p.warmup {
            super::plan::Warmup::Requests(n) => WarmupSetting::Requests(n),
            super::plan::Warmup::Time(d) => WarmupSetting::Seconds(d.as_secs_f64()),
        },
        pause_seconds: p.pause.as_secs_f64(),
        seed: p.seed,
        max_concurrency: p.max_concurrency,
        max_requests: p.max_requests,
        needle: (p.levels.iter().any(|l| l.prompt_tokens().is_some()))
            .then(|| super::prompt::needle(&r.scenario)),
    }
}

fn level(s: &LevelStats, v: &Verdict) -> Level {
    let key = LoadKey::from(&s.load);
    Level {
        concurrency: key.concurrency,
        rate: key.rate,
        prompt_tokens_sent: key.prompt_tokens_sent,
        requests: Some(LevelCounts {
            sent: s.requests.sent,
            succeeded: s.requests.succeeded,
            failed: s.requests.failed,
            failures_by_reason: (s.requests.failures_by_reason.iter())
                .map(|(k, n)| (k.to_string(), *n))
                .collect(),
        }),
        ttft_seconds: (&s.ttft).into(),
        time_to_first_output_token_seconds: (&s.time_to_first_output_token).into(),
        tpot_seconds: (&s.tpot).into(),
        inter_token_latency_seconds: (&s.itl).into(),
        e2e_seconds: (&s.e2e).into(),
        output_tokens_per_second: (&s.output_tokens_per_second).into(),
        generator_lateness_seconds: (&s.lateness).into(),
        prompt_tokens: (&s.prompt_tokens).into(),
        prefill_tokens_per_second: (&s.prefill_tokens_per_second).into(),
        server_prefill_tokens_per_second: (&s.server_prefill_tokens_per_second).into(),
        output_tokens: s.output_tokens,
        wall_seconds: s.wall_seconds,
        output_throughput_tokens_per_second: s.output_throughput,
        request_throughput_per_second: s.request_throughput,
        goodput_requests_per_second: s.goodput,
        slo_attainment: s.slo_attainment,
        meets_sla: v.broken_by.is_empty(),
        broken_by: v.broken_by.clone(),
        straddles: v.straddles.clone(),
    }
}

fn capacity(c: &Capacity) -> SlaCapacity {
    let key = c.capacity.as_ref().map(LoadKey::from).unwrap_or_default();
    SlaCapacity {
        concurrency: key.concurrency,
        rate: key.rate,
        prompt_tokens_sent: key.prompt_tokens_sent,
        broken_at: c.broken_at.as_ref().map(LoadKey::from),
        broken_by: c.broken_by.clone(),
        straddles: (c.straddles.iter())
            .map(|(l, cs)| {
                let key = LoadKey::from(l);
                Straddle {
                    concurrency: key.concurrency,
                    rate: key.rate,
                    prompt_tokens_sent: key.prompt_tokens_sent,
                    criteria: cs.clone(),
                }
            })
            .collect(),
    }
}

fn request(r: &Report, q: &RequestRecord) -> Request {
    let key = r
        .plan
        .levels
        .get(q.level)
        .map(LoadKey::from)
        .unwrap_or_default();
    Request {
        level: q.level,
        concurrency: key.concurrency,
        rate: key.rate,
        prompt_tokens_sent: key.prompt_tokens_sent,
        index: q.index,
        warmup: q.warmup,
        scheduled_seconds: q.scheduled.as_secs_f64(),
        lateness_seconds: q.lateness.as_secs_f64(),
        ended_seconds: q.ended.as_secs_f64(),
        ok: q.result.is_ok(),
        outcome: match &q.result {
            Ok(s) => Outcome::Measured(Measured {
                ttft_seconds: Some(s.ttft),
                time_to_first_output_token_seconds: s.time_to_first_output_token,
                tpot_seconds: s.tpot,
                e2e_seconds: Some(s.e2e),
                output_tokens: s.output_tokens,
                prompt_tokens: s.prompt_tokens,
                server_output_tokens: s.server_output_tokens,
                output_tokens_per_second: s.output_tokens_per_second,
                inter_token_latency_seconds: s.inter_token_latencies.clone(),
                prefill_tokens_per_second: s.prefill_tokens_per_second,
                server_prefill_tokens_per_second: s.server_prefill_tokens_per_second,
            }),
            Err((reason, detail)) => Outcome::Failed {
                reason: reason.as_str().into(),
                detail: detail.clone(),
            },
        },
    }
}
