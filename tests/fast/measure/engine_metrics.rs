//! Engine metrics beside the probe: the adapters on recorded
//! expositions (vLLM's and llama.cpp's captured from the real servers of `scripts/`, SGLang's,
//! TGI's and TensorRT-LLM's written from their documentation), the probe record and the gauges
//! against the simulator's own `/metrics` (its ground truth: requests waiting for a slot and
//! streams active), and hostile metrics servers, each a typed scrape failure that leaves the
//! probe itself unaffected.

use crate::common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use llm_probe::engine::{self, Adapter, Engine, ScrapeFailureReason};
use llm_probe::probe::Prober;
use llm_probe::simulate::{Load, Script};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/engine-metrics");

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!("{FIXTURES}/{name}")).unwrap()
}

#[test]
fn recorded_expositions_give_each_engines_three_numbers() {
    // (file, engine, waiting, running, KV ratio): the values written in the file.
    let cases = [
        (
            "vllm.txt",
            Engine::Vllm,
            Some(0.0),
            Some(1.0),
            Some(0.0027548209366391463),
        ),
        ("llamacpp.txt", Engine::LlamaCpp, Some(0.0), Some(0.0), None),
        (
            "sglang.txt",
            Engine::Sglang,
            Some(37.0),
            Some(28.0),
            Some(0.28),
        ),
        ("tgi.txt", Engine::Tgi, Some(6.0), Some(32.0), None),
        (
            "tensorrt-llm.txt",
            Engine::TensorrtLlm,
            Some(3.0),
            Some(12.0),
            Some(0.625),
        ),
    ];
    for (file, engine, waiting, running, kv) in cases {
        let text = fixture(file);
        for adapter in [Adapter::Auto, Adapter::Engine(engine)] {
            let l = engine::read(adapter, &text).unwrap_or_else(|f| panic!("{file}: {f:?}"));
            assert_eq!(l.engine, engine, "{file}");
            assert_eq!(l.requests_waiting, waiting, "{file} waiting");
            assert_eq!(l.requests_running, running, "{file} running");
            assert_eq!(l.kv_cache_usage_ratio, kv, "{file} KV ratio");
        }
        // Another engine's adapter finds none of its names there.
        let other = Engine::ALL.into_iter().find(|e| *e != engine).unwrap();
        let f = engine::read(Adapter::Engine(other), &text).unwrap_err();
        assert_eq!(
            f.reason,
            ScrapeFailureReason::MissingMetrics,
            "{file} as {other:?}"
        );
    }
}

#[test]
fn tensorrt_llm_names_are_read_with_dynamos_prefix_and_unprefixed() {
    for prefix in ["trtllm:", ""] {
        let text = format!(
            "{prefix}num_requests_waiting{{model_name=\"m\"}} 2\n{prefix}num_requests_running{{model_name=\"m\"}} 5\n{prefix}kv_cache_utilization{{model_name=\"m\"}} 0.5\n"
        );
        let l = engine::read(Adapter::Auto, &text).unwrap();
        assert_eq!(
            (
                l.engine,
                l.requests_waiting,
                l.requests_running,
                l.kv_cache_usage_ratio
            ),
            (Engine::TensorrtLlm, Some(2.0), Some(5.0), Some(0.5)),
            "{prefix:?}"
        );
    }
}

fn config(sim: &str, extra: &str) -> llm_probe::config::Config {
    common::parse(&format!(
        "defaults:\n  timeout: 5s\nscenarios:\n{}targets:\n  - name: sim\n    protocol: openai-chat\n    base_url: {sim}\n    model: sim-model\n{extra}",
        common::scenario("s", 4)
    ))
}

