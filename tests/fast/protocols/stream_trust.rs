//! What a probe makes of answers that are not the stream it asked for, over real loopback HTTP
//! from a small scripted server: a 2xx body that is no event stream (every protocol, every kind
//! of body), a stream compressed although the probe asked for `identity` (gzip, deflate, br and
//! zstd, each event compressed and flushed on its own), and the failure reason of every
//! transport fault, reached through host names that contain the words an error text would
//! (`tls`, `handshake`, `certificate`, `timeout`, `dns`, `reset`, …): the reason comes from the
//! error's type, never from its text.

use crate::common;

use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use llm_probe::config::Protocol;
use llm_probe::measure::{Anomaly, FailureReason, ProbeOutcome, TokenCountSource};
use llm_probe::probe::Limits;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

// ---- the scripted server --------------------------------------------------------------------

type Handler = Arc<dyn Fn(TcpStream) -> BoxFuture<'static, ()> + Send + Sync>;

/// A loopback server that hands every accepted connection to `handler`; returns its address and
/// the request heads it read (the handler reads them with [`read_request`]).
async fn server(handler: Handler) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tcp.set_nodelay(true).unwrap();
            tokio::spawn(handler(tcp));
        }
    });
    addr
}

/// Makes the connection's close a reset (RST), as a crashed server or a proxy's idle killer does.
#[allow(deprecated)] // SO_LINGER 0 is the point here: the close must not linger.
fn reset(tcp: &TcpStream) {
    tcp.set_linger(Some(Duration::ZERO)).unwrap();
}

/// One chunk of a chunked body.
fn chunk(bytes: &[u8]) -> Vec<u8> {
    let mut out = format!("{:x}\r\n", bytes.len()).into_bytes();
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
    out
}

/// A server that answers every request with `status`, `headers` and `body` (whole, with
/// `content-length`) and closes.
async fn fixed(status: &str, headers: &str, body: &'static [u8]) -> SocketAddr {
    let head = format!(
        "HTTP/1.1 {status}\r\n{headers}content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    server(Arc::new(move |mut tcp| {
        let head = head.clone();
        Box::pin(async move {
            common::read_request_head(&mut tcp).await;
            let _ = tcp.write_all(head.as_bytes()).await;
            let _ = tcp.write_all(body).await;
            let _ = tcp.shutdown().await;
        })
    }))
    .await
}

// ---- probing --------------------------------------------------------------------------------

fn failure(o: &ProbeOutcome) -> (FailureReason, String) {
    let f = o.result.as_ref().expect_err("the probe should fail");
    (f.reason, f.detail.clone())
}

// ---- a 2xx body that is not an event stream --------------------------------------------------

/// A whole, non-streamed answer in each protocol's own shape.
fn completion(p: Protocol) -> &'static [u8] {
    match p {
        Protocol::OpenAiChat | Protocol::AzureOpenAi => {
            br#"{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],"usage":{"completion_tokens":1}}"#
        }
        Protocol::OpenAiCompletions => {
            br#"{"id":"c1","object":"text_completion","choices":[{"index":0,"text":"Hi","finish_reason":"stop"}]}"#
        }
        Protocol::OpenAiResponses => {
            br#"{"id":"r1","object":"response","status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"Hi"}]}]}"#
        }
        Protocol::Anthropic => {
            br#"{"id":"m1","type":"message","role":"assistant","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn"}"#
        }
        Protocol::Ollama => {
            br#"{"model":"m","message":{"role":"assistant","content":"Hi"},"done":true,"eval_count":1}"#
        }
        Protocol::Tgi => br#"[{"generated_text":"Hi"}]"#,
        Protocol::LlamaCpp => br#"{"content":"Hi","stop":true,"tokens_predicted":1}"#,
        Protocol::Gemini | Protocol::VertexGemini => {
            br#"{"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1},"modelVersion":"m"}"#
        }
        Protocol::Bedrock => {
            br#"{"output":{"message":{"role":"assistant","content":[{"text":"Hi"}]}},"stopReason":"end_turn","usage":{"inputTokens":3,"outputTokens":1,"totalTokens":4}}"#
        }
    }
}

