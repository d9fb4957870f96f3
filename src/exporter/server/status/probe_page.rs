//! The readable page of an on-demand probe (`/probe?target=…` from a browser): the outcome in
//! words (success, or the failure reason and detail), the headline numbers, the timeline as a
//! chart (debug probes), the raw stream excerpt, and the JSON answer itself one click away (a
//! collapsed block), so nobody reads raw JSON at 3 a.m. Clients that do not ask for HTML
//! (`curl`, scripts) and `&format=json` get the JSON as before.

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;
use maud::{html, Markup};
use serde_json::Value;

use super::{encode, layout, page, ExporterState, View};

/// Whether the probe's answer should be this page: `format=html`, or a browser's `Accept`
/// (listing `text/html`) without `format=json`.
pub fn wants_html(format: Option<&str>, accept: Option<&str>) -> bool {
    match format {
        Some("json") => false,
        Some("html") => true,
        _ => accept.is_some_and(|a| a.contains("text/html")),
    }
}

/// Seconds as milliseconds for people, or a dash.
fn ms(v: &Value) -> String {
    v.as_f64()
        .map_or("–".into(), |s| format!("{:.1} ms", s * 1e3))
}

/// The timeline (`body["timeline"]`, offsets from the request being sent) as an SVG strip
/// (connection and headers as dashed lines, every token event as a tick, the end) with the
/// marks' offsets listed in words below it.
fn timeline(t: &Value) -> Markup {
    let events: Vec<f64> = t["events"]
        .as_array()
        .map(|e| {
            e.iter()
                .filter_map(|e| e["offset_seconds"].as_f64())
                .collect()
        })
        .unwrap_or_default();
    let mut marks: Vec<(&str, f64)> = [
        ("connect", &t["connect_started_seconds"]),
        ("dns", &t["dns_resolved_seconds"]),
        ("tcp", &t["tcp_connected_seconds"]),
        ("tls", &t["tls_done_seconds"]),
        ("connected", &t["connected_seconds"]),
        ("written", &t["request_written_seconds"]),
        ("first byte", &t["first_byte_seconds"]),
        ("headers", &t["headers_seconds"]),
        ("end", &t["ended_seconds"]),
    ]
    .into_iter()
    .filter_map(|(k, v)| Some((k, v.as_f64()?)))
    .collect();
    if let Some(first) = events.first() {
        marks.push(("first token", *first));
    }
    marks.sort_by(|a, b| a.1.total_cmp(&b.1));
    let end = marks
        .iter()
        .map(|m| m.1)
        .chain(events.iter().copied())
        .fold(0.0f64, f64::max)
        .max(1e-3);
    let (l, r) = (10.0, 470.0);
    let x = |s: f64| format!("{:.1}", l + s / end * (r - l));
    html! {
        svg.chart.timeline role="img" viewBox="0 0 480 56" {
            title { "Timeline: " (events.len()) " token events over " (format!("{:.1}", end * 1e3)) " ms" }
            line class="grid" x1=(l) x2=(r) y1="22" y2="22" {}
            @for e in &events { line class="p50" x1=(x(*e)) x2=(x(*e)) y1="12" y2="32" {} }
            @for (name, at) in &marks {
                line class="reload" x1=(x(*at)) x2=(x(*at)) y1="4" y2="40" { title { (name) " " (format!("{:.1}", at * 1e3)) " ms" } }
            }
            text class="tick" font-size="13" x=(l) y="54" { "0 ms" }
            text class="tick" font-size="13" x=(r) y="54" text-anchor="end" { (format!("{:.1} ms", end * 1e3)) }
        }
        p.muted {
            @for (k, (name, at)) in marks.iter().enumerate() {
                @if k > 0 { " · " }
                (name) " " (format!("{:.1}", at * 1e3)) " ms"
            }
            " · " (events.len()) " token events (green ticks)"
        }
    }
}

