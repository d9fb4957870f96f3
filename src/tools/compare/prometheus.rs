//! What `compare --prometheus.url` reads from Prometheus's HTTP API (`/api/v1/query`): the
//! daemon's classic histograms and probe counters over a window ([`fetch_window`]), the last
//! change of a target's `llm_probe_endpoint_info` label set ([`find_change`]) and the target's
//! SLO gauges ([`fetch_slo`]).
//!
//! Counts over a window come from the raw samples (an instant query of a range selector, e.g.
//! `llm_probe_time_to_first_token_seconds_bucket{target="T"}[3900000ms]`), not from PromQL's
//! `increase()`: [`increase`] adds up each series' rises with counter resets handled as
//! Prometheus does (a fall means the counter restarted, and its new value counts in full), but
//! without `increase()`'s extrapolation to the window's edges, so the counts are whole
//! observations and two adjacent windows split them exactly. An observation counts in the window
//! whose `(start, end]` holds the first scrape that carried it.
//!
//! Errors name the Prometheus URL (user-info and query values redacted), the PromQL query and
//! Prometheus's own error text. Every request is bounded by the client's timeout.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use super::buckets::{ScenarioData, Slo};
use super::stats::binned::{Histogram, MAX_COUNT};
use super::Metric;
use crate::sanitize::redact_url;

/// The labels of `llm_probe_endpoint_info` besides `target` that make up the endpoint identity
/// (the daemon's `EndpointLabels` in `src/exporter/metrics/identity.rs`); labels Prometheus adds (`job`,
/// `instance`, …) are not part of it, so replicas that see the same backend agree.
pub const IDENTITY_LABELS: [&str; 5] = [
    "model",
    "response_model",
    "system_fingerprint",
    "server",
    "server_version",
];

/// How far before a window's start the last sample of a counter is looked for, as its baseline
/// (Prometheus's default lookback delta).
pub const BASELINE_LOOKBACK_SECONDS: f64 = 300.0;

/// The daemon's classic histogram behind a compared metric (`_bucket` series), or `None` for
/// ITL: its histogram counts every gap between tokens, not probes, and the gaps of one probe
/// are not independent observations, so a U test on them would overstate the certainty.
pub fn histogram_name(metric: Metric) -> Option<&'static str> {
    match metric {
        Metric::Ttft => Some("llm_probe_time_to_first_token_seconds"),
        Metric::TimeToFirstOutputToken => Some("llm_probe_time_to_first_output_token_seconds"),
        Metric::Tpot => Some("llm_probe_time_per_output_token_seconds"),
        Metric::Itl => None,
        Metric::E2e => Some("llm_probe_request_duration_seconds"),
        Metric::OutputTokensPerSecond => Some("llm_probe_output_tokens_per_second"),
    }
}

/// Probes finished, per (target, model, scenario).
pub const PROBES_TOTAL: &str = "llm_probe_probes_total";
/// Failed probes, per (target, model, scenario, reason).
pub const FAILURES_TOTAL: &str = "llm_probe_probe_failures_total";
/// The endpoint identity, value 1 (a new label set marks a change).
pub const ENDPOINT_INFO: &str = "llm_probe_endpoint_info";

/// Why Prometheus could not answer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `--prometheus.url` is not an http(s) URL.
    #[error("--prometheus.url {url:?} is not an http:// or https:// URL ({reason}); give e.g. http://prometheus:9090")]
    BadUrl {
        /// The URL, redacted.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// A query failed: transport, HTTP status, Prometheus's error, or an unexpected answer.
    #[error("Prometheus at {url}: query {query:?} failed: {reason}")]
    Query {
        /// The URL, redacted.
        url: String,
        /// The PromQL query.
        query: String,
        /// What went wrong, with Prometheus's error text when it gave one.
        reason: String,
    },
}

/// A client of one Prometheus server's HTTP API (its debug output shows the URL redacted).
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: url::Url,
    shown: String,
    /// The credentials every request carries ([`credentials`]): redacted from what a server
    /// echoes back.
    secrets: Vec<String>,
}