const HTML: &[u8] = b"<!DOCTYPE html>\r\n<html><head><title>502 Bad Gateway</title></head>\r\n<body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>\r\n";

/// One probe of `protocol` as these tests send it: at most 16 tokens, 20 ms of draining after
/// the end.
fn trust(protocol: Protocol) -> common::OneProbe {
    common::OneProbe::default()
        .protocol(protocol)
        .max_tokens(16)
        .limits(Limits {
            drain_after_end: Duration::from_millis(20),
            ..Limits::default()
        })
}

#[tokio::test]
async fn a_2xx_body_that_is_no_event_stream_says_what_came_back_in_every_protocol() {
    for &p in Protocol::ALL {
        // (content type header, body, what the detail must say)
        let cases: Vec<(&str, &'static [u8], Vec<&str>)> = vec![
            (
                "content-type: text/html\r\n",
                HTML,
                vec![
                    "HTTP 200 text/html",
                    "an HTML page \"502 Bad Gateway\"",
                    "<!DOCTYPE html> <html>",
                ],
            ),
            (
                "content-type: application/json\r\n",
                completion(p),
                vec![
                    "HTTP 200 application/json",
                    "a non-streamed completion",
                    "stream: true",
                ],
            ),
            (
                "content-type: text/event-stream\r\n",
                completion(p),
                vec!["HTTP 200 text/event-stream", "a non-streamed completion"],
            ),
            (
                "content-type: text/plain\r\n",
                b"Bad Gateway\n",
                vec!["HTTP 200 text/plain", "text without any event: Bad Gateway"],
            ),
            (
                "",
                HTML,
                vec!["HTTP 200 without a content type", "an HTML page"],
            ),
            (
                "content-type: text/event-stream\r\n",
                b"\n\n\r\n",
                vec!["HTTP 200 text/event-stream", "only blank lines"],
            ),
            (
                "content-type: text/event-stream\r\n",
                b"",
                vec!["HTTP 200 text/event-stream is not an event stream: an empty body"],
            ),
        ];
        // A whole answer as the stream's only event ("fake streaming"); a legacy completions
        // chunk and a whole completion look alike, so that one is a stream of one token (so
        // does a Gemini chunk: a short answer may come in one).
        let mut cases = cases;
        // (Bedrock's binary framing has no text events to wrap an answer in.)
        let one_chunk_is_a_stream = matches!(
            p,
            Protocol::OpenAiCompletions
                | Protocol::Ollama
                | Protocol::Gemini
                | Protocol::VertexGemini
                | Protocol::Bedrock
        );
        if !one_chunk_is_a_stream {
            let wrapped = [b"data: ", completion(p), b"\n\ndata: [DONE]\n\n"].concat();
            cases.push((
                "content-type: text/event-stream\r\n",
                Box::leak(wrapped.into_boxed_slice()),
                vec!["HTTP 200 text/event-stream", "a non-streamed completion"],
            ));
        }
        for (ct, body, wants) in cases {
            let addr = fixed("200 OK", ct, body).await;
            let o = trust(p)
                .timeout("3s")
                .at_root(&format!("http://{addr}"))
                .await;
            let (reason, detail) = failure(&o);
            let ctx = format!("{} / {ct:?}: {detail}", p.as_str());
            assert_eq!(reason, FailureReason::Decode, "{ctx}");
            for want in wants {
                assert!(detail.contains(want), "{want:?} missing: {ctx}");
            }
            assert!(!detail.contains("closed the stream"), "{ctx}");
            assert!(
                !detail.contains('\r') && !detail.contains('\n'),
                "the excerpt is one printable line: {ctx}"
            );
            assert_eq!(
                o.observations.anomalies,
                [],
                "no trailing bytes or non-JSON data: {ctx}"
            );
        }
    }
}

