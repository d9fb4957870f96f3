//! The JSON API: `GET /api/v1/targets` (the exporter's identity, the count of pairs per state,
//! and one object per pair, worst first: SLO, state ([`super::state::judge`]), since when and
//! why, headline numbers)
//! and `GET /api/v1/probes?target=&scenario=&since=` (the kept probes, oldest first). Times
//! are RFC 3339 UTC; durations are milliseconds (`_ms`).

use std::time::SystemTime;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Response, StatusCode};
use serde_json::{json, Value};

use super::summary::Summary;
use super::{secured, summaries, tame, text, ExporterState};
use crate::history::RecentProbe;

fn time(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

fn ms(d: Option<std::time::Duration>) -> Value {
    d.map(|d| d.as_secs_f64() * 1e3).into()
}

/// `v` as JSON with `<`, `>` and `&` written as `\u003c`, `\u003e`, `\u0026` (they occur only
/// inside strings), so that no name or detail reads as markup even where the answer is
/// embedded in a page or sniffed as HTML.
fn respond(status: StatusCode, v: &Value) -> Response<Full<Bytes>> {
    let body = v
        .to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026");
    secured(text(status, "application/json", body + "\n"))
}

fn error(msg: String) -> Response<Full<Bytes>> {
    respond(StatusCode::BAD_REQUEST, &json!({ "error": msg }))
}

/// One pair as `/api/v1/targets` lists it.
fn pair(s: &Summary) -> Value {
    json!({
        "target": s.target,
        "scenario": s.scenario,
        "slo": {
            "ttft_p95_ms": s.slo_ms(),
            "output_tokens_per_second_min": s.slo.output_tokens_per_second_min,
        },
        "state": s.state.as_str(),
        "since": s.since.map(time),
        "reason": s.reason.as_ref().map(|(r, d)| json!({ "reason": r.as_str(), "detail": d })),
        "window_seconds": super::WINDOW.as_secs(),
        "window_probes": s.window_probes,
        "success_ratio": s.success_ratio,
        "ttft_p50_ms": s.ttft_p50_ms,
        "ttft_p95_ms": s.ttft_p95_ms,
        "output_tokens_per_second_p50": s.tokens_per_second_p50,
        "output_tokens_per_second_p5": s.tokens_per_second_p5,
        "last_probe_at": s.last_probe.map(time),
        "identity": s.identity,
        "identity_changes": s.identity_changes.iter().map(|c| json!({
            "at": time(c.at), "from": c.from, "to": c.to,
        })).collect::<Vec<_>>(),
        "kept_probes": s.kept_probes,
        "kept_failures": s.kept_failures,
    })
}

/// `GET /api/v1/targets`.
pub(super) fn targets(state: &ExporterState, now: SystemTime) -> Response<Full<Bytes>> {
    let limits = state.history.limits();
    let mut all = summaries(state, now, None);
    super::overview::worst_first(&mut all);
    let counts: serde_json::Map<String, Value> = super::overview::counts(&all)
        .into_iter()
        .map(|(s, n)| (s.as_str().to_string(), n.into()))
        .collect();
    let pairs: Vec<Value> = all.iter().map(pair).collect();
    let shard = state.shard.read().unwrap_or_else(|e| e.into_inner()).shard;
    respond(
        StatusCode::OK,
        &json!({
            "exporter": {
                "instance": state.identity.instance,
                "location": state.identity.location,
                "shard": { "index": shard.index, "count": shard.count },
            },
            "window_seconds": super::WINDOW.as_secs(),
            "counts": counts,
            "history": {
                "max_probes": limits.max_probes,
                "max_age_seconds": limits.max_age.as_secs(),
                "failure_retention": crate::history::FAILURE_RETENTION,
            },
            "reloads": state.history.reloads().into_iter().map(time).collect::<Vec<_>>(),
            "pairs": pairs,
        }),
    )
}

/// One probe as `/api/v1/probes` lists it.
pub(super) fn probe(p: &RecentProbe) -> Value {
    json!({
        "target": &*p.target,
        "scenario": &*p.scenario,
        "started_at": time(p.started_at),
        "ok": p.failure.is_none(),
        "ttft_ms": ms(p.ttft),
        "output_tokens_per_second": p.output_tokens_per_second,
        "tpot_ms": ms(p.tpot),
        "itl_p50_ms": ms(p.itl.map(|i| i.p50)),
        "itl_p95_ms": ms(p.itl.map(|i| i.p95)),
        "e2e_ms": ms(p.e2e),
        "output_tokens": p.output_tokens,
        "failure": p.failure.as_ref().map(|(r, d)| json!({ "reason": r.as_str(), "detail": d })),
        "identity": p.identity.as_deref(),
    })
}

/// `since`: RFC 3339 (`2026-11-30T12:00:00Z`) or Unix seconds.
fn parse_since(s: &str) -> Result<SystemTime, String> {
    if let Ok(secs) = s.parse::<f64>() {
        if (0.0..1e11).contains(&secs) {
            return Ok(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs_f64(secs));
        }
    }
    humantime::parse_rfc3339_weak(s).map_err(|_| {
        format!(
            "since={:?} is neither RFC 3339 (e.g. 2026-11-30T12:00:00Z) nor Unix seconds",
            tame(s)
        )
    })
}

/// `GET /api/v1/probes?target=&scenario=&since=`: every parameter optional; the probes and
/// the failures kept longer, merged, oldest first.
pub(super) fn probes(state: &ExporterState, query: &str) -> Response<Full<Bytes>> {
    let params: Vec<(String, String)> = reqwest::Url::parse(&format!("http://x/?{query}"))
        .map(|u| u.query_pairs().into_owned().collect())
        .unwrap_or_default();
    let param = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    for (i, (k, _)) in params.iter().enumerate() {
        if !matches!(k.as_str(), "target" | "scenario" | "since") {
            return error(format!(
                "unknown parameter {:?}: use target, scenario and since",
                tame(k)
            ));
        }
        if params[..i].iter().any(|(n, _)| n == k) {
            return error(format!("{k} is given twice: give each parameter once"));
        }
    }
    let since = match param("since").map(parse_since).transpose() {
        Ok(s) => s,
        Err(e) => return error(e),
    };
    let mut out: Vec<RecentProbe> = Vec::new();
    for (t, s) in state.history.pairs() {
        if param("target").is_some_and(|w| w != t) || param("scenario").is_some_and(|w| w != s) {
            continue;
        }
        let recent = state.history.probes(&t, &s);
        let first = recent.first().map(|p| p.started_at);
        // Failures older than every kept probe, then the kept probes.
        out.extend(
            state
                .history
                .pair_failures(&t, &s)
                .into_iter()
                .filter(|f| first.is_none_or(|first| f.started_at < first)),
        );
        out.extend(recent);
    }
    out.retain(|p| since.is_none_or(|s| p.started_at >= s));
    out.sort_by_key(|p| p.started_at);
    respond(
        StatusCode::OK,
        &json!({ "probes": out.iter().map(probe).collect::<Vec<_>>() }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_answers_carry_no_markup_and_parse_back_to_the_same_strings() {
        let hostile = "</script><b>\"x\" & 'y'\n";
        let r = respond(StatusCode::OK, &json!({ "detail": hostile }));
        let body = futures_body(r);
        assert!(
            !body.contains('<') && !body.contains('>') && !body.contains('&'),
            "{body}"
        );
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["detail"], hostile);
    }

    fn futures_body(r: Response<Full<Bytes>>) -> String {
        use http_body_util::BodyExt;
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let bytes = rt.block_on(r.into_body().collect()).unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[test]
    fn since_takes_rfc3339_or_unix_seconds() {
        let t = parse_since("1700000000").unwrap();
        assert_eq!(
            t,
            SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000)
        );
        assert_eq!(parse_since("2023-11-14T22:13:20Z").unwrap(), t);
        assert!(parse_since("-5").unwrap_err().contains("neither RFC 3339"));
    }
}
