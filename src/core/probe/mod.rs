//! The only module that does network IO for probes: sends one streaming request, stamps each
//! read as it returns, feeds the bytes to the decoder and the events to the protocol adapter,
//! and concludes a [`ProbeOutcome`]. No retries, one deadline per probe.

pub mod arrival;
mod body;
mod client;
pub mod coalesce;
mod connect;
pub mod engine_scrape;
mod errors;
mod resolve;
mod route;

pub(crate) use route::proxy_secrets;
mod stream;
mod tls;
pub mod trace;
mod transport;
mod turns;

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use reqwest::header::{
    HeaderMap, HeaderName, HeaderValue, CONTENT_ENCODING, CONTENT_TYPE, HOST, LOCATION,
    RETRY_AFTER, SERVER,
};
use tokio::time::Instant;

use crate::config::replicas::Replica;
use crate::config::{PrefixCache, Scenario, Target};
use crate::decode::content::{Coding, ContentDecoder};
use crate::decode::DEFAULT_MAX_EVENT_BYTES;
use crate::engine::EngineScrape;
use crate::measure::{
    Anomaly, Failure, FailureReason, Observations, ProbeOutcome, TimestampSource,
};
use crate::protocol;

pub use body::excerpt;
pub use client::{build_client, build_replica_client, client_key, ClientKey, USER_AGENT};
pub use resolve::ResolveError;
pub use stream::StreamReader;

/// Caps that keep one probe's memory bounded whatever the server sends.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Body bytes per probe (default 16 MiB) → `too_large`.
    pub max_stream_bytes: u64,
    /// Bytes per SSE line or event (default 1 MiB) → `too_large`.
    pub max_event_bytes: usize,
    /// Token-bearing events per probe (default 100,000) → `too_large`.
    pub max_token_events: usize,
    /// How long to keep reading after the terminator, to see trailing bytes and let the
    /// connection be reused (default 100 ms). Not part of any measurement.
    pub drain_after_end: Duration,
    /// Leading body bytes to keep in [`Observations::raw_excerpt`] (default 0; the debug
    /// probe keeps 8 KiB).
    pub capture_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_stream_bytes: 16 << 20,
            max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
            max_token_events: 100_000,
            drain_after_end: Duration::from_millis(100),
            capture_bytes: 0,
        }
    }
}

/// Longest wait for the `version_path` answer after a probe.
pub const VERSION_TIMEOUT: Duration = Duration::from_secs(2);

/// Longest `traceparent` or `x-request-id` value recorded on a probe (1 KiB; a target's own
/// longer value is sent but not recorded).
const MAX_RECORDED_HEADER: usize = 1024;

/// Probes one target: owns its HTTP clients (connections are reused between probes). An
/// `http://` or `https://` target (direct, or through an HTTP proxy from the environment)
/// streams over the probe's own kernel-stamped client (`src/core/probe/transport.rs`); every other
/// request goes over the reqwest client.
///
/// Credentials are live: before each probe, the files the target's API key and TLS material
/// come from are checked (a `stat` each, off the runtime) and re-read when one changed
/// ([`crate::config::credentials`]), so the next probe uses a rotated key. A target whose
/// credentials cannot be read fails every probe with the reason `credentials`, naming the
/// variable or file. Clones share the clients and the credential state.
#[derive(Debug, Clone)]
pub struct Prober {
    /// The target as configured (shared by the probers of its replicas).
    target: Arc<Target>,
    /// The one replica this prober probes, for a target with `replicas:`.
    replica: Option<Replica>,
    /// What probes use now.
    live: Arc<tokio::sync::Mutex<Live>>,
    limits: Limits,
}

/// A prober's credential state: what probes use now and the stamps of the files it was read
/// from.
#[derive(Debug)]
struct Live {
    armed: Arc<Armed>,
    /// `None` until the first check.
    stamps: Option<Vec<Option<crate::config::credentials::FileStamp>>>,
}

/// The target with its current credentials, the clients built for them and the redaction of
/// those secrets; or why the credentials cannot be read.
#[derive(Debug)]
struct Armed {
    client: HttpClient,
    /// The replica probed, if any (the clients connect to its address).
    replica: Option<Replica>,
    /// The stamped client for the streaming request, when the target allows it
    /// ([`transport`]); `None`: the streaming request goes over `client` too.
    stamped: Option<transport::StampedClient>,
    target: Arc<Target>,
    /// The target's API key, secret header values, AWS credentials and its proxy's credentials
    /// from the environment ([`route::proxy_secrets`]), in every form they may be echoed: built
    /// once.
    redactor: crate::sanitize::Redactor,
    /// Why the credentials cannot be read (names the variable or file, never a value).
    error: Option<String>,
}

/// A prober's reqwest client, for every request the stamped client does not carry (the
/// `version_path` and engine-metrics requests, and the stream where the stamped client cannot
/// go: [`transport`]).
#[derive(Debug, Clone)]
enum HttpClient {
    /// Given when the prober was made (shared by targets with equal [`client_key`]s).
    Given(reqwest::Client),
    /// A replica's, built on its first use: each replica needs a client of its own (it
    /// connects to the replica's address), and most never use one, since their streams go over
    /// the stamped client. About 2 KiB a replica otherwise. The daemon checks that the
    /// target's TLS material can be used before it makes the replicas' probers.
    OnFirstUse(Arc<OnceLock<Result<reqwest::Client, String>>>),
}

impl Armed {
    fn new(
        target: Arc<Target>,
        replica: Option<Replica>,
        client: HttpClient,
        error: Option<String>,
    ) -> Self {
        let proxy = route::proxy_secrets(&target.base_url);
        let key = target.api_key.as_ref().map(|k| k.expose());
        let headers = (target.headers.iter())
            .filter_map(|(k, v)| target.is_secret_header(k).then_some(v.as_str()));
        // A bedrock target's AWS access key id, secret and session token.
        let aws = (target.aws.iter())
            .filter_map(|a| a.credentials.as_ref())
            .flat_map(|c| c.secrets());
        let redactor = crate::sanitize::Redactor::new(
            key.into_iter()
                .chain(headers)
                .chain(proxy.iter().map(String::as_str))
                .chain(aws),
        );
        Armed {
            client,
            stamped: transport::stamped_client(&target, replica.as_ref()),
            replica,
            redactor,
            target,
            error,
        }
    }
}

