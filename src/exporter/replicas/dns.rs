//! A and AAAA lookups: the system's resolver (`getaddrinfo`, through tokio), or a configured
//! DNS server through hickory-resolver.

use std::net::SocketAddr;

use hickory_resolver::config::{
    ConnectionConfig, LookupIpStrategy, NameServerConfig, ResolveHosts, ResolverConfig,
};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::TokioResolver;

use super::DiscoveryError;

/// Every address of `host` at `port`: asked of `nameserver` when given, else of the system.
/// An IP literal is its own one address.
pub(super) async fn lookup(
    host: &str,
    port: u16,
    nameserver: Option<SocketAddr>,
) -> Result<Vec<SocketAddr>, DiscoveryError> {
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let failed = |detail: String| DiscoveryError::Resolve {
        host: host.to_string(),
        detail,
    };
    match nameserver {
        None => Ok(tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| failed(e.to_string()))?
            .collect()),
        Some(server) => {
            let resolver = resolver(server).map_err(|e| failed(e.to_string()))?;
            // A fully qualified name: no search domains, no `ndots` guessing.
            let fqdn = if host.ends_with('.') {
                host.to_string()
            } else {
                format!("{host}.")
            };
            let answer = resolver
                .lookup_ip(fqdn.as_str())
                .await
                .map_err(|e| failed(e.to_string()))?;
            Ok(answer.iter().map(|ip| SocketAddr::new(ip, port)).collect())
        }
    }
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
        assert_eq!(one, vec!["127.0.0.5:8000".parse().unwrap()]);
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
