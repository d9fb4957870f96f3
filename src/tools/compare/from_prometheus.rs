//! `llm-probe compare --prometheus.url URL --target T [--scenario S]` with `--before START/END
//! --after START/END` or `--around-change [--window D] [--settle D]`: the windows' histogram
//! bucket counts from Prometheus ([`super::prometheus`]), compared per scenario
//! ([`super::buckets`]) and printed (`super::buckets_report`).
//!
//! Around a change: the before window ends at the last sample of the previous
//! `llm_probe_endpoint_info` label set, the after window starts `settle` after the first sample
//! of the new one (warm-up, cache fill, autoscaling settle in), both `window` long (the after
//! window is cut at now, with a warning, when less time has passed).

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::buckets::{self, ScenarioComparison, Slo};
use super::prometheus::{self, Change, Client, Identity};
use super::window::{human, rfc3339, Range};
use super::{Options, Output};
use crate::logging::{stderr_line, stdout_text};
use crate::sanitize::terminal_safe;

/// Which windows to compare.
#[derive(Debug, Clone, PartialEq)]
pub enum Windows {
    /// `--before START/END --after START/END`.
    Given {
        /// BEFORE.
        before: Range,
        /// AFTER.
        after: Range,
    },
    /// `--by-identity`: one window (the last `window` seconds), the replicas of a `replicas:`
    /// target split by what they run: BEFORE the replicas of the identity seen first (within
    /// `lookback`), AFTER those of the newer one — a rolling upgrade half-way.
    ByIdentity {
        /// The window's length, seconds.
        window: f64,
        /// How far back an identity's first sample is looked for, seconds.
        lookback: f64,
    },
    /// `--around-change`: around the last change of the endpoint identity.
    AroundChange {
        /// Each window's length, seconds.
        window: f64,
        /// Skipped after the change, seconds.
        settle: f64,
        /// How far back the change is looked for, seconds.
        lookback: f64,
    },
}

/// What `compare --prometheus.url` was asked.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The Prometheus server's root URL.
    pub url: String,
    /// The target name (the `target` label).
    pub target: String,
    /// Only this scenario (else every scenario with probes in both windows).
    pub scenario: Option<String>,
    /// The windows.
    pub windows: Windows,
    /// TTFT objective, seconds, instead of the target's `llm_probe_slo_time_to_first_token_seconds`.
    pub slo: Option<f64>,
    /// Bound of every request to Prometheus.
    pub timeout: Duration,
}

/// The result: what was compared and how it came out.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowComparison {
    /// The Prometheus URL, redacted.
    pub url: String,
    /// The target.
    pub target: String,
    /// `--scenario`, if given.
    pub scenario: Option<String>,
    /// The change compared around (`--around-change`).
    pub change: Option<Change>,
    /// With `--before`/`--after`: the endpoint identities seen in each window; with
    /// `--by-identity`: the old and the new one.
    pub identities: Option<(Vec<Identity>, Vec<Identity>)>,
    /// With `--by-identity`: the replicas on each side (BEFORE: the old identity's).
    pub replicas: Option<(Vec<String>, Vec<String>)>,
    /// BEFORE `(start, end]`, Unix seconds.
    pub before: (f64, f64),
    /// AFTER `(start, end]`, Unix seconds.
    pub after: (f64, f64),
    /// The settle-in period skipped (`--around-change`), seconds.
    pub settle: Option<f64>,
    /// The objectives the shares were counted against.
    pub slo: Slo,
    /// The TTFT objective came from `--slo`.
    pub slo_from_flag: bool,
    /// One comparison per scenario with probes in both windows.
    pub scenarios: Vec<ScenarioComparison>,
    /// Scenarios with probes in only one window, described.
    pub not_compared: Vec<String>,
    /// Notes for the reader.
    pub warnings: Vec<String>,
    /// The options used.
    pub options: Options,
}

impl WindowComparison {
    /// Whether any row of any scenario is a regression (exit status 1).
    pub fn has_regression(&self) -> bool {
        self.scenarios
            .iter()
            .any(ScenarioComparison::has_regression)
    }
}

