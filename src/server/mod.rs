//! The exporter's HTTP server (hyper): `/metrics`, `/-/healthy`, `/-/ready` and a landing page.
//! Also the accept loop the simulator shares.

mod debug_probe;
mod landing;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body, Incoming};
use hyper::header::{ACCEPT, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::history::History;
use crate::metrics::Metrics;

/// What the exporter's pages show.
pub struct ExporterState {
    /// The metrics to render.
    pub metrics: Arc<Metrics>,
    /// Recent probes for the landing page.
    pub history: Arc<History>,
    /// True once the configuration is loaded and the probes are scheduled.
    pub ready: AtomicBool,
    /// Probe schedules that ended unexpectedly (a panic); `/-/healthy` answers 503 while > 0.
    pub stopped_schedules: std::sync::atomic::AtomicUsize,
    /// Where `POST /-/reload` sends its request; `None` disables the endpoint.
    pub reload: Option<tokio::sync::mpsc::Sender<crate::daemon::ReloadRequest>>,
    /// The configured targets' probers by name: the only things `/probe` may probe, and the
    /// target list of the landing page.
    pub probers: std::sync::RwLock<std::collections::HashMap<String, crate::probe::Prober>>,
    /// Debug probes allowed at once (more get 429).
    pub debug_slots: tokio::sync::Semaphore,
    /// What this replica probes (the landing page shows it).
    pub shard: std::sync::RwLock<ShardView>,
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

/// Serves HTTP/1.1 on `listener` until `shutdown` is cancelled, calling `handle` for every
/// request. Connection errors are logged at debug and never stop the loop.
pub async fn serve<F, Fut, B>(listener: TcpListener, shutdown: CancellationToken, handle: F)
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<B>> + Send + 'static,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    loop {
        let (stream, peer) = tokio::select! {
            _ = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::debug!(error = %e, "accept failed");
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let handle = handle.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let fut = handle(req);
                async move { Ok::<_, Infallible>(fut.await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => if let Err(e) = r { tracing::debug!(%peer, error = %e, "connection ended with an error") },
                _ = shutdown.cancelled() => conn.as_mut().graceful_shutdown(),
            }
        });
    }
}

/// Binds `addr`. Errors name the address, e.g. when the port is taken.
pub async fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr).await.map_err(|e| {
        anyhow::anyhow!("cannot listen on {addr}: {e} (is another exporter running? pick another with --web.listen-address)")
    })
}

/// Serves the exporter's pages on `listener` until `shutdown`.
pub async fn serve_exporter(
    listener: TcpListener,
    state: Arc<ExporterState>,
    shutdown: CancellationToken,
) {
    serve(listener, shutdown, move |req| {
        let state = state.clone();
        async move { route(&state, &req).await }
    })
    .await
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

async fn route(state: &ExporterState, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    match req.uri().path() {
        "/-/reload" => return reload(state, req).await,
        "/probe" if req.method() == Method::GET => return debug_probe::handle(state, req).await,
        _ => {}
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "only GET is supported\n",
        );
    }
    match req.uri().path() {
        "/metrics" => {
            let accept = req
                .headers()
                .get(ACCEPT)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            // Rendering thousands of series takes tens of milliseconds (BENCHMARKS.md, table 4):
            // on a blocking thread, so it never delays a probe's read on the runtime's workers.
            let metrics = state.metrics.clone();
            match tokio::task::spawn_blocking(move || metrics.render(accept.as_deref())).await {
                Ok((content_type, body)) => text(StatusCode::OK, content_type, body),
                Err(_) => text(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "text/plain",
                    "rendering the metrics failed\n",
                ),
            }
        }
        "/-/healthy" if state.stopped_schedules.load(Ordering::Acquire) == 0 => {
            text(StatusCode::OK, "text/plain", "Healthy\n")
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
        "/" => text(
            StatusCode::OK,
            "text/html; charset=utf-8",
            landing::page(state),
        ),
        _ => text(
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found: try /metrics\n",
        ),
    }
}

/// `POST /-/reload` (as Prometheus and blackbox_exporter): 200 with a summary, or 500 with the
/// reason the new file was rejected (the old configuration keeps running).
async fn reload(state: &ExporterState, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    if req.method() != Method::POST && req.method() != Method::PUT {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "use POST to reload\n",
        );
    }
    let Some(tx) = &state.reload else {
        return text(
            StatusCode::NOT_FOUND,
            "text/plain",
            "reloading is not enabled\n",
        );
    };
    match crate::daemon::request_reload(tx).await {
        Ok(summary) => text(StatusCode::OK, "text/plain", format!("{summary}\n")),
        Err(e) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain",
            format!("failed to reload config: {e}\n"),
        ),
    }
}
