//! The trace context each probe sends: a W3C `traceparent` (Trace Context, level 1:
//! `00-<32 hex trace id>-<16 hex parent id>-01`) and an `x-request-id`, so a slow probe can be
//! found in the engine's own spans and logs (vLLM and SGLang read `traceparent`; vLLM, TGI and
//! most gateways log `x-request-id`). Both are recorded on the probe's observations.
//! A target whose `headers:` set either one sends its own value instead (and that is recorded).

use crate::protocol::new_nonce;

/// The trace identifiers of one probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    /// 32 lowercase hex digits, never all zero (W3C Trace Context §3.2.2.3).
    pub trace_id: String,
    /// 16 lowercase hex digits, never all zero: the probe's own span, the parent of the
    /// server's.
    pub span_id: String,
}

impl TraceContext {
    /// Fresh identifiers, unique per call within a process and very likely across processes
    /// (the cold-cache nonce generator: wall-clock nanoseconds mixed with a counter). Not
    /// secrets.
    pub fn new() -> TraceContext {
        let nonzero = |s: String| {
            if s.bytes().all(|b| b == b'0') {
                format!("{}1", &s[..s.len() - 1])
            } else {
                s
            }
        };
        TraceContext {
            trace_id: nonzero(format!("{}{}", new_nonce(), new_nonce())),
            span_id: nonzero(new_nonce()),
        }
    }

    /// The `traceparent` header value: version 00, sampled.
    pub fn traceparent(&self) -> String {
        format!("00-{}-{}-01", self.trace_id, self.span_id)
    }

    /// The `x-request-id` header value: `llm-probe-` and the span id.
    pub fn request_id(&self) -> String {
        format!("llm-probe-{}", self.span_id)
    }
}

impl Default for TraceContext {
    fn default() -> Self {
        TraceContext::new()
    }
}

/// The trace id inside a valid W3C `traceparent` value (`00-TRACEID-PARENT-FLAGS`; see
/// [`crate::measure::TraceId::of_traceparent`] for what is valid).
pub fn trace_id_of(traceparent: &str) -> Option<&str> {
    crate::measure::TraceId::of_traceparent(traceparent)?;
    traceparent.get(3..35)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_has_the_w3c_shape_and_ids_differ() {
        let (a, b) = (TraceContext::new(), TraceContext::new());
        let tp = a.traceparent();
        let parts: Vec<&str> = tp.split('-').collect();
        assert_eq!(parts.len(), 4);
        assert_eq!(parts[0], "00");
        assert_eq!(parts[1].len(), 32);
        assert_eq!(parts[2].len(), 16);
        assert_eq!(parts[3], "01");
        assert!(tp
            .bytes()
            .all(|c| c == b'-' || c.is_ascii_digit() || (b'a'..=b'f').contains(&c)));
        assert_ne!(a.trace_id, b.trace_id);
        assert_ne!(a.request_id(), b.request_id());
        assert_eq!(trace_id_of(&tp), Some(a.trace_id.as_str()));
        assert_eq!(trace_id_of("garbage"), None);
    }
}
