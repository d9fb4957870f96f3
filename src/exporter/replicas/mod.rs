//! Replica discovery: the replicas of a target with `replicas:` (see
//! [`crate::config::replicas`]), found by DNS (every A and AAAA address of `base_url`'s host,
//! or every SRV record of a name) or from Prometheus service discovery (a file_sd file, an
//! http_sd URL), sorted, deduplicated and capped at `max`.
//!
//! Discovery never panics and never keeps partial results: it gives the whole set or a typed
//! [`DiscoveryError`] whose [`DiscoveryError::reason`] is one of [`REASONS`], and the daemon
//! keeps probing the last good set. A file is read with the configuration's limits (a regular
//! file, at most [`MAX_FILE_SD_BYTES`], within a time limit: [`crate::config::files`]); the
//! whole discovery is bounded by [`DISCOVERY_TIMEOUT`].

mod dns;
mod file_sd;
mod http_sd;

use std::fmt;
use std::time::Duration;

pub use crate::config::replicas::Replica;
use crate::config::replicas::{ReplicaSource, Replicas};

/// Largest file_sd file or http_sd answer read (4 MiB: 10,000 entries take about 300 KiB).
pub const MAX_FILE_SD_BYTES: u64 = 4 << 20;
/// Longest one discovery may take (DNS lookups and the file read included).
pub const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(10);

/// The outcome of one successful discovery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Discovered {
    /// The replicas to probe: sorted, deduplicated, at most `max`.
    pub replicas: Vec<Replica>,
    /// How many distinct replicas were found before the cap (≥ `replicas.len()`).
    pub found: usize,
    /// The shortest TTL of the DNS records that gave the set, when the DNS server was asked
    /// directly (`nameserver:`, or any SRV lookup); `None` otherwise.
    pub ttl: Option<Duration>,
}

/// A DNS TTL shorter than this is taken as this long: a TTL of 0 (do not cache) must not make
/// discovery ask again in a loop.
pub const MIN_TTL_WAIT: Duration = Duration::from_secs(1);

impl Discovered {
    /// How long to wait before the next discovery: `refresh`, or the records' TTL when that is
    /// shorter (but at least [`MIN_TTL_WAIT`], unless `refresh` itself is shorter).
    pub fn next_refresh(&self, refresh: Duration) -> Duration {
        match self.ttl {
            Some(ttl) => refresh.min(ttl.max(MIN_TTL_WAIT)),
            None => refresh,
        }
    }
}

impl Discovered {
    /// Whether the cap left replicas out.
    pub fn capped(&self) -> bool {
        self.found > self.replicas.len()
    }
}

/// Every [`DiscoveryError::reason`], the `reason` label values of
/// `llm_probe_replica_discovery_failures_total`.
pub const REASONS: &[&str] = &["resolve", "read", "format", "empty", "timeout"];

/// Why a discovery gave no set. `Display` is a sentence fragment that names what failed (a
/// host name or a file, never a credential).
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// A DNS lookup failed (NXDOMAIN, no answer, the server unreachable).
    #[error("the DNS lookup of {host} failed: {detail}")]
    Resolve {
        /// The name looked up.
        host: String,
        /// What the resolver said.
        detail: String,
    },
    /// The file_sd file or the http_sd answer cannot be read (missing, a FIFO, too large, an
    /// HTTP error, …).
    #[error("cannot read {path}: {detail}")]
    Read {
        /// What was read: "the file_sd file PATH", "the http_sd URL URL" (without secrets).
        path: String,
        /// Why, with what to do.
        detail: String,
    },
    /// The file_sd file or http_sd answer is not a list of `{targets, labels}` groups of
    /// `host:port` entries.
    #[error("{path} is malformed: {detail}")]
    Format {
        /// What was read, as in [`DiscoveryError::Read`].
        path: String,
        /// What is wrong (never an entry's text: it may hold a credential).
        detail: String,
    },
    /// The source named no replica (an empty file or answer is taken for a transient state).
    #[error("{0} gave no replica")]
    Empty(String),
    /// The discovery took longer than [`DISCOVERY_TIMEOUT`]; it names the source ("the
    /// http_sd URL …" without secrets, "the file_sd file …", "the DNS name …").
    #[error(
        "the discovery from {0} did not finish within {limit}",
        limit = humantime::format_duration(DISCOVERY_TIMEOUT)
    )]
    Timeout(String),
}

impl DiscoveryError {
    /// The closed set of reasons ([`REASONS`]).
    pub fn reason(&self) -> &'static str {
        match self {
            DiscoveryError::Resolve { .. } => "resolve",
            DiscoveryError::Read { .. } => "read",
            DiscoveryError::Format { .. } => "format",
            DiscoveryError::Empty(_) => "empty",
            DiscoveryError::Timeout(_) => "timeout",
        }
    }
}

