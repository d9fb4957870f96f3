//! The exporter's HTTP server (hyper): `/metrics`, `/-/healthy`, `/-/ready`, `/-/reload`,
//! `/probe` and the status pages ([`status`]), over HTTP or TLS, behind basic auth when the web config asks
//! for it, all under `--web.route-prefix` ([`WebUrls`]). Also the accept loop the simulator shares.
//!
//! Connections are capped ([`ConnectionLimits`]): a client gets a fixed time to send its
//! request's headers (and to finish a TLS handshake), at most `max_connections` are open at
//! once (more wait in the kernel's accept queue, as Prometheus' `--web.max-connections`), and
//! every connection task ends when the server stops.

mod auth;
mod debug_probe;
mod scrape;
mod stall;
pub mod status;
mod urls;
pub mod web_config;

/// Content negotiation is the exposition's own (`metrics::accept`); re-exported for `/metrics`.
pub use crate::metrics::{negotiate, negotiate_text};
pub use debug_probe::DebugProbePolicy;
pub use scrape::{BodyCoding, Scrapes};
pub use urls::{UrlError, WebUrls};
pub use web_config::{WebConfig, WebState};

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body, Incoming};
use hyper::header::{
    HeaderValue, ACCEPT, ACCEPT_ENCODING, ALLOW, CONTENT_ENCODING, CONTENT_SECURITY_POLICY,
    CONTENT_TYPE, VARY, WWW_AUTHENTICATE, X_CONTENT_TYPE_OPTIONS,
};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::history::History;
use crate::metrics::Metrics;

/// The body `/-/healthy` answers with; `healthcheck` checks for it, so that a 200 from some
/// other server on the port does not pass.
pub const HEALTHY_BODY: &str = "llm-probe is Healthy.\n";

/// What the exporter's pages show.
pub struct ExporterState {
    /// The metrics to render.
    pub metrics: Arc<Metrics>,
    /// Recent probes for the status pages.
    pub history: Arc<History>,
    /// True once the configuration is loaded and the probes are scheduled.
    pub ready: AtomicBool,
    /// Probe schedules that ended unexpectedly (a panic); `/-/healthy` answers 503 while > 0.
    pub stopped_schedules: std::sync::atomic::AtomicUsize,
    /// Where `POST /-/reload` sends its request; `None` disables the endpoint.
    pub reload: Option<tokio::sync::mpsc::Sender<crate::reload::ReloadRequest>>,
    /// The configured targets' probers by name: the only things `/probe` may probe, and the
    /// targets the status pages show.
    pub probers: std::sync::RwLock<std::collections::HashMap<String, crate::probe::Prober>>,
    /// Debug probes allowed at once (more get 429).
    pub debug_slots: Arc<tokio::sync::Semaphore>,
    /// Whether and how often `/probe` may run a probe.
    pub debug_probe: DebugProbePolicy,
    debug_last: debug_probe::LastProbes,
    /// Turns of the status pages' renders ([`STATUS_RENDERS`]).
    status_renders: Arc<tokio::sync::Semaphore>,
    /// TLS, users and headers in force (re-read on reload).
    pub web: WebState,
    /// `/metrics` renders, shared by concurrent scrapes.
    pub scrapes: Arc<Scrapes>,
    /// Connection limits of the server.
    pub limits: ConnectionLimits,
    auth: auth::Authenticator,
    /// The runtime the scheduled probes run on, where on-demand probes are sent too.
    probe_runtime: std::sync::OnceLock<tokio::runtime::Handle>,
    /// What this replica probes (the status pages show it).
    pub shard: std::sync::RwLock<ShardView>,
    /// Where the endpoints are served and where links point.
    pub urls: WebUrls,
    /// Which exporter this is, as the status pages' header and title say.
    pub identity: ExporterIdentity,
}

/// The exporter's name and location on the status pages (`--web.instance-name`,
/// `--web.location`), so that pages of several exporters on one wall can be told apart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExporterIdentity {
    /// The instance name (default: the host name; empty: none shown).
    pub instance: String,
    /// The probe location, e.g. `eu-west`: the `location` target label Prometheus adds to this
    /// exporter's series (llm-probe cannot read that label, so it is told).
    pub location: Option<String>,
}

