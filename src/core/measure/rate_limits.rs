//! The quota a hosted API says is left, from its response headers: how many requests and tokens
//! the key may still spend in the current window, its size, and when it resets. Read from every
//! response head, a 429's included, so that the headroom shrinking shows before the 429s start.
//!
//! Two header families (case-insensitive names):
//!
//! - OpenAI and Azure OpenAI: `x-ratelimit-{limit,remaining,reset}-{requests,tokens}`; the reset
//!   is a Go duration (`1s`, `6m0s`, `59.5s`, `20ms`).
//! - Anthropic: `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}`;
//!   the reset is an RFC 3339 instant.
//!
//! A response that carries any header of Anthropic's family is read with that family alone, so
//! two families are never mixed into one made-up window (a gateway may send both).
//!
//! Numbers come from outside and are bounded: a count is a whole number of at most 19 digits,
//! a reset at most [`MAX_RESET`] away; anything else (a negative, a fraction, text, an
//! overflow, a header repeated with two values, a limit of 0: no window) is unknown, never a
//! guess. A remaining count above its limit is kept as sent (a provider may raise the limit
//! mid-window); the gauges show what the server said.

use std::time::{Duration, SystemTime};

/// What a window limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RateLimitKind {
    /// Requests.
    Requests,
    /// Tokens, input and output together (OpenAI, Azure; Anthropic's combined limit).
    Tokens,
    /// Input tokens (Anthropic).
    InputTokens,
    /// Output tokens (Anthropic).
    OutputTokens,
}

impl RateLimitKind {
    /// Every kind, in label order.
    pub const ALL: [RateLimitKind; 4] = [
        RateLimitKind::Requests,
        RateLimitKind::Tokens,
        RateLimitKind::InputTokens,
        RateLimitKind::OutputTokens,
    ];

    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            RateLimitKind::Requests => "requests",
            RateLimitKind::Tokens => "tokens",
            RateLimitKind::InputTokens => "input_tokens",
            RateLimitKind::OutputTokens => "output_tokens",
        }
    }

    /// The kind as the header names spell it.
    fn header_part(self) -> &'static str {
        match self {
            RateLimitKind::Requests => "requests",
            RateLimitKind::Tokens => "tokens",
            RateLimitKind::InputTokens => "input-tokens",
            RateLimitKind::OutputTokens => "output-tokens",
        }
    }
}

/// One window as the last response described it; each part unknown when absent or unreadable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RateLimitWindow {
    /// The window's size.
    pub limit: Option<u64>,
    /// What is left of it.
    pub remaining: Option<u64>,
    /// How long until it is full again, from when the response head was read.
    pub reset: Option<Duration>,
}

impl RateLimitWindow {
    fn is_empty(&self) -> bool {
        self.limit.is_none() && self.remaining.is_none() && self.reset.is_none()
    }
}

/// The rate-limit windows of one response head, by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RateLimits {
    windows: [Option<RateLimitWindow>; 4],
}

/// The longest reset believed: a week. A window that resets later than that is a server's
/// mistake, shown as unknown.
pub const MAX_RESET: Duration = Duration::from_secs(7 * 24 * 3600);

/// What one header family said of one part of one window, while a head is read.
#[derive(Debug, Clone, Copy, Default)]
enum Seen<'a> {
    #[default]
    Absent,
    Once(&'a [u8]),
    /// Two lines of one name: which one counts would be a guess, so neither does.
    Repeated,
}

/// One family's headers of a head: per kind, its limit, remaining and reset.
type Family<'a> = [[Seen<'a>; 3]; 4];