#[tokio::test]
async fn a_body_that_echoes_the_key_does_not_put_it_in_the_detail() {
    let echo: &'static [u8] = b"<html><body>Authorization: Bearer sk-echoed-key-1234</body></html>";
    for status in ["200 OK", "502 Bad Gateway"] {
        let addr = fixed(status, "content-type: text/html\r\n", echo).await;
        let yaml = format!(
            "scenarios:\n  - name: s\n    messages: [{{role: user, content: \"Hi\"}}]\n    max_tokens: 8\ntargets:\n  - name: t\n    protocol: openai-chat\n    base_url: http://{addr}/v1\n    model: m\n    api_key_env: KEY\n"
        );
        let env = |k: &str| (k == "KEY").then(|| "sk-echoed-key-1234".to_string());
        let cfg = llm_probe::config::parse(&yaml, "<test>", &env).unwrap();
        let o = common::probe_first(&cfg, None).await;
        let (_, detail) = failure(&o);
        assert!(
            detail.contains("Authorization: Bearer [redacted]"),
            "{detail}"
        );
        assert!(!detail.contains("sk-echoed"), "{detail}");
    }
}

#[tokio::test]
async fn a_json_error_object_with_200_is_the_servers_error() {
    for ct in [
        "content-type: application/json\r\n",
        "content-type: text/event-stream\r\n",
    ] {
        let addr = fixed("200 OK", ct, br#"{"error":{"message":"model not loaded"}}"#).await;
        let o = trust(Protocol::OpenAiChat)
            .timeout("3s")
            .at_root(&format!("http://{addr}"))
            .await;
        assert_eq!(
            failure(&o),
            (FailureReason::StreamError, "model not loaded".to_string()),
            "{ct}"
        );
    }
}

// ---- content codings ------------------------------------------------------------------------

/// A compressor that is flushed after every event.
trait Compressor: Send {
    /// Compresses `bytes`, flushes, returns what the flush produced.
    fn push(&mut self, bytes: &[u8]) -> Vec<u8>;
    /// Ends the coded stream (its trailer).
    fn end(self: Box<Self>) -> Vec<u8>;
}

macro_rules! flushed {
    ($t:ty, $finish:expr) => {
        impl Compressor for $t {
            fn push(&mut self, bytes: &[u8]) -> Vec<u8> {
                self.write_all(bytes).unwrap();
                self.flush().unwrap();
                std::mem::take(self.get_mut())
            }
            fn end(self: Box<Self>) -> Vec<u8> {
                #[allow(clippy::redundant_closure_call)]
                ($finish)(*self)
            }
        }
    };
}

flushed!(
    flate2::write::GzEncoder<Vec<u8>>,
    |e: flate2::write::GzEncoder<Vec<u8>>| e.finish().unwrap()
);
flushed!(
    flate2::write::ZlibEncoder<Vec<u8>>,
    |e: flate2::write::ZlibEncoder<Vec<u8>>| e.finish().unwrap()
);
flushed!(
    brotli::CompressorWriter<Vec<u8>>,
    |e: brotli::CompressorWriter<Vec<u8>>| e.into_inner()
);
flushed!(
    zstd::stream::write::Encoder<'static, Vec<u8>>,
    |e: zstd::stream::write::Encoder<'static, Vec<u8>>| e.finish().unwrap()
);

fn compressor(coding: &str) -> Box<dyn Compressor> {
    let fast = flate2::Compression::fast();
    match coding {
        "gzip" => Box::new(flate2::write::GzEncoder::new(Vec::new(), fast)),
        "deflate" => Box::new(flate2::write::ZlibEncoder::new(Vec::new(), fast)),
        "br" => Box::new(brotli::CompressorWriter::new(Vec::new(), 4096, 5, 22)),
        "zstd" => Box::new(zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap()),
        other => panic!("{other}"),
    }
}

const TOKENS: usize = 10;
const FIRST: Duration = Duration::from_millis(100);
const GAP: Duration = Duration::from_millis(15);

/// The events of a short stream: (offset from the request, bytes).
fn events(p: Protocol) -> Vec<(Duration, String)> {
    let at = |i: usize| FIRST + GAP * i as u32;
    let mut out = Vec::new();
    match p {
        Protocol::OpenAiChat => {
            out.push((Duration::ZERO, "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n".to_string()));
            for i in 0..TOKENS {
                out.push((at(i), format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"t{i} \"}}}}]}}\n\n")));
            }
            out.push((at(TOKENS - 1), format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"stop\"}}],\"usage\":{{\"completion_tokens\":{TOKENS}}}}}\n\ndata: [DONE]\n\n")));
        }
        Protocol::Ollama => {
            for i in 0..TOKENS {
                out.push((at(i), format!("{{\"model\":\"m\",\"message\":{{\"role\":\"assistant\",\"content\":\"t{i} \"}},\"done\":false}}\n")));
            }
            out.push((at(TOKENS - 1), format!("{{\"model\":\"m\",\"message\":{{\"role\":\"assistant\",\"content\":\"\"}},\"done\":true,\"eval_count\":{TOKENS}}}\n")));
        }
        other => panic!("{other}"),
    }
    out
}

