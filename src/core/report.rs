//! How `probe-once` prints an outcome: a JSON object per probe (unknown values are `null`,
//! never 0) or a short text block. Both are safe to print to a terminal: every string a server
//! sent is escaped ([`crate::sanitize::terminal_safe`] in text, `\uXXXX` in JSON).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::measure::ProbeOutcome;
use crate::sanitize::{is_unsafe_char, terminal_safe};

/// One probe-once record (`probe-once --output json`, one object per line; the `/probe`
/// endpoint's body; the JSON Schema is docs/schemas/probe-once.schema.json). Unknown values are
/// `null`, never 0; times in seconds.
///
/// `compare` and `baseline save` read a collection of these back
/// ([`crate::compare::input`]): every field has a default, so a line from an older llm-probe (or
/// one with only what `compare` needs) still reads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
#[schemars(
    title = "llm-probe probe-once record",
    description = "One line of `llm-probe probe-once --output json`"
)]
pub struct ProbeRecord {
    /// The target's name.
    #[schemars(with = "String")]
    pub target: Option<String>,
    /// The scenario's name.
    #[schemars(with = "String")]
    pub scenario: Option<String>,
    /// The configured model.
    #[schemars(with = "String")]
    pub model: Option<String>,
    /// The probe succeeded (read as `failure_reason` being `null` when absent).
    #[schemars(with = "bool")]
    pub success: Option<bool>,
    /// The failure reason (the daemon's `reason` label).
    pub failure_reason: Option<String>,
    /// What happened.
    pub failure_detail: Option<String>,
    /// The HTTP status of the response, if one came.
    pub http_status: Option<u16>,
    /// Time to first token.
    pub ttft_seconds: Option<f64>,
    /// Time to the first output (not reasoning) token.
    pub time_to_first_output_token_seconds: Option<f64>,
    /// Time per output token after the first.
    pub tpot_seconds: Option<f64>,
    /// Output tokens per second (1 / TPOT).
    pub output_tokens_per_second: Option<f64>,
    /// End to end.
    pub e2e_seconds: Option<f64>,
    /// Output tokens (N).
    pub output_tokens: Option<u64>,
    /// Where N came from: `usage`, `server` or `events`.
    pub token_count_source: Option<String>,
    /// Prompt tokens the server reported.
    pub prompt_tokens: Option<u64>,
    /// Prompt tokens served from the server's cache.
    pub cached_prompt_tokens: Option<u64>,
    /// The size of the generated long prompt sent (`prompt_tokens:`), tokens; compare with
    /// `prompt_tokens`, the server's count (far below it: the anomaly `prompt_truncated`).
    pub prompt_tokens_sent: Option<u64>,
    /// Prefill speed of a generated long prompt: prompt tokens prefilled per second of TTFT.
    pub prefill_tokens_per_second: Option<f64>,
    /// Prefill speed by the server's own prefill time.
    pub server_prefill_tokens_per_second: Option<f64>,
    /// Token events read.
    pub token_events: u64,
    /// Every gap between token events.
    pub inter_token_latencies_seconds: Option<Vec<f64>>,
    /// The model the response named.
    pub response_model: Option<String>,
    /// OpenAI's `system_fingerprint`.
    pub system_fingerprint: Option<String>,
    /// The `Server` header.
    pub server_header: Option<String>,
    /// The server's version (`version_path`).
    pub server_version: Option<String>,
    /// The server's own prompt processing time, as reported.
    pub server_prompt_seconds: Option<f64>,
    /// The server's own count of generated tokens, as reported.
    pub server_predicted_tokens: Option<u64>,
    /// The server's own latency of the whole call (Amazon Bedrock).
    pub server_latency_seconds: Option<f64>,
    /// The server's prefill time (successful probes whose server reports it).
    pub server_prefill_seconds: Option<f64>,
    /// TTFT minus the server's prefill.
    pub ttft_overhead_seconds: Option<f64>,
    /// The server's queue wait (vLLM per-request metrics, TGI `x-queue-time`).
    pub server_queue_seconds: Option<f64>,
    /// A successful probe's TTFT in parts.
    pub ttft_split: Option<TtftSplitRecord>,
    /// The W3C `traceparent` the request carried.
    pub traceparent: Option<String>,
    /// The trace id of `traceparent`.
    pub trace_id: Option<String>,
    /// The `x-request-id` the request carried.
    pub request_id: Option<String>,
    /// What the engine's own `/metrics` said just before the request (`null` without
    /// `server_metrics_url`).
    pub server_load: Option<ServerLoad>,
    /// Connection setup (DNS, TCP, proxy, TLS), when the probe opened a connection.
    pub connection_setup_seconds: Option<f64>,
    /// The client phases as offsets from `sent`.
    pub client_phases: ClientPhases,
    /// `kernel`: the marks are the kernel's receive times of the bytes; `read`: the instants
    /// the reads returned.
    pub timestamp_source: String,
    /// The longest kernel-to-read delay of a read that carried token events (`null` without
    /// kernel stamps).
    pub read_delay_max_seconds: Option<f64>,
    /// The anomalies seen.
    pub anomalies: Vec<String>,
    /// Each request of a multi-turn probe (`turns:`), the first included; empty for a
    /// one-request scenario (whose numbers are the probe's own).
    pub turns: Vec<TurnRecord>,
}