/// This replica's share of the configured pairs.
#[derive(Debug, Clone, Default)]
pub struct ShardView {
    /// This replica's shard (index 0 of 1 when unsharded).
    pub shard: crate::shard::Shard,
    /// The (target, scenario) pairs it probes, sorted.
    pub owned: Vec<(String, String)>,
    /// How many pairs the configuration has in all.
    pub all_pairs: usize,
}

/// Debug probes that may run at once.
pub const DEBUG_PROBE_SLOTS: usize = 2;

/// How the exporter's server is set up: what `run`'s `--web.*` and `--metrics.*` flags say.
#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    /// The web config file (TLS, basic auth, headers), re-read on reload.
    pub web_config_file: Option<PathBuf>,
    /// Whether and how often `/probe` may run a probe.
    pub debug_probe: DebugProbePolicy,
    /// Connection limits.
    pub limits: ConnectionLimits,
    /// The buckets of the latency and rate histograms (`--metrics.*`), fixed at start.
    pub histograms: crate::metrics::HistogramOptions,
    /// How much probe history the status pages keep per (target, scenario).
    pub history: crate::history::HistoryLimits,
    /// `--web.external-url` and `--web.route-prefix`.
    pub urls: WebUrls,
    /// `--web.instance-name` and `--web.location`.
    pub identity: ExporterIdentity,
}

/// Limits on the connections a server holds.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Connections open at once; more wait to be accepted.
    pub max_connections: usize,
    /// Time a client has to send a request's headers (and, on TLS, to finish the
    /// handshake), from the connection's start or the previous response on a kept-alive
    /// connection; `None`: no limit.
    pub header_read_timeout: Option<Duration>,
    /// How long a response may wait for the client to read it (no byte taken) before the
    /// connection is dropped; `None`: no limit.
    pub write_stall_timeout: Option<Duration>,
    /// On shutdown, how long requests in progress may take to finish before their
    /// connections are dropped.
    pub shutdown_grace: Duration,
}

/// Default of `--web.max-connections` (Prometheus' own default).
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

/// The highest `--web.max-connections` accepted (2^20): far beyond what one process's file
/// descriptors allow, and far below tokio's semaphore limit (2^61 − 1), above which the accept
/// loop panicked.
pub const MAX_CONNECTIONS: usize = 1 << 20;

impl Default for ConnectionLimits {
    /// The exporter's: 512 connections, 10 s to send the headers, 30 s to take some of a
    /// response, 5 s of grace.
    fn default() -> Self {
        ConnectionLimits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_read_timeout: Some(Duration::from_secs(10)),
            write_stall_timeout: Some(Duration::from_secs(30)),
            shutdown_grace: Duration::from_secs(5),
        }
    }
}

impl ExporterState {
    /// The state of a server set up by `options` with web config `web` (already loaded from
    /// `options.web_config_file`); not ready until [`ExporterState::ready`] is set.
    pub fn new(
        metrics: Arc<Metrics>,
        history: Arc<History>,
        reload: Option<tokio::sync::mpsc::Sender<crate::reload::ReloadRequest>>,
        options: &ServerOptions,
        web: WebConfig,
    ) -> Self {
        ExporterState {
            metrics,
            history,
            ready: false.into(),
            stopped_schedules: 0.into(),
            reload,
            probers: Default::default(),
            debug_slots: Arc::new(tokio::sync::Semaphore::new(DEBUG_PROBE_SLOTS)),
            debug_probe: options.debug_probe.clone(),
            debug_last: Default::default(),
            status_renders: Arc::new(tokio::sync::Semaphore::new(STATUS_RENDERS)),
            web: WebState::new(options.web_config_file.clone(), web),
            scrapes: Arc::new(Scrapes::new()),
            limits: options.limits,
            auth: Default::default(),
            probe_runtime: Default::default(),
            shard: Default::default(),
            urls: options.urls.clone(),
            identity: options.identity.clone(),
        }
    }
}

/// Serves HTTP/1.1 on `listener` until `shutdown` is cancelled, calling `handle` for every
/// request, with no header-read timeout (the simulator's use: test clients only).
/// Connection errors are logged at debug and never stop the loop.
pub async fn serve<F, Fut, B>(listener: TcpListener, shutdown: CancellationToken, handle: F)
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<B>> + Send + 'static,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let limits = ConnectionLimits {
        max_connections: 4096,
        header_read_timeout: None,
        write_stall_timeout: None,
        shutdown_grace: Duration::from_secs(1),
    };
    serve_with(listener, shutdown, limits, || None, handle).await
}