/// One series of a range-selector query: its labels and raw samples `(unix seconds, value)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Labels, `__name__` included when Prometheus returns it.
    pub labels: BTreeMap<String, String>,
    /// Samples in time order.
    pub samples: Vec<(f64, f64)>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("url", &self.shown).finish()
    }
}

impl Client {
    /// A client of the Prometheus at `url` (its root, e.g. `http://prometheus:9090`, or a path
    /// prefix behind a proxy; user-info becomes basic auth) whose every request gives up after
    /// `timeout`. Errors: `url` is not an http(s) URL.
    pub fn new(url: &str, timeout: Duration) -> Result<Client, Error> {
        let shown = redact_url(url);
        let bad = |reason: String| Error::BadUrl {
            url: shown.clone(),
            reason,
        };
        let mut base = url::Url::parse(url.trim()).map_err(|e| bad(e.to_string()))?;
        if !matches!(base.scheme(), "http" | "https") || base.host().is_none() {
            return Err(bad("no http(s) scheme and host".into()));
        }
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|e| bad(e.to_string()))?;
        let secrets = credentials(&base);
        Ok(Client {
            http,
            base,
            shown,
            secrets,
        })
    }

    /// The URL as messages show it (redacted).
    pub fn shown_url(&self) -> &str {
        &self.shown
    }

    /// Text from the server as a message shows it: its first [`EXCERPT_CHARS`] characters (`…`
    /// when cut), the request's credentials and URLs redacted, terminal-safe.
    fn excerpt(&self, text: &str) -> String {
        let mut cut: String = text.chars().take(EXCERPT_CHARS).collect();
        if cut.len() < text.len() {
            cut.push('…');
        }
        crate::sanitize::redact_secrets(&mut cut, self.secrets.iter().map(String::as_str));
        crate::sanitize::for_message(&cut)
    }

    fn error(&self, query: &str, reason: impl Into<String>) -> Error {
        Error::Query {
            url: self.shown.clone(),
            query: query.to_string(),
            reason: reason.into(),
        }
    }

    /// The `data` of `/api/v1/query?query=…&time=at`. Errors: transport, a non-JSON answer,
    /// `"status": "error"` (its `errorType` and `error`).
    async fn query(&self, query: &str, at: f64) -> Result<Value, Error> {
        let mut endpoint = self
            .base
            .join("api/v1/query")
            .expect("a relative path joins");
        // The user's own query parameters (if any) stay; ours are added.
        endpoint.set_query(self.base.query());
        endpoint
            .query_pairs_mut()
            .append_pair("query", query)
            .append_pair("time", &format!("{at:.3}"));
        let response = self
            .http
            .get(endpoint)
            .send()
            .await
            .map_err(|e| self.error(query, transport_reason(e)))?;
        let status = response.status();
        let too_large = || {
            self.error(
                query,
                format!(
                    "HTTP {status}, and the answer is larger than {} MiB (a server sending without end?); narrow the windows or check --prometheus.url",
                    MAX_ANSWER_BYTES >> 20
                ),
            )
        };
        if response
            .content_length()
            .is_some_and(|n| n > MAX_ANSWER_BYTES as u64)
        {
            return Err(too_large());
        }
        // Read chunk by chunk up to the cap: a body without end must not be read whole.
        let mut response = response;
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| self.error(query, transport_reason(e)))?
        {
            if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        let doc: Value = match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(_) => {
                return Err(self.error(
                    query,
                    format!(
                        "HTTP {status}, and the answer is not the Prometheus API's JSON: {:?}; is \
                         --prometheus.url the Prometheus server's root?",
                        self.excerpt(&String::from_utf8_lossy(&body))
                    ),
                ));
            }
        };
        if doc["status"] != "success" {
            let kind = doc["errorType"].as_str().unwrap_or("unknown");
            let text = doc["error"].as_str().unwrap_or("no error text");
            return Err(self.error(
                query,
                format!(
                    "HTTP {status}, Prometheus says {}: {}",
                    self.excerpt(kind),
                    self.excerpt(text)
                ),
            ));
        }
        Ok(doc["data"].clone())
    }

    /// The raw samples of `selector` over `(at − range, at]` (a range-selector query at `at`).
    pub async fn samples(&self, selector: &str, range: f64, at: f64) -> Result<Vec<Series>, Error> {
        let query = format!("{selector}[{}ms]", (range * 1000.0).ceil().max(1.0) as u64);
        let data = self.query(&query, at).await?;
        let shape = |what: &str| self.error(&query, format!("unexpected answer: {what}"));
        if data["resultType"] != "matrix" {
            return Err(shape("resultType is not matrix"));
        }
        let Some(result) = data["result"].as_array() else {
            return Err(shape("no result list"));
        };
        let series: Vec<Series> = result
            .iter()
            .map(|s| {
                Ok(Series {
                    labels: labels(&s["metric"]),
                    samples: s["values"]
                        .as_array()
                        .ok_or_else(|| shape("a series without values"))?
                        .iter()
                        .map(|p| sample(p).ok_or_else(|| shape("a malformed sample")))
                        .collect::<Result<_, _>>()?,
                })
            })
            .collect::<Result<_, Error>>()?;
        // A counter's samples read out of order or twice look like resets and multiply the
        // counts ([`increase`]); Prometheus never sends them so.
        for s in &series {
            if let Some(w) = s.samples.windows(2).find(|w| w[1].0 <= w[0].0) {
                return Err(shape(&format!(
                    "the samples of a series are not in time order (t = {} after t = {}): a proxy or federation between llm-probe and Prometheus is merging answers; query Prometheus itself",
                    w[1].0, w[0].0
                )));
            }
        }
        if let Some(label) = duplicated(&series) {
            return Err(self.error(
                &query,
                match label {
                    Some(l) => format!("the same series comes twice, differing only by the label {l:?}: an HA pair of Prometheus servers queried without deduplication would double every count; query a deduplicating endpoint (e.g. a Thanos Querier with --query.replica-label={l}) or one of the pair"),
                    None => "the same series comes twice (identical labels): every count would double; query Prometheus itself".into(),
                },
            ));
        }
        Ok(series)
    }

    /// The single value of the instant query `query` at `at` (`None`: an empty result).
    pub async fn scalar(&self, query: &str, at: f64) -> Result<Option<f64>, Error> {
        let data = self.query(query, at).await?;
        match data["result"].as_array().and_then(|r| r.first()) {
            None => Ok(None),
            Some(s) => sample(&s["value"])
                .map(|(_, v)| Some(v))
                .ok_or_else(|| self.error(query, "unexpected answer: a malformed sample")),
        }
    }
}

