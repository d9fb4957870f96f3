//! `GET /probe?target=NAME[&scenario=S][&debug=true][&format=json|html]`, blackbox style: runs
//! one probe of a configured (target, scenario) now and returns it as JSON (or, to a browser
//! or with `format=html`, as a readable page: [`super::status::probe_page`]); with
//! `debug=true` also its timeline (every token event's offset from `sent`) and the first 8 KiB
//! of the raw stream.
//!
//! Only targets in the configuration can be probed, by name: no URL is ever taken from the
//! request, so the endpoint is not an open proxy. At most [`super::DEBUG_PROBE_SLOTS`] run at
//! once, and at most one per target per [`DebugProbePolicy::min_interval`] (by default the
//! target's own interval: "probe now" never spends more than the schedule does); more get 429
//! with `Retry-After`. `--web.enable-debug-probe=false` switches the endpoint off. An unknown
//! target is answered without listing the configured ones. On-demand probes are logged and
//! shown on the status pages but not observed into the scheduled series (they would skew the
//! histograms' cadence).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, RETRY_AFTER};
use hyper::{Request, Response, StatusCode};

use super::{text, ExporterState};
use crate::probe::Limits;
use crate::report;

/// Raw bytes a debug probe keeps.
pub const RAW_EXCERPT_BYTES: usize = 8192;

/// Whether `/probe` may run probes, and how often.
#[derive(Debug, Clone)]
pub struct DebugProbePolicy {
    /// `false`: `/probe` answers 403 and the status pages show no "probe now" links.
    pub enabled: bool,
    /// At most one on-demand probe per target per this period; `None`: the target's interval.
    pub min_interval: Option<Duration>,
}

impl Default for DebugProbePolicy {
    fn default() -> Self {
        DebugProbePolicy {
            enabled: true,
            min_interval: None,
        }
    }
}

/// When each target's last on-demand probe started, and the period it was claimed for.
#[derive(Default)]
pub struct LastProbes(Mutex<HashMap<String, (Instant, Duration)>>);

impl LastProbes {
    /// Records a probe of `target` now, unless one started less than `period` ago: then how
    /// long until the next is allowed.
    fn claim(&self, target: &str, period: Duration) -> Result<(), Duration> {
        let mut last = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if let Some(wait) = last
            .get(target)
            // A period too long to add to an instant never ends.
            .and_then(|&(t, _)| {
                t.checked_add(period)
                    .map_or(Some(period), |end| end.checked_duration_since(now))
            })
            .filter(|w| !w.is_zero())
        {
            return Err(wait);
        }
        // Forget targets whose own period is over (each entry by the period it was claimed
        // for: pruning by the caller's period let a 1 s target erase a 1 h target's entry), so
        // that the map stays as small as the set of recently probed targets.
        last.retain(|_, (t, p)| now.duration_since(*t) < *p);
        last.insert(target.to_string(), (now, period));
        Ok(())
    }
}

/// 429 with `Retry-After: wait` (whole seconds, rounded up).
fn too_many(why: &str, wait: Duration) -> Response<Full<Bytes>> {
    let seconds = (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1);
    let mut r = text(
        StatusCode::TOO_MANY_REQUESTS,
        "text/plain",
        format!("{why}; try again in {seconds} s\n"),
    );
    r.headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from(seconds));
    r
}

/// A request value echoed in an error: at most 64 printable characters.
pub(super) fn tame(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(64).collect()
}

