//! Connection setup time: how long the HTTP client took to open the connection a probe's request
//! went out on (DNS resolution, TCP connect, proxy `CONNECT`, TLS handshake), measured around
//! reqwest's connector (and the stamped client's, `super::transport`) and given to the probe
//! that caused it.
//!
//! Clients are shared between targets, so the connector cannot know which probe it connects
//! for. The probe runs its exchange inside [`attribute`], which puts a slot in a task-local; the
//! connector's future writes its marks, and the new connection's local address, into the slot
//! of the task that polls it to completion. hyper polls a connect in the requesting task, so
//! that is the probe that asked for it. The probe then notes which connection its response came
//! on ([`response_arrived`]); a connection it opened but did not use is not counted. That
//! happens under `connection: reuse` over HTTP/2, when hyper drops a probe's new connection
//! because another probe's HTTP/2 connection to the same host is being set up, and sends the
//! request on that one. Also under `reuse`: when an idle connection frees up while a new one is
//! still being opened, the request takes the idle one and hyper finishes the new one in a
//! background task, where there is no slot, so it is not counted either.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use hyper_util::client::legacy::connect::{Connection, HttpInfo};
use tower_layer::Layer;
use tower_service::Service;

use super::coalesce::Urgent;
use super::transport::ConnArrivals;

tokio::task_local! {
    static SLOT: Arc<Slot>;
}

/// How the connection a probe's request went out on was opened (monotonic clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setup {
    /// The connect started.
    pub started: Instant,
    /// The host name resolved (the last resolution of this connect); `None` for an IP literal,
    /// or a connector that does not use the probe's resolver.
    pub resolved: Option<Instant>,
    /// The TCP connection (to the target or its proxy) was established; `None` on a client
    /// whose connector gives no access to it (reqwest's).
    pub tcp: Option<Instant>,
    /// The connection was ready to carry the request (after the TLS handshake for `https`).
    pub ready: Instant,
}

/// A connection the probe's task opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Opened {
    setup: Setup,
    /// Its local address (`None` for a transport without one, e.g. some TLS-in-TLS tunnels).
    local: Option<SocketAddr>,
}

#[derive(Debug, Default)]
struct Marks {
    opened: Option<Opened>,
    /// Phases of the connect under way, taken into `opened` when it finishes.
    resolved: Option<Instant>,
    tcp: Option<Instant>,
    /// The local address of the connection the response came on: `None` before a response,
    /// `Some(None)` for a response from a transport without an address.
    response_on: Option<Option<SocketAddr>>,
    /// The probe's urgent guard until its request is written ([`hold_until_written`]).
    urgent: Option<Urgent>,
}

/// Where a connect records its marks; one per probe.
#[derive(Debug, Default)]
struct Slot(Mutex<Marks>);