/// A server that streams `p`'s events chunked, each compressed with `coding` (when given) and
/// flushed at its scripted offset; it records the request heads.
async fn coded_server(
    p: Protocol,
    coding: Option<&'static str>,
    heads: Arc<Mutex<Vec<String>>>,
) -> SocketAddr {
    server(Arc::new(move |mut tcp| {
        let heads = heads.clone();
        Box::pin(async move {
            let head = common::read_request_head(&mut tcp).await.to_ascii_lowercase();
            let start = Instant::now();
            heads.lock().unwrap().push(head);
            let ct = if p == Protocol::Ollama {
                "application/x-ndjson"
            } else {
                "text/event-stream"
            };
            let ce = coding.map_or(String::new(), |c| format!("content-encoding: {c}\r\n"));
            let resp = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: {ct}\r\n{ce}transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
            );
            tcp.write_all(resp.as_bytes()).await.unwrap();
            let mut z = coding.map(compressor);
            for (offset, ev) in events(p) {
                tokio::time::sleep_until(start + offset).await;
                let bytes = match &mut z {
                    Some(z) => z.push(ev.as_bytes()),
                    None => ev.into_bytes(),
                };
                if tcp.write_all(&chunk(&bytes)).await.is_err() {
                    return;
                }
            }
            if let Some(z) = z {
                let _ = tcp.write_all(&chunk(&z.end())).await;
            }
            let _ = tcp.write_all(b"0\r\n\r\n").await;
            let _ = tcp.shutdown().await;
        })
    }))
    .await
}

