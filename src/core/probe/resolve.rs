//! The probe's host-name resolver: the system's (`getaddrinfo`, off the runtime's workers, as
//! reqwest's default), with two differences.
//!
//! - Its failures are a type of their own, [`ResolveError`], so a DNS failure is told from any
//!   other by type, not by searching error text (`super::errors`).
//! - Names under `.localhost` resolve to the loopback addresses without asking the system
//!   (RFC 6761 §6.3, as curl, browsers and systemd-resolved do), so a gateway addressed as
//!   `gateway.localhost` works whatever `/etc/hosts` says.
//! - A replica's client ([`Resolver::pinned`]) resolves the target's host name to the
//!   replica's address and nothing else, so the request keeps the name (`Host`, TLS SNI and
//!   certificate checks) and connects to the replica.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// The host name did not resolve: the system's resolver failed or returned no address. Its
/// message never contains the host name (the probe's detail says where it tried to connect).
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The system's resolver failed.
    #[error("the host name did not resolve")]
    Lookup(#[source] std::io::Error),
    /// The system's resolver answered with no address.
    #[error("the host name resolved to no address")]
    NoAddress,
}

/// The resolver given to every probe client ([`super::build_client`]).
#[derive(Debug, Clone, Default)]
pub struct Resolver {
    /// A replica's host name and address: that name resolves to that address only.
    pin: Option<Arc<Pin>>,
}

/// A host name pinned to one address.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Pin {
    /// The host name as it appears in URLs (lower case).
    pub(super) host: String,
    /// The replica's address (with its port).
    pub(super) addr: SocketAddr,
    /// `base_url`'s port: the one the replica's port stands for.
    pub(super) port: u16,
}

impl Pin {
    /// Whether `host` is the pinned name (with or without one trailing dot: the same FQDN).
    pub(super) fn matches(&self, host: &str) -> bool {
        fn bare(h: &str) -> &str {
            h.strip_suffix('.').unwrap_or(h)
        }
        let host = bare(host);
        !host.is_empty() && host.eq_ignore_ascii_case(bare(&self.host))
    }
}

impl Resolver {
    /// A resolver that answers `host` with `addr` alone (a replica of a target), and every
    /// other name as [`Resolver::default`].
    pub(super) fn pinned(pin: Option<Arc<Pin>>) -> Self {
        Resolver { pin }
    }

    fn answer(&self, host: &str) -> Option<SocketAddr> {
        let pin = self.pin.as_ref().filter(|p| p.matches(host))?;
        super::connect::resolved();
        Some(pin.addr)
    }
}

/// The pin of `target`'s host name to `replica`'s address, if a replica is probed.
pub(super) fn pin_of(
    target: &crate::config::Target,
    replica: Option<&crate::config::replicas::Replica>,
) -> Option<Arc<Pin>> {
    let replica = replica?;
    Some(Arc::new(Pin {
        host: target.base_url.host_str()?.to_ascii_lowercase(),
        addr: replica.addr,
        port: target.base_url.port_or_known_default()?,
    }))
}

/// Points a request for `url` over a replica's reqwest client at the replica: reqwest connects
/// to the URL's port whatever the resolver answers, and a replica may listen on another port
/// than `base_url`'s (an SRV record's, a file_sd entry's), so a URL at `base_url`'s port goes
/// to the replica's (a URL at another port, an engine's metrics port of its own, keeps it);
/// and a URL whose host is an IP address is never resolved at all, so its address becomes the
/// replica's too. Returns the `Host` header the request keeps (the URL's authority as
/// written), or `None` when `url` is not on the pinned host or already at the replica's
/// address (nothing changes then). The stamped client connects to the pinned address itself
/// and needs none of this.
pub(super) fn to_replica_address(url: &mut reqwest::Url, pin: &Pin) -> Option<http::HeaderValue> {
    let host = url.host_str()?;
    if !pin.matches(host) {
        return None;
    }
    let ip = match url.host()? {
        url::Host::Ipv4(ip) => Some(IpAddr::V4(ip)),
        url::Host::Ipv6(ip) => Some(IpAddr::V6(ip)),
        url::Host::Domain(_) => None,
    };
    let move_ip = ip.is_some_and(|ip| ip != pin.addr.ip());
    let move_port = url.port_or_known_default() == Some(pin.port) && pin.port != pin.addr.port();
    if !move_ip && !move_port {
        return None;
    }
    let authority = &url[url::Position::BeforeHost..url::Position::AfterPort];
    let header = http::HeaderValue::from_str(authority).ok()?;
    if move_ip {
        url.set_ip_host(pin.addr.ip()).ok()?;
    }
    if move_port {
        url.set_port(Some(pin.addr.port())).ok()?;
    }
    Some(header)
}