/// The credentials a request to `base` carries, in the forms a server may echo them: the
/// URL's basic auth (the password as written and decoded, `user:password`, and its base64 as
/// sent in `Authorization`), its query values, and the credentials of the environment's proxy
/// for it ([`crate::probe::proxy_secrets`]).
fn credentials(base: &url::Url) -> Vec<String> {
    use base64::Engine;
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8_lossy()
            .into_owned()
    };
    let mut out = crate::probe::proxy_secrets(base);
    if let Some(password) = base.password() {
        let pair = format!("{}:{}", decode(base.username()), decode(password));
        out.push(base64::engine::general_purpose::STANDARD.encode(&pair));
        out.push(password.to_string());
        out.push(decode(password));
        out.push(pair);
    }
    out.extend(base.query_pairs().map(|(_, v)| v.into_owned()));
    out
}

/// Labels by which HA pairs of Prometheus servers (and Thanos, Cortex and Mimir setups) tell
/// their replicas apart: series differing only in these are one exporter's series seen twice.
/// Not `replica`, which Thanos' examples use too: it is llm-probe's own label of a model
/// server's replica (docs/metrics.md, "The `replica` label").
pub const REPLICA_LABELS: [&str; 4] = [
    "prometheus_replica",
    "__replica__",
    "rule_replica",
    "prometheus",
];

