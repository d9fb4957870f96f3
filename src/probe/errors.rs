//! Mapping transport errors onto the fixed [`FailureReason`] set.

use std::error::Error as _;

use crate::decode::DecodeError;
use crate::measure::{Failure, FailureReason, Observations};

/// The error and its sources, joined with ": ". Not the URL that reqwest puts in its Display
/// (its path and query are configuration, not news); a connect error names the host and port it
/// tried, which is what a wrong `base_url` gets wrong.
fn describe(e: &reqwest::Error) -> String {
    let mut parts = Vec::new();
    let mut source = e.source();
    while let Some(s) = source {
        parts.push(s.to_string());
        source = s.source();
    }
    let connect_to;
    let head = if e.is_connect() {
        connect_to = match e
            .url()
            .and_then(|u| Some((u.host_str()?, u.port_or_known_default()?)))
        {
            Some((host, port)) => format!("could not connect to {host}:{port}"),
            None => "could not connect".to_string(),
        };
        connect_to.as_str()
    } else if e.is_timeout() {
        "timed out"
    } else if e.is_request() {
        "request failed"
    } else if e.is_body() || e.is_decode() {
        "reading the response failed"
    } else {
        "HTTP error"
    };
    if parts.is_empty() {
        head.to_string()
    } else {
        format!("{head}: {}", parts.join(": "))
    }
}

/// Classifies an error from sending the request or receiving the response head.
pub(super) fn classify(e: &reqwest::Error) -> Failure {
    let detail = describe(e);
    let lower = detail.to_ascii_lowercase();
    let reason = if lower.contains("dns error") || lower.contains("failed to lookup address") {
        FailureReason::Dns
    } else if lower.contains("certificate") || lower.contains("tls") || lower.contains("handshake")
    {
        FailureReason::Tls
    } else if e.is_timeout() {
        FailureReason::Timeout
    } else if e.is_connect() {
        FailureReason::Connect
    } else if lower.contains("connection reset")
        || lower.contains("connection closed")
        || lower.contains("incomplete message")
    {
        // The server accepted the connection and dropped it before a response head.
        FailureReason::Connect
    } else {
        FailureReason::HttpProtocol
    };
    Failure::new(reason, detail)
}

/// Classifies an error while reading the body: the stream was cut short.
pub(super) fn classify_body(e: &reqwest::Error, obs: &Observations) -> Failure {
    Failure::new(
        FailureReason::Truncated,
        format!(
            "{} (after {} token events)",
            describe(e),
            obs.timeline.token_events.len()
        ),
    )
}

/// A decoder error: `too_large` for the size cap, `decode` for invalid UTF-8.
pub(super) fn decode(e: DecodeError) -> Failure {
    let reason = match e {
        DecodeError::TooLarge { .. } => FailureReason::TooLarge,
        DecodeError::InvalidUtf8 => FailureReason::Decode,
    };
    Failure::new(reason, e.to_string())
}
