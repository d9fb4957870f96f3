//! How a probe's streaming request travels: over the probe's own kernel-stamped client when the
//! target is `http://` or `https://`, reached directly or through an HTTP proxy from the
//! environment; otherwise over the target's reqwest client.
//!
//! The stamped client is hyper-util's client (HTTP/1.1, and HTTP/2 when TLS's ALPN agrees on
//! `h2`, as reqwest) with the probe's resolver, `TCP_NODELAY`, the target's connect timeout
//! (around the whole connect: resolution, TCP, a proxy's `CONNECT` and the TLS handshake, as
//! reqwest's), the environment's proxies ([`super::route`]), its
//! connection policy (`fresh`: no pool; `reuse`: idle connections kept
//! [`super::client::REUSE_IDLE_TIMEOUT`]), no retries of any kind, the connection-setup timer of
//! [`super::connect`] (around the same whole connect, so setup includes the TLS handshake, as
//! on reqwest), and every socket wrapped in [`StampedStream`], so each read of the response
//! carries the kernel's receive time ([`super::arrival`]). For `https`, hyper-rustls puts TLS
//! (tokio-rustls, with the target's settings: [`super::tls`]) on the stamped socket; rustls
//! reads the socket, so the stamp a decrypted read is marked with is the newest among the
//! socket reads consumed so far: the arrival of the segment that completed the record (or a
//! later one rustls had already read, as for plain HTTP when the probe is late). The response
//! names its connection's [`Arrivals`] in its extensions (so a pooled connection works too).
//! Each prober builds its own stamped client, so a connection (an HTTP/2 one too) only ever
//! carries one target's probes; its TLS configuration (roots, session cache) is shared by the
//! targets of equal TLS settings ([`super::tls`]).
//! Errors are classified as reqwest's (`super::errors`): a refused connect is `connect` (a
//! refused proxy is named as the proxy), a handshake failure `tls`, a connect past its timeout
//! `timeout`.
//!
//! Targets whose environment proxy is an `https://` (TLS to the proxy) or SOCKS one stay on
//! reqwest, whose connector gives no access to its sockets: those probes are stamped with read
//! instants (`timestamp_source: read`). So does a target whose TLS material rustls refuses at
//! client build (logged; the configuration check makes this rare). On a platform without
//! receive timestamps (not Linux) every target uses reqwest.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tower_layer::Layer;
use tower_service::Service;

use super::arrival::{Arrivals, StampedStream};
use super::connect::{TimeConnects, TimedConnector};
use super::resolve::{Pin as Pinned, Resolver};
use super::route::Route;
use crate::config::{ConnectionPolicy, Target};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The connector of the stamped client, outermost first: the connection-setup timer, the
/// connect timeout, TLS for `https` URLs (hyper-rustls over tokio-rustls), and the TCP connect
/// (straight, or through the environment's proxy: [`super::route`]) whose socket is a
/// [`StampedStream`].
type StampedConnector = TimedConnector<ConnectTimeout<HttpsConnector<StampedTcp>>>;

/// The probe's stamped HTTP/1.1 and HTTP/2 client (see the module docs).
#[derive(Debug, Clone)]
pub(super) struct StampedClient {
    client: Client<StampedConnector, Full<Bytes>>,
    /// The proxy's `Proxy-Authorization` for plain `http` requests sent through it.
    proxy_auth: Option<HeaderValue>,
}

impl StampedClient {
    /// Sends `request`; a plain `http` request through a proxy carries the proxy's credentials
    /// unless it has a `Proxy-Authorization` of its own (as reqwest). An `https` request never
    /// does (they went with the tunnel's `CONNECT`).
    pub(super) fn request(
        &self,
        mut request: http::Request<Full<Bytes>>,
    ) -> hyper_util::client::legacy::ResponseFuture {
        if let Some(auth) = &self.proxy_auth {
            if request.uri().scheme() == Some(&http::uri::Scheme::HTTP) {
                request
                    .headers_mut()
                    .entry(http::header::PROXY_AUTHORIZATION)
                    .or_insert_with(|| auth.clone());
            }
        }
        self.client.request(request)
    }
}

