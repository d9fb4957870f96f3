//! The exporter's HTTP server (hyper): `/metrics`, `/-/healthy`, `/-/ready` and a landing page.
//! Also the accept loop the simulator shares.

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
    /// One line per configured target (never a key), for the landing page.
    pub targets: std::sync::RwLock<Vec<String>>,
    /// Where `POST /-/reload` sends its request; `None` disables the endpoint.
    pub reload: Option<tokio::sync::mpsc::Sender<crate::daemon::ReloadRequest>>,
}

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

fn text(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header(CONTENT_TYPE, content_type)
        .body(Full::new(body.into()))
        .expect("static response parts are valid")
}

async fn route(state: &ExporterState, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    if req.uri().path() == "/-/reload" {
        return reload(state, req).await;
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
            let accept = req.headers().get(ACCEPT).and_then(|v| v.to_str().ok());
            let (content_type, body) = state.metrics.render(accept);
            text(StatusCode::OK, content_type, body)
        }
        "/-/healthy" => text(StatusCode::OK, "text/plain", "Healthy\n"),
        "/-/ready" if state.ready.load(Ordering::Acquire) => {
            text(StatusCode::OK, "text/plain", "Ready\n")
        }
        "/-/ready" => text(StatusCode::SERVICE_UNAVAILABLE, "text/plain", "Not ready\n"),
        "/" => text(
            StatusCode::OK,
            "text/html; charset=utf-8",
            landing_page(state),
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

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn landing_page(state: &ExporterState) -> String {
    let targets = state.targets.read().unwrap_or_else(|e| e.into_inner());
    let target_rows: String = targets
        .iter()
        .map(|t| format!("<li><code>{}</code></li>", escape(t)))
        .collect();
    let probe_rows: String = state
        .history
        .snapshot()
        .iter()
        .rev()
        .take(50)
        .map(|p| {
            let when = humantime::format_rfc3339_seconds(p.started_at);
            let result = match &p.failure {
                Some((reason, detail)) => format!("<b>failed: {}</b> {}", reason, escape(detail)),
                None => format!(
                    "ok: TTFT {:.1} ms, {} tokens, {} tokens/s, E2E {:.1} ms",
                    p.ttft.unwrap_or_default().as_secs_f64() * 1e3,
                    p.output_tokens.unwrap_or(0),
                    p.output_tokens_per_second
                        .map_or("-".to_string(), |r| format!("{r:.1}")),
                    p.e2e.unwrap_or_default().as_secs_f64() * 1e3,
                ),
            };
            format!(
                "<tr><td>{when}</td><td>{}</td><td>{}</td><td>{result}</td></tr>",
                escape(&p.target),
                escape(&p.scenario)
            )
        })
        .collect();
    format!(
        "<!doctype html><html><head><title>llm-probe</title></head><body>\
         <h1>llm-probe {version}</h1>\
         <p><a href=\"/metrics\">Metrics</a> · <a href=\"/-/healthy\">Health</a> · <a href=\"/-/ready\">Readiness</a></p>\
         <h2>Targets</h2><ul>{target_rows}</ul>\
         <h2>Recent probes</h2><table><tr><th>started</th><th>target</th><th>scenario</th><th>result</th></tr>{probe_rows}</table>\
         </body></html>\n",
        version = env!("CARGO_PKG_VERSION"),
    )
}
