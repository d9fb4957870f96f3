//! What probes cost on a metered API: a target's prices (`cost:`), the expected spend of its
//! schedule, and the interval a monthly budget stretches it to.
//!
//! Amounts are in the currency unit of the prices (whatever the provider bills in, e.g. USD).
//! The expected spend is an upper-bound estimate made before any probe runs: every probe is
//! assumed to generate its scenario's `max_tokens`, and its prompt is estimated at one token per
//! 4 characters of message text plus 4 per message. What probes really cost is counted from the
//! tokens the server reports (`llm_probe_probe_cost_total`).

use std::time::Duration;

use super::{Scenario, Target};

/// Seconds in the month of the estimates and budgets: 30 days.
pub const MONTH: Duration = Duration::from_secs(30 * 86_400);
/// Seconds in a day.
pub const DAY: Duration = Duration::from_secs(86_400);
/// Longest interval a budget stretches a schedule to.
pub const MAX_STRETCHED_INTERVAL: Duration = Duration::from_secs(86_400);

/// A target's `cost:` block.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cost {
    /// Price of one million prompt (input) tokens (≥ 0, finite).
    pub input_per_million: f64,
    /// Price of one million output tokens (≥ 0, finite).
    pub output_per_million: f64,
    /// Most the target's probes may cost in [`MONTH`] (> 0): the interval of all its
    /// scenarios is stretched so that the expected spend stays under it.
    pub monthly_budget: Option<f64>,
}

impl Cost {
    /// What `prompt` input and `output` output tokens cost.
    pub fn of(&self, prompt: u64, output: u64) -> f64 {
        (prompt as f64 * self.input_per_million + output as f64 * self.output_per_million) / 1e6
    }
}

/// The prompt tokens of one probe of `scenario`, estimated: one per 4 characters of message
/// text, plus 4 per message (roles and separators).
pub fn estimated_prompt_tokens(scenario: &Scenario) -> u64 {
    scenario
        .messages
        .iter()
        .map(|m| (m.content.chars().count() as u64).div_ceil(4) + 4)
        .sum()
}

/// The most one probe of `scenario` is expected to cost at `cost`'s prices: its estimated
/// prompt and all of `max_tokens`.
pub fn probe_estimate(cost: &Cost, scenario: &Scenario) -> f64 {
    cost.of(
        estimated_prompt_tokens(scenario),
        u64::from(scenario.max_tokens),
    )
}

/// Expected spend of `target`'s schedule per `period` at `interval` for every scenario.
fn spend_at(target: &Target, cost: &Cost, interval: Duration, period: Duration) -> f64 {
    let probes = period.as_secs_f64() / interval.as_secs_f64();
    target
        .scenarios
        .iter()
        .map(|s| probe_estimate(cost, s) * probes)
        .sum()
}

/// What a target's schedule is expected to cost, and the interval its budget allows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spend {
    /// Expected spend per day at the effective interval.
    pub per_day: f64,
    /// Expected spend per [`MONTH`] at the effective interval.
    pub per_month: f64,
    /// The configured interval.
    pub interval: Duration,
    /// The interval the scenarios are probed at: the configured one, or longer so that
    /// `per_month` stays within the budget (at most [`MAX_STRETCHED_INTERVAL`]).
    pub effective_interval: Duration,
    /// Even at [`MAX_STRETCHED_INTERVAL`] the month would exceed the budget.
    pub over_budget: bool,
}

impl Spend {
    /// True when the budget stretched the interval.
    pub fn stretched(&self) -> bool {
        self.effective_interval > self.interval
    }
}

/// The expected spend of `target` (`None` when it has no prices).
pub fn spend(target: &Target) -> Option<Spend> {
    let cost = target.cost.as_ref()?;
    let month_at_interval = spend_at(target, cost, target.interval, MONTH);
    let mut effective = target.interval;
    let mut over_budget = false;
    if let Some(budget) = cost.monthly_budget {
        if month_at_interval > budget {
            let needed = target.interval.mul_f64(month_at_interval / budget);
            // Rounded up to the millisecond, so that the month stays within the budget.
            let needed = Duration::from_millis(needed.as_millis() as u64 + 1);
            over_budget = needed > MAX_STRETCHED_INTERVAL;
            effective = needed.min(MAX_STRETCHED_INTERVAL);
        }
    }
    Some(Spend {
        per_day: spend_at(target, cost, effective, DAY),
        per_month: spend_at(target, cost, effective, MONTH),
        interval: target.interval,
        effective_interval: effective,
        over_budget,
    })
}

/// One line for `check-config` and the start-up log: `~0.0123/day, ~0.37/month (upper-bound
/// estimate)`, with the budget's stretch when there is one.
pub fn describe(target: &Target, s: &Spend) -> String {
    let mut line = format!(
        "expected spend ~{}/day, ~{}/month (estimate: every probe generates max_tokens)",
        amount(s.per_day),
        amount(s.per_month)
    );
    if let Some(budget) = target.cost.and_then(|c| c.monthly_budget) {
        line += &format!("; monthly_budget {}", amount(budget));
        if s.stretched() {
            line += &format!(
                ": interval stretched from {} to {}",
                humantime::format_duration(s.interval),
                humantime::format_duration(s.effective_interval)
            );
        }
        if s.over_budget {
            line += " (still over budget at one probe per day per scenario; lower max_tokens or raise the budget)";
        }
    }
    line
}

/// An amount with 4 significant decimals for small values.
fn amount(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.4}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(cost: &str, interval: &str) -> std::sync::Arc<Target> {
        let yaml = format!("scenarios:\n  - name: s\n    messages: [{{role: user, content: \"0123456789abcdef\"}}]\n    max_tokens: 100\ntargets:\n  - name: t\n    protocol: openai-chat\n    base_url: http://h/v1\n    model: m\n    interval: {interval}\n    cost: {cost}\n");
        crate::config::parse(&yaml, "t.yaml", &|_| None)
            .unwrap_or_else(|e| panic!("{e}"))
            .targets[0]
            .clone()
    }

    #[test]
    fn spend_follows_the_schedule_and_a_budget_stretches_it() {
        // 8 prompt tokens (16 chars / 4 + 4) at 1.0 and 100 output at 10.0 per million.
        let t = target("{input_per_million: 1.0, output_per_million: 10.0}", "60s");
        let s = spend(&t).unwrap();
        let per_probe = (8.0 + 1000.0) / 1e6;
        assert!((s.per_day - per_probe * 1440.0).abs() < 1e-12, "{s:?}");
        assert!(
            (s.per_month - per_probe * 1440.0 * 30.0).abs() < 1e-9,
            "{s:?}"
        );
        assert!(!s.stretched());
        // A month at 60 s is ~43.5; a budget of 10 stretches the interval ~4.35×.
        let t = target(
            "{input_per_million: 1.0, output_per_million: 10.0, monthly_budget: 10}",
            "60s",
        );
        let s = spend(&t).unwrap();
        assert!(s.stretched() && !s.over_budget, "{s:?}");
        assert!(s.per_month <= 10.0 && s.per_month > 9.99, "{s:?}");
        assert!(
            describe(&t, &s).contains("interval stretched from 1m to 4m"),
            "{}",
            describe(&t, &s)
        );
    }
}