/// [`serve`] within `limits`, over TLS when `tls()` (asked once per connection, so a reload
/// applies to the next connection) gives a configuration. Returns once every connection task
/// has ended (at most `limits.shutdown_grace` after `shutdown`).
pub async fn serve_with<F, Fut, B, T>(
    listener: TcpListener,
    shutdown: CancellationToken,
    limits: ConnectionLimits,
    tls: T,
    handle: F,
) where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<B>> + Send + 'static,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    T: Fn() -> Option<Arc<rustls::ServerConfig>>,
{
    // Clamped: a library caller's cap above the semaphore's limit would panic here.
    let slots = Arc::new(tokio::sync::Semaphore::new(
        limits.max_connections.clamp(1, MAX_CONNECTIONS),
    ));
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let permit = tokio::select! {
            _ = shutdown.cancelled() => break,
            p = slots.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
        };
        let (stream, peer) = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors, most likely: wait instead of spinning.
                    tracing::debug!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let (handle, shutdown, tls) = (handle.clone(), shutdown.clone(), tls());
        connections.spawn(async move {
            let _permit = permit;
            connection(stream, peer, tls, limits, shutdown, handle).await;
        });
    }
    let drain = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(limits.shutdown_grace, drain)
        .await
        .is_err()
    {
        connections.abort_all();
        while connections.join_next().await.is_some() {}
    }
}

/// The client's address, in every request's extensions.
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub SocketAddr);

/// A connection's byte stream, plain or TLS.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}

/// One connection: the TLS handshake (within the header-read time) if `tls` is given, then
/// HTTP/1.1 until the client leaves, the header-read time runs out or `shutdown` (which lets
/// the request in progress finish).
async fn connection<F, Fut, B>(
    stream: TcpStream,
    peer: SocketAddr,
    tls: Option<Arc<rustls::ServerConfig>>,
    limits: ConnectionLimits,
    shutdown: CancellationToken,
    handle: F,
) where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<B>> + Send + 'static,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let stream: Box<dyn Io> = match limits.write_stall_timeout {
        Some(limit) => Box::new(stall::StallLimit::new(stream, limit)),
        None => Box::new(stream),
    };
    let io: Box<dyn Io> = match tls {
        None => stream,
        Some(tls) => {
            let handshake = tokio_rustls::TlsAcceptor::from(tls).accept(stream);
            let limit = limits.header_read_timeout.unwrap_or(Duration::MAX);
            tokio::select! {
                _ = shutdown.cancelled() => return,
                r = tokio::time::timeout(limit, handshake) => match r {
                    Ok(Ok(s)) => Box::new(s),
                    Ok(Err(e)) => {
                        tracing::debug!(%peer, error = %e, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "TLS handshake timed out");
                        return;
                    }
                },
            }
        }
    };
    let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
        req.extensions_mut().insert(Peer(peer));
        let fut = handle(req);
        async move { Ok::<_, Infallible>(fut.await) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    if let Some(t) = limits.header_read_timeout {
        builder.timer(TokioTimer::new()).header_read_timeout(t);
    }
    let conn = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    let result = tokio::select! {
        r = conn.as_mut() => r,
        _ = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}

/// A listening socket that could not be set up. `Display` is the whole message (the OS error
/// included), so the error has no further source.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// The address cannot be bound, e.g. the port is taken.
    #[error("cannot listen on {addr}: {error} (is another exporter running? pick another with --web.listen-address)")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// What the OS said.
        error: std::io::Error,
    },
    /// The bound socket cannot tell its address.
    #[error("cannot read the address of the listening socket: {0}")]
    LocalAddr(std::io::Error),
}

/// Binds `addr`.
///
/// Errors: [`ListenError::Bind`], naming the address, e.g. when the port is taken.
pub async fn bind(addr: SocketAddr) -> Result<TcpListener, ListenError> {
    TcpListener::bind(addr)
        .await
        .map_err(|error| ListenError::Bind { addr, error })
}

