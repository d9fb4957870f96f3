//! What probes cost on a metered API: a target's prices (`cost:`), the expected spend of its
//! schedule, and the interval a monthly budget stretches it to.
//!
//! Amounts are in the currency unit of the prices (whatever the provider bills in, e.g. USD).
//! The expected spend is an upper-bound estimate made before any probe runs: every probe is
//! assumed to generate its scenario's `max_tokens`, and its prompt is estimated at one token per
//! 4 characters of message text plus 4 per message; a multi-turn probe counts every turn. What probes really cost is counted from the
//! tokens the server reports (`llm_probe_probe_cost_total`).

use std::cmp::Ordering;
use std::time::Duration;

use super::{Scenario, Target};

/// Seconds in the month of the estimates and budgets: 30 days.
pub const MONTH: Duration = Duration::from_secs(30 * 86_400);
/// Seconds in a day.
pub const DAY: Duration = Duration::from_secs(86_400);
/// Longest interval a budget stretches a schedule to.
pub const MAX_STRETCHED_INTERVAL: Duration = Duration::from_secs(86_400);
/// Highest price of one million tokens a `cost:` block accepts: far above any provider's price
/// in any currency, and low enough that no count of tokens makes an amount infinite.
pub const MAX_PRICE: f64 = 1e9;

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
/// prompt and all of `max_tokens`, twice for a cache canary (it sends its prompt twice), and
/// for a multi-turn probe (`turns:`) every request: turn K re-sends the whole conversation so
/// far, each earlier answer counted at `max_tokens` and each follow-up as a message.
pub fn probe_estimate(cost: &Cost, scenario: &Scenario) -> f64 {
    let output = u64::from(scenario.max_tokens);
    let mut prompt = estimated_prompt_tokens(scenario);
    let mut total = cost.of(prompt, output);
    for follow_up in &scenario.turns {
        // The earlier answer (an assistant message) and the follow-up (a user message).
        prompt = prompt
            .saturating_add(output + 4)
            .saturating_add((follow_up.chars().count() as u64).div_ceil(4) + 4);
        total += cost.of(prompt, output);
    }
    // A cache canary sends its prompt twice on every probe.
    match scenario.cache_canary {
        true => total * 2.0,
        false => total,
    }
}

