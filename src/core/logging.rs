//! Logging that cannot take the process down: the `tracing` subscriber on stderr, the
//! `--log.level` parser, and line printers for stdout/stderr that ignore a closed stream.
//!
//! A log shipper that dies closes our stderr; every later write fails with `EPIPE`. The
//! subscriber's writer drops such a line and counts it in [`LOG_WRITE_FAILURES`] (exported as
//! `llm_probe_log_write_failures_total`); nothing in the logging path prints with a panicking
//! macro (`eprintln!` panics when stderr is closed).

use std::io::Write;
use std::sync::LazyLock;

use prometheus_client::metrics::counter::Counter;

/// Log output formats on stderr (`--log.format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// logfmt: one line of key=value pairs per event (as Prometheus and its exporters log).
    Logfmt,
    /// One JSON object per line.
    Json,
}

/// Log lines (and command-line messages) that could not be written to stderr or stdout since
/// the process started; exported as `llm_probe_log_write_failures_total`.
pub static LOG_WRITE_FAILURES: LazyLock<Counter> = LazyLock::new(Counter::default);

/// `level`'s directives with the AWS crates (the SigV4 signer of `protocol: bedrock`,
/// `aws-sigv4`, and the smithy and credential types under it) turned off whatever was asked: at
/// trace level the signer logs its parameters, access key id included. A directive naming one of
/// them (`aws_sigv4=trace`, `aws_smithy_runtime_api=debug`) is dropped, so none can turn it
/// back on. The DNS client's crates (`hickory_*`) log errors only unless a directive names them.
fn quiet_aws(level: &str) -> String {
    let kept: Vec<&str> = (level.split(','))
        .filter(|d| !d.trim().starts_with("aws"))
        .collect();
    let kept = kept.join(",");
    let base = if kept.trim().is_empty() {
        "error"
    } else {
        &kept
    };
    // The DNS client of replica discovery warns on every malformed answer (a few a second from
    // a broken server); discovery itself says once what failed. Errors only, unless a
    // directive names it.
    let hickory = if base.contains("hickory") {
        ""
    } else {
        ",hickory_proto=error,hickory_net=error,hickory_resolver=error"
    };
    format!("{base}{hickory},aws_sigv4=off,aws_smithy=off,aws_credential_types=off")
}

/// Installs the `tracing` subscriber on stderr with `level` (as returned by [`parse_level`]).
pub fn init(level: &str, format: LogFormat) {
    // `parse_level` already accepted it; "info" only if a directive slipped through.
    let filter = tracing_subscriber::EnvFilter::try_new(quiet_aws(level))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(quiet_aws("info")));
    // The key `target` is the LLM target a line is about (LogQL `{…} | logfmt | target="x"`);
    // the Rust module that logged is `module_path` in logfmt and left out of JSON.
    let _ = match format {
        LogFormat::Logfmt => {
            use tracing_subscriber::layer::SubscriberExt;
            use tracing_subscriber::util::SubscriberInitExt;
            let layer = tracing_logfmt::builder()
                .with_target(false)
                .with_module_path(true)
                .layer()
                .log_internal_errors(false)
                .with_writer(|| DroppingWriter(std::io::stderr()));
            tracing_subscriber::registry()
                .with(filter)
                .with(layer)
                .try_init()
                .map_err(|e| e.to_string())
        }
        LogFormat::Json => tracing_subscriber::fmt()
            .log_internal_errors(false)
            .json()
            .with_target(false)
            .flatten_event(true)
            .with_env_filter(filter)
            .with_writer(|| DroppingWriter(std::io::stderr()))
            .try_init()
            .map_err(|e| e.to_string()),
    };
}

/// A writer that never fails: a write error (a closed pipe, a full disk) drops the bytes and
/// counts one failure in [`LOG_WRITE_FAILURES`].
pub struct DroppingWriter<W>(pub W);

impl<W: Write> Write for DroppingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        if self.0.write_all(buf).is_err() {
            LOG_WRITE_FAILURES.inc();
        }
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = self.0.flush();
        Ok(())
    }
}

/// Writes one line to stderr; a closed stderr drops it (counted) instead of panicking.
pub fn stderr_line(line: impl std::fmt::Display) {
    let _ = writeln!(DroppingWriter(std::io::stderr().lock()), "{line}");
}

/// Writes `text` to stdout as is; a closed stdout drops it (counted) instead of panicking.
pub fn stdout_text(text: impl std::fmt::Display) {
    let mut out = DroppingWriter(std::io::stdout().lock());
    let _ = write!(out, "{text}");
    let _ = out.flush();
}