/// Serves the exporter's pages on `listener` until `shutdown`; returns once every connection
/// has ended.
///
/// The server runs on its own runtime (one worker, a few blocking threads for renders and
/// bcrypt checks), whose threads run at a lower CPU priority (10 nice levels below the process): a flood of scrapes,
/// TLS handshakes or login attempts then takes CPU from the probes only when they leave it
/// idle, and never queues a probe's read behind a response being written.
/// On-demand probes are sent back to the caller's runtime, where the scheduled ones run.
pub async fn serve_exporter(
    listener: TcpListener,
    state: Arc<ExporterState>,
    shutdown: CancellationToken,
) {
    let _ = state.probe_runtime.set(tokio::runtime::Handle::current());
    let web = listener.into_std().map(|l| {
        (
            l,
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                // auth::PARALLEL_CHECKS bcrypt checks + STATUS_RENDERS page renders + one
                // /metrics render + one to spare: a scrape never waits for a thread behind a
                // flood of logins or page views.
                .max_blocking_threads(auth::PARALLEL_CHECKS + STATUS_RENDERS + 2)
                .thread_name("llm-probe-web")
                .on_thread_start(lower_priority)
                .enable_all()
                .build(),
        )
    });
    let (listener, runtime) = match web {
        Ok((l, Ok(rt))) => (l, rt),
        Ok((l, Err(e))) => {
            tracing::warn!(error = %e, "cannot start the web server's own threads; serving on the probes' runtime");
            match TcpListener::from_std(l) {
                Ok(l) => return serve_on_this_runtime(l, state, shutdown).await,
                Err(e) => {
                    tracing::error!(error = %e, "the listening socket is lost; not serving");
                    return;
                }
            }
        }
        Err(e) => {
            tracing::error!(error = %e, "the listening socket is lost; not serving");
            return;
        }
    };
    let (mut done, finished) = tokio::sync::oneshot::channel::<()>();
    // Also stopped when this future is dropped (its runtime shut down without a `stop`), so
    // that the thread never outlives its daemon.
    let local = shutdown.child_token();
    let spawned = std::thread::Builder::new()
        .name("llm-probe-web".into())
        .spawn(move || {
            runtime.block_on(async {
                let listener = match TcpListener::from_std(listener) {
                    Ok(l) => l,
                    Err(e) => {
                        tracing::error!(error = %e, "cannot listen on the web server's threads");
                        return;
                    }
                };
                let serve = serve_on_this_runtime(listener, state, local.clone());
                tokio::pin!(serve);
                tokio::select! {
                    _ = &mut serve => {}
                    _ = done.closed() => {
                        local.cancel();
                        serve.await;
                    }
                }
            });
            // Renders or bcrypt checks still running are not waited for.
            runtime.shutdown_background();
            let _ = done.send(());
        });
    match spawned {
        Ok(_) => {
            let _ = finished.await;
        }
        Err(e) => tracing::error!(error = %e, "cannot start the web server's thread; not serving"),
    }
}

async fn serve_on_this_runtime(
    listener: TcpListener,
    state: Arc<ExporterState>,
    shutdown: CancellationToken,
) {
    let tls_state = state.clone();
    serve_with(
        listener,
        shutdown,
        state.limits,
        move || tls_state.web.current().tls.clone(),
        move |req| {
            let state = state.clone();
            async move { guarded(&state, &req).await }
        },
    )
    .await
}

/// Lowers the calling thread's CPU priority by 10 nice levels (at most to 19) from the
/// process's (Linux: the nice value is a per-thread attribute).
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: gettid, getpriority and setpriority take plain integers and touch no memory of
    // ours; raising one's own nice value is always permitted. A failure leaves the priority
    // as it was.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        let nice = libc::getpriority(libc::PRIO_PROCESS, tid);
        libc::setpriority(libc::PRIO_PROCESS, tid, (nice + 10).min(19));
    }
}

pub(crate) fn text(
    status: StatusCode,
    content_type: &str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header(CONTENT_TYPE, content_type)
        .body(Full::new(body.into()))
        .expect("static response parts are valid")
}

/// A 405 naming the allowed methods.
fn method_not_allowed(allow: &'static str, message: &str) -> Response<Full<Bytes>> {
    let mut r = text(
        StatusCode::METHOD_NOT_ALLOWED,
        "text/plain",
        message.to_string(),
    );
    r.headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    r
}

