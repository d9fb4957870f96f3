//! Which way the stamped client's connections go (`super::transport`): straight to the target,
//! or through the proxy the environment names for its URL (`HTTP_PROXY`, `HTTPS_PROXY`,
//! `ALL_PROXY`, `NO_PROXY`, lower case too), decided by hyper-util's matcher, the one reqwest's
//! client uses, so both clients take the same way.
//!
//! The stamped client takes a proxy reached over plain TCP (`http://` proxy URL), whose socket
//! it can stamp: for an `https` target it opens a tunnel (`CONNECT`, hyper-util's [`Tunnel`],
//! with the proxy's credentials and the probe's `User-Agent`) and TLS runs inside it; for a
//! plain `http` target the request goes to the proxy in absolute form with a
//! `Proxy-Authorization` header, as reqwest sends it. The kernel stamps then are the arrival of
//! the proxy's segments at this host, which is what the probe can see of the target. An
//! `https://` proxy (TLS to the proxy) or a SOCKS one is left to reqwest ([`route`] says
//! `None`).

use std::fmt;

use http::{HeaderMap, HeaderValue, Uri};
use hyper_util::client::legacy::connect::proxy::Tunnel;
use hyper_util::client::proxy::matcher::Matcher;

/// How the stamped client reaches a target.
#[derive(Clone)]
pub(super) enum Route {
    /// Straight to the target's host.
    Direct,
    /// Through the HTTP proxy at `uri` (no user-info), with `Basic` credentials from the proxy
    /// variable's user-info (a secret: never shown).
    Proxy { uri: Uri, auth: Option<HeaderValue> },
}

impl fmt::Debug for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Route::Direct => f.write_str("Direct"),
            Route::Proxy { uri, auth } => f
                .debug_struct("Proxy")
                .field("host", &uri.host())
                .field("port", &uri.port_u16())
                .field("auth", &auth.as_ref().map(|_| "<redacted>"))
                .finish(),
        }
    }
}

/// The route to `url` from the environment's proxy variables, or `None` when the proxy for it
/// is one the stamped client does not take (see the module docs).
pub(super) fn route(url: &reqwest::Url) -> Option<Route> {
    let uri: Uri = url.as_str().parse().ok()?;
    let Some(proxy) = Matcher::from_system().intercept(&uri) else {
        return Some(Route::Direct);
    };
    if proxy.uri().scheme_str() != Some("http") {
        return None;
    }
    let auth = proxy.basic_auth().cloned().map(|mut v| {
        v.set_sensitive(true);
        v
    });
    Some(Route::Proxy {
        uri: proxy.uri().clone(),
        auth,
    })
}

/// The credentials of the proxy the environment names for `url` (any proxy scheme, so those
/// reqwest uses too), in the forms a proxy or server may echo back in an error page: the
/// `Proxy-Authorization` value's base64 (`Basic …`), and decoded, `user:password` and the
/// password alone. Secrets for redaction ([`crate::sanitize::redact_secrets`]); empty without a
/// proxy or credentials.
pub(crate) fn proxy_secrets(url: &reqwest::Url) -> Vec<String> {
    use base64::Engine;
    let Some(proxy) = url
        .as_str()
        .parse::<Uri>()
        .ok()
        .and_then(|uri| Matcher::from_system().intercept(&uri))
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some(basic) = proxy
        .basic_auth()
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
    {
        out.push(basic.trim().to_string());
        if let Some(pair) = base64::engine::general_purpose::STANDARD
            .decode(basic.trim())
            .ok()
            .and_then(|d| String::from_utf8(d).ok())
        {
            if let Some((_, password)) = pair.split_once(':') {
                out.push(password.to_string());
            }
            out.push(pair);
        }
    }
    if let Some((user, password)) = proxy.raw_auth() {
        out.push(format!("{user}:{password}"));
        out.push(password.to_string());
    }
    out
}

impl Route {
    /// The `Proxy-Authorization` a request to a plain `http` URL carries on this route.
    pub(super) fn request_auth(&self) -> Option<&HeaderValue> {
        match self {
            Route::Proxy { auth, .. } => auth.as_ref(),
            Route::Direct => None,
        }
    }

    /// A tunnel through this route's proxy over `connector`, sending the proxy's credentials and
    /// the probe's `User-Agent` with its `CONNECT`; `None` for a direct route.
    pub(super) fn tunnel<C>(&self, connector: C) -> Option<Tunnel<C>> {
        let Route::Proxy { uri, auth } = self else {
            return None;
        };
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::USER_AGENT,
            HeaderValue::from_static(super::client::USER_AGENT),
        );
        let tunnel = Tunnel::new(uri.clone(), connector).with_headers(headers);
        Some(match auth {
            Some(auth) => tunnel.with_auth(auth.clone()),
            None => tunnel,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The proxy's credentials never show in debug output, and go only where they belong: with
    /// a plain `http` request, and with a tunnel's `CONNECT`.
    #[test]
    fn credentials_are_redacted_and_kept_for_the_proxy() {
        let auth = HeaderValue::from_static("Basic cHJvYmU6Um91dGVTZWNyZXQ=");
        let route = Route::Proxy {
            uri: Uri::from_static("http://proxy.example:3128"),
            auth: Some(auth.clone()),
        };
        let shown = format!("{route:?}");
        assert!(!shown.contains("cHJvYmU6"), "{shown}");
        assert!(
            shown.contains("proxy.example") && shown.contains("3128"),
            "{shown}"
        );
        assert_eq!(route.request_auth(), Some(&auth));
        assert!(route.tunnel(()).is_some());
        assert_eq!(Route::Direct.request_auth(), None);
        assert!(Route::Direct.tunnel(()).is_none());
    }
}
