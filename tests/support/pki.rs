//! Certificates made for a test: a CA, a server certificate for 127.0.0.1 and localhost, and a
//! client certificate, all signed by the CA.

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

pub struct Pki {
    pub ca_pem: String,
    pub ca_der: CertificateDer<'static>,
    pub server_cert: CertificateDer<'static>,
    pub server_key: Vec<u8>,
    pub server_cert_pem: String,
    pub server_key_pem: String,
    pub client_cert_pem: String,
    pub client_key_pem: String,
}

impl Pki {
    /// The server's private key, for `rustls::ConfigBuilder::with_single_cert`.
    pub fn server_key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.server_key.clone()))
    }
}

pub fn pki() -> Pki {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let server_key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .unwrap()
        .signed_by(&server_key, &ca)
        .unwrap();
    let client_key = KeyPair::generate().unwrap();
    let client = CertificateParams::new(vec!["llm-probe".to_string()])
        .unwrap()
        .signed_by(&client_key, &ca)
        .unwrap();
    Pki {
        ca_pem: ca.pem(),
        ca_der: ca.der().clone(),
        server_cert: server.der().clone(),
        server_key: server_key.serialize_der(),
        server_cert_pem: server.pem(),
        server_key_pem: server_key.serialize_pem(),
        client_cert_pem: client.pem(),
        client_key_pem: client_key.serialize_pem(),
    }
}