/// One turn of a multi-turn probe ([`crate::measure::Turn`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct TurnRecord {
    /// The turn's number, from 1.
    pub turn: usize,
    /// Why the turn failed (`null`: it succeeded).
    pub failure_reason: Option<String>,
    /// TTFT of a turn that succeeded.
    pub ttft_seconds: Option<f64>,
    /// Output tokens per second of a turn that succeeded.
    pub output_tokens_per_second: Option<f64>,
    /// Output tokens the turn cost.
    pub output_tokens: Option<u64>,
    /// The server's prompt count: the conversation so far.
    pub prompt_tokens: Option<u64>,
    /// Prompt tokens served from the server's prefix cache.
    pub cached_prompt_tokens: Option<u64>,
    /// The server's own prefill time, where it reports one.
    pub server_prefill_seconds: Option<f64>,
}

impl From<&crate::measure::Turn> for TurnRecord {
    fn from(t: &crate::measure::Turn) -> Self {
        TurnRecord {
            turn: t.turn,
            failure_reason: t.failure.map(|r| r.as_str().into()),
            ttft_seconds: t.ttft.map(|d| d.as_secs_f64()),
            output_tokens_per_second: t.output_tokens_per_second,
            output_tokens: t.output_tokens,
            prompt_tokens: t.prompt_tokens,
            cached_prompt_tokens: t.cached_prompt_tokens,
            server_prefill_seconds: t.server_prefill.map(|d| d.as_secs_f64()),
        }
    }
}

/// `  turn 2      TTFT 45.2 ms, 120.3 tokens/s, prompt 312 tokens (288 cached)`, or
/// `  turn 3      FAILED (http_status)`.
fn turn_line(t: &crate::measure::Turn) -> String {
    let mut s = format!("  turn {:<7}", t.turn);
    match (t.failure, t.ttft) {
        (Some(r), _) => s += &format!("FAILED ({r})"),
        (None, ttft) => {
            s += &format!(
                "TTFT {}, {} tokens/s",
                ttft.map_or("-".into(), |d| format!("{:.1} ms", d.as_secs_f64() * 1e3)),
                (t.output_tokens_per_second).map_or("-".into(), |r| format!("{r:.1}"))
            );
        }
    }
    if let Some(p) = t.prompt_tokens {
        s += &format!(", prompt {p} tokens");
        if let Some(c) = t.cached_prompt_tokens {
            s += &format!(" ({c} cached)");
        }
    }
    if let Some(p) = t.server_prefill {
        s += &format!(", server prefill {:.1} ms", p.as_secs_f64() * 1e3);
    }
    s + "\n"
}