/// The client phases (`body["client_phases"]`, [`crate::report::client_phases_json`]) as a
/// waterfall: one bar per phase that happened, from the previous phase's offset to its own,
/// on the scale of the last one (the first token); `None` when none is known.
fn client_phases(p: &Value) -> Option<Markup> {
    let marks: Vec<(&str, f64)> = [
        ("dns", "dns_resolved_seconds"),
        ("tcp connect", "tcp_connected_seconds"),
        ("tls handshake", "tls_done_seconds"),
        ("request written", "request_written_seconds"),
        ("first byte", "first_byte_seconds"),
        ("response head", "headers_seconds"),
        ("first token", "first_token_seconds"),
    ]
    .into_iter()
    .filter_map(|(name, k)| Some((name, p[k].as_f64()?)))
    .collect();
    let total = marks.last()?.1.max(1e-6);
    let (l, r, row) = (130.0, 470.0, 18.0);
    let x = |s: f64| l + s.clamp(0.0, total) / total * (r - l);
    let height = row * marks.len() as f64 + 4.0;
    let mut from = 0.0;
    let bars: Vec<(&str, f64, f64)> = marks
        .iter()
        .map(|(name, at)| {
            let bar = (*name, from, *at);
            from = at.max(from);
            bar
        })
        .collect();
    Some(html! {
        svg.chart.waterfall role="img" viewBox=(format!("0 0 480 {height}")) {
            title { "Client phases: first token " (format!("{:.1}", total * 1e3)) " ms after the request was sent" }
            @for (k, (name, start, end)) in bars.iter().enumerate() {
                text class="tick" font-size="12" x="0" y=(format!("{:.1}", row * k as f64 + 13.0)) { (name) }
                rect class="split outside_engine" x=(format!("{:.1}", x(*start))) y=(format!("{:.1}", row * k as f64 + 2.0))
                    width=(format!("{:.1}", (x(*end) - x(*start)).max(1.0))) height="12" {
                    title { (name) " at " (format!("{:.1}", end * 1e3)) " ms" }
                }
            }
        }
        p.muted {
            @for (k, (name, at)) in marks.iter().enumerate() {
                @if k > 0 { " · " }
                (name) " " (format!("{:.1}", at * 1e3)) " ms"
            }
            " (offsets from the request being sent; a phase that did not happen, such as DNS for an IP address or TCP and TLS on a reused connection, is left out)"
        }
    })
}

/// The TTFT split (`body["ttft_split"]`, [`crate::report::TtftSplitRecord`]) as a
/// waterfall: one bar per component, each starting where the previous one ended, so the bars
/// end at TTFT; with each component's milliseconds and share in words. A split whose server
/// reported nothing shows the note instead of bars.
fn waterfall(split: &Value) -> Markup {
    use crate::measure::TtftComponent;
    let parts: Vec<(&str, f64)> = TtftComponent::ALL
        .iter()
        .map(|c| c.as_str())
        // The remainder (outside_engine or unattributed) first, then the server's account.
        .filter(|c| matches!(*c, "outside_engine" | "unattributed"))
        .chain(["engine_queue", "model_load", "engine_prefill"])
        .filter_map(|c| Some((c, split[format!("{c}_seconds")].as_f64()?)))
        .collect();
    let total: f64 = parts.iter().map(|p| p.1).sum();
    if parts.is_empty() || total <= 0.0 {
        return html! { p.muted.split { (split["note"].as_str().unwrap_or("TTFT is not split")) } };
    }
    let (l, r, row) = (130.0, 470.0, 18.0);
    let mut at = 0.0;
    let bars: Vec<(&str, f64, f64)> = parts
        .iter()
        .map(|(c, d)| {
            let bar = (*c, at, *d);
            at += d;
            bar
        })
        .collect();
    let x = |s: f64| l + s / total * (r - l);
    let height = row * bars.len() as f64 + 4.0;
    html! {
        svg.chart.waterfall role="img" viewBox=(format!("0 0 480 {height}")) {
            title { "TTFT split: " (format!("{:.1}", total * 1e3)) " ms" }
            @for (k, (c, start, d)) in bars.iter().enumerate() {
                text class="tick" font-size="12" x="0" y=(format!("{:.1}", row * k as f64 + 13.0)) { (c) }
                rect class=(format!("split {c}")) x=(format!("{:.1}", x(*start))) y=(format!("{:.1}", row * k as f64 + 2.0))
                    width=(format!("{:.1}", (x(start + d) - x(*start)).max(1.0))) height=(format!("{:.1}", row - 4.0)) {
                    title { (c) " " (format!("{:.1}", d * 1e3)) " ms" }
                }
            }
        }
        p.muted {
            @for (k, (c, d)) in parts.iter().enumerate() {
                @if k > 0 { " + " }
                (c) " " (format!("{:.1} ms ({:.0} %)", d * 1e3, d / total * 100.0))
            }
            " = TTFT; reported by " code { (split["source"].as_str().unwrap_or("?")) }
        }
    }
}