/// The stamped client for `target`, or `None` when its probes go over reqwest: neither `http`
/// nor `https`, a proxy from the environment the stamped client does not take (`https://` or
/// SOCKS, [`super::route`]), a platform without receive timestamps, or TLS material rustls
/// refuses (checked at load, so rare; logged).
pub(super) fn stamped_client(
    target: &Target,
    replica: Option<&crate::config::replicas::Replica>,
) -> Option<StampedClient> {
    let https = match target.base_url.scheme() {
        "https" => true,
        "http" => false,
        _ => return None,
    };
    if !cfg!(target_os = "linux") {
        return None;
    }
    // A replica is reached at its own address, never through a proxy (which would resolve the
    // host name itself).
    let pin = super::resolve::pin_of(target, replica);
    let route = match pin {
        Some(_) => Route::Direct,
        None => super::route::route(&target.base_url)?,
    };
    let tls = if https {
        super::tls::client_config(&target.tls)
    } else {
        super::tls::unused_config()
    };
    let tls = match tls {
        Ok(tls) => tls,
        Err(e) => {
            tracing::warn!(target = %target.name, error = %e, "this target's probes are stamped with read instants");
            return None;
        }
    };
    super::arrival::prepare();
    let mut http = HttpConnector::new_with_resolver(Resolver::pinned(pin.clone()));
    http.set_nodelay(true);
    // `https` URLs reach it too: hyper-rustls puts TLS on the connection it returns.
    http.enforce_http(false);
    // hyper-rustls turns `https` URLs into TLS connections (the server name from the URL,
    // HTTP/2 when ALPN agrees on `h2`) and leaves `http` ones plain.
    let tcp = StampedTcp {
        direct: DirectTcp(http, pin),
        route: route.clone(),
    };
    let https = HttpsConnector::from((tcp, tls));
    let connector = ConnectTimeout {
        inner: https,
        timeout: target.connect_timeout.min(target.timeout),
    };
    let mut b = Client::builder(TokioExecutor::new());
    b.pool_timer(TokioTimer::new())
        .timer(TokioTimer::new())
        .retry_canceled_requests(false)
        .http1_preserve_header_case(false);
    match target.connection {
        ConnectionPolicy::Fresh => b.pool_max_idle_per_host(0),
        ConnectionPolicy::Reuse => b.pool_idle_timeout(super::client::REUSE_IDLE_TIMEOUT),
    };
    Some(StampedClient {
        client: b.build(TimeConnects.layer(connector)),
        proxy_auth: route.request_auth().cloned(),
    })
}

/// A connection's [`Arrivals`], as an extension of each response that came on it (and of its
/// `Connected`, where `super::connect` finds it).
#[derive(Debug, Clone)]
pub(super) struct ConnArrivals(pub(super) Arc<Arrivals>);

/// The bytes read since the request was written on the HTTP/1 connection it was given to
/// (`captured` by hyper-util's `capture_connection` before it was sent): how much of an answer
/// came before the request failed. Counted on the TCP socket, so on a plain `http` connection
/// only is it the answer (under TLS it counts records too). 0 without a connection or on HTTP/2.
pub(super) fn answer_bytes(
    captured: &hyper_util::client::legacy::connect::CaptureConnection,
) -> u64 {
    let meta = captured.connection_metadata();
    let Some(c) = meta.as_ref().filter(|c| !c.is_negotiated_h2()) else {
        return 0;
    };
    let mut extensions = http::Extensions::new();
    c.get_extras(&mut extensions);
    extensions
        .get::<ConnArrivals>()
        .map_or(0, |a| a.0.bytes_since_write())
}

/// A TCP connection of the stamped client (under TLS for `https`), to the target or to a proxy
/// (`proxied`: an HTTP proxy that takes absolute-form requests; a tunnel is not).
#[derive(Debug)]
pub struct StampedConn {
    io: TokioIo<StampedStream>,
    proxied: bool,
}

impl Connection for StampedConn {
    fn connected(&self) -> Connected {
        let stream = self.io.inner();
        stream
            .get_ref()
            .connected()
            .proxy(self.proxied)
            .extra(ConnArrivals(stream.arrivals()))
    }
}

impl hyper::rt::Read for StampedConn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for StampedConn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// Resolves and connects to the URI's host (hyper-util's connector, the probe's resolver) and
/// wraps the socket in a [`StampedStream`]. A replica's connector connects to the replica's
/// address and port for its target's host name (TLS above it still uses the name).
#[derive(Debug, Clone)]
pub struct DirectTcp(HttpConnector<Resolver>, Option<Arc<Pinned>>);

impl DirectTcp {
    fn connect(
        &mut self,
        dst: Uri,
        proxied: bool,
    ) -> Pin<Box<dyn Future<Output = Result<StampedConn, BoxError>> + Send>> {
        let dst = match &self.1 {
            Some(pin) if dst.host().is_some_and(|h| pin.matches(h)) => {
                super::connect::resolved();
                Uri::try_from(format!("http://{}/", pin.addr)).unwrap_or(dst)
            }
            _ => dst,
        };
        let connect = self.0.call(dst);
        Box::pin(async move {
            let io = connect.await?;
            super::connect::tcp_connected();
            Ok(StampedConn {
                io: TokioIo::new(StampedStream::new(io.into_inner())),
                proxied,
            })
        })
    }
}

impl Service<Uri> for DirectTcp {
    type Response = StampedConn;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<StampedConn, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.0.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        self.connect(dst, false)
    }
}

/// The stamped TCP connection for a URI by the target's [`Route`]: to its host; to the proxy
/// (plain `http`, absolute-form requests); or a `CONNECT` tunnel through the proxy (`https`).
#[derive(Debug, Clone)]
pub struct StampedTcp {
    direct: DirectTcp,
    route: Route,
}

