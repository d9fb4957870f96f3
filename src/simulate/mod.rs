//! A built-in streaming LLM endpoint whose timing is scripted, so tests and benchmarks know the
//! ground truth. It speaks every protocol of docs/protocols.md, routed by path as real servers do
//! ([`protocol_for_path`]; Azure's deployment path is OpenAI chat, AI Studio's and Vertex AI's
//! paths are both Gemini, Amazon Bedrock's stream is binary). Every protocol follows the same
//! [`Script`]: headers and the protocol's preamble
//! (role chunk, `message_start`, `response.created`, …) at once, the first token `ttft` after the
//! request arrived, then one event every `itl`, then the protocol's finish, count and terminator.
//! Event `k` is sent at `arrival + ttft + k·itl` on an absolute schedule (no drift); a [`Load`]
//! model adds slots with a FIFO queue, prefill per prompt token, batch slowdown and seeded
//! jitter, and records what it did per request ([`Truth`]). Fault modes
//! reproduce the classes of docs/protocols.md, "Stream faults the probe gets right", each in the protocol's own shapes
//! ([`ServeWire`], implemented beside each protocol's adapter in `crate::protocol`). This
//! module owns the timing: when each part of a stream is sent, the faults' schedule, the HTTP
//! answers around the stream.

mod load;
mod quota;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use serde_json::json;
use tokio::sync::mpsc;

use load::Engine;
pub use load::{prompt_tokens, Load, Truth};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::protocol::serve::{
    protocol_for_path, serve_wire, served_paths, Ctx, End, RequestMetrics, ServeWire,
};
use crate::server::ListenError;

/// What goes wrong, on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fault {
    /// A well-formed stream.
    #[default]
    None,
    /// Three tokens, then the protocol's error inside the 200 stream (`{"error": …}`,
    /// `event: error`, `response.failed`).
    ErrorAfterTokens,
    /// A 200 whose only event is an error object.
    ErrorOnly,
    /// A 200 with only the terminator (`data: [DONE]`; elsewhere the terminator with a count of
    /// 0, or TGI's lone end-of-sequence token).
    DoneOnly,
    /// HTTP 500 with a JSON error body.
    Http500,
    /// HTTP 429 with `Retry-After: 7`.
    Http429,
    /// HTTP 529 with `Retry-After: 7` and Anthropic's `overloaded_error` body (the server is
    /// overloaded).
    Http529,
    /// No usage chunk or count field (tokens must be counted from events).
    NoUsage,
    /// Three tokens, then silence with the connection open.
    Stall,
    /// Three tokens, then the connection is dropped mid-body.
    Reset,
    /// Every event is held back and sent in one burst at the end (a buffering proxy).
    Collapsed,
    /// Finish and usage chunks, then a clean close without `[DONE]` (or the protocol's
    /// terminator; where the count rides on the terminator, it is missing too).
    NoTerminator,
    /// `: keep-alive` comments every 10 ms while the prompt is "processed" (SSE protocols;
    /// NDJSON has no comments, so Ollama sends nothing extra).
    Keepalive,
    /// The request is read, and no response head is ever sent.
    NoHeaders,
    /// Two tokens, then a data line that starts as JSON and breaks off.
    InvalidJson,
    /// Two tokens, then a line that is not UTF-8.
    InvalidUtf8,
    /// Token events as fast as the connection takes them, forever.
    Endless,
    /// One `data:` line of 100 MB, without a line end.
    HugeLine,
    /// A degenerate answer: the same word on every token (` again again …`), a repetition loop.
    RepetitionLoop,
    /// A degenerate answer of punctuation only (`////…`).
    PunctuationOnly,
    /// The answer ends with a leaked special token (`<|im_end|>`) as text.
    SpecialToken,
    /// Every token is reasoning: no answer after it.
    EmptyAfterReasoning,
}

impl Fault {
    /// Every fault mode and its command-line name.
    pub const NAMES: [(&'static str, Fault); 22] = [
        ("none", Fault::None),
        ("error-after-tokens", Fault::ErrorAfterTokens),
        ("error-only", Fault::ErrorOnly),
        ("done-only", Fault::DoneOnly),
        ("http-500", Fault::Http500),
        ("http-429", Fault::Http429),
        ("http-529", Fault::Http529),
        ("no-usage", Fault::NoUsage),
        ("stall", Fault::Stall),
        ("reset", Fault::Reset),
        ("collapsed", Fault::Collapsed),
        ("no-terminator", Fault::NoTerminator),
        ("keepalive", Fault::Keepalive),
        ("no-headers", Fault::NoHeaders),
        ("invalid-json", Fault::InvalidJson),
        ("invalid-utf8", Fault::InvalidUtf8),
        ("endless", Fault::Endless),
        ("repetition-loop", Fault::RepetitionLoop),
        ("punctuation-only", Fault::PunctuationOnly),
        ("special-token", Fault::SpecialToken),
        ("empty-after-reasoning", Fault::EmptyAfterReasoning),
        ("huge-line", Fault::HugeLine),
    ];
}

impl FromStr for Fault {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Fault::NAMES
            .iter()
            .find(|(n, _)| *n == s)
            .map(|(_, f)| *f)
            .ok_or_else(|| {
                let names: Vec<_> = Fault::NAMES.iter().map(|(n, _)| *n).collect();
                format!("unknown fault {s:?}; expected one of {}", names.join(", "))
            })
    }
}

