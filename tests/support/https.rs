//! HTTPS servers for tests: a server TLS configuration from the test PKI, and serving one
//! accepted TLS connection over HTTP/2 when ALPN agreed on `h2`, else HTTP/1.1.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::rt::{TokioExecutor, TokioIo};

use super::pki::Pki;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A TLS server configuration with the test PKI's server certificate; with `client_auth`,
/// only clients with a certificate from the test CA get through; `alpn`: the protocols it
/// agrees to (none: no ALPN).
pub fn server_config(pki: &Pki, client_auth: bool, alpn: &[&[u8]]) -> Arc<rustls::ServerConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = if client_auth {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(pki.ca_der.clone()).unwrap();
        let verifier =
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .unwrap();
        builder.with_client_cert_verifier(verifier)
    } else {
        builder.with_no_client_auth()
    };
    let mut config = builder
        .with_single_cert(vec![pki.server_cert.clone()], pki.server_key())
        .unwrap();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

/// Serves `svc` on one accepted TLS connection until it closes: HTTP/2 when ALPN agreed on
/// `h2`, else HTTP/1.1. Connection errors end it quietly.
pub async fn serve<S>(tls: tokio_rustls::server::TlsStream<tokio::net::TcpStream>, svc: S)
where
    S: hyper::service::Service<
            hyper::Request<hyper::body::Incoming>,
            Response = hyper::Response<Full<Bytes>>,
        > + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    let is_h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    let io = TokioIo::new(tls);
    let _ = if is_h2 {
        hyper::server::conn::http2::Builder::new(TokioExecutor::new())
            .serve_connection(io, svc)
            .await
    } else {
        hyper::server::conn::http1::Builder::new()
            .serve_connection(io, svc)
            .await
    };
}

/// A TLS terminator with the test PKI (ALPN `alpn`) listening on `bind` (`IP:0`) in front of
/// the plain HTTP server at `backend`: each accepted connection's bytes are copied both ways to
/// a new connection to it. Returns its address and the server name (SNI) each handshake asked
/// for, in order (`None`: no SNI).
pub async fn tls_front(
    bind: &str,
    pki: &Pki,
    alpn: &[&[u8]],
    backend: std::net::SocketAddr,
) -> (
    std::net::SocketAddr,
    Arc<std::sync::Mutex<Vec<Option<String>>>>,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(server_config(pki, false, alpn));
    let listener = tokio::net::TcpListener::bind(bind).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let names = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = names.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, seen) = (acceptor.clone(), seen.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let name = tls.get_ref().1.server_name().map(str::to_string);
                seen.lock().unwrap().push(name);
                let Ok(mut back) = tokio::net::TcpStream::connect(backend).await else {
                    return;
                };
                let _ = back.set_nodelay(true);
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut back).await;
            });
        }
    });
    (addr, names)
}