#[tokio::test]
async fn every_content_coding_is_decoded_read_by_read_and_flagged() {
    // Slack above the scripted instants on two busy cores.
    const SLACK: Duration = Duration::from_millis(60);
    for p in [Protocol::OpenAiChat, Protocol::Ollama] {
        for coding in [
            None,
            Some("gzip"),
            Some("deflate"),
            Some("br"),
            Some("zstd"),
        ] {
            let heads = Arc::new(Mutex::new(Vec::new()));
            let addr = coded_server(p, coding, heads.clone()).await;
            let o = trust(p)
                .timeout("3s")
                .at_root(&format!("http://{addr}"))
                .await;
            let ctx = format!("{} {coding:?}: {:?}", p.as_str(), o.result);
            let m = o.result.as_ref().unwrap_or_else(|_| panic!("{ctx}"));
            assert_eq!(m.token_events, TOKENS, "{ctx}");
            assert_eq!(m.output_tokens, TOKENS as u64, "{ctx}");
            assert_ne!(m.token_count_source, TokenCountSource::Events, "{ctx}");
            // The first token is the first event's read, not the role chunk's and not the end.
            assert!(
                m.ttft >= FIRST && m.ttft <= FIRST + SLACK,
                "TTFT {:?}: {ctx}",
                m.ttft
            );
            // Each event was decoded as its compressed bytes arrived: the tokens keep their
            // spread (a decoder that waited for the end would put them all at E2E).
            let spread = m.e2e.saturating_sub(m.ttft);
            assert!(
                spread >= GAP * (TOKENS as u32 - 1) - SLACK / 2,
                "spread {spread:?}: {ctx}"
            );
            let want: &[Anomaly] = match coding {
                Some(_) => &[Anomaly::CompressedStream],
                None => &[],
            };
            assert_eq!(o.observations.anomalies, want, "{ctx}");
            let heads = heads.lock().unwrap();
            assert!(
                heads[0].contains("\r\naccept-encoding: identity"),
                "the probe asks for identity: {}",
                heads[0]
            );
        }
    }
}

#[tokio::test]
async fn compressed_error_pages_are_shown_decoded() {
    let mut z = compressor("gzip");
    let mut page = z.push(HTML);
    page.extend(z.end());
    let page: &'static [u8] = Box::leak(page.into_boxed_slice());
    for status in ["200 OK", "503 Service Unavailable"] {
        let addr = fixed(
            status,
            "content-type: text/html\r\ncontent-encoding: gzip\r\n",
            page,
        )
        .await;
        let (_, detail) = failure(
            &trust(Protocol::OpenAiChat)
                .timeout("3s")
                .at_root(&format!("http://{addr}"))
                .await,
        );
        assert!(
            detail.contains("<title>502 Bad Gateway</title>"),
            "{status}: {detail}"
        );
    }
}

#[tokio::test]
async fn a_coding_the_probe_cannot_undo_is_named() {
    let sse = b"data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\ndata: [DONE]\n\n";
    let addr = fixed(
        "200 OK",
        "content-type: text/event-stream\r\ncontent-encoding: compress\r\n",
        sse,
    )
    .await;
    let (reason, detail) = failure(
        &trust(Protocol::OpenAiChat)
            .timeout("3s")
            .at_root(&format!("http://{addr}"))
            .await,
    );
    assert_eq!(reason, FailureReason::Decode);
    assert!(detail.contains("Content-Encoding \"compress\""), "{detail}");
    // Claimed gzip, sent plain: the detail names the coding, not a UTF-8 problem.
    let addr = fixed(
        "200 OK",
        "content-type: text/event-stream\r\ncontent-encoding: gzip\r\n",
        sse,
    )
    .await;
    let (reason, detail) = failure(
        &trust(Protocol::OpenAiChat)
            .timeout("3s")
            .at_root(&format!("http://{addr}"))
            .await,
    );
    assert_eq!(reason, FailureReason::Decode);
    assert!(
        detail.starts_with("the gzip-coded body does not decode"),
        "{detail}"
    );
}

// ---- failure reasons from the error's type --------------------------------------------------

/// Host names under `.localhost` (the probe resolves them to loopback) that contain the words a
/// text search for a reason would find.
const HOSTS: [&str; 10] = [
    "tls-gateway",
    "handshake",
    "certificate-proxy",
    "timeout",
    "dns-error",
    "connection-reset",
    "connection-closed",
    "incomplete-message",
    "failed-to-lookup-address",
    "tls-handshake-certificate-timeout-dns-reset-refused",
];