impl RateLimits {
    /// The windows a response head's headers (lower-case names, raw values, each line as it
    /// came) describe, with Anthropic's reset instants measured from `now`; `None` when the head
    /// has no header of either family. One pass, nothing allocated. A response whose
    /// rate-limit headers are all unreadable describes no window: it replaces what an earlier
    /// one said (with nothing) rather than leaving it standing.
    pub fn from_headers<'a>(
        headers: impl IntoIterator<Item = (&'a str, &'a [u8])>,
        now: SystemTime,
    ) -> Option<Self> {
        let (mut anthropic, mut openai): (Family, Family) = Default::default();
        for (name, value) in headers {
            let (family, kind, part) = if let Some(rest) = name.strip_prefix("anthropic-ratelimit-")
            {
                let Some((kind, part)) = rest.rsplit_once('-') else {
                    continue;
                };
                (&mut anthropic, kind, part)
            } else if let Some(rest) = name.strip_prefix("x-ratelimit-") {
                let Some((part, kind)) = rest.split_once('-') else {
                    continue;
                };
                (&mut openai, kind, part)
            } else {
                continue;
            };
            let kind = RateLimitKind::ALL
                .iter()
                .position(|k| k.header_part() == kind);
            let part = ["limit", "remaining", "reset"]
                .iter()
                .position(|p| *p == part);
            if let (Some(k), Some(p)) = (kind, part) {
                let slot = &mut family[k][p];
                *slot = match slot {
                    Seen::Absent => Seen::Once(value),
                    _ => Seen::Repeated,
                };
            }
        }
        let seen = |f: &Family| f.iter().flatten().any(|s| !matches!(s, Seen::Absent));
        let (family, is_anthropic) = match (seen(&anthropic), seen(&openai)) {
            (true, _) => (anthropic, true),
            (false, true) => (openai, false),
            (false, false) => return None,
        };
        let text = |s: Seen<'a>| match s {
            Seen::Once(v) => std::str::from_utf8(v).ok(),
            _ => None,
        };
        let mut found = RateLimits::default();
        for (i, [limit, remaining, reset]) in family.into_iter().enumerate() {
            let window = RateLimitWindow {
                limit: text(limit).and_then(count).filter(|n| *n > 0),
                remaining: text(remaining).and_then(count),
                reset: text(reset).and_then(|v| match is_anthropic {
                    true => reset_at(v, now),
                    false => go_duration(v),
                }),
            };
            if !window.is_empty() {
                found.windows[i] = Some(window);
            }
        }
        Some(found)
    }

    /// The window of `kind`, if the response described it.
    pub fn window(&self, kind: RateLimitKind) -> Option<&RateLimitWindow> {
        let i = RateLimitKind::ALL.iter().position(|k| *k == kind)?;
        self.windows[i].as_ref()
    }
}

/// A count: a whole number of at most 19 digits (below `u64::MAX`), spaces around allowed.
fn count(value: &str) -> Option<u64> {
    let v = value.trim();
    (!v.is_empty() && v.len() <= 19 && v.bytes().all(|b| b.is_ascii_digit()))
        .then(|| v.parse().ok())
        .flatten()
}

/// An RFC 3339 instant (any UTC offset) as the time left until it from `now` (zero once it
/// has passed).
fn reset_at(value: &str, now: SystemTime) -> Option<Duration> {
    let v = value.trim();
    if v.len() > 40 {
        return None;
    }
    let format = time::format_description::well_known::Rfc3339;
    let at = time::OffsetDateTime::parse(v, &format).ok()?;
    let left = SystemTime::from(at)
        .duration_since(now)
        .unwrap_or(Duration::ZERO);
    (left <= MAX_RESET).then_some(left)
}

