//! `/targets/{target}`: per scenario, charts over the kept history — TTFT points with rolling
//! P50/P95 and the SLO line, tokens/s with the floor, TPOT and ITL P95, failure marks by
//! reason (detail on hover), markers at backend identity changes and configuration reloads —
//! and a table of the kept failures as the charts' text alternative.

use std::time::SystemTime;

use maud::{html, Markup};

use super::summary::{ago, Summary};
use super::svg::{fail_shape, legend_key, rolling, secs, y_range, Chart, FailGroup};
use super::{configured, encode, layout, ms, rate, summaries, ExporterState, View};
use crate::history::RecentProbe;

/// Probes in the rolling P50/P95 windows.
const ROLLING: usize = 20;

/// The page of `target`; `None` when it is not probed here.
pub(super) fn page(state: &ExporterState, target: &str, now: SystemTime) -> Option<Markup> {
    let mine: Vec<(Summary, Kept)> = summaries(state, now, Some(target))
        .into_iter()
        .map(|s| {
            let kept = Kept::newest(
                state.history.probes(&s.target, &s.scenario),
                state.history.pair_failures(&s.target, &s.scenario),
            );
            (s, kept)
        })
        .collect();
    if mine.is_empty() {
        return None;
    }
    let summary = configured(state, target).unwrap_or_default();
    let reloads = state.history.reloads();
    let debug = state.debug_probe.enabled;
    let content = html! {
        h1 { (target) }
        p.muted { code { (summary) } }
        @for (i, (s, kept)) in mine.iter().enumerate() {
            section.scenario id=(s.scenario) {
                h2 { (s.scenario) " " span class=(format!("state {}", s.state.as_str())) { (s.state.label()) } }
                @if let Some((why, detail)) = &s.reason {
                    p.reason {
                        @match s.state { super::PairState::Down => { "Every probe failed" } _ => { "Some probes failed" } }
                        @if let Some(t) = s.since { " since " (humantime::format_rfc3339_seconds(t)) " (" (ago(now.duration_since(t).unwrap_or_default())) " ago)" }
                        ": " strong { (why.as_str()) } " — " span.detail { (detail) }
                    }
                }
                @let checks = checks_failed(kept);
                @if !checks.is_empty() {
                    p.reason {
                        "Wrong answers (reason wrong_answer) among the kept failures, by answer check: "
                        @for (j, (check, n)) in checks.iter().enumerate() {
                            @if j > 0 { ", " }
                            strong { (check) } " × " (n)
                        }
                    }
                }
                p {
                    "Last " (humantime::format_duration(super::WINDOW)) ": TTFT P50 " (ms(s.ttft_p50_ms)) ", P95 " (ms(s.ttft_p95_ms))
                    " (SLO ≤ " (format!("{:.0}", s.slo_ms())) " ms) · tokens/s P5 " (rate(s.tokens_per_second_p5))
                    " (floor " (s.slo.output_tokens_per_second_min) ") · backend "
                    span.identity { (s.identity.as_deref().unwrap_or("unknown")) }
                    @if let Some(c) = s.identity_changes.last() {
                        " — changed " (ago(now.duration_since(c.at).unwrap_or_default())) " ago"
                    }
                }
                (replica_table(s, now))
                @if debug {
                    p {
                        a href=(state.urls.link(&format!("/probe?target={}&scenario={}", encode(target), encode(&s.scenario)))) { "probe now" }
                        " · "
                        a href=(state.urls.link(&format!("/probe?target={}&scenario={}&debug=true", encode(target), encode(&s.scenario)))) { "debug probe (timeline and raw stream)" }
                    }
                }
                (legend())
                div.charts {
                    figure { figcaption { "TTFT (ms)" } (ttft_chart(s, kept, &reloads, i)) }
                    figure { figcaption { "Output tokens/s per probe" } (series_chart(s, kept, &reloads, i, Series::Tps)) }
                    figure { figcaption { "TPOT and ITL P95 (ms)" } (series_chart(s, kept, &reloads, i, Series::Tpot)) }
                }
                (failure_table(state, kept))
            }
        }
    };
    Some(layout(state, target, View::Full, content))
}