/// The scripted behaviour: the ground truth a probe's measurement is checked against.
#[derive(Debug, Clone)]
pub struct Script {
    /// From request arrival to the first token event.
    pub ttft: Duration,
    /// Between consecutive token events.
    pub itl: Duration,
    /// Output tokens (capped by the request's `max_tokens`).
    pub tokens: u32,
    /// Tokens per event (> 1 imitates speculative decoding / server-side chunking).
    pub tokens_per_event: u32,
    /// How many of the first tokens are reasoning (in the protocol's reasoning field:
    /// `delta.reasoning_content`, `thinking_delta`, `response.reasoning_text.delta`,
    /// `message.thinking`, Gemini `thought: true` parts, counted apart in `thoughtsTokenCount`;
    /// protocols without one send them as text).
    pub reasoning_tokens: u32,
    /// The `model` field of the chunks.
    pub model: String,
    /// What goes wrong.
    pub fault: Fault,
    /// Which streaming requests the fault hits: every `fault_every`-th one (the n-th, 2n-th,
    /// …, counted from the simulator's start); 0 and 1 mean every request. `fault: http-500`
    /// with `fault_every: 5` is a replica failing 20 % of its requests.
    pub fault_every: u32,
    /// How load changes the timing (slots, prefill, batch slowdown, jitter); the default is
    /// none, and then event `k` is sent at exactly `arrival + ttft + k·itl`.
    pub load: Load,
    /// What the answer says, spelled over the token events (one character per event, at most
    /// `tokens` events); `None`: ` t0 t1 t2 …`. On every wire with tools (OpenAI chat and
    /// Responses, Anthropic, Ollama, Gemini, Bedrock) a request with tools (and a tool choice
    /// other than none) gets a call of its first tool with this text as the arguments (`{}`
    /// when `None`; Ollama and Gemini send the call whole on the first event).
    pub answer: Option<String>,
    /// Scripted grammar compilation: added to the TTFT of a request with a JSON schema
    /// (`response_format`'s schema or tool parameters) the simulator has not seen before. A
    /// schema sent again verbatim (warm) pays it once; one with a fresh nonce (cold) every time.
    pub grammar_compile: Duration,
    /// A prefix cache: a request whose prompt (its `messages`, `prompt`, `input` or `inputs`)
    /// the simulator has seen before gets a quarter of the TTFT (its prefill is cached). Off by
    /// default, so that every request follows the scripted TTFT.
    pub prefix_cache: bool,
    /// When the response headers go out: at once (the default, as vLLM, TGI and llama.cpp
    /// send them), or with the first token event, as a server that writes nothing before its
    /// first token (Ollama's Go server does). With a fault that writes before the first token
    /// (a keep-alive comment, an error, a flood), they go with that write.
    pub headers: HeadersAt,
    /// Requests a minute the simulated API key may send (0: no quota): every stream's head says
    /// what is left (see `quota.rs`), and the request past it gets a 429.
    pub rate_limit: u32,
    /// The model's context, prompt tokens (0: none). A longer prompt (counted as
    /// [`prompt_tokens`] counts it) is refused or truncated, as [`Script::context_overflow`]
    /// says.
    pub context_limit: u64,
    /// What a prompt longer than [`Script::context_limit`] gets.
    pub context_overflow: ContextOverflow,
}

/// What the simulator does with a prompt longer than its context ([`Script::context_limit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ContextOverflow {
    /// HTTP 400 with the protocol's error body naming both sizes, as vLLM, llama.cpp and the
    /// hosted APIs answer.
    #[default]
    Refuse,
    /// The prompt is cut from the left to the context and answered; its usage reports the
    /// context's size, and the start of the prompt (a long prompt's code word) is lost, as a
    /// server that truncates silently (Ollama's `num_ctx`, TGI's `truncate`).
    Truncate,
}

/// When the simulator sends its response headers ([`Script::headers`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum HeadersAt {
    /// As soon as the request is read, with the protocol's preamble.
    #[default]
    AtOnce,
    /// With the first token event (after the TTFT), or a write a fault makes before it.
    WithFirstToken,
}

impl Default for Script {
    fn default() -> Self {
        Script {
            ttft: Duration::from_millis(200),
            itl: Duration::from_millis(20),
            tokens: 64,
            tokens_per_event: 1,
            reasoning_tokens: 0,
            model: "llm-probe-simulator".into(),
            fault: Fault::None,
            fault_every: 1,
            load: Load::default(),
            answer: None,
            grammar_compile: Duration::ZERO,
            prefix_cache: false,
            headers: HeadersAt::AtOnce,
            rate_limit: 0,
            context_limit: 0,
            context_overflow: ContextOverflow::Refuse,
        }
    }
}

/// A request as the simulator received it (for tests: headers and body the probe sent).
#[derive(Debug, Clone)]
pub struct ReceivedRequest {
    /// Request path.
    pub path: String,
    /// Header names and values.
    pub headers: Vec<(String, String)>,
    /// Parsed JSON body (`Null` if it was not JSON).
    pub body: serde_json::Value,
    /// When the whole request had arrived (the origin of the scripted TTFT).
    pub arrived: std::time::Instant,
    /// When each token event was handed to the connection, in order: the simulator's actual
    /// send times, so that a benchmark can tell the simulator's own lateness (tokio's timer
    /// fires on millisecond ticks) from the client's.
    pub events_sent: Arc<Mutex<Vec<std::time::Instant>>>,
    /// The load model's decisions for this request (queue wait, jittered TTFT), set when the
    /// request got its slot; unset for requests that never streamed (HTTP errors, faults that
    /// end before the first token).
    pub truth: Arc<OnceLock<Truth>>,
}

/// How many received requests a simulator remembers (the most recent ones; at the demo's
/// two probes every 3 s, about 4 hours).
pub const RECEIVED_CAPACITY: usize = 10_000;

