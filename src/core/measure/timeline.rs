//! A probe's marks on the monotonic clock (docs/measurement.md, "Marks and definitions").

use std::time::{Duration, Instant};

/// What a token-bearing event carried.
///
/// Source: docs/measurement.md. `Reasoning` is reasoning text (`delta.reasoning_content`,
/// `delta.reasoning`, Anthropic `thinking_delta`, Ollama `message.thinking`); `Output` is answer
/// text or tool-call arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// Reasoning ("thinking") text: counts for TTFT, not for time to first output token.
    Reasoning,
    /// Answer text or tool-call arguments.
    Output,
}

/// One token-bearing event: the instant its read returned, and what it carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenEvent {
    /// When the network read that completed this event returned (before any parsing).
    pub at: Instant,
    /// Reasoning or output text.
    pub kind: TokenKind,
}

/// What the instants of the marks after the request (`headers`, token events, `ended`) are.
///
/// Source: [`crate::probe::arrival`]. `Kernel`: the kernel's receive time of the
/// bytes, mapped onto the monotonic clock, independent of how late the probe's task read them;
/// on Linux, for `http://` and `https://` targets (TLS, mTLS, HTTP/2 too; for TLS, the arrival
/// of the segment that completed the record), direct or through an HTTP proxy from the
/// environment. `Read`: the instant the read returned to the probe's task, which includes any
/// delay of the probe's own scheduling (an idle CPU waking up, a saturated one); targets behind
/// an `https://` or SOCKS proxy, other platforms, and a probe with a token read that carried no
/// kernel stamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimestampSource {
    /// Kernel receive timestamps.
    Kernel,
    /// Read-return instants (the fallback: `https://` or SOCKS proxies, other platforms).
    #[default]
    Read,
}

impl TimestampSource {
    /// `kernel` or `read`, as `probe-once` prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            TimestampSource::Kernel => "kernel",
            TimestampSource::Read => "read",
        }
    }
}

/// The marks of one probe. Instants only; durations are methods of [`crate::measure::Measurement`].
#[derive(Debug, Clone)]
pub struct Timeline {
    /// Just before the request was handed to the HTTP client.
    pub sent: Instant,
    /// The HTTP client started opening the connection this request went out on (DNS
    /// resolution, TCP connect, proxy `CONNECT`, TLS handshake follow). `None` when the request
    /// used a connection that was already open (`connection: reuse`) or none was opened.
    pub connect_started: Option<Instant>,
    /// That connection was ready to carry the request. Set together with `connect_started`.
    pub connected: Option<Instant>,
    /// Client phase: the host name resolved, on the connection the probe opened.
    /// `None` for an IP literal, a reused connection, or a connector not using the probe's
    /// resolver.
    pub dns_resolved: Option<Instant>,
    /// Client phase: the TCP connection (to the target or its proxy) was established. `None`
    /// for a reused connection, or a client that does not expose it (reqwest's, used for
    /// `https://` and SOCKS proxies and outside Linux).
    pub tcp_connected: Option<Instant>,
    /// Client phase: the TLS handshake was done (`https` only; the same instant as
    /// `connected`). `None` for plain HTTP or a reused connection.
    pub tls_done: Option<Instant>,
    /// Client phase: the last byte of the request was handed to the socket (the last write on
    /// the connection before the response head: when its call returned, or when it began if
    /// the head arrived before the return was noted). HTTP/1.x on the stamped client only:
    /// `None` on HTTP/2 (whose control frames share the connection) and on reqwest's client.
    pub request_written: Option<Instant>,
    /// Client phase: the kernel arrival of the first byte of the response (the first data
    /// that arrived after `request_written`), at or before `headers`. Same availability as
    /// `request_written`, and kernel timestamps only. In a scheduled probe of `llm-probe run`
    /// the head may be read late (wake-up coalescing, `crate::probe::coalesce`): when the
    /// first token arrived within that wait after the head, both came in one read and this
    /// (and `headers`) is the token's arrival, later by at most the wait. The debug probe and
    /// `probe-once`, which show it, read at once.
    pub first_byte: Option<Instant>,
    /// Status line and headers received (their arrival, with the caveat of `first_byte`).
    pub headers: Option<Instant>,
    /// Every token-bearing event, in arrival order (non-decreasing instants).
    pub token_events: Vec<TokenEvent>,
    /// Stream finished: terminator seen, or clean close after the last event.
    pub ended: Option<Instant>,
    /// What the instants of `headers`, the token events and `ended` are.
    pub timestamp_source: TimestampSource,
}

impl Timeline {
    /// A timeline whose `sent` mark is `sent`; no other marks yet.
    pub fn new(sent: Instant) -> Self {
        Timeline {
            sent,
            connect_started: None,
            connected: None,
            dns_resolved: None,
            tcp_connected: None,
            tls_done: None,
            request_written: None,
            first_byte: None,
            headers: None,
            token_events: Vec::new(),
            ended: None,
            timestamp_source: TimestampSource::Read,
        }
    }

    /// Connection setup time, `connected − connect_started`: how long opening the connection
    /// took (DNS, TCP, proxy `CONNECT`, TLS). It is part of TTFT and E2E, which start at `sent`.
    /// `None` when the probe opened no connection of its own.
    pub fn connection_setup(&self) -> Option<Duration> {
        Some(
            self.connected?
                .saturating_duration_since(self.connect_started?),
        )
    }

    /// Records a token-bearing event that arrived `at` (the read's instant).
    pub fn token(&mut self, at: Instant, kind: TokenKind) {
        self.token_events.push(TokenEvent { at, kind });
    }

    /// First event carrying generated text of any kind (reasoning included).
    pub fn first_token(&self) -> Option<Instant> {
        self.token_events.first().map(|e| e.at)
    }

    /// First event carrying non-reasoning text (answer or tool call).
    pub fn first_output(&self) -> Option<Instant> {
        self.token_events
            .iter()
            .find(|e| e.kind == TokenKind::Output)
            .map(|e| e.at)
    }

    /// Last token-bearing event.
    pub fn last_token(&self) -> Option<Instant> {
        self.token_events.last().map(|e| e.at)
    }
}