impl From<&ProbeOutcome> for ProbeRecord {
    fn from(o: &ProbeOutcome) -> Self {
        let obs = &o.observations;
        let m = o.result.as_ref().ok();
        let f = o.result.as_ref().err();
        let secs = |d: std::time::Duration| d.as_secs_f64();
        ProbeRecord {
            target: Some(o.target.to_string()),
            scenario: Some(o.scenario.to_string()),
            model: Some(o.model.to_string()),
            success: Some(o.is_success()),
            failure_reason: f.map(|f| f.reason.as_str().into()),
            failure_detail: f.map(|f| f.detail.clone()),
            http_status: obs.http_status,
            ttft_seconds: m.map(|m| secs(m.ttft)),
            time_to_first_output_token_seconds: m
                .and_then(|m| m.time_to_first_output_token)
                .map(secs),
            tpot_seconds: m.and_then(|m| m.tpot).map(secs),
            output_tokens_per_second: m.and_then(|m| m.output_tokens_per_second),
            e2e_seconds: m.map(|m| secs(m.e2e)),
            output_tokens: m.map(|m| m.output_tokens),
            token_count_source: m.map(|m| m.token_count_source.as_str().into()),
            prompt_tokens: obs.usage.prompt_tokens,
            cached_prompt_tokens: obs.usage.cached_prompt_tokens,
            prompt_tokens_sent: obs.asked.prompt_tokens,
            prefill_tokens_per_second: m.and_then(|m| m.prefill_tokens_per_second),
            server_prefill_tokens_per_second: m.and_then(|m| m.server_prefill_tokens_per_second),
            token_events: obs.timeline.token_events.len() as u64,
            inter_token_latencies_seconds: m
                .map(|m| m.inter_token_latencies.iter().map(|d| secs(*d)).collect()),
            response_model: obs.identity.response_model.clone(),
            system_fingerprint: obs.identity.system_fingerprint.clone(),
            server_header: obs.identity.server_header.clone(),
            server_version: obs.identity.server_version.clone(),
            server_prompt_seconds: obs.server_timings.prompt_seconds,
            server_predicted_tokens: obs.server_timings.predicted_tokens,
            server_latency_seconds: obs.server_timings.latency_seconds,
            server_prefill_seconds: m.and_then(|m| m.server_prefill).map(secs),
            ttft_overhead_seconds: m.and_then(|m| m.ttft_overhead).map(secs),
            server_queue_seconds: obs.server_timings.queue_seconds,
            ttft_split: m.map(|m| TtftSplitRecord::from(&m.ttft_split)),
            traceparent: obs.traceparent.clone(),
            trace_id: (obs.traceparent.as_deref())
                .and_then(crate::probe::trace::trace_id_of)
                .map(String::from),
            request_id: obs.request_id.clone(),
            server_load: obs.server_load.as_ref().map(ServerLoad::from),
            connection_setup_seconds: obs.timeline.connection_setup().map(secs),
            client_phases: ClientPhases::from(&obs.timeline),
            timestamp_source: obs.timeline.timestamp_source.as_str().into(),
            read_delay_max_seconds: obs.read_delays.iter().max().copied().map(secs),
            anomalies: obs.anomalies.iter().map(|a| a.as_str().into()).collect(),
            turns: obs.turns.iter().map(TurnRecord::from).collect(),
        }
    }
}

/// The JSON object of one probe: [`ProbeRecord`], keys in serde_json's order (sorted).
pub fn to_json(o: &ProbeOutcome) -> Value {
    serde_json::to_value(ProbeRecord::from(o)).expect("a probe record serializes")
}

/// `ttft_split`: a successful probe's TTFT in parts ([`crate::measure::TtftSplit`]). `source`
/// and seconds per component (`{component}_seconds`, the components of
/// `llm_probe_ttft_component_seconds`) plus `excess_seconds`; or `source: null` and a `note`
/// when the server reported nothing, or `excess_seconds` and a `note` when every part it
/// reported is longer than the TTFT.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct TtftSplitRecord {
    /// Who reported the server's parts (`vllm_request_metrics`, `llama_cpp_timings`, `ollama`,
    /// `tgi_headers`), `null` when nothing was reported.
    pub source: Option<String>,
    /// TTFT outside the engine's own account (network, TLS, gateways, the HTTP frontend).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outside_engine_seconds: Option<f64>,
    /// The engine's queue wait.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine_queue_seconds: Option<f64>,
    /// Loading the model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_load_seconds: Option<f64>,
    /// Prefill up to the first token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine_prefill_seconds: Option<f64>,
    /// TTFT minus what the server reported, when it reported part of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unattributed_seconds: Option<f64>,
    /// How much the reported parts exceed the TTFT (0 when they do not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub excess_seconds: Option<f64>,
    /// Why the TTFT is not split.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl From<&crate::measure::TtftSplit> for TtftSplitRecord {
    fn from(s: &crate::measure::TtftSplit) -> Self {
        use crate::measure::TtftComponent;
        let source = s.source.map(|s| s.as_str().to_string());
        let excess = s.excess.as_secs_f64();
        if s.remainder.is_none() && !s.excess.is_zero() {
            return TtftSplitRecord {
                source,
                excess_seconds: Some(excess),
                note: Some(
                    "every part the server reported is longer than the TTFT: TTFT is not split"
                        .into(),
                ),
                ..TtftSplitRecord::default()
            };
        }
        if s.remainder.is_none() {
            return TtftSplitRecord {
                source: None,
                note: Some(
                    "the server reported no queue, load or prefill time: TTFT is not split".into(),
                ),
                ..TtftSplitRecord::default()
            };
        }
        let mut r = TtftSplitRecord {
            source,
            excess_seconds: Some(excess),
            ..TtftSplitRecord::default()
        };
        for (c, d) in s.components() {
            let field = match c {
                TtftComponent::OutsideEngine => &mut r.outside_engine_seconds,
                TtftComponent::EngineQueue => &mut r.engine_queue_seconds,
                TtftComponent::ModelLoad => &mut r.model_load_seconds,
                TtftComponent::EnginePrefill => &mut r.engine_prefill_seconds,
                TtftComponent::Unattributed => &mut r.unattributed_seconds,
            };
            *field = Some(d.as_secs_f64());
        }
        r
    }
}

