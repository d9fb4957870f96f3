//! A hosted API's request quota, as the simulator plays it (`--rate-limit N`): N requests per
//! fixed one-minute window, counted from the first request. Every stream's response head says
//! what is left, in the protocol's own header family (Anthropic's `anthropic-ratelimit-*` on
//! `/v1/messages`, OpenAI's `x-ratelimit-*` elsewhere); the request past the quota gets a 429
//! with `Retry-After` until the window ends. The ground truth for the probe's rate-limit gauges.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::protocol::serve::ServeWire;

/// How long a window lasts.
pub const WINDOW: Duration = Duration::from_secs(60);

/// The quota's state: requests served in the current window.
#[derive(Debug)]
pub struct Quota {
    limit: u32,
    state: Mutex<Option<(Instant, u32)>>,
}

/// What the quota decided for one request.
#[derive(Debug)]
pub struct Admission {
    /// Whether the request is served (false: answer 429).
    pub admitted: bool,
    /// The rate-limit headers of the answer.
    pub headers: Vec<(String, String)>,
    /// Whole seconds until the window ends (at least 1): the 429's `Retry-After`.
    pub retry_after: u64,
}

impl Quota {
    /// A quota of `limit` requests a minute.
    pub fn new(limit: u32) -> Self {
        Quota {
            limit,
            state: Mutex::new(None),
        }
    }

    /// Counts a request arriving at `now` and says whether it is served, with the headers that
    /// describe what is left after it.
    pub fn admit(&self, now: Instant, wire: &dyn ServeWire) -> Admission {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (start, used) = match *state {
            Some((start, used)) if now.duration_since(start) < WINDOW => (start, used),
            _ => (now, 0),
        };
        let admitted = used < self.limit;
        let used = if admitted { used + 1 } else { used };
        *state = Some((start, used));
        let left = WINDOW.saturating_sub(now.duration_since(start));
        let headers = wire.rate_limit_headers(self.limit, self.limit - used, left);
        Admission {
            admitted,
            headers,
            retry_after: left.as_secs_f64().ceil().max(1.0) as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Protocol;
    use crate::protocol::serve::serve_wire;

    #[test]
    fn the_quota_counts_down_refuses_and_refills() {
        let q = Quota::new(2);
        let t0 = Instant::now();
        let a = q.admit(t0, serve_wire(Protocol::OpenAiChat));
        assert!(a.admitted);
        assert!(a
            .headers
            .contains(&("x-ratelimit-remaining-requests".into(), "1".into())));
        assert!(
            q.admit(
                t0 + Duration::from_secs(1),
                serve_wire(Protocol::OpenAiChat)
            )
            .admitted
        );
        let refused = q.admit(
            t0 + Duration::from_millis(20_500),
            serve_wire(Protocol::Anthropic),
        );
        assert!(!refused.admitted);
        assert_eq!(refused.retry_after, 40);
        assert!(refused
            .headers
            .contains(&("anthropic-ratelimit-requests-remaining".into(), "0".into())));
        let next = q.admit(t0 + WINDOW, serve_wire(Protocol::OpenAiChat));
        assert!(next.admitted);
        assert!(next
            .headers
            .contains(&("x-ratelimit-remaining-requests".into(), "1".into())));
    }
}