/// The charts' legend: each key drawn as the mark itself (same class, so same colour and
/// shape); failure kinds differ in shape as well as colour.
fn legend() -> Markup {
    let line = |class: &str, text: &str| {
        (
            legend_key(
                html! { line class=(format!("legend {class}")) x1="1" x2="23" y1="7" y2="7" {} },
            ),
            text.to_string(),
        )
    };
    let dot = |class: &str, text: &str| {
        (
            legend_key(html! { circle class=(format!("legend {class}")) cx="12" cy="7" r="4" {} }),
            text.to_string(),
        )
    };
    let mut keys = vec![
        dot("pt ttft", "TTFT per probe"),
        line("p50", "rolling P50"),
        line("p95", "rolling P95"),
        line("slo", "SLO / floor"),
        dot("pt tps", "output tokens/s"),
        dot("pt tpot", "TPOT"),
        dot("pt itl", "ITL P95 of the probe"),
        line("ident", "backend change"),
        line("reload", "config reload"),
    ];
    for g in FailGroup::ALL {
        keys.push((
            legend_key(fail_shape(12.0, 7.0, g, &format!("legend {}", g.class()))),
            format!("failed: {}", g.label()),
        ));
    }
    html! {
        ul.legend {
            @for (key, text) in &keys { li { (key) (text) } }
            li.muted { "(hover or tap a mark for its detail)" }
        }
    }
}

/// A pair's kept probes and failures, oldest first.
/// Probes, and failures, a target page draws and lists per scenario at most: the flags allow
/// 100,000 kept probes and 4× as many failures per pair, about 2 KB of page each.
const SHOWN: usize = 1000;

/// A pair's kept probes and failures as its charts and table show them (oldest first).
struct Kept {
    probes: Vec<RecentProbe>,
    failures: Vec<RecentProbe>,
    /// Failures kept in all (more than `failures` when cut).
    all_failures: usize,
    /// Probes and failures kept but not shown, older than every shown one.
    hidden: usize,
}

impl Kept {
    /// At most the newest [`SHOWN`] probes and [`SHOWN`] failures, over one common time span
    /// (a list cut shorter than the other would show its older part as calm).
    fn newest(mut probes: Vec<RecentProbe>, mut failures: Vec<RecentProbe>) -> Kept {
        let (all_probes, all_failures) = (probes.len(), failures.len());
        let cut = |v: &[RecentProbe]| (v.len() > SHOWN).then(|| v[v.len() - SHOWN].started_at);
        if let Some(from) = cut(&probes).max(cut(&failures)) {
            probes.retain(|p| p.started_at >= from);
            failures.retain(|p| p.started_at >= from);
            probes.drain(..probes.len().saturating_sub(SHOWN));
            failures.drain(..failures.len().saturating_sub(SHOWN));
        }
        let hidden = all_probes + all_failures - probes.len() - failures.len();
        Kept {
            probes,
            failures,
            all_failures,
            hidden,
        }
    }
}

/// The time span of a pair's charts: its kept probes and failures.
fn span(s: &Kept) -> (f64, f64) {
    let times = s
        .probes
        .iter()
        .chain(&s.failures)
        .map(|p| secs(p.started_at));
    times.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), t| {
        (a.min(t), b.max(t))
    })
}

