//! The plan of a load test: the levels of the sweep, how each level ends, warmup, caps, and the
//! token spend they imply. Validation here gives the command line's errors for bad input.

use std::time::Duration;

use super::level::Load;

/// What is excluded from a level's statistics at its start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Warmup {
    /// The first N requests of each level (in send order).
    Requests(u64),
    /// Requests scheduled in the first D of each level.
    Time(Duration),
}

impl std::str::FromStr for Warmup {
    type Err = String;
    /// `5` (requests) or a duration such as `10s`.
    fn from_str(s: &str) -> Result<Self, String> {
        if let Ok(n) = s.parse::<u64>() {
            return Ok(Warmup::Requests(n));
        }
        humantime::parse_duration(s).map(Warmup::Time).map_err(|_| {
            format!("--warmup {s:?} is neither a request count (e.g. 4) nor a duration (e.g. 10s)")
        })
    }
}

/// A whole sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The levels, in the order they run (increasing load for the SLA capacity).
    pub levels: Vec<Load>,
    /// Each level ends after this long (in-flight requests then finish) …
    pub duration: Option<Duration>,
    /// … or after this many measured requests, whichever comes first.
    pub requests: Option<u64>,
    /// Excluded from statistics at each level's start (sent in addition to `requests`).
    pub warmup: Warmup,
    /// Idle time between levels (lets queues drain).
    pub pause: Duration,
    /// Seed of the Poisson arrivals (level `i` uses `seed + i`).
    pub seed: u64,
    /// Open loop: most requests in flight at once; later arrivals wait (their wait counts).
    pub max_concurrency: Option<u32>,
    /// Hard cap on requests over the whole sweep, warmup included.
    pub max_requests: u64,
    /// Stop after the first level that breaks the SLA.
    pub stop_on_slo_breach: bool,
    /// Largest failed/sent ratio a level may have and meet the SLA.
    pub max_failure_ratio: f64,
}

/// The lowest `--rate` accepted, requests per second (one request per 1,000 s on average):
/// below it a level would wait longer than any run is meant to last.
pub const MIN_RATE: f64 = 0.001;

/// The highest `--rate` accepted, requests per second: far beyond what one bench process can
/// send (each request is a stream of its own), and small enough for the plan's arithmetic and
/// the charts' axes (a rate of 1e308 hung the chart drawing).
pub const MAX_RATE: f64 = 100_000.0;

/// The highest `--concurrency` level accepted: concurrent streams (each its own connection and
/// task) one bench process drives; BENCHMARKS.md measured the generator up to a few hundred.
pub const MAX_CONCURRENCY: u32 = 10_000;