/// Every request: basic auth when users are configured, then the route, then the web
/// config's extra headers.
async fn guarded(state: &Arc<ExporterState>, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let web = state.web.current();
    let client = req.extensions().get::<Peer>().map(|p| p.0.ip());
    let mut response = match state.auth.check(&web, req.headers(), client).await {
        auth::Verdict::Allowed => route(state, req).await,
        auth::Verdict::Denied => {
            let mut r = text(
                StatusCode::UNAUTHORIZED,
                "text/plain",
                "authentication required\n",
            );
            r.headers_mut().insert(
                WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"llm-probe\", charset=\"UTF-8\""),
            );
            r
        }
        auth::Verdict::Busy => {
            let mut r = text(
                StatusCode::TOO_MANY_REQUESTS,
                "text/plain",
                "too many logins are being checked; try again in a second\n",
            );
            r.headers_mut()
                .insert(hyper::header::RETRY_AFTER, HeaderValue::from_static("1"));
            r
        }
    };
    // Every answer, including errors, 404s and /-/reload: a browser must not sniff a plain-text
    // echo of a hostile path into a page, nor load anything for it. The status pages set their
    // own, stricter policy; the web config's headers come last and win.
    let h = response.headers_mut();
    h.entry(X_CONTENT_TYPE_OPTIONS)
        .or_insert(HeaderValue::from_static("nosniff"));
    h.entry(CONTENT_SECURITY_POLICY)
        .or_insert(HeaderValue::from_static(BARE_CSP));
    for (name, value) in &web.headers {
        response.headers_mut().insert(name.clone(), value.clone());
    }
    response
}

/// The `Content-Security-Policy` of every answer that is not a status page: nothing may load,
/// nothing may frame it.
pub(crate) const BARE_CSP: &str = "default-src 'none'; frame-ancestors 'none'";

/// A 302 to `location`.
fn redirect(location: &str) -> Response<Full<Bytes>> {
    let mut r = text(StatusCode::FOUND, "text/plain", format!("see {location}\n"));
    if let Ok(v) = HeaderValue::from_str(location) {
        r.headers_mut().insert(hyper::header::LOCATION, v);
    }
    r
}

async fn route(state: &Arc<ExporterState>, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let Some(path) = state.urls.strip(req.uri().path()) else {
        return if state.urls.redirects_to_root(req.uri().path()) {
            redirect(&state.urls.link("/"))
        } else {
            text(
                StatusCode::NOT_FOUND,
                "text/plain",
                format!(
                    "not found: the exporter is served under {}/ (--web.route-prefix)\n",
                    state.urls.route_prefix()
                ),
            )
        };
    };
    match path {
        "/-/reload" => return reload(state, req).await,
        "/probe" if req.method() == Method::GET => return debug_probe::handle(state, req).await,
        // Not even HEAD: a probe sends a real request to the target.
        "/probe" => {
            return method_not_allowed("GET", "probe now runs on GET only (it sends a request)\n")
        }
        _ => {}
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return method_not_allowed("GET, HEAD", "only GET and HEAD are supported\n");
    }
    match path {
        "/metrics" => {
            // Repeated `Accept` headers are one list (RFC 9110 §5.3).
            let accept: Vec<&str> = req
                .headers()
                .get_all(ACCEPT)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .collect();
            let accept = (!accept.is_empty()).then(|| accept.join(", "));
            let format = negotiate(accept.as_deref());
            let coding = BodyCoding::negotiate(
                req.headers()
                    .get_all(ACCEPT_ENCODING)
                    .iter()
                    .map(HeaderValue::as_bytes),
            );
            // HEAD: the headers a GET would get, without rendering a body only to drop it
            // (about 15 ms of CPU and 18 MiB at 1,000 pairs). Its length is known only once
            // rendered, so none is sent (RFC 9110 §9.3.2 allows leaving it out).
            let body = if req.method() == Method::HEAD {
                Some(Bytes::new())
            } else {
                state.scrapes.body(&state.metrics, format, coding).await
            };
            match body {
                Some(body) => {
                    let mut r = text(StatusCode::OK, format.content_type(), body);
                    let h = r.headers_mut();
                    // The body depends on both request headers (caches must not mix them).
                    h.insert(VARY, HeaderValue::from_static("Accept, Accept-Encoding"));
                    if let Some(c) = coding.content_encoding() {
                        h.insert(CONTENT_ENCODING, HeaderValue::from_static(c));
                    }
                    r
                }
                None => text(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "text/plain",
                    "rendering the metrics failed\n",
                ),
            }
        }
        "/-/healthy" if state.stopped_schedules.load(Ordering::Acquire) == 0 => {
            text(StatusCode::OK, "text/plain", HEALTHY_BODY)
        }
        "/-/healthy" => text(
            StatusCode::SERVICE_UNAVAILABLE,
            "text/plain",
            "Unhealthy: a probe schedule stopped unexpectedly (see the log); restart llm-probe\n",
        ),
        "/-/ready" if state.ready.load(Ordering::Acquire) => {
            text(StatusCode::OK, "text/plain", "Ready\n")
        }
        "/-/ready" => text(StatusCode::SERVICE_UNAVAILABLE, "text/plain", "Not ready\n"),
        path => match rendered(
            state,
            path,
            req.uri().query().unwrap_or(""),
            req.headers().get(ACCEPT).and_then(|v| v.to_str().ok()),
        )
        .await
        {
            Some(r) => r,
            None => text(
                StatusCode::NOT_FOUND,
                "text/plain",
                format!(
                    "not found: try {} or {}\n",
                    state.urls.link("/"),
                    state.urls.link("/metrics")
                ),
            ),
        },
    }
}

