//! The JSON API: `GET /api/v1/targets` (the exporter's identity, the count of pairs per state,
//! and one object per pair, worst first: SLO, state ([`super::state::judge`]), since when and
//! why, headline numbers) and `GET /api/v1/probes?target=&scenario=&since=&limit=&before=` (the
//! kept probes, newest first, a page at a time with a cursor). Times are RFC 3339 UTC;
//! durations are milliseconds (`_ms`).

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

/// `d` in milliseconds, as the nearest `f64` of its exact decimal (13,595 µs is `13.595`, not
/// the `13.594999999999999` of seconds × 1e3).
fn ms(d: Option<std::time::Duration>) -> Value {
    d.map(|d| d.as_nanos() as f64 / 1e6).into()
}

/// `v` as JSON with `<`, `>` and `&` written as `\u003c`, `\u003e`, `\u0026` (they occur only
/// inside strings), so that no name or detail reads as markup even where the answer is
/// embedded in a page or sniffed as HTML.
pub(super) fn respond(status: StatusCode, v: &Value) -> Response<Full<Bytes>> {
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

/// One pair as `/api/v1/targets` lists it: its state and numbers, and for a pool each
/// replica's (worst first).
fn pair(s: &Summary) -> Value {
    let mut v = numbers(s);
    v["replicas_not_listed"] = s.replicas_not_listed.into();
    v["replicas"] = s
        .replicas
        .iter()
        .map(|r| {
            let mut one = numbers(&r.summary);
            let m = one.as_object_mut().expect("an object");
            for pool_only in ["target", "scenario", "slo", "window_seconds"] {
                m.remove(pool_only);
            }
            m.insert("replica".into(), r.replica.clone().into());
            one
        })
        .collect();
    v
}

/// A pair's (or one replica's) state and numbers.
fn numbers(s: &Summary) -> Value {
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
        "replica": (!p.replica.is_empty()).then_some(&*p.replica),
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
        "trace_id": p.trace_id.map(|id| id.to_string()),
    })
}

/// `since`: RFC 3339 (`2026-11-30T12:00:00Z`) or Unix seconds; a time before 1970 is 1970 (no
/// probe is older).
fn parse_since(s: &str) -> Result<SystemTime, String> {
    if let Ok(secs) = s.parse::<f64>() {
        if (0.0..1e11).contains(&secs) {
            return Ok(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs_f64(secs));
        }
    }
    if let Ok(t) = humantime::parse_rfc3339_weak(s) {
        return Ok(t);
    }
    // humantime reads years from 1970 only: an earlier year is any time before every probe.
    let before_1970 = s
        .get(..4)
        .and_then(|y| y.parse::<u16>().ok())
        .is_some_and(|y| y < 1970)
        && humantime::parse_rfc3339_weak(&format!("1970{}", &s[4..])).is_ok();
    if before_1970 {
        return Ok(SystemTime::UNIX_EPOCH);
    }
    Err(format!(
        "since={:?} is neither RFC 3339 (e.g. 2026-11-30T12:00:00Z) nor Unix seconds",
        tame(s)
    ))
}

/// Probes `/api/v1/probes` answers when no `limit` is given.
pub const DEFAULT_PROBES_LIMIT: usize = 200;
/// The largest `limit` of `/api/v1/probes`: an answer is at most about 0.5 MB, however long
/// the history (the whole history was one 11 MB answer per request).
pub const MAX_PROBES_LIMIT: usize = 1000;

/// Nanoseconds since the Unix epoch: the page cursor (`next`, `before`).
fn cursor_of(t: SystemTime) -> String {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
        .to_string()
}

fn parse_cursor(s: &str) -> Result<SystemTime, String> {
    s.parse::<u64>()
        .map(|n| SystemTime::UNIX_EPOCH + std::time::Duration::from_nanos(n))
        .map_err(|_| {
            format!(
                "before={:?} is not a cursor; give the `next` of the previous answer",
                tame(s)
            )
        })
}

