//! `/`: one card per (target, scenario) this replica probes.

use std::time::SystemTime;

use maud::{html, Markup};

use super::summary::{ago, Summary};
use super::svg::{y_range, Chart};
use super::{encode, layout, ms, summaries, ExporterState};

/// The overview page.
pub(super) fn page(state: &ExporterState, now: SystemTime) -> Markup {
    let all = summaries(state, now, None);
    let shard = state
        .shard
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let content = html! {
        h1 { "Status" }
        p.muted {
            @if shard.shard.count > 1 { (shard.shard) ": " (all.len()) " of " (shard.all_pairs) } @else { (all.len()) }
            " (target, scenario) pairs probed here. SLO state over the last " (humantime::format_duration(super::SLO_WINDOW))
            ": breached when P95 TTFT is above the objective or P5 tokens/s below the floor; "
            "at risk within 20 % of either, or after a failure."
        }
        @if all.is_empty() { p { "No pairs are probed here yet." } }
        div.cards {
            @for (i, s) in all.iter().enumerate() { (card(s, i, now)) }
        }
    };
    layout(state, "Status", content)
}

fn card(s: &Summary, i: usize, now: SystemTime) -> Markup {
    let age = |t: SystemTime| ago(now.duration_since(t).unwrap_or_default());
    let changed = s.identity_changes.last();
    html! {
        article class=(format!("card {}", s.state.as_str())) {
            h2 {
                a href=(format!("/targets/{}#{}", encode(&s.target), encode(&s.scenario))) {
                    code { (s.target) } " / " code { (s.scenario) }
                }
            }
            span class=(format!("state {}", s.state.as_str())) { (s.state.label()) }
            dl {
                dt { "SLO" }
                dd { "P95 TTFT ≤ " (format!("{:.0}", s.slo_ms())) " ms, P5 ≥ "
                     (s.slo.output_tokens_per_second_min) " tokens/s" }
                dt { "TTFT" } dd { "P50 " (ms(s.ttft_p50_ms)) ", P95 " (ms(s.ttft_p95_ms)) }
                dt { "tokens/s" } dd { "P50 " (number(s.tokens_per_second_p50)) ", P5 " (number(s.tokens_per_second_p5)) }
                dt { "success" } dd {
                    @match s.success_ratio {
                        Some(r) => { (format!("{:.1} %", r * 100.0)) " of " (s.window_probes) }
                        None => { "–" }
                    }
                }
                dt { "last probe" } dd { @match s.last_probe { Some(t) => { (age(t)) " ago" } None => { "none yet" } } }
                dt { "backend" } dd.identity {
                    (s.identity.as_deref().unwrap_or("unknown"))
                    @if let Some(c) = changed { br; strong.changed { "changed " (age(c.at)) " ago" } }
                }
            }
            (sparkline(s, i))
        }
    }
}

fn sparkline(s: &Summary, i: usize) -> Markup {
    let pts = &s.recent_ttft;
    let x = (
        pts.first().map_or(0.0, |p| p.0),
        pts.last().map_or(1.0, |p| p.0),
    );
    let slo = s.slo_ms();
    let values: Vec<f64> = pts.iter().map(|p| p.1).collect();
    let mut c = Chart::new(280.0, 48.0, x, y_range(&values, &[slo]), false);
    c.line(pts, "spark-line");
    c.threshold(slo, "slo", "");
    let desc = match pts.last() {
        Some(last) => format!(
            "TTFT of the last {} successes: latest {:.0} ms; SLO {slo:.0} ms",
            pts.len(),
            last.1
        ),
        None => "TTFT: no successful probe yet".to_string(),
    };
    html! {
        (c.finish(&format!("spark{i}"), &desc, "", ""))
    }
}

/// A rate with one decimal, or a dash.
fn number(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{v:.1}"))
}
