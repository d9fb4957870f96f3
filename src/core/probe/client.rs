//! The HTTP client of a target, and which targets can share one.

use std::time::Duration;

use crate::config::replicas::Replica;
use crate::config::{ConnectionPolicy, Target, Tls};

/// The `User-Agent` of every probe request.
pub const USER_AGENT: &str = concat!("llm-probe/", env!("CARGO_PKG_VERSION"));

/// How long an idle connection is kept under `connection: reuse`: below the 5 s keep-alive of
/// uvicorn (vLLM) and llama.cpp, so the pool does not hand out a connection the server is
/// about to close.
pub const REUSE_IDLE_TIMEOUT: Duration = Duration::from_secs(4);

/// Everything a client depends on. Targets with equal keys share one client (the daemon does:
/// each client holds its own connection pool and connector). Their TLS configuration, with the
/// system's root certificates, is shared more widely: by every client of equal TLS settings
/// (`super::tls`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClientKey {
    connect_timeout: Duration,
    connection: ConnectionPolicy,
    tls: Tls,
    /// A replica's host name and address: each replica has a client of its own.
    replica: Option<(String, std::net::SocketAddr)>,
}

/// The [`ClientKey`] of `target`, or of its `replica`.
pub fn client_key(target: &Target, replica: Option<&Replica>) -> ClientKey {
    ClientKey {
        connect_timeout: target.connect_timeout.min(target.timeout),
        connection: target.connection,
        tls: target.tls.clone(),
        replica: super::resolve::pin_of(target, replica).map(|p| (p.host.clone(), p.addr)),
    }
}

/// Builds the `reqwest` client for `target`: no retries of any kind (a retry would hide a
/// failure and fold back-off into latency), no redirects, `TCP_NODELAY`, proxies from the
/// environment (`HTTPS_PROXY`, `NO_PROXY`, …), the probe's resolver (the system's, with
/// failures typed as [`super::ResolveError`] and `.localhost` names on loopback), the target's
/// connect timeout and TLS settings (extra CA, client certificate, `insecure_skip_verify`), its
/// connection policy, and a timer
/// around every connect (connection setup time, `super::connect`). It depends
/// on nothing else of the target ([`client_key`]).
///
/// `connection: fresh` (the default, as blackbox_exporter) opens a connection for every probe:
/// servers close idle keep-alive connections after a few seconds (uvicorn and llama.cpp after
/// 5 s, llama.cpp right after a stream), so a pooled connection is usually dead by the next
/// probe, and reusing one races the server's close and fails a probe for nothing. TTFT then
/// includes connection setup (TCP, and TLS for https), which is also reported on its own.
///
/// Errors: the TLS material cannot be used (validated at config load, so rare).
pub fn build_client(target: &Target) -> Result<reqwest::Client, reqwest::Error> {
    build_replica_client(target, None)
}

/// [`build_client`] for one `replica` of `target` (`None`: the target itself): its requests
/// connect to the replica's address, never through a proxy, while `Host`, TLS SNI and
/// certificate checks keep the target's host name.
///
/// Errors: as [`build_client`].
pub fn build_replica_client(
    target: &Target,
    replica: Option<&Replica>,
) -> Result<reqwest::Client, reqwest::Error> {
    let key = client_key(target, replica);
    let mut b = reqwest::Client::builder()
        .user_agent(USER_AGENT)
        .retry(reqwest::retry::never())
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(key.connect_timeout)
        .connector_layer(super::connect::TimeConnects)
        .dns_resolver(std::sync::Arc::new(super::resolve::Resolver::pinned(
            super::resolve::pin_of(target, replica),
        )))
        .tcp_nodelay(true);
    if replica.is_some() {
        // A replica is reached at its own address: a proxy would choose its own.
        b = b.no_proxy();
    }
    b = match key.connection {
        ConnectionPolicy::Fresh => b.pool_max_idle_per_host(0),
        ConnectionPolicy::Reuse => b.pool_idle_timeout(REUSE_IDLE_TIMEOUT),
    };
    match super::tls::client_config(&key.tls) {
        // The process's shared rustls configuration for these TLS settings: the system's
        // roots are loaded once, not once per client (each replica has a client of its own,
        // and reqwest's own setup loads them again for every client it builds: about 180 KiB
        // and 3 ms apiece).
        Ok(config) => {
            let mut config = rustls::ClientConfig::clone(&config);
            // A replica of a target on an IP address is reached at the replica's address
            // (`super::resolve::to_replica_address`) and verified as base_url's, as its
            // probe's stream is.
            let base_ip = match target.base_url.host() {
                Some(url::Host::Ipv4(ip)) => Some(std::net::IpAddr::V4(ip)),
                Some(url::Host::Ipv6(ip)) => Some(std::net::IpAddr::V6(ip)),
                _ => None,
            };
            if let (Some(name), Some(r)) = (base_ip, replica) {
                super::tls::verify_as(&mut config, &key.tls, r.addr.ip(), name);
            }
            b = b.use_preconfigured_tls(config)
        }
        // Material our setup refuses (checked at load, so rare): reqwest's own setup, which
        // reports it in its terms.
        Err(_) => {
            if let Some(pem) = &key.tls.ca_pem {
                for cert in reqwest::Certificate::from_pem_bundle(pem)? {
                    b = b.add_root_certificate(cert);
                }
            }
            if let Some(pem) = &key.tls.client_identity_pem {
                b = b.identity(reqwest::Identity::from_pem(pem)?);
            }
            if key.tls.insecure_skip_verify {
                b = b.danger_accept_invalid_certs(true);
            }
        }
    }
    b.build()
}

/// Logs, loudly and once per call, that `target` does not verify TLS certificates.
pub(super) fn warn_if_insecure(target: &Target) {
    if target.tls.insecure_skip_verify {
        tracing::warn!(
            target = %target.name,
            "TLS certificate verification is OFF for this target (tls.insecure_skip_verify): anyone on the path can impersonate the server"
        );
    }
}
