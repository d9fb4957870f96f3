//! How `probe-once` prints an outcome: a JSON object per probe (unknown values are `null`,
//! never 0) or a short text block. Both are safe to print to a terminal: every string a server
//! sent is escaped ([`crate::sanitize::terminal_safe`] in text, `\uXXXX` in JSON).

use serde_json::{json, Value};

use crate::measure::ProbeOutcome;
use crate::sanitize::{is_unsafe_char, terminal_safe};

/// The JSON object of one probe. Fields: `target`, `scenario`, `model`, `success`,
/// `failure_reason`, `failure_detail`, `http_status`, `ttft_seconds`,
/// `time_to_first_output_token_seconds`, `tpot_seconds`, `output_tokens_per_second`,
/// `e2e_seconds`, `output_tokens`, `token_count_source` (`usage` | `server` | `events`),
/// `prompt_tokens`, `cached_prompt_tokens`, `token_events`, `inter_token_latencies_seconds`,
/// `response_model`, `system_fingerprint`, `server_header`, `server_version`,
/// `server_prompt_seconds`, `server_predicted_tokens`, `server_latency_seconds` (Bedrock's own
/// latency of the call), `server_prefill_seconds` and
/// `ttft_overhead_seconds` (successful probes whose server reports its prefill time),
/// `server_queue_seconds` (vLLM per-request metrics, TGI `x-queue-time`), `ttft_split` (a
/// successful probe's TTFT split, [`crate::measure::TtftSplit::to_json`]: `source` and seconds
/// per component, or `source: null` and a `note` when the server reported nothing),
/// `traceparent`, `trace_id` and `request_id` (the W3C trace context and `x-request-id` the
/// request carried, `null` when none was sent),
/// `server_load` (`null` without `server_metrics_url`; else what the engine's own `/metrics`
/// said just before the request, [`crate::engine::to_json`]: `engine`, `requests_waiting`,
/// `requests_running`, `kv_cache_usage_ratio`, `error`),
/// `connection_setup_seconds` (probes that opened a connection), `client_phases`
/// ([`client_phases_json`]), `timestamp_source` (`kernel`:
/// the marks are the kernel's receive times of the bytes; `read`: the instants the reads
/// returned), `read_delay_max_seconds` (the longest kernel-to-read delay of a read that carried
/// token events, `null` without kernel stamps), `anomalies`. Times in seconds.
pub fn to_json(o: &ProbeOutcome) -> Value {
    let obs = &o.observations;
    let m = o.result.as_ref().ok();
    let f = o.result.as_ref().err();
    let secs = |d: std::time::Duration| d.as_secs_f64();
    json!({
        "target": &*o.target,
        "scenario": &*o.scenario,
        "model": &*o.model,
        "success": o.is_success(),
        "failure_reason": f.map(|f| f.reason.as_str()),
        "failure_detail": f.map(|f| f.detail.as_str()),
        "http_status": obs.http_status,
        "ttft_seconds": m.map(|m| secs(m.ttft)),
        "time_to_first_output_token_seconds": m.and_then(|m| m.time_to_first_output_token).map(secs),
        "tpot_seconds": m.and_then(|m| m.tpot).map(secs),
        "output_tokens_per_second": m.and_then(|m| m.output_tokens_per_second),
        "e2e_seconds": m.map(|m| secs(m.e2e)),
        "output_tokens": m.map(|m| m.output_tokens),
        "token_count_source": m.map(|m| m.token_count_source.as_str()),
        "prompt_tokens": obs.usage.prompt_tokens,
        "cached_prompt_tokens": obs.usage.cached_prompt_tokens,
        "token_events": obs.timeline.token_events.len(),
        "inter_token_latencies_seconds": m.map(|m| m.inter_token_latencies.iter().map(|d| secs(*d)).collect::<Vec<_>>()),
        "response_model": obs.identity.response_model,
        "system_fingerprint": obs.identity.system_fingerprint,
        "server_header": obs.identity.server_header,
        "server_version": obs.identity.server_version,
        "server_prompt_seconds": obs.server_timings.prompt_seconds,
        "server_predicted_tokens": obs.server_timings.predicted_tokens,
        "server_latency_seconds": obs.server_timings.latency_seconds,
        "server_prefill_seconds": m.and_then(|m| m.server_prefill).map(secs),
        "ttft_overhead_seconds": m.and_then(|m| m.ttft_overhead).map(secs),
        "server_queue_seconds": obs.server_timings.queue_seconds,
        "ttft_split": m.map(|m| m.ttft_split.to_json()),
        "traceparent": obs.traceparent,
        "trace_id": obs.traceparent.as_deref().and_then(crate::probe::trace::trace_id_of),
        "request_id": obs.request_id,
        "server_load": obs.server_load.as_ref().map(crate::engine::to_json),
        "connection_setup_seconds": obs.timeline.connection_setup().map(secs),
        "client_phases": client_phases_json(&obs.timeline),
        "timestamp_source": obs.timeline.timestamp_source.as_str(),
        "read_delay_max_seconds": obs.read_delays.iter().max().copied().map(secs),
        "anomalies": obs.anomalies.iter().map(|a| a.as_str()).collect::<Vec<_>>(),
    })
}