/// `server_load`: `engine`, `requests_waiting`, `requests_running`, `kv_cache_usage_ratio`
/// (numbers or `null`) and `error` (`null`), or on a failed scrape the numbers `null` and
/// `error: {reason, detail}` ([`crate::engine::EngineScrape`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ServerLoad {
    /// The engine whose metric names were read.
    pub engine: Option<String>,
    /// Requests queued and not yet scheduled.
    pub requests_waiting: Option<f64>,
    /// Requests being processed.
    pub requests_running: Option<f64>,
    /// Share of the KV cache in use, 0 to 1.
    pub kv_cache_usage_ratio: Option<f64>,
    /// Why the engine's `/metrics` could not be read.
    pub error: Option<ScrapeError>,
}

/// `server_load.error`: the reason label of `llm_probe_server_metrics_scrape_failures_total`
/// and what happened.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ScrapeError {
    /// The reason.
    pub reason: String,
    /// What happened.
    pub detail: String,
}

impl From<&crate::engine::EngineScrape> for ServerLoad {
    fn from(scrape: &crate::engine::EngineScrape) -> Self {
        match scrape {
            Ok(l) => ServerLoad {
                engine: Some(l.engine.as_str().into()),
                requests_waiting: l.requests_waiting,
                requests_running: l.requests_running,
                kv_cache_usage_ratio: l.kv_cache_usage_ratio,
                error: None,
            },
            Err(f) => ServerLoad {
                error: Some(ScrapeError {
                    reason: f.reason.as_str().into(),
                    detail: f.detail.clone(),
                }),
                ..ServerLoad::default()
            },
        }
    }
}

/// `client_phases`: a probe's client phases as offsets from `sent`, seconds, each `null` when
/// it did not happen or is not known (never 0 in its place); in order when present, none later
/// than TTFT.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ClientPhases {
    /// The probe's connection resolved a host name (not for an IP literal or a reused
    /// connection).
    pub dns_resolved_seconds: Option<f64>,
    /// Its TCP connection was established (not on a reused connection).
    pub tcp_connected_seconds: Option<f64>,
    /// Its TLS handshake was done (`https` only, not on a reused connection).
    pub tls_done_seconds: Option<f64>,
    /// The request's last byte was handed to the socket.
    pub request_written_seconds: Option<f64>,
    /// The kernel arrival of the response's first byte.
    pub first_byte_seconds: Option<f64>,
    /// The response head was parsed.
    pub headers_seconds: Option<f64>,
    /// The first token (= TTFT).
    pub first_token_seconds: Option<f64>,
}

