//! `/`: a summary bar with the count of pairs in each state, a filter (state, target,
//! location: query parameters of a plain GET form, no script), and one card per (target,
//! scenario) this replica probes, worst first. A down or failing card says why and since when
//! in its text. `?view=wall` is the wall screen: a dense grid of small cards in large type,
//! without navigation or footer (50 pairs fit a 1920×1080 screen).

use std::time::SystemTime;

use maud::{html, Markup};

use super::state::PairState;
use super::summary::{ago, Summary};
use super::svg::{y_range, Chart};
use super::{encode, layout, ms, summaries, ExporterState, View};

/// Characters of a failure detail a card shows (the target page has it all).
const DETAIL_CHARS: usize = 160;

/// The overview's query: `state=` (repeatable), `target=` (a substring of the name),
/// `location=` (this exporter's location or nothing), `view=wall`.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct Filter {
    states: Vec<PairState>,
    target: String,
    location: String,
    wall: bool,
}

impl Filter {
    /// The filter in `query`; unknown parameters and values are ignored (a page, not an API).
    pub(super) fn parse(query: &[(String, String)]) -> Filter {
        let mut f = Filter::default();
        for (k, v) in query {
            match k.as_str() {
                "state" => {
                    if let Some(st) = PairState::parse(v).filter(|st| !f.states.contains(st)) {
                        f.states.push(st);
                    }
                }
                "target" => f.target = shown(v),
                "location" => f.location = shown(v),
                "view" => f.wall = v == "wall",
                _ => {}
            }
        }
        f
    }

    fn active(&self) -> bool {
        !self.states.is_empty() || !self.target.is_empty() || !self.location.is_empty()
    }

    fn keeps(&self, s: &Summary, location: Option<&str>) -> bool {
        (self.states.is_empty() || self.states.contains(&s.state))
            && (self.target.is_empty()
                || s.target
                    .to_lowercase()
                    .contains(&self.target.to_lowercase()))
            && (self.location.is_empty() || location == Some(self.location.as_str()))
    }

    /// This filter's query with the state set to `state` (`None`: any), for the summary
    /// bar's links.
    fn with_state(&self, state: Option<PairState>) -> String {
        let mut q: Vec<String> = Vec::new();
        if let Some(s) = state {
            q.push(format!("state={}", s.as_str()));
        }
        if !self.target.is_empty() {
            q.push(format!("target={}", encode(&self.target)));
        }
        if !self.location.is_empty() {
            q.push(format!("location={}", encode(&self.location)));
        }
        if self.wall {
            q.push("view=wall".into());
        }
        if q.is_empty() {
            String::new()
        } else {
            format!("?{}", q.join("&"))
        }
    }
}

/// A filter value as the page echoes it (in the form and the summary bar's links): trimmed,
/// without control or bidirectional characters, which no target or location name holds and
/// which a crafted link would otherwise put raw into the page (a NUL, a right-to-left
/// override reordering the form).
fn shown(v: &str) -> String {
    v.chars()
        .filter(|&c| !crate::sanitize::is_unsafe_char(c))
        .collect::<String>()
        .trim()
        .to_string()
}

/// Pairs per state, most severe first (every state, zeros included).
pub(super) fn counts(all: &[Summary]) -> Vec<(PairState, usize)> {
    PairState::ALL
        .iter()
        .map(|&st| (st, all.iter().filter(|s| s.state == st).count()))
        .collect()
}

/// `all` worst first: by state, then target, then scenario.
pub(super) fn worst_first(all: &mut [Summary]) {
    all.sort_by(|a, b| (a.state, &a.target, &a.scenario).cmp(&(b.state, &b.target, &b.scenario)));
}

