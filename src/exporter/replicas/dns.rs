//! A and AAAA lookups: the system's resolver (`getaddrinfo`, through tokio), or a configured
//! DNS server through hickory-resolver; SRV lookups through hickory-resolver (the system's name
//! servers from `/etc/resolv.conf`, or a configured one).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use futures::StreamExt;
use hickory_resolver::config::{
    ConnectionConfig, LookupIpStrategy, NameServerConfig, ResolveHosts, ResolverConfig,
};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::proto::rr::{RData, RecordType};
use hickory_resolver::TokioResolver;

use super::{Discovered, DiscoveryError, Replica};

/// SRV targets resolved at once (a discovery of `max` targets makes `max` lookups at most).
const SRV_LOOKUPS_AT_ONCE: usize = 16;

/// Every address of `host` at `port`: asked of `nameserver` when given, else of the system.
/// An IP literal is its own one address. With a name server, also the shortest TTL of the
/// answer's records (the system's resolver does not tell it).
pub(super) async fn lookup(
    host: &str,
    port: u16,
    nameserver: Option<SocketAddr>,
) -> Result<(Vec<SocketAddr>, Option<Duration>), DiscoveryError> {
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return Ok((vec![SocketAddr::new(ip, port)], None));
    }
    let failed = |detail: String| DiscoveryError::Resolve {
        host: host.to_string(),
        detail,
    };
    match nameserver {
        None => Ok((
            tokio::net::lookup_host((host, port))
                .await
                .map_err(|e| failed(e.to_string()))?
                .collect(),
            None,
        )),
        Some(server) => {
            let resolver = resolver(server).map_err(|e| failed(e.to_string()))?;
            let answer = resolver
                .lookup_ip(fqdn(host).as_str())
                .await
                .map_err(|e| failed(e.to_string()))?;
            let records = answer.as_lookup().answers();
            let names = chain(&fqdn(host), records);
            let mine: Vec<&hickory_resolver::proto::rr::Record> = records
                .iter()
                .filter(|r| names.contains(&r.name.to_ascii().to_ascii_lowercase()))
                .collect();
            let ips = mine.iter().filter_map(|r| match &r.data {
                RData::A(a) => Some(IpAddr::V4(a.0)),
                RData::AAAA(a) => Some(IpAddr::V6(a.0)),
                _ => None,
            });
            Ok((
                ips.map(|ip| SocketAddr::new(ip, port)).collect(),
                mine.iter()
                    .map(|r| Duration::from_secs(u64::from(r.ttl)))
                    .min(),
            ))
        }
    }
}

/// The replicas of the SRV name `name`: one per (target host, port) of its records, sorted by
/// `host:port`, the first `max` of them at their host's lowest address (from the answer's
/// additional records, else looked up). A record whose target is `.` (RFC 2782: no service) or
/// whose port is 0 names no replica; a target that is not a plain host name fails the
/// discovery, as does one without an address.
pub(super) async fn srv(
    name: &str,
    shown: &str,
    nameserver: Option<SocketAddr>,
    max: usize,
) -> Result<Discovered, DiscoveryError> {
    let failed = |host: &str, detail: String| DiscoveryError::Resolve {
        host: host.to_string(),
        detail,
    };
    let resolver = match nameserver {
        Some(server) => resolver(server),
        None => TokioResolver::builder_tokio().and_then(|b| b.build()),
    }
    .map_err(|e| failed(name, e.to_string()))?;
    let answer = resolver
        .lookup(fqdn(name).as_str(), RecordType::SRV)
        .await
        .map_err(|e| failed(name, e.to_string()))?;
    let mut targets = Vec::new();
    let asked = fqdn(name).to_ascii_lowercase();
    for record in answer.answers() {
        let RData::SRV(srv) = &record.data else {
            continue;
        };
        // Only the records of the name asked (a server may send others along).
        if record.name.to_ascii().to_ascii_lowercase() != asked {
            continue;
        }
        let host = host_name(&srv.target.to_ascii());
        if host.is_empty() || srv.port == 0 {
            continue;
        }
        if !super::is_host_name(&host) {
            return Err(failed(
                name,
                "an SRV record's target is not a host name".to_string(),
            ));
        }
        targets.push((host, srv.port));
    }
    targets.sort();
    targets.dedup();
    let ttl = shortest_ttl(answer.answers());
    if targets.is_empty() {
        return Err(DiscoveryError::Empty(shown.to_string()));
    }
    let found = targets.len();
    targets.truncate(max);
    // Addresses the server sent along (additional records), lowest first.
    let mut glue: HashMap<String, IpAddr> = HashMap::new();
    for record in answer.additionals() {
        let ip = match &record.data {
            RData::A(a) => IpAddr::V4(a.0),
            RData::AAAA(a) => IpAddr::V6(a.0),
            _ => continue,
        };
        let host = host_name(&record.name.to_ascii());
        let e = glue.entry(host).or_insert(ip);
        *e = (*e).min(ip);
    }
    let resolver = &resolver;
    let glue = &glue;
    let addressed: Vec<Result<Replica, DiscoveryError>> = futures::stream::iter(targets)
        .map(|(host, port)| async move {
            let ip = match glue.get(&host) {
                Some(ip) => *ip,
                None => resolver
                    .lookup_ip(fqdn(&host).as_str())
                    .await
                    .map_err(|e| failed(&host, e.to_string()))?
                    .iter()
                    .min()
                    .ok_or_else(|| failed(&host, "no address".to_string()))?,
            };
            Ok(Replica {
                label: format!("{host}:{port}").into(),
                addr: SocketAddr::new(ip, port),
            })
        })
        .buffered(SRV_LOOKUPS_AT_ONCE)
        .collect()
        .await;
    let mut replicas = addressed.into_iter().collect::<Result<Vec<_>, _>>()?;
    // Two targets at one address are one replica (the first, as sorted, names it).
    super::one_per_address(&mut replicas);
    Ok(Discovered {
        replicas,
        found,
        ttl,
    })
}