/// The level names `--log.level` accepts and what each means.
const LEVEL_ALIASES: &[(&str, &str)] = &[
    ("off", "off"),
    ("none", "off"),
    ("error", "error"),
    ("err", "error"),
    ("fatal", "error"),
    ("critical", "error"),
    ("crit", "error"),
    ("warn", "warn"),
    ("warning", "warn"),
    ("info", "info"),
    ("information", "info"),
    ("informational", "info"),
    ("notice", "info"),
    ("debug", "debug"),
    ("trace", "trace"),
];

fn level(word: &str) -> Option<&'static str> {
    let w = word.trim().to_ascii_lowercase();
    LEVEL_ALIASES
        .iter()
        .find(|(alias, _)| *alias == w)
        .map(|(_, level)| *level)
}

/// Parses `--log.level`: a level name (`error`, `warn`, `info`, `debug`, `trace`, `off`, any
/// case, and the usual aliases such as `warning`, `err`, `information`), or a comma-separated
/// list of `tracing` filter directives `TARGET=LEVEL` (e.g. `info,llm_probe::probe=debug`),
/// whose levels take the same names. Returns the filter string for [`init`].
///
/// Errors: a bare word that is not a level (e.g. a typo: `tracing` would read it as a target
/// name and silently turn logging off), a directive whose level is unknown, or an empty value.
pub fn parse_level(value: &str) -> Result<String, String> {
    let known = "use error, warn, info, debug, trace or off (or TARGET=LEVEL directives, e.g. info,llm_probe::probe=debug)";
    if value.split(',').all(|d| d.trim().is_empty()) {
        return Err(format!("the log level is empty; {known}"));
    }
    let mut out = Vec::new();
    for directive in value.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let normal = match directive.rsplit_once('=') {
            Some((target, lvl)) if !target.trim().is_empty() => match level(lvl) {
                Some(l) => format!("{}={l}", target.trim()),
                None => {
                    return Err(format!(
                        "\"{lvl}\" in the directive \"{directive}\" is not a log level; {known}"
                    ))
                }
            },
            Some(_) => {
                return Err(format!(
                    "the directive \"{directive}\" names no target; {known}"
                ))
            }
            None => match level(directive) {
                Some(l) => l.to_string(),
                None => return Err(format!("\"{directive}\" is not a log level; {known}")),
            },
        };
        out.push(normal);
    }
    let filter = out.join(",");
    tracing_subscriber::EnvFilter::try_new(&filter)
        .map_err(|e| format!("\"{value}\" is not a valid filter ({e}); {known}"))?;
    Ok(filter)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_aws_crates_stay_off_whatever_is_asked() {
        let q =
            super::quiet_aws("trace, aws_sigv4=trace,llm_probe=debug,aws_smithy_runtime_api=trace");
        assert_eq!(
            q,
            "trace,llm_probe=debug,hickory_proto=error,hickory_net=error,hickory_resolver=error,aws_sigv4=off,aws_smithy=off,aws_credential_types=off"
        );
        // A directive naming the DNS client keeps its level.
        assert!(!super::quiet_aws("info,hickory_proto=debug").contains("hickory_proto=error"));
        assert!(super::quiet_aws("aws_sigv4=trace").starts_with("error,"));
        tracing_subscriber::EnvFilter::try_new(q).unwrap();
    }

    use super::*;

    #[test]
    fn log_levels_accept_aliases_and_reject_the_rest() {
        let ok = [
            ("info", "info"),
            ("INFO", "info"),
            ("warning", "warn"),
            ("Warn", "warn"),
            ("err", "error"),
            ("ERROR", "error"),
            ("information", "info"),
            ("debug", "debug"),
            ("trace", "trace"),
            ("off", "off"),
            (" info ", "info"),
            ("info,llm_probe::probe=debug", "info,llm_probe::probe=debug"),
            ("llm_probe=Warning", "llm_probe=warn"),
            ("info,", "info"),
        ];
        for (given, want) in ok {
            assert_eq!(parse_level(given).as_deref(), Ok(want), "{given:?}");
        }
        for bad in [
            "warnig",
            "llm_probe",
            "verbose",
            "",
            "  ",
            "info,bogus",
            "x=loud",
            "=info",
        ] {
            let e = parse_level(bad).expect_err(bad);
            assert!(
                e.contains("error, warn, info, debug, trace"),
                "{bad:?}: {e}"
            );
        }
    }

    struct Closed;
    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
    }

    #[test]
    fn a_failed_write_is_dropped_and_counted() {
        let before = LOG_WRITE_FAILURES.get();
        let mut w = DroppingWriter(Closed);
        assert!(w.write_all(b"a line\n").is_ok());
        assert_eq!(w.write(b"x").ok(), Some(1));
        assert!(w.flush().is_ok());
        assert!(LOG_WRITE_FAILURES.get() >= before + 2);
    }
}