/// The most request body bytes the record keeps (the most recent requests; the newest one
/// always): long prompts (`prompt_tokens:` up to 6 MB a request) would otherwise make
/// [`RECEIVED_CAPACITY`] requests tens of gigabytes.
pub const RECEIVED_MAX_BYTES: usize = 256 << 20;

/// The requests a simulator remembers, and the size of each one's body as it arrived.
#[derive(Default)]
struct Received {
    requests: VecDeque<(ReceivedRequest, usize)>,
    bytes: usize,
}

/// Adds `request` (of a body of `bytes`) to the record, forgetting the oldest beyond
/// [`RECEIVED_CAPACITY`] requests or [`RECEIVED_MAX_BYTES`] bytes.
fn record(received: &Mutex<Received>, request: ReceivedRequest, bytes: usize) {
    let mut r = received.lock().unwrap_or_else(|e| e.into_inner());
    while !r.requests.is_empty()
        && (r.requests.len() >= RECEIVED_CAPACITY || r.bytes + bytes > RECEIVED_MAX_BYTES)
    {
        if let Some((_, n)) = r.requests.pop_front() {
            r.bytes -= n;
        }
    }
    r.bytes += bytes;
    r.requests.push_back((request, bytes));
}

/// A running simulator.
pub struct Simulator {
    /// Where it listens.
    pub addr: SocketAddr,
    received: Arc<Mutex<Received>>,
    shutdown: CancellationToken,
}

impl Simulator {
    /// Binds `addr` (use port 0 in tests) and serves `script` in the background until dropped.
    ///
    /// Errors: the address cannot be bound ([`ListenError`]).
    pub async fn start(addr: SocketAddr, script: Script) -> Result<Simulator, ListenError> {
        let listener = crate::server::bind(addr).await?;
        let addr = listener.local_addr().map_err(ListenError::LocalAddr)?;
        let received = Arc::new(Mutex::new(Received::default()));
        let shutdown = CancellationToken::new();
        let engine = Arc::new(Engine::new(script.load.clone()));
        let script = Arc::new(script);
        let rec = received.clone();
        let grammars = Arc::new(Mutex::new(std::collections::HashSet::new()));
        let streams = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let quota = (script.rate_limit > 0).then(|| Arc::new(quota::Quota::new(script.rate_limit)));
        tokio::spawn(crate::server::serve(
            listener,
            shutdown.clone(),
            move |req| {
                let grammars = grammars.clone();
                let script = script.clone();
                let engine = engine.clone();
                let rec = rec.clone();
                let streams = streams.clone();
                let quota = quota.clone();
                async move {
                    let streaming = req.uri().path() != "/metrics"
                        && protocol_for_path(req.uri().path()).is_some();
                    let script = if streaming && !hit(&script, &streams) {
                        Arc::new(Script {
                            fault: Fault::None,
                            ..(*script).clone()
                        })
                    } else {
                        script
                    };
                    handle(req, script, engine, rec, grammars, quota).await
                }
            },
        ));
        Ok(Simulator {
            addr,
            received,
            shutdown,
        })
    }

    /// The OpenAI-compatible base URL, e.g. `http://127.0.0.1:PORT/v1` (also for Anthropic).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The server root, e.g. `http://127.0.0.1:PORT`: the base URL of the Ollama, TGI,
    /// llama.cpp native and Azure protocols.
    pub fn root_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The streaming requests received so far, oldest first: the last
    /// [`RECEIVED_CAPACITY`] of them, within [`RECEIVED_MAX_BYTES`] of bodies (older ones are
    /// forgotten, so that a long `demo` or `simulate` run keeps a bounded record).
    pub fn received(&self) -> Vec<ReceivedRequest> {
        (self
            .received
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .requests)
            .iter()
            .map(|(r, _)| r.clone())
            .collect()
    }
}

impl Drop for Simulator {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

type Sender = mpsc::Sender<Result<Frame<Bytes>, std::io::Error>>;

/// A response body fed from a channel; an `Err` item aborts the connection mid-body.
pub struct ChannelBody(mpsc::Receiver<Result<Frame<Bytes>, std::io::Error>>);

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = std::io::Error;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.0.poll_recv(cx)
    }
}

fn response(
    status: StatusCode,
    content_type: &str,
    extra: &[(&str, &str)],
) -> (Sender, Response<ChannelBody>) {
    let (tx, rx) = mpsc::channel(64);
    let mut b = Response::builder()
        .status(status)
        .header("content-type", content_type)
        .header("server", "llm-probe-simulator");
    for (k, v) in extra {
        b = b.header(*k, *v);
    }
    (
        tx,
        b.body(ChannelBody(rx))
            .expect("static response parts are valid"),
    )
}

/// Whether this streaming request (counted in `streams`) is one the fault hits
/// ([`Script::fault_every`]).
fn hit(script: &Script, streams: &std::sync::atomic::AtomicU64) -> bool {
    let n = streams.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
    script.fault_every <= 1 || n.is_multiple_of(u64::from(script.fault_every))
}

