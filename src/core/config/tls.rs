//! Transport settings of a target: TLS material (read from files at load time, so a reload
//! re-reads them), connect timeout and the connection reuse policy.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Default longest time to set up a connection (capped by the probe's `timeout`).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// TLS settings. File contents are kept as PEM bytes, shared by every copy (the replicas of a
/// pool, the client keys); `Debug` shows the paths only.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Tls {
    /// `tls.ca_file`: extra CA certificate(s) to trust, PEM, besides the system roots.
    pub ca_file: Option<PathBuf>,
    /// Contents of `ca_file`.
    pub ca_pem: Option<Arc<[u8]>>,
    /// `tls.cert_file` and `tls.key_file`: the client certificate and key for mTLS.
    pub client_files: Option<(PathBuf, PathBuf)>,
    /// The client certificate chain followed by its private key, PEM (a secret).
    pub client_identity_pem: Option<Arc<[u8]>>,
    /// `tls.insecure_skip_verify`: accept any server certificate. Logged loudly.
    pub insecure_skip_verify: bool,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("ca_file", &self.ca_file)
            .field("client_files", &self.client_files)
            .field("insecure_skip_verify", &self.insecure_skip_verify)
            .finish()
    }
}

/// Whether a probe opens a fresh connection or reuses an idle one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ConnectionPolicy {
    /// A new TCP (and TLS) connection for every probe: TTFT includes connection setup, and a
    /// server's keep-alive close can never fail a probe. The default, as in blackbox_exporter.
    #[default]
    Fresh,
    /// Reuse an idle connection when one is open (idle ones are dropped after 4 s, under the
    /// common 5 s server keep-alive): TTFT as a client with a warm pool sees it.
    Reuse,
}

impl ConnectionPolicy {
    /// `fresh` or `reuse`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectionPolicy::Fresh => "fresh",
            ConnectionPolicy::Reuse => "reuse",
        }
    }
}
