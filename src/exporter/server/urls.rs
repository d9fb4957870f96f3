//! Where the exporter's pages live: `--web.external-url` and `--web.route-prefix`, as
//! Prometheus has them.
//!
//! - `--web.route-prefix /llm`: every endpoint (`/metrics`, `/-/healthy`, `/`, `/targets/…`,
//!   `/probe`, …) is served under `/llm/…`; a request to `/` or `/llm` is redirected to
//!   `/llm/`, and any other path outside the prefix is a 404.
//! - `--web.external-url https://example.org/llm/`: the URL people and proxies reach the
//!   exporter under. Its path is where links and redirects point, and the route prefix
//!   defaults to it (a proxy that strips the prefix before forwarding wants
//!   `--web.route-prefix /` with it).
//!
//! Without either flag nothing changes: the endpoints are at `/metrics`, `/`, and so on.

use std::fmt;

/// The route prefix and the link prefix of the exporter's pages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WebUrls {
    /// The path the server answers under, `""` for the root, else `/a/b` (no trailing slash).
    route_prefix: String,
    /// The path links and redirects start with, as `route_prefix`.
    link_prefix: String,
    /// `--web.external-url` as given (without a trailing slash), if any.
    external: Option<String>,
}

/// A `--web.external-url` or `--web.route-prefix` that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{flag} {value:?}: {why}")]
pub struct UrlError {
    /// The flag.
    pub flag: &'static str,
    /// What it was given.
    pub value: String,
    /// What is wrong and how to fix it.
    pub why: String,
}

/// What a route prefix percent-encodes: everything but the characters a URL path carries
/// as they are (letters, digits, `-._~`, `!$&'()*+,;=`, `:@` and `/`). A request line
/// carries the others encoded (non-ASCII, `"`, `<`, …), and a raw backslash in a redirect
/// is read by browsers as a slash (`/\\host/` is another site).
const PATH_ESCAPED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'!')
    .remove(b'$')
    .remove(b'&')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')')
    .remove(b'*')
    .remove(b'+')
    .remove(b',')
    .remove(b';')
    .remove(b'=')
    .remove(b':')
    .remove(b'@')
    .remove(b'/');

/// `p` as a prefix: a leading `/`, no trailing `/`, `""` for the root.
fn normalize(p: &str) -> String {
    let trimmed = p.trim_matches('/');
    if trimmed.is_empty() {
        String::new()
    } else {
        format!("/{trimmed}")
    }
}

impl WebUrls {
    /// The prefixes for `--web.external-url` `external` and `--web.route-prefix` `route_prefix`
    /// (default: the external URL's path).
    ///
    /// Errors: an external URL that is not an absolute `http(s)://` URL, or one with a query or
    /// fragment; a route prefix with `?`, `#`, `%`, `..` or whitespace. The route prefix's
    /// other characters that a URL path does not carry as they are (non-ASCII, `"`, `\\`, …)
    /// are percent-encoded, as requests carry them.
    pub fn new(external: Option<&str>, route_prefix: Option<&str>) -> Result<WebUrls, UrlError> {
        let external_path = match external {
            None => None,
            Some(e) => {
                let bad = |why: &str| UrlError {
                    flag: "--web.external-url",
                    value: e.to_string(),
                    why: why.to_string(),
                };
                let url = url::Url::parse(e).map_err(|err| {
                    bad(&format!(
                        "{err}; give an absolute URL such as https://probe.example/llm/"
                    ))
                })?;
                if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
                    return Err(bad(
                        "give an http:// or https:// URL with a host, such as https://probe.example/llm/",
                    ));
                }
                if url.query().is_some() || url.fragment().is_some() {
                    return Err(bad(
                        "drop the query and fragment: only the path is a prefix",
                    ));
                }
                Some(normalize(url.path()))
            }
        };
        let route_prefix = match route_prefix {
            Some(p) => {
                if p.contains(['?', '#', '%'])
                    || p.chars().any(char::is_whitespace)
                    || p.split('/').any(|s| s == "." || s == "..")
                {
                    return Err(UrlError {
                        flag: "--web.route-prefix",
                        value: p.to_string(),
                        why:
                            "give a plain path such as /llm (no ?, #, %, spaces, . or .. segments)"
                                .into(),
                    });
                }
                normalize(&percent_encoding::utf8_percent_encode(p, PATH_ESCAPED).to_string())
            }
            None => external_path.clone().unwrap_or_default(),
        };
        Ok(WebUrls {
            link_prefix: external_path.unwrap_or_else(|| route_prefix.clone()),
            route_prefix,
            external: external.map(|e| e.trim_end_matches('/').to_string()),
        })
    }

    /// The path of a request under the route prefix (`/` for the prefix itself followed by
    /// `/`); `None`: outside it.
    pub fn strip<'a>(&self, path: &'a str) -> Option<&'a str> {
        if self.route_prefix.is_empty() {
            return Some(path);
        }
        path.strip_prefix(self.route_prefix.as_str())
            .filter(|rest| rest.starts_with('/'))
    }

    /// Whether a request for `path` (outside the prefix) should be redirected to the pages'
    /// root: `/` and the prefix without its trailing slash.
    pub fn redirects_to_root(&self, path: &str) -> bool {
        !self.route_prefix.is_empty() && (path == "/" || path == self.route_prefix)
    }

    /// A link to the exporter's own `path` (which starts with `/`).
    pub fn link(&self, path: &str) -> String {
        format!("{}{path}", self.link_prefix)
    }

    /// The route prefix (`""` for the root).
    pub fn route_prefix(&self) -> &str {
        &self.route_prefix
    }

    /// `--web.external-url` as given, without a trailing slash.
    pub fn external(&self) -> Option<&str> {
        self.external.as_deref()
    }
}