/// Failure marks, identity-change and reload markers, common to every chart of a pair.
fn annotate(c: &mut Chart, s: &Summary, kept: &Kept, reloads: &[SystemTime], x: (f64, f64)) {
    for f in &kept.failures {
        if let Some((reason, detail)) = &f.failure {
            let when = humantime::format_rfc3339_seconds(f.started_at);
            c.failure(
                secs(f.started_at),
                *reason,
                &format!("{when} failed: {reason}: {detail}"),
            );
        }
    }
    for ch in &s.identity_changes {
        c.marker(
            secs(ch.at),
            "ident",
            &format!("backend changed: {} → {}", ch.from, ch.to),
        );
    }
    for r in reloads
        .iter()
        .map(|r| secs(*r))
        .filter(|r| (x.0..=x.1).contains(r))
    {
        c.marker(r, "reload", "configuration reloaded");
    }
}

fn point_title(p: &RecentProbe, what: &str) -> String {
    format!(
        "{}: {what}",
        humantime::format_rfc3339_seconds(p.started_at)
    )
}

fn ttft_chart(s: &Summary, kept: &Kept, reloads: &[SystemTime], i: usize) -> Markup {
    let pts: Vec<(f64, f64, &RecentProbe)> = kept
        .probes
        .iter()
        .filter_map(|p| Some((secs(p.started_at), p.ttft?.as_secs_f64() * 1e3, p)))
        .collect();
    let xy: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, p.1)).collect();
    let slo = s.slo_ms();
    let x = span(kept);
    let mut c = Chart::new(
        480.0,
        250.0,
        x,
        y_range(&xy.iter().map(|p| p.1).collect::<Vec<_>>(), &[slo]),
        true,
    );
    c.threshold(slo, "slo", &format!("SLO P95 ≤ {slo:.0} ms"));
    c.line(&rolling(&xy, ROLLING, 0.5), "p50");
    c.line(&rolling(&xy, ROLLING, 0.95), "p95");
    for (t, v, p) in &pts {
        c.point(
            *t,
            *v,
            "pt ttft",
            &point_title(p, &format!("TTFT {v:.0} ms")),
        );
    }
    annotate(&mut c, s, kept, reloads, x);
    let desc = format!(
        "{} successful probes and {} failures shown; TTFT P50 {}, P95 {} over the last {}; SLO P95 ≤ {slo:.0} ms; {} backend changes.",
        pts.len(),
        kept.failures.len(),
        ms(s.ttft_p50_ms),
        ms(s.ttft_p95_ms),
        humantime::format_duration(super::WINDOW),
        s.identity_changes.len()
    );
    c.finish(
        &format!("ttft{i}"),
        &format!("TTFT of {} / {}", s.target, s.scenario),
        &desc,
        " ms",
    )
}

#[derive(Clone, Copy)]
enum Series {
    Tps,
    Tpot,
}