impl Prober {
    /// A prober for `target` with default [`Limits`].
    ///
    /// Errors: the HTTP client cannot be built (TLS backend initialisation).
    pub fn new(target: Arc<Target>) -> Result<Self, reqwest::Error> {
        let client = build_client(&target)?;
        Ok(Self::with_client(target, client))
    }

    /// A prober for `target` with default [`Limits`] that uses `client`, built by
    /// [`build_client`] for a target with the same [`client_key`] (targets can share one), for
    /// every request the stamped client does not carry (`src/core/probe/transport.rs`: targets
    /// behind an `https://` or SOCKS proxy, the `version_path` request). Building the first prober of a process
    /// turns the kernel's receive timestamping on (see [`arrival::prepare`]).
    pub fn with_client(target: Arc<Target>, client: reqwest::Client) -> Self {
        Self::build(target, None, HttpClient::Given(client))
    }

    /// A prober of one `replica` of `target` (a target with `replicas:`), as
    /// [`Prober::with_client`]; its own client ([`build_replica_client`]) is built when a
    /// request first needs it. Its requests connect to the replica's address; its outcomes
    /// carry the replica's label. Check first that the target's client can be built
    /// ([`build_client`]): a replica's fails only where the target's does.
    pub fn for_replica(target: Arc<Target>, replica: Replica) -> Self {
        let client = HttpClient::OnFirstUse(Arc::default());
        Self::build(target, Some(replica), client)
    }

    fn build(target: Arc<Target>, replica: Option<Replica>, client: HttpClient) -> Self {
        client::warn_if_insecure(&target);
        let error = target.credentials_error.clone();
        let armed = Armed::new(target.clone(), replica.clone(), client, error);
        Prober {
            target,
            replica,
            live: Arc::new(tokio::sync::Mutex::new(Live {
                armed: Arc::new(armed),
                stamps: None,
            })),
            limits: Limits::default(),
        }
    }

    /// The same prober (its clients, connections and credential state) for `target`, a newer
    /// copy of its target with the same settings ([`Target::same_settings`]) whose scenarios
    /// or baselines may differ: a reload keeps the prober and takes the new scenario list.
    pub fn retargeted(&self, target: Arc<Target>) -> Self {
        debug_assert!(self.target.same_settings(&target));
        Prober {
            target,
            ..self.clone()
        }
    }

    /// The same prober with other limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The target this prober probes, as configured.
    pub fn target(&self) -> &Arc<Target> {
        &self.target
    }

    /// The replica this prober probes, for a target with `replicas:`.
    pub fn replica(&self) -> Option<&Replica> {
        self.replica.as_ref()
    }

    /// Runs one probe of `scenario` and concludes it. Never panics on server input and never
    /// retries; the whole exchange is bounded by the target's `timeout`. A target whose
    /// credentials cannot be read fails with the reason `credentials` without a request.
    ///
    /// The engine's metrics (`server_metrics_url`), if any, are read first, just before the
    /// request (outside every measurement; bounded, and never a reason for the probe to
    /// fail): for a probe made on demand. The schedule reads them ahead of the probe's start
    /// instead ([`Prober::read_engine`], [`Prober::probe_with_load`]).
    pub async fn probe(&self, scenario: &Scenario) -> ProbeOutcome {
        let (armed, reloaded) = self.armed().await;
        let budget = engine_scrape::budget(self.target.timeout);
        let server_load = self.read_engine_with(&armed, budget).await;
        self.probe_armed(scenario, armed, reloaded, server_load)
            .await
    }

    /// The time the schedule gives [`Prober::read_engine`] before a probe's start: the
    /// engine read's budget (the smaller of 2 s and the target's `timeout`) for a target with
    /// `server_metrics_url`, zero without one.
    pub fn engine_read_lead(&self) -> Duration {
        match &self.target.server_metrics {
            Some(_) => engine_scrape::budget(self.target.timeout),
            None => Duration::ZERO,
        }
    }

    /// Reads the engine's metrics (`server_metrics_url`; `None` without one), ending by
    /// `until` at the latest (within the read's own budget too): a read still unanswered then
    /// fails as `timeout`. For the schedule, which reads ahead of a probe's start so that a
    /// slow engine never delays the probe. Uses the credentials as last read (the probe
    /// itself checks their files).
    pub async fn read_engine(&self, until: Instant) -> Option<EngineScrape> {
        self.target.server_metrics.as_ref()?;
        let armed = self.live.lock().await.armed.clone();
        let left = until.saturating_duration_since(Instant::now());
        let budget = engine_scrape::budget(self.target.timeout).min(left);
        self.read_engine_with(&armed, budget).await
    }

    /// [`Prober::probe`] with the engine's metrics already read (`server_load`, from
    /// [`Prober::read_engine`]; `None`: not configured, or the read did not end).
    pub async fn probe_with_load(
        &self,
        scenario: &Scenario,
        server_load: Option<EngineScrape>,
    ) -> ProbeOutcome {
        let (armed, reloaded) = self.armed().await;
        self.probe_armed(scenario, armed, reloaded, server_load)
            .await
    }

    /// The engine's metrics read with `armed` within `budget`; `None` without
    /// `server_metrics_url`.
    async fn read_engine_with(&self, armed: &Armed, budget: Duration) -> Option<EngineScrape> {
        let sm = self.target.server_metrics.as_ref()?;
        let key = armed.target.api_key.as_ref();
        let client = match armed.client() {
            Ok(client) => client,
            Err(e) => {
                return Some(Err(crate::engine::ScrapeFailure {
                    reason: crate::engine::ScrapeFailureReason::Connect,
                    detail: e.to_string(),
                }))
            }
        };
        let route = |url: &mut reqwest::Url| armed.to_replica_address(url);
        let mut scraped = engine_scrape::scrape(client, sm, key, budget, route).await;
        if let Err(f) = &mut scraped {
            armed.redact(&mut f.detail);
        }
        Some(scraped)
    }