impl Plan {
    /// Checks the plan; the error names the flag and the fix.
    pub fn validate(&self) -> Result<(), String> {
        use crate::config::long_prompt::{MAX_TOKENS, MIN_TOKENS};
        if self.levels.is_empty() {
            return Err("give --concurrency 1,2,4,8 (closed loop), --rate 0.5,1,2 (open loop, requests per second) or --prompt-tokens 256,1000,4000 (prompt lengths)".into());
        }
        for l in &self.levels {
            match *l {
                Load::Concurrency(0) | Load::Prompt { concurrency: 0, .. } => return Err("--concurrency: a level of 0 sends nothing; use 1 or more (e.g. 1,2,4,8)".into()),
                Load::Rate(r) if !(r.is_finite() && r >= MIN_RATE) => return Err(format!("--rate: {r} is not a usable rate; use requests per second of at least {MIN_RATE} (e.g. 0.5,1,2)")),
                Load::Rate(r) if r > MAX_RATE => return Err(format!("--rate: {r} is above {MAX_RATE} requests per second, more than one bench process can send; lower the level or run several bench processes")),
                Load::Prompt { tokens, .. } if !(MIN_TOKENS..=MAX_TOKENS).contains(&tokens) => return Err(format!("--prompt-tokens: {tokens} is not a size bench can generate; use {MIN_TOKENS} to {MAX_TOKENS} tokens (e.g. 256,1000,4000)")),
                _ => {}
            }
        }
        let prompts: Vec<&Load> = (self.levels.iter())
            .filter(|l| matches!(l, Load::Prompt { .. }))
            .collect();
        if !prompts.is_empty() {
            if prompts.len() < self.levels.len() {
                return Err("--prompt-tokens runs each prompt length closed loop at one --concurrency (default 1), so that TTFT is not mixed with queueing; it does not combine with --rate: drop --rate (or sweep --rate on a scenario with its own prompt_tokens)".into());
            }
            let mut users: Vec<u32> = prompts.iter().filter_map(|l| l.users()).collect();
            users.dedup();
            if users.len() > 1 {
                let listed: Vec<String> = users.iter().map(u32::to_string).collect();
                return Err(format!(
                    "--prompt-tokens measures every prompt length at one concurrency, but --concurrency lists {}; give it one value (e.g. --concurrency 1, the default), or run one sweep per concurrency",
                    listed.join(",")
                ));
            }
        }
        for pair in self.levels.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let increasing = match (a, b) {
                (Load::Concurrency(x), Load::Concurrency(y)) => x < y,
                (Load::Rate(x), Load::Rate(y)) => x < y,
                (Load::Prompt { tokens: x, .. }, Load::Prompt { tokens: y, .. }) => x < y,
                _ => false,
            };
            if !increasing {
                return Err(format!(
                    "the levels must increase ({} then {}): the SLA capacity is the last level before the first that breaks the SLO; list each level once, lowest first (e.g. 1,2,4,8)",
                    a.label(),
                    b.label()
                ));
            }
        }
        if let Some(c) = self.levels.last().and_then(Load::users) {
            if c > MAX_CONCURRENCY {
                return Err(format!(
                    "--concurrency {c} is above {MAX_CONCURRENCY} streams: one process cannot hold that many connections honestly; run several bench processes or lower the level"
                ));
            }
            if let Some(n) = self.requests.filter(|&n| n < u64::from(c)) {
                return Err(format!(
                    "--requests {n} is fewer than --concurrency {c}: the level would never have {c} streams at once, so it would not measure that load; use --requests of at least {c} (a few per stream: e.g. {})",
                    u64::from(c) * 4
                ));
            }
        }
        let open = matches!(self.levels[0], Load::Rate(_));
        if self.duration.is_none() && self.requests.is_none() {
            return Err(if open {
                "--rate without a bound never ends a level: add --duration (e.g. 60s) and/or --requests N".into()
            } else {
                "a level needs a bound: add --duration (e.g. 60s) and/or --requests N".into()
            });
        }
        if self.duration.is_some_and(|d| d.is_zero()) || self.requests == Some(0) {
            return Err("--duration and --requests must be greater than 0".into());
        }
        if self.max_concurrency.is_some() && !prompts.is_empty() {
            return Err("--max-concurrency bounds the requests in flight of --rate levels (open loop); --prompt-tokens runs each prompt length with --concurrency users (default 1) in flight: drop --max-concurrency".into());
        }
        if self.max_concurrency.is_some() && !open {
            return Err("--max-concurrency bounds the requests in flight of --rate levels (open loop); with --concurrency each level is already that many in flight: drop --max-concurrency or use --rate".into());
        }
        if self.max_concurrency == Some(0) {
            return Err("--max-concurrency 0 would send nothing; use 1 or more".into());
        }
        if !(0.0..=1.0).contains(&self.max_failure_ratio) {
            return Err("--max-failure-ratio must be between 0 and 1 (e.g. 0.01)".into());
        }
        // A warmup that covers a whole level leaves nothing measured (and read as failures).
        if let (Warmup::Time(w), Some(d)) = (self.warmup, self.duration) {
            if w >= d {
                return Err(format!(
                    "--warmup {} is not shorter than --duration {}: nothing would be measured; use a shorter warmup",
                    humantime::format_duration(w),
                    humantime::format_duration(d)
                ));
            }
        }
        if let (Warmup::Requests(w), None) = (self.warmup, self.requests) {
            if let Some(l) = self
                .levels
                .iter()
                .find(|l| self.planned(l).is_some_and(|n| w >= n))
            {
                return Err(format!(
                    "--warmup {w} requests is at least all that level {} can send in --duration: nothing would be measured; use a smaller warmup or a longer duration",
                    l.label()
                ));
            }
        }
        if let Some(total) = self.planned_total() {
            if total > self.max_requests {
                return Err(format!(
                    "the sweep would send up to {total} requests, over --max-requests {}: lower --requests/--duration, drop levels, or raise --max-requests",
                    self.max_requests
                ));
            }
        }
        Ok(())
    }

    /// Warmup requests per level when warmup is counted in requests.
    pub fn warmup_requests(&self) -> u64 {
        match self.warmup {
            Warmup::Requests(n) => n,
            Warmup::Time(_) => 0,
        }
    }

    /// Most requests level `l` can send, when that is known: `requests` (+ warmup) or, open
    /// loop, the expected arrivals in `duration` (+ 3 standard deviations of a Poisson count).
    pub fn planned(&self, l: &Load) -> Option<u64> {
        // Saturating: a count near 2^64 must read as "too many", not wrap to a few.
        let by_count = self
            .requests
            .map(|n| n.saturating_add(self.warmup_requests()));
        let by_time = match (l, self.duration) {
            (Load::Rate(r), Some(d)) => {
                let mean = r * d.as_secs_f64();
                // `as` saturates (and a NaN, never valid here, would give 0).
                Some((mean + 3.0 * mean.sqrt()).ceil() as u64)
            }
            _ => None,
        };
        match (by_count, by_time) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Requests of the whole sweep when every level's count is known.
    pub fn planned_total(&self) -> Option<u64> {
        self.levels
            .iter()
            .try_fold(0u64, |sum, l| Some(sum.saturating_add(self.planned(l)?)))
    }

    /// The plan as lines for the terminal, with the token spend it implies: requests ×
    /// (prompt tokens + `max_tokens`), where `prompt` gives each level's prompt tokens (an
    /// estimate when the server has not counted it yet; it differs by level in a prompt-length
    /// sweep).
    pub fn describe(&self, prompt: impl Fn(&Load) -> u64, max_tokens: u32) -> Vec<String> {
        let per = |l: &Load| prompt(l).saturating_add(u64::from(max_tokens));
        let bound = match (self.duration, self.requests) {
            (Some(d), Some(n)) => format!(
                "{n} requests or {} per level, whichever first",
                humantime::format_duration(d)
            ),
            (Some(d), None) => format!("{} per level", humantime::format_duration(d)),
            (None, Some(n)) => format!("{n} requests per level"),
            (None, None) => "unbounded".into(),
        };
        let warmup = match self.warmup {
            Warmup::Requests(0) => "no warmup".to_string(),
            Warmup::Requests(1) => "warmup 1 request".to_string(),
            Warmup::Requests(n) => format!("warmup {n} requests"),
            Warmup::Time(d) => format!("warmup {}", humantime::format_duration(d)),
        };
        let mut lines = vec![format!(
            "plan: {bound}, {warmup}, pause {} between levels, at most {} requests in all",
            humantime::format_duration(self.pause),
            self.max_requests
        )];
        let sizes = |l: &Load| match l {
            Load::Prompt { .. } => {
                format!(" ({} prompt + {max_tokens} max_tokens each)", prompt(l))
            }
            _ => String::new(),
        };
        for l in &self.levels {
            let n = self.planned(l);
            lines.push(match n {
                Some(n) => format!(
                    "  {:<22} up to {n} requests ≈ {} tokens{}",
                    l.label(),
                    n.saturating_mul(per(l)),
                    sizes(l)
                ),
                None => format!(
                    "  {:<22} as many requests as fit in the duration ({} tokens each)",
                    l.label(),
                    per(l)
                ),
            });
        }
        let uniform = self
            .levels
            .windows(2)
            .all(|w| prompt(&w[0]) == prompt(&w[1]));
        let (total, spend) = match self.planned_total() {
            Some(total) => (
                total,
                (self.levels.iter())
                    .map(|l| self.planned(l).unwrap_or(0).saturating_mul(per(l)))
                    .fold(0u64, u64::saturating_add),
            ),
            None => {
                let most = self.levels.iter().map(per).max().unwrap_or(0);
                (self.max_requests, self.max_requests.saturating_mul(most))
            }
        };
        let first = self.levels.first().map_or(0, &prompt);
        lines.push(if uniform {
            format!(
                "token spend: up to {spend} tokens ({total} requests × ({first} prompt + {max_tokens} max_tokens))"
            )
        } else {
            format!(
                "token spend: up to {spend} tokens ({total} requests × (their level's prompt + {max_tokens} max_tokens))"
            )
        });
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(levels: Vec<Load>) -> Plan {
        Plan {
            levels,
            duration: None,
            requests: Some(10),
            warmup: Warmup::Requests(2),
            pause: Duration::ZERO,
            seed: 0,
            max_concurrency: None,
            max_requests: 1000,
            stop_on_slo_breach: false,
            max_failure_ratio: 0.0,
        }
    }

    #[test]
    fn bad_plans_are_refused_with_the_flag_named() {
        let e = plan(vec![Load::Concurrency(0)]).validate().unwrap_err();
        assert!(e.contains("--concurrency") && e.contains("0"), "{e}");
        let mut p = plan(vec![Load::Rate(1.0)]);
        p.requests = None;
        let e = p.validate().unwrap_err();
        assert!(e.contains("--rate") && e.contains("--duration"), "{e}");
        let mut p = plan(vec![Load::Concurrency(1), Load::Concurrency(2)]);
        p.max_requests = 20;
        let e = p.validate().unwrap_err();
        assert!(e.contains("24") && e.contains("--max-requests 20"), "{e}");
        assert!(plan(vec![Load::Concurrency(1)]).validate().is_ok());
        // A rate so small that no level would end (and 1e-300 overflowed a Duration).
        for r in [1e-300, 1e-10, MIN_RATE / 2.0] {
            let e = plan(vec![Load::Rate(r)]).validate().unwrap_err();
            assert!(e.contains("--rate") && e.contains("0.001"), "{r}: {e}");
        }
        assert!(plan(vec![Load::Rate(MIN_RATE)]).validate().is_ok());
    }

    #[test]
    fn levels_increase_and_a_level_gets_at_least_one_request_per_stream() {
        use Load::{Concurrency as C, Rate as R};
        for levels in [vec![C(1), C(1)], vec![C(4), C(2)], vec![R(2.0), R(1.0)]] {
            let e = plan(levels.clone()).validate().unwrap_err();
            assert!(e.contains("must increase"), "{levels:?}: {e}");
        }
        let e = plan(vec![C(1), C(16)]).validate().unwrap_err();
        assert!(
            e.contains("--requests 10") && e.contains("--concurrency 16"),
            "{e}"
        );
        let mut p = plan(vec![C(MAX_CONCURRENCY + 1)]);
        p.requests = None;
        p.duration = Some(Duration::from_secs(1));
        let e = p.validate().unwrap_err();
        assert!(e.contains("10000"), "{e}");
        assert!(plan(vec![C(1), C(2), C(10)]).validate().is_ok());
    }

    #[test]
    fn prompt_lengths_are_sizes_at_one_concurrency() {
        let p = |tokens, concurrency| Load::Prompt {
            tokens,
            concurrency,
        };
        assert!(plan(vec![p(64, 1), p(1000, 1), p(1_000_000, 1)])
            .validate()
            .is_ok());
        for bad in [63, 1_000_001, 0] {
            let e = plan(vec![p(bad, 1)]).validate().unwrap_err();
            assert!(
                e.starts_with("--prompt-tokens: ") && e.contains("64 to 1000000"),
                "{e}"
            );
        }
        let e = plan(vec![p(1000, 1), p(256, 1)]).validate().unwrap_err();
        assert!(
            e.contains("prompt 1000 tokens then prompt 256 tokens"),
            "{e}"
        );
        let e = plan(vec![Load::Rate(1.0), p(256, 1)])
            .validate()
            .unwrap_err();
        assert!(e.contains("--prompt-tokens") && e.contains("--rate"), "{e}");
        let e = plan(vec![p(256, 1), p(1000, 1), p(256, 2), p(1000, 2)])
            .validate()
            .unwrap_err();
        assert!(e.contains("--concurrency lists 1,2"), "{e}");
        let e = plan(vec![p(256, 0)]).validate().unwrap_err();
        assert!(e.contains("--concurrency: a level of 0"), "{e}");
        let e = plan(vec![p(256, 16)]).validate().unwrap_err();
        assert!(
            e.contains("--requests 10 is fewer than --concurrency 16"),
            "{e}"
        );
        let mut open = plan(vec![p(256, 1)]);
        open.max_concurrency = Some(2);
        let e = open.validate().unwrap_err();
        assert!(
            e.contains("--prompt-tokens runs each prompt length with --concurrency users")
                && !e.contains("use --rate"),
            "{e}"
        );
    }

    #[test]
    fn a_prompt_length_plan_spends_each_levels_prompt() {
        let levels = vec![
            Load::Prompt {
                tokens: 256,
                concurrency: 1,
            },
            Load::Prompt {
                tokens: 4000,
                concurrency: 1,
            },
        ];
        let lines = plan(levels).describe(|l| u64::from(l.prompt_tokens().unwrap()) + 2, 32);
        assert!(
            lines[1].contains("≈ 3480 tokens (258 prompt + 32 max_tokens each)"),
            "{lines:?}"
        );
        assert!(
            lines[2].contains("(4002 prompt + 32 max_tokens each)"),
            "{lines:?}"
        );
        // 12 × 290 + 12 × 4034.
        assert_eq!(
            lines[3],
            "token spend: up to 51888 tokens (24 requests × (their level's prompt + 32 max_tokens))"
        );
    }

    #[test]
    fn spend_is_requests_times_prompt_plus_max_tokens() {
        let lines = plan(vec![Load::Concurrency(1), Load::Concurrency(2)]).describe(|_| 10, 32);
        let last = lines.last().unwrap();
        assert!(
            last.contains("1008 tokens") && last.contains("24 requests"),
            "{last}"
        );
    }

    #[test]
    fn open_loop_duration_bounds_the_count() {
        let mut p = plan(vec![Load::Rate(2.0)]);
        p.requests = None;
        p.duration = Some(Duration::from_secs(50));
        // 100 expected + 3·10.
        assert_eq!(p.planned(&Load::Rate(2.0)), Some(130));
    }

    #[test]
    fn warmup_parses_counts_and_durations() {
        assert_eq!("4".parse(), Ok(Warmup::Requests(4)));
        assert_eq!("10s".parse(), Ok(Warmup::Time(Duration::from_secs(10))));
        assert!("soon".parse::<Warmup>().is_err());
    }

    /// The plan's arithmetic saturates, so huge rates, counts or warmups are
    /// refused by `--max-requests` instead of wrapping to a small (or zero) plan.
    #[test]
    fn huge_levels_counts_and_warmups_are_refused_not_wrapped() {
        let mut p = plan(vec![Load::Rate(1.0), Load::Rate(1e300)]);
        p.requests = None;
        p.duration = Some(Duration::from_secs(10));
        let e = p.validate().unwrap_err();
        assert!(e.contains("--rate"), "{e}");
        let mut p = plan(vec![Load::Rate(1.0), Load::Rate(MAX_RATE)]);
        p.requests = None;
        p.duration = Some(Duration::from_secs(10));
        let e = p.validate().unwrap_err();
        assert!(e.contains("--max-requests"), "{e}");
        let last = p.describe(|_| 10, 32).pop().unwrap();
        assert!(!last.contains("up to 0 "), "{last}");
        let mut p = plan(vec![Load::Concurrency(1)]);
        p.requests = Some(u64::MAX);
        let e = p.validate().unwrap_err();
        assert!(e.contains("--max-requests"), "{e}");
        let mut p = plan(vec![Load::Concurrency(1)]);
        p.warmup = Warmup::Requests(u64::MAX);
        let e = p.validate().unwrap_err();
        assert!(e.contains("--max-requests"), "{e}");
        assert_eq!(p.planned_total(), Some(u64::MAX));
        // The spend line saturates too.
        let mut p = plan(vec![Load::Concurrency(1)]);
        p.requests = Some(u64::MAX / 2);
        p.max_requests = u64::MAX;
        let last = p.describe(|_| u64::MAX / 4, 32).pop().unwrap();
        assert!(last.contains(&u64::MAX.to_string()), "{last}");
        // A warmup as long as the level measures nothing.
        let mut p = plan(vec![Load::Rate(1.0)]);
        p.requests = None;
        p.duration = Some(Duration::from_secs(10));
        p.warmup = Warmup::Requests(u64::MAX);
        let e = p.validate().unwrap_err();
        assert!(e.contains("--warmup"), "{e}");
        p.warmup = Warmup::Time(Duration::from_secs(10));
        let e = p.validate().unwrap_err();
        assert!(e.contains("--warmup"), "{e}");
        p.warmup = Warmup::Time(Duration::from_secs(2));
        assert!(p.validate().is_ok());
    }

    /// A rate above [`MAX_RATE`] is refused (1e308 hung the chart).
    #[test]
    fn rates_above_the_maximum_are_refused() {
        for r in [1e308, f64::MAX, MAX_RATE * 2.0] {
            let mut p = plan(vec![Load::Rate(r)]);
            p.duration = Some(Duration::from_secs(1));
            let e = p.validate().unwrap_err();
            assert!(e.contains("--rate") && e.contains("100000"), "{r}: {e}");
        }
    }
}