impl Service<Uri> for StampedTcp {
    type Response = StampedConn;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<StampedConn, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.direct.poll_ready(cx)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let https = dst.scheme() == Some(&http::uri::Scheme::HTTPS);
        match &self.route {
            Route::Direct => self.direct.connect(dst, false),
            Route::Proxy { uri, .. } if !https => {
                let uri = uri.clone();
                self.direct.connect(uri, true)
            }
            Route::Proxy { .. } => {
                // hyper-util's connector is always ready: no `poll_ready` to wait for.
                let tunnel = self.route.tunnel(self.direct.clone());
                Box::pin(async move {
                    let mut tunnel = tunnel.ok_or("no proxy to tunnel through")?;
                    Ok(tunnel.call(dst).await?)
                })
            }
        }
    }
}

/// The target's connect timeout around a whole connect (resolution, TCP, TLS handshake), as
/// reqwest's `connect_timeout`.
#[derive(Debug, Clone)]
pub struct ConnectTimeout<S> {
    inner: S,
    timeout: Duration,
}

impl<S> Service<Uri> for ConnectTimeout<S>
where
    S: Service<Uri, Error = BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        let connect = self.inner.call(dst);
        let timeout = self.timeout;
        Box::pin(async move {
            match tokio::time::timeout(timeout, connect).await {
                Ok(result) => result,
                Err(_) => Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "connect timed out after {}",
                        humantime::format_duration(timeout)
                    ),
                )
                .into()),
            }
        })
    }
}

/// `request` (built by the target's reqwest client) as the stamped client sends it, with the
/// headers reqwest adds on sending (`User-Agent`, `Accept: */*`) when the request has none.
pub(super) fn to_http(
    request: &reqwest::Request,
) -> Result<http::Request<Full<Bytes>>, http::Error> {
    let body = request
        .body()
        .and_then(reqwest::Body::as_bytes)
        .map(Bytes::copy_from_slice)
        .unwrap_or_default();
    let mut out = http::Request::builder()
        .method(request.method().clone())
        .uri(request.url().as_str())
        .body(Full::new(body))?;
    let headers = out.headers_mut();
    *headers = request.headers().clone();
    headers
        .entry(http::header::USER_AGENT)
        .or_insert(HeaderValue::from_static(super::client::USER_AGENT));
    headers
        .entry(http::header::ACCEPT)
        .or_insert(HeaderValue::from_static("*/*"));
    Ok(out)
}

/// A response head and its body, from either transport.
pub(super) enum Response {
    /// Over the target's reqwest client.
    Reqwest(reqwest::Response),
    /// Over the stamped client; `url` is the request's (no redirect is followed).
    Stamped {
        head: http::response::Parts,
        body: Incoming,
        url: reqwest::Url,
    },
}

/// An error while reading a response body.
#[derive(Debug)]
pub(super) enum BodyError {
    Reqwest(reqwest::Error),
    Hyper(hyper::Error),
}

impl BodyError {
    /// The error, as the classifier reads it.
    pub(super) fn as_error(&self) -> &(dyn std::error::Error + 'static) {
        match self {
            BodyError::Reqwest(e) => e,
            BodyError::Hyper(e) => e,
        }
    }
}

impl Response {
    /// The stamped client's response to a request for `url`.
    pub(super) fn stamped(response: http::Response<Incoming>, url: reqwest::Url) -> Self {
        let (head, body) = response.into_parts();
        Response::Stamped { head, body, url }
    }

    pub(super) fn status(&self) -> StatusCode {
        match self {
            Response::Reqwest(r) => r.status(),
            Response::Stamped { head, .. } => head.status,
        }
    }

    pub(super) fn headers(&self) -> &HeaderMap {
        match self {
            Response::Reqwest(r) => r.headers(),
            Response::Stamped { head, .. } => &head.headers,
        }
    }

    pub(super) fn extensions(&self) -> &http::Extensions {
        match self {
            Response::Reqwest(r) => r.extensions(),
            Response::Stamped { head, .. } => &head.extensions,
        }
    }

    pub(super) fn url(&self) -> &reqwest::Url {
        match self {
            Response::Reqwest(r) => r.url(),
            Response::Stamped { url, .. } => url,
        }
    }

    /// Whether the response came over HTTP/1.x (one request at a time on its connection).
    pub(super) fn is_http1(&self) -> bool {
        let version = match self {
            Response::Reqwest(r) => r.version(),
            Response::Stamped { head, .. } => head.version,
        };
        version < http::Version::HTTP_2
    }

    /// The kernel arrivals of the connection the response came on (stamped client only).
    pub(super) fn arrivals(&self) -> Option<Arc<Arrivals>> {
        self.extensions()
            .get::<ConnArrivals>()
            .map(|a| Arc::clone(&a.0))
    }

    /// The next piece of the body (`None` at its end); trailers are skipped.
    pub(super) async fn chunk(&mut self) -> Result<Option<Bytes>, BodyError> {
        match self {
            Response::Reqwest(r) => r.chunk().await.map_err(BodyError::Reqwest),
            Response::Stamped { body, .. } => loop {
                match body.frame().await {
                    None => return Ok(None),
                    Some(Err(e)) => return Err(BodyError::Hyper(e)),
                    Some(Ok(frame)) => {
                        if let Ok(data) = frame.into_data() {
                            return Ok(Some(data));
                        }
                    }
                }
            },
        }
    }
}
