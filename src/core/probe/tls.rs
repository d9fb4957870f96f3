//! A target's TLS settings as one rustls client configuration, used by the probe's stamped
//! client (`super::transport`) and, as a copy sharing its roots, by the target's reqwest client
//! ([`super::build_client`]):
//!
//! - trusted roots: the system's (`rustls-native-certs`, loaded once per process and shared by
//!   every target) plus the certificates of `tls.ca_file`;
//! - `tls.cert_file` + `tls.key_file`: the client certificate chain and its key (PKCS#8, PKCS#1
//!   or SEC1), offered when the server asks (mTLS);
//! - `tls.insecure_skip_verify`: any server certificate and handshake signature is accepted, as
//!   reqwest's `danger_accept_invalid_certs`;
//! - TLS 1.2 and 1.3 with the *ring* provider, the server name (SNI) from the URL's host (an IP
//!   address is verified as one and not sent as SNI), ALPN `h2` then `http/1.1`;
//! - a replica of a target on an IP address, reached at the replica's own address by its
//!   reqwest client, is verified as `base_url`'s address ([`verify_as`]), as its stream is.
//!
//! Targets with equal TLS settings share one configuration (and so its TLS session cache and
//! its roots): 1,000 targets trusting the same `tls.ca_file`, or 2,000 replicas with a client
//! each, hold one copy of the roots, not 1,000 or 2,000.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::config::Tls;

/// The TLS material of a target cannot be used. The message names what was wrong, never the
/// material (a key is a secret).
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    /// `tls.ca_file` holds no certificate rustls accepts as a trust anchor.
    #[error("tls.ca_file: no usable CA certificate")]
    Ca,
    /// `tls.cert_file` / `tls.key_file` are not a certificate chain and a private key.
    #[error("tls.cert_file / tls.key_file: not a certificate and a private key")]
    Identity,
    /// rustls refused the configuration.
    #[error("TLS setup failed: {0}")]
    Rustls(#[from] rustls::Error),
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The system's trusted roots, loaded on first use and shared (about 180 KiB; see `BENCHMARKS.md`,
/// table 4). Certificates rustls cannot parse are skipped, as reqwest skips them.
fn system_roots() -> Arc<RootCertStore> {
    static ROOTS: OnceLock<Arc<RootCertStore>> = OnceLock::new();
    Arc::clone(ROOTS.get_or_init(|| {
        let mut roots = RootCertStore::empty();
        let (_, _) =
            roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        Arc::new(roots)
    }))
}

/// The ALPN protocols offered, in order of preference (HTTP/2 first, as reqwest).
const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// The rustls client configuration for `tls` (see the module docs), shared with every target
/// of equal settings.
///
/// The process keeps each configuration it built until one for other settings is built while
/// nothing else holds it: a reqwest client holds a copy, not the `Arc`, so a configuration
/// dropped with its last stamped client would be built again (roots cloned for a `ca_file`, a
/// new session cache of about 15 KiB) for every client, as it was once for each of 2,000
/// replicas.
///
/// Errors: the CA file or the client identity does not parse (both are checked when the
/// configuration is loaded, so this is rare).
pub(super) fn client_config(tls: &Tls) -> Result<Arc<ClientConfig>, TlsSetupError> {
    static SHARED: Mutex<Option<HashMap<Tls, Arc<ClientConfig>>>> = Mutex::new(None);
    let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    let shared = shared.get_or_insert_with(HashMap::new);
    if let Some(config) = shared.get(tls) {
        return Ok(config.clone());
    }
    let mut config = build(tls)?;
    config.alpn_protocols = ALPN.iter().map(|p| p.to_vec()).collect();
    let config = Arc::new(config);
    // Settings no stamped client uses any more (a reload changed them) go; the reqwest
    // clients that copied them keep their copies.
    shared.retain(|_, c| Arc::strong_count(c) > 1);
    shared.insert(tls.clone(), config.clone());
    Ok(config)
}

/// A new rustls client configuration for `tls`, without ALPN.
fn build(tls: &Tls) -> Result<ClientConfig, TlsSetupError> {
    let builder =
        ClientConfig::builder_with_provider(provider()).with_safe_default_protocol_versions()?;
    let builder = if tls.insecure_skip_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyServer))
    } else {
        builder.with_root_certificates(roots(tls)?)
    };
    Ok(match &tls.client_identity_pem {
        None => builder.with_no_client_auth(),
        Some(pem) => {
            let chain: Vec<_> = CertificateDer::pem_slice_iter(pem)
                .collect::<Result<_, _>>()
                .map_err(|_| TlsSetupError::Identity)?;
            let key = PrivateKeyDer::from_pem_slice(pem).map_err(|_| TlsSetupError::Identity)?;
            if chain.is_empty() {
                return Err(TlsSetupError::Identity);
            }
            builder.with_client_auth_cert(chain, key)?
        }
    })
}