fn series_chart(
    s: &Summary,
    kept: &Kept,
    reloads: &[SystemTime],
    i: usize,
    which: Series,
) -> Markup {
    let x = span(kept);
    let pick = |p: &RecentProbe| -> Vec<(f64, &'static str, String)> {
        match which {
            Series::Tps => p
                .output_tokens_per_second
                .map(|v| (v, "pt tps", format!("{v:.1} tokens/s")))
                .into_iter()
                .collect(),
            Series::Tpot => {
                let tpot = p.tpot.map(|d| {
                    let v = d.as_secs_f64() * 1e3;
                    (v, "pt tpot", format!("TPOT {v:.1} ms"))
                });
                let itl = p.itl.map(|i| {
                    let v = i.p95.as_secs_f64() * 1e3;
                    (
                        v,
                        "pt itl",
                        format!(
                            "ITL P95 {v:.1} ms (P50 {:.1} ms)",
                            i.p50.as_secs_f64() * 1e3
                        ),
                    )
                });
                tpot.into_iter().chain(itl).collect()
            }
        }
    };
    let pts: Vec<(f64, f64, &'static str, String)> = kept
        .probes
        .iter()
        .flat_map(|p| {
            pick(p)
                .into_iter()
                .map(move |(v, class, what)| (secs(p.started_at), v, class, point_title(p, &what)))
        })
        .collect();
    let floor = s.slo.output_tokens_per_second_min;
    let extra = matches!(which, Series::Tps).then_some(floor);
    let mut c = Chart::new(
        480.0,
        210.0,
        x,
        y_range(
            &pts.iter().map(|p| p.1).collect::<Vec<_>>(),
            &extra.into_iter().collect::<Vec<_>>(),
        ),
        true,
    );
    if let Some(f) = extra {
        c.threshold(f, "floor", &format!("floor {f} tokens/s"));
    }
    for (t, v, class, title) in &pts {
        c.point(*t, *v, class, title);
    }
    annotate(&mut c, s, kept, reloads, x);
    let (id, title, desc, unit) = match which {
        Series::Tps => (
            format!("tps{i}"),
            format!("Output tokens/s of {} / {}", s.target, s.scenario),
            format!(
                "Per-probe output tokens/s; P50 {}, P5 {} over the window; floor {floor} tokens/s.",
                rate(s.tokens_per_second_p50),
                rate(s.tokens_per_second_p5)
            ),
            "",
        ),
        Series::Tpot => (
            format!("tpot{i}"),
            format!("TPOT and ITL P95 of {} / {}", s.target, s.scenario),
            "Per-probe TPOT (sky blue dots) and the probe's P95 inter-token latency (yellow dots), ms.".to_string(),
            " ms",
        ),
    };
    c.finish(&id, &title, &desc, unit)
}

/// The kept `wrong_answer` failures of a pair counted by answer check (the fixed set of
/// [`crate::check::CheckName`], read from the detail's `check NAME:` prefix), most frequent
/// first.
fn checks_failed(s: &Kept) -> Vec<(&'static str, usize)> {
    let mut counts: Vec<(&'static str, usize)> = Vec::new();
    let wrong = s.failures.iter().filter_map(|f| match &f.failure {
        Some((crate::measure::FailureReason::WrongAnswer, detail)) => Some(detail),
        _ => None,
    });
    for detail in wrong {
        let named = crate::check::CheckName::ALL
            .iter()
            .map(|c| c.as_str())
            .find(|c| {
                detail
                    .strip_prefix("check ")
                    .and_then(|d| d.strip_prefix(c))
                    .is_some_and(|rest| rest.starts_with(':'))
            });
        if let Some(c) = named {
            match counts.iter_mut().find(|(n, _)| *n == c) {
                Some((_, k)) => *k += 1,
                None => counts.push((c, 1)),
            }
        }
    }
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    counts
}

/// A pool's replicas, worst first, each judged over its own probes in the window as the pair
/// is (nothing for a target without `replicas:`).
fn replica_table(s: &Summary, now: SystemTime) -> Markup {
    if s.replicas.is_empty() {
        return html! {};
    }
    let pct = |r: Option<f64>| r.map_or("–".into(), |r| format!("{:.0} %", r * 100.0));
    html! {
        div.table-wrap { table.replicas {
            caption {
                "Replicas (" (s.replicas.len() + s.replicas_not_listed) "), worst first: each probed in the last "
                (humantime::format_duration(super::WINDOW)) ", judged over its own probes"
                @if s.replicas_not_listed > 0 { "; the best " (s.replicas_not_listed) " are not listed" }
            }
            tr {
                th { "replica" } th { "state" } th { "probes" } th { "success" }
                th { "TTFT P50" } th { "TTFT P95" } th { "tokens/s P50" } th { "tokens/s P5" }
                th { "backend" } th { "last probe" }
            }
            @for r in &s.replicas {
                @let m = &r.summary;
                tr {
                    td { code { (r.replica) } }
                    td {
                        span class=(format!("state {}", m.state.as_str())) { (m.state.label()) }
                        @if let Some((why, detail)) = &m.reason { " " span.detail title=(detail) { (why.as_str()) } }
                    }
                    td { (m.window_probes) }
                    td { (pct(m.success_ratio)) }
                    td { (ms(m.ttft_p50_ms)) }
                    td { (ms(m.ttft_p95_ms)) }
                    td { (rate(m.tokens_per_second_p50)) }
                    td { (rate(m.tokens_per_second_p5)) }
                    td.identity { (m.identity.as_deref().unwrap_or("unknown")) }
                    td { @if let Some(t) = m.last_probe { (ago(now.duration_since(t).unwrap_or_default())) " ago" } @else { "–" } }
                }
            }
        } }
    }
}

/// The kept failures, newest first; each one's start links to its record
/// (`/probes/{trace_id}`) when it sent a trace id.
fn failure_table(state: &ExporterState, s: &Kept) -> Markup {
    html! {
        details {
            summary {
                (s.all_failures) " failures kept"
                @if s.hidden > 0 { " (the charts and this table show the newest " (s.failures.len()) "; the API has them all)" }
            }
            div.table-wrap { table {
                tr { th { "started" } th { "reason" } th { "detail" } }
                @for f in s.failures.iter().rev() {
                    @if let Some((reason, detail)) = &f.failure {
                        tr {
                            td {
                                @let when = humantime::format_rfc3339_seconds(f.started_at);
                                @if let Some(id) = f.trace_id {
                                    a href=(state.urls.link(&super::record::path(id))) title=(format!("trace id {id}")) { (when) }
                                } @else { (when) }
                            }
                            td { (reason.as_str()) }
                            td.detail { (detail) }
                        }
                    }
                }
            } }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(s: u64, failed: bool) -> RecentProbe {
        RecentProbe {
            target: "t".into(),
            scenario: "s".into(),
            replica: "".into(),
            started_at: SystemTime::UNIX_EPOCH + Duration::from_secs(s),
            ttft: None,
            output_tokens_per_second: None,
            tpot: None,
            itl: None,
            e2e: None,
            output_tokens: None,
            failure: failed.then(|| (crate::measure::FailureReason::Timeout, String::new())),
            identity: None,
            trace_id: None,
        }
    }

    /// Cut lists share one span: probes 0..1500 s (one a second), failures at 0..10 s and
    /// 1490 s; the newest 1000 probes start at 500 s, so the early failures go too.
    #[test]
    fn cut_lists_share_one_time_span() {
        let probes: Vec<_> = (0..1500).map(|s| at(s, false)).collect();
        let failures: Vec<_> = (0..10).chain([1490]).map(|s| at(s, true)).collect();
        let k = Kept::newest(probes.clone(), failures.clone());
        assert_eq!(k.probes.len(), SHOWN);
        assert_eq!(k.failures.len(), 1);
        assert_eq!((k.all_failures, k.hidden), (11, 510));
        let small = Kept::newest(probes[..10].to_vec(), failures);
        assert_eq!(
            (small.probes.len(), small.failures.len(), small.hidden),
            (10, 11, 0)
        );
    }

    #[test]
    fn wrong_answers_are_counted_by_check_only_from_the_fixed_set() {
        use crate::measure::FailureReason::{Timeout, WrongAnswer};
        let failed = |s, reason, detail: &str| RecentProbe {
            failure: Some((reason, detail.to_string())),
            ..at(s, true)
        };
        let failures = vec![
            failed(1, WrongAnswer, "check contains: expected \"Paris\""),
            failed(
                2,
                WrongAnswer,
                "check repetition_loop: the answer ends in a loop",
            ),
            failed(
                3,
                WrongAnswer,
                "check repetition_loop: the answer ends in a loop",
            ),
            failed(4, Timeout, "check contains: not a wrong answer"),
            failed(5, WrongAnswer, "check <script>: made up"),
        ];
        let k = Kept::newest(Vec::new(), failures);
        assert_eq!(
            checks_failed(&k),
            vec![("repetition_loop", 2), ("contains", 1)]
        );
    }
}