fn prober(cfg: &llm_probe::config::Config) -> (Prober, Arc<llm_probe::config::Scenario>) {
    let t = cfg.targets[0].clone();
    let s = t.scenarios[0].clone();
    (Prober::new(t).unwrap(), s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_records_the_simulators_queue_and_the_gauges_follow() {
    // One slot, a 1.5 s TTFT: one background stream runs, a second waits for the slot.
    let sim = common::simulator(Script {
        ttft: Duration::from_millis(1500),
        load: Load {
            slots: 1,
            ..Load::default()
        },
        ..common::stream(20, 2, 4)
    })
    .await;
    let metrics_url = format!("{}/metrics", sim.root_url());
    let body = serde_json::json!({"model": "m", "stream": true, "max_tokens": 2,
        "messages": [{"role": "user", "content": "hi"}]});
    let mut background = Vec::new();
    for _ in 0..2 {
        let url = format!("{}/chat/completions", sim.base_url());
        let body = body.clone();
        background.push(tokio::spawn(async move {
            let r = reqwest::Client::new()
                .post(url)
                .json(&body)
                .send()
                .await
                .unwrap();
            r.bytes().await.unwrap();
        }));
    }
    // Until the simulator's own account shows both.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = reqwest::get(&metrics_url)
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let l = engine::read(Adapter::Auto, &text).unwrap();
        if l.requests_waiting == Some(1.0) && l.requests_running == Some(1.0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the background streams never queued: {text}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cfg = config(
        &sim.base_url(),
        &format!("    timeout: 10s\n    server_metrics_url: {metrics_url}\n"),
    );
    let (p, s) = prober(&cfg);
    let o = p.probe(&s).await;
    assert!(o.is_success(), "{:?}", o.result);
    let load = o.observations.server_load.clone().unwrap().unwrap();
    assert_eq!(load.engine, Engine::Vllm);
    assert_eq!(
        load.requests_waiting,
        Some(1.0),
        "the second background stream"
    );
    assert_eq!(
        load.requests_running,
        Some(1.0),
        "the first background stream"
    );
    assert_eq!(
        load.kv_cache_usage_ratio,
        Some(1.0),
        "the only slot is taken"
    );
    // The probe record (probe-once JSON, the status page's probe record).
    let json = llm_probe::report::to_json(&o);
    assert_eq!(
        json["server_load"],
        serde_json::json!({"engine": "vllm", "requests_waiting": 1.0, "requests_running": 1.0,
            "kv_cache_usage_ratio": 1.0, "error": null})
    );
    assert!(llm_probe::report::to_text(&o)
        .contains("engine      vllm: 1 waiting, 1 running, KV cache 100.0 %"));
    // The gauges, with the target's labels.
    let m = llm_probe::metrics::Metrics::new(&[]);
    m.register_server_metrics("sim", "sim-model");
    m.observe(&o);
    let (_, text) = m.render(None);
    let l = [("target", "sim"), ("model", "sim-model")];
    assert_eq!(
        common::sample(&text, "llm_probe_server_requests_waiting", &l),
        Some(1.0)
    );
    assert_eq!(
        common::sample(&text, "llm_probe_server_requests_running", &l),
        Some(1.0)
    );
    assert_eq!(
        common::sample(&text, "llm_probe_server_kv_cache_usage_ratio", &l),
        Some(1.0)
    );
    for reason in ScrapeFailureReason::ALL {
        let l = [("target", "sim"), ("reason", reason.as_str())];
        let name = "llm_probe_server_metrics_scrape_failures_total";
        assert_eq!(
            common::sample(&text, name, &l),
            Some(0.0),
            "{reason:?} at zero"
        );
    }
    for b in background {
        b.await.unwrap();
    }
}

/// What a hostile metrics server does with each request.
#[derive(Clone, Copy)]
enum Hostile {
    Huge,
    HugeDeclared,
    Garbage,
    NotUtf8,
    NaN,
    Slow,
    Status503,
    Unknown,
    Valid,
    /// A 302 to the given address (another host name: `localhost` instead of `127.0.0.1`).
    Redirect(SocketAddr),
    /// A gzip body declared with `Content-Encoding: gzip` (a bomb would be the same bytes).
    Gzip,
    /// A valid exposition, one byte per 200 ms.
    Drip,
    /// A 200 whose head is 1 MiB of headers (more than any client reads of a head).
    HugeHead,
    /// An answer that is not HTTP at all.
    NotHttp,
    /// Valid but awkward: CRLF line ends, comments with odd bytes, duplicate families,
    /// exponent floats, `+Inf` on a metric nobody reads, a huge label value.
    Awkward,
}

/// A raw HTTP/1.1 server on a loopback port 0 that answers every request as `how` says, and
/// keeps each request's head.
async fn hostile(how: Hostile) -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = heads.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                seen.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&head).into_owned());
                let ok = |body: &[u8]| {
                    let mut r = format!("HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", body.len()).into_bytes();
                    r.extend_from_slice(body);
                    r
                };
                let reply = match how {
                    Hostile::Huge => {
                        // Chunked, no length: 64 KiB chunks until the reader stops.
                        let _ = sock.write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n").await;
                        let line = format!("vllm:num_requests_waiting{{pad=\"{}\"}} 1\n", "x".repeat(100));
                        let chunk = line.repeat(65536 / line.len());
                        for _ in 0..200 {
                            let frame = format!("{:x}\r\n{chunk}\r\n", chunk.len());
                            if sock.write_all(frame.as_bytes()).await.is_err() {
                                return;
                            }
                        }
                        return;
                    }
                    Hostile::HugeDeclared => b"HTTP/1.1 200 OK\r\ncontent-length: 999999999\r\n\r\nvllm:num_requests_waiting 1\n".to_vec(),
                    Hostile::Garbage => ok(b"<html><body>Gateway says hello</body></html>\n"),
                    Hostile::NotUtf8 => ok(b"vllm:num_requests_waiting 1\n\xff\xfe\x00garbage\n"),
                    Hostile::NaN => ok(b"vllm:num_requests_waiting NaN\nvllm:num_requests_running 1\n"),
                    Hostile::Slow => {
                        tokio::time::sleep(Duration::from_secs(30)).await;
                        return;
                    }
                    Hostile::HugeHead => {
                        let mut r = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n".to_vec();
                        for i in 0..16 * 1024 {
                            r.extend_from_slice(format!("x-pad-{i:05}: {}\r\n", "a".repeat(50)).as_bytes());
                        }
                        r.extend_from_slice(b"content-length: 28\r\nconnection: close\r\n\r\nvllm:num_requests_waiting 1\n");
                        r
                    }
                    Hostile::NotHttp => b"SSH-2.0-OpenSSH_9.6\r\nProtocol mismatch.\r\n".to_vec(),
                    Hostile::Status503 => b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_vec(),
                    Hostile::Unknown => ok(b"# TYPE up gauge\nup 1\nprocess_open_fds 12\n"),
                    Hostile::Valid => ok(b"vllm:num_requests_waiting{engine=\"0\"} 4\nvllm:num_requests_running{engine=\"0\"} 2\n"),
                    Hostile::Redirect(to) => format!("HTTP/1.1 302 Found\r\nlocation: http://localhost:{}/metrics\r\ncontent-length: 0\r\nconnection: close\r\n\r\n", to.port()).into_bytes(),
                    Hostile::Gzip => {
                        // The gzip of "vllm:num_requests_waiting 1\n" is not needed: any
                        // gzip stream (here its 10-byte header and an empty deflate block).
                        let body = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00";
                        let mut r = format!("HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-encoding: gzip\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", body.len()).into_bytes();
                        r.extend_from_slice(body);
                        r
                    }
                    Hostile::Drip => {
                        let body = b"vllm:num_requests_waiting 1\nvllm:num_requests_running 1\n";
                        let headers = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", body.len());
                        let _ = sock.write_all(headers.as_bytes()).await;
                        for b in body {
                            tokio::time::sleep(Duration::from_millis(200)).await;
                            if sock.write_all(&[*b]).await.is_err() {
                                return;
                            }
                        }
                        return;
                    }
                    Hostile::Awkward => {
                        let mut body = b"# HELP vllm:num_requests_waiting \xc3\xa9\xe2\x80\x8b \\ odd \"bytes\"\r\n\
                            # TYPE vllm:num_requests_waiting gauge\r\n\
                            # TYPE vllm:num_requests_waiting gauge\r\n\
                            #\x01\x7f comment\r\n\
                            vllm:num_requests_waiting{engine=\"0\"} 1.5e1\r\n\
                            vllm:num_requests_waiting{engine=\"1\"} 2E0 1700000000000\r\n\
                            vllm:num_requests_running{engine=\"0\"} -0\r\n\
                            vllm:kv_cache_usage_perc{engine=\"0\"} 2.5e-1\r\n\
                            vllm:e2e_request_latency_seconds_bucket{le=\"+Inf\"} +Inf\r\n".to_vec();
                        body.extend_from_slice(format!("vllm:iteration_tokens_total{{x=\"{}\"}} 1\r\n", "\u{e9}".repeat(100_000)).as_bytes());
                        ok(&body)
                    }
                };
                let _ = sock.write_all(&reply).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    (addr, heads)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_metrics_servers_are_typed_scrape_failures_and_the_probe_is_unaffected() {
    let sim = common::simulator(common::stream(20, 2, 4)).await;
    let refused = common::free_port();
    let cases: [(Option<Hostile>, ScrapeFailureReason); 11] = [
        (Some(Hostile::Huge), ScrapeFailureReason::TooLarge),
        (Some(Hostile::HugeDeclared), ScrapeFailureReason::TooLarge),
        // The engine answered: a head too big to read, or not HTTP, is not a connect failure.
        (Some(Hostile::HugeHead), ScrapeFailureReason::TooLarge),
        (Some(Hostile::NotHttp), ScrapeFailureReason::Malformed),
        (Some(Hostile::Garbage), ScrapeFailureReason::Malformed),
        (Some(Hostile::NotUtf8), ScrapeFailureReason::Malformed),
        (Some(Hostile::NaN), ScrapeFailureReason::InvalidValue),
        (Some(Hostile::Slow), ScrapeFailureReason::Timeout),
        (Some(Hostile::Status503), ScrapeFailureReason::HttpStatus),
        (Some(Hostile::Unknown), ScrapeFailureReason::UnknownEngine),
        (None, ScrapeFailureReason::Connect),
    ];
    let m = llm_probe::metrics::Metrics::new(&[]);
    m.register_server_metrics("sim", "sim-model");
    // A good read first: its gauges must go when a read fails.
    let (good, _) = hostile(Hostile::Valid).await;
    let cfg = config(
        &sim.base_url(),
        &format!("    server_metrics_url: http://{good}/metrics\n"),
    );
    let (p, s) = prober(&cfg);
    let o = p.probe(&s).await;
    m.observe(&o);
    let l = [("target", "sim")];
    let (_, text) = m.render(None);
    assert_eq!(
        common::sample(&text, "llm_probe_server_requests_waiting", &l),
        Some(4.0)
    );
    let mut counted = std::collections::HashMap::new();
    for (how, reason) in cases {
        let addr = match how {
            Some(h) => hostile(h).await.0.to_string(),
            None => format!("127.0.0.1:{refused}"),
        };
        // A 1 s timeout: the scrape's budget is the smaller of 2 s and the timeout.
        let cfg = config(
            &sim.base_url(),
            &format!("    timeout: 1s\n    server_metrics_url: http://{addr}/metrics\n"),
        );
        let (p, s) = prober(&cfg);
        let started = Instant::now();
        let o = p.probe(&s).await;
        let took = started.elapsed();
        assert!(
            o.is_success(),
            "{reason:?}: the probe failed: {:?}",
            o.result
        );
        let f = o.observations.server_load.clone().unwrap().unwrap_err();
        assert_eq!(f.reason, reason, "{}", f.detail);
        assert!(
            !f.detail.contains(&addr),
            "no URL in the detail: {}",
            f.detail
        );
        // Bounded: the budget (1 s) plus the probe itself, with room for a busy machine.
        assert!(took < Duration::from_secs(4), "{reason:?} took {took:?}");
        let json = llm_probe::report::to_json(&o);
        assert_eq!(json["server_load"]["error"]["reason"], reason.as_str());
        assert!(json["server_load"]["requests_waiting"].is_null());
        m.observe(&o);
        let (_, text) = m.render(None);
        let name = "llm_probe_server_metrics_scrape_failures_total";
        let lr = [("target", "sim"), ("reason", reason.as_str())];
        let n = counted.entry(reason).or_insert(0.0);
        *n += 1.0;
        assert_eq!(common::sample(&text, name, &lr), Some(*n), "{reason:?}");
        assert_eq!(
            common::sample(&text, "llm_probe_server_requests_waiting", &l),
            None,
            "{reason:?}: a failed read leaves no stale gauge"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_key_goes_to_the_metrics_url_only_when_asked() {
    let sim = common::simulator(common::stream(20, 2, 4)).await;
    for (opt_in, sent) in [
        ("", false),
        ("    server_metrics_send_api_key: true\n", true),
    ] {
        let (addr, heads) = hostile(Hostile::Valid).await;
        let text = format!(
            "scenarios:\n{}targets:\n  - name: sim\n    protocol: openai-chat\n    base_url: {}\n    model: m\n    api_key_env: ENGINE_KEY\n    server_metrics_url: http://{addr}/metrics\n{opt_in}",
            common::scenario("s", 4),
            sim.base_url()
        );
        let cfg = llm_probe::config::parse(&text, "<test>", &|k| {
            (k == "ENGINE_KEY").then(|| "sk-engine-secret".to_string())
        })
        .unwrap();
        let (p, s) = prober(&cfg);
        let o = p.probe(&s).await;
        assert!(o.observations.server_load.clone().unwrap().is_ok());
        let head = heads.lock().unwrap().join("").to_ascii_lowercase();
        assert!(head.starts_with("get /metrics http/1.1"), "{head}");
        assert_eq!(
            head.contains("authorization: bearer sk-engine-secret"),
            sent,
            "{head}"
        );
    }
}

#[test]
fn bad_server_metrics_keys_name_the_field_and_the_fix() {
    let err = |extra: &str| {
        let text = format!(
            "scenarios:\n{}targets:\n  - name: t\n    protocol: openai-chat\n    base_url: http://127.0.0.1:1/v1\n    model: m\n{extra}",
            common::scenario("s", 4)
        );
        llm_probe::config::parse(&text, "f.yaml", &|_| None)
            .unwrap_err()
            .to_string()
    };
    let e = err("    server_metrics_url: 127.0.0.1:8000/metrics\n");
    assert!(e.contains("targets[0].server_metrics_url: target \"t\": server_metrics_url \"127.0.0.1:8000/metrics\" is not an absolute http(s) URL"), "{e}");
    let e = err("    server_metrics_url: http://user:hunter2@h/metrics\n");
    assert!(
        e.contains("server_metrics_url contains a user name or password") && !e.contains("hunter2"),
        "{e}"
    );
    let e = err("    server_metrics_url: http://h/metrics\n    server_metrics_adapter: vLLM\n");
    assert!(e.contains("targets[0].server_metrics_adapter: target \"t\": server_metrics_adapter \"vLLM\" is not known; use one of: auto, vllm, sglang, tgi, llama-cpp, tensorrt-llm"), "{e}");
    let e = err("    server_metrics_adapter: vllm\n");
    assert!(
        e.contains("server_metrics_adapter is set but server_metrics_url is not"),
        "{e}"
    );
    let e = err("    server_metrics_url: http://h/metrics#x\n");
    assert!(e.contains("has a fragment"), "{e}");
    // Accepted: a query, https, an explicit adapter.
    let ok = format!(
        "scenarios:\n{}targets:\n  - name: t\n    protocol: openai-chat\n    base_url: http://127.0.0.1:1/v1\n    model: m\n    server_metrics_url: https://h:9400/prometheus/metrics?x=1\n    server_metrics_adapter: tensorrt-llm\n",
        common::scenario("s", 4)
    );
    let cfg = common::parse(&ok);
    let sm = cfg.targets[0].server_metrics.as_ref().unwrap();
    assert_eq!(sm.adapter, Adapter::Engine(Engine::TensorrtLlm));
    assert!(!sm.send_api_key);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_exports_the_engine_load_and_zeroed_failure_counters() {
    let sim = common::simulator(common::stream(20, 2, 4)).await;
    let yaml = format!(
        "defaults:\n  interval: 1s\n  timeout: 1s\nscenarios:\n{}targets:\n  - name: sim\n    protocol: openai-chat\n    base_url: {}\n    model: sim-model\n    server_metrics_url: {}/metrics\n  - name: plain\n    protocol: openai-chat\n    base_url: {}\n    model: sim-model\n",
        common::scenario("s", 4),
        sim.base_url(),
        sim.root_url(),
        sim.base_url()
    );
    let d = common::daemon(common::parse(&yaml)).await;
    let mut rx = d.subscribe();
    let outs = common::outcomes(&mut rx, 4, Duration::from_secs(20)).await;
    let with = outs
        .iter()
        .find(|o| &*o.target == "sim")
        .expect("a probe of sim");
    let load = with.observations.server_load.clone().unwrap().unwrap();
    assert_eq!(
        (load.requests_waiting, load.requests_running),
        (Some(0.0), Some(0.0))
    );
    let without = outs
        .iter()
        .find(|o| &*o.target == "plain")
        .expect("a probe of plain");
    assert!(without.observations.server_load.is_none());
    let (_, _, text) = common::get(d.addr, "/metrics", None).await;
    let sim_l = [("target", "sim"), ("model", "sim-model")];
    assert_eq!(
        common::sample(&text, "llm_probe_server_requests_waiting", &sim_l),
        Some(0.0)
    );
    assert_eq!(
        common::sample(&text, "llm_probe_server_kv_cache_usage_ratio", &sim_l),
        Some(0.0)
    );
    let failures = "llm_probe_server_metrics_scrape_failures_total";
    for reason in ScrapeFailureReason::ALL {
        let l = [("target", "sim"), ("reason", reason.as_str())];
        assert_eq!(common::sample(&text, failures, &l), Some(0.0), "{reason:?}");
    }
    // A target without server_metrics_url has none of these series.
    let plain = [("target", "plain")];
    assert_eq!(common::sample(&text, failures, &plain), None);
    assert_eq!(
        common::sample(&text, "llm_probe_server_requests_waiting", &plain),
        None
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_gzip_and_slow_drips_are_typed_failures_and_the_key_does_not_follow() {
    let sim = common::simulator(common::stream(20, 2, 4)).await;
    // The redirect's destination: it must see no request at all (a redirect is not followed,
    // so the API key cannot leak to another host).
    let (elsewhere, elsewhere_heads) = hostile(Hostile::Valid).await;
    for (how, reason) in [
        (
            Hostile::Redirect(elsewhere),
            ScrapeFailureReason::HttpStatus,
        ),
        (Hostile::Gzip, ScrapeFailureReason::Malformed),
        (Hostile::Drip, ScrapeFailureReason::Timeout),
    ] {
        let (addr, heads) = hostile(how).await;
        let text = format!(
            "scenarios:\n{}targets:\n  - name: sim\n    protocol: openai-chat\n    base_url: {}\n    model: m\n    timeout: 1s\n    api_key_env: ENGINE_KEY\n    server_metrics_url: http://{addr}/metrics\n    server_metrics_send_api_key: true\n",
            common::scenario("s", 4),
            sim.base_url()
        );
        let cfg = llm_probe::config::parse(&text, "<test>", &|k| {
            (k == "ENGINE_KEY").then(|| "sk-engine-secret".to_string())
        })
        .unwrap();
        let (p, s) = prober(&cfg);
        let started = Instant::now();
        let o = p.probe(&s).await;
        let took = started.elapsed();
        assert!(o.is_success(), "{reason:?}: {:?}", o.result);
        let f = o.observations.server_load.clone().unwrap().unwrap_err();
        assert_eq!(f.reason, reason, "{}", f.detail);
        // The drip's 56 bytes take 11 s; the budget is the 1 s timeout.
        assert!(took < Duration::from_secs(4), "{reason:?} took {took:?}");
        let json = llm_probe::report::to_json(&o).to_string();
        assert!(!json.contains("sk-engine-secret"), "{json}");
        assert!(!f.detail.contains("localhost"), "{}", f.detail);
        // The first server got the key (opt-in) …
        let head = heads.lock().unwrap().join("").to_ascii_lowercase();
        assert!(
            head.contains("authorization: bearer sk-engine-secret"),
            "{head}"
        );
    }
    // … the redirect's destination nothing.
    assert!(
        elsewhere_heads.lock().unwrap().is_empty(),
        "{:?}",
        elsewhere_heads.lock().unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn awkward_but_valid_expositions_are_read() {
    let sim = common::simulator(common::stream(20, 2, 4)).await;
    let (addr, _) = hostile(Hostile::Awkward).await;
    let cfg = config(
        &sim.base_url(),
        &format!("    server_metrics_url: http://{addr}/metrics\n"),
    );
    let (p, s) = prober(&cfg);
    let o = p.probe(&s).await;
    let l = o.observations.server_load.clone().unwrap().unwrap();
    assert_eq!(
        (
            l.requests_waiting,
            l.requests_running,
            l.kv_cache_usage_ratio
        ),
        (Some(17.0), Some(0.0), Some(0.25))
    );
    let json = llm_probe::report::to_json(&o);
    assert_eq!(json["server_load"]["requests_running"].to_string(), "0.0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_changes_the_metrics_url_leaves_no_stale_gauges() {
    let sim = common::simulator(common::stream(20, 2, 4)).await;
    let (valid, _) = hostile(Hostile::Valid).await;
    // The new URL answers after 30 s (the scrape's budget is 2 s): right after the reload no
    // read of it has ended, so a gauge then is left from the old URL.
    let (slow, _) = hostile(Hostile::Slow).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("probes.yaml");
    let file = |url: Option<String>| {
        format!(
            "defaults:\n  interval: 3s\n  timeout: 3s\nscenarios:\n{}targets:\n  - name: sim\n    protocol: openai-chat\n    base_url: {}\n    model: sim-model\n{}",
            common::scenario("s", 4),
            sim.base_url(),
            url.map_or(String::new(), |u| format!("    server_metrics_url: {u}\n"))
        )
    };
    std::fs::write(&path, file(Some(format!("http://{valid}/metrics")))).unwrap();
    let cfg = llm_probe::config::load(&path).unwrap();
    let d =
        llm_probe::daemon::Daemon::start(cfg, "127.0.0.1:0".parse().unwrap(), Some(path.clone()))
            .await
            .unwrap();
    let mut rx = d.subscribe();
    common::outcomes(&mut rx, 1, Duration::from_secs(20)).await;
    let l = [("target", "sim")];
    let waiting = |text: &str| common::sample(text, "llm_probe_server_requests_waiting", &l);
    let (_, _, text) = common::get(d.addr, "/metrics", None).await;
    assert_eq!(waiting(&text), Some(4.0), "the first URL's number");
    // Another engine: its numbers are not known until its first read.
    std::fs::write(&path, file(Some(format!("http://{slow}/metrics")))).unwrap();
    d.reload().await.unwrap();
    let (_, _, text) = common::get(d.addr, "/metrics", None).await;
    assert_eq!(waiting(&text), None, "a gauge left from the old URL");
    // The URL removed: gauges and failure counters go.
    std::fs::write(&path, file(None)).unwrap();
    d.reload().await.unwrap();
    let (_, _, text) = common::get(d.addr, "/metrics", None).await;
    assert!(
        !text.contains("llm_probe_server_"),
        "{}",
        text.lines()
            .filter(|l| l.contains("llm_probe_server_"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    d.stop().await;
}

#[test]
fn hostile_server_metrics_urls_are_refused_without_echoing_secrets_or_escapes() {
    let parse = |url: &str| {
        let text = format!(
            "scenarios:\n{}targets:\n  - name: t\n    protocol: openai-chat\n    base_url: http://127.0.0.1:1/v1\n    model: m\n    server_metrics_url: {url}\n",
            common::scenario("s", 4)
        );
        llm_probe::config::parse(&text, "f.yaml", &|_| None)
    };
    let huge = format!("\"http://h/{}\"", "a".repeat(100_000));
    for url in [
        "ftp://h/metrics",
        "file:///etc/passwd",
        "unix:/run/vllm.sock",
        "http://h:0/metrics",
        "http://h:70000/metrics",
        "\"http://user@h/metrics\"",
        "\"http://:pw-s3cret@h/metrics\"",
        "\"http://h/metrics?token=tok-s3cret#frag\"",
        "\"http://\\e[31mred/metrics\"",
        "\"//h/metrics\"",
    ] {
        let e = parse(url)
            .err()
            .unwrap_or_else(|| panic!("{url} accepted"))
            .to_string();
        assert!(e.contains("server_metrics_url"), "{url}: {e}");
        assert!(!e.contains("s3cret"), "{url}: {e}");
        assert!(
            !e.contains('\u{1b}') && !e.contains('\u{7}'),
            "{url}: {e:?}"
        );
    }
    // Long but valid: accepted (a URL is not a secret), and never logged whole by a failure.
    assert!(parse(&huge).is_ok());
    // Control characters in the path are percent-encoded by the URL parser, so they never
    // reach a log or a request line as bytes.
    let cfg = parse("\"http://h/\\e]0;title\\a\"").unwrap();
    let url = cfg.targets[0]
        .server_metrics
        .as_ref()
        .unwrap()
        .url
        .as_str()
        .to_string();
    assert_eq!(
        url, "http://h/%1B]0;title",
        "inner ones encoded, trailing ones stripped"
    );
    // IPv6 literals and a query are fine.
    for url in ["http://[::1]:8000/metrics", "https://[fe80::1]:9400/m?x=1"] {
        let cfg = parse(url).unwrap_or_else(|e| panic!("{url}: {e}"));
        assert!(cfg.targets[0].server_metrics.is_some());
    }
}

/// A `server_metrics_url` under the API's `/v1` (a common slip: the engine serves `/metrics` at
/// its root) fails as `http_status` with a detail that says where metrics live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metrics_url_under_v1_says_where_metrics_live() {
    let sim = common::simulator(common::stream(20, 2, 4)).await;
    let cfg = config(
        &sim.base_url(),
        &format!("    server_metrics_url: {}/metrics\n", sim.base_url()),
    );
    let (p, s) = prober(&cfg);
    let o = p.probe(&s).await;
    assert!(o.is_success(), "{:?}", o.result);
    let f = o.observations.server_load.clone().unwrap().unwrap_err();
    assert_eq!(f.reason, ScrapeFailureReason::HttpStatus);
    assert!(
        f.detail.starts_with("HTTP 404") && f.detail.contains("root, /metrics, not under"),
        "{}",
        f.detail
    );
    // The same URL at the root is read.
    let cfg = config(
        &sim.base_url(),
        &format!("    server_metrics_url: {}/metrics\n", sim.root_url()),
    );
    let (p, s) = prober(&cfg);
    let o = p.probe(&s).await;
    assert!(o.observations.server_load.clone().unwrap().is_ok());
}
