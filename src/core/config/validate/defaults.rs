//! The `defaults:` section: interval, timeout, temperature, headers, secret headers and SLO
//! that every target inherits unless it sets its own.

use super::*;

impl Validator<'_> {
    pub(super) fn defaults(&mut self, raw: RawDefaults, target_headers: &[String]) -> Defaults {
        let mut d = Defaults::default();
        let p = "defaults";
        d.interval = raw
            .interval
            .as_ref()
            .and_then(|v| self.positive_duration(&format!("{p}.interval"), "", "interval", v));
        d.timeout = raw
            .timeout
            .as_ref()
            .and_then(|v| self.positive_duration(&format!("{p}.timeout"), "", "timeout", v));
        d.timing_invalid = (raw.interval.is_some() && d.interval.is_none())
            || (raw.timeout.is_some() && d.timeout.is_none());
        if let (Some(i), Some(t)) = (d.interval, d.timeout) {
            if t > i {
                self.problem(
                    format!("{p}.timeout"),
                    format!(
                        "defaults.timeout {} is longer than defaults.interval {}; a probe must finish before the next one starts, so lower the timeout or raise the interval.",
                        fmt_dur(t),
                        fmt_dur(i)
                    ),
                );
            }
        }
        d.temperature = raw
            .temperature
            .and_then(|t| self.temperature(&format!("{p}.temperature"), "", t));
        if let Some(h) = &raw.headers {
            d.headers = self.headers(&format!("{p}.headers"), "", h);
        }
        let set: Vec<&str> = (d.headers.iter().map(|(k, _)| k.as_str()))
            .chain(target_headers.iter().map(String::as_str))
            .collect();
        d.secret_headers = self.secret_headers(p, "", raw.secret_headers.as_deref(), &set);
        d.slo = self.slo(&format!("{p}.slo"), "", raw.slo.as_ref(), Slo::default());
        d
    }
}