/// The text block's line for the TTFT split: each component in milliseconds (they sum to
/// TTFT), or what the server did not say.
fn split_line(split: &crate::measure::TtftSplit) -> String {
    let source = split.source.map_or("unknown source", |s| s.as_str());
    let excess = split.excess.as_secs_f64() * 1e3;
    if split.remainder.is_none() && excess > 0.0 {
        return format!("  ttft split  not split: every part the server reported ({source}) is longer than the TTFT (by {excess:.1} ms in all)\n");
    }
    if split.remainder.is_none() {
        return "  ttft split  not split: the server reported no queue, load or prefill time\n"
            .to_string();
    }
    let parts: Vec<String> = split
        .components()
        .iter()
        .map(|(c, d)| format!("{} {:.1} ms", c.as_str(), d.as_secs_f64() * 1e3))
        .collect();
    let over = match excess > 0.0 {
        true => format!(", the server's parts exceed TTFT by {excess:.1} ms"),
        false => String::new(),
    };
    format!("  ttft split  {} ({source}{over})\n", parts.join(" + "))
}

/// The text block's line for the engine's own load before the request.
fn server_load_line(scrape: &crate::engine::EngineScrape) -> String {
    let n = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v}"));
    match scrape {
        Ok(l) => format!(
            "  engine      {}: {} waiting, {} running, KV cache {} (its /metrics, just before the request)\n",
            l.engine.as_str(),
            n(l.requests_waiting),
            n(l.requests_running),
            l.kv_cache_usage_ratio
                .map_or("-".to_string(), |r| format!("{:.1} %", r * 100.0)),
        ),
        Err(f) => format!(
            "  engine      metrics not read ({}): {}\n",
            f.reason.as_str(),
            terminal_safe(&f.detail)
        ),
    }
}

/// [`to_json`] as one line of [`json_text`].
pub fn json_line(o: &ProbeOutcome) -> String {
    json_text(&to_json(o), false)
}

