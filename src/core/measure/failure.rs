//! Why a probe failed: a fixed set of reasons, each with a `&'static str` metric label.

use std::fmt;

/// The fixed set of failure reasons; the `reason` label of `llm_probe_probe_failures_total`.
///
/// The set is closed on purpose: labels never carry error strings (docs/metrics.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FailureReason {
    /// The host name did not resolve.
    Dns,
    /// TCP connect refused, reset or unreachable before a response.
    Connect,
    /// TLS handshake or certificate failure.
    Tls,
    /// The probe's deadline (`timeout`) passed before the stream ended.
    Timeout,
    /// The server answered with a non-2xx status.
    HttpStatus,
    /// The HTTP exchange itself was malformed (bad response head, body framing).
    HttpProtocol,
    /// The server sent an error inside a 2xx stream (error event, `finish_reason: "error"`).
    StreamError,
    /// The stream could not be decoded: invalid UTF-8, or a data line that looks like JSON but isn't.
    Decode,
    /// The stream ended (reset or closed) before it was complete.
    Truncated,
    /// The stream completed without a single token (e.g. only `[DONE]`).
    EmptyStream,
    /// The stream exceeded a size cap (bytes per probe, bytes per event, or token events per probe).
    TooLarge,
    /// The target's credentials cannot be read (an unset or empty `api_key_env` variable, a
    /// missing or unreadable `api_key_file` or TLS file): no request was sent. The detail names
    /// the variable or file, never a value.
    Credentials,
    /// The stream was complete but the answer failed one of the scenario's answer checks
    /// (`expect:`, a required tool call, tool arguments against their schema, or a built-in
    /// degeneration check: a repetition loop, punctuation only, a leaked special token, an
    /// empty answer after reasoning). The detail names the check and a short redacted excerpt;
    /// `llm_probe_answer_check_failures_total{check}` counts which check. Its timings are not
    /// observed into the success histograms.
    WrongAnswer,
    /// The server said it is overloaded: HTTP 529, or an `overloaded_error` inside the stream
    /// or as the error body (Anthropic's signal to retry later). A capacity problem of the
    /// provider, told apart from `http_status` and `stream_error` (a fault of the request or the
    /// server) so that it can be seen before the rate limits bite.
    Overloaded,
}

impl FailureReason {
    /// Every reason, in label order (for pre-registering series and documentation).
    pub const ALL: [FailureReason; 14] = [
        FailureReason::Dns,
        FailureReason::Connect,
        FailureReason::Tls,
        FailureReason::Timeout,
        FailureReason::HttpStatus,
        FailureReason::HttpProtocol,
        FailureReason::StreamError,
        FailureReason::Decode,
        FailureReason::Truncated,
        FailureReason::EmptyStream,
        FailureReason::TooLarge,
        FailureReason::Credentials,
        FailureReason::WrongAnswer,
        FailureReason::Overloaded,
    ];

    /// The metric label value (snake_case, stable).
    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::Dns => "dns",
            FailureReason::Connect => "connect",
            FailureReason::Tls => "tls",
            FailureReason::Timeout => "timeout",
            FailureReason::HttpStatus => "http_status",
            FailureReason::HttpProtocol => "http_protocol",
            FailureReason::StreamError => "stream_error",
            FailureReason::Decode => "decode",
            FailureReason::Truncated => "truncated",
            FailureReason::EmptyStream => "empty_stream",
            FailureReason::TooLarge => "too_large",
            FailureReason::Credentials => "credentials",
            FailureReason::WrongAnswer => "wrong_answer",
            FailureReason::Overloaded => "overloaded",
        }
    }
}

impl fmt::Display for FailureReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed probe: the reason (for metrics) and a bounded human-readable detail (for logs and
/// `probe-once` only; never a label). The detail never contains request headers, so never a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The label.
    pub reason: FailureReason,
    /// What happened, at most [`Failure::MAX_DETAIL`] bytes.
    pub detail: String,
}

impl Failure {
    /// Cap on `detail`, in bytes.
    pub const MAX_DETAIL: usize = 512;

    /// A failure with `detail` cut to [`Failure::MAX_DETAIL`] bytes on a character boundary.
    pub fn new(reason: FailureReason, detail: impl Into<String>) -> Self {
        let mut detail = detail.into();
        if detail.len() > Self::MAX_DETAIL {
            detail.truncate(prefix_within(&detail, Self::MAX_DETAIL).len());
            detail.push('…');
        }
        Failure { reason, detail }
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
pub(crate) fn prefix_within(s: &str, max: usize) -> &str {
    let mut cut = s.len().min(max);
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    &s[..cut]
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.reason, self.detail)
    }
}