impl From<&crate::measure::Timeline> for ClientPhases {
    fn from(tl: &crate::measure::Timeline) -> Self {
        let offset = |t: Option<std::time::Instant>| {
            t.map(|t| t.saturating_duration_since(tl.sent).as_secs_f64())
        };
        ClientPhases {
            dns_resolved_seconds: offset(tl.dns_resolved),
            tcp_connected_seconds: offset(tl.tcp_connected),
            tls_done_seconds: offset(tl.tls_done),
            request_written_seconds: offset(tl.request_written),
            first_byte_seconds: offset(tl.first_byte),
            headers_seconds: offset(tl.headers),
            first_token_seconds: offset(tl.first_token()),
        }
    }
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

/// The client phases of a probe as JSON: [`ClientPhases`].
pub fn client_phases_json(tl: &crate::measure::Timeline) -> Value {
    serde_json::to_value(ClientPhases::from(tl)).expect("client phases serialize")
}

/// Most token events listed in a timeline.
pub const MAX_TIMELINE_EVENTS: usize = 2000;

/// The probe's marks as offsets from `sent`, seconds: `connect_started_seconds` and
/// `connected_seconds` (null when the probe opened no connection); the client phases
/// (each null when it did not happen or is not known, never 0 in its place):
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
            "  prompt      {p} tokens{}",
            obs.usage
                .cached_prompt_tokens
                .map_or(String::new(), |c| format!(" ({c} cached)"))
        );
        if let Some(sent) = obs.asked.prompt_tokens {
            s += &format!(" by the server's count, of a generated prompt of about {sent}");
            if crate::measure::prompt_truncated(obs) {
                s += ": far fewer, the server cut the prompt (prompt_truncated)";
            }
        }
        s += "\n";
    } else if let Some(sent) = obs.asked.prompt_tokens {
        s += &format!(
            "  prompt      a generated prompt of about {sent} tokens (the server gave no count)\n"
        );
    }
    if let Ok(m) = &o.result {
        if let Some(v) = m.prefill_tokens_per_second {
            s += &format!("  prefill     {v:.0} prompt tokens/s of TTFT");
            if let Some(v) = m.server_prefill_tokens_per_second {
                s += &format!(", {v:.0} by the server's own prefill time");
            }
            s += "\n";
        }
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
    for t in &obs.turns {
        s += &turn_line(t);
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
    if let Some(limits) = &obs.rate_limits {
        s += &rate_limits_line(limits);
    }
    if !obs.anomalies.is_empty() {
        let kinds: Vec<_> = obs.anomalies.iter().map(|a| a.as_str()).collect();
        s += &format!("  anomalies   {}\n", kinds.join(", "));
    }
    s
}

/// `  rate limits requests 2 of 3 left (reset in 55s), tokens 900 left`: what the response's
/// rate-limit headers said, each number the response did not give (or gave unreadably) left
/// out; `unreadable` when it gave none.
fn rate_limits_line(limits: &crate::measure::RateLimits) -> String {
    let parts: Vec<String> = crate::measure::RateLimitKind::ALL
        .into_iter()
        .filter_map(|kind| {
            let w = limits.window(kind)?;
            let left = match (w.remaining, w.limit) {
                (Some(r), Some(l)) => format!(" {r} of {l} left"),
                (Some(r), None) => format!(" {r} left"),
                (None, Some(l)) => format!(" limit {l}"),
                (None, None) => String::new(),
            };
            let reset = w.reset.map_or(String::new(), |d| {
                let d = std::time::Duration::from_millis(
                    d.as_millis().min(u128::from(u64::MAX)) as u64
                );
                format!(" (reset in {})", humantime::format_duration(d))
            });
            Some(format!("{}{left}{reset}", kind.as_str()))
        })
        .collect();
    let text = if parts.is_empty() {
        "unreadable".to_string()
    } else {
        parts.join(", ")
    };
    format!("  rate limits {text}\n")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::measure::{ServerTimingSource, TtftComponent, TtftSplit};

    #[test]
    fn the_rate_limits_line_says_what_the_headers_said() {
        let limits = |headers: &[(&str, &str)]| {
            let headers = headers.iter().map(|(n, v)| (*n, v.as_bytes()));
            crate::measure::RateLimits::from_headers(headers, std::time::SystemTime::now()).unwrap()
        };
        let l = limits(&[
            ("x-ratelimit-limit-requests", "3"),
            ("x-ratelimit-remaining-requests", "2"),
            ("x-ratelimit-reset-requests", "55s"),
            ("x-ratelimit-remaining-tokens", "900"),
        ]);
        assert_eq!(
            rate_limits_line(&l),
            "  rate limits requests 2 of 3 left (reset in 55s), tokens 900 left\n"
        );
        let l = limits(&[("x-ratelimit-remaining-requests", "-1")]);
        assert_eq!(rate_limits_line(&l), "  rate limits unreadable\n");
    }

    /// `ttft_split` has a `{component}_seconds` field for every component of
    /// `llm_probe_ttft_component_seconds`, each filled from its own part.
    #[test]
    fn the_ttft_split_record_names_every_component() {
        let ms = Duration::from_millis;
        let mut named = std::collections::BTreeSet::new();
        for remainder in [TtftComponent::OutsideEngine, TtftComponent::Unattributed] {
            let split = TtftSplit {
                source: Some(ServerTimingSource::VllmRequestMetrics),
                engine_queue: Some(ms(1)),
                model_load: Some(ms(2)),
                engine_prefill: Some(ms(3)),
                remainder: Some(ms(4)),
                remainder_component: Some(remainder),
                excess: Duration::ZERO,
            };
            let v = serde_json::to_value(TtftSplitRecord::from(&split)).unwrap();
            for (c, d) in split.components() {
                assert_eq!(v[format!("{}_seconds", c.as_str())], d.as_secs_f64(), "{v}");
                named.insert(c.as_str());
            }
            assert_eq!(v["excess_seconds"], 0.0, "{v}");
        }
        let all: std::collections::BTreeSet<&str> =
            TtftComponent::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(named, all);
    }
}