/// `v` as JSON text (indented when `pretty`) with a final newline, safe to print to a
/// terminal: besides the control characters JSON always escapes, DEL, C1 controls and
/// bidirectional controls in strings (server-sent ones included) are written as `\uXXXX`
/// escapes, so the JSON still reads back exactly.
pub fn json_text(v: &Value, pretty: bool) -> String {
    let text = if pretty {
        format!("{v:#}")
    } else {
        v.to_string()
    };
    let mut out = String::with_capacity(text.len() + 1);
    for c in text.chars() {
        if is_unsafe_char(c) && c != '\n' {
            // Every unsafe character is in the Basic Multilingual Plane: one escape each.
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out.push('\n');
    out
}

/// The client phases of a probe (issue 29) as offsets from `sent`, seconds, each `null` when
/// it did not happen or is not known (never 0 in its place): `dns_resolved_seconds` (the
/// probe's connection resolved a host name: not for an IP literal or a reused connection),
/// `tcp_connected_seconds` (its TCP connection was established; not on a reused connection),
/// `tls_done_seconds` (its TLS handshake was done: `https` only, not on a reused connection),
/// `request_written_seconds` (the request's last byte handed to the socket) and
/// `first_byte_seconds` (the kernel arrival of the response's first byte; both HTTP/1.x on the
/// probe's stamped client), `headers_seconds` (response head parsed) and
/// `first_token_seconds` (= TTFT). In order when present; none is later than TTFT.
pub fn client_phases_json(tl: &crate::measure::Timeline) -> Value {
    let offset = |t: Option<std::time::Instant>| {
        t.map(|t| t.saturating_duration_since(tl.sent).as_secs_f64())
    };
    json!({
        "dns_resolved_seconds": offset(tl.dns_resolved),
        "tcp_connected_seconds": offset(tl.tcp_connected),
        "tls_done_seconds": offset(tl.tls_done),
        "request_written_seconds": offset(tl.request_written),
        "first_byte_seconds": offset(tl.first_byte),
        "headers_seconds": offset(tl.headers),
        "first_token_seconds": offset(tl.first_token()),
    })
}

/// Most token events listed in a timeline.
pub const MAX_TIMELINE_EVENTS: usize = 2000;

/// The probe's marks as offsets from `sent`, seconds: `connect_started_seconds` and
/// `connected_seconds` (null when the probe opened no connection); the client phases
/// (issue 29, each null when it did not happen or is not known, never 0 in its place):
/// `dns_resolved_seconds`, `tcp_connected_seconds`, `tls_done_seconds` (null on a reused
/// connection, an IP literal for DNS, plain HTTP for TLS), `request_written_seconds` and
/// `first_byte_seconds` (HTTP/1.x on the stamped client); `headers_seconds`, `ended_seconds`
/// (null when not reached) and `events` (each token event's `offset_seconds` and `kind`,
/// `output` or `reasoning`; at most [`MAX_TIMELINE_EVENTS`], `events_truncated` says if cut).
pub fn timeline_json(o: &ProbeOutcome) -> Value {
    let tl = &o.observations.timeline;
    let offset = |t: std::time::Instant| t.saturating_duration_since(tl.sent).as_secs_f64();
    let events: Vec<Value> = tl
        .token_events
        .iter()
        .take(MAX_TIMELINE_EVENTS)
        .map(|e| {
            let kind = match e.kind {
                crate::measure::TokenKind::Output => "output",
                crate::measure::TokenKind::Reasoning => "reasoning",
            };
            json!({ "offset_seconds": offset(e.at), "kind": kind })
        })
        .collect();
    json!({
        "connect_started_seconds": tl.connect_started.map(offset),
        "connected_seconds": tl.connected.map(offset),
        "dns_resolved_seconds": tl.dns_resolved.map(offset),
        "tcp_connected_seconds": tl.tcp_connected.map(offset),
        "tls_done_seconds": tl.tls_done.map(offset),
        "request_written_seconds": tl.request_written.map(offset),
        "first_byte_seconds": tl.first_byte.map(offset),
        "headers_seconds": tl.headers.map(offset),
        "ended_seconds": tl.ended.map(offset),
        "events": events,
        "events_truncated": tl.token_events.len() > MAX_TIMELINE_EVENTS,
    })
}

/// The client phases of a timeline that happened, in words, offsets from `sent` in ms: `dns
/// 0.4 · tcp 0.6 · tls 3.1 · written 3.2 · first byte 40.1 · head 40.1 · first token 52.0`;
/// `None` when none did.
fn client_phases(tl: &crate::measure::Timeline) -> Option<String> {
    let parts: Vec<String> = [
        ("dns", tl.dns_resolved),
        ("tcp", tl.tcp_connected),
        ("tls", tl.tls_done),
        ("written", tl.request_written),
        ("first byte", tl.first_byte),
        ("head", tl.headers),
        ("first token", tl.first_token()),
    ]
    .into_iter()
    .filter_map(|(name, at)| {
        let ms = at?.saturating_duration_since(tl.sent).as_secs_f64() * 1e3;
        Some(format!("{name} {ms:.1}"))
    })
    .collect();
    (!parts.is_empty()).then(|| format!("{} ms after sent", parts.join(" · ")))
}

/// A few human-readable lines for one probe. Every string from the server (failure detail,
/// backend identity) or the config is passed through [`terminal_safe`], so none can add a
/// line or move the cursor.
pub fn to_text(o: &ProbeOutcome) -> String {
    let obs = &o.observations;
    let ms = |d: std::time::Duration| format!("{:.1} ms", d.as_secs_f64() * 1e3);
    let safe = |v: &Option<String>| terminal_safe(v.as_deref().unwrap_or("-")).into_owned();
    let mut s = format!(
        "{} / {} (model {})\n",
        terminal_safe(&o.target),
        terminal_safe(&o.scenario),
        terminal_safe(&o.model)
    );
    match &o.result {
        Ok(m) => {
            s += &format!("  ok          TTFT {}", ms(m.ttft));
            if let Some(t) = m.time_to_first_output_token.filter(|t| *t != m.ttft) {
                s += &format!(", first output token {}", ms(t));
            }
            s += &format!(", E2E {}\n", ms(m.e2e));
            s += &format!(
                "  decode      {} output tokens (from {}), {} events, TPOT {}, {} tokens/s\n",
                m.output_tokens,
                m.token_count_source.as_str(),
                m.token_events,
                m.tpot.map_or("-".into(), ms),
                m.output_tokens_per_second
                    .map_or("-".into(), |r| format!("{r:.1}")),
            );
        }
        Err(f) => {
            s += &format!(
                "  FAILED      {} ({}): {}\n",
                f.reason,
                obs.http_status
                    .map_or("no HTTP response".into(), |c| format!("HTTP {c}")),
                terminal_safe(&f.detail)
            );
        }
    }
    if let Some(c) = obs.timeline.connection_setup() {
        s += &format!("  connection  opened in {} (part of TTFT)\n", ms(c));
    }
    if let Some(phases) = client_phases(&obs.timeline) {
        s += &format!("  phases      {phases}\n");
    }
    if let Some(p) = obs.usage.prompt_tokens {
        s += &format!(
            "  prompt      {p} tokens{}\n",
            obs.usage
                .cached_prompt_tokens
                .map_or(String::new(), |c| format!(" ({c} cached)"))
        );
    }
    if let Some(l) = obs.server_timings.latency_seconds {
        s += &format!(
            "  server      latency {:.1} ms by the server's own clock (the whole call)\n",
            l * 1e3
        );
    }
    if let Some(p) = obs.server_timings.prompt_seconds {
        s += &format!(
            "  server      prefill {:.1} ms by the server's own clock",
            p * 1e3
        );
        if let Some(o) = o.result.as_ref().ok().and_then(|m| m.ttft_overhead) {
            s += &format!(", TTFT overhead {}", ms(o));
        }
        s += "\n";
    }
    if let Ok(m) = &o.result {
        s += &split_line(&m.ttft_split);
    }
    if let (Some(tp), Some(id)) = (&obs.traceparent, &obs.request_id) {
        s += &format!(
            "  trace       traceparent {}, x-request-id {}\n",
            terminal_safe(tp),
            terminal_safe(id)
        );
    }
    if let Some(scrape) = &obs.server_load {
        s += &server_load_line(scrape);
    }
    let id = &obs.identity;
    if id.response_model.is_some()
        || id.system_fingerprint.is_some()
        || id.server_header.is_some()
        || id.server_version.is_some()
    {
        s += &format!(
            "  backend     model {}, fingerprint {}, server {}, version {}\n",
            safe(&id.response_model),
            safe(&id.system_fingerprint),
            safe(&id.server_header),
            safe(&id.server_version)
        );
    }
    if !obs.anomalies.is_empty() {
        let kinds: Vec<_> = obs.anomalies.iter().map(|a| a.as_str()).collect();
        s += &format!("  anomalies   {}\n", kinds.join(", "));
    }
    s
}