/// Discovers the replicas of the target at `base_url` configured with `spec`, within
/// [`DISCOVERY_TIMEOUT`].
///
/// Errors: see [`DiscoveryError`].
pub async fn discover(
    spec: &Replicas,
    base_url: &reqwest::Url,
) -> Result<Discovered, DiscoveryError> {
    let shown = source_name(spec, base_url);
    let work = async {
        match &spec.source {
            ReplicaSource::Dns { nameserver } => {
                let host = base_url
                    .host_str()
                    .unwrap_or_default()
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_string();
                let port = base_url.port_or_known_default().unwrap_or(80);
                let (addrs, ttl) = dns::lookup(&host, port, *nameserver).await?;
                if addrs.is_empty() {
                    return Err(DiscoveryError::Empty(shown.clone()));
                }
                Ok(Discovered {
                    ttl,
                    ..cap(addrs.into_iter().map(Replica::at).collect(), spec.max)
                })
            }
            ReplicaSource::DnsSrv { name, nameserver } => {
                dns::srv(name, &shown, *nameserver, spec.max).await
            }
            ReplicaSource::FileSd(path) => file_sd::discover(path, &shown, spec.max).await,
            ReplicaSource::HttpSd(url) => {
                http_sd::discover(url, &shown, spec.refresh, spec.max).await
            }
        }
    };
    tokio::time::timeout(DISCOVERY_TIMEOUT, work)
        .await
        .unwrap_or(Err(DiscoveryError::Timeout(shown)))
}

/// What a discovery reads, as every one of its errors names it ("the http_sd URL …" without
/// user-info or query values, "the file_sd file …", "the DNS name …", "the SRV name …").
fn source_name(spec: &Replicas, base_url: &reqwest::Url) -> String {
    let shown = |s: &str| crate::sanitize::terminal_safe(s).into_owned();
    match &spec.source {
        ReplicaSource::Dns { .. } => {
            format!(
                "the DNS name {}",
                shown(base_url.host_str().unwrap_or_default())
            )
        }
        ReplicaSource::DnsSrv { name, .. } => format!("the SRV name {}", shown(name)),
        ReplicaSource::FileSd(path) => {
            format!("the file_sd file {}", shown(&path.display().to_string()))
        }
        ReplicaSource::HttpSd(url) => format!(
            "the http_sd URL {}",
            shown(&crate::sanitize::redact_url(url.as_str()))
        ),
    }
}

/// Whether `host` is a host name a replica may carry: letters, digits, `-`, `_` and dots, at
/// most 253 characters (it becomes a label value, a log field and a DNS question).
pub(super) fn is_host_name(host: &str) -> bool {
    host.len() <= 253
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// `replicas` with one replica per address: the first to name it keeps it (in the order the
/// source sorted them).
pub(super) fn one_per_address(replicas: &mut Vec<Replica>) {
    let mut seen = std::collections::HashSet::new();
    replicas.retain(|r| seen.insert(r.addr));
}

/// `replicas` sorted by address (then label), deduplicated by address and by label, and cut
/// to the first `max`.
pub fn cap(mut replicas: Vec<Replica>, max: usize) -> Discovered {
    replicas.sort_by(|a, b| (a.addr, &a.label).cmp(&(b.addr, &b.label)));
    replicas.dedup_by(|a, b| a.addr == b.addr);
    let mut seen = std::collections::HashSet::new();
    replicas.retain(|r| seen.insert(r.label.clone()));
    let found = replicas.len();
    replicas.truncate(max);
    Discovered {
        replicas,
        found,
        ttl: None,
    }
}

impl fmt::Display for Replica {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str) -> Replica {
        Replica::at(s.parse().unwrap())
    }

    #[test]
    fn sets_are_sorted_deduplicated_and_capped() {
        let set = cap(
            vec![
                r("127.0.0.10:80"),
                r("127.0.0.2:80"),
                r("[::1]:80"),
                r("127.0.0.2:80"),
                r("127.0.0.3:80"),
            ],
            3,
        );
        let labels: Vec<&str> = set.replicas.iter().map(|r| &*r.label).collect();
        assert_eq!(labels, ["127.0.0.2:80", "127.0.0.3:80", "127.0.0.10:80"]);
        assert_eq!(set.found, 4);
        assert!(set.capped());
        assert!(!cap(vec![r("127.0.0.1:1")], 1).capped());
    }

    #[test]
    fn the_next_refresh_is_the_ttl_when_shorter_but_never_under_a_second() {
        let s = Duration::from_secs;
        let with = |ttl: Option<u64>| Discovered {
            replicas: Vec::new(),
            found: 0,
            ttl: ttl.map(s),
        };
        assert_eq!(with(None).next_refresh(s(30)), s(30));
        assert_eq!(with(Some(5)).next_refresh(s(30)), s(5));
        assert_eq!(with(Some(300)).next_refresh(s(30)), s(30));
        assert_eq!(with(Some(0)).next_refresh(s(30)), MIN_TTL_WAIT);
        // A refresh shorter than the floor is the user's choice and stays.
        let fast = Duration::from_millis(200);
        assert_eq!(with(Some(0)).next_refresh(fast), fast);
    }

    #[test]
    fn every_reason_is_listed() {
        let errors = [
            DiscoveryError::Resolve {
                host: "h".into(),
                detail: "d".into(),
            },
            DiscoveryError::Read {
                path: "p".into(),
                detail: "d".into(),
            },
            DiscoveryError::Format {
                path: "p".into(),
                detail: "d".into(),
            },
            DiscoveryError::Empty("x".into()),
            DiscoveryError::Timeout("x".into()),
        ];
        let reasons: Vec<&str> = errors.iter().map(DiscoveryError::reason).collect();
        assert_eq!(reasons, REASONS);
    }
}