/// A server's raw text for a `<pre>`: its lines kept, and every other control or
/// bidirectional character (which reorders or hides what is shown around it) written as a
/// visible escape ([`crate::sanitize::terminal_safe`]).
fn visible_lines(raw: &str) -> String {
    raw.split('\n')
        .map(crate::sanitize::terminal_safe)
        .collect::<Vec<_>>()
        .join("\n")
}

/// What the engine's own `/metrics` said just before the request (`body["server_load"]`,
/// [`crate::report::ServerLoad`]): its three numbers, or why they could not be read.
fn server_load(load: &Value) -> Markup {
    let count = |v: &Value| v.as_f64().map_or("–".to_string(), |v| format!("{v}"));
    html! {
        @if load["error"].is_object() {
            p.server-load.reason {
                "not read: " strong { (load["error"]["reason"].as_str().unwrap_or("unknown")) } " — "
                span.detail { (load["error"]["detail"].as_str().unwrap_or("")) }
            }
        } @else {
            dl.probe.server-load {
                dt { "engine" } dd { (load["engine"].as_str().unwrap_or("–")) }
                dt { "requests waiting" } dd { (count(&load["requests_waiting"])) }
                dt { "requests running" } dd { (count(&load["requests_running"])) }
                dt { "KV cache in use" } dd { (load["kv_cache_usage_ratio"].as_f64().map_or("not published".to_string(), |r| format!("{:.1} %", r * 100.0))) }
            }
        }
    }
}