/// What a server does with a connection.
#[derive(Debug, Clone, Copy)]
enum Fault {
    /// Resets the connection as soon as it is accepted (before a response head).
    ResetAtOnce,
    /// Reads the request, closes without a response.
    CloseWithoutResponse,
    /// Answers with bytes that are not HTTP.
    GarbageHead,
    /// Sends the beginning of a response head, then closes.
    CutHead,
    /// Starts a chunked stream, then sends an invalid chunk-size line.
    BadChunkSize,
    /// Starts a stream, then resets the connection.
    ResetMidBody,
    /// Answers 204 No Content.
    NoContent,
    /// Redirects to a URL with user-info and a query.
    Redirect,
    /// Reads the request and never answers.
    Silent,
}

async fn faulty(fault: Fault) -> SocketAddr {
    server(Arc::new(move |mut tcp| {
        Box::pin(async move {
            if let Fault::ResetAtOnce = fault {
                reset(&tcp);
                return;
            }
            common::read_request_head(&mut tcp).await;
            let sse_head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
            let first = chunk(b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n");
            let out: Vec<u8> = match fault {
                Fault::ResetAtOnce | Fault::CloseWithoutResponse => Vec::new(),
                Fault::GarbageHead => b"SSH-2.0-OpenSSH_9.6\r\n\r\n".to_vec(),
                Fault::CutHead => b"HTTP/1.1 200 OK\r\ncontent-type: text/event-str".to_vec(),
                Fault::BadChunkSize | Fault::ResetMidBody => {
                    let mut v = sse_head.as_bytes().to_vec();
                    v.extend_from_slice(&first);
                    v
                }
                Fault::NoContent => b"HTTP/1.1 204 No Content\r\n\r\n".to_vec(),
                Fault::Redirect => b"HTTP/1.1 302 Found\r\nlocation: https://admin:hunter2@llm.example.com:8443/v2/chat?api_key=SECRET123#frag\r\ncontent-length: 0\r\n\r\n".to_vec(),
                Fault::Silent => {
                    tokio::time::sleep(Duration::from_secs(10)).await;
                    return;
                }
            };
            let _ = tcp.write_all(&out).await;
            match fault {
                Fault::BadChunkSize => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let _ = tcp.write_all(b"zz-not-hex\r\ndata: x\r\n").await;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Fault::ResetMidBody => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    reset(&tcp);
                }
                _ => {
                    let _ = tcp.shutdown().await;
                }
            }
        })
    }))
    .await
}

/// Probes `host.localhost:port` for every name in [`HOSTS`] and checks the reason; returns the
/// details.
async fn every_host(scheme: &str, port: u16, want: FailureReason, timeout: &str) -> Vec<String> {
    let mut details = Vec::new();
    for host in HOSTS {
        let o = trust(Protocol::OpenAiChat)
            .timeout(timeout)
            .at_root(&format!("{scheme}://{host}.localhost:{port}"))
            .await;
        let (reason, detail) = failure(&o);
        assert_eq!(reason, want, "{host}: {detail}");
        details.push(detail);
    }
    details
}

#[tokio::test]
async fn refused_reset_or_closed_before_a_response_is_connect_whatever_the_host_name() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    for scheme in ["http", "https"] {
        for d in every_host(scheme, port, FailureReason::Connect, "3s").await {
            assert!(d.starts_with("could not connect to "), "{d}");
        }
    }
    for fault in [Fault::ResetAtOnce, Fault::CloseWithoutResponse] {
        let addr = faulty(fault).await;
        every_host("http", addr.port(), FailureReason::Connect, "3s").await;
    }
}

#[tokio::test]
async fn a_broken_response_head_or_chunk_size_is_http_protocol() {
    for fault in [Fault::GarbageHead, Fault::BadChunkSize] {
        let addr = faulty(fault).await;
        every_host("http", addr.port(), FailureReason::HttpProtocol, "3s").await;
    }
}

/// A server that starts a response head and closes the connection in the middle of it answered:
/// not `connect` (which says the server never answered), but a malformed exchange whose detail
/// says how much of the head came. It was `connect` ("connection closed before message
/// completed", the same error hyper gives for a close without a byte).
#[tokio::test]
async fn a_response_head_cut_short_is_http_protocol() {
    let addr = faulty(Fault::CutHead).await;
    for d in every_host("http", addr.port(), FailureReason::HttpProtocol, "3s").await {
        assert!(
            d.contains("in the middle of the response head (45 bytes"),
            "{d}"
        );
    }
}