/// `name` (lower case, with its root dot) and every name its CNAME records in `records` lead
/// to: the owners whose addresses answer a lookup of `name`. Records of any other name in an
/// answer are not the name's (a server may send them along) and are not replicas.
fn chain(name: &str, records: &[hickory_resolver::proto::rr::Record]) -> Vec<String> {
    let mut names = vec![name.to_ascii_lowercase()];
    // Each round adds at least one name or stops: at most one round per record.
    for _ in 0..records.len() {
        let next: Vec<String> = records
            .iter()
            .filter(|r| names.contains(&r.name.to_ascii().to_ascii_lowercase()))
            .filter_map(|r| match &r.data {
                RData::CNAME(c) => Some(c.0.to_ascii().to_ascii_lowercase()),
                _ => None,
            })
            .filter(|n| !names.contains(n))
            .collect();
        if next.is_empty() {
            break;
        }
        names.extend(next);
    }
    names
}

/// The shortest TTL among `records` (`None` without records).
fn shortest_ttl(records: &[hickory_resolver::proto::rr::Record]) -> Option<Duration> {
    records
        .iter()
        .map(|r| Duration::from_secs(u64::from(r.ttl)))
        .min()
}

/// `name` fully qualified: no search domains, no `ndots` guessing.
fn fqdn(name: &str) -> String {
    if name.ends_with('.') {
        name.to_string()
    } else {
        format!("{name}.")
    }
}

/// A DNS name as a host name: lower case, without the root's trailing dot.
fn host_name(ascii: &str) -> String {
    ascii.trim_end_matches('.').to_ascii_lowercase()
}

/// A resolver that asks `server` only (UDP, then TCP for truncated answers), for A and AAAA at
/// once, without the hosts file; a new one per discovery, so no answer is cached past it.
fn resolver(server: SocketAddr) -> Result<TokioResolver, hickory_resolver::net::NetError> {
    let mut udp = ConnectionConfig::udp();
    udp.port = server.port();
    let mut tcp = ConnectionConfig::tcp();
    tcp.port = server.port();
    let mut ns = NameServerConfig::udp_and_tcp(server.ip());
    ns.connections = vec![udp, tcp];
    let config = ResolverConfig::from_name_servers(vec![ns]);
    let mut builder = TokioResolver::builder_with_config(config, TokioRuntimeProvider::default());
    let opts = builder.options_mut();
    opts.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
    opts.use_hosts_file = ResolveHosts::Never;
    opts.timeout = std::time::Duration::from_secs(1);
    opts.attempts = 2;
    builder.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_ip_literal_is_one_address_and_a_bad_name_is_a_resolve_error() {
        let one = lookup("127.0.0.5", 8000, None).await.unwrap();
        assert_eq!(one, (vec!["127.0.0.5:8000".parse().unwrap()], None));
        let err = lookup("no-such-host.invalid", 80, None).await.unwrap_err();
        assert_eq!(err.reason(), "resolve");
        assert!(err.to_string().contains("no-such-host.invalid"), "{err}");
    }

    #[tokio::test]
    async fn a_name_server_that_does_not_answer_is_a_resolve_error() {
        // A UDP port nobody answers on (bound here, never read).
        let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let server = silent.local_addr().unwrap();
        let started = std::time::Instant::now();
        let err = lookup("replicas.example", 80, Some(server))
            .await
            .unwrap_err();
        assert_eq!(err.reason(), "resolve", "{err}");
        assert!(started.elapsed() < super::super::DISCOVERY_TIMEOUT);
    }
}