/// Whether two of `series` are the same series twice: `Some(Some(label))` when they differ
/// only in the replica label `label` ([`REPLICA_LABELS`]), `Some(None)` when their labels are
/// identical, `None` when every series is distinct.
fn duplicated(series: &[Series]) -> Option<Option<&'static str>> {
    let mut seen: std::collections::HashMap<BTreeMap<&str, &str>, &Series> =
        std::collections::HashMap::new();
    for s in series {
        let key: BTreeMap<&str, &str> = s
            .labels
            .iter()
            .filter(|(k, _)| !REPLICA_LABELS.contains(&k.as_str()))
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        if let Some(other) = seen.insert(key, s) {
            return Some(
                REPLICA_LABELS
                    .into_iter()
                    .find(|l| s.labels.get(*l) != other.labels.get(*l)),
            );
        }
    }
    None
}

/// The largest answer read from Prometheus (256 MiB): about a day of 15 s samples of every
/// bucket of a few hundred series; a server sending more (or without end) is cut off.
pub const MAX_ANSWER_BYTES: usize = 256 << 20;

/// How much of a server's text a message shows.
const EXCERPT_CHARS: usize = 200;

/// A transport error as words, without reqwest's copy of the URL: timeout, connect failure
/// and the cause chain (e.g. "connection refused").
fn transport_reason(e: reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "cannot connect"
    } else {
        "request failed"
    };
    let mut causes = Vec::new();
    let e = e.without_url();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        causes.push(s.to_string());
        source = s.source();
    }
    let detail = if causes.is_empty() {
        e.to_string()
    } else {
        causes.join(": ")
    };
    crate::sanitize::for_message(&format!("{kind} ({detail})"))
}