/// A Go duration as OpenAI writes its resets: one or more `<number><unit>` with units `h`,
/// `m`, `s`, `ms`, `us`/`µs`, `ns` and decimal fractions (`6m0s`, `1.5s`, `20ms`); at most 32
/// bytes and [`MAX_RESET`].
fn go_duration(value: &str) -> Option<Duration> {
    let v = value.trim();
    if v == "0" {
        // Go writes a zero duration without a unit.
        return Some(Duration::ZERO);
    }
    if v.is_empty() || v.len() > 32 {
        return None;
    }
    let mut rest = v;
    let mut total = 0.0f64;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += number * seconds;
    }
    (total.is_finite() && total <= MAX_RESET.as_secs_f64()).then(|| Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(headers: &[(&str, &str)], now: SystemTime) -> Option<RateLimits> {
        RateLimits::from_headers(headers.iter().map(|(k, v)| (*k, v.as_bytes())), now)
    }

    #[test]
    fn openais_headers_give_requests_and_tokens() {
        let r = parse(
            &[
                ("x-ratelimit-limit-requests", "10000"),
                ("x-ratelimit-remaining-requests", "9999"),
                ("x-ratelimit-reset-requests", "6ms"),
                ("x-ratelimit-limit-tokens", "2000000"),
                ("x-ratelimit-remaining-tokens", "1999955"),
                ("x-ratelimit-reset-tokens", "1m30.5s"),
            ],
            SystemTime::now(),
        )
        .unwrap();
        assert_eq!(
            r.window(RateLimitKind::Requests),
            Some(&RateLimitWindow {
                limit: Some(10_000),
                remaining: Some(9_999),
                reset: Some(Duration::from_millis(6)),
            })
        );
        let t = r.window(RateLimitKind::Tokens).unwrap();
        assert_eq!((t.limit, t.remaining), (Some(2_000_000), Some(1_999_955)));
        assert_eq!(t.reset, Some(Duration::from_millis(90_500)));
        assert_eq!(r.window(RateLimitKind::InputTokens), None);
    }

    #[test]
    fn azures_remaining_alone_is_a_window_without_limit() {
        let r = parse(
            &[("x-ratelimit-remaining-tokens", "119000")],
            SystemTime::now(),
        )
        .unwrap();
        let t = r.window(RateLimitKind::Tokens).unwrap();
        assert_eq!((t.limit, t.remaining, t.reset), (None, Some(119_000), None));
        assert_eq!(r.window(RateLimitKind::Requests), None);
    }

    #[test]
    fn anthropics_headers_give_four_kinds_and_reset_instants() {
        let now = humantime::parse_rfc3339("2026-12-07T12:00:00Z").unwrap();
        let r = parse(
            &[
                ("anthropic-ratelimit-requests-limit", "50"),
                ("anthropic-ratelimit-requests-remaining", "49"),
                ("anthropic-ratelimit-requests-reset", "2026-12-07T12:00:30Z"),
                ("anthropic-ratelimit-tokens-remaining", "80000"),
                ("anthropic-ratelimit-input-tokens-limit", "40000"),
                (
                    "anthropic-ratelimit-input-tokens-reset",
                    "2026-12-07T11:59:00Z",
                ),
                ("anthropic-ratelimit-output-tokens-limit", "8000"),
            ],
            now,
        )
        .unwrap();
        let req = r.window(RateLimitKind::Requests).unwrap();
        assert_eq!(
            (req.limit, req.remaining, req.reset),
            (Some(50), Some(49), Some(Duration::from_secs(30)))
        );
        assert_eq!(
            r.window(RateLimitKind::Tokens).unwrap().remaining,
            Some(80_000)
        );
        // A reset already past is zero, not negative.
        assert_eq!(
            r.window(RateLimitKind::InputTokens).unwrap().reset,
            Some(Duration::ZERO)
        );
        assert_eq!(
            r.window(RateLimitKind::OutputTokens).unwrap().limit,
            Some(8_000)
        );
    }

    #[test]
    fn no_header_is_none_and_unreadable_ones_are_no_window() {
        assert_eq!(parse(&[("server", "x")], SystemTime::now()), None);
        let unreadable = parse(
            &[
                ("x-ratelimit-remaining-requests", "lots"),
                ("x-ratelimit-limit-tokens", "-1"),
            ],
            SystemTime::now(),
        )
        .unwrap();
        assert!(RateLimitKind::ALL
            .iter()
            .all(|k| unreadable.window(*k).is_none()));
        // Two lines of one header, or one line with a list (RFC 9110), are no count.
        let remaining = "x-ratelimit-remaining-requests";
        for lines in [
            &[(remaining, "9"), (remaining, "1")][..],
            &[(remaining, "9, 1")],
        ] {
            let twice = parse(lines, SystemTime::now()).unwrap();
            assert_eq!(twice.window(RateLimitKind::Requests), None);
        }
        // A value that is not UTF-8 is unreadable, not skipped.
        let bytes = RateLimits::from_headers([(remaining, &b"\xff7"[..])], SystemTime::now());
        assert_eq!(bytes.unwrap().window(RateLimitKind::Requests), None);
        // A limit of 0 is no window.
        let zero = parse(
            &[
                ("x-ratelimit-limit-requests", "0"),
                ("x-ratelimit-remaining-requests", "0"),
            ],
            SystemTime::now(),
        )
        .unwrap();
        let w = zero.window(RateLimitKind::Requests).unwrap();
        assert_eq!((w.limit, w.remaining), (None, Some(0)));
    }

    #[test]
    fn one_family_per_response_anthropics_when_it_is_there() {
        let r = parse(
            &[
                ("anthropic-ratelimit-requests-limit", "50"),
                ("x-ratelimit-limit-requests", "10000"),
                ("x-ratelimit-remaining-requests", "9000"),
                ("x-ratelimit-reset-requests", "5s"),
            ],
            SystemTime::now(),
        )
        .unwrap();
        assert_eq!(
            r.window(RateLimitKind::Requests),
            Some(&RateLimitWindow {
                limit: Some(50),
                remaining: None,
                reset: None
            })
        );
    }

    #[test]
    fn resets_with_any_offset_and_go_zero() {
        let now = humantime::parse_rfc3339("2026-12-07T12:00:00Z").unwrap();
        for (at, left) in [
            ("2026-12-07T14:00:30+02:00", 30),
            ("2026-12-07t12:00:30z", 30),
            ("2026-12-07T12:00:30-00:00", 30),
            ("2026-12-07T12:00:30.5Z", 30),
            ("1969-12-31T23:59:59Z", 0),
            // RFC 3339 lets an application use a space for the `T`.
            ("2026-12-07 12:00:30Z", 30),
        ] {
            assert_eq!(reset_at(at, now).map(|d| d.as_secs()), Some(left), "{at}");
        }
        for bad in [
            "2026-12-07T12:00:30",
            "2026-13-01T00:00:00Z",
            "2026-12-07T12:00:30+25:00",
        ] {
            assert_eq!(reset_at(bad, now), None, "{bad}");
        }
        assert_eq!(go_duration("0"), Some(Duration::ZERO));
    }

    #[test]
    fn absurd_numbers_are_unknown() {
        for bad in [
            "-1",
            "1.5",
            "1e9",
            "",
            " ",
            "18446744073709551616",
            "99999999999999999999999",
            "0x10",
            "١٢",
        ] {
            assert_eq!(count(bad), None, "{bad:?}");
        }
        assert_eq!(count(" 42 "), Some(42));
        assert_eq!(count("9223372036854775807"), Some(i64::MAX as u64));
        for bad in [
            "",
            "s",
            "5",
            "5x",
            "-1s",
            "1..5s",
            "1s5",
            "9999999h",
            "1e3s",
            "NaNs",
            "infs",
            "1h1h1h1h1h1h1h1h1h1h1h1h1h1h1h1h1h",
        ] {
            assert_eq!(go_duration(bad), None, "{bad:?}");
        }
        assert_eq!(go_duration("168h"), Some(MAX_RESET));
        assert_eq!(go_duration("168h1s"), None);
        assert_eq!(go_duration("1µs"), Some(Duration::from_micros(1)));
        let now = SystemTime::now();
        assert_eq!(reset_at("not a time", now), None);
        assert_eq!(reset_at("9999-12-31T23:59:59Z", now), None);
        assert_eq!(reset_at(&"2".repeat(100), now), None);
    }
}