    async fn probe_armed(
        &self,
        scenario: &Scenario,
        armed: Arc<Armed>,
        reloaded: bool,
        server_load: Option<EngineScrape>,
    ) -> ProbeOutcome {
        let nonce = (scenario.prefix_cache == PrefixCache::Cold || scenario.cache_canary)
            .then(protocol::new_nonce);
        let (mut outcome, mut warm_spent) = match scenario.turns.is_empty() {
            true => (
                armed.probe(scenario, &self.limits, nonce.clone()).await,
                0.0,
            ),
            false => {
                let cost = self.target.cost.as_ref();
                // Boxed: a conversation's future is the largest, and every other probe would
                // carry its size in flight.
                Box::pin(turns::converse(
                    &armed,
                    scenario,
                    &self.limits,
                    nonce.clone(),
                    cost,
                ))
                .await
            }
        };
        outcome.observations.server_load = server_load;
        if scenario.cache_canary {
            // The same prompt again, right after: its prefix (nonce included) is now in the
            // server's cache, so this request should start faster. It is paid for too.
            // Boxed: the cold probe's outcome is held meanwhile, and every other probe would
            // carry both sizes in flight.
            let warm = Box::pin(armed.probe(scenario, &self.limits, nonce)).await;
            if let Some(cost) = &self.target.cost {
                warm_spent += spent(cost, &warm);
            }
            if let Ok(cold) = &outcome.result {
                outcome.observations.cache_canary = Some(crate::measure::CacheCanary {
                    cold_ttft: cold.ttft,
                    warm_ttft: warm.result.as_ref().ok().map(|m| m.ttft),
                    warm_cached_tokens: warm.observations.usage.cached_prompt_tokens,
                });
            }
        }
        outcome.observations.credentials_reloaded = reloaded;
        if let Some(cost) = &self.target.cost {
            outcome.observations.cost = Some(spent(cost, &outcome) + warm_spent);
        }
        outcome
    }

    /// What this probe uses: the credentials as last read, read again first if one of their
    /// files changed. `true` when they were reloaded by this call (logged at info, never the
    /// value).
    async fn armed(&self) -> (Arc<Armed>, bool) {
        use crate::config::credentials;
        let mut live = self.live.lock().await;
        if credentials::files(&self.target).is_empty() {
            return (live.armed.clone(), false);
        }
        let (target, known) = (self.target.clone(), live.stamps.clone());
        let checked = tokio::task::spawn_blocking(move || {
            let now = credentials::stamps(&credentials::files(&target));
            let reread = (known.as_ref() != Some(&now)).then(|| credentials::reread(&target));
            (now, reread)
        })
        .await;
        let Ok((now, reread)) = checked else {
            return (live.armed.clone(), false);
        };
        live.stamps = Some(now);
        let current = live.armed.clone();
        let next = match reread {
            None => return (current, false),
            Some(Err(e)) if current.error.as_ref() == Some(&e) => return (current, false),
            Some(Err(e)) => {
                tracing::warn!(target = %self.target.name, error = %e, "credentials cannot be read; probes of this target fail with reason credentials until they can");
                Armed::new(
                    current.target.clone(),
                    self.replica.clone(),
                    current.client.clone(),
                    Some(e),
                )
            }
            Some(Ok((key, tls, aws))) => {
                let t = &current.target;
                if current.error.is_none() && t.api_key == key && t.tls == tls && t.aws == aws {
                    return (current, false);
                }
                let tls_changed = t.tls != tls;
                let target = Arc::new(Target {
                    api_key: key,
                    tls,
                    aws,
                    credentials_error: None,
                    ..Target::clone(&self.target)
                });
                let client = match tls_changed {
                    false => Ok(current.client.clone()),
                    true => {
                        build_replica_client(&target, self.replica.as_ref()).map(HttpClient::Given)
                    }
                };
                match client {
                    Ok(client) => {
                        let files: Vec<String> = credentials::files(&target)
                            .iter()
                            .map(|p| p.display().to_string())
                            .collect();
                        tracing::info!(target = %self.target.name, files = %files.join(", "), "credentials reloaded from their files; the next probes use them");
                        Armed::new(target, self.replica.clone(), client, None)
                    }
                    Err(e) => {
                        let e = format!("the TLS files cannot be used ({e}); check tls.ca_file, tls.cert_file and tls.key_file.");
                        Armed::new(
                            current.target.clone(),
                            self.replica.clone(),
                            current.client.clone(),
                            Some(e),
                        )
                    }
                }
            }
        };
        let reloaded = next.error.is_none();
        live.armed = Arc::new(next);
        (live.armed.clone(), reloaded)
    }
}