impl Slot {
    fn with<R>(&self, f: impl FnOnce(&mut Marks) -> R) -> R {
        f(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Runs `exchange` so that a connection it opens is recorded; returns its output and, if it
/// opened the connection its request went out on, how that connect went ([`Setup`]). Without
/// a response (a failure before the headers) a connection the probe opened is taken to be the
/// one its request used.
///
/// Not an `async fn`: one would keep `exchange` twice in its state, as its argument and inside
/// the scope it awaits.
pub fn attribute<F: Future>(exchange: F) -> impl Future<Output = (F::Output, Option<Setup>)> {
    use futures::FutureExt;
    let slot = Arc::new(Slot::default());
    SLOT.scope(slot.clone(), exchange).map(move |out| {
        let marks = slot.with(|m| used(m.opened, m.response_on));
        (out, marks)
    })
}

/// Notes the connection a response came on, from its `extensions`; call it inside
/// [`attribute`] when the headers arrive. Does nothing outside.
pub fn response_arrived(extensions: &http::Extensions) {
    let local = extensions.get::<HttpInfo>().map(HttpInfo::local_addr);
    let _ = SLOT.try_with(|slot| slot.with(|m| m.response_on = Some(local)));
}

/// Holds the probe's `urgent` guard (`super::coalesce`) until its request is written: a
/// connection this probe opens over HTTP/1.x with kernel stamps ([`ConnArrivals`]) takes it
/// when its setup is done, and drops it once the request is written and flushed
/// (`super::arrival::Arrivals::release_when_written`); otherwise it stays here until
/// [`release_urgent`] (at the response headers) or the end of [`attribute`]. So no idle worker
/// waits while the connect, the TLS handshake and the request write, which carry no stamps,
/// are under way, and the wait for the response, whose reads do, is free to be coalesced.
/// Outside [`attribute`] the guard is dropped at once.
pub fn hold_until_written(urgent: Urgent) {
    let _ = SLOT.try_with(|slot| slot.with(|m| m.urgent = Some(urgent)));
}

/// Drops the guard of [`hold_until_written`] if no connection took it.
pub fn release_urgent() {
    let _ = SLOT.try_with(|slot| drop(slot.with(|m| m.urgent.take())));
}

/// Notes that a host name resolved now, for the connect under way in this probe's task (the
/// probe's resolver calls it, `super::resolve`). Does nothing outside [`attribute`].
pub fn resolved() {
    let now = Instant::now();
    let _ = SLOT.try_with(|slot| slot.with(|m| m.resolved = Some(now)));
}

/// Notes that a TCP connection was established now, for the connect under way in this probe's
/// task (the stamped client's connector calls it, `super::transport`). Does nothing outside
/// [`attribute`].
pub fn tcp_connected() {
    let now = Instant::now();
    let _ = SLOT.try_with(|slot| slot.with(|m| m.tcp = Some(now)));
}

/// The setup of `opened` if the request went out on it: no response seen, or the response
/// came on the connection with `opened`'s local address.
fn used(opened: Option<Opened>, response_on: Option<Option<SocketAddr>>) -> Option<Setup> {
    let o = opened?;
    response_on
        .is_none_or(|local| local == o.local)
        .then_some(o.setup)
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

/// A connector that records when each of its connects started and finished, and the new
/// connection's local address ([`TimeConnects`]).
#[derive(Debug, Clone)]
pub struct TimedConnector<S> {
    inner: S,
}

impl<S, Req> Service<Req> for TimedConnector<S>
where
    S: Service<Req>,
    S::Response: Connection,
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
            if let Ok(conn) = &result {
                let ready = Instant::now();
                let mut extras = http::Extensions::new();
                let connected = conn.connected();
                connected.get_extras(&mut extras);
                let local = extras.get::<HttpInfo>().map(HttpInfo::local_addr);
                // HTTP/1.x only (over HTTP/2 the first bytes written are the connection's
                // preface, not the request), and with kernel stamps (else the late reads of
                // the answer would move its marks).
                let stamped = (!connected.is_negotiated_h2())
                    .then(|| extras.get::<ConnArrivals>())
                    .flatten()
                    .filter(|a| a.0.is_stamped());
                // No slot: a connect finished outside a probe (see the module docs).
                let _ = SLOT.try_with(|slot| {
                    slot.with(|m| {
                        // A phase noted before this connect started belongs to another one.
                        let after = |t: Option<Instant>| t.filter(|t| *t >= started);
                        let setup = Setup {
                            started,
                            resolved: after(m.resolved.take()),
                            tcp: after(m.tcp.take()),
                            ready,
                        };
                        m.opened = Some(Opened { setup, local });
                        if let (Some(a), Some(urgent)) = (stamped, m.urgent.take()) {
                            a.0.release_when_written(urgent);
                        }
                    })
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

    use hyper_util::client::legacy::connect::Connected;

    use super::*;

    /// A connection without an address (as a connector for tests can make).
    struct Conn;

    impl Connection for Conn {
        fn connected(&self) -> Connected {
            Connected::new()
        }
    }

    /// A connector that takes `delay` to "connect".
    #[derive(Clone)]
    struct Slow(Duration);

    impl Service<()> for Slow {
        type Response = Conn;
        type Error = Infallible;
        type Future = Pin<Box<dyn Future<Output = Result<Conn, Infallible>> + Send>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, _: ()) -> Self::Future {
            let d = self.0;
            Box::pin(async move {
                tokio::time::sleep(d).await;
                Ok(Conn)
            })
        }
    }

    #[tokio::test]
    async fn a_connect_inside_the_probe_is_recorded_with_its_duration() {
        let mut connector = TimeConnects.layer(Slow(Duration::from_millis(30)));
        let before = Instant::now();
        let (_, marks) = attribute(connector.call(())).await;
        let setup = marks.expect("recorded");
        assert!(setup.started >= before);
        assert_eq!((setup.resolved, setup.tcp), (None, None), "not noted");
        let took = setup.ready - setup.started;
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

    #[test]
    fn a_connection_counts_only_if_the_response_came_on_it() {
        let t0 = Instant::now();
        let addr = |port| Some(SocketAddr::from(([127, 0, 0, 1], port)));
        let setup = Setup {
            started: t0,
            resolved: None,
            tcp: None,
            ready: t0 + Duration::from_millis(3),
        };
        let opened = Some(Opened {
            setup,
            local: addr(40001),
        });
        let marks = Some(setup);
        assert_eq!(used(opened, Some(addr(40001))), marks, "its own connection");
        assert_eq!(used(opened, None), marks, "failed before a response");
        assert_eq!(
            used(opened, Some(addr(40002))),
            None,
            "another probe's connection"
        );
        assert_eq!(used(opened, Some(None)), None, "a response from elsewhere");
        assert_eq!(used(None, Some(addr(40001))), None, "opened nothing");
    }
}
