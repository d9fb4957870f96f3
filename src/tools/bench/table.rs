//! The human outputs: the terminal table, the Markdown report, and one progress line per level.

use super::level::{Criterion, LevelStats, Load, Verdict};
use super::Report;

const HEADER: [&str; 11] = [
    "level",
    "ok/sent",
    "TTFT p50",
    "TTFT p95 [95% CI]",
    "TTFT p99",
    "TPOT p50",
    "ITL p99",
    "tok/s p50",
    "tok/s p5",
    "out tok/s",
    "SLA",
];

/// Seconds as a short human string (`212 ms`, `1.25 s`, `850 µs`).
fn fmt_secs(s: Option<f64>) -> String {
    match s {
        None => "–".into(),
        Some(s) if s >= 1.0 => format!("{s:.2} s"),
        Some(s) if s >= 0.001 => format!("{:.1} ms", s * 1e3),
        Some(s) => format!("{:.0} µs", s * 1e6),
    }
}

fn ci(c: [Option<f64>; 2]) -> String {
    format!("[{}, {}]", fmt_secs(c[0]), fmt_secs(c[1]))
}

fn rate(x: Option<f64>) -> String {
    x.map_or("–".into(), |x| format!("{x:.1}"))
}

fn criterion(c: &Criterion) -> &'static str {
    match c {
        Criterion::TtftP95 => "TTFT p95",
        Criterion::OutputTokensPerSecondP5 => "tok/s p5",
        Criterion::FailureRatio => "failures",
    }
}

fn list(cs: &[Criterion]) -> String {
    cs.iter().map(criterion).collect::<Vec<_>>().join(", ")
}

fn sla(v: &Verdict) -> String {
    let mut s = if v.broken_by.is_empty() {
        "ok".to_string()
    } else {
        format!("broken: {}", list(&v.broken_by))
    };
    if !v.straddles.is_empty() {
        s.push_str(&format!(" (CI straddles: {})", list(&v.straddles)));
    }
    s
}

/// The columns of a prompt-length sweep: the generated size and the server's count, TTFT,
/// prefill speed (the client's and the server's), tokens/s and the failures by reason.
const PROMPT_HEADER: [&str; 12] = [
    "prompt",
    "counted",
    "ok/sent",
    "TTFT p50",
    "TTFT p95 [95% CI]",
    "TTFT p99",
    "prefill tok/s p50",
    "server prefill p50",
    "tok/s p50",
    "out tok/s",
    "failures",
    "SLA",
];

/// A count such as a prompt's size: `4002`, `–` when unknown.
fn count(x: Option<f64>) -> String {
    x.map_or("–".into(), |x| format!("{:.0}", x.round()))
}

/// `reason=n, …` or `–`.
fn failures(s: &LevelStats) -> String {
    let f: Vec<String> = (s.requests.failures_by_reason.iter())
        .map(|(k, n)| format!("{k}={n}"))
        .collect();
    if f.is_empty() {
        "–".into()
    } else {
        f.join(", ")
    }
}

fn prompt_row(s: &LevelStats, v: &Verdict) -> Vec<String> {
    vec![
        s.load.prompt_tokens().map_or("–".into(), |t| t.to_string()),
        count(s.prompt_tokens.p50),
        format!("{}/{}", s.requests.succeeded, s.requests.sent),
        fmt_secs(s.ttft.p50),
        format!("{} {}", fmt_secs(s.ttft.p95), ci(s.ttft.p95_ci)),
        fmt_secs(s.ttft.p99),
        count(s.prefill_tokens_per_second.p50),
        count(s.server_prefill_tokens_per_second.p50),
        rate(s.output_tokens_per_second.p50),
        format!("{:.1}", s.output_throughput),
        failures(s),
        sla(v),
    ]
}

/// Whether `r` is a prompt-length sweep (`--prompt-tokens`).
fn by_prompt(r: &Report) -> bool {
    (r.plan.levels.first()).is_some_and(|l| l.prompt_tokens().is_some())
}

/// The table's rows, the header first: a prompt-length sweep's columns, or the load sweep's.
fn rows(r: &Report) -> Vec<Vec<String>> {
    if by_prompt(r) {
        let mut rows = vec![PROMPT_HEADER.map(String::from).to_vec()];
        rows.extend(r.levels.iter().map(|(s, v)| prompt_row(s, v)));
        rows
    } else {
        let mut rows = vec![HEADER.map(String::from).to_vec()];
        rows.extend(r.levels.iter().map(|(s, v)| row(s, v).to_vec()));
        rows
    }
}

/// What a prompt-length sweep sent, for the report's head (`None` for other sweeps).
fn prompt_line(r: &Report) -> Option<String> {
    let users = r.plan.levels.first().filter(|_| by_prompt(r))?;
    let users = users.users().unwrap_or(1);
    Some(format!(
        "prompt-length sweep at concurrency {users}: each level sends a generated prompt of its size in place of the scenario's messages (system messages kept{}); \"counted\" is the server's count, prefill speed is prompt tokens per second of TTFT",
        if super::prompt::needle(&r.scenario) {
            ", the answer must repeat the code word at its start"
        } else {
            ", no needle"
        }
    ))
}

