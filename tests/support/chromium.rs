//! Headless Chromium (Debian's `chromium`) for the status-page tests, run as root in a closed
//! network: the flags keep it from phoning home, each run gets a fresh profile.

use std::path::Path;
use std::process::Command;

/// Runs Chromium headless on `url` with `args` and the profile directory `profile`, killed
/// after 120 s; returns (stdout, stderr).
pub fn run(browser: &Path, profile: &Path, args: &[String], url: &str) -> (String, String) {
    let out = Command::new("timeout")
        .arg("120")
        .arg(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Console messages and CSP violations in Chromium's log.
pub fn console_errors(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| {
            l.contains("CONSOLE")
                || l.contains("Content Security Policy")
                || l.contains("Refused to")
                || l.contains("Uncaught")
        })
        .collect()
}
