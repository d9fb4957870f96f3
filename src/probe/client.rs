//! The HTTP client of one target.

use std::time::Duration;

use crate::config::Target;

/// Longest time to set up a TCP (and TLS) connection, capped by the probe's own deadline.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Builds the `reqwest` client for `target`: no retries of any kind (a retry would hide a
/// failure and fold back-off into latency), no redirects, `TCP_NODELAY`, connections kept for
/// reuse between probes, proxies from the environment (`HTTPS_PROXY`, `NO_PROXY`, …).
///
/// Errors: the TLS backend cannot be initialised.
pub fn build_client(target: &Target) -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .user_agent(concat!("llm-probe/", env!("CARGO_PKG_VERSION")))
        .retry(reqwest::retry::never())
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(CONNECT_TIMEOUT.min(target.timeout))
        .tcp_nodelay(true)
        .pool_idle_timeout(Duration::from_secs(90))
        .build()
}
