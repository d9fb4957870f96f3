//! The baseline file format: the accepted latency of one (target, scenario), schema [`SCHEMA`]
//! (JSON, documented field by field in docs/baselines.md, "The baseline file"): [`Baseline`],
//! [`parse`] and [`Baseline::to_json`]; pure, no IO.
//!
//! The probes file names baseline files per target (`baseline_file:`); the configuration reads
//! and checks them at every load and reload, and the daemon exports them as the
//! `llm_probe_baseline_*` gauges. `crate::baseline` (the `baseline save` command) writes them.

use serde::{Deserialize, Serialize};

/// The schema name and version of a baseline file.
pub const SCHEMA: &str = "llm-probe.baseline/v1";
/// The schema name prefix (any version).
pub const SCHEMA_PREFIX: &str = "llm-probe.baseline/";

/// P50, P95 and P99 of one metric, in its unit (seconds, or tokens per second).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quantiles {
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
}

impl Quantiles {
    /// `(quantile label, value)` pairs: `("0.5", p50)`, `("0.95", p95)`, `("0.99", p99)`.
    pub fn labelled(&self) -> [(&'static str, f64); 3] {
        [("0.5", self.p50), ("0.95", self.p95), ("0.99", self.p99)]
    }

    /// Finite, not negative and in order (`p50 ≤ p95 ≤ p99`); else what is wrong.
    fn check(&self, field: &str) -> Result<(), String> {
        for (q, v) in self.labelled() {
            if !v.is_finite() || v < 0.0 {
                return Err(format!(
                    "{field} quantile {q} is {v}; a baseline holds finite values ≥ 0 (write the file with `llm-probe baseline save`)"
                ));
            }
        }
        if !(self.p50 <= self.p95 && self.p95 <= self.p99) {
            return Err(format!(
                "{field} is not in order (p50 {} ≤ p95 {} ≤ p99 {} must hold); write the file with `llm-probe baseline save`",
                self.p50, self.p95, self.p99
            ));
        }
        Ok(())
    }
}

/// The endpoint identity at the time of the measurement (what the server said it is); a field
/// is `null` when the server did not say.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    /// The model the responses named.
    pub response_model: Option<String>,
    /// OpenAI's `system_fingerprint`.
    pub system_fingerprint: Option<String>,
    /// The `Server` header.
    pub server: Option<String>,
    /// The server build from the target's `version_path`.
    pub server_version: Option<String>,
}

/// Where a baseline's numbers came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Origin {
    /// `bench` (a `bench --output json` file), `probe-once` (a `probe-once --output json`
    /// collection) or `prometheus` (a window of the daemon's histograms, see `crate::baseline::prometheus`).
    pub kind: String,
    /// The file it was read from, as given to `baseline save` (for `prometheus`: the
    /// Prometheus URL, user-info and query values redacted).
    pub file: String,
    /// The level of the sweep, e.g. `concurrency 4` or `rate 2/s` (`all probes` for
    /// probe-once; `window START/END`, RFC 3339 UTC, for prometheus).
    pub level: String,
    /// The llm-probe version that measured (the bench file's), else the one that saved.
    pub llm_probe_version: String,
}

/// One baseline file: the accepted distribution of one (target, scenario).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Baseline {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// The target's name in the probes file.
    pub target: String,
    /// The scenario's name.
    pub scenario: String,
    /// The configured model at the time (information; the daemon labels the gauges with the
    /// model configured now).
    pub model: Option<String>,
    /// When the measurement ended, RFC 3339 UTC (`2026-11-30T14:00:00.000Z`).
    pub measured_at: String,
    /// When the file was written, RFC 3339 UTC.
    pub saved_at: String,
    /// Where the numbers came from.
    pub source: Origin,
    /// The endpoint identity the measurement saw.
    pub endpoint: Endpoint,
    /// Successful requests measured (warmup excluded).
    pub samples: u64,
    /// Time to first token, seconds.
    pub ttft_seconds: Quantiles,
    /// Time per output token, seconds; `null` when no response had two tokens.
    pub tpot_seconds: Option<Quantiles>,
    /// Per-request output tokens per second; `null` as TPOT.
    pub output_tokens_per_second: Option<Quantiles>,
    /// End-to-end request duration, seconds.
    pub e2e_seconds: Option<Quantiles>,
    /// Prefill speed, prompt tokens per second of TTFT, of a scenario with a generated long
    /// prompt (`prompt_tokens:`); left out of the file for other scenarios.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_tokens_per_second: Option<Quantiles>,
}

impl Baseline {
    /// The file's text: pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }

    /// `measured_at` as Unix seconds (checked by [`parse`], so 0 only for a hand-made value).
    pub fn measured_unix_seconds(&self) -> f64 {
        humantime::parse_rfc3339(&self.measured_at)
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0.0, |d| d.as_secs_f64())
    }

    /// Every rule [`parse`] checks after the schema, on a value already made.
    fn check(&self) -> Result<(), String> {
        if self.target.is_empty() || self.scenario.is_empty() {
            return Err("`target` and `scenario` must name the pair it pins".into());
        }
        if self.samples == 0 {
            return Err("`samples` is 0: a baseline needs successful requests".into());
        }
        for (field, at) in [
            ("measured_at", &self.measured_at),
            ("saved_at", &self.saved_at),
        ] {
            if humantime::parse_rfc3339(at).is_err() {
                return Err(format!(
                    "`{field}` {at:?} is not an RFC 3339 UTC time such as 2026-11-30T14:00:00Z"
                ));
            }
        }
        self.ttft_seconds.check("ttft_seconds")?;
        for (field, q) in [
            ("tpot_seconds", &self.tpot_seconds),
            ("output_tokens_per_second", &self.output_tokens_per_second),
            ("e2e_seconds", &self.e2e_seconds),
            ("prefill_tokens_per_second", &self.prefill_tokens_per_second),
        ] {
            if let Some(q) = q {
                q.check(field)?;
            }
        }
        Ok(())
    }
}

/// Parses and checks a baseline file's `text`. The error is a sentence fragment saying what is
/// wrong and how to fix it (without the file name, which the caller adds).
///
/// Errors: not JSON; no `schema` or another one than [`SCHEMA`]; a missing, unknown or mistyped
/// field; an empty target or scenario; no samples; a time that is not RFC 3339; a quantile that
/// is negative, not finite or out of order.
pub fn parse(text: &str) -> Result<Baseline, String> {
    let value: serde_json::Value = serde_json::from_str(text.trim_start_matches('\u{feff}'))
        .map_err(|e| {
            format!("not JSON ({e}); a baseline file is written by `llm-probe baseline save`")
        })?;
    match value.get("schema").and_then(serde_json::Value::as_str) {
        Some(SCHEMA) => {}
        Some(other) if other.starts_with(SCHEMA_PREFIX) => {
            return Err(format!(
                "schema {other:?} is not supported by this llm-probe, which reads {SCHEMA}; save the baseline again with this version"
            ))
        }
        Some(other) => {
            return Err(format!(
                "unknown schema {other:?}: not a baseline file ({SCHEMA}); write one with `llm-probe baseline save`"
            ))
        }
        None => {
            return Err(format!(
                "no \"schema\" field: not a baseline file ({SCHEMA}); write one with `llm-probe baseline save`"
            ))
        }
    }
    let b: Baseline = serde_json::from_value(value).map_err(|e| {
        format!("not a valid {SCHEMA} file ({e}); write it with `llm-probe baseline save`")
    })?;
    b.check()?;
    Ok(b)
}