async fn handle(
    req: Request<Incoming>,
    script: Arc<Script>,
    engine: Arc<Engine>,
    received: Arc<Mutex<Received>>,
    grammars: Arc<Mutex<std::collections::HashSet<String>>>,
    quota: Option<Arc<quota::Quota>>,
) -> Response<ChannelBody> {
    let path = req.uri().path().to_string();
    let headers = req
        .headers()
        .iter()
        .map(|(k, v)| {
            (
                k.to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    if path == "/metrics" {
        // The engine's own metrics, in vLLM's names (`server_metrics_url:` tests).
        let (tx, resp) = response(StatusCode::OK, "text/plain; version=0.0.4", &[]);
        let _ = tx.try_send(Ok(Frame::data(Bytes::from(
            engine.exposition(&script.model),
        ))));
        return resp;
    }
    if path.ends_with("/models") {
        let (tx, resp) = response(StatusCode::OK, "application/json", &[]);
        let body = json!({"object": "list", "data": [{"id": script.model, "object": "model", "owned_by": "llm-probe"}]});
        let _ = tx.try_send(Ok(Frame::data(Bytes::from(body.to_string()))));
        return resp;
    }
    let Some(wire) = protocol_for_path(&path).map(serve_wire) else {
        let (tx, resp) = response(StatusCode::NOT_FOUND, "application/json", &[]);
        let message = format!(
            "not found: {} (this server serves {}; /metrics: its load in vLLM's names)",
            crate::sanitize::terminal_safe(&path),
            served_paths()
        );
        let body = json!({"error": {"message": message}});
        let _ = tx.try_send(Ok(Frame::data(Bytes::from(body.to_string()))));
        return resp;
    };
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let arrival = Instant::now();
    let body_bytes = body.len();
    let body: serde_json::Value = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    let events_sent = Arc::new(Mutex::new(Vec::new()));
    let truth = Arc::new(OnceLock::new());
    let mut prompt = prompt_tokens(&body);
    let over_context = script.context_limit > 0 && prompt > script.context_limit;
    let refused = over_context && script.context_overflow == ContextOverflow::Refuse;
    if over_context {
        // Truncated from the left: what is answered is the context's end of the prompt.
        prompt = script.context_limit;
    }
    let max_tokens = wire.max_tokens(&body).unwrap_or(u64::MAX);
    let shape = Shape::of(&script, wire, &body, &grammars, over_context);
    let sent_prompt = prompt_tokens(&body);
    record(
        &received,
        ReceivedRequest {
            path,
            headers,
            body,
            arrived: arrival.into_std(),
            events_sent: events_sent.clone(),
            truth: truth.clone(),
        },
        body_bytes,
    );

    if refused {
        let (tx, resp) = response(StatusCode::BAD_REQUEST, "application/json", &[]);
        let limit = script.context_limit;
        let body = wire.context_error(sent_prompt, limit);
        let _ = tx.try_send(Ok(Frame::data(Bytes::from(body.to_string()))));
        return resp;
    }
    let mut quota_headers = Vec::new();
    if let Some(q) = &quota {
        let a = q.admit(std::time::Instant::now(), wire);
        let retry = a.retry_after.to_string();
        if !a.admitted {
            let mut extra: Vec<(&str, &str)> = a
                .headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            extra.push(("retry-after", &retry));
            let (tx, resp) = response(StatusCode::TOO_MANY_REQUESTS, "application/json", &extra);
            // Each provider's own error body for a rate limit.
            let body = Bytes::from_static(wire.rate_limit_body());
            let _ = tx.try_send(Ok(Frame::data(body)));
            return resp;
        }
        quota_headers = a.headers;
    }
    match script.fault {
        Fault::Http500 => {
            let (tx, resp) = response(StatusCode::INTERNAL_SERVER_ERROR, "application/json", &[]);
            let body = Bytes::from_static(wire.http_error_body(false));
            let _ = tx.try_send(Ok(Frame::data(body)));
            return resp;
        }
        Fault::Http429 => {
            let (tx, resp) = response(
                StatusCode::TOO_MANY_REQUESTS,
                "application/json",
                &[("retry-after", "7")],
            );
            let body = Bytes::from_static(wire.http_error_body(true));
            let _ = tx.try_send(Ok(Frame::data(body)));
            return resp;
        }
        Fault::Http529 => {
            let overloaded = StatusCode::from_u16(529).expect("529 is a valid status code");
            let (tx, resp) = response(overloaded, "application/json", &[("retry-after", "7")]);
            let _ = tx.try_send(Ok(Frame::data(Bytes::from_static(
                br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            ))));
            return resp;
        }
        Fault::NoHeaders => {
            // Hold the request without answering (bounded, so a forgotten client can't pin it).
            tokio::time::sleep(Duration::from_secs(120)).await;
        }
        _ => {}
    }
    let mut tokens = u64::from(script.tokens).min(max_tokens) as u32;
    if let Some(chars) = &shape.chars {
        tokens = tokens.min(u32::try_from(chars.len()).unwrap_or(u32::MAX));
    }
    let mut extra = vec![("cache-control", "no-cache")];
    extra.extend(quota_headers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let (tx, resp) = response(StatusCode::OK, wire.content_type(), &extra);
    let (headers_go, headers_wait) = match script.headers {
        HeadersAt::AtOnce => (None, None),
        HeadersAt::WithFirstToken => {
            let (tx, rx) = tokio::sync::oneshot::channel();
            (Some(tx), Some(rx))
        }
    };
    let load = LoadCtx {
        engine,
        truth,
        prompt,
        shape,
        headers_go,
    };
    tokio::spawn(stream(script, wire, tokens, arrival, tx, events_sent, load));
    if let Some(go) = headers_wait {
        // Fired (or dropped, by a stream that ends first) with the first write after the
        // preamble.
        let _ = go.await;
    }
    resp
}

/// The prompt words an earlier request already sent at the start of this one: the longest run
/// of leading messages (of `messages`, `input` or `contents`) that an earlier request began
/// with, or the whole prompt (`prompt`, `inputs`) seen before. Remembers this request's runs
/// in `seen` (cleared beyond 10,000 entries, as a cache evicts), each as a 64-bit digest of the
/// run (the digest of the run before it and the message), so that a request's entries take a
/// few bytes each, whatever the size of its prompt or the number of its messages.
fn cached_prefix(body: &serde_json::Value, seen: &Mutex<std::collections::HashSet<String>>) -> u64 {
    use std::hash::{Hash, Hasher};
    // SipHash with fixed keys: the same run gives the same digest for the whole process.
    let mut digest = std::hash::DefaultHasher::new();
    let list = ["messages", "input", "contents"]
        .iter()
        .find_map(|k| body.get(*k)?.as_array());
    let Some(list) = list else {
        let Some(p) = ["prompt", "inputs"].iter().find_map(|k| body.get(*k)) else {
            return 0;
        };
        p.to_string().hash(&mut digest);
        let key = format!("prompt:{:016x}", digest.finish());
        let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() > 10_000 {
            seen.clear();
        }
        return match seen.insert(key) {
            false => load::words(p),
            true => 0,
        };
    };
    // Each leading run's digest and words, before the lock is taken.
    let mut words = 0;
    let runs: Vec<(String, u64)> = list
        .iter()
        .map(|m| {
            m.to_string().hash(&mut digest);
            words += load::words(m);
            (format!("prefix:{:016x}", digest.finish()), words)
        })
        .collect();
    let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
    if seen.len() > 10_000 {
        seen.clear();
    }
    let (mut cached, mut hit) = (0, true);
    for (key, words) in runs {
        // A run seen before is cached only while every shorter run was too.
        hit &= !seen.insert(key);
        if hit {
            cached = words;
        }
    }
    cached
}

/// True when the request's conversation ends with a tool result, in any protocol's shape
/// (`role: tool`, `tool_result`, `functionResponse`, `toolResult`, `function_call_output`).
fn ends_with_tool_result(body: &serde_json::Value) -> bool {
    let last = ["messages", "input", "contents"]
        .iter()
        .find_map(|k| body.get(*k)?.as_array()?.last());
    let Some(last) = last else { return false };
    let text = last.to_string();
    last["role"] == "tool"
        || [
            "\"tool_result\"",
            "\"functionResponse\"",
            "\"toolResult\"",
            "\"function_call_output\"",
        ]
        .iter()
        .any(|k| text.contains(k))
}

/// The code word a generated long prompt gives at its start (`Remember this code word: X.`),
/// if the request carries one.
fn code_word(body: &serde_json::Value) -> Option<String> {
    const SAYS: &str = "Remember this code word: ";
    let text = body.to_string();
    let rest = &text[text.find(SAYS)? + SAYS.len()..];
    let word: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    (!word.is_empty()).then_some(word)
}

/// One request's view of the load model, and the signal its response headers wait for.
struct LoadCtx {
    engine: Arc<Engine>,
    truth: Arc<OnceLock<Truth>>,
    prompt: u64,
    shape: Shape,
    /// Fired by the first write after the preamble: the response headers wait for it
    /// ([`HeadersAt::WithFirstToken`]; dropped unfired, by a stream that ends first, it lets
    /// them go too).
    headers_go: Option<tokio::sync::oneshot::Sender<()>>,
}

/// What one request's answer looks like: scripted text or a tool call, and the grammar
/// compilation it pays.
struct Shape {
    /// The answer (or tool arguments) to spell, one character per event; `None`: ` t{k}`.
    chars: Option<Vec<char>>,
    /// The tool to call (a request with tools on a wire that has them), by name.
    tool: Option<String>,
    /// Added to the TTFT: [`Script::grammar_compile`] for a schema not seen before.
    grammar: Duration,
    /// Prompt words served from the prefix cache ([`Script::prefix_cache`] on): the leading
    /// messages of the prompt that an earlier request sent too. Any: a quarter of the TTFT.
    cached_words: u64,
}

impl Shape {
    fn of(
        script: &Script,
        wire: &dyn ServeWire,
        body: &serde_json::Value,
        grammars: &Mutex<std::collections::HashSet<String>>,
        truncated: bool,
    ) -> Shape {
        let tools = body
            .get("tools")
            .or_else(|| body.pointer("/toolConfig/tools"))
            .and_then(|t| t.as_array());
        let first_tool = tools.and_then(|t| t.first()).and_then(|t| {
            [
                "/function/name",
                "/name",
                "/functionDeclarations/0/name",
                "/toolSpec/name",
            ]
            .iter()
            .find_map(|p| t.pointer(p))
            .and_then(|n| n.as_str())
        });
        let choice_none = body.get("tool_choice").and_then(|c| c.as_str()) == Some("none")
            || body.pointer("/tool_choice/type").and_then(|c| c.as_str()) == Some("none")
            || body
                .pointer("/toolConfig/functionCallingConfig/mode")
                .and_then(|c| c.as_str())
                == Some("NONE");
        // After a tool result the model answers in text, as a model finishing a round trip.
        let tool = match first_tool {
            Some(n) if wire.has_tools() && !choice_none && !ends_with_tool_result(body) => {
                Some(n.to_string())
            }
            _ => None,
        };
        let schema = body.pointer("/response_format/json_schema/schema");
        let mut grammar = Duration::ZERO;
        if !script.grammar_compile.is_zero() && (schema.is_some() || tools.is_some()) {
            let key = format!("{schema:?}{tools:?}");
            let mut seen = grammars.lock().unwrap_or_else(|e| e.into_inner());
            if seen.len() > 10_000 {
                seen.clear();
            }
            if seen.insert(key) {
                grammar = script.grammar_compile;
            }
        }
        let cached_words = match script.prefix_cache {
            true => cached_prefix(body, grammars),
            false => 0,
        };
        // A long prompt's code word is answered when the prompt's start was kept.
        let needle = (!truncated).then(|| code_word(body)).flatten();
        let text = match (&script.answer, &tool, needle) {
            (Some(a), _, _) => Some(a.clone()),
            (None, Some(_), _) => Some("{}".to_string()),
            (None, None, Some(code)) => Some(format!("The code word is {code}.")),
            (None, None, None) => None,
        };
        Shape {
            chars: text.map(|t| t.chars().collect()),
            tool,
            grammar,
            cached_words,
        }
    }

    /// The text of the event carrying tokens `from .. from + n`.
    fn text(&self, script: &Script, from: u32, n: u32, last: bool) -> String {
        if let Some(chars) = &self.chars {
            let (a, b) = (from as usize, (from + n) as usize);
            let mut t: String = chars[a.min(chars.len())..b.min(chars.len())]
                .iter()
                .collect();
            if last {
                // The last event carries whatever the token cap left over.
                t.extend(chars.iter().skip(b));
            }
            return t;
        }
        match script.fault {
            Fault::RepetitionLoop => " again".repeat(n as usize),
            Fault::PunctuationOnly => "/".repeat(n as usize),
            Fault::SpecialToken if last => {
                let mut t: String = (0..n.saturating_sub(1))
                    .map(|i| format!(" t{}", from + i))
                    .collect();
                t.push_str("<|im_end|>");
                t
            }
            _ => (0..n).map(|i| format!(" t{}", from + i)).collect(),
        }
    }
}

/// Writes the scripted stream in `wire`'s shapes, recording when each token event was handed to
/// the connection in `events_sent`. The stream holds a slot of the load model from its first
/// token to its end. Returns early (dropping the sender ends the body) when the client goes away.
async fn stream(
    script: Arc<Script>,
    wire: &'static dyn ServeWire,
    tokens: u32,
    arrival: Instant,
    tx: Sender,
    events_sent: Arc<Mutex<Vec<std::time::Instant>>>,
    mut load: LoadCtx,
) {
    // Under `HeadersAt::WithFirstToken` the headers go with the first write after the
    // preamble: the first token, or whatever comes before it (a keep-alive comment, an error,
    // a fault's flood).
    let headers_signal = Mutex::new(load.headers_go.take());
    let headers_go = || {
        let go = headers_signal
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(go) = go {
            let _ = go.send(());
        }
    };
    let send_now = |b: Bytes| {
        let tx = tx.clone();
        async move { b.is_empty() || tx.send(Ok(Frame::data(b))).await.is_ok() }
    };
    let send = |b: Bytes| {
        headers_go();
        send_now(b)
    };
    let per_event = script.tokens_per_event.max(1);
    let events = tokens.div_ceil(per_event);
    let ctx = Ctx {
        model: script.model.clone(),
        tokens,
        reasoning: (script.reasoning_tokens > 0 || script.fault == Fault::EmptyAfterReasoning)
            && tokens > 0,
        reasoning_tokens: if script.fault == Fault::EmptyAfterReasoning {
            tokens
        } else {
            script.reasoning_tokens.min(tokens)
        },
        ttft: script.ttft,
        decode: script.itl * events.saturating_sub(1),
        prompt_tokens: load.prompt,
        cached_prompt_tokens: (script.prefix_cache)
            .then_some(load.shape.cached_words.min(load.prompt)),
    };
    if script.fault == Fault::DoneOnly {
        send(wire.terminator_only(&ctx)).await;
        return;
    }
    if !send_now(wire.preamble(&ctx)).await {
        return;
    }
    match script.fault {
        Fault::Endless => {
            headers_go();
            return endless(wire, &ctx, &tx).await;
        }
        Fault::HugeLine => {
            headers_go();
            return huge_line(wire, &tx).await;
        }
        Fault::ErrorOnly => {
            send(wire.error(&ctx, false)).await;
            return;
        }
        _ => {}
    }
    let (_slot, queued) = load.engine.admit().await;
    let origin = if queued { Instant::now() } else { arrival };
    let cached = load.shape.cached_words.min(load.prompt);
    let mut ttft = load.engine.ttft(script.ttft, load.prompt - cached);
    if cached > 0 {
        ttft /= 4;
    }
    let ttft = ttft + load.shape.grammar;
    let _ = load.truth.set(Truth {
        queue_wait: origin - arrival,
        ttft,
        prompt_tokens: load.prompt - cached,
    });
    if let (Fault::Keepalive, Some(comment)) = (script.fault, wire.keepalive()) {
        let mut t = arrival;
        while t + Duration::from_millis(10) < arrival + script.ttft {
            t += Duration::from_millis(10);
            tokio::time::sleep_until(t).await;
            if !send(comment.clone()).await {
                return;
            }
        }
    }
    let mut held = Vec::new();
    let (mut first_sent, mut last_sent) = (None, None);
    let mut sent_tokens = 0u32;
    let mut at = origin + ttft;
    for k in 0..events {
        if k > 0 {
            at += load.engine.itl(script.itl);
        }
        pace::sleep_until(at).await;
        let n = per_event.min(tokens - sent_tokens);
        let text = load.shape.text(&script, sent_tokens, n, k + 1 == events);
        let reasoning =
            sent_tokens < script.reasoning_tokens || script.fault == Fault::EmptyAfterReasoning;
        let switch = !reasoning && ctx.reasoning && sent_tokens > 0 && {
            // The previous event was the last reasoning one.
            sent_tokens - per_event.min(sent_tokens) < script.reasoning_tokens
        };
        let c = match &load.shape.tool {
            // Ollama and Gemini send the call whole, on the first event.
            Some(name) if wire.whole_tool_calls() => match (k, &load.shape.chars) {
                (0, Some(all)) => wire.tool_call(&ctx, Some(name), &all.iter().collect::<String>()),
                _ => wire.tool_call(&ctx, None, ""),
            },
            Some(name) => wire.tool_call(&ctx, (k == 0).then_some(name.as_str()), &text),
            None => wire.token(&ctx, &text, reasoning, switch, sent_tokens),
        };
        sent_tokens += n;
        if script.fault == Fault::Collapsed {
            held.push(c);
        } else {
            let now = Instant::now();
            first_sent.get_or_insert(now);
            last_sent = Some(now);
            events_sent
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(now.into_std());
            if !send(c).await {
                return;
            }
        }
        if k == 1 {
            let broken = match script.fault {
                Fault::InvalidJson => Some(wire.broken_json(&ctx)),
                Fault::InvalidUtf8 => Some(wire.invalid_utf8(&ctx)),
                _ => None,
            };
            if let Some(b) = broken {
                send(b).await;
                return;
            }
        }
        if k == 2 {
            match script.fault {
                Fault::ErrorAfterTokens => {
                    send(wire.error(&ctx, true)).await;
                    return;
                }
                Fault::Stall => {
                    tx.closed().await;
                    return;
                }
                Fault::Reset => {
                    let _ = tx
                        .send(Err(std::io::Error::new(
                            std::io::ErrorKind::ConnectionReset,
                            "simulated reset",
                        )))
                        .await;
                    return;
                }
                _ => {}
            }
        }
    }
    for c in held {
        if !send(c).await {
            return;
        }
    }
    // vLLM's per-request metrics: the instants this stream actually had (a late timer shows).
    let metrics = match first_sent {
        Some(first) if script.load.per_request_metrics => Some(RequestMetrics {
            queue: origin - arrival,
            first_token: first.saturating_duration_since(origin),
            generation: last_sent.map_or(Duration::ZERO, |l| l.saturating_duration_since(first)),
        }),
        _ => None,
    };
    let end = End {
        count: script.fault != Fault::NoUsage,
        terminator: script.fault != Fault::NoTerminator,
        metrics,
    };
    for b in wire.end(&ctx, end) {
        if !send(b).await {
            return;
        }
    }
}

/// Sub-millisecond waits for the scripted schedule. tokio's timer fires on whole-millisecond
/// ticks and parks with a millisecond timeout, so `tokio::time::sleep_until` woke the simulator
/// 1–2 ms after the scripted instant (measured in `BENCHMARKS.md`, table 1): the ground truth
/// was off by more than the client error it is meant to expose. One thread keeps the pending
/// deadlines in a heap and sleeps on a condition variable (a futex with a nanosecond timeout)
/// until the earliest, then wakes that task through a oneshot channel.
mod pace {
    use std::cmp::{Ordering, Reverse};
    use std::collections::BinaryHeap;
    use std::sync::{Condvar, Mutex, Once, OnceLock};
    use std::time::Instant;

    use tokio::sync::oneshot;

    struct Entry(Instant, oneshot::Sender<()>);
    impl PartialEq for Entry {
        fn eq(&self, other: &Self) -> bool {
            self.0 == other.0
        }
    }
    impl Eq for Entry {}
    impl PartialOrd for Entry {
        fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
            Some(self.cmp(other))
        }
    }
    impl Ord for Entry {
        fn cmp(&self, other: &Self) -> Ordering {
            self.0.cmp(&other.0)
        }
    }

    #[derive(Default)]
    struct Pacer {
        heap: Mutex<BinaryHeap<Reverse<Entry>>>,
        wake: Condvar,
    }

    static PACER: OnceLock<Pacer> = OnceLock::new();
    static THREAD: Once = Once::new();

    fn run(p: &'static Pacer) {
        // Linux lets a timed wait of a normal thread end up to 50 µs late ("timer slack", so that
        // wake-ups can be batched); the pacing thread asks for the tightest, 1 ns.
        #[cfg(target_os = "linux")]
        // SAFETY: PR_SET_TIMERSLACK takes one integer argument and only affects this thread.
        unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
        }
        let mut heap = p.heap.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let now = Instant::now();
            let next = heap.peek().map(|Reverse(e)| e.0);
            heap = match next {
                None => p.wake.wait(heap).unwrap_or_else(|e| e.into_inner()),
                Some(at) if at <= now => {
                    if let Some(Reverse(Entry(_, tx))) = heap.pop() {
                        let _ = tx.send(());
                    }
                    heap
                }
                Some(at) => {
                    p.wake
                        .wait_timeout(heap, at - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
    }

    /// Waits until `deadline` (tens of microseconds late at most on an idle machine).
    pub async fn sleep_until(deadline: tokio::time::Instant) {
        let deadline = deadline.into_std();
        if deadline <= Instant::now() {
            return;
        }
        let p = PACER.get_or_init(Pacer::default);
        THREAD.call_once(|| {
            std::thread::Builder::new()
                .name("llm-probe-sim-pace".into())
                .spawn(move || run(p))
                .expect("spawning the simulator's pacing thread");
        });
        let (tx, rx) = oneshot::channel();
        {
            let mut heap = p.heap.lock().unwrap_or_else(|e| e.into_inner());
            let earliest = heap.peek().is_none_or(|Reverse(e)| deadline < e.0);
            heap.push(Reverse(Entry(deadline, tx)));
            if earliest {
                p.wake.notify_one();
            }
        }
        let _ = rx.await;
    }
}

/// Token events as fast as the client reads them, in 64 KiB batches, until it goes away.
async fn endless(wire: &dyn ServeWire, ctx: &Ctx, tx: &Sender) {
    let one = wire.token(ctx, " t", false, false, 0);
    let batch: Bytes = one.repeat((64 * 1024) / one.len()).into();
    while tx.send(Ok(Frame::data(batch.clone()))).await.is_ok() {}
}

/// The protocol's line start and 100 MB of `a` without a line end, in 64 KiB pieces, until the
/// client goes away.
async fn huge_line(wire: &dyn ServeWire, tx: &Sender) {
    let prefix = Bytes::from_static(wire.huge_line_prefix());
    if tx.send(Ok(Frame::data(prefix))).await.is_err() {
        return;
    }
    let piece = Bytes::from(vec![b'a'; 64 * 1024]);
    for _ in 0..(100 * 1024 * 1024 / piece.len()) {
        if tx.send(Ok(Frame::data(piece.clone()))).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod record_tests {
    use super::*;

    #[test]
    fn the_prefix_cache_keeps_a_digest_per_run_not_the_prompt() {
        let seen = Mutex::new(std::collections::HashSet::new());
        let text = "word ".repeat(200);
        let msgs = |n: usize, last: &str| {
            let mut m: Vec<_> = (0..n)
                .map(|i| json!({"role": "user", "content": format!("{i} {text}")}))
                .collect();
            m.push(json!({"role": "user", "content": last}));
            json!({ "messages": m })
        };
        // 1,000 messages of 1 KB: the old keys (every leading run in full) took ~500 MB.
        assert_eq!(cached_prefix(&msgs(1000, "a"), &seen), 0);
        let bytes: usize = seen.lock().unwrap().iter().map(String::len).sum();
        assert!(bytes < 1001 * 32, "{bytes} bytes of keys");
        // The same leading messages with another end: all but the last are cached.
        let words = load::words(&msgs(1000, "")["messages"]);
        assert_eq!(cached_prefix(&msgs(1000, "b"), &seen), words);
        // A whole prompt seen before.
        let p = json!({ "prompt": text });
        assert_eq!(cached_prefix(&p, &seen), 0);
        assert_eq!(cached_prefix(&p, &seen), 200);
    }

    /// A request to the chat path numbered `n` (in its query), with no body.
    fn numbered(n: usize) -> ReceivedRequest {
        ReceivedRequest {
            path: format!("/v1/chat/completions?n={n}"),
            headers: Vec::new(),
            body: serde_json::Value::Null,
            arrived: std::time::Instant::now(),
            events_sent: Arc::default(),
            truth: Arc::default(),
        }
    }

    #[test]
    fn the_record_keeps_only_the_most_recent_requests() {
        let received = Mutex::new(Received::default());
        let request = numbered;
        for n in 0..RECEIVED_CAPACITY + 5 {
            record(&received, request(n), 10);
        }
        let r = &received.lock().unwrap().requests;
        assert_eq!(r.len(), RECEIVED_CAPACITY);
        assert!(r.front().unwrap().0.path.ends_with("n=5"));
        assert!(r
            .back()
            .unwrap()
            .0
            .path
            .ends_with(&format!("n={}", RECEIVED_CAPACITY + 4)));
    }

    #[test]
    fn the_record_keeps_only_so_many_bytes_of_bodies_but_always_the_newest() {
        let received = Mutex::new(Received::default());
        let request = numbered;
        // Requests of 6 MB (a prompt of a million tokens): 42 fit in 256 MiB, not 10,000.
        for n in 0..100 {
            record(&received, request(n), 6_000_000);
        }
        let r = received.lock().unwrap();
        assert_eq!(r.requests.len(), RECEIVED_MAX_BYTES / 6_000_000);
        assert!(r.bytes <= RECEIVED_MAX_BYTES);
        assert!(r.requests.back().unwrap().0.path.ends_with("n=99"));
        drop(r);
        // One larger than the whole budget is still kept, alone.
        record(&received, request(100), RECEIVED_MAX_BYTES + 1);
        let r = received.lock().unwrap();
        assert_eq!(r.requests.len(), 1);
        assert!(r.requests[0].0.path.ends_with("n=100"));
    }
}

#[cfg(test)]
mod headers_tests {
    use super::*;

    /// `--headers with-first-token`: the headers wait for the first token (the TTFT), and a
    /// fault that writes before any token (a flood, keep-alive comments, held tokens past the
    /// body channel's 64 frames) sends them with that write instead of waiting forever.
    #[tokio::test]
    async fn headers_with_the_first_token_come_with_the_first_write() {
        let client = reqwest::Client::new();
        let body = r#"{"model":"m","stream":true,"max_tokens":64,"messages":[{"role":"user","content":"hi"}]}"#;
        let cases = [
            (Fault::None, Duration::from_millis(300), true),
            (Fault::Endless, Duration::from_millis(300), false),
            (Fault::HugeLine, Duration::from_millis(300), false),
            (Fault::Collapsed, Duration::from_millis(300), true),
            (Fault::Keepalive, Duration::from_secs(2), false),
        ];
        for (fault, ttft, waits_for_the_ttft) in cases {
            let sim = Simulator::start(
                "127.0.0.1:0".parse().unwrap(),
                Script {
                    ttft,
                    itl: Duration::from_millis(1),
                    tokens: 64,
                    fault,
                    headers: HeadersAt::WithFirstToken,
                    ..Script::default()
                },
            )
            .await
            .unwrap();
            let sent = std::time::Instant::now();
            let response = tokio::time::timeout(
                Duration::from_secs(10),
                client
                    .post(format!("{}/chat/completions", sim.base_url()))
                    .header("content-type", "application/json")
                    .body(body)
                    .send(),
            )
            .await
            .unwrap_or_else(|_| panic!("{fault:?}: no response headers within 10 s"))
            .unwrap();
            let took = sent.elapsed();
            assert_eq!(response.status(), 200, "{fault:?}");
            if waits_for_the_ttft {
                assert!(
                    took >= ttft,
                    "{fault:?}: headers after {took:?}, before the TTFT"
                );
            } else {
                assert!(
                    took < ttft,
                    "{fault:?}: headers after {took:?}, not with the first write"
                );
            }
        }
    }
}
