//! Time windows of `compare --prometheus.url`: `--before START/END` and `--after START/END`.
//!
//! Each end is one of
//! - RFC 3339: `2026-11-30T14:00:00Z`, `2026-11-30T16:00:00.5+02:00` (`T` or a space);
//! - Unix seconds: `1796047200` or `1796047200.25`;
//! - relative to now: `now`, `now-2h`, `now-90m`, `now-1h30m` (a humantime duration).
//!
//! Parsed into [`Instant`]s that [`Instant::resolve`] turns into Unix seconds against one
//! "now", so both windows of one command use the same clock reading.

use std::time::{Duration, UNIX_EPOCH};

/// One end of a window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Instant {
    /// Unix seconds.
    At(f64),
    /// `now − seconds` (0 for `now`).
    BeforeNow(f64),
}

impl Instant {
    /// Unix seconds, with `now` the current time in Unix seconds.
    pub fn resolve(self, now: f64) -> f64 {
        match self {
            Instant::At(t) => t,
            Instant::BeforeNow(s) => now - s,
        }
    }
}

/// A window `START/END` as given on the command line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    /// Start (exclusive: observations scraped after it count).
    pub start: Instant,
    /// End (inclusive).
    pub end: Instant,
}

impl Range {
    /// `(start, end)` in Unix seconds. Errors: the window is empty or reversed.
    pub fn resolve(&self, now: f64) -> Result<(f64, f64), String> {
        let (s, e) = (self.start.resolve(now), self.end.resolve(now));
        if s >= e {
            return Err(format!(
                "the window starts at {} and ends at {}: its start must be before its end",
                rfc3339(s),
                rfc3339(e)
            ));
        }
        Ok((s, e))
    }
}

const FORMS: &str =
    "RFC 3339 (2026-11-30T14:00:00Z), Unix seconds (1796047200) or now-DURATION (now-2h)";

/// Parse `START/END` (clap's value parser of `--before` and `--after`).
pub fn parse_range(s: &str) -> Result<Range, String> {
    let Some((start, end)) = s.split_once('/') else {
        return Err(format!(
            "{s:?} is not a window: give START/END, each {FORMS}; e.g. now-2h/now-1h"
        ));
    };
    Ok(Range {
        start: parse_instant(start).map_err(|e| format!("start of {s:?}: {e}"))?,
        end: parse_instant(end).map_err(|e| format!("end of {s:?}: {e}"))?,
    })
}

/// Parse one end of a window.
pub fn parse_instant(s: &str) -> Result<Instant, String> {
    let t = s.trim();
    if let Some(rest) = t.strip_prefix("now") {
        let rest = rest.trim();
        if rest.is_empty() {
            return Ok(Instant::BeforeNow(0.0));
        }
        let Some(d) = rest.strip_prefix('-') else {
            return Err(format!(
                "{t:?}: only past instants relative to now are accepted (now-DURATION)"
            ));
        };
        return humantime::parse_duration(d.trim())
            .map(|d| Instant::BeforeNow(d.as_secs_f64()))
            .map_err(|e| format!("{t:?}: {e}; give e.g. now-2h"));
    }
    if let Ok(secs) = t.parse::<f64>() {
        if (0.0..MAX_UNIX_SECONDS).contains(&secs) {
            return Ok(Instant::At(secs));
        }
    }
    parse_rfc3339(t)
        .map(Instant::At)
        .ok_or_else(|| format!("{t:?} is not a time; give {FORMS}"))
}

