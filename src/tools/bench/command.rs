//! `llm-probe bench` from the command line: flags → plan → sweep → outputs. Exit code 1 for
//! bad input (the message names the flag or name and the fix) and when no request succeeded.

use std::path::Path;
use std::process::ExitCode;

use tokio_util::sync::CancellationToken;

use super::plan::Plan;
use super::progress::Progress;
use super::prompt::{self, PromptSize};
use super::{chart, json, select, sweep, table, Report};
use crate::config::{self, PrefixCache};

/// What `llm-probe bench` prints on stdout (`--output`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// An aligned table and the SLA capacity.
    Table,
    /// The `llm-probe.bench/v1` JSON report, with every request's record.
    Json,
    /// A Markdown report (for a pull request or a wiki).
    Markdown,
}

/// What one `llm-probe bench` run does (the command line's flags, mapped by `cli`).
#[derive(Debug, Clone)]
pub struct Options {
    /// The probes file (YAML) the target and scenario come from.
    pub config_file: std::path::PathBuf,
    /// The target to load (optional when the file has one).
    pub target: Option<String>,
    /// The scenario to send (optional when the target runs one).
    pub scenario: Option<String>,
    /// The sweep: levels, their length, warmup, pauses and caps (validated by [`run`]).
    pub plan: Plan,
    /// Whether every prompt gets a unique nonce (cold) or is sent verbatim (warm).
    pub prefix_cache: PrefixCache,
    /// What to print on stdout.
    pub output: Output,
    /// Also write the report files and charts into this directory (see [`write_all`]).
    pub out: Option<std::path::PathBuf>,
    /// No progress output on stderr.
    pub quiet: bool,
}

/// Runs the command until done or `cancel` (Ctrl-C): what was measured is still written.
pub async fn run(a: Options, cancel: CancellationToken) -> ExitCode {
    let fail = |msg: String| {
        // Paths from the command line may hold control characters: never printed raw.
        crate::logging::stderr_line(format_args!(
            "llm-probe bench: {}",
            crate::sanitize::terminal_safe(&msg)
        ));
        ExitCode::FAILURE
    };
    let cfg = match config::load_with(&a.config_file, config::Secrets::Read) {
        Ok(c) => c,
        Err(e) => {
            crate::logging::stderr_line(&e);
            return ExitCode::FAILURE;
        }
    };
    let (target, scenario) = match select(&cfg, a.target.as_deref(), a.scenario.as_deref()) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let plan = a.plan;
    if let Err(e) = plan.validate() {
        return fail(e);
    }
    // A prompt-length sweep: the generated prompts replace the scenario's messages.
    let smallest = plan.levels.first().and_then(|l| l.prompt_tokens());
    if smallest.is_some() {
        if let Err(e) = prompt::refuse_sized(&scenario) {
            return fail(e);
        }
    }
    // Before any token is spent: the output directory can be created and written.
    if let Some(dir) = &a.out {
        if let Err(e) = writable_dir(dir) {
            return fail(e);
        }
    }
    let progress = Progress::new(a.quiet);
    // The plan's token spend, with the prompt as the server counts it (one request of
    // max_tokens 1 first; nothing is printed with --quiet, so nothing is measured then).
    if !a.quiet {
        // A prompt-length sweep measures its smallest prompt and extrapolates the others.
        let measured = match smallest {
            Some(tokens) => {
                progress.line(&format!(
                    "measuring the prompt: one request of the smallest generated prompt ({tokens} tokens) with max_tokens 1"
                ));
                std::borrow::Cow::Owned(prompt::sized(&scenario, tokens))
            }
            None => {
                progress
                    .line("measuring the prompt: one request of the scenario with max_tokens 1");
                std::borrow::Cow::Borrowed(&*scenario)
            }
        };
        let size = match crate::probe::Prober::new(target.clone()) {
            Ok(prober) => prompt::measure(&prober, &measured, a.prefix_cache, &cancel).await,
            Err(e) => PromptSize::Estimated {
                tokens: prompt::estimate(&measured),
                why: format!("no HTTP client could be built ({e})"),
            },
        };
        let per_level = |l: &super::level::Load| match (l.prompt_tokens(), smallest) {
            (Some(t), Some(s)) => prompt::extrapolate(size.tokens(), s, t),
            _ => size.tokens(),
        };
        match smallest {
            Some(s) => {
                progress.line(&size.for_generated(s));
                let rest: Vec<String> = (plan.levels.iter().skip(1))
                    .filter_map(|l| {
                        let t = l.prompt_tokens()?;
                        Some(format!("{t} → ≈ {}", per_level(l)))
                    })
                    .collect();
                if !rest.is_empty() {
                    progress.line(&format!(
                        "  the larger prompts extrapolated from it ({} per further word at most): {}",
                        prompt::MAX_TOKENS_PER_WORD,
                        rest.join(", ")
                    ));
                }
            }
            None => progress.line(&size.to_string()),
        }
        for l in plan.describe(per_level, scenario.max_tokens) {
            progress.line(&l);
        }
    }
    // Read as the configuration was (a regular file only, capped, never blocking on a FIFO).
    let text = config::files::read(&a.config_file, config::files::MAX_CONFIG_BYTES)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let report = match sweep(
        &text,
        target,
        scenario,
        a.prefix_cache,
        plan,
        cancel,
        progress.clone(),
    )
    .await
    {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    let stdout = match a.output {
        Output::Table => table::to_text(&report),
        Output::Json => format!("{:#}\n", json::to_json(&report)),
        Output::Markdown => table::to_markdown(&report),
    };
    // A closed stdout (`| head`) is not an error worth a panic.
    let _ = std::io::Write::write_all(&mut std::io::stdout(), stdout.as_bytes());
    if let Some(dir) = &a.out {
        match write_all(&report, dir) {
            Ok(files) => progress.line(&format!(
                "wrote {} files to {}",
                files,
                crate::sanitize::terminal_safe(&dir.display().to_string())
            )),
            Err(e) => {
                // The tokens are spent: the per-request records must not be lost with the
                // directory (it became unwritable during the sweep).
                let kept = match keep_json_elsewhere(&report) {
                    Ok(p) => format!("; the JSON report (every request) is in {}", p.display()),
                    Err(e2) => format!("; nor could the JSON report be kept elsewhere: {e2}"),
                };
                return fail(format!("{e}{kept}"));
            }
        }
    }
    // Warmup requests count here: they reached the target, so it is not down.
    let succeeded = report.records.iter().filter(|r| r.result.is_ok()).count();
    if succeeded == 0 {
        return fail("no request succeeded; the failure reasons are in the report above".into());
    }
    ExitCode::SUCCESS
}

/// Creates `dir` if missing and checks a file can be written there (the check's file is
/// removed again), so that `--out` fails before the sweep spends tokens, not after.
///
/// Errors: the directory cannot be created, is not a directory, or is not writable.
pub fn writable_dir(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("--out: cannot create the directory {}: {e}", dir.display()))?;
    // A randomly named file created exclusively (a fixed name followed a planted symlink),
    // removed when dropped.
    tempfile::Builder::new()
        .prefix(".llm-probe-bench-write-check-")
        .tempfile_in(dir)
        .map_err(|e| format!("--out: cannot write into {}: {e}", dir.display()))?;
    Ok(())
}