/// Whether `host` is a name under `localhost.` (RFC 6761 §6.3), other than `localhost` itself
/// (left to the system's `/etc/hosts`).
fn under_localhost(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    host.len() > ".localhost".len()
        && host
            .get(host.len() - ".localhost".len()..)
            .is_some_and(|tail| tail.eq_ignore_ascii_case(".localhost"))
}

/// The addresses of `host` (port 0): loopback for a name under `.localhost`, else the system's.
async fn lookup(host: String) -> Result<Vec<SocketAddr>, ResolveError> {
    if under_localhost(&host) {
        super::connect::resolved();
        return Ok(vec![
            SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            SocketAddr::from((Ipv6Addr::LOCALHOST, 0)),
        ]);
    }
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
        .await
        .map_err(ResolveError::Lookup)?
        .collect();
    if addrs.is_empty() {
        return Err(ResolveError::NoAddress);
    }
    super::connect::resolved();
    Ok(addrs)
}

impl Resolve for Resolver {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_string();
        let pinned = self.answer(&host);
        Box::pin(async move {
            if let Some(addr) = pinned {
                return Ok(Box::new(std::iter::once(addr)) as Addrs);
            }
            let addrs = lookup(host).await?;
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// The same resolver for hyper-util's connector (the probe's stamped client, `super::transport`).
impl tower_service::Service<hyper_util::client::legacy::connect::dns::Name> for Resolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = ResolveError;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, ResolveError>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), ResolveError>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: hyper_util::client::legacy::connect::dns::Name) -> Self::Future {
        let host = name.as_str().to_string();
        let pinned = self.answer(&host);
        Box::pin(async move {
            match pinned {
                Some(addr) => Ok(vec![addr].into_iter()),
                None => Ok(lookup(host).await?.into_iter()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each `(pin, url before, Host kept, url after)`: what [`to_replica_address`] makes of it.
    fn moves(
        cases: impl IntoIterator<Item = (Pin, &'static str, Option<&'static str>, &'static str)>,
    ) {
        for (pin, before, host, after) in cases {
            let mut url = reqwest::Url::parse(before).unwrap();
            let got = to_replica_address(&mut url, &pin);
            assert_eq!(got.as_ref().map(|h| h.to_str().unwrap()), host, "{before}");
            assert_eq!(url.as_str(), after, "{before}");
        }
    }

    /// A replica on another port than the URL's is reached at its port with the URL's `Host`;
    /// a URL on another host, or on the replica's port already, is left alone.
    #[test]
    fn a_request_goes_to_the_replica_s_port_with_the_url_s_host() {
        let pin = |port: u16| Pin {
            host: "pool.test".into(),
            addr: "10.1.2.3:8001".parse().unwrap(),
            port,
        };
        let cases = [
            (
                pin(8000),
                "http://pool.test:8000/metrics",
                Some("pool.test:8000"),
                "http://pool.test:8001/metrics",
            ),
            (
                pin(443),
                "https://POOL.test/version",
                Some("pool.test"),
                "https://pool.test:8001/version",
            ),
            (
                pin(8001),
                "http://pool.test:8001/metrics",
                None,
                "http://pool.test:8001/metrics",
            ),
            // Another port than base_url's (an engine's metrics port of its own): kept, and
            // the pinned resolver takes it to the replica's address.
            (
                pin(8000),
                "http://pool.test:8002/metrics",
                None,
                "http://pool.test:8002/metrics",
            ),
            (
                pin(8000),
                "http://other.test:8000/metrics",
                None,
                "http://other.test:8000/metrics",
            ),
        ];
        moves(cases);
    }

    /// A `base_url` on an IP address is never resolved, so the pin alone would not move it:
    /// the request goes to the replica's address (and port) with the URL's `Host`.
    #[test]
    fn a_request_to_an_ip_address_goes_to_the_replica_s_address() {
        let pin = |host: &str, addr: &str| Pin {
            host: host.into(),
            addr: addr.parse().unwrap(),
            port: 8000,
        };
        let cases = [
            (
                pin("127.0.0.1", "127.0.0.2:18777"),
                "http://127.0.0.1:18777/metrics",
                Some("127.0.0.1:18777"),
                "http://127.0.0.2:18777/metrics",
            ),
            (
                pin("127.0.0.1", "127.0.0.3:9001"),
                "http://127.0.0.1:8000/version",
                Some("127.0.0.1:8000"),
                "http://127.0.0.3:9001/version",
            ),
            // Another port than base_url's: the replica's address at that port.
            (
                pin("127.0.0.1", "127.0.0.3:9001"),
                "http://127.0.0.1:8002/metrics",
                Some("127.0.0.1:8002"),
                "http://127.0.0.3:8002/metrics",
            ),
            // A replica of another address family than base_url's.
            (
                pin("127.0.0.1", "[fd00::7]:8000"),
                "http://127.0.0.1:8000/metrics",
                Some("127.0.0.1:8000"),
                "http://[fd00::7]:8000/metrics",
            ),
            (
                pin("[::ffff:7f00:1]", "127.0.0.2:8000"),
                "http://[::ffff:127.0.0.1]:8000/metrics",
                Some("[::ffff:7f00:1]:8000"),
                "http://127.0.0.2:8000/metrics",
            ),
            (
                pin("[::1]", "[fd00::7]:8000"),
                "http://[::1]:8000/metrics",
                Some("[::1]:8000"),
                "http://[fd00::7]:8000/metrics",
            ),
            (
                pin("127.0.0.1", "127.0.0.1:8000"),
                "http://127.0.0.1:8000/metrics",
                None,
                "http://127.0.0.1:8000/metrics",
            ),
            // Another address than base_url's: not this replica's host.
            (
                pin("127.0.0.1", "127.0.0.2:8000"),
                "http://10.0.0.9:8000/metrics",
                None,
                "http://10.0.0.9:8000/metrics",
            ),
        ];
        moves(cases);
    }

    /// A name with and without its trailing dot is one host (the same FQDN): a
    /// `server_metrics_url` on `pool.test` with `base_url` on `pool.test.` is the replica's,
    /// not the system resolver's answer for the name.
    #[test]
    fn a_trailing_dot_is_the_same_host() {
        let pin = |host: &str| Pin {
            host: host.into(),
            addr: "10.1.2.3:8001".parse().unwrap(),
            port: 8000,
        };
        for (host, url) in [
            ("pool.test.", "http://pool.test:8000/metrics"),
            ("pool.test", "http://POOL.test.:8000/metrics"),
        ] {
            let pin = pin(host);
            let mut url = reqwest::Url::parse(url).unwrap();
            assert!(pin.matches(url.host_str().unwrap()), "{host} {url}");
            assert!(to_replica_address(&mut url, &pin).is_some(), "{host} {url}");
            assert_eq!(url.port(), Some(8001));
        }
        assert!(!pin("pool.test").matches("pool.test.."));
    }

    #[test]
    fn names_under_localhost() {
        for yes in ["a.localhost", "tls-gateway.LOCALHOST", "x.y.localhost."] {
            assert!(under_localhost(yes), "{yes}");
        }
        for no in [
            "localhost",
            "localhost.",
            "notlocalhost",
            "a.localhost.example",
            ".localhost",
        ] {
            assert!(!under_localhost(no), "{no}");
        }
    }
}
