//! The HTTP client of one target.

use std::time::Duration;

use crate::config::Target;

/// Longest time to set up a TCP (and TLS) connection, capped by the probe's own deadline.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Builds the `reqwest` client for `target`: no retries of any kind (a retry would hide a
/// failure and fold back-off into latency), no redirects, `TCP_NODELAY`, proxies from the
/// environment (`HTTPS_PROXY`, `NO_PROXY`, …), and a fresh connection for every probe, as
/// blackbox_exporter does: servers close idle keep-alive connections after a few seconds
/// (uvicorn and llama.cpp after 5 s, llama.cpp right after a stream), so a pooled connection
/// is usually dead by the next probe, and reusing one races the server's close and fails a
/// probe for nothing. TTFT therefore includes connection setup (TCP, and TLS for https).
///
/// The connect timeout is the only per-target setting, so targets with the same
/// [`connect_timeout`] can share one client (the daemon does: each client loads the system's
/// root certificates, about 180 KiB and 3 ms apiece — see `BENCHMARKS.md`, table 4).
///
/// Errors: the TLS backend cannot be initialised.
pub fn build_client(target: &Target) -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .user_agent(concat!("llm-probe/", env!("CARGO_PKG_VERSION")))
        .retry(reqwest::retry::never())
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(connect_timeout(target))
        .tcp_nodelay(true)
        .pool_max_idle_per_host(0)
        .build()
}

/// The connect timeout of `target`'s client: [`CONNECT_TIMEOUT`], capped by the probe's deadline.
pub fn connect_timeout(target: &Target) -> Duration {
    CONNECT_TIMEOUT.min(target.timeout)
}