/// Saves the JSON report in a new file of the system's temporary directory (when `--out`
/// cannot be written after the sweep); returns its path.
fn keep_json_elsewhere(report: &Report) -> Result<std::path::PathBuf, String> {
    let mut f = tempfile::Builder::new()
        .prefix("llm-probe-bench-")
        .suffix(".json")
        .tempfile()
        .map_err(|e| e.to_string())?;
    std::io::Write::write_all(&mut f, format!("{:#}\n", json::to_json(report)).as_bytes())
        .map_err(|e| e.to_string())?;
    let (_, path) = f.keep().map_err(|e| e.to_string())?;
    Ok(path)
}

/// Creates (or truncates) the report file at `path` for writing, never through a symlink or
/// into a FIFO or device planted there ([`crate::safe_write::create_no_follow`]).
///
/// Errors: the file cannot be opened or is not a regular file (the message names it).
pub fn create_report(path: &Path) -> Result<std::fs::File, String> {
    crate::safe_write::create_no_follow(path)
}

/// Writes `report.json`, `report.md`, `report.txt` and the SVG charts into `dir` (created if
/// missing); returns how many files were written.
///
/// Errors: a file cannot be written (the message names it), or a chart cannot be drawn.
pub fn write_all(report: &Report, dir: &Path) -> Result<usize, String> {
    let write = |name: &str, body: &str| {
        let p = dir.join(name);
        create_report(&p).and_then(|mut f| {
            std::io::Write::write_all(&mut f, body.as_bytes())
                .map_err(|e| format!("cannot write {}: {e}", p.display()))
        })
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create the directory {}: {e}", dir.display()))?;
    write("report.json", &format!("{:#}\n", json::to_json(report)))?;
    write("report.md", &table::to_markdown(report))?;
    write("report.txt", &table::to_text(report))?;
    let charts = chart::charts(report)?;
    for (name, svg) in &charts {
        write(name, svg)?;
    }
    Ok(3 + charts.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_out_dir_that_cannot_be_written_is_refused_before_the_sweep() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        std::fs::write(&file, b"x").unwrap();
        let e = writable_dir(&file.join("sub")).unwrap_err();
        assert!(e.starts_with("--out: cannot create the directory"), "{e}");
        let e = writable_dir(&file).unwrap_err();
        assert!(e.starts_with("--out:"), "{e}");
        let out = dir.path().join("new/nested");
        writable_dir(&out).unwrap();
        assert_eq!(
            std::fs::read_dir(&out).unwrap().count(),
            0,
            "the check's file is removed"
        );
    }
}