#[tokio::test]
async fn a_reset_mid_stream_is_truncated() {
    let addr = faulty(Fault::ResetMidBody).await;
    every_host("http", addr.port(), FailureReason::Truncated, "3s").await;
}

#[tokio::test]
async fn a_silent_server_is_a_timeout() {
    let addr = faulty(Fault::Silent).await;
    every_host("http", addr.port(), FailureReason::Timeout, "300ms").await;
}

#[tokio::test]
async fn no_content_and_redirects_are_http_status_and_a_redirect_names_where_without_secrets() {
    let addr = faulty(Fault::NoContent).await;
    for d in every_host("http", addr.port(), FailureReason::HttpStatus, "3s").await {
        assert!(
            d.starts_with(
                "HTTP 204 No Content from POST /v1/chat/completions: the server answered"
            ),
            "{d}"
        );
    }
    let addr = faulty(Fault::Redirect).await;
    for d in every_host("http", addr.port(), FailureReason::HttpStatus, "3s").await {
        assert!(
            d.starts_with("HTTP 302 Found from POST /v1/chat/completions, redirected to https://llm.example.com:8443/v2/chat?…"),
            "{d}"
        );
        for secret in ["admin", "hunter2", "SECRET123", "api_key", "frag"] {
            assert!(!d.contains(secret), "{secret} in {d}");
        }
    }
}

#[tokio::test]
async fn tls_failures_are_tls_whatever_the_host_name() {
    // Plain HTTP where TLS was expected; a server that closes during the handshake; a
    // certificate from an unknown CA.
    let addr = server(Arc::new(|mut tcp| {
        Box::pin(async move {
            let _ = tcp
                .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                .await;
            tokio::time::sleep(Duration::from_millis(500)).await;
        })
    }))
    .await;
    every_host("https", addr.port(), FailureReason::Tls, "3s").await;
    let addr = server(Arc::new(|tcp| {
        Box::pin(async move {
            let mut tcp = tcp;
            let mut hello = [0u8; 64];
            let _ = tcp.read(&mut hello).await;
        })
    }))
    .await;
    every_host("https", addr.port(), FailureReason::Tls, "3s").await;
    let pki = common::pki::pki();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![pki.server_cert.clone()], pki.server_key())
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let addr = server(Arc::new(move |tcp| {
        let acceptor = acceptor.clone();
        Box::pin(async move {
            let _ = acceptor.accept(tcp).await;
        })
    }))
    .await;
    for d in every_host("https", addr.port(), FailureReason::Tls, "3s").await {
        assert!(d.contains("certificate"), "{d}");
    }
}

#[tokio::test]
async fn an_unresolvable_name_is_dns_whatever_else_it_says() {
    for host in HOSTS {
        let o = trust(Protocol::OpenAiChat)
            .timeout("5s")
            .at_root(&format!("http://{host}.invalid:1"))
            .await;
        let (reason, detail) = failure(&o);
        assert_eq!(reason, FailureReason::Dns, "{host}: {detail}");
    }
}