/// The page of probe answer `body` (as `/probe` answers it in JSON; `debug` adds `timeline`
/// and `raw_excerpt`), the JSON text being `json`.
pub fn render(state: &ExporterState, body: &Value, json: &str) -> Response<Full<Bytes>> {
    let target = body["target"].as_str().unwrap_or("");
    let scenario = body["scenario"].as_str().unwrap_or("");
    let ok = body["success"].as_bool().unwrap_or(false);
    let identity: Vec<String> = ["response_model", "system_fingerprint", "server_header"]
        .iter()
        .filter_map(|k| body[*k].as_str().map(|v| format!("{k}={v}")))
        .collect();
    let u = &state.urls;
    let again = u.link(&format!(
        "/probe?target={}&scenario={}&debug=true",
        encode(target),
        encode(scenario)
    ));
    let content = html! {
        h1 { "Probe of " code { (target) } " / " code { (scenario) } }
        @if ok {
            p.outcome { span.state.ok { "success" } " TTFT " (ms(&body["ttft_seconds"])) ", E2E " (ms(&body["e2e_seconds"])) }
        } @else {
            p.outcome.reason {
                span.state.down { "failed" } " "
                strong { (body["failure_reason"].as_str().unwrap_or("unknown")) } " — "
                span.detail { (body["failure_detail"].as_str().unwrap_or("")) }
            }
        }
        dl.probe {
            dt { "HTTP status" } dd { (body["http_status"].as_u64().map_or("–".into(), |s| s.to_string())) }
            dt { "TTFT" } dd { (ms(&body["ttft_seconds"])) }
            dt { "TPOT" } dd { (ms(&body["tpot_seconds"])) }
            dt { "E2E" } dd { (ms(&body["e2e_seconds"])) }
            dt { "output tokens" } dd { (body["output_tokens"].as_u64().map_or("–".into(), |n| n.to_string())) }
            dt { "tokens/s" } dd { (body["output_tokens_per_second"].as_f64().map_or("–".into(), |v| format!("{v:.1}"))) }
            dt { "token events" } dd { (body["token_events"]) }
            dt { "backend" } dd.identity { @if identity.is_empty() { "unknown" } @else { (identity.join(" ")) } }
        }
        @if body["server_load"].is_object() {
            h2 { "Engine load before the request" }
            (server_load(&body["server_load"]))
        }
        @if ok && body["ttft_split"].is_object() {
            h2 { "TTFT split" }
            (waterfall(&body["ttft_split"]))
        }
        @if let Some(phases) = client_phases(&body["client_phases"]) {
            h2 { "Client phases" }
            (phases)
        }
        @if body["timeline"].is_object() {
            h2 { "Timeline" }
            (timeline(&body["timeline"]))
        }
        @if let Some(raw) = body["raw_excerpt"].as_str() {
            h2 { "Raw stream (first bytes)" }
            pre.raw { (visible_lines(raw)) }
        }
        details.json {
            summary { "The JSON answer" }
            pre { (json) }
        }
        p {
            a href=(u.link(&format!("/targets/{}#{}", encode(target), encode(scenario)))) { "Back to " (target) }
            " · " a href=(again) { "probe again (debug)" }
            " · scripts get this as JSON (" code { "Accept: application/json" } " or " code { "&format=json" } ")."
        }
    };
    // No refresh: every reload of this page would run another probe.
    page(layout(
        state,
        &format!("probe {target}"),
        View::Once,
        content,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_waterfall_has_a_bar_per_reported_component_or_says_why_not() {
        let split = serde_json::json!({"source": "vllm_request_metrics", "outside_engine_seconds": 0.01,
            "engine_queue_seconds": 0.3, "engine_prefill_seconds": 0.09, "excess_seconds": 0.0});
        let html = waterfall(&split).into_string();
        for c in ["outside_engine", "engine_queue", "engine_prefill"] {
            assert!(
                html.contains(&format!("class=\"split {c}\"")),
                "{c}: {html}"
            );
        }
        assert!(html.contains("engine_queue 300.0 ms (75 %)"), "{html}");
        assert!(!html.contains("model_load"));
        let none = serde_json::json!({"source": null, "note": "the server reported nothing"});
        let html = waterfall(&none).into_string();
        assert!(!html.contains("<rect") && html.contains("the server reported nothing"));
    }

    #[test]
    fn the_engine_load_shows_its_numbers_or_why_it_was_not_read() {
        let ok = serde_json::json!({"engine": "tgi", "requests_waiting": 37.0,
            "requests_running": 2.0, "kv_cache_usage_ratio": null, "error": null});
        let html = server_load(&ok).into_string();
        assert!(
            html.contains("<dd>tgi</dd>") && html.contains("<dd>37</dd>"),
            "{html}"
        );
        assert!(html.contains("<dd>not published</dd>"), "{html}");
        let failed = serde_json::json!({"engine": null, "requests_waiting": null,
            "requests_running": null, "kv_cache_usage_ratio": null,
            "error": {"reason": "timeout", "detail": "no complete answer within 2s <b>"}});
        let html = server_load(&failed).into_string();
        assert!(html.contains("<strong>timeout</strong>"), "{html}");
        assert!(html.contains("2s &lt;b&gt;"), "escaped: {html}");
    }

    #[test]
    fn browsers_get_the_page_and_scripts_the_json() {
        let browser = Some("text/html,application/xhtml+xml,*/*;q=0.8");
        assert!(wants_html(None, browser));
        assert!(!wants_html(Some("json"), browser));
        assert!(!wants_html(None, None));
        assert!(!wants_html(None, Some("*/*")));
        assert!(wants_html(Some("html"), None));
    }
}
