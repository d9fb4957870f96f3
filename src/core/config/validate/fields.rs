//! Field checks shared by every section: names, positive durations, temperature, SLO and
//! `extra_body`.

use super::*;

impl Validator<'_> {
    pub(super) fn name(
        &mut self,
        path: &str,
        pre: &str,
        kind: &str,
        name: Option<&str>,
        seen: &HashMap<String, usize>,
        list: &str,
    ) -> Option<String> {
        let p = format!("{path}.name");
        let label = if kind == "target" {
            "target"
        } else {
            "scenario"
        };
        let Some(name) = name else {
            self.problem(
                p,
                format!("{pre}name is required; give the {kind} a unique name made of {NAME_RULE} (it becomes the \"{label}\" metric label)."),
            );
            return None;
        };
        if name.is_empty() {
            self.problem(
                p,
                format!("{pre}name is empty; give the {kind} a unique name made of {NAME_RULE} (it becomes the \"{label}\" metric label)."),
            );
            return None;
        }
        let len = name.chars().count();
        if len > MAX_NAME_LEN {
            self.problem(
                p,
                format!("{pre}name is {len} characters long; shorten it to at most {MAX_NAME_LEN}, because it becomes the \"{label}\" label of every series."),
            );
            return None;
        }
        if !name.chars().all(is_name_char) {
            let suggestion: String = name
                .chars()
                .map(|c| if is_name_char(c) { c } else { '_' })
                .collect();
            self.problem(
                p,
                format!("{pre}name may only contain {NAME_RULE}, because it becomes the \"{label}\" metric label; rename it, e.g. \"{suggestion}\"."),
            );
            return None;
        }
        if name == "." || name == ".." {
            self.problem(
                p,
                format!("{pre}name \"{name}\" is a path step, not a name: the status pages' links to it (/targets/{name}) would lead elsewhere; rename it, e.g. \"{}\".", name.replace('.', "dot")),
            );
            return None;
        }
        if let Some(first) = seen.get(name) {
            self.problem(
                p,
                format!("{pre}name is already used by {list}[{first}]; {kind} names must be unique, so rename one of them."),
            );
            return None;
        }
        Some(name.to_string())
    }

    pub(super) fn positive_duration(
        &mut self,
        path: &str,
        pre: &str,
        field: &str,
        v: &Value,
    ) -> Option<Duration> {
        let bounds = if field == "interval" {
            crate::config::durations::INTERVAL
        } else {
            crate::config::durations::CONFIG
        };
        self.duration_within(path, pre, field, v, bounds)
    }

    /// A duration greater than zero within `bounds`; `field` names it in the message.
    pub(super) fn duration_within(
        &mut self,
        path: &str,
        pre: &str,
        field: &str,
        v: &Value,
        bounds: crate::config::durations::Bounds,
    ) -> Option<Duration> {
        let d = match v {
            Value::String(s) => match humantime::parse_duration(s.trim()) {
                Ok(d) => d,
                Err(_) => {
                    self.problem(
                        path,
                        format!("{pre}{field} \"{s}\" is not a duration; {DURATION_HINT}."),
                    );
                    return None;
                }
            },
            Value::Number(n) => {
                self.problem(
                    path,
                    format!(
                        "{pre}{field} is the bare number {n}, which has no unit; {DURATION_HINT}."
                    ),
                );
                return None;
            }
            _ => {
                self.problem(
                    path,
                    format!("{pre}{field} must be a duration; {DURATION_HINT}."),
                );
                return None;
            }
        };
        if d.is_zero() {
            self.problem(
                path,
                format!("{pre}{field} is zero; it must be greater than zero, {DURATION_HINT}."),
            );
            return None;
        }
        if let Err(why) = bounds.check(d) {
            let shown = v.as_str().unwrap_or_default().trim();
            self.problem(
                path,
                format!(
                    "{pre}{field} \"{shown}\" {why}; set a value from {} to {}.",
                    fmt_dur(bounds.min),
                    fmt_dur(bounds.max)
                ),
            );
            return None;
        }
        Some(d)
    }

    pub(super) fn temperature(&mut self, path: &str, pre: &str, t: f64) -> Option<f64> {
        if t.is_finite() && (0.0..=2.0).contains(&t) {
            Some(t)
        } else {
            self.problem(
                path,
                format!("{pre}temperature {t} is out of range; set it between 0 and 2 (0 makes output most repeatable)."),
            );
            None
        }
    }

    pub(super) fn slo(&mut self, path: &str, pre: &str, raw: Option<&RawSlo>, base: Slo) -> Slo {
        let mut slo = base;
        let Some(raw) = raw else { return slo };
        if let Some(v) = &raw.ttft_p95 {
            if let Some(d) =
                self.positive_duration(&format!("{path}.ttft_p95"), pre, "slo.ttft_p95", v)
            {
                slo.ttft_p95 = d;
            }
        }
        if let Some(x) = raw.output_tokens_per_second_min {
            if x.is_finite() && x > 0.0 {
                slo.output_tokens_per_second_min = x;
            } else {
                self.problem(
                    format!("{path}.output_tokens_per_second_min"),
                    format!("{pre}slo.output_tokens_per_second_min is {x}; it must be a number greater than zero, e.g. 30."),
                );
            }
        }
        if let Some(x) = raw.rate_limit_headroom_min {
            if x.is_finite() && x > 0.0 && x < 1.0 {
                slo.rate_limit_headroom_min = x;
            } else {
                self.problem(
                    format!("{path}.rate_limit_headroom_min"),
                    format!("{pre}slo.rate_limit_headroom_min is {x}; it must be a share greater than 0 and less than 1, e.g. 0.1 (alert when less than 10 % of a rate-limit window is left; 0.0001 all but turns the alert off)."),
                );
            }
        }
        if let Some(x) = raw.prefill_tokens_per_second_min {
            if x.is_finite() && x > 0.0 {
                slo.prefill_tokens_per_second_min = Some(x);
            } else {
                self.problem(
                    format!("{path}.prefill_tokens_per_second_min"),
                    format!("{pre}slo.prefill_tokens_per_second_min is {x}; it must be a number greater than zero, e.g. 2000 (prompt tokens per second of TTFT, for scenarios with prompt_tokens)."),
                );
            }
        }
        slo
    }

    /// `cost:`: prices per million input and output tokens (both required, finite, ≥ 0) and
    /// an optional monthly budget (> 0).
    pub(super) fn cost(
        &mut self,
        path: &str,
        pre: &str,
        raw: Option<&super::super::raw::RawCost>,
    ) -> Option<crate::config::cost::Cost> {
        use crate::config::cost::MAX_PRICE;
        let raw = raw?;
        let mut price = |field: &str, v: Option<f64>| match v {
            // `-0` is 0: a price never prints with a sign.
            Some(x) if (0.0..=MAX_PRICE).contains(&x) => Some(x.abs()),
            Some(x) => {
                // 1e308 as itself, not as 309 digits.
                let x = if x.abs() >= 1e15 {
                    format!("{x:e}")
                } else {
                    x.to_string()
                };
                self.problem(format!("{path}.cost.{field}"), format!("{pre}cost.{field} is {x}; it must be a number from 0 to {MAX_PRICE:e} (the price of one million tokens, e.g. 0.15)."));
                None
            }
            None => {
                self.problem(format!("{path}.cost.{field}"), format!("{pre}cost.{field} is missing; give the price of one million tokens (0 if they are free), e.g. {field}: 0.15."));
                None
            }
        };
        let input = price("input_per_million", raw.input_per_million);
        let output = price("output_per_million", raw.output_per_million);
        let budget = match raw.monthly_budget {
            Some(b) if !(b.is_finite() && b > 0.0) => {
                self.problem(format!("{path}.cost.monthly_budget"), format!("{pre}cost.monthly_budget is {b}; it must be a number greater than zero (what the target's probes may cost in 30 days), or remove it."));
                None
            }
            b => b,
        };
        Some(crate::config::cost::Cost {
            input_per_million: input?,
            output_per_million: output?,
            monthly_budget: budget,
        })
    }

    pub(super) fn extra_body(&mut self, path: &str, pre: &str, body: &JsonObject) {
        for key in body.keys() {
            if RESERVED_BODY_KEYS.contains(&key.as_str()) {
                let fix = match key.as_str() {
                    "max_tokens" => "use the scenario's max_tokens field instead",
                    "temperature" => "use the temperature field instead",
                    _ => "llm-probe sets it itself",
                };
                self.problem(
                    format!("{path}.{key}"),
                    format!("{pre}extra_body sets \"{key}\", which llm-probe controls; remove it ({fix})."),
                );
            }
        }
    }
}
