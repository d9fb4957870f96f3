//! `replicas:` of a target: exactly one source (`dns`, `dns_srv`, `file_sd` or `http_sd`),
//! `refresh`, `max` and `grace` within their bounds.

use std::net::{IpAddr, SocketAddr};

use super::*;
use crate::config::durations::{Bounds, CONFIG, MAX};
use crate::config::replicas::{
    ReplicaSource, Replicas, DEFAULT_GRACE, DEFAULT_MAX, DEFAULT_REFRESH, MAX_MAX, MIN_REFRESH,
};

impl Validator<'_> {
    /// `replicas:` checked, with defaults applied; `None` when absent or invalid (reported).
    pub(super) fn replicas(
        &mut self,
        path: &str,
        pre: &str,
        raw: Option<&RawReplicas>,
        base_url: Option<&reqwest::Url>,
    ) -> Option<Replicas> {
        let raw = raw?;
        let at = format!("{path}.replicas");
        let before = self.problems.len();
        let named: Vec<&str> = [
            raw.dns.as_ref().map(|_| "dns"),
            raw.dns_srv.as_ref().map(|_| "dns_srv"),
            raw.file_sd.as_ref().map(|_| "file_sd"),
            raw.http_sd.as_ref().map(|_| "http_sd"),
        ]
        .into_iter()
        .flatten()
        .collect();
        let source = match (&raw.dns, &raw.dns_srv, &raw.file_sd, &raw.http_sd) {
            _ if named.len() > 1 => {
                self.problem(
                    format!("{at}.{}", named[1]),
                    format!(
                        "{pre}replicas has {}; keep exactly one source of replicas.",
                        match named.as_slice() {
                            [a, b] => format!("both {a} and {b}"),
                            [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
                            [] => String::new(),
                        }
                    ),
                );
                None
            }
            (None, None, None, None) => {
                self.problem(
                    at.clone(),
                    format!("{pre}replicas names no source; add dns: {{}} (every address of base_url's host is a replica), dns_srv: {{name: _http._tcp.NAME}} (every SRV record), file_sd: PATH (a Prometheus file_sd file) or http_sd: URL (a Prometheus http_sd endpoint)."),
                );
                None
            }
            (Some(dns), ..) => self.dns_source(&at, pre, dns.nameserver.as_deref(), base_url),
            (_, Some(srv), ..) => self.dns_srv_source(&at, pre, srv),
            (_, _, Some(file), _) => self.file_sd_source(&at, pre, file),
            (.., Some(url)) => self.http_sd_source(&at, pre, url),
        };
        let refresh = match &raw.refresh {
            Some(v) => self.duration_within(
                &format!("{at}.refresh"),
                pre,
                "replicas.refresh",
                v,
                Bounds {
                    min: MIN_REFRESH,
                    max: MAX,
                },
            ),
            None => Some(DEFAULT_REFRESH),
        };
        let grace = match &raw.grace {
            Some(v) => {
                self.duration_within(&format!("{at}.grace"), pre, "replicas.grace", v, CONFIG)
            }
            None => Some(DEFAULT_GRACE),
        };
        let max = match raw.max {
            None => Some(DEFAULT_MAX),
            Some(n) if n >= 1 && n <= MAX_MAX as i64 => usize::try_from(n).ok(),
            Some(n) => {
                self.problem(
                    format!("{at}.max"),
                    format!("{pre}replicas.max {n} is out of range; set it from 1 to {MAX_MAX} (each replica is probed with every scenario of the target, and adds its series)."),
                );
                None
            }
        };
        if self.problems.len() != before {
            return None;
        }
        Some(Replicas {
            source: source?,
            refresh: refresh?,
            max: max?,
            grace: grace?,
        })
    }

    /// `replicas.dns`: base_url must name a host (not an address), the name server is an IP
    /// address with an optional port (53).
    fn dns_source(
        &mut self,
        at: &str,
        pre: &str,
        nameserver: Option<&str>,
        base_url: Option<&reqwest::Url>,
    ) -> Option<ReplicaSource> {
        let mut ok = true;
        if let Some(url) = base_url {
            if !matches!(url.host(), Some(url::Host::Domain(_))) {
                self.problem(
                    format!("{at}.dns"),
                    format!("{pre}replicas.dns discovers the addresses of base_url's host name, but base_url names an IP address; put the name of the replicas (e.g. a Kubernetes headless Service) in base_url, or list the addresses in a file_sd file."),
                );
                ok = false;
            }
        }
        let nameserver = self.nameserver(&format!("{at}.dns"), pre, "replicas.dns", nameserver);
        ok &= nameserver.is_some();
        ok.then(|| ReplicaSource::Dns {
            nameserver: nameserver.flatten(),
        })
    }

    /// A `nameserver:` under `key` (at `at`): an IP address with an optional port (53);
    /// `Some(None)` when absent, `None` when invalid (reported).
    fn nameserver(
        &mut self,
        at: &str,
        pre: &str,
        key: &str,
        nameserver: Option<&str>,
    ) -> Option<Option<SocketAddr>> {
        let Some(s) = nameserver.map(str::trim) else {
            return Some(None);
        };
        let parsed = s
            .parse::<SocketAddr>()
            .ok()
            .or_else(|| s.parse::<IpAddr>().ok().map(|ip| SocketAddr::new(ip, 53)))
            .filter(|a| a.port() != 0);
        if parsed.is_none() {
            let shown = crate::sanitize::terminal_safe(s);
            self.problem(
                format!("{at}.nameserver"),
                format!("{pre}{key}.nameserver \"{shown}\" is not an IP address with an optional port; write it like 10.96.0.10, 127.0.0.1:5353 or [::1]:53."),
            );
        }
        parsed.map(Some)
    }

    /// `replicas.dns_srv`: a DNS name (letters, digits, `-`, `_` and dots, at most 253
    /// characters) and an optional name server.
    fn dns_srv_source(&mut self, at: &str, pre: &str, raw: &RawDnsSrv) -> Option<ReplicaSource> {
        let name = raw
            .name
            .as_deref()
            .map(|n| n.trim().trim_end_matches('.'))
            .unwrap_or("");
        let valid = !name.is_empty()
            && name.len() <= 253
            && name.split('.').all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && l.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            });
        if !valid {
            self.problem(
                format!("{at}.dns_srv.name"),
                format!("{pre}replicas.dns_srv.name must be the DNS name of the SRV records, e.g. name: _http._tcp.vllm.llm.svc.cluster.local (a Kubernetes Service's named port)."),
            );
        }
        let nameserver = self.nameserver(
            &format!("{at}.dns_srv"),
            pre,
            "replicas.dns_srv",
            raw.nameserver.as_deref(),
        );
        Some(ReplicaSource::DnsSrv {
            name: valid.then(|| name.to_ascii_lowercase())?,
            nameserver: nameserver?,
        })
    }

    /// `replicas.http_sd`: an http or https URL without a fragment. Shown only without its
    /// user-info and query values.
    fn http_sd_source(&mut self, at: &str, pre: &str, url: &str) -> Option<ReplicaSource> {
        let text = url.trim();
        // `http:///x` would parse with `x` as the host: an empty authority is no host.
        let empty_authority = text
            .split_once("://")
            .is_some_and(|(_, rest)| rest.starts_with('/'));
        let parsed = reqwest::Url::parse(text)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.has_host() && !empty_authority);
        let shown =
            || crate::sanitize::terminal_safe(&crate::sanitize::redact_url(url)).into_owned();
        match parsed {
            None => {
                self.problem(
                    format!("{at}.http_sd"),
                    format!("{pre}replicas.http_sd \"{}\" is not an http or https URL with a host; write the URL of a Prometheus http_sd endpoint, e.g. http_sd: http://sd.internal:8080/targets.", shown()),
                );
                None
            }
            Some(u) if u.fragment().is_some() => {
                self.problem(
                    format!("{at}.http_sd"),
                    format!("{pre}replicas.http_sd \"{}\" has a fragment (#…), which is never sent to the server; remove it.", shown()),
                );
                None
            }
            Some(u) => Some(ReplicaSource::HttpSd(u)),
        }
    }

    /// `replicas.file_sd`: a non-empty path, relative to the probes file. The file itself is
    /// read by discovery, again at every refresh (it may not exist yet).
    fn file_sd_source(&mut self, at: &str, pre: &str, file: &str) -> Option<ReplicaSource> {
        if file.trim().is_empty() || file.chars().any(is_unsafe_char) {
            self.problem(
                format!("{at}.file_sd"),
                format!("{pre}replicas.file_sd must be the path of a Prometheus file_sd file (JSON or YAML), e.g. file_sd: /etc/llm-probe/vllm.json."),
            );
            return None;
        }
        Some(ReplicaSource::FileSd(self.relative_to_config(file)))
    }
}