fn labels(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .map(|o| {
            o.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// `[unix seconds, "value"]` → `(t, v)`.
fn sample(v: &Value) -> Option<(f64, f64)> {
    let t = v.get(0)?.as_f64()?;
    let value = v.get(1)?.as_str()?.parse::<f64>().ok()?;
    Some((t, value))
}

/// A PromQL string literal: `"` and `\` escaped, control characters as escapes.
fn literal(value: &str) -> String {
    serde_json::to_string(value).expect("a string serializes")
}

/// The selector `metric{target="…"[,scenario="…"]}`, values escaped.
pub fn selector(metric: &str, target: &str, scenario: Option<&str>) -> String {
    selector_of(metric, target, scenario, None)
}

/// [`selector`], and when `replicas` is given only their series
/// (`replica=~"a|b"`, each label matched exactly).
pub fn selector_of(
    metric: &str,
    target: &str,
    scenario: Option<&str>,
    replicas: Option<&[String]>,
) -> String {
    let mut matchers = vec![format!("target={}", literal(target))];
    if let Some(s) = scenario {
        matchers.push(format!("scenario={}", literal(s)));
    }
    if let Some(r) = replicas {
        let alternatives: Vec<String> = r.iter().map(|r| regex_escape(r)).collect();
        matchers.push(format!("replica=~{}", literal(&alternatives.join("|"))));
    }
    format!("{metric}{{{}}}", matchers.join(","))
}

/// `text` as an RE2 regular expression matching exactly it (every metacharacter escaped).
fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if r"\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// How much a counter rose over `(start, end]` from its raw samples (time order): the baseline
/// is its last sample at or before `start` (else its first sample in the window: what happened
/// before that is not known), and each later rise adds up; a fall is a counter reset (the
/// process restarted), after which the new value counts in full, as in Prometheus's
/// `increase()` — without its extrapolation. `None` when no sample lies in `(start, end]`.
pub fn increase(samples: &[(f64, f64)], start: f64, end: f64) -> Option<f64> {
    let in_window: Vec<f64> = samples
        .iter()
        .filter(|(t, _)| *t > start && *t <= end)
        .map(|&(_, v)| v)
        .collect();
    let first = *in_window.first()?;
    let baseline = samples
        .iter()
        .rev()
        .find(|(t, _)| *t <= start)
        .map(|&(_, v)| v);
    let (mut previous, mut total) = match baseline {
        Some(b) => (b, 0.0),
        None => (first, 0.0),
    };
    for &v in &in_window {
        total += if v >= previous { v - previous } else { v };
        previous = v;
    }
    Some(total)
}

/// Sum over series of [`increase`], grouped by `key` (series without the key's labels, or
/// without a sample in the window, are left out).
fn increases_by<K: Ord>(
    series: &[Series],
    start: f64,
    end: f64,
    key: impl Fn(&Series) -> Option<K>,
) -> BTreeMap<K, f64> {
    let mut out = BTreeMap::new();
    for s in series {
        if let (Some(k), Some(inc)) = (key(s), increase(&s.samples, start, end)) {
            *out.entry(k).or_insert(0.0) += inc;
        }
    }
    out
}

/// The scenario label of a series.
fn scenario_of(s: &Series) -> Option<String> {
    s.labels.get("scenario").cloned()
}

/// One window's data from Prometheus, per scenario of the target.
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    /// Start, Unix seconds (exclusive).
    pub start: f64,
    /// End, Unix seconds (inclusive).
    pub end: f64,
    /// Per scenario name: the bucket counts of each histogram and the probe counts.
    pub scenarios: BTreeMap<String, ScenarioData>,
}

/// The bucket counts over `(start, end]` of every compared histogram ([`histogram_name`]) of
/// `target` (one `scenario`, or each of them), summed over the series' other labels (model,
/// instance), and the probes finished and failed: reusable by anything that needs a window's
/// distributions (e.g. a baseline taken from Prometheus).
///
/// Shape: [`Window::scenarios`] maps each scenario with any data in the window to its
/// [`ScenarioData`]: `histograms` in [`Metric::ALL`] order (metrics without buckets left out),
/// each a [`Histogram`] of whole observations (see [`increase`]); `probes` and `failures` from
/// `llm_probe_probes_total` and `llm_probe_probe_failures_total`.
///
/// Errors: any query fails ([`Error::Query`]), or a histogram's buckets are malformed (no
/// `+Inf` bucket, …).
pub async fn fetch_window(
    client: &Client,
    target: &str,
    scenario: Option<&str>,
    start: f64,
    end: f64,
) -> Result<Window, Error> {
    fetch_window_of(client, target, scenario, None, start, end).await
}

/// [`fetch_window`] of only the replicas `replicas` of a target with `replicas:` (every
/// replica when `None`).
pub async fn fetch_window_of(
    client: &Client,
    target: &str,
    scenario: Option<&str>,
    replicas: Option<&[String]>,
    start: f64,
    end: f64,
) -> Result<Window, Error> {
    let range = end - start + BASELINE_LOOKBACK_SECONDS;
    let mut scenarios: BTreeMap<String, ScenarioData> = BTreeMap::new();
    for metric in Metric::ALL {
        let Some(name) = histogram_name(metric) else {
            continue;
        };
        let sel = selector_of(&format!("{name}_bucket"), target, scenario, replicas);
        let series = client.samples(&sel, range, end).await?;
        let by_le = increases_by(&series, start, end, |s| {
            let le = s.labels.get("le")?.parse::<f64>().ok()?;
            Some((scenario_of(s)?, OrderedBound(le)))
        });
        let mut per_scenario: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        // Latencies and rates are never negative: such a bound is not the daemon's.
        if let Some(((sc, le), _)) = by_le.iter().find(|((_, le), _)| le.0 < 0.0) {
            return Err(client.error(
                &sel,
                format!(
                    "scenario {sc:?} has a bucket with the negative bound le={}: not llm-probe's buckets (latencies and rates are not negative)",
                    le.0
                ),
            ));
        }
        for ((sc, le), count) in by_le {
            per_scenario.entry(sc).or_default().push((le.0, count));
        }
        for (sc, buckets) in per_scenario {
            let h = Histogram::from_cumulative(&buckets).map_err(|e| {
                client.error(
                    &sel,
                    format!("the buckets of scenario {sc:?} are malformed: {e}"),
                )
            })?;
            scenarios
                .entry(sc)
                .or_default()
                .histograms
                .push((metric, h));
        }
    }
    for (name, failed) in [(PROBES_TOTAL, false), (FAILURES_TOTAL, true)] {
        let sel = selector_of(name, target, scenario, replicas);
        let series = client.samples(&sel, range, end).await?;
        for (sc, count) in increases_by(&series, start, end, scenario_of) {
            if !(0.0..=MAX_COUNT).contains(&count) {
                return Err(client.error(
                    &sel,
                    format!(
                        "scenario {sc:?} counts {count} probes, not a number of probes (0 to 2^53)"
                    ),
                ));
            }
            let d = scenarios.entry(sc).or_default();
            let count = count.round() as u64;
            if failed {
                d.failures = count;
            } else {
                d.probes = count;
            }
        }
    }
    // Each compared histogram is observed at most once per probe (ITL, once per gap, is not
    // compared): more observations than probes (or observations with no probe counted) are
    // not one exporter's counters.
    for (sc, d) in &scenarios {
        if let Some((metric, h)) = d.histograms.iter().find(|(_, h)| h.total() > d.probes) {
            return Err(client.error(
                &selector_of(PROBES_TOTAL, target, scenario, replicas),
                format!(
                    "scenario {sc:?} has {} observations of {} but {} probes in ({start}, {end}]: each probe is observed at most once, so the counters are not one exporter's (a missing or relabelled {PROBES_TOTAL}?)",
                    h.total(),
                    histogram_name(*metric).unwrap_or("a histogram"),
                    d.probes
                ),
            ));
        }
    }
    if let Some((sc, d)) = scenarios.iter().find(|(_, d)| d.failures > d.probes) {
        return Err(client.error(
            &selector_of(FAILURES_TOTAL, target, scenario, replicas),
            format!(
                "scenario {sc:?} counts {} failed probes of {} probes in ({start}, {end}]: more failed than finished, the counters are not one exporter's",
                d.failures, d.probes
            ),
        ));
    }
    Ok(Window {
        start,
        end,
        scenarios,
    })
}

/// A bucket bound as an ordered map key (bounds are never NaN: such series are left out).
#[derive(Debug, Clone, Copy, PartialEq)]
struct OrderedBound(f64);
impl Eq for OrderedBound {}
impl PartialOrd for OrderedBound {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for OrderedBound {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// The target's SLO gauges at `at` (`llm_probe_slo_time_to_first_token_seconds`,
/// `llm_probe_slo_output_tokens_per_second`; the largest when several series exist). A value
/// that is not a positive finite number is no objective (`None`).
pub async fn fetch_slo(client: &Client, target: &str, at: f64) -> Result<Slo, Error> {
    let q = |name: &str| format!("max({})", selector(name, target, None));
    // The daemon's objectives are configured durations and rates: a microsecond to a day, a
    // millionth to a billion tokens/s. Anything else (1e-300 s) is no objective.
    let within = |lo: f64, hi: f64| move |v: Option<f64>| v.filter(|v| (lo..=hi).contains(v));
    let (ttft_objective, rate_objective) = (within(1e-6, 86_400.0), within(1e-6, 1e9));
    Ok(Slo {
        ttft: ttft_objective(
            client
                .scalar(&q("llm_probe_slo_time_to_first_token_seconds"), at)
                .await?,
        ),
        tokens_per_second: rate_objective(
            client
                .scalar(&q("llm_probe_slo_output_tokens_per_second"), at)
                .await?,
        ),
    })
}

/// An endpoint identity: the [`IDENTITY_LABELS`] that are set, in that order.
pub type Identity = Vec<(String, String)>;

/// The last change of a target's endpoint identity as Prometheus saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The first sample of the previous label set's last run (after any other set's sample
    /// before it), Unix seconds: the earlier change, where a BEFORE window must stop.
    pub old_since: f64,
    /// The last sample of the previous label set, Unix seconds: the change happened after it.
    pub last_old: f64,
    /// The first sample of the current label set after that, Unix seconds: the change happened
    /// at or before it (within one probe interval plus one scrape interval).
    pub first_new: f64,
    /// The previous label set.
    pub old: Identity,
    /// The current label set.
    pub new: Identity,
}

/// Why no change was found.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NoChange {
    /// No `llm_probe_endpoint_info` series of the target at all.
    #[error("no llm_probe_endpoint_info series of this target in the searched range")]
    NoSeries,
    /// One label set throughout.
    #[error("the endpoint identity did not change in the searched range (it was {} from {})", show_identity(.identity), crate::compare::window::rfc3339(*.since))]
    Unchanged {
        /// The only label set.
        identity: Identity,
        /// Its first sample in the range.
        since: f64,
    },
    /// Another label set was still seen at the same time as the newest (replicas disagree).
    #[error("two label sets are current at once ({} and {}): replicas see different backends (a rolling upgrade of a target with replicas:? compare them with --by-identity)", show_identity(.a), show_identity(.b))]
    Concurrent {
        /// One label set.
        a: Identity,
        /// The other.
        b: Identity,
    },
}

/// `k=v, …` for messages (label values pass through [`crate::sanitize::terminal_safe`] where
/// printed).
pub fn show_identity(id: &Identity) -> String {
    if id.is_empty() {
        return "(no identity labels)".into();
    }
    id.iter()
        .map(|(k, v)| format!("{k}={v:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn identity_of(s: &Series) -> Identity {
    IDENTITY_LABELS
        .iter()
        .filter_map(|k| Some((k.to_string(), s.labels.get(*k)?.clone())))
        .filter(|(_, v)| !v.is_empty())
        .collect()
}

/// The last change in `series` (a target's `llm_probe_endpoint_info` samples): the newest label
/// set is the one seen last; the change lies between the last sample of any other label set and
/// the newest set's first sample after it. Pure.
pub fn change_in(series: &[Series]) -> Result<Change, NoChange> {
    let mut times: BTreeMap<Identity, Vec<f64>> = BTreeMap::new();
    for s in series {
        times
            .entry(identity_of(s))
            .or_default()
            .extend(s.samples.iter().map(|(t, _)| *t));
    }
    for t in times.values_mut() {
        t.sort_by(f64::total_cmp);
    }
    let last = |t: &Vec<f64>| t.last().copied().unwrap_or(f64::NEG_INFINITY);
    let Some((newest, newest_times)) = times
        .iter()
        .filter(|(_, t)| !t.is_empty())
        .max_by(|a, b| last(a.1).total_cmp(&last(b.1)))
    else {
        return Err(NoChange::NoSeries);
    };
    let Some((old, old_last)) = times
        .iter()
        .filter(|(id, t)| *id != newest && !t.is_empty())
        .map(|(id, t)| (id, last(t)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
    else {
        return Err(NoChange::Unchanged {
            identity: newest.clone(),
            since: newest_times[0],
        });
    };
    // The previous set's last run began after every other set's sample before its end.
    let prior = (times.iter())
        .filter(|(id, _)| *id != old)
        .flat_map(|(_, t)| t.iter().copied().filter(|&t| t < old_last))
        .fold(f64::NEG_INFINITY, f64::max);
    let old_since = (times[old].iter().copied())
        .find(|&t| t > prior)
        .unwrap_or(old_last);
    match newest_times.iter().find(|&&t| t > old_last) {
        Some(&first_new) if old_last < last(newest_times) => Ok(Change {
            old_since,
            last_old: old_last,
            first_new,
            old: old.clone(),
            new: newest.clone(),
        }),
        _ => Err(NoChange::Concurrent {
            a: newest.clone(),
            b: old.clone(),
        }),
    }
}

/// The endpoint identities with a sample in `(start, end]` among `series` (a target's
/// `llm_probe_endpoint_info` samples), each once, in label order. Pure.
pub fn identities_in(series: &[Series], start: f64, end: f64) -> Vec<Identity> {
    let seen: std::collections::BTreeSet<Identity> = series
        .iter()
        .filter(|s| s.samples.iter().any(|(t, _)| *t > start && *t <= end))
        .map(identity_of)
        .collect();
    seen.into_iter().collect()
}

/// The endpoint identities of `target` seen in `(start, end]` ([`identities_in`]).
pub async fn fetch_identities(
    client: &Client,
    target: &str,
    start: f64,
    end: f64,
) -> Result<Vec<Identity>, Error> {
    let series = client
        .samples(&selector(ENDPOINT_INFO, target, None), end - start, end)
        .await?;
    Ok(identities_in(&series, start, end))
}

/// The replicas of a `replicas:` target that run one endpoint identity.
#[derive(Debug, Clone, PartialEq)]
pub struct IdentityGroup {
    /// The identity.
    pub identity: Identity,
    /// Its replicas (`replica` labels), sorted.
    pub replicas: Vec<String>,
    /// Its first sample on any replica in the searched range, Unix seconds.
    pub first_seen: f64,
}

/// The replicas of a target grouped by what each ran last in `(start, end]` (its newest
/// `llm_probe_endpoint_info` sample there), oldest identity first (by its first sample in
/// `series`, on any replica). Series without a `replica` label are not replicas. Pure.
pub fn groups_by_identity(series: &[Series], start: f64, end: f64) -> Vec<IdentityGroup> {
    let mut first_seen: BTreeMap<Identity, f64> = BTreeMap::new();
    // replica -> (time of its newest sample in the window, identity)
    let mut latest: BTreeMap<&str, (f64, Identity)> = BTreeMap::new();
    for s in series {
        let Some(replica) = s.labels.get("replica").filter(|r| !r.is_empty()) else {
            continue;
        };
        let id = identity_of(s);
        if let Some(first) = s.samples.iter().map(|(t, _)| *t).reduce(f64::min) {
            let e = first_seen.entry(id.clone()).or_insert(first);
            *e = e.min(first);
        }
        let newest = s
            .samples
            .iter()
            .map(|(t, _)| *t)
            .filter(|t| *t > start && *t <= end)
            .reduce(f64::max);
        if let Some(t) = newest {
            let e = latest.entry(replica).or_insert((t, id.clone()));
            if t > e.0 {
                *e = (t, id);
            }
        }
    }
    let mut groups: BTreeMap<Identity, Vec<String>> = BTreeMap::new();
    for (replica, (_, id)) in latest {
        groups.entry(id).or_default().push(replica.to_string());
    }
    let mut out: Vec<IdentityGroup> = groups
        .into_iter()
        .map(|(identity, replicas)| IdentityGroup {
            first_seen: first_seen.get(&identity).copied().unwrap_or(start),
            identity,
            replicas,
        })
        .collect();
    out.sort_by(|a, b| a.first_seen.total_cmp(&b.first_seen));
    out
}

/// [`groups_by_identity`] of `target`'s replicas over `(at − window, at]`, identities first
/// seen over `lookback` before `at`.
pub async fn fetch_identity_groups(
    client: &Client,
    target: &str,
    window: f64,
    lookback: f64,
    at: f64,
) -> Result<Vec<IdentityGroup>, Error> {
    let series = client
        .samples(
            &selector(ENDPOINT_INFO, target, None),
            lookback.max(window),
            at,
        )
        .await?;
    Ok(groups_by_identity(&series, at - window, at))
}

/// The last change of `target`'s endpoint identity within `lookback` seconds before `at`.
/// Errors: the query fails (outer), or no change is found (inner, [`NoChange`]).
pub async fn find_change(
    client: &Client,
    target: &str,
    lookback: f64,
    at: f64,
) -> Result<Result<Change, NoChange>, Error> {
    let series = client
        .samples(&selector(ENDPOINT_INFO, target, None), lookback, at)
        .await?;
    Ok(change_in(&series))
}

#[cfg(test)]
mod tests;