impl Armed {
    /// One probe with these credentials (see [`Prober::probe`]).
    async fn probe(
        &self,
        scenario: &Scenario,
        limits: &Limits,
        nonce: Option<String>,
    ) -> ProbeOutcome {
        let started_at = SystemTime::now();
        if let Some(e) = &self.error {
            let failure = Failure::new(FailureReason::Credentials, e.clone());
            let obs = Observations::new(Instant::now().into_std());
            return self.conclude(scenario, started_at, obs, Some(failure));
        }
        let spec = protocol::build_request(&self.target, scenario, nonce.as_deref());
        let reader = StreamReader::new(self.target.protocol, limits);
        // What was asked bounds the counts the server may report back.
        let mut asked = crate::measure::Asked::of(&spec.body, None);
        asked.prompt_tokens = (scenario.long_prompt.as_ref()).map(|lp| u64::from(lp.tokens));

        let request = match self.request(spec, &trace::TraceContext::new()) {
            Ok(r) => r,
            Err(f) => {
                return self.conclude(
                    scenario,
                    started_at,
                    Observations::new(Instant::now().into_std()),
                    Some(f),
                )
            }
        };
        let sent = Instant::now();
        let mut obs = Observations::new(sent.into_std());
        // Recorded for the reports as sent (UTF-8 included: a target's own id may be
        // non-ASCII, and exemplar labels and JSON are UTF-8), unless the target declared the
        // header a secret (a value marked sensitive is never shown), it is not UTF-8, or it is
        // longer than 1 KiB (then not recorded rather than cut: a cut id names a request
        // never sent). Header values hold no control character but the tab.
        let sent_header = |name: &str| {
            let value = request.headers().get(name).filter(|v| !v.is_sensitive())?;
            let value = std::str::from_utf8(value.as_bytes())
                .ok()
                .filter(|v| v.len() <= MAX_RECORDED_HEADER)?;
            Some(value.to_string())
        };
        asked.body_bytes = (request.body().and_then(|b| b.as_bytes())).map(|b| b.len() as u64);
        obs.asked = asked;
        obs.traceparent = sent_header("traceparent");
        obs.request_id = sent_header("x-request-id");
        let deadline = crate::clock::instant_after(sent, self.target.timeout);
        let exchange =
            tokio::time::timeout_at(deadline, self.exchange(request, reader, &mut obs, limits));
        let (exchanged, connection) = connect::attribute(exchange).await;
        // A stream this fast would see its gaps merged by late reads.
        let marks = obs.timeline.token_events.iter().map(|e| e.at);
        if coalesce::stream_paced(marks, self.target.effective_interval()) {
            tracing::info!(
                target = %self.target.name, scenario = %scenario.name,
                "wake-up coalescing off: this stream's token events came mostly less than 4 × \
                 --probe.coalesce-reads apart, so reads are served at once (for twice its interval)"
            );
        }
        if let Some(setup) = connection {
            let tl = &mut obs.timeline;
            tl.connect_started = Some(setup.started);
            tl.connected = Some(setup.ready);
            tl.dns_resolved = setup.resolved;
            tl.tcp_connected = setup.tcp;
            tl.tls_done = (self.target.base_url.scheme() == "https").then_some(setup.ready);
        }
        let failure = match exchanged {
            Ok(result) => result.err(),
            // The stream ended in time; only the unmeasured read after it was cut short.
            Err(_) if obs.timeline.ended.is_some() => None,
            Err(_) => Some(Failure::new(
                FailureReason::Timeout,
                format!(
                    "no complete stream within {} ({}; {} token events so far)",
                    humantime::format_duration(self.target.timeout),
                    if obs.timeline.headers.is_some() {
                        "response headers received"
                    } else {
                        "no response headers"
                    },
                    obs.timeline.token_events.len(),
                ),
            )),
        };
        if let (Some(path), Some(_)) = (&self.target.version_path, obs.http_status) {
            let budget = deadline
                .saturating_duration_since(Instant::now())
                .min(VERSION_TIMEOUT);
            obs.identity.server_version = self.server_version(path, budget).await;
        }
        // Server-sent text (an error page, a stream error, the model or version it reports)
        // could echo the request back: the target's own secrets never leave the probe, neither
        // in a detail nor in the identity labels of /metrics.
        let mut failure = failure;
        let id = &mut obs.identity;
        let texts = [
            failure.as_mut().map(|f| &mut f.detail),
            obs.stream_error.as_mut(),
            id.response_model.as_mut(),
            id.system_fingerprint.as_mut(),
            id.server_header.as_mut(),
            id.server_version.as_mut(),
        ];
        for text in texts.into_iter().flatten() {
            self.redact(text);
        }
        // The identity becomes label values (/metrics, the status pages, compare's reports):
        // control and bidirectional characters a server put there are made visible escapes.
        let id = &mut obs.identity;
        for text in [
            &mut id.response_model,
            &mut id.system_fingerprint,
            &mut id.server_header,
            &mut id.server_version,
        ]
        .into_iter()
        .flatten()
        {
            if let std::borrow::Cow::Owned(safe) = crate::sanitize::terminal_safe(text) {
                *text = safe;
            }
        }
        // The raw body excerpt a debug probe shows (`/probe`): redacted as text, and kept as
        // received when there was nothing to redact.
        if !obs.raw_excerpt.is_empty() {
            let raw = String::from_utf8_lossy(&obs.raw_excerpt).into_owned();
            let mut redacted = raw.clone();
            self.redact(&mut redacted);
            if redacted != raw {
                obs.raw_excerpt = redacted.into_bytes();
            }
        }
        self.conclude(scenario, started_at, obs, failure)
    }

    /// `GET {scheme://host:port}{path}` and its JSON `version` field, within `budget`; `None` on
    /// any problem (backend identity is best effort and never fails a probe). Sent after the
    /// stream, outside every measurement, with the target's headers but never its API key.
    async fn server_version(&self, path: &str, budget: Duration) -> Option<String> {
        let mut url = self.target.base_url.clone();
        url.set_path(path);
        url.set_query(None);
        let host = self.to_replica_address(&mut url);
        let mut req = self.client().ok()?.get(url);
        if let Some(host) = host {
            req = req.header(HOST, host);
        }
        for (k, v) in &self.target.headers {
            // Valid (checked at load); secret ones marked as on the probe's own request.
            if let Ok(mut v) = HeaderValue::from_str(v) {
                v.set_sensitive(self.target.is_secret_header(k));
                req = req.header(k, v);
            }
        }
        let fetch = async {
            let mut resp = transport::Response::Reqwest(req.send().await.ok()?);
            if !resp.status().is_success() {
                return None;
            }
            let body = read_head(&mut resp, 4096).await;
            let v: serde_json::Value = serde_json::from_slice(&body).ok()?;
            let version = v.get("version")?.as_str()?.trim();
            (!version.is_empty()).then(|| version.chars().take(128).collect())
        };
        tokio::time::timeout(budget, fetch).await.ok().flatten()
    }

    /// The reqwest client ([`HttpClient`]); the reason it cannot be built, which names no
    /// secret.
    fn client(&self) -> Result<&reqwest::Client, &str> {
        match &self.client {
            HttpClient::Given(client) => Ok(client),
            HttpClient::OnFirstUse(cell) => cell
                .get_or_init(|| {
                    build_replica_client(&self.target, self.replica.as_ref()).map_err(|e| {
                        format!("the HTTP client cannot be built ({e}); check tls.ca_file, tls.cert_file and tls.key_file.")
                    })
                })
                .as_ref()
                .map_err(String::as_str),
        }
    }

    /// [`resolve::to_replica_address`] for this prober's replica, if it probes one.
    fn to_replica_address(&self, url: &mut reqwest::Url) -> Option<HeaderValue> {
        let pin = resolve::pin_of(&self.target, self.replica.as_ref())?;
        resolve::to_replica_address(url, &pin)
    }

    /// Replaces the target's API key, its secret header values and its proxy's credentials in
    /// `text` with `[redacted]`, and a beginning of one that a cut left behind
    /// ([`crate::sanitize::Redactor`]).
    fn redact(&self, text: &mut String) {
        self.redactor.redact(text);
    }