impl fmt::Display for WebUrls {
    /// `/llm` or `/` (the route prefix), for logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.route_prefix.is_empty() {
            f.write_str("/")
        } else {
            f.write_str(&self.route_prefix)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_as_prometheus_derives_them() {
        let none = WebUrls::new(None, None).unwrap();
        assert_eq!(none.strip("/metrics"), Some("/metrics"));
        assert_eq!(none.link("/targets/a"), "/targets/a");
        assert!(!none.redirects_to_root("/"));

        let p = WebUrls::new(None, Some("llm/")).unwrap();
        assert_eq!(p.route_prefix(), "/llm");
        assert_eq!(p.strip("/llm/metrics"), Some("/metrics"));
        assert_eq!(p.strip("/llm/"), Some("/"));
        assert_eq!(p.strip("/llm"), None);
        assert_eq!(p.strip("/llmx/metrics"), None);
        assert_eq!(p.strip("/metrics"), None);
        assert!(p.redirects_to_root("/") && p.redirects_to_root("/llm"));
        assert_eq!(p.link("/"), "/llm/");

        let e = WebUrls::new(Some("https://probe.example/a/b/"), None).unwrap();
        assert_eq!(e.route_prefix(), "/a/b");
        assert_eq!(e.link("/metrics"), "/a/b/metrics");
        assert_eq!(e.external(), Some("https://probe.example/a/b"));

        // A proxy that strips the prefix: served at the root, links under the prefix.
        let s = WebUrls::new(Some("https://probe.example/llm"), Some("/")).unwrap();
        assert_eq!(s.strip("/metrics"), Some("/metrics"));
        assert_eq!(s.link("/metrics"), "/llm/metrics");
    }

    /// Break-it pass: a route prefix with characters a request line carries percent-encoded
    /// (non-ASCII) was compared raw, so nothing was ever served under it; a backslash went raw
    /// into the redirect, where browsers read `/\\host/` as `//host/` (another site).
    #[test]
    fn a_route_prefix_is_served_and_linked_percent_encoded() {
        let u = WebUrls::new(None, Some("/ü")).unwrap();
        assert_eq!(u.route_prefix(), "/%C3%BC");
        assert_eq!(u.strip("/%C3%BC/metrics"), Some("/metrics"));
        assert!(u.redirects_to_root("/%C3%BC"));
        assert_eq!(u.link("/"), "/%C3%BC/");
        let b = WebUrls::new(None, Some("/\\evil.example")).unwrap();
        assert_eq!(b.link("/"), "/%5Cevil.example/");
        let q = WebUrls::new(None, Some("/a\"<b>/c")).unwrap();
        assert_eq!(q.route_prefix(), "/a%22%3Cb%3E/c");
        // What needs no encoding stays as given.
        let plain = WebUrls::new(None, Some("/team-1/llm_probe.v2/~x:@!$&'()*+,;=")).unwrap();
        assert_eq!(plain.route_prefix(), "/team-1/llm_probe.v2/~x:@!$&'()*+,;=");
    }

    #[test]
    fn bad_urls_name_the_flag_and_the_fix() {
        let e = WebUrls::new(Some("probe.example/llm"), None).unwrap_err();
        assert_eq!(e.flag, "--web.external-url");
        assert!(e.to_string().contains("absolute URL"), "{e}");
        let e = WebUrls::new(Some("ftp://x/llm"), None).unwrap_err();
        assert!(e.why.contains("http://"), "{e}");
        let e = WebUrls::new(Some("http://x/llm?a=1"), None).unwrap_err();
        assert!(e.why.contains("query"), "{e}");
        let e = WebUrls::new(None, Some("/a/../b")).unwrap_err();
        assert_eq!(e.flag, "--web.route-prefix");
    }
}