/// `GET /api/v1/probes?target=&scenario=&since=&limit=&before=`: every parameter optional; the
/// probes and the failures kept longer, merged, newest first, at most `limit` (default
/// [`DEFAULT_PROBES_LIMIT`], at most [`MAX_PROBES_LIMIT`]) of them. When more are kept the
/// answer's `next` is a cursor: `before=NEXT` gives the probes older than this page. Probes of
/// one instant are never split between pages.
pub(super) fn probes(state: &ExporterState, query: &str) -> Response<Full<Bytes>> {
    let params: Vec<(String, String)> = reqwest::Url::parse(&format!("http://x/?{query}"))
        .map(|u| u.query_pairs().into_owned().collect())
        .unwrap_or_default();
    let param = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    for (i, (k, _)) in params.iter().enumerate() {
        if !matches!(
            k.as_str(),
            "target" | "scenario" | "since" | "limit" | "before"
        ) {
            return error(format!(
                "unknown parameter {:?}: use target, scenario, since, limit and before",
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
    let before = match param("before").map(parse_cursor).transpose() {
        Ok(s) => s,
        Err(e) => return error(e),
    };
    let limit = match param("limit").map(|l| l.parse::<usize>()) {
        None => DEFAULT_PROBES_LIMIT,
        Some(Ok(l)) if (1..=MAX_PROBES_LIMIT).contains(&l) => l,
        Some(_) => {
            return error(format!(
                "limit={:?}: give a number of probes from 1 to {MAX_PROBES_LIMIT} (default {DEFAULT_PROBES_LIMIT}), and `before` for older pages",
                tame(param("limit").unwrap_or(""))
            ))
        }
    };
    let wanted = |t: SystemTime| since.is_none_or(|s| t >= s) && before.is_none_or(|b| t < b);
    let pairs: Vec<(String, String)> = state
        .history
        .pairs()
        .into_iter()
        .filter(|(t, s)| {
            param("target").is_none_or(|w| w == t) && param("scenario").is_none_or(|w| w == s)
        })
        .collect();
    // Each pair's failures older than every kept probe, then its kept probes, that `take`.
    let gather =
        |out: &mut Vec<RecentProbe>, t: &str, s: &str, take: &dyn Fn(SystemTime) -> bool| {
            state.history.with_pair(t, s, |recent, failures| {
                let first = recent.first().map(|p| p.started_at);
                let older_failures = failures
                    .iter()
                    .filter(|f| first.is_none_or(|first| f.started_at < first));
                for p in older_failures.chain(recent.iter()) {
                    if take(p.started_at) {
                        out.push((*p).clone());
                    }
                }
            })
        };
    let newest_first = |out: &mut Vec<RecentProbe>| {
        out.sort_by_key(|p| std::cmp::Reverse(p.started_at));
        out.truncate(limit + 1);
    };
    // The newest `limit + 1` (one more tells whether a page follows), gathered pair by pair
    // without copying the older rest: `out` is cut back whenever it doubles.
    let mut out: Vec<RecentProbe> = Vec::new();
    // Once `limit + 1` are held (sorted), nothing older than the last of them can be on the page.
    let mut floor = None;
    for (t, s) in &pairs {
        gather(&mut out, t, s, &|at| {
            wanted(at) && floor.is_none_or(|f| at >= f)
        });
        if out.len() > 2 * (limit + 1) {
            newest_first(&mut out);
            floor = out.get(limit).map(|p| p.started_at);
        }
    }
    newest_first(&mut out);
    let mut next = None;
    if out.len() > limit {
        // A page ends between two instants: the probes sharing the page's last instant go to
        // the next page, or, when they alone fill it, all of them are given here.
        let cut = out[limit].started_at;
        match out[..limit].iter().position(|p| p.started_at == cut) {
            Some(0) => {
                out.clear();
                for (t, s) in &pairs {
                    gather(&mut out, t, s, &|at| at == cut);
                }
            }
            Some(keep) => out.truncate(keep),
            None => out.truncate(limit),
        }
        next = out.last().map(|p| cursor_of(p.started_at));
    }
    let mut body = json!({ "probes": out.iter().map(probe).collect::<Vec<_>>() });
    if let Some(n) = next {
        body["next"] = n.into();
    }
    respond(StatusCode::OK, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Durations in the API are their exact milliseconds, with no binary noise.
    #[test]
    fn milliseconds_are_written_as_their_decimal() {
        use std::time::Duration;
        let shown = |d| serde_json::to_string(&ms(Some(d))).unwrap();
        assert_eq!(shown(Duration::from_micros(13_595)), "13.595");
        assert_eq!(shown(Duration::from_micros(200_123)), "200.123");
        assert_eq!(shown(Duration::from_secs(80 * 60)), "4800000.0");
        assert_eq!(ms(None), Value::Null);
    }

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