pub(super) async fn handle(
    state: &Arc<ExporterState>,
    req: &Request<Incoming>,
) -> Response<Full<Bytes>> {
    let query = req.uri().query().unwrap_or("");
    let params: Vec<(String, String)> = reqwest::Url::parse(&format!("http://x/?{query}"))
        .map(|u| u.query_pairs().into_owned().collect())
        .unwrap_or_default();
    let param = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    if !state.debug_probe.enabled {
        return text(
            StatusCode::FORBIDDEN,
            "text/plain",
            "on-demand probes are switched off (--web.enable-debug-probe=false)\n",
        );
    }
    let Some(target) = param("target") else {
        return text(
            StatusCode::BAD_REQUEST,
            "text/plain",
            "give a configured target: /probe?target=NAME[&scenario=S][&debug=true]\n",
        );
    };
    let debug = matches!(param("debug"), Some("true" | "1"));
    let prober = {
        let probers = state.probers.read().unwrap_or_else(|e| e.into_inner());
        match probers.get(target) {
            Some(p) => p.clone(),
            None => {
                return text(
                    StatusCode::NOT_FOUND,
                    "text/plain",
                    format!("target \"{}\" is not in the configuration; only configured targets can be probed, and the landing page (/) lists them\n", tame(target)),
                );
            }
        }
    };
    let scenarios = &prober.target().scenarios;
    let scenario = match param("scenario") {
        None => scenarios[0].clone(),
        Some(name) => match scenarios.iter().find(|s| s.name == name) {
            Some(s) => s.clone(),
            None => {
                let names: Vec<_> = scenarios.iter().map(|s| s.name.as_str()).collect();
                return text(
                    StatusCode::NOT_FOUND,
                    "text/plain",
                    format!(
                        "target \"{target}\" has no scenario \"{}\"; its scenarios: {}\n",
                        tame(name),
                        names.join(", ")
                    ),
                );
            }
        },
    };
    // Owned: the slot goes with the probe, which runs to its end even when the client gives
    // up (the cap counts probes in flight, not clients waiting).
    let Ok(slot) = state.debug_slots.clone().try_acquire_owned() else {
        // A running probe ends within its target's timeout.
        return too_many(
            "on-demand probes are already running",
            prober.target().timeout,
        );
    };
    let period = state
        .debug_probe
        .min_interval
        .unwrap_or(prober.target().interval);
    if let Err(wait) = state.debug_last.claim(target, period) {
        return too_many(
            &format!(
                "target \"{target}\" was probed on demand less than {} ago",
                humantime::format_duration(period)
            ),
            wait,
        );
    }
    let limits = Limits {
        capture_bytes: if debug { RAW_EXCERPT_BYTES } else { 0 },
        ..Limits::default()
    };
    // On the probes' runtime: the timing is taken where the scheduled probes take theirs, and
    // connections the probe opens are driven there (the client's pool is shared with them).
    // It is logged and kept in the history even when the client has gone, unless a reload
    // removed its pair meanwhile: the check and the push hold the configured targets' lock,
    // which a reload takes (to replace them) before it frees the removed pairs' history.
    let st = state.clone();
    let probe = async move {
        // No worker waits (`probe::coalesce`) while it runs: its page shows the response
        // head's own marks (`first_byte`, `headers`), which a late read of the head could
        // merge with the first token's arrival when that follows within the wait. On demand
        // and rate-limited, so the coalescing is off for a moment at most.
        let _exact = crate::probe::coalesce::urgent_if_on();
        let outcome = prober.with_limits(limits).probe(&scenario).await;
        drop(slot);
        outcome.log();
        let probers = st.probers.read().unwrap_or_else(|e| e.into_inner());
        // A pool's history holds its replicas' probes; an on-demand probe goes through
        // `base_url` (no replica), so it is shown on its page but not mixed into the pool's.
        let configured = probers.get(&*outcome.target).is_some_and(|p| {
            p.target().replicas.is_none()
                && p.target()
                    .scenarios
                    .iter()
                    .any(|s| *s.name == *outcome.scenario)
        });
        if configured {
            st.history.push(&outcome);
        }
        drop(probers);
        outcome
    };
    let outcome = match state.probe_runtime.get() {
        Some(rt) => match rt.spawn(probe).await {
            Ok(o) => o,
            Err(_) => {
                return text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "text/plain",
                    "the probe was stopped (the exporter is shutting down)\n",
                )
            }
        },
        None => probe.await,
    };
    let mut body = report::to_json(&outcome);
    if debug {
        body["timeline"] = report::timeline_json(&outcome);
        body["raw_excerpt"] = String::from_utf8_lossy(&outcome.observations.raw_excerpt)
            .into_owned()
            .into();
    }
    let json = report::json_text(&body, true);
    let accept = req
        .headers()
        .get(hyper::header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    if super::status::probe_page::wants_html(param("format"), accept) {
        // The page escapes the JSON as HTML itself.
        return super::status::probe_page::render(state, &body, &json);
    }
    text(StatusCode::OK, "application/json", without_markup(json))
}

/// JSON text with `<`, `>` and `&` (which occur only inside its strings) written as `\u003c`,
/// `\u003e` and `\u0026`, as the JSON API writes them: a server's text in a failure detail or
/// the raw excerpt never reads as markup where the answer is sniffed or embedded.
fn without_markup(json: String) -> String {
    json.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// probing a target with a short period must not erase another
    /// target's "one per period" entry (the map was pruned with the caller's period).
    #[test]
    fn a_short_period_does_not_erase_a_long_one() {
        let last = LastProbes::default();
        let hour = Duration::from_secs(3600);
        assert!(last.claim("expensive", hour).is_ok());
        std::thread::sleep(Duration::from_millis(30));
        assert!(last.claim("cheap", Duration::from_millis(10)).is_ok());
        std::thread::sleep(Duration::from_millis(30));
        assert!(last.claim("cheap", Duration::from_millis(10)).is_ok());
        let wait = last.claim("expensive", hour).unwrap_err();
        assert!(wait > Duration::from_secs(3500), "{wait:?}");
        // Entries whose own period is over are forgotten.
        assert_eq!(last.0.lock().unwrap().len(), 2);
    }

    #[test]
    fn answers_carry_no_markup_and_parse_back() {
        let hostile = "</script><b>\"x\" & y";
        let text = without_markup(report::json_text(
            &serde_json::json!({ "d": hostile }),
            true,
        ));
        assert!(!text.contains(['<', '>', '&']), "{text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["d"], hostile);
    }
}