#[tokio::test]
async fn a_stream_that_ends_just_before_the_deadline_is_not_a_timeout() {
    // The whole stream arrives 250 ms in, the deadline is 300 ms, and the probe then reads on
    // for its 100 ms drain while the server holds the connection open.
    let addr = server(Arc::new(|mut tcp| {
        Box::pin(async move {
            common::read_request_head(&mut tcp).await;
            tokio::time::sleep(Duration::from_millis(250)).await;
            let sse = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"},\"finish_reason\":\"stop\"}],\"usage\":{\"completion_tokens\":1}}\n\ndata: [DONE]\n\n";
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
            let _ = tcp.write_all(&[head.as_bytes(), &chunk(sse.as_bytes())].concat()).await;
            tokio::time::sleep(Duration::from_secs(2)).await;
        })
    }))
    .await;
    let yaml = format!(
        "defaults:\n  timeout: 300ms\n  interval: 10s\nscenarios:\n  - name: s\n    messages: [{{role: user, content: \"Hi\"}}]\n    max_tokens: 8\ntargets:\n  - name: t\n    protocol: openai-chat\n    base_url: http://{addr}/v1\n    model: m\n"
    );
    let cfg = llm_probe::config::parse(&yaml, "<test>", &|_| None).unwrap();
    let o = common::probe_first(&cfg, None).await;
    let m = o.result.as_ref().unwrap_or_else(|f| panic!("{f}"));
    assert!(
        m.e2e >= Duration::from_millis(250) && m.e2e < Duration::from_millis(300),
        "{m:?}"
    );
}

// ---- counts the server reports ------------------------------------------------------------

const HUGE_OPENAI: &[u8] = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"c\"},\"finish_reason\":\"stop\"}],\"usage\":{\"completion_tokens\":18446744073709551615,\"prompt_tokens\":18446744073709551615,\"prompt_tokens_details\":{\"cached_tokens\":18446744073709551615}}}\n\ndata: [DONE]\n\n";
const HUGE_GEMINI: &[u8] = b"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\"}],\"role\":\"model\"},\"index\":0}]}\n\ndata: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"b\"}],\"role\":\"model\"},\"index\":0}]}\n\ndata: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"c\"}],\"role\":\"model\"},\"finishReason\":\"STOP\",\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":18446744073709551615,\"candidatesTokenCount\":18446744073709551615,\"cachedContentTokenCount\":18446744073709551615}}\n\n";

#[tokio::test]
async fn a_count_far_above_the_request_is_not_believed_and_no_counter_wraps() {
    for (protocol, body) in [
        (Protocol::OpenAiChat, HUGE_OPENAI),
        (Protocol::Gemini, HUGE_GEMINI),
    ] {
        let addr = fixed("200 OK", "content-type: text/event-stream\r\n", body).await;
        let metrics = llm_probe::metrics::Metrics::new(&[]);
        for _ in 0..2 {
            let o = trust(protocol)
                .timeout("3s")
                .at_root(&format!("http://{addr}"))
                .await;
            let m = o
                .result
                .as_ref()
                .unwrap_or_else(|f| panic!("{protocol}: {f}"));
            // N from the three events, not 2^64 − 1 for a 16-token request.
            assert_eq!(
                (m.output_tokens, m.token_count_source),
                (3, TokenCountSource::Events),
                "{protocol}"
            );
            let usage = &o.observations.usage;
            assert_eq!(
                (usage.prompt_tokens, usage.cached_prompt_tokens),
                (None, None),
                "{protocol}"
            );
            assert!(
                o.observations
                    .anomalies
                    .contains(&Anomaly::CountAboveRequest),
                "{protocol}: {:?}",
                o.observations.anomalies
            );
            assert!(!o.observations.anomalies.contains(&Anomaly::MissingUsage));
            metrics.observe(&o);
        }
        let text = metrics.render(None).1;
        let value = |name: &str| {
            let line = text.lines().find(|l| l.starts_with(name));
            line.and_then(|l| l.rsplit(' ').next())
                .map(|v| v.parse::<f64>().unwrap())
        };
        assert_eq!(
            value("llm_probe_output_tokens_total"),
            Some(6.0),
            "{protocol}"
        );
        assert_eq!(value("llm_probe_prompt_tokens_total"), None, "{protocol}");
        let anomaly = text
            .lines()
            .find(|l| l.contains("kind=\"count_above_request\""))
            .unwrap_or_else(|| panic!("{protocol}: {text}"));
        assert!(anomaly.ends_with(" 2"), "{anomaly}");
    }
}