/// Why the comparison could not be made (exit status 2).
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// Prometheus could not answer.
    #[error(transparent)]
    Prometheus(#[from] prometheus::Error),
    /// Anything else: no change found, an empty window, a bad window.
    #[error("{0}")]
    Input(String),
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// `target "T" scenario "S"` (or `target "T"`), for messages.
pub(crate) fn describe(target: &str, scenario: Option<&str>) -> String {
    match scenario {
        Some(s) => format!("target {target:?} scenario {s:?}"),
        None => format!("target {target:?}"),
    }
}

/// The windows, the change they were placed around (if any) and warnings.
async fn place_windows(
    client: &Client,
    req: &Request,
    now: f64,
) -> Result<((f64, f64), (f64, f64), Option<Change>, Vec<String>), Failure> {
    match &req.windows {
        Windows::Given { before, after } => {
            let b = before
                .resolve(now)
                .map_err(|e| Failure::Input(format!("--before: {e}")))?;
            let a = after
                .resolve(now)
                .map_err(|e| Failure::Input(format!("--after: {e}")))?;
            let mut warnings = Vec::new();
            if b.1 > a.0 && a.1 > b.0 {
                warnings.push(
                    "the BEFORE and AFTER windows overlap: probes in both count on both sides"
                        .into(),
                );
            }
            Ok((b, a, None, warnings))
        }
        &Windows::ByIdentity { window, .. } => {
            Ok(((now - window, now), (now - window, now), None, Vec::new()))
        }
        &Windows::AroundChange {
            window,
            settle,
            lookback,
        } => {
            let change = prometheus::find_change(client, &req.target, lookback, now)
                .await?
                .map_err(|e| {
                    Failure::Input(format!(
                        "--around-change: {} in the last {} before {} ({}): {e}; widen \
                         --lookback, or give the windows with --before and --after",
                        describe(&req.target, None),
                        human(lookback),
                        rfc3339(now),
                        prometheus::ENDPOINT_INFO,
                    ))
                })?;
            // BEFORE holds the previous identity only: it stops at the change before it.
            let before_start = (change.last_old - window).max(change.old_since);
            let before = (before_start, change.last_old);
            let after_start = change.first_new + settle;
            if after_start >= now {
                return Err(Failure::Input(format!(
                    "the endpoint changed by {} and the settle-in period (--settle {}) lasts \
                     until {}: no AFTER window yet; wait, or shorten --settle",
                    rfc3339(change.first_new),
                    human(settle),
                    rfc3339(after_start)
                )));
            }
            let after_end = (after_start + window).min(now);
            let mut warnings = Vec::new();
            if before_start > change.last_old - window {
                warnings.push(format!(
                    "the BEFORE window is {} long, not --window {}: the previous identity was \
                     only seen from {} (an earlier change), and BEFORE holds it alone",
                    human(change.last_old - before_start),
                    human(window),
                    rfc3339(change.old_since)
                ));
            }
            if after_end < after_start + window {
                warnings.push(format!(
                    "the AFTER window is {} long, not --window {}: only that much time has \
                     passed since the change and the settle-in period",
                    human(after_end - after_start),
                    human(window)
                ));
            }
            Ok((before, (after_start, after_end), Some(change), warnings))
        }
    }
}

/// The old and the new identity of `target`'s replicas over the last `window` seconds.
/// Errors: Prometheus fails, no replica reports an identity, all run one, or more than two
/// identities run at once (which two to compare is then not clear).
async fn split_by_identity(
    client: &Client,
    target: &str,
    window: f64,
    lookback: f64,
    now: f64,
) -> Result<(prometheus::IdentityGroup, prometheus::IdentityGroup), Failure> {
    let groups = prometheus::fetch_identity_groups(client, target, window, lookback, now).await?;
    let shown = |g: &prometheus::IdentityGroup| {
        format!(
            "{} on {} replica{}",
            prometheus::show_identity(&g.identity),
            g.replicas.len(),
            if g.replicas.len() == 1 { "" } else { "s" }
        )
    };
    match <[prometheus::IdentityGroup; 2]>::try_from(groups) {
        Ok([old, new]) => Ok((old, new)),
        Err(groups) if groups.is_empty() => Err(Failure::Input(format!(
            "--by-identity: no replica of {} reported an identity ({} with a replica label)              in the last {}: is it a target with replicas:, and did its server reveal a              model, fingerprint or server header?",
            describe(target, None),
            prometheus::ENDPOINT_INFO,
            human(window)
        ))),
        Err(groups) if groups.len() == 1 => Err(Failure::Input(format!(
            "--by-identity: every replica of {} runs one identity in the last {} ({}):              nothing to compare; during a rolling upgrade old and new run side by side",
            describe(target, None),
            human(window),
            shown(&groups[0])
        ))),
        Err(groups) => Err(Failure::Input(format!(
            "--by-identity: the replicas of {} run {} identities in the last {} ({});              --by-identity compares two: shorten --window, or compare time windows with              --before/--after",
            describe(target, None),
            groups.len(),
            human(window),
            groups.iter().map(shown).collect::<Vec<_>>().join("; ")
        ))),
    }
}

/// "`window` (START to END) has no successful probes of `pair` in Prometheus at `url`", with
/// what to check. `url` is redacted ([`Client::shown_url`]).
pub(crate) fn no_probes(window: &str, (start, end): (f64, f64), pair: &str, url: &str) -> String {
    format!(
        "{window} ({} to {}) has no successful probes of {pair} in Prometheus at {url} (no \
         observations in {}_bucket): check --target and --scenario, the window, that Prometheus \
         scraped llm-probe then, and that the daemon exports classic buckets (not \
         --metrics.histograms native)",
        rfc3339(start),
        rfc3339(end),
        prometheus::histogram_name(super::Metric::Ttft).unwrap_or_default(),
    )
}

/// Fetch, compare and return the comparison. Errors: Prometheus fails, no change is found
/// (`--around-change`), a window is invalid, or a window has no probes of the target (and
/// scenario).
pub async fn compare(req: &Request, options: &Options) -> Result<WindowComparison, Failure> {
    let client = Client::new(&req.url, req.timeout)?;
    let now = now();
    let (before, after, change, mut warnings) = place_windows(&client, req, now).await?;
    let scenario = req.scenario.as_deref();
    let split = match req.windows {
        Windows::ByIdentity { window, lookback } => {
            Some(split_by_identity(&client, &req.target, window, lookback, now).await?)
        }
        _ => None,
    };
    let (rb, ra) = match &split {
        Some((old, new)) => (Some(&old.replicas[..]), Some(&new.replicas[..])),
        None => (None, None),
    };
    let wb =
        prometheus::fetch_window_of(&client, &req.target, scenario, rb, before.0, before.1).await?;
    let wa =
        prometheus::fetch_window_of(&client, &req.target, scenario, ra, after.0, after.1).await?;
    let mut slo = prometheus::fetch_slo(&client, &req.target, after.1).await?;
    if req.slo.is_some() {
        slo.ttft = req.slo;
    }
    for (name, w, (start, end)) in [("BEFORE", &wb, before), ("AFTER", &wa, after)] {
        if w.scenarios.values().all(|d| d.successful_probes() == 0) {
            return Err(Failure::Input(no_probes(
                &format!("the {name} window"),
                (start, end),
                &describe(&req.target, scenario),
                client.shown_url(),
            )));
        }
    }
    let mut scenarios = Vec::new();
    let mut not_compared = Vec::new();
    let names: std::collections::BTreeSet<&String> =
        wb.scenarios.keys().chain(wa.scenarios.keys()).collect();
    for name in names {
        let (b, a) = (wb.scenarios.get(name), wa.scenarios.get(name));
        let probes = |d: Option<&buckets::ScenarioData>| d.map_or(0, |d| d.successful_probes());
        if probes(b) == 0 || probes(a) == 0 {
            not_compared.push(format!(
                "scenario {name:?}: {} successful probes BEFORE, {} AFTER",
                probes(b),
                probes(a)
            ));
            continue;
        }
        if let (Some(b), Some(a)) = (b, a) {
            scenarios.push(buckets::compare_scenario(name, b, a, &slo, options));
        }
    }
    if scenarios.is_empty() {
        return Err(Failure::Input(format!(
            "no scenario of {} has successful probes in both windows ({}): nothing to compare",
            describe(&req.target, scenario),
            not_compared.join("; ")
        )));
    }
    let identities = match (&change, &split) {
        (_, Some((old, new))) => Some((vec![old.identity.clone()], vec![new.identity.clone()])),
        (Some(_), None) => None,
        (None, None) => {
            let b = prometheus::fetch_identities(&client, &req.target, before.0, before.1).await?;
            let a = prometheus::fetch_identities(&client, &req.target, after.0, after.1).await?;
            if !b.is_empty() && b == a {
                warnings.push(
                    "the endpoint identity (llm_probe_endpoint_info: model, response model, \
                     fingerprint, server, version) is the same in both windows: is AFTER really \
                     after the upgrade?"
                        .into(),
                );
            }
            Some((b, a))
        }
    };
    if slo.ttft.is_none() {
        warnings.push(format!(
            "no TTFT objective for {} (no llm_probe_slo_time_to_first_token_seconds series): \
             give --slo to compare the share of probes above it",
            describe(&req.target, None)
        ));
    }
    Ok(WindowComparison {
        url: client.shown_url().to_string(),
        target: req.target.clone(),
        scenario: req.scenario.clone(),
        change,
        identities,
        replicas: split.map(|(old, new)| (old.replicas, new.replicas)),
        before,
        after,
        settle: match req.windows {
            Windows::AroundChange { settle, .. } => Some(settle),
            Windows::Given { .. } | Windows::ByIdentity { .. } => None,
        },
        slo,
        slo_from_flag: req.slo.is_some(),
        scenarios,
        not_compared,
        warnings,
        options: options.clone(),
    })
}

/// `llm-probe compare --prometheus.url …`: compare and print in `output`'s format to stdout
/// (warnings also to stderr with JSON). Exit status: 0 without a regression, 1 with any, 2 when
/// Prometheus cannot answer, no change is found or a window has no probes.
pub async fn run(req: &Request, options: &Options, output: Output) -> ExitCode {
    let c = match compare(req, options).await {
        Ok(c) => c,
        Err(e) => {
            stderr_line(format_args!(
                "llm-probe compare: {}",
                terminal_safe(&e.to_string())
            ));
            return ExitCode::from(2);
        }
    };
    match output {
        Output::Text => stdout_text(super::buckets_report::to_text(&c)),
        Output::Markdown => stdout_text(super::buckets_report::to_markdown(&c)),
        Output::Json => {
            for w in &c.warnings {
                stderr_line(format_args!(
                    "llm-probe compare: warning: {}",
                    terminal_safe(w)
                ));
            }
            stdout_text(crate::report::json_text(
                &super::buckets_report::to_json(&c),
                true,
            ))
        }
    }
    if c.has_regression() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