/// The roots `tls` trusts: the system's, and `tls.ca_file`'s.
fn roots(tls: &Tls) -> Result<Arc<RootCertStore>, TlsSetupError> {
    let Some(pem) = &tls.ca_pem else {
        return Ok(system_roots());
    };
    let mut roots = RootCertStore::clone(&system_roots());
    let certs: Vec<_> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|_| TlsSetupError::Ca)?;
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(TlsSetupError::Ca);
    }
    Ok(Arc::new(roots))
}

/// Makes `config` (built for `tls`) verify a server reached at the IP address `at` as the IP
/// address `name`: a replica of a target whose `base_url` is on `name`, its URL moved to the
/// replica's address (`super::resolve::to_replica_address`), is verified as `base_url`'s
/// host, as its probe's stream is. Other names are verified as themselves. Nothing changes
/// for `tls.insecure_skip_verify`, or when the roots give no verifier (none would verify).
pub(super) fn verify_as(config: &mut ClientConfig, tls: &Tls, at: IpAddr, name: IpAddr) {
    if tls.insecure_skip_verify || at == name {
        return;
    }
    let Some(inner) = webpki_verifier(tls) else {
        return;
    };
    let verifier = VerifyAs {
        inner,
        at: ServerName::IpAddress(at.into()),
        name: ServerName::IpAddress(name.into()),
    };
    config
        .dangerous()
        .set_certificate_verifier(Arc::new(verifier));
}

/// The webpki verifier of `tls`'s roots, shared by every replica client of equal settings
/// (a `ca_file`'s roots are a copy of the system's: one per settings, not one per replica).
fn webpki_verifier(tls: &Tls) -> Option<Arc<WebPkiServerVerifier>> {
    static SHARED: Mutex<Option<HashMap<Tls, Arc<WebPkiServerVerifier>>>> = Mutex::new(None);
    let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    let shared = shared.get_or_insert_with(HashMap::new);
    if let Some(v) = shared.get(tls) {
        return Some(v.clone());
    }
    let v = WebPkiServerVerifier::builder_with_provider(roots(tls).ok()?, provider())
        .build()
        .ok()?;
    // Settings no client uses any more go.
    shared.retain(|_, v| Arc::strong_count(v) > 1);
    shared.insert(tls.clone(), v.clone());
    Some(v)
}

/// A server reached at `at` verified as `name` ([`verify_as`]); every other check as `inner`.
#[derive(Debug)]
struct VerifyAs {
    inner: Arc<WebPkiServerVerifier>,
    at: ServerName<'static>,
    name: ServerName<'static>,
}

impl ServerCertVerifier for VerifyAs {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let name = match *server_name == self.at {
            true => &self.name,
            false => server_name,
        };
        (self.inner).verify_server_cert(end_entity, intermediates, name, ocsp, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }

    fn requires_raw_public_keys(&self) -> bool {
        self.inner.requires_raw_public_keys()
    }

    fn root_hint_subjects(&self) -> Option<&[rustls::DistinguishedName]> {
        self.inner.root_hint_subjects()
    }
}