    /// The replica this target's probes go to, if it is one, as a failure's detail names it:
    /// its label, and the address it is dialled at when the label is another (a host name of
    /// a file_sd entry, resolved when it was discovered): `vllm-0:8000 (10.1.2.3:8000)`.
    fn replica_detail(&self) -> Option<String> {
        let r = self.replica.as_ref()?;
        let addr = r.addr.to_string();
        Some(match *r.label == *addr {
            true => addr,
            false => format!("{} ({addr})", r.label),
        })
    }

    fn conclude(
        &self,
        scenario: &Scenario,
        started_at: SystemTime,
        obs: Observations,
        failure: Option<Failure>,
    ) -> ProbeOutcome {
        let mut outcome = ProbeOutcome::conclude(
            self.target.name.as_str().into(),
            scenario.name.as_str().into(),
            self.target.model.as_str().into(),
            started_at,
            obs,
            failure,
        );
        if let Some(r) = &self.replica {
            outcome.replica = r.label.clone();
        }
        // A complete, measured stream is then checked for being the right answer: a failed
        // check makes it a `wrong_answer` failure (its timings are not observed as a success).
        let checked = protocol::captures_answer(self.target.protocol);
        if let (Ok(m), true) = (&outcome.result, checked) {
            let answer = &outcome.observations.answer;
            if let Err(mut f) = scenario.checks.evaluate(answer, m.output_tokens) {
                let obs = &outcome.observations;
                if f.check == crate::check::CheckName::ContextTruncated {
                    if let (Some(sent), Some(counted)) =
                        (obs.asked.prompt_tokens, obs.usage.prompt_tokens)
                    {
                        f.detail.push_str(&format!(
                            "; the server counted {counted} prompt tokens of the about {sent} sent"
                        ));
                    }
                    // A model that says a sentence before the word can run out of tokens in
                    // the middle of it: that is the probe's max_tokens, not a cut prompt.
                    let code = scenario.checks.code_word.as_deref().unwrap_or_default();
                    let cut = obs.finish_reason.as_deref() == Some("length");
                    let at_limit = m.output_tokens >= u64::from(scenario.max_tokens) || cut;
                    if at_limit && crate::check::ends_inside_code_word(&answer.text, code) {
                        f.detail.push_str(&format!(
                            "; the answer stopped inside the code word at max_tokens ({}): give max_tokens room for the word and what the model says around it",
                            scenario.max_tokens
                        ));
                    } else if cut && !crate::measure::prompt_truncated(obs) {
                        // The server says max_tokens ended the answer before it got to the word.
                        f.detail.push_str(&format!(
                            "; the answer stopped at max_tokens ({}) before the word: give it more room",
                            scenario.max_tokens
                        ));
                    }
                }
                outcome.observations.answer.failed_check = Some(f.check.as_str());
                outcome.result = Err(f.into_failure(|t| self.redact(t)));
            }
        }
        outcome
    }

