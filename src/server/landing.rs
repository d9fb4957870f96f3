//! The landing page: what is configured and what happened lately (never a key: target lines
//! come from `Target::summary`).

use super::ExporterState;
use crate::history::RecentProbe;

/// HTML-escapes `s`.
pub(super) fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn rows(probes: &[RecentProbe]) -> String {
    probes
        .iter()
        .rev()
        .take(50)
        .map(|p| {
            let when = humantime::format_rfc3339_seconds(p.started_at);
            let result = match &p.failure {
                Some((reason, detail)) => format!("<b>failed: {reason}</b> {}", escape(detail)),
                None => format!(
                    "ok: TTFT {:.1} ms, {} tokens, {} tokens/s, E2E {:.1} ms",
                    p.ttft.unwrap_or_default().as_secs_f64() * 1e3,
                    p.output_tokens.unwrap_or(0),
                    p.output_tokens_per_second
                        .map_or("-".to_string(), |r| format!("{r:.1}")),
                    p.e2e.unwrap_or_default().as_secs_f64() * 1e3,
                ),
            };
            format!(
                "<tr><td>{when}</td><td>{}</td><td>{}</td><td>{result}</td></tr>",
                escape(&p.target),
                escape(&p.scenario)
            )
        })
        .collect()
}

/// The landing page: links, configured targets (each with a "probe now" link unless those are
/// switched off), the recent
/// probes and, kept longer, the recent failures.
pub(super) fn page(state: &ExporterState) -> String {
    let mut targets: Vec<_> = {
        let probers = state.probers.read().unwrap_or_else(|e| e.into_inner());
        probers.values().map(|p| p.target().clone()).collect()
    };
    targets.sort_by(|a, b| a.name.cmp(&b.name));
    let target_rows: String = targets
        .iter()
        .map(|t| {
            let button = if state.debug_probe.enabled {
                format!(
                    " <a href=\"/probe?target={}&amp;debug=true\">probe now</a>",
                    escape(&t.name)
                )
            } else {
                String::new()
            };
            format!("<li><code>{}</code>{button}</li>", escape(&t.summary()))
        })
        .collect();
    let shard = state
        .shard
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let pairs: String = shard
        .owned
        .iter()
        .map(|(t, s)| {
            format!(
                "<li><code>{}</code> / <code>{}</code></li>",
                escape(t),
                escape(s)
            )
        })
        .collect();
    let header = "<tr><th>started</th><th>target</th><th>scenario</th><th>result</th></tr>";
    format!(
        "<!doctype html><html><head><title>llm-probe</title></head><body>\
         <h1>llm-probe {version}</h1>\
         <p><a href=\"/metrics\">Metrics</a> · <a href=\"/-/healthy\">Health</a> · <a href=\"/-/ready\">Readiness</a></p>\
         <h2>Targets</h2><ul>{target_rows}</ul>\
         <h2>Probed here</h2><p>{shard_line}: {owned} of {all} (target, scenario) pairs</p><ul>{pairs}</ul>\
         <h2>Recent probes</h2><table>{header}{recent}</table>\
         <h2>Recent failures</h2><table>{header}{failures}</table>\
         </body></html>\n",
        version = env!("CARGO_PKG_VERSION"),
        shard_line = shard.shard,
        owned = shard.owned.len(),
        all = shard.all_pairs,
        recent = rows(&state.history.snapshot()),
        failures = rows(&state.history.failures()),
    )
}