/// A configuration that is never used for a handshake: the connector of a plain `http://`
/// target needs one, and its URLs never ask for TLS. No roots, nothing loaded.
///
/// One instance for every plain target: each `ClientConfig` allocates its own session cache
/// (room for 256 servers, about 15 KiB), which at 1,000 plain targets was 15 MiB of the
/// daemon's memory for caches no handshake ever uses (BENCHMARKS.md §14).
pub(super) fn unused_config() -> Result<Arc<ClientConfig>, TlsSetupError> {
    static UNUSED: OnceLock<Arc<ClientConfig>> = OnceLock::new();
    if let Some(config) = UNUSED.get() {
        return Ok(config.clone());
    }
    let config = Arc::new(
        ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_root_certificates(RootCertStore::empty())
            .with_no_client_auth(),
    );
    Ok(UNUSED.get_or_init(|| config).clone())
}

/// `tls.insecure_skip_verify`: accepts any server certificate and handshake signature.
#[derive(Debug)]
struct AcceptAnyServer;

impl ServerCertVerifier for AcceptAnyServer {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_settings_share_one_configuration_offering_h2_then_http1() {
        let a = client_config(&Tls::default()).unwrap();
        let b = client_config(&Tls::default()).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(a.alpn_protocols, [b"h2".to_vec(), b"http/1.1".to_vec()]);
        let insecure = Tls {
            insecure_skip_verify: true,
            ..Tls::default()
        };
        let c = client_config(&insecure).unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
        // Dropped by every stamped client, it is kept for the reqwest clients to come (they
        // hold copies): asked again, it is the same one, not built anew.
        let weak = Arc::downgrade(&c);
        drop(c);
        let again = client_config(&insecure).unwrap();
        assert!(weak.upgrade().is_some_and(|w| Arc::ptr_eq(&w, &again)));
        drop(again);
        // Once other settings are built, the unused one goes.
        let other = Tls {
            insecure_skip_verify: true,
            ca_file: Some("unused-by-insecure.pem".into()),
            ..Tls::default()
        };
        let _other = client_config(&other).unwrap();
        assert!(weak.upgrade().is_none());
    }

    /// A replica reached at its own IP address is verified as base_url's: a certificate for
    /// base_url's address passes there, and nowhere else; one for another address never.
    #[test]
    fn a_replica_s_address_is_verified_as_base_url_s_and_no_other() {
        use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
            .unwrap()
            .signed_by(&key, &ca)
            .unwrap();
        let tls = Tls {
            ca_pem: Some(ca.pem().into_bytes().into()),
            ..Tls::default()
        };
        let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
        let verifies = |at: &str, name: &str, asked: &str| {
            let v = VerifyAs {
                inner: webpki_verifier(&tls).unwrap(),
                at: ServerName::IpAddress(ip(at).into()),
                name: ServerName::IpAddress(ip(name).into()),
            };
            let asked = ServerName::IpAddress(ip(asked).into());
            v.verify_server_cert(cert.der(), &[], &asked, &[], UnixTime::now())
                .is_ok()
        };
        assert!(verifies("127.0.0.2", "127.0.0.1", "127.0.0.2"));
        assert!(verifies("127.0.0.2", "127.0.0.1", "127.0.0.1"));
        assert!(!verifies("127.0.0.2", "127.0.0.1", "127.0.0.3"));
        assert!(!verifies("127.0.0.2", "10.0.0.1", "127.0.0.2"));
    }

    #[test]
    fn plain_targets_share_one_unused_configuration() {
        let a = unused_config().unwrap();
        let b = unused_config().unwrap();
        assert!(
            Arc::ptr_eq(&a, &b),
            "one session cache for every plain target"
        );
        assert!(a.alpn_protocols.is_empty());
    }

    #[test]
    fn unusable_material_is_an_error_that_shows_none_of_it() {
        let ca = Tls {
            ca_pem: Some(b"not a certificate SECRET-ca".to_vec().into()),
            ..Tls::default()
        };
        let e = client_config(&ca).unwrap_err();
        assert!(matches!(e, TlsSetupError::Ca), "{e}");
        let key_only = Tls {
            client_identity_pem: Some(
                b"-----BEGIN PRIVATE KEY-----\nU0VDUkVULWtleQ==\n-----END PRIVATE KEY-----\n"
                    .to_vec()
                    .into(),
            ),
            ..Tls::default()
        };
        let e = client_config(&key_only).unwrap_err();
        assert!(matches!(e, TlsSetupError::Identity), "{e}");
        assert!(!e.to_string().contains("U0VDUkVU"), "{e}");
    }
}
