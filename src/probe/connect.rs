//! Connection setup time: how long the HTTP client took to open the connection a probe's request
//! went out on (DNS resolution, TCP connect, proxy `CONNECT`, TLS handshake), measured around
//! reqwest's connector and given to the probe that caused it.
//!
//! Clients are shared between targets, so the connector cannot know which probe it connects
//! for. The probe runs its exchange inside [`attribute`], which puts a slot in a task-local; the
//! connector's future writes its marks into the slot of the task that polls it to completion.
//! hyper polls a connect in the requesting task, so a probe gets exactly the connection its
//! request used. The one exception is under `connection: reuse`: when an idle connection
//! frees up while a new one is still being opened, the request takes the idle one and hyper
//! finishes the new one in a background task, where there is no slot, so it is not counted.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use tower_layer::Layer;
use tower_service::Service;

tokio::task_local! {
    static SLOT: Arc<Slot>;
}

/// Where a connect records its marks (start, ready).
#[derive(Debug, Default)]
struct Slot(Mutex<Option<(Instant, Instant)>>);

/// Runs `exchange` so that a connection it opens is recorded; returns its output and, if it
/// opened one, the instants the connect started and the connection was ready (monotonic clock).
pub async fn attribute<F: Future>(exchange: F) -> (F::Output, Option<(Instant, Instant)>) {
    let slot = Arc::new(Slot::default());
    let out = SLOT.scope(slot.clone(), exchange).await;
    let marks = *slot.0.lock().unwrap_or_else(|e| e.into_inner());
    (out, marks)
}

/// The layer for `reqwest::ClientBuilder::connector_layer`: wraps the connector (inside reqwest's
/// connect timeout) and times every connect it makes.
#[derive(Debug, Clone, Copy, Default)]
pub struct TimeConnects;

impl<S> Layer<S> for TimeConnects {
    type Service = TimedConnector<S>;

    fn layer(&self, inner: S) -> Self::Service {
        TimedConnector { inner }
    }
}

/// A connector that records when each of its connects started and finished ([`TimeConnects`]).
#[derive(Debug, Clone)]
pub struct TimedConnector<S> {
    inner: S,
}

impl<S, Req> Service<Req> for TimedConnector<S>
where
    S: Service<Req>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let started = Instant::now();
        let connect = self.inner.call(req);
        Box::pin(async move {
            let result = connect.await;
            if result.is_ok() {
                let ready = Instant::now();
                // No slot: a connect finished outside a probe (see the module docs).
                let _ = SLOT.try_with(|slot| {
                    *slot.0.lock().unwrap_or_else(|e| e.into_inner()) = Some((started, ready));
                });
            }
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::time::Duration;

    use super::*;

    /// A connector that takes `delay` to "connect".
    #[derive(Clone)]
    struct Slow(Duration);

    impl Service<()> for Slow {
        type Response = ();
        type Error = Infallible;
        type Future = Pin<Box<dyn Future<Output = Result<(), Infallible>> + Send>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, _: ()) -> Self::Future {
            let d = self.0;
            Box::pin(async move {
                tokio::time::sleep(d).await;
                Ok(())
            })
        }
    }

    #[tokio::test]
    async fn a_connect_inside_the_probe_is_recorded_with_its_duration() {
        let mut connector = TimeConnects.layer(Slow(Duration::from_millis(30)));
        let before = Instant::now();
        let (_, marks) = attribute(connector.call(())).await;
        let (started, ready) = marks.expect("recorded");
        assert!(started >= before);
        let took = ready - started;
        assert!(took >= Duration::from_millis(30), "{took:?}");
        assert!(took < Duration::from_millis(500), "{took:?}");
    }

    #[tokio::test]
    async fn no_connect_no_marks_and_a_connect_elsewhere_is_not_counted() {
        let (_, marks) = attribute(async {}).await;
        assert_eq!(marks, None);

        // A connect finished in another task (hyper's background connect under `reuse`).
        let mut connector = TimeConnects.layer(Slow(Duration::from_millis(1)));
        let (_, marks) = attribute(async move {
            tokio::spawn(connector.call(())).await.unwrap().unwrap();
        })
        .await;
        assert_eq!(marks, None);
    }
}