/// The overview page for `query`.
pub(super) fn page(state: &ExporterState, query: &[(String, String)], now: SystemTime) -> Markup {
    let filter = Filter::parse(query);
    let mut all = summaries(state, now, None);
    worst_first(&mut all);
    let location = state.identity.location.as_deref();
    let shown: Vec<&Summary> = all.iter().filter(|s| filter.keeps(s, location)).collect();
    let shard = state
        .shard
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let u = &state.urls;
    let view = if filter.wall { View::Wall } else { View::Full };
    let content = html! {
        @if !filter.wall {
            h1 { "Status" }
            p.muted {
                @if shard.shard.count > 1 { (shard.shard) ": " (all.len()) " of " (shard.all_pairs) } @else { (all.len()) }
                @if all.len() == 1 && shard.shard.count <= 1 { " (target, scenario) pair" } @else { " (target, scenario) pairs" }
                " probed here, worst first. State over the last "
                (humantime::format_duration(super::WINDOW)) " (the alerts' window): "
                strong { "down" } " every probe failed, " strong { "failing" } " some failed, "
                strong { "breached" } " P95 TTFT above the objective or P5 tokens/s below the floor, "
                strong { "at risk" } " within 20 % of either, " strong { "no data" } " nothing probed in the window."
            }
        }
        nav.summary aria-label="pairs per state" {
            a.count.all href=(u.link(&format!("/{}", filter.with_state(None))))
                aria-current=[(filter.states.is_empty()).then_some("true")] {
                span.n { (all.len()) } " all"
            }
            @for (st, n) in counts(&all) {
                a class=(format!("count {}{}", st.as_str(), if n == 0 { " zero" } else { "" }))
                    href=(u.link(&format!("/{}", filter.with_state(Some(st)))))
                    data-state=(st.as_str()) data-count=(n)
                    aria-current=[(filter.states == [st]).then_some("true")] {
                    span.n { (n) } " " (st.label())
                }
            }
        }
        @if !filter.wall { (form(state, &filter, &all)) }
        @if filter.active() {
            p.muted.showing { "Showing " (shown.len()) " of " (all.len()) ". " a href=(u.link(if filter.wall { "/?view=wall" } else { "/" })) { "Clear the filter" } }
        }
        @if all.is_empty() { p { "No pairs are probed here yet." } }
        div.cards {
            @for (i, s) in shown.iter().enumerate() {
                @if filter.wall { (wall_card(state, s, now)) } @else { (card(state, s, i, now)) }
            }
        }
    };
    layout(state, "Status", view, content)
}

/// The filter form: a GET to the overview, no script.
fn form(state: &ExporterState, f: &Filter, all: &[Summary]) -> Markup {
    let mut targets: Vec<&str> = all.iter().map(|s| s.target.as_str()).collect();
    targets.sort_unstable();
    targets.dedup();
    let location = state.identity.location.as_deref();
    html! {
        form.filter method="get" action=(state.urls.link("/")) {
            label { "State " select name="state" {
                option value="" { "any" }
                @for st in PairState::ALL {
                    option value=(st.as_str()) selected[f.states == [st]] { (st.label()) }
                }
            } }
            label { "Target " input name="target" value=(f.target) list="targets" placeholder="name contains…" size="16"; }
            datalist id="targets" { @for t in &targets { option value=(t) {} } }
            @if let Some(l) = location {
                label { "Location " select name="location" {
                    option value="" { "any" }
                    option value=(l) selected[f.location == l] { (l) }
                } }
            }
            button type="submit" { "Filter" }
        }
    }
}

/// `t`'s clock time (UTC) and age: `17:42:10 UTC (12 min ago)`.
fn since(t: SystemTime, now: SystemTime) -> String {
    let clock = humantime::format_rfc3339_seconds(t).to_string();
    format!(
        "{} UTC ({} ago)",
        clock.get(11..19).unwrap_or(&clock),
        ago(now.duration_since(t).unwrap_or_default())
    )
}

/// At most [`DETAIL_CHARS`] characters of `detail`, on one line.
fn short_detail(detail: &str) -> String {
    let one_line: String = detail
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let mut out: String = one_line.chars().take(DETAIL_CHARS).collect();
    if one_line.chars().count() > DETAIL_CHARS {
        out.push('…');
    }
    out
}

/// The reason line of a down or failing card: why and since when.
fn reason(s: &Summary, now: SystemTime) -> Markup {
    html! {
        @if let Some((why, detail)) = &s.reason {
            p.reason {
                @match s.state {
                    PairState::Down => { "Every probe failed since " }
                    _ => { "Failures since " }
                }
                @if let Some(t) = s.since { (since(t, now)) }
                ": " strong { (why.as_str()) } " — " span.detail { (short_detail(detail)) }
            }
        }
    }
}