/// RFC 3339 with `Z` or a numeric offset, as Unix seconds.
fn parse_rfc3339(t: &str) -> Option<f64> {
    let (local, offset_secs) = if let Some(local) = t.strip_suffix(['Z', 'z']) {
        (local, 0i64)
    } else if t.len() > 6 && t.is_char_boundary(t.len() - 6) {
        let (local, off) = t.split_at(t.len() - 6);
        let b = off.as_bytes();
        if !matches!(b[0], b'+' | b'-') || b[3] != b':' {
            return None;
        }
        let hours: i64 = off.get(1..3)?.parse().ok()?;
        let minutes: i64 = off.get(4..6)?.parse().ok()?;
        if hours > 23 || minutes > 59 {
            return None;
        }
        let sign = if b[0] == b'-' { -1 } else { 1 };
        (local, sign * (hours * 3600 + minutes * 60))
    } else {
        return None;
    };
    let utc = humantime::parse_rfc3339_weak(local).ok()?;
    let secs = utc.duration_since(UNIX_EPOCH).ok()?.as_secs_f64();
    Some(secs - offset_secs as f64)
}

/// The first instant RFC 3339 cannot write (year 10000), Unix seconds: later Unix seconds are
/// not a time a window can have.
const MAX_UNIX_SECONDS: f64 = 253_402_300_800.0;

/// Unix seconds as RFC 3339 UTC with milliseconds (`2026-11-30T14:00:00.000Z`); outside years
/// 1970 to 9999 the number itself (`-5 (Unix seconds)`).
pub fn rfc3339(unix: f64) -> String {
    if !(0.0..MAX_UNIX_SECONDS).contains(&unix) {
        return format!("{unix} (Unix seconds)");
    }
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_secs_f64(unix)).to_string()
}

/// A duration in seconds for messages: `300 s`, `2 h`.
pub fn human(secs: f64) -> String {
    humantime::format_duration(Duration::from_millis((secs * 1000.0).round() as u64)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_documented_form_parses() {
        assert_eq!(parse_instant("now"), Ok(Instant::BeforeNow(0.0)));
        assert_eq!(parse_instant("now-2h"), Ok(Instant::BeforeNow(7200.0)));
        assert_eq!(parse_instant("now-1h30m"), Ok(Instant::BeforeNow(5400.0)));
        assert_eq!(parse_instant("1796047200"), Ok(Instant::At(1796047200.0)));
        assert_eq!(
            parse_instant("1796047200.25"),
            Ok(Instant::At(1796047200.25))
        );
        // date -u -d 2026-11-30T14:00:00Z +%s → 1796047200
        assert_eq!(
            parse_instant("2026-11-30T14:00:00Z"),
            Ok(Instant::At(1796047200.0))
        );
        assert_eq!(
            parse_instant("2026-11-30T16:00:00.5+02:00"),
            Ok(Instant::At(1796047200.5))
        );
        assert_eq!(
            parse_instant("2026-11-30 09:00:00-05:00"),
            Ok(Instant::At(1796047200.0))
        );
        let r = parse_range("now-2h/now-1h").unwrap();
        assert_eq!(r.resolve(10_000.0), Ok((2800.0, 6400.0)));
        assert_eq!(rfc3339(1796047200.0), "2026-11-30T14:00:00.000Z");
    }

    #[test]
    fn bad_windows_are_explained() {
        for bad in [
            "yesterday",
            "now+1h",
            "2026-13-01T00:00:00Z",
            "-5",
            // Beyond year 9999 (RFC 3339 cannot write it; it panicked in the error message).
            "1e12",
            "1e300",
            "now-banana",
            "",
        ] {
            let e = parse_instant(bad).unwrap_err();
            assert!(e.contains(&format!("{:?}", bad.trim())), "{e}");
        }
        assert!(parse_range("now-1h").unwrap_err().contains("START/END"));
        let r = parse_range("now-1h/now-2h").unwrap();
        assert!(r.resolve(10_000.0).unwrap_err().contains("before its end"));
        // Instants outside RFC 3339's years are shown as numbers, not a panic.
        assert_eq!(rfc3339(1e12), "1000000000000 (Unix seconds)");
        let r = parse_range("now-99999999d/now-99999998d").unwrap();
        assert!(r.resolve(0.0).unwrap().0 < 0.0);
        assert!(rfc3339(-8.64e12).contains("(Unix seconds)"));
    }
}