/// Status pages and JSON API answers rendered at once, on blocking threads; more wait their
/// turn without holding the web server's worker.
pub const STATUS_RENDERS: usize = 2;

/// [`status::route`] on a blocking thread, at most [`STATUS_RENDERS`] at once: a render walks
/// the whole history, and a flood of them must not keep `/-/healthy`, `/-/ready` or
/// `/metrics` waiting behind it on the web server's single worker.
async fn rendered(
    state: &Arc<ExporterState>,
    path: &str,
    query: &str,
    accept: Option<&str>,
) -> Option<Response<Full<Bytes>>> {
    let Ok(turn) = state.status_renders.clone().acquire_owned().await else {
        return status::route(state, path, query, accept);
    };
    let (st, p, q) = (state.clone(), path.to_string(), query.to_string());
    let a = accept.map(str::to_string);
    // The turn goes with the render: a client that leaves does not free it while the render
    // still runs (clients that connect and leave would otherwise pile renders up).
    let render = move || {
        let _turn = turn;
        status::route(&st, &p, &q, a.as_deref())
    };
    match tokio::task::spawn_blocking(render).await {
        Ok(r) => r,
        Err(_) => Some(text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain",
            "rendering the page failed\n",
        )),
    }
}

/// `POST /-/reload` (as Prometheus and blackbox_exporter): 200 with a summary, or 500 with a
/// generic message when the new files were rejected (the old configuration keeps running).
/// The reason goes to the log only: a config error can quote what a file holds, and this
/// answer goes to any client that can reach the port.
async fn reload(state: &ExporterState, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    if req.method() != Method::POST {
        return method_not_allowed("POST", "use POST to reload\n");
    }
    let Some(tx) = &state.reload else {
        return text(
            StatusCode::NOT_FOUND,
            "text/plain",
            "reloading is not enabled\n",
        );
    };
    match crate::reload::request(tx).await {
        Ok(summary) => text(StatusCode::OK, "text/plain", format!("{summary}\n")),
        Err(_) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain",
            "failed to reload the configuration; the previous configuration keeps running; the reason is in the exporter's log\n",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// a connection cap above tokio's semaphore limit (a library caller's,
    /// the flag is bounded) must not panic the accept loop: the server still answers.
    #[tokio::test]
    async fn a_huge_connection_cap_still_serves() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = CancellationToken::new();
        let limits = ConnectionLimits {
            max_connections: usize::MAX,
            ..ConnectionLimits::default()
        };
        let server = tokio::spawn(serve_with(
            listener,
            stop.clone(),
            limits,
            || None,
            |_| async { text(StatusCode::OK, "text/plain", "hi") },
        ));
        let answer = tokio::time::timeout(Duration::from_secs(20), async {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut s = TcpStream::connect(addr).await.unwrap();
            s.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
                .await
                .unwrap();
            let mut out = String::new();
            let _ = s.read_to_string(&mut out).await;
            out
        })
        .await
        .expect("answered");
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
        stop.cancel();
        server.await.expect("the accept loop did not panic");
    }
}