fn card(state: &ExporterState, s: &Summary, i: usize, now: SystemTime) -> Markup {
    let age = |t: SystemTime| ago(now.duration_since(t).unwrap_or_default());
    let changed = s.identity_changes.last();
    let href = state.urls.link(&format!(
        "/targets/{}#{}",
        encode(&s.target),
        encode(&s.scenario)
    ));
    html! {
        article class=(format!("card {}", s.state.as_str())) data-state=(s.state.as_str()) {
            h2 {
                a href=(href) { code { (s.target) } " / " code { (s.scenario) } }
            }
            span class=(format!("state {}", s.state.as_str())) { (s.state.label()) }
            (reason(s, now))
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
                @if let Some(worst) = s.replicas.first() {
                    dt { "replicas" } dd {
                        (s.replicas.len() + s.replicas_not_listed) "; worst " code { (worst.replica) } " "
                        span class=(format!("state {}", worst.summary.state.as_str())) { (worst.summary.state.label()) }
                    }
                }
                dt { "backend" } dd.identity {
                    (s.identity.as_deref().unwrap_or("unknown"))
                    @if let Some(c) = changed { br; strong.changed { "changed " (age(c.at)) " ago" } }
                }
            }
            (sparkline(s, i))
        }
    }
}

/// A wall-screen card: name, state, the P95 (or why it is down), one more line.
fn wall_card(state: &ExporterState, s: &Summary, now: SystemTime) -> Markup {
    let href = state.urls.link(&format!(
        "/targets/{}#{}",
        encode(&s.target),
        encode(&s.scenario)
    ));
    html! {
        article class=(format!("card tile {}", s.state.as_str())) data-state=(s.state.as_str()) {
            a.name href=(href) { (s.target) " / " (s.scenario) }
            div.line {
                span class=(format!("state {}", s.state.as_str())) { (s.state.label()) }
                span.value { "P95 " (ms(s.ttft_p95_ms)) }
            }
            @if let Some((why, detail)) = &s.reason {
                p.reason {
                    strong { (why.as_str()) }
                    @if let Some(t) = s.since { " since " (since(t, now).split(" (").next().unwrap_or("")) }
                    " — " span.detail { (short_detail(detail)) }
                }
            } @else {
                p.sub {
                    "SLO " (format!("{:.0}", s.slo_ms())) " ms · "
                    @match s.success_ratio {
                        Some(r) => { (format!("{:.0} %", r * 100.0)) " ok of " (s.window_probes) }
                        None => { "nothing probed in 10 min" }
                    }
                }
            }
        }
    }
}

/// The TTFT sparkline with the latest value and the SLO labelled.
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
        div.spark-row {
            (c.finish(&format!("spark{i}"), &desc, "", ""))
            span.spark-label {
                span.now { "TTFT " @match pts.last() { Some(l) => { (format!("{:.0} ms", l.1)) } None => { "–" } } }
                span.slo-text { "SLO " (format!("{slo:.0}")) " ms" }
            }
        }
    }
}

/// A rate with one decimal, or a dash.
fn number(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{v:.1}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Vec<(String, String)> {
        super::super::query_pairs(s)
    }

    #[test]
    fn filter_from_query_parameters() {
        let f = Filter::parse(&q(
            "state=down&state=failing&target=GPU&view=wall&x=1&state=red",
        ));
        assert_eq!(f.states, [PairState::Down, PairState::Failing]);
        assert_eq!(f.target, "GPU");
        assert!(f.wall && f.active());
        assert_eq!(
            f.with_state(Some(PairState::Ok)),
            "?state=ok&target=GPU&view=wall"
        );
        assert_eq!(Filter::parse(&q("")).with_state(None), "");
        assert!(!Filter::parse(&q("view=wall")).active());
        assert_eq!(short_detail("a\nb"), "a b");
        // Break-it pass: a crafted link's control and bidi characters are not echoed raw, and
        // a state repeated thousands of times is kept once.
        let f = Filter::parse(&q(&format!(
            "target=%00g%1Bp%E2%80%AEu&location=%E2%80%8Feu%0A&{}",
            "state=down&".repeat(5000)
        )));
        assert_eq!(f.target, "gpu");
        assert_eq!(f.location, "eu");
        assert_eq!(f.states, [PairState::Down]);
        assert_eq!(
            short_detail(&"x".repeat(200)).chars().count(),
            DETAIL_CHARS + 1
        );
    }
}
