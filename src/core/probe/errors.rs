//! Mapping transport errors onto the fixed [`FailureReason`] set, by the errors' types.
//!
//! The reason is read from what the error *is* — the chain of `source()`s (and the error inside
//! each `std::io::Error`), downcast to our resolver's [`ResolveError`], `rustls::Error`,
//! `hyper::Error` and `std::io::ErrorKind` — never from its text, which holds the host name
//! (a host called `tls-gateway` refused on connect is `connect`, not `tls`). The text is only the
//! human-readable detail.

use std::error::Error;
use std::io;

use super::resolve::ResolveError;
use crate::decode::DecodeError;
use crate::measure::{Failure, FailureReason, Observations};

/// The error, then each error under it: `source()`, and for an `io::Error` the error it wraps
/// (`io::Error::source` skips that one). At most 32 levels.
fn chain<'a>(e: &'a (dyn Error + 'static)) -> Vec<&'a (dyn Error + 'static)> {
    let mut out = vec![e];
    while out.len() < 32 {
        let cur = out[out.len() - 1];
        let next = match cur.downcast_ref::<io::Error>() {
            Some(io) => io.get_ref().map(|inner| inner as &(dyn Error + 'static)),
            None => cur.source(),
        };
        match next {
            Some(n) => out.push(n),
            None => break,
        }
    }
    out
}

fn find<'a, T: Error + 'static>(chain: &[&'a (dyn Error + 'static)]) -> Option<&'a T> {
    chain.iter().find_map(|e| e.downcast_ref::<T>())
}

/// The kinds of the `io::Error`s in the chain, outermost first.
fn io_kinds(chain: &[&(dyn Error + 'static)]) -> Vec<io::ErrorKind> {
    chain
        .iter()
        .filter_map(|e| e.downcast_ref::<io::Error>())
        .map(io::Error::kind)
        .collect()
}

/// The error and its sources, joined with ": ". Not the URL that reqwest puts in its Display
/// (its path and query are configuration, not news); a connect error names the host and port it
/// tried, which is what a wrong `base_url` gets wrong, or the replica it dialled.
fn describe(e: &reqwest::Error, replica: Option<&str>) -> String {
    let head = if e.is_connect() {
        connect_head(e.url(), replica)
    } else if e.is_timeout() {
        "timed out".to_string()
    } else if e.is_request() {
        "request failed".to_string()
    } else if e.is_body() || e.is_decode() {
        READING.to_string()
    } else {
        "HTTP error".to_string()
    };
    joined(head, e.source())
}

/// The head of a body error's detail.
const READING: &str = "reading the response failed";

/// "could not connect to {host}:{port}" for `url`; for a replica (`replica`: its label, with the
/// address it was dialled at when that is another), "could not connect to replica {replica} of
/// {host}:{port}": the host name is the pool's, and only the replica says which machine refused.
fn connect_head(url: Option<&reqwest::Url>, replica: Option<&str>) -> String {
    let host_port = url.and_then(|u| Some((u.host_str()?, u.port_or_known_default()?)));
    if let Some(replica) = replica {
        return match host_port {
            Some((host, port)) => {
                format!("could not connect to replica {replica} of {host}:{port}")
            }
            None => format!("could not connect to replica {replica}"),
        };
    }
    match host_port {
        Some((host, port)) => match url.and_then(env_proxy_for) {
            Some(proxy) => format!("could not connect to {host}:{port} through the proxy {proxy} (from the HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and NO_PROXY environment variables)"),
            None => format!("could not connect to {host}:{port}"),
        },
        None => "could not connect".to_string(),
    }
}

/// `head`, then `first` and each error under it, joined with ": " (repeats dropped).
fn joined(head: String, first: Option<&(dyn Error + 'static)>) -> String {
    let mut parts = Vec::new();
    let mut source = first;
    while let Some(s) = source {
        parts.push(s.to_string());
        source = s.source();
    }
    parts.dedup();
    if parts.is_empty() {
        head
    } else {
        format!("{head}: {}", parts.join(": "))
    }
}

/// The proxy (`host:port`, never its user-info) that the environment's proxy variables send a
/// request for `url` through, as reqwest's client (built with the system proxies) does; `None`
/// for a direct connection. A refused proxy otherwise reads as a refused target.
fn env_proxy_for(url: &reqwest::Url) -> Option<String> {
    let uri: hyper::Uri = url.as_str().parse().ok()?;
    let matcher = hyper_util::client::proxy::matcher::Matcher::from_system();
    let proxy = matcher.intercept(&uri)?;
    let proxy = proxy.uri();
    let host = proxy.host()?;
    let port = proxy.port_u16().unwrap_or(match proxy.scheme_str() {
        Some("https") => 443,
        _ => 80,
    });
    Some(format!("{host}:{port}"))
}

/// Closed or reset by the peer.
fn is_closed_kind(k: io::ErrorKind) -> bool {
    matches!(
        k,
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::UnexpectedEof
    )
}

/// The reason for an error from sending the request or receiving the response head, from the
/// error's types (see the module docs); `https` says whether the URL was `https`.
fn reason_before_response(
    e: &(dyn Error + 'static),
    https: bool,
    is_connect: bool,
    is_timeout: bool,
) -> FailureReason {
    let chain = chain(e);
    let kinds = io_kinds(&chain);
    let hyper = find::<hyper::Error>(&chain);
    if find::<ResolveError>(&chain).is_some() {
        FailureReason::Dns
    } else if find::<rustls::Error>(&chain).is_some() {
        FailureReason::Tls
    } else if is_timeout || kinds.contains(&io::ErrorKind::TimedOut) {
        FailureReason::Timeout
    } else if is_connect {
        // A TCP connect is refused or unreachable, never cut: a peer that closes or resets an
        // https connection while it is being set up did so in the TLS handshake.
        if https && kinds.iter().any(|k| is_closed_kind(*k)) {
            FailureReason::Tls
        } else {
            FailureReason::Connect
        }
    } else if hyper.is_some_and(|h| h.is_parse() || h.is_parse_status() || h.is_user()) {
        FailureReason::HttpProtocol
    } else if hyper.is_some_and(|h| h.is_incomplete_message() || h.is_closed() || h.is_canceled())
        || kinds.iter().any(|k| is_closed_kind(*k))
    {
        // The server accepted the connection and dropped it before a response head.
        FailureReason::Connect
    } else {
        FailureReason::HttpProtocol
    }
}

/// Classifies an error from sending the request or receiving the response head; `replica` is
/// the label of the replica the request went to, if it went to one.
pub(super) fn classify(e: &reqwest::Error, replica: Option<&str>) -> Failure {
    let https = e.url().is_some_and(|u| u.scheme() == "https");
    Failure::new(
        reason_before_response(e, https, e.is_connect(), e.is_timeout()),
        describe(e, replica),
    )
}

/// Classifies an error of the stamped client ([`super::transport`]) from sending the request to
/// `url` or receiving the response head; the reason and detail read as [`classify`]'s, except
/// that a plain `http` connection closed after `answered` bytes of the answer (> 0) came is
/// `http_protocol`: the server answered and cut its response head short, which hyper reports
/// as it reports a close before any byte (`connect`).
pub(super) fn classify_stamped(
    e: &hyper_util::client::legacy::Error,
    url: &reqwest::Url,
    answered: u64,
    replica: Option<&str>,
) -> Failure {
    let https = url.scheme() == "https";
    let reason = reason_before_response(e, https, e.is_connect(), false);
    let head = if e.is_connect() {
        connect_head(Some(url), replica)
    } else if reason == FailureReason::Connect && !https && answered > 0 {
        let head = format!(
            "the connection closed in the middle of the response head ({answered} bytes of it came)"
        );
        return Failure::new(FailureReason::HttpProtocol, joined(head, Some(e)));
    } else {
        "request failed".to_string()
    };
    Failure::new(reason, joined(head, Some(e)))
}

/// The reason for an error while reading the body: `http_protocol` for broken framing (an invalid
/// chunk-size line), `tls` for a TLS failure, else `truncated` (reset, or closed mid-body).
fn reason_in_body(e: &(dyn Error + 'static)) -> FailureReason {
    let chain = chain(e);
    let framing = io_kinds(&chain)
        .iter()
        .any(|k| matches!(k, io::ErrorKind::InvalidData | io::ErrorKind::InvalidInput));
    if find::<rustls::Error>(&chain).is_some() {
        FailureReason::Tls
    } else if framing || find::<hyper::Error>(&chain).is_some_and(hyper::Error::is_parse) {
        FailureReason::HttpProtocol
    } else {
        FailureReason::Truncated
    }
}

/// Classifies an error while reading the body, from either transport.
pub(super) fn classify_body(e: &super::transport::BodyError, obs: &Observations) -> Failure {
    let detail = match e {
        super::transport::BodyError::Reqwest(e) => describe(e, None),
        super::transport::BodyError::Hyper(e) => joined(READING.to_string(), Some(e)),
    };
    Failure::new(
        reason_in_body(e.as_error()),
        format!(
            "{detail} (after {} token events)",
            obs.timeline.token_events.len()
        ),
    )
}

/// A decoder error: `too_large` for the size cap, `decode` for invalid UTF-8 or a content coding
/// that does not decode.
pub(super) fn decode(e: DecodeError) -> Failure {
    let reason = match e {
        DecodeError::TooLarge { .. } => FailureReason::TooLarge,
        DecodeError::InvalidUtf8
        | DecodeError::CorruptCoding { .. }
        | DecodeError::BadFrame { .. } => FailureReason::Decode,
    };
    Failure::new(reason, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resolver_error_is_told_once() {
        let inner = io::Error::other("Name or service not known");
        let e = ResolveError::Lookup(inner);
        assert_eq!(
            joined("dns error".into(), Some(&e)),
            "dns error: the host name did not resolve: Name or service not known"
        );
    }

    #[derive(Debug, thiserror::Error)]
    #[error("outer: {0}")]
    struct Outer(#[source] io::Error);

    #[test]
    fn the_chain_goes_through_io_errors_into_what_they_wrap() {
        let inner = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let e = Outer(io::Error::new(io::ErrorKind::InvalidData, inner));
        let c = chain(&e);
        assert_eq!(c.len(), 3, "{c:?}");
        assert!(find::<rustls::Error>(&c).is_some());
        assert_eq!(io_kinds(&c), [io::ErrorKind::InvalidData]);
    }
}
