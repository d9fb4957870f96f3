//! `replicas:` of a target: where its replicas are discovered, how often, how many at most, and
//! how long a departed replica's series stay. Discovery itself is [`crate::replicas`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Default `replicas.refresh`.
pub const DEFAULT_REFRESH: Duration = Duration::from_secs(30);
/// Default `replicas.max`.
pub const DEFAULT_MAX: usize = 64;
/// Largest `replicas.max`: every replica multiplies the target's series and its spend.
pub const MAX_MAX: usize = 1024;
/// Default `replicas.grace`.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5 * 60);
/// Shortest `replicas.refresh` (a discovery per refresh: a typo must not become a busy loop).
pub const MIN_REFRESH: Duration = Duration::from_millis(100);

/// Where a target's replicas come from (exactly one source). `Debug` shows an http_sd URL
/// without its user-info and query values, as every message does.
#[derive(Clone, PartialEq, Eq)]
pub enum ReplicaSource {
    /// Every A and AAAA address of `base_url`'s host, at `base_url`'s port: the system's
    /// resolver, or the DNS server `nameserver` when set.
    Dns {
        /// The DNS server to ask (`replicas.dns.nameserver`, port 53 unless given).
        nameserver: Option<SocketAddr>,
    },
    /// Every SRV record of `name`: its target host at its port (the host's first address),
    /// labelled `host:port`; the system's name servers (`/etc/resolv.conf`), or `nameserver`.
    DnsSrv {
        /// The SRV name (`_http._tcp.vllm.llm.svc.cluster.local`).
        name: String,
        /// The DNS server to ask (`replicas.dns_srv.nameserver`).
        nameserver: Option<SocketAddr>,
    },
    /// A Prometheus file_sd file (JSON or YAML): a list of `{targets: ["host:port"], labels}`;
    /// relative to the probes file's directory.
    FileSd(PathBuf),
    /// A Prometheus http_sd URL (http or https): a GET answers the file_sd JSON format.
    HttpSd(reqwest::Url),
}

impl std::fmt::Debug for ReplicaSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplicaSource::Dns { nameserver } => f
                .debug_struct("Dns")
                .field("nameserver", nameserver)
                .finish(),
            ReplicaSource::DnsSrv { name, nameserver } => f
                .debug_struct("DnsSrv")
                .field("name", name)
                .field("nameserver", nameserver)
                .finish(),
            ReplicaSource::FileSd(path) => f.debug_tuple("FileSd").field(path).finish(),
            ReplicaSource::HttpSd(url) => f
                .debug_tuple("HttpSd")
                .field(&crate::sanitize::redact_url(url.as_str()))
                .finish(),
        }
    }
}

/// A target's `replicas:`, with defaults applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replicas {
    /// Where the replicas are discovered.
    pub source: ReplicaSource,
    /// Time between two discoveries (100 ms to 1 day; default 30 s).
    pub refresh: Duration,
    /// At most this many replicas are probed (the first `max` of the sorted set; 1 to
    /// [`MAX_MAX`], default 64).
    pub max: usize,
    /// How long a replica gone from discovery keeps its series (1 ms to 1 day; default 5 min).
    pub grace: Duration,
}

impl Replicas {
    /// For `check-config`: ` replicas=dns refresh=30s max=64 grace=5m` (with
    /// `nameserver=…`), or ` replicas=file_sd:PATH …`.
    pub fn summary(&self) -> String {
        let source = match &self.source {
            ReplicaSource::Dns { nameserver: None } => "dns".to_string(),
            ReplicaSource::Dns {
                nameserver: Some(ns),
            } => format!("dns nameserver={ns}"),
            ReplicaSource::DnsSrv { name, nameserver } => match nameserver {
                None => format!("dns_srv:{name}"),
                Some(ns) => format!("dns_srv:{name} nameserver={ns}"),
            },
            ReplicaSource::FileSd(p) => format!("file_sd:{}", p.display()),
            ReplicaSource::HttpSd(u) => {
                format!("http_sd:{}", crate::sanitize::redact_url(u.as_str()))
            }
        };
        format!(
            " replicas={source} refresh={} max={} grace={}",
            humantime::format_duration(self.refresh),
            self.max,
            humantime::format_duration(self.grace)
        )
    }
}

/// One replica of a target: where its probes connect, and its `replica` label value.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Replica {
    /// The `replica` label: `ip:port` (`[v6]:port`) for DNS, `host:port` for SRV, the file_sd
    /// entry as written.
    pub label: Arc<str>,
    /// The address its probes connect to.
    pub addr: SocketAddr,
}

impl Replica {
    /// A replica at `addr`, labelled with it.
    pub fn at(addr: SocketAddr) -> Self {
        Replica {
            label: addr.to_string().into(),
            addr,
        }
    }
}
