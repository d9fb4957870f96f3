//! Bounds on every duration llm-probe accepts, in the probes file and on the command line.
//!
//! A duration far beyond any sensible value (`300000000000y` parses) would overflow when added
//! to an instant; a tiny one (`1ns`) would turn a probe schedule or a summary ticker into a busy
//! loop. Each duration is checked against its [`Bounds`] where it is read, with a message that
//! names the limit.

use std::time::Duration;

/// Longest duration accepted anywhere: one day.
pub const MAX: Duration = Duration::from_secs(24 * 60 * 60);
/// Shortest probe `interval`: 100 ms. A probe of a real endpoint takes seconds, so production
/// intervals are seconds to minutes; the floor keeps a typo (`1ns`) from becoming a busy loop
/// while a local simulator can still be probed quickly (the tests do).
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// The range a duration must fall in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// Shortest accepted value (inclusive).
    pub min: Duration,
    /// Longest accepted value (inclusive).
    pub max: Duration,
}

/// `interval` in the probes file: 100 ms to 1 day.
pub const INTERVAL: Bounds = Bounds {
    min: MIN_INTERVAL,
    max: MAX,
};
/// Every other duration in the probes file (`timeout`, `connect_timeout`, `slo.ttft_p95`):
/// 1 ms to 1 day.
pub const CONFIG: Bounds = Bounds {
    min: Duration::from_millis(1),
    max: MAX,
};
/// `demo --every`: 1 s to 1 day (one summary line per pair each time).
pub const SUMMARY_EVERY: Bounds = Bounds {
    min: Duration::from_secs(1),
    max: MAX,
};
/// The simulator's scripted times (`simulate --ttft`, `--itl`): 0 (no wait) to 1 hour.
pub const SCRIPTED: Bounds = Bounds {
    min: Duration::ZERO,
    max: Duration::from_secs(60 * 60),
};
/// `run --web.debug-probe-interval`: 0 to 30 days.
pub const DEBUG_PROBE_INTERVAL: Bounds = Bounds {
    min: Duration::ZERO,
    max: Duration::from_secs(30 * 24 * 60 * 60),
};
/// `healthcheck --timeout`: 0 to 1 hour.
pub const HEALTHCHECK_TIMEOUT: Bounds = Bounds {
    min: Duration::ZERO,
    max: Duration::from_secs(60 * 60),
};

impl Bounds {
    /// `Ok(d)` inside the bounds, else the reason as a sentence fragment, e.g.
    /// `"is shorter than the minimum of 1s"`.
    pub fn check(self, d: Duration) -> Result<Duration, String> {
        let show = |d: Duration| humantime::format_duration(d).to_string();
        if d < self.min {
            Err(format!("is shorter than the minimum of {}", show(self.min)))
        } else if d > self.max {
            Err(format!("is longer than the maximum of {}", show(self.max)))
        } else {
            Ok(d)
        }
    }

    /// Parses a command-line duration (`humantime` syntax, e.g. `250ms`, `5s`) and checks it.
    ///
    /// Errors: not a duration, or out of bounds; the message quotes the value and the limit.
    pub fn parse(self, s: &str) -> Result<Duration, String> {
        let d = humantime::parse_duration(s.trim())
            .map_err(|e| format!("\"{s}\" is not a duration ({e}); use e.g. 250ms or 5s"))?;
        self.check(d).map_err(|why| format!("\"{s}\" {why}"))
    }
}

/// The parser of `demo --every`.
pub fn parse_summary_every(s: &str) -> Result<Duration, String> {
    SUMMARY_EVERY.parse(s)
}

/// The parser of the simulator's `--ttft` and `--itl`.
pub fn parse_scripted(s: &str) -> Result<Duration, String> {
    SCRIPTED.parse(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_inclusive_and_messages_name_the_limit() {
        assert_eq!(INTERVAL.check(MIN_INTERVAL), Ok(MIN_INTERVAL));
        assert!(SUMMARY_EVERY.parse("999ms").is_err());
        assert_eq!(INTERVAL.check(MAX), Ok(MAX));
        assert_eq!(
            INTERVAL.parse("1ns").unwrap_err(),
            "\"1ns\" is shorter than the minimum of 100ms"
        );
        assert_eq!(
            CONFIG.parse("300000000000y").unwrap_err(),
            "\"300000000000y\" is longer than the maximum of 1day"
        );
        assert_eq!(SCRIPTED.parse("0s"), Ok(Duration::ZERO));
        assert!(SCRIPTED
            .parse("soon")
            .unwrap_err()
            .contains("is not a duration"));
    }
}