    /// The HTTP request of `spec`, with `trace`'s `traceparent` and `x-request-id` unless the
    /// target's headers set them.
    fn request(
        &self,
        spec: protocol::RequestSpec,
        trace: &trace::TraceContext,
    ) -> Result<reqwest::Request, Failure> {
        let mut headers = HeaderMap::new();
        for (name, value) in &spec.headers {
            let name = HeaderName::from_bytes(name.as_bytes());
            let mut value = HeaderValue::from_str(value);
            // The value may be a key: the error must not repeat it.
            let (Ok(name), Ok(value)) = (name, value.as_mut()) else {
                return Err(Failure::new(
                    FailureReason::HttpProtocol,
                    "a request header is not a valid HTTP header (check the key's characters)",
                ));
            };
            value.set_sensitive(self.target.is_secret_header(name.as_str()));
            headers.append(name, value.clone());
        }
        for (name, value) in [
            ("traceparent", trace.traceparent()),
            ("x-request-id", trace.request_id()),
        ] {
            if !headers.contains_key(name) {
                if let Ok(v) = HeaderValue::from_str(&value) {
                    headers.insert(HeaderName::from_static(name), v);
                }
            }
        }
        // Built without a client (as reqwest's `RequestBuilder::json` does): a replica's
        // client is built only if a request goes over it.
        let body = serde_json::to_vec(&spec.body).map_err(|_| {
            Failure::new(
                FailureReason::HttpProtocol,
                "the request body could not be serialised",
            )
        })?;
        if !headers.contains_key(CONTENT_TYPE) {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        let mut request = reqwest::Request::new(reqwest::Method::POST, spec.url);
        *request.headers_mut() = headers;
        *request.body_mut() = Some(body.into());
        Ok(request)
    }

    /// Sends the request and reads the stream until its end; every read is stamped as it
    /// returns. Returns a transport/decoding failure, or Ok when the stream ended in any way
    /// the adapter recorded in `obs` (conclusion happens in [`ProbeOutcome::conclude`]).
    async fn exchange(
        &self,
        request: reqwest::Request,
        mut reader: StreamReader,
        obs: &mut Observations,
        limits: &Limits,
    ) -> Result<(), Failure> {
        let url = request.url().clone();
        // Until its request is written (a stamped exchange: `connect::hold_until_written`; at
        // the latest its response headers) or to the end (an unstamped one): idle workers
        // must notice this probe at once (`coalesce`).
        let mut urgent = Some(coalesce::urgent());
        coalesce::claim();
        let mut response = match &self.stamped {
            Some(client) => {
                let mut request = transport::to_http(&request).map_err(|_| {
                    Failure::new(
                        FailureReason::HttpProtocol,
                        "the request could not be given to the HTTP client",
                    )
                })?;
                let captured =
                    hyper_util::client::legacy::connect::capture_connection(&mut request);
                if let Some(guard) = urgent.take() {
                    connect::hold_until_written(guard);
                }
                let response = client.request(request).await;
                connect::release_urgent();
                let response = response.map_err(|e| {
                    errors::classify_stamped(
                        &e,
                        &url,
                        transport::answer_bytes(&captured),
                        self.replica_detail().as_deref(),
                    )
                })?;
                let response = transport::Response::stamped(response, url);
                if let Some(a) = response.arrivals() {
                    a.release();
                }
                response
            }
            None => transport::Response::Reqwest({
                let mut request = request;
                if let Some(host) = self.to_replica_address(request.url_mut()) {
                    request.headers_mut().insert(HOST, host);
                }
                (self.client())
                    .map_err(|e| Failure::new(FailureReason::Tls, e))?
                    .execute(request)
                    .await
                    .map_err(|e| errors::classify(&e, self.replica_detail().as_deref()))?
            }),
        };
        let head_read = std::time::Instant::now();
        let _urgent = urgent;
        let arrivals = response.arrivals();
        let mut stamper = arrival::Stamper::new(arrivals.clone(), obs.timeline.sent);
        let headers = stamper.mark(head_read).0;
        obs.timeline.headers = Some(headers);
        if response.is_http1() {
            if let Some(a) = &arrivals {
                request_phases(a, head_read, headers, &mut obs.timeline);
            }
        }
        connect::response_arrived(response.extensions());
        let status = response.status();
        obs.http_status = Some(status.as_u16());
        let header = |name| {
            response
                .headers()
                .get(name)
                .and_then(|v: &HeaderValue| v.to_str().ok())
        };
        Observations::identity_field(&mut obs.identity.server_header, header(SERVER));
        read_tgi_queue_time(header(HeaderName::from_static("x-queue-time")), obs);
        let content_type = header(CONTENT_TYPE).unwrap_or("").to_ascii_lowercase();
        let encoding = content_encoding(response.headers());
        obs.rate_limits = crate::measure::RateLimits::from_headers(
            (response.headers().iter()).map(|(n, v)| (n.as_str(), v.as_bytes())),
            SystemTime::now(),
        );
        if matches!(status.as_u16(), 429 | 503 | 529) {
            obs.retry_after =
                header(RETRY_AFTER).and_then(|v| parse_retry_after(v, SystemTime::now()));
        }
        // 204 and 205 have no body by definition: a streaming request got no stream.
        if !status.is_success() || matches!(status.as_u16(), 204 | 205) {
            return Err(status_failure(&mut response).await);
        }
        let unasked = !self
            .target
            .headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("accept-encoding"));
        reader.on_headers(
            status.as_u16(),
            &content_type,
            encoding.as_deref(),
            unasked,
            obs,
        )?;
        if is_never_a_stream(&content_type) {
            let head = read_head(&mut response, 2048).await;
            return Err(body::not_a_stream(
                status.as_u16(),
                &content_type,
                &head,
                obs,
            ));
        }

        loop {
            let read = response.chunk().await;
            let read_at = std::time::Instant::now();
            let bytes = match read {
                Ok(Some(bytes)) => bytes,
                Ok(None) => return reader.finish(stamper.mark_end(read_at), obs),
                Err(e) => return Err(errors::classify_body(&e, obs)),
            };
            let (at, read_delay) = stamper.mark(read_at);
            obs.bytes += bytes.len() as u64;
            if obs.raw_excerpt.len() < limits.capture_bytes {
                let room = limits.capture_bytes - obs.raw_excerpt.len();
                obs.raw_excerpt
                    .extend_from_slice(&bytes[..bytes.len().min(room)]);
            }
            if obs.bytes > limits.max_stream_bytes {
                return Err(too_large(format!(
                    "stream exceeded {} bytes",
                    limits.max_stream_bytes
                )));
            }
            let tokens_before = obs.timeline.token_events.len();
            let ended = reader.feed(&bytes, at, obs)?;
            if obs.timeline.token_events.len() > tokens_before {
                // The probe's marks are kernel arrivals only if every token read was stamped.
                match read_delay {
                    Some(delay) => {
                        obs.read_delays.push(delay);
                        if tokens_before == 0 {
                            obs.timeline.timestamp_source = TimestampSource::Kernel;
                        }
                    }
                    None => {
                        obs.timeline.timestamp_source = TimestampSource::Read;
                        if coalesce::unstamped_read(self.target.effective_interval()) {
                            tracing::info!(
                                target = %self.target.name,
                                "wake-up coalescing off: this target's reads have no kernel \
                                 stamps, so they are served at once (for twice its interval)"
                            );
                        }
                    }
                }
            }

            if ended {
                self.drain(&mut response, &mut reader, obs, limits).await;
                return reader.finish(std::time::Instant::now(), obs);
            }
        }
    }

    /// After the terminator: read what is left for a moment (not measured), so the connection
    /// can be reused and bytes after the end are checked by `reader` (a `[DONE]` a gateway adds
    /// is harmless; anything else is a trailing-bytes anomaly). At most 64 KiB.
    async fn drain(
        &self,
        response: &mut transport::Response,
        reader: &mut StreamReader,
        obs: &mut Observations,
        limits: &Limits,
    ) {
        let rest = async {
            let mut seen = 0usize;
            while let Ok(Some(b)) = response.chunk().await {
                seen += b.len();
                let _ = reader.feed(&b, std::time::Instant::now(), obs);
                if seen > 64 << 10 {
                    obs.anomaly(Anomaly::TrailingBytes);
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(limits.drain_after_end, rest).await;
    }
}

/// Text Generation Inference's `x-queue-time` response header (milliseconds the request waited
/// in TGI's queue, an integer) as the server-reported queue wait of the TTFT split. TGI sends it
/// with its timing headers on non-streaming responses; a stream that carries it is read the
/// same way. A value that is not a non-negative number is ignored.
/// The request-written and first-byte phases of a probe's timeline, from its HTTP/1.x
/// connection's arrivals read when the response head was (`head_read`, marked `headers`): the
/// last write (kept only if at or after `sent` and before the head) and the kernel arrival of
/// the first data after it, mapped onto the monotonic clock between the write and the head.
/// The write is the instant its call returned, or the instant it began when the head arrived
/// before the return was noted ([`arrival::WriteSpan`]): its bytes were in the kernel by then.
fn request_phases(
    a: &arrival::Arrivals,
    head_read: std::time::Instant,
    headers: std::time::Instant,
    tl: &mut crate::measure::Timeline,
) {
    let Some(span) = a.last_write() else {
        return;
    };
    let written = if span.returned <= headers {
        span.returned
    } else {
        span.begun
    };
    if written < tl.sent || written > headers {
        return;
    }
    tl.request_written = Some(written);
    tl.first_byte = a.first_since_write().map(|kernel| {
        arrival::arrival_instant(head_read, SystemTime::now(), kernel, written).min(headers)
    });
}

fn read_tgi_queue_time(value: Option<&str>, obs: &mut Observations) {
    let Some(ms) = value
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|ms| ms.is_finite() && *ms >= 0.0)
    else {
        return;
    };
    let st = &mut obs.server_timings;
    st.queue_seconds = Some(ms / 1000.0);
    st.source = Some(crate::measure::ServerTimingSource::TgiHeaders);
}

/// Longest `Retry-After` honoured; a larger one is capped (a typo must not stop probing for days).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// `Retry-After` as a wait from `now`: delta-seconds or an HTTP-date (RFC 9110 §10.2.3),
/// capped at [`MAX_RETRY_AFTER`]. `None` when unparsable or already past.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    let wait = match value.parse::<u64>() {
        Ok(secs) => Duration::from_secs(secs),
        // delta-seconds too large for u64: as long as any, so the cap.
        Err(_) if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => MAX_RETRY_AFTER,
        Err(_) => httpdate::parse_http_date(value)
            .ok()?
            .duration_since(now)
            .ok()?,
    };
    (!wait.is_zero()).then(|| wait.min(MAX_RETRY_AFTER))
}