/// Expected spend of `target`'s schedule per `period` at `interval` for every scenario. Never
/// NaN: an interval of zero counts as one nanosecond, and an amount too large for an `f64` is
/// `+∞` (prices are bounded at load, [`MAX_PRICE`], so only a direct caller can get there).
fn spend_at(target: &Target, cost: &Cost, interval: Duration, period: Duration) -> f64 {
    let probes = period.as_secs_f64() / interval.as_secs_f64().max(1e-9);
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
///
/// A budget only ever lengthens the interval: the effective interval is at least the configured
/// one, and a stretch goes to at most [`MAX_STRETCHED_INTERVAL`] (an interval configured longer
/// than that is kept as it is). The arithmetic is total: no price, budget or interval makes it
/// panic or wrap.
pub fn spend(target: &Target) -> Option<Spend> {
    let cost = target.cost.as_ref()?;
    let effective = match cost.monthly_budget {
        Some(budget) => stretched(
            target.interval,
            spend_at(target, cost, target.interval, MONTH),
            budget,
        ),
        None => target.interval,
    };
    // Over budget: even the longest interval a budget may set leaves the month above it.
    let over_budget = cost.monthly_budget.is_some_and(|budget| {
        spend_at(target, cost, effective.max(MAX_STRETCHED_INTERVAL), MONTH) > budget
    });
    Some(Spend {
        per_day: spend_at(target, cost, effective, DAY),
        per_month: spend_at(target, cost, effective, MONTH),
        interval: target.interval,
        effective_interval: effective,
        over_budget,
    })
}

/// The interval at which a schedule expected to cost `month` per [`MONTH`] at `interval` stays
/// within `budget`: `interval × month / budget`, rounded up to the next millisecond, never
/// shorter than `interval` and never stretched past [`MAX_STRETCHED_INTERVAL`]. Computed in
/// `f64` seconds and compared before any conversion, so that an infinite or huge ratio (a
/// budget of 1e-300, prices near `f64::MAX`) is "the longest stretch", not a panic or a wrap.
fn stretched(interval: Duration, month: f64, budget: f64) -> Duration {
    // Anything but "month above a positive budget" (NaN included) keeps the interval.
    let above = month.partial_cmp(&budget) == Some(Ordering::Greater);
    if !above || budget.partial_cmp(&0.0) != Some(Ordering::Greater) {
        return interval;
    }
    let needed_ms = interval.as_secs_f64() * (month / budget) * 1e3;
    let longest = MAX_STRETCHED_INTERVAL.max(interval);
    // A NaN or an infinite need is the longest stretch too.
    if needed_ms.partial_cmp(&(longest.as_secs_f64() * 1e3)) != Some(Ordering::Less) {
        return longest;
    }
    // Rounded up to the millisecond (and one more), so that the month stays within the budget.
    let needed = Duration::from_millis((needed_ms.floor() as u64).saturating_add(1));
    needed.clamp(interval, longest)
}

/// One line for `check-config` and the start-up log: `~0.0123/day, ~0.37/month (upper-bound
/// estimate)`, with the budget's stretch when there is one.
pub fn describe(target: &Target, s: &Spend) -> String {
    let mut line = format!(
        "expected spend ~{}/day, ~{}/month (estimate: every probe generates max_tokens)",
        amount(s.per_day),
        amount(s.per_month)
    );
    if target.replicas.is_some() {
        line += " per replica (every discovered replica is probed: multiply by their number)";
    }
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

/// All priced targets' expected spend: `expected spend of 2 priced targets: ~0.12/day,
/// ~3.60/month`; `None` when no target has prices.
pub fn total_spend(cfg: &crate::config::Config) -> Option<String> {
    let spends: Vec<_> = cfg.targets.iter().filter_map(|t| spend(t)).collect();
    if spends.is_empty() {
        return None;
    }
    let day: f64 = spends.iter().map(|s| s.per_day).sum();
    let month: f64 = spends.iter().map(|s| s.per_month).sum();
    let pools = (cfg.targets.iter())
        .filter(|t| t.replicas.is_some() && spend(t).is_some())
        .count();
    let per_replica = match pools {
        0 => String::new(),
        n => format!(
            "; {n} of them with replicas: counted for one replica each, multiply by their number"
        ),
    };
    Some(format!(
        "expected spend of {} priced target{}: ~{}/day, ~{}/month (in the prices' currency; an upper bound: every probe generates max_tokens{per_replica})",
        spends.len(),
        if spends.len() == 1 { "" } else { "s" },
        amount(day),
        amount(month),
    ))
}

/// `run`'s lines about cost at start-up and after each reload: the expected spend, and a
/// warning per target whose budget stretches its interval.
pub fn log_spend(cfg: &crate::config::Config) {
    for t in &cfg.targets {
        if let Some(s) = spend(t) {
            let text = describe(t, &s);
            if s.stretched() {
                tracing::warn!(target = %t.name, spend = %text, "the monthly budget stretches the interval of this target");
            } else {
                tracing::info!(target = %t.name, spend = %text, "expected spend");
            }
        }
    }
    if let Some(total) = total_spend(cfg) {
        tracing::info!("{total}");
    }
}

/// An amount with 4 decimals for small values, and in scientific notation where those would
/// show nothing or too many digits (`1.19e-16`, `3.700e13`).
pub fn amount(x: f64) -> String {
    if x > 0.0 && x < 1e-4 {
        format!("{x:.2e}")
    } else if x >= 1e12 {
        format!("{x:.3e}")
    } else if x >= 100.0 {
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

    /// A multi-turn probe sends one request per turn, each carrying the conversation so far:
    /// the estimate (and so a budget's stretch) counts them all.
    #[test]
    fn a_multi_turn_probe_is_estimated_at_every_turn() {
        let cfg = |turns: &str| {
            let yaml = format!("scenarios:\n  - name: s\n    messages: [{{role: user, content: \"0123456789abcdef\"}}]\n    max_tokens: 100\n{turns}targets:\n  - name: t\n    protocol: openai-chat\n    base_url: http://h/v1\n    model: m\n    cost: {{input_per_million: 1.0, output_per_million: 10.0}}\n");
            crate::config::parse(&yaml, "t.yaml", &|_| None).unwrap_or_else(|e| panic!("{e}"))
        };
        let one = cfg("");
        let three = cfg("    turns: [\"abcd\", \"abcd\"]\n");
        let c = one.targets[0].cost.unwrap();
        let per = |cfg: &crate::config::Config| probe_estimate(&c, &cfg.scenarios[0]);
        // Turn 1: 8 prompt tokens; turn 2: 8 + 104 (answer) + 5 (follow-up); turn 3: 117 + 109.
        let want = (8.0 + 117.0 + 226.0 + 3.0 * 1000.0) / 1e6;
        assert!((per(&three) - want).abs() < 1e-12, "{} {want}", per(&three));
        assert!(per(&three) > 3.0 * per(&one));
        let (s1, s3) = (
            spend(&one.targets[0]).unwrap(),
            spend(&three.targets[0]).unwrap(),
        );
        assert!(s3.per_month > 3.0 * s1.per_month, "{s1:?} {s3:?}");
    }

    /// The total names the priced pools, whose spend is per replica (their count is known only
    /// once discovered).
    #[test]
    fn the_total_says_a_pools_spend_is_per_replica() {
        let yaml = |replicas: &str| {
            format!("scenarios:\n  - name: s\n    messages: [{{role: user, content: \"hi\"}}]\n    max_tokens: 10\ntargets:\n  - name: t\n    protocol: openai-chat\n    base_url: http://h.test:8000/v1\n    model: m\n    cost: {{input_per_million: 1.0, output_per_million: 1.0}}\n{replicas}")
        };
        let total = |y: String| {
            let cfg =
                crate::config::parse(&y, "t.yaml", &|_| None).unwrap_or_else(|e| panic!("{e}"));
            total_spend(&cfg).unwrap()
        };
        let plain = total(yaml(""));
        assert!(!plain.contains("replica"), "{plain}");
        let pool = total(yaml("    replicas:\n      file_sd: pool.json\n"));
        assert!(
            pool.contains("1 of them with replicas: counted for one replica each"),
            "{pool}"
        );
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

    fn priced(interval: Duration, input: f64, output: f64, budget: Option<f64>) -> Target {
        let mut t = (*target("{input_per_million: 1, output_per_million: 1}", "60s")).clone();
        t.interval = interval;
        t.cost = Some(Cost {
            input_per_million: input,
            output_per_million: output,
            monthly_budget: budget,
        });
        t
    }

    #[test]
    fn a_budget_near_the_float_limits_stretches_to_a_day_and_says_it_is_over() {
        let cases = [
            (1.0, 1.0, 1e-300),
            (1.0, 1.0, f64::MIN_POSITIVE),
            (1.0, 1.0, 5e-324),
            (1.7e308, 1.7e308, 1.0),
            (f64::MAX, f64::MAX, f64::MAX),
            (1.0, 1.0, 1.1915468611789493e-16),
        ];
        for (input, output, budget) in cases {
            let t = priced(Duration::from_secs(16), input, output, Some(budget));
            let s = spend(&t).unwrap();
            assert_eq!(
                s.effective_interval, DAY,
                "{input} {output} {budget}: {s:?}"
            );
            assert!(s.over_budget, "{input} {output} {budget}: {s:?}");
            assert!(describe(&t, &s).contains("interval stretched from 16s to 1day"));
            assert!(describe(&t, &s).contains("still over budget"));
        }
    }

    #[test]
    fn a_budget_never_shortens_an_interval_longer_than_a_day() {
        let t = priced(2 * DAY, 1.0, 1.0, Some(1e-12));
        let s = spend(&t).unwrap();
        assert_eq!(s.effective_interval, 2 * DAY, "{s:?}");
        assert!(s.over_budget && !s.stretched(), "{s:?}");
        // Within the budget at two days: kept, not over.
        let t = priced(2 * DAY, 1.0, 1.0, Some(1e6));
        let s = spend(&t).unwrap();
        assert_eq!(s.effective_interval, 2 * DAY, "{s:?}");
        assert!(!s.over_budget, "{s:?}");
    }

    #[test]
    fn a_price_above_the_bound_is_refused_at_load_and_names_the_field() {
        let yaml = "scenarios:\n  - name: s\n    messages: [{role: user, content: hi}]\n    max_tokens: 1\ntargets:\n  - name: t\n    protocol: openai-chat\n    base_url: http://h/v1\n    model: m\n    cost: {input_per_million: 1e308, output_per_million: 1}\n";
        let e = crate::config::parse(yaml, "t.yaml", &|_| None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("t.yaml"), "{e}");
        assert!(e.contains("cost.input_per_million is 1e308"), "{e}");
        assert!(e.contains("from 0 to 1e9"), "{e}");
        assert!(
            spend(&priced(Duration::from_secs(1), MAX_PRICE, MAX_PRICE, None))
                .is_some_and(|s| s.per_month.is_finite())
        );
    }

    proptest::proptest! {
        /// For any finite non-negative prices, positive budget and positive interval: nothing
        /// panics, the effective interval is at least the configured one and at most
        /// max(configured, one day), the amounts are never NaN, and a budget the schedule
        /// cannot meet even at the longest interval is reported as over budget (otherwise the
        /// expected month stays within it).
        #[test]
        fn the_cost_arithmetic_is_total_and_only_lengthens(
            input in price(),
            output in price(),
            budget in budget(),
            interval_ns in 1u64..=3 * 86_400_000_000_000,
        ) {
            let interval = Duration::from_nanos(interval_ns);
            let t = priced(interval, input, output, budget);
            let s = spend(&t).unwrap();
            proptest::prop_assert!(s.effective_interval >= interval, "{s:?}");
            proptest::prop_assert!(s.effective_interval <= interval.max(DAY), "{s:?}");
            proptest::prop_assert!(!s.per_day.is_nan() && !s.per_month.is_nan(), "{s:?}");
            proptest::prop_assert!(s.per_day >= 0.0 && s.per_month >= 0.0, "{s:?}");
            match budget {
                None => proptest::prop_assert!(!s.over_budget && !s.stretched()),
                Some(b) if s.over_budget => {
                    proptest::prop_assert_eq!(s.effective_interval, interval.max(DAY));
                    proptest::prop_assert!(spend_at(&t, t.cost.as_ref().unwrap(), interval.max(DAY), MONTH) > b);
                }
                Some(b) => proptest::prop_assert!(s.per_month <= b * (1.0 + 1e-9), "{s:?} {b}"),
            }
            let _ = describe(&t, &s);
        }
    }

    /// Prices: zero, ordinary, tiny, and up to `f64::MAX`.
    fn price() -> impl proptest::strategy::Strategy<Value = f64> {
        use proptest::prelude::*;
        prop_oneof![
            Just(0.0),
            0.0..1000.0f64,
            proptest::num::f64::POSITIVE | proptest::num::f64::SUBNORMAL,
            Just(f64::MAX),
        ]
    }

    /// Budgets: none, ordinary, and from the smallest subnormal to `f64::MAX`.
    fn budget() -> impl proptest::strategy::Strategy<Value = Option<f64>> {
        use proptest::prelude::*;
        prop_oneof![
            Just(None),
            (0.001..1000.0f64).prop_map(Some),
            (proptest::num::f64::POSITIVE | proptest::num::f64::SUBNORMAL).prop_map(Some),
            Just(Some(5e-324)),
            Just(Some(f64::MAX)),
        ]
    }

    #[test]
    fn amounts_never_print_as_zero_or_with_a_sign() {
        assert_eq!(amount(0.0), "0.0000");
        assert_eq!(amount(1.1915468611789493e-16), "1.19e-16");
        assert_eq!(amount(0.0145), "0.0145");
        assert_eq!(amount(3.7e13), "3.700e13");
        let t = target("{input_per_million: -0.0, output_per_million: 1}", "60s");
        let cost = t.cost.as_ref().unwrap();
        assert!(cost.input_per_million.is_sign_positive(), "{cost:?}");
    }
}
