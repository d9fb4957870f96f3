//! The JSON report, schema `llm-probe.bench/v1` (documented field by field in docs/bench.md,
//! "The JSON report").

use serde_json::{json, Value};

use super::level::{Capacity, Criterion, LevelStats, Load, Verdict};
use super::record::RequestRecord;
use super::stats::Summary;
use super::Report;

/// The schema name and version.
pub const SCHEMA: &str = "llm-probe.bench/v1";

/// The whole report as JSON.
pub fn to_json(r: &Report) -> Value {
    let rfc3339 = |t| humantime::format_rfc3339_millis(t).to_string();
    json!({
        "schema": SCHEMA,
        "metadata": {
            "target": r.target.name,
            "model": r.target.model,
            "protocol": r.target.protocol.as_str(),
            "scenario": r.scenario.name,
            "max_tokens": r.scenario.max_tokens,
            "prefix_cache": r.scenario.prefix_cache.as_str(),
            "prompt_tokens": r.prompt_tokens,
            "endpoint": {
                "response_model": r.identity.response_model,
                "system_fingerprint": r.identity.system_fingerprint,
                "server": r.identity.server_header,
                "server_version": r.identity.server_version,
            },
            "llm_probe_version": env!("CARGO_PKG_VERSION"),
            "started": rfc3339(r.started),
            "ended": rfc3339(r.ended),
            "interrupted": r.interrupted,
            "stopped_on_slo_breach": r.stopped_on_breach,
            "config_digest": r.config_digest,
            "slo": {
                "ttft_p95_seconds": r.target.slo.ttft_p95.as_secs_f64(),
                "output_tokens_per_second_min": r.target.slo.output_tokens_per_second_min,
                "max_failure_ratio": r.plan.max_failure_ratio,
            },
            "plan": plan(r),
        },
        "levels": r.levels.iter().map(|(s, v)| level(s, v)).collect::<Vec<_>>(),
        "sla_capacity": capacity(&r.capacity),
        "requests": r.records.iter().map(|q| request(r, q)).collect::<Vec<_>>(),
    })
}

fn plan(r: &Report) -> Value {
    let p = &r.plan;
    json!({
        "duration_seconds": p.duration.map(|d| d.as_secs_f64()),
        "requests": p.requests,
        "warmup": match p.warmup {
            super::plan::Warmup::Requests(n) => json!({"requests": n}),
            super::plan::Warmup::Time(d) => json!({"seconds": d.as_secs_f64()}),
        },
        "pause_seconds": p.pause.as_secs_f64(),
        "seed": p.seed,
        "max_concurrency": p.max_concurrency,
        "max_requests": p.max_requests,
    })
}

fn load_fields(l: &Load) -> (Value, Value) {
    match *l {
        Load::Concurrency(c) => (json!(c), Value::Null),
        Load::Rate(x) => (Value::Null, json!(x)),
    }
}

fn summary(s: &Summary) -> Value {
    json!({
        "p50": s.p50, "p90": s.p90, "p95": s.p95, "p99": s.p99, "p5": s.p5,
        "mean": s.mean, "min": s.min, "max": s.max, "n": s.n,
        "p50_ci": s.p50_ci, "p95_ci": s.p95_ci, "p99_ci": s.p99_ci, "p5_ci": s.p5_ci,
    })
}

fn criteria(c: &[Criterion]) -> Value {
    json!(c)
}

fn level(s: &LevelStats, v: &Verdict) -> Value {
    let (concurrency, rate) = load_fields(&s.load);
    json!({
        "concurrency": concurrency,
        "rate": rate,
        "requests": s.requests,
        "ttft_seconds": summary(&s.ttft),
        "time_to_first_output_token_seconds": summary(&s.time_to_first_output_token),
        "tpot_seconds": summary(&s.tpot),
        "inter_token_latency_seconds": summary(&s.itl),
        "e2e_seconds": summary(&s.e2e),
        "output_tokens_per_second": summary(&s.output_tokens_per_second),
        "generator_lateness_seconds": summary(&s.lateness),
        "output_tokens": s.output_tokens,
        "wall_seconds": s.wall_seconds,
        "output_throughput_tokens_per_second": s.output_throughput,
        "request_throughput_per_second": s.request_throughput,
        "goodput_requests_per_second": s.goodput,
        "slo_attainment": s.slo_attainment,
        "meets_sla": v.broken_by.is_empty(),
        "broken_by": criteria(&v.broken_by),
        "straddles": criteria(&v.straddles),
    })
}

fn capacity(c: &Capacity) -> Value {
    let key = |l: &Option<Load>| l.as_ref().map(load_fields);
    let (cc, cr) = key(&c.capacity).unwrap_or((Value::Null, Value::Null));
    let broken_at = c.broken_at.as_ref().map(|l| {
        let (c, r) = load_fields(l);
        json!({"concurrency": c, "rate": r})
    });
    json!({
        "concurrency": cc,
        "rate": cr,
        "broken_at": broken_at,
        "broken_by": criteria(&c.broken_by),
        "straddles": c.straddles.iter().map(|(l, cs)| {
            let (c, r) = load_fields(l);
            json!({"concurrency": c, "rate": r, "criteria": criteria(cs)})
        }).collect::<Vec<_>>(),
    })
}

fn request(r: &Report, q: &RequestRecord) -> Value {
    let (concurrency, rate) = r
        .plan
        .levels
        .get(q.level)
        .map(load_fields)
        .unwrap_or((Value::Null, Value::Null));
    let mut v = json!({
        "level": q.level,
        "concurrency": concurrency,
        "rate": rate,
        "index": q.index,
        "warmup": q.warmup,
        "scheduled_seconds": q.scheduled.as_secs_f64(),
        "lateness_seconds": q.lateness.as_secs_f64(),
        "ended_seconds": q.ended.as_secs_f64(),
    });
    let extra = match &q.result {
        Ok(s) => json!({
            "ok": true,
            "ttft_seconds": s.ttft,
            "time_to_first_output_token_seconds": s.time_to_first_output_token,
            "tpot_seconds": s.tpot,
            "e2e_seconds": s.e2e,
            "output_tokens": s.output_tokens,
            "prompt_tokens": s.prompt_tokens,
            "server_output_tokens": s.server_output_tokens,
            "output_tokens_per_second": s.output_tokens_per_second,
            "inter_token_latency_seconds": s.inter_token_latencies,
        }),
        Err((reason, detail)) => json!({"ok": false, "reason": reason.as_str(), "detail": detail}),
    };
    if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    v
}