fn too_large(detail: String) -> Failure {
    Failure::new(FailureReason::TooLarge, detail)
}

/// Media types that are never an event stream: a JSON document (the server ignored
/// `stream: true`, or answered with an error object) or an HTML page (a proxy's error page).
fn is_never_a_stream(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim();
    matches!(
        essence,
        "application/json" | "application/problem+json" | "text/html" | "application/xhtml+xml"
    )
}

/// The failure for a non-2xx status (and 204/205): `HTTP 404 Not Found from POST
/// /v1/chat/completions: <body excerpt>`, or `HTTP 302 Found from POST /v1/chat/completions,
/// redirected to https://host/path (redirects are not followed …): <body excerpt>`. The
/// request is named by method and path only (never its query, which can hold a key); the
/// `Location` is shown without user-info, query or fragment (they can hold secrets).
async fn status_failure(response: &mut transport::Response) -> Failure {
    let status = response.status();
    let mut detail = format!("HTTP {}", status.as_u16());
    if let Some(reason) = status.canonical_reason() {
        detail.push(' ');
        detail.push_str(reason);
    }
    // 529 is no IANA status, but Anthropic's (and some gateways') "overloaded, retry later".
    let overloaded = status.as_u16() == 529;
    if overloaded {
        detail.push_str(" Overloaded");
    }
    // The probe's request is always a POST.
    let path = body::excerpt(response.url().path().as_bytes(), 200);
    detail.push_str(&format!(" from POST {path}"));
    if status.as_u16() == 404 {
        detail.push_str(" (check base_url: the protocol appends its endpoint path to it)");
    }
    if matches!(status.as_u16(), 204 | 205) {
        detail.push_str(": the server answered the streaming request without a body");
    }
    if status.is_redirection() {
        let location = response
            .headers()
            .get(LOCATION)
            .map(|v| safe_location(response.url(), v.as_bytes()));
        match location {
            Some(l) => detail.push_str(&format!(", redirected to {l}")),
            None => detail.push_str(", a redirect without a Location"),
        }
        detail.push_str(" (redirects are not followed: set base_url to the final address)");
    }
    let body = read_head(response, 2048).await;
    let body = body::excerpt(&body, 400);
    if !body.is_empty() {
        detail.push_str(": ");
        detail.push_str(&body);
    }
    let reason = if overloaded {
        FailureReason::Overloaded
    } else {
        FailureReason::HttpStatus
    };
    Failure::new(reason, detail)
}

/// A redirect's `Location`, resolved against the request's URL, without user-info, query or
/// fragment (`?…` marks a removed query), made safe to print.
fn safe_location(base: &reqwest::Url, location: &[u8]) -> String {
    let Some(mut url) = std::str::from_utf8(location)
        .ok()
        .and_then(|l| base.join(l.trim()).ok())
    else {
        return "an unreadable Location".to_string();
    };
    let _ = url.set_username("");
    let _ = url.set_password(None);
    let had_query = url.query().is_some();
    url.set_query(None);
    url.set_fragment(None);
    let mut shown = body::excerpt(url.as_str().as_bytes(), 200);
    if had_query {
        shown.push_str("?…");
    }
    shown
}

/// The response's `Content-Encoding`: the values of every such header line joined with ", ",
/// as RFC 9110 §5.3 combines a repeated field (two `gzip` lines are `gzip, gzip`: two codings
/// stacked, not one), non-ASCII bytes decoded lossily (so they make the value unknown rather
/// than absent); `None` when there is none.
fn content_encoding(headers: &HeaderMap) -> Option<String> {
    let values: Vec<_> = headers
        .get_all(CONTENT_ENCODING)
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .collect();
    (!values.is_empty()).then(|| values.join(", "))
}