fn row(s: &LevelStats, v: &Verdict) -> [String; 11] {
    let level = match s.load {
        Load::Concurrency(c) => format!("C={c}"),
        Load::Rate(r) => format!("{r} req/s"),
        Load::Prompt { tokens, .. } => format!("{tokens} tok"),
    };
    [
        level,
        format!("{}/{}", s.requests.succeeded, s.requests.sent),
        fmt_secs(s.ttft.p50),
        format!("{} {}", fmt_secs(s.ttft.p95), ci(s.ttft.p95_ci)),
        fmt_secs(s.ttft.p99),
        fmt_secs(s.tpot.p50),
        fmt_secs(s.itl.p99),
        rate(s.output_tokens_per_second.p50),
        rate(s.output_tokens_per_second.p5),
        format!("{:.1}", s.output_throughput),
        sla(v),
    ]
}

/// One line per finished level, for the progress output.
pub fn progress_line(s: &LevelStats, v: &Verdict) -> String {
    let failures: Vec<String> = s
        .requests
        .failures_by_reason
        .iter()
        .map(|(k, n)| format!("{k}={n}"))
        .collect();
    let prompt = match (s.load, s.prompt_tokens.p50) {
        (Load::Prompt { .. }, counted) => format!(
            " (the server counted {}), prefill p50 {} tokens/s",
            count(counted),
            count(s.prefill_tokens_per_second.p50)
        ),
        _ => String::new(),
    };
    format!(
        "{}{prompt}: {}/{} ok{}, TTFT p50 {} p95 {}, TPOT p50 {}, {:.1} output tokens/s, SLA {}",
        s.load.label(),
        s.requests.succeeded,
        s.requests.sent,
        if failures.is_empty() {
            String::new()
        } else {
            format!(" (failed: {})", failures.join(", "))
        },
        fmt_secs(s.ttft.p50),
        fmt_secs(s.ttft.p95),
        fmt_secs(s.tpot.p50),
        s.output_throughput,
        sla(v)
    )
}

fn capacity_line(r: &Report) -> String {
    let c = &r.capacity;
    let mut s = match (&c.capacity, &c.broken_at) {
        (Some(l), Some(b)) => format!(
            "SLA capacity: {} (first broken at {} by {})",
            l.label(),
            b.label(),
            list(&c.broken_by)
        ),
        (Some(l), None) => format!(
            "SLA capacity: at least {} (no level broke the SLA)",
            l.label()
        ),
        (None, Some(b)) => format!(
            "SLA capacity: none (the first level, {}, breaks it by {})",
            b.label(),
            list(&c.broken_by)
        ),
        (None, None) => "SLA capacity: no level completed".into(),
    };
    for (l, cs) in &c.straddles {
        s.push_str(&format!(
            "\n  {} straddles the SLA ({}): its 95 % CI crosses the threshold; more requests would tell",
            l.label(),
            list(cs)
        ));
    }
    s
}

/// The SLO line; `text` shows the configured names (the model is any string: Markdown escapes
/// it, the terminal shows it without control characters).
fn slo_line(r: &Report, text: fn(&str) -> String) -> String {
    format!(
        "{} / {} on {} — SLO: P95 TTFT ≤ {}, P5 ≥ {} output tokens/s per request, failures ≤ {} %{}",
        text(&r.target.name),
        text(&r.scenario.name),
        text(&r.target.model),
        fmt_secs(Some(r.target.slo.ttft_p95.as_secs_f64())),
        r.target.slo.output_tokens_per_second_min,
        r.plan.max_failure_ratio * 100.0,
        if r.interrupted {
            " (interrupted: partial results)"
        } else {
            ""
        }
    )
}

/// The terminal table: aligned columns, then the SLA capacity.
pub fn to_text(r: &Report) -> String {
    let plain = |s: &str| crate::sanitize::terminal_safe(s).into_owned();
    let mut out = vec![slo_line(r, plain)];
    out.extend(prompt_line(r));
    out.extend([String::new(), aligned(&rows(r)), capacity_line(r)]);
    out.join("\n") + "\n"
}

/// `rows` (the header first) as text columns: each cell padded to its column's widest, two
/// spaces apart, no trailing blanks; one line each.
pub(crate) fn aligned(rows: &[Vec<String>]) -> String {
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c}{}", " ".repeat(w - c.chars().count())))
            .collect();
        out += line.join("  ").trim_end();
        out.push('\n');
    }
    out
}

/// `rows` (the header first) as a Markdown table, `|` in a cell escaped.
pub(crate) fn markdown_table(rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    for (i, r) in rows.iter().enumerate() {
        let cells: Vec<String> = r.iter().map(|c| c.replace('|', "\\|")).collect();
        out += &format!("| {} |\n", cells.join(" | "));
        if i == 0 {
            out += &format!("|{}\n", "---|".repeat(r.len()));
        }
    }
    out
}

/// The Markdown report (for a pull request or a wiki page).
pub fn to_markdown(r: &Report) -> String {
    let mut out = vec![
        format!(
            "## llm-probe bench: {} / {}",
            crate::sanitize::markdown_text(&r.target.name),
            crate::sanitize::markdown_text(&r.scenario.name)
        ),
        String::new(),
        slo_line(r, crate::sanitize::markdown_text),
        String::new(),
    ];
    if let Some(line) = prompt_line(r) {
        out.extend([line, String::new()]);
    }
    out.push(markdown_table(&rows(r)));
    out.push(capacity_line(r).replace("\n  ", "\n- "));
    out.push(String::new());
    out.push(format!(
        "llm-probe {}, {} → {}, config digest `{}`",
        env!("CARGO_PKG_VERSION"),
        humantime::format_rfc3339_seconds(r.started),
        humantime::format_rfc3339_seconds(r.ended),
        r.config_digest
    ));
    out.join("\n") + "\n"
}