/// Up to `max` bytes of the body (within 2 s), for error details and the version answer.
/// A body with a content coding the probe knows (gzip, deflate, br, zstd) is decoded, as far as
/// it decodes.
async fn read_head(response: &mut transport::Response, max: usize) -> Vec<u8> {
    let mut decoder = content_encoding(response.headers())
        .and_then(|v| Coding::parse(&v).ok().flatten())
        .map(ContentDecoder::new);
    let mut buf = Vec::new();
    let read = async {
        while let Ok(Some(b)) = response.chunk().await {
            match decoder.as_mut() {
                Some(d) => {
                    if d.feed(&b, &mut buf).is_err() {
                        break;
                    }
                }
                None => buf.extend_from_slice(&b),
            }
            if buf.len() >= max {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), read).await;
    buf.truncate(max);
    buf
}

/// What one request of `outcome` cost: the tokens the server reports it processed; the output
/// tokens of a failed stream were spent too.
fn spent(cost: &crate::config::cost::Cost, outcome: &ProbeOutcome) -> f64 {
    let obs = &outcome.observations;
    let output = match &outcome.result {
        Ok(m) => m.output_tokens,
        Err(_) => obs.usage.completion_tokens.unwrap_or(0),
    };
    cost.of(obs.usage.prompt_tokens.unwrap_or(0), output)
}

#[cfg(test)]
mod tests {
    #[test]
    fn tgi_queue_time_header_is_the_queue_wait_in_seconds() {
        use crate::measure::{Observations, ServerTimingSource};
        let mut obs = Observations::new(std::time::Instant::now());
        super::read_tgi_queue_time(Some(" 250 "), &mut obs);
        assert_eq!(obs.server_timings.queue_seconds, Some(0.25));
        assert_eq!(
            obs.server_timings.source,
            Some(ServerTimingSource::TgiHeaders)
        );
        let mut obs = Observations::new(std::time::Instant::now());
        for bad in [Some("-3"), Some("soon"), Some("NaN"), None] {
            super::read_tgi_queue_time(bad, &mut obs);
        }
        assert_eq!(obs.server_timings.queue_seconds, None);
        assert_eq!(obs.server_timings.source, None);
    }

    use super::*;

    /// A write whose return was noted after its answer arrived (its thread preempted, as on a
    /// loaded host): the request counts as written when the call began, and the answer's
    /// arrival is still the first byte. Noted in time, the return is the write.
    #[test]
    fn a_write_noted_after_its_answer_counts_from_its_start() {
        use arrival::{write_begins, Arrivals, WriteSpan};
        use std::time::Instant;
        let a = Arrivals::default();
        let mut tl = crate::measure::Timeline::new(Instant::now());
        let begun = write_begins();
        let answer = SystemTime::now();
        let headers = Instant::now();
        std::thread::sleep(Duration::from_millis(2));
        a.wrote(WriteSpan::ending_now(begun));
        a.record(answer);
        request_phases(&a, Instant::now(), headers, &mut tl);
        assert_eq!(tl.request_written, Some(begun.0));
        let first = tl.first_byte.expect("the answer's arrival");
        assert!(first >= begun.0 && first <= headers);

        let a = Arrivals::default();
        let mut tl = crate::measure::Timeline::new(Instant::now());
        a.wrote(WriteSpan::ending_now(write_begins()));
        let span = a.last_write().expect("a write");
        std::thread::sleep(Duration::from_millis(1));
        a.record(SystemTime::now());
        let headers = Instant::now();
        request_phases(&a, headers, headers, &mut tl);
        assert_eq!(tl.request_written, Some(span.returned));
        let first = tl.first_byte.expect("the answer's arrival");
        assert!(first >= span.returned && first <= headers);
    }

    #[test]
    fn retry_after_in_seconds_or_http_date() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(parse_retry_after("7", now), Some(Duration::from_secs(7)));
        assert_eq!(
            parse_retry_after(" 120 ", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:50:37 GMT", now),
            Some(Duration::from_secs(60))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:40:00 GMT", now),
            None,
            "past"
        );
        assert_eq!(parse_retry_after("0", now), None);
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-5", now), None);
        assert_eq!(parse_retry_after("999999999", now), Some(MAX_RETRY_AFTER));
        // Beyond u64: still a number of seconds, capped, not ignored.
        assert_eq!(
            parse_retry_after("99999999999999999999999", now),
            Some(MAX_RETRY_AFTER)
        );
    }

    /// Every header of the one secret list, the key's own header and one marked with
    /// `secret_headers` go out marked sensitive (no `Debug` of the request shows them); the
    /// others do not.
    #[tokio::test]
    async fn secret_headers_are_sent_marked_sensitive() {
        let mut headers: Vec<String> = crate::config::SECRET_HEADERS
            .iter()
            .map(|h| format!("{h}: v"))
            .collect();
        headers.extend(["X-Tenant: v".into(), "X-Team: sre".into()]);
        let yaml = format!(
            "scenarios: [{{name: s, messages: [{{role: user, content: hi}}], max_tokens: 1}}]\ntargets:\n  - name: t\n    protocol: anthropic\n    base_url: http://127.0.0.1:9/v1\n    model: m\n    api_key_env: K\n    headers: {{{}}}\n    secret_headers: [X-Tenant]\n",
            headers.join(", ").replace("x-api-key: v, ", ""),
        );
        let cfg = crate::config::parse(&yaml, "t.yaml", &|_| Some("k".into()))
            .unwrap_or_else(|e| panic!("{e}"));
        let target = Arc::clone(&cfg.targets[0]);
        let prober = Prober::new(Arc::clone(&target)).unwrap();
        let spec = protocol::build_request(&target, &target.scenarios[0], None);
        let armed = prober.live.lock().await.armed.clone();
        let request = armed.request(spec, &trace::TraceContext::new()).unwrap();
        let sent = request.headers();
        for name in crate::config::SECRET_HEADERS.iter().chain(&["x-tenant"]) {
            let value = sent.get(*name).unwrap_or_else(|| panic!("{name} not sent"));
            assert!(value.is_sensitive(), "{name}");
        }
        assert!(!sent.get("x-team").unwrap().is_sensitive());
        let debug = format!("{request:?}");
        assert!(!debug.contains("\"v\""), "{debug}");
    }

    /// A fleet keeps hundreds of probes in flight (2,000 pairs of 1.5 s streams every 10 s:
    /// about 300), each holding its future's state, so that state stays small: an `async fn`
    /// that awaits a future it was given keeps it twice (`coalesce::starting`,
    /// `connect::attribute` are plain functions for that), and the rare large paths (a
    /// conversation, a cache canary's warm probe) are boxed. It was about 20 KiB a probe.
    #[tokio::test]
    async fn a_probe_in_flight_keeps_a_small_state() {
        let yaml = "scenarios: [{name: s, messages: [{role: user, content: hi}], max_tokens: 1}]\ntargets: [{name: t, protocol: openai-chat, base_url: 'http://127.0.0.1:9/v1', model: m}]\n";
        let cfg = crate::config::parse(yaml, "t.yaml", &|_| None).unwrap_or_else(|e| panic!("{e}"));
        let target = Arc::clone(&cfg.targets[0]);
        let prober = Prober::new(Arc::clone(&target)).unwrap();
        let scenario = Arc::clone(&target.scenarios[0]);
        // As the schedule spawns it (`exporter::schedule`).
        let scheduled = coalesce::starting(None, async move {
            prober.probe_with_load(&scenario, None).await
        });
        let bytes = std::mem::size_of_val(&scheduled);
        assert!(
            bytes <= 6 * 1024,
            "a scheduled probe's future is {bytes} bytes"
        );
    }
}
