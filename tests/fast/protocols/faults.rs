//! Every fault class the simulator can play (docs/protocols.md, "Stream faults the probe gets right") ends in its exact outcome: a
//! failure reason, an anomaly, or the correct numbers despite the fault.

use crate::common;

use std::time::Duration;

use llm_probe::measure::{Anomaly, FailureReason, TokenCountSource};
use llm_probe::simulate::{Fault, Script};

#[tokio::test]
async fn clean_stream_succeeds_without_anomalies() {
    let (o, _sim) = common::OneProbe::default()
        .of(common::faulty(Fault::None))
        .await;
    assert!(o.is_success(), "{:?}", o.result);
    assert!(
        o.observations.anomalies.is_empty(),
        "{:?}",
        o.observations.anomalies
    );
    assert_eq!(o.observations.http_status, Some(200));
    assert_eq!(
        o.observations.identity.server_header.as_deref(),
        Some("llm-probe-simulator")
    );
}

#[tokio::test]
async fn error_after_tokens_is_stream_error_not_a_fast_success() {
    let (o, _sim) = common::OneProbe::default()
        .of(common::faulty(Fault::ErrorAfterTokens))
        .await;
    assert_eq!(o.failure_reason(), Some(FailureReason::StreamError));
    assert_eq!(o.observations.timeline.token_events.len(), 3);
    assert!(o
        .result
        .unwrap_err()
        .detail
        .contains("simulated error after tokens"));
}

#[tokio::test]
async fn error_only_200_is_stream_error() {
    let (o, _sim) = common::OneProbe::default()
        .of(common::faulty(Fault::ErrorOnly))
        .await;
    assert_eq!(o.failure_reason(), Some(FailureReason::StreamError));
    assert_eq!(o.observations.http_status, Some(200));
}

#[tokio::test]
async fn done_only_is_empty_stream() {
    let (o, _sim) = common::OneProbe::default()
        .of(common::faulty(Fault::DoneOnly))
        .await;
    assert_eq!(o.failure_reason(), Some(FailureReason::EmptyStream));
}

#[tokio::test]
async fn http_500_keeps_status_and_body_excerpt() {
    let (o, _sim) = common::OneProbe::default()
        .of(common::faulty(Fault::Http500))
        .await;
    assert_eq!(o.failure_reason(), Some(FailureReason::HttpStatus));
    assert_eq!(o.observations.http_status, Some(500));
    assert!(o
        .result
        .unwrap_err()
        .detail
        .contains("simulated internal error"));
}

#[tokio::test]
async fn http_429_is_not_retried() {
    let sim = common::simulator(common::faulty(Fault::Http429)).await;
    let o = common::OneProbe::default()
        .timeout("2s")
        .at(&sim.base_url())
        .await;
    assert_eq!(o.failure_reason(), Some(FailureReason::HttpStatus));
    assert_eq!(o.observations.http_status, Some(429));
    assert_eq!(sim.received().len(), 1, "no client-side retry");
}

#[tokio::test]
async fn http_529_is_overloaded_and_holds_the_next_probe() {
    let sim = common::simulator(common::faulty(Fault::Http529)).await;
    let o = common::OneProbe::default()
        .timeout("2s")
        .at(&sim.base_url())
        .await;
    assert_eq!(o.failure_reason(), Some(FailureReason::Overloaded));
    assert_eq!(o.observations.http_status, Some(529));
    let detail = o.result.unwrap_err().detail;
    assert!(
        detail.starts_with("HTTP 529 Overloaded from POST ") && detail.contains("overloaded_error"),
        "{detail}"
    );
    assert_eq!(o.observations.retry_after, Some(Duration::from_secs(7)));
    assert_eq!(sim.received().len(), 1, "no client-side retry");
}

#[tokio::test]
async fn missing_usage_counts_events_and_says_so() {
    let (o, _sim) = common::OneProbe::default()
        .of(common::faulty(Fault::NoUsage))
        .await;
    let m = o.result.as_ref().unwrap();
    assert_eq!(
        (m.output_tokens, m.token_count_source),
        (20, TokenCountSource::Events)
    );
    assert_eq!(o.observations.anomalies, vec![Anomaly::MissingUsage]);
}

#[tokio::test]
async fn stall_mid_stream_times_out_at_the_deadline() {
    let sim = common::simulator(common::faulty(Fault::Stall)).await;
    let t = std::time::Instant::now();
    let o = common::OneProbe::default()
        .timeout("500ms")
        .at(&sim.base_url())
        .await;
    assert_eq!(o.failure_reason(), Some(FailureReason::Timeout));
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "the deadline bounds the probe: {:?} {:?}",
        t.elapsed(),
        o.result
    );
    assert_eq!(o.observations.timeline.token_events.len(), 3);
}

#[tokio::test]
async fn reset_mid_stream_is_truncated() {
    let (o, _sim) = common::OneProbe::default()
        .of(common::faulty(Fault::Reset))
        .await;
    assert_eq!(
        o.failure_reason(),
        Some(FailureReason::Truncated),
        "{:?}",
        o.result
    );
}

#[tokio::test]
async fn collapsed_stream_is_flagged() {
    let (o, _sim) = common::OneProbe::default()
        .of(common::faulty(Fault::Collapsed))
        .await;
    let m = o.result.as_ref().unwrap();
    assert!(o.observations.anomalies.contains(&Anomaly::CollapsedStream));
    assert!(
        m.e2e - m.ttft < Duration::from_millis(10),
        "TTFT ≈ E2E when buffered"
    );
}

#[tokio::test]
async fn no_terminator_after_finish_is_success_with_anomaly() {
    let (o, _sim) = common::OneProbe::default()
        .of(common::faulty(Fault::NoTerminator))
        .await;
    assert!(o.is_success(), "{:?}", o.result);
    assert_eq!(o.observations.anomalies, vec![Anomaly::MissingTerminator]);
}

#[tokio::test]
async fn keepalive_comments_are_not_tokens() {
    let script = Script {
        ttft: Duration::from_millis(100),
        ..common::faulty(Fault::Keepalive)
    };
    let (o, _sim) = common::OneProbe::default().of(script).await;
    let m = o.result.as_ref().unwrap();
    assert!(
        m.ttft >= Duration::from_millis(100),
        "comments are not the first token: {:?}",
        m.ttft
    );
    assert_eq!(m.output_tokens, 20);
}

#[tokio::test]
async fn multi_token_events_use_the_server_count() {
    let script = Script {
        tokens_per_event: 4,
        itl: Duration::from_millis(10),
        ..common::faulty(Fault::None)
    };
    let (o, sim) = common::OneProbe::default().of(script).await;
    let m = o.result.as_ref().unwrap();
    assert_eq!((m.output_tokens, m.token_events), (20, 5));
    // 5 events (scripted 10 ms apart) carry 20 tokens: TPOT is the span from the first event
    // to the last over 19, judged against when the simulator actually sent them.
    let tpot = m.tpot.unwrap().as_secs_f64();
    let sent = sim.received()[0].events_sent.lock().unwrap().clone();
    let want = (*sent.last().unwrap() - sent[0]).as_secs_f64() / 19.0;
    assert!(
        (tpot - want).abs() < 0.0006,
        "TPOT {tpot}, the simulator's {want}"
    );
    assert_eq!(o.observations.anomalies, vec![Anomaly::MultiTokenEvents]);
}

#[tokio::test]
async fn reasoning_tokens_start_ttft_and_delay_first_output() {
    let script = Script {
        reasoning_tokens: 5,
        itl: Duration::from_millis(10),
        ..common::faulty(Fault::None)
    };
    let (o, _sim) = common::OneProbe::default().of(script).await;
    let m = o.result.as_ref().unwrap();
    let ttfo = m.time_to_first_output_token.unwrap();
    let gap = (ttfo - m.ttft).as_secs_f64();
    assert!(
        (0.030..0.100).contains(&gap),
        "first output token 5 events after the first token: {gap}"
    );
    assert!(
        m.ttft >= Duration::from_millis(30),
        "TTFT is the first reasoning token"
    );
}

#[tokio::test]
async fn connection_refused_is_connect() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    let o = common::OneProbe::default()
        .timeout("2s")
        .at(&format!("http://{addr}/v1"))
        .await;
    assert_eq!(
        o.failure_reason(),
        Some(FailureReason::Connect),
        "{:?}",
        o.result
    );
    // The detail names where it tried to connect (a wrong base_url is the usual cause), and
    // the report says there was no HTTP response rather than printing a status.
    let detail = &o.result.as_ref().unwrap_err().detail;
    assert!(
        detail.starts_with(&format!("could not connect to {addr}: ")),
        "{detail}"
    );
    let text = llm_probe::report::to_text(&o);
    assert!(
        text.contains(&format!(
            "FAILED      connect (no HTTP response): could not connect to {addr}"
        )),
        "{text}"
    );
}

#[tokio::test]
async fn unresolvable_host_is_dns() {
    let o = common::OneProbe::default()
        .timeout("5s")
        .at("http://no-such-host.invalid/v1")
        .await;
    assert_eq!(
        o.failure_reason(),
        Some(FailureReason::Dns),
        "{:?}",
        o.result
    );
}

#[tokio::test]
async fn request_carries_streaming_options_and_a_cold_cache_nonce() {
    let sim = common::simulator(common::faulty(Fault::None)).await;
    common::OneProbe::default()
        .timeout("2s")
        .at(&sim.base_url())
        .await;
    common::OneProbe::default()
        .timeout("2s")
        .at(&sim.base_url())
        .await;
    let r = sim.received();
    assert_eq!(r.len(), 2);
    assert_eq!(r[0].path, "/v1/chat/completions");
    assert_eq!(r[0].body["stream"], true);
    assert_eq!(r[0].body["stream_options"]["include_usage"], true);
    assert_eq!(r[0].body["model"], "sim-model");
    assert_eq!(r[0].body["max_tokens"], 64);
    let p0 = r[0].body["messages"][0]["content"].as_str().unwrap();
    let p1 = r[1].body["messages"][0]["content"].as_str().unwrap();
    assert!(
        p0.starts_with("[probe ") && p0.ends_with("Say something."),
        "{p0}"
    );
    assert_ne!(p0, p1, "a cold-cache prompt is unique per probe");
}

#[tokio::test]
async fn headers_that_never_arrive_time_out() {
    let (o, _sim) = common::OneProbe::default()
        .of(common::faulty(Fault::NoHeaders))
        .await;
    assert_eq!(o.failure_reason(), Some(FailureReason::Timeout));
    assert!(o.observations.timeline.headers.is_none());
    assert!(o.result.unwrap_err().detail.contains("no response headers"));
}

#[tokio::test]
async fn broken_json_is_decode() {
    let (o, _sim) = common::OneProbe::default()
        .of(common::faulty(Fault::InvalidJson))
        .await;
    assert_eq!(
        o.failure_reason(),
        Some(FailureReason::Decode),
        "{:?}",
        o.result
    );
    assert_eq!(o.observations.timeline.token_events.len(), 2);
}

#[tokio::test]
async fn invalid_utf8_is_decode() {
    let (o, _sim) = common::OneProbe::default()
        .of(common::faulty(Fault::InvalidUtf8))
        .await;
    assert_eq!(
        o.failure_reason(),
        Some(FailureReason::Decode),
        "{:?}",
        o.result
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_keeps_probing_through_faults() {
    let sim = common::simulator(common::faulty(Fault::Reset)).await;
    let cfg = common::parse(&common::yaml(
        &sim.base_url(),
        "200ms",
        &common::scenario("chat", 64),
        "",
    ));
    let d = common::daemon(cfg).await;
    let mut rx = d.subscribe();
    let outs = common::outcomes(&mut rx, 5, Duration::from_secs(15)).await;
    assert!(outs
        .iter()
        .all(|o| o.failure_reason() == Some(FailureReason::Truncated)));
    let (_, text) = d.metrics.render(None);
    let n = common::sample(
        &text,
        "llm_probe_probe_failures_total",
        &[("reason", "truncated")],
    )
    .unwrap();
    assert!(n >= 5.0);
    assert_eq!(
        common::sample(&text, "llm_probe_last_probe_success", &[]),
        Some(0.0)
    );
    d.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_holds_the_next_probe_back_and_shows_in_metrics() {
    // The simulator answers 429 with Retry-After: 7; the interval is 300 ms.
    let sim = common::simulator(common::faulty(Fault::Http429)).await;
    let cfg = common::parse(&common::yaml(
        &sim.base_url(),
        "300ms",
        &common::scenario("chat", 8),
        "",
    ));
    let d = common::daemon(cfg).await;
    let mut rx = d.subscribe();
    let first = common::outcomes(&mut rx, 1, Duration::from_secs(5)).await;
    assert_eq!(
        first[0].observations.retry_after,
        Some(Duration::from_secs(7))
    );
    // The next probe waits out the 7 s (23 ticks of 300 ms are skipped), then probing resumes.
    common::outcomes(&mut rx, 1, Duration::from_secs(12)).await;
    let arrived: Vec<_> = sim.received().iter().map(|r| r.arrived).collect();
    let gap = arrived[1] - arrived[0];
    assert!(
        gap >= Duration::from_secs(7) && gap < Duration::from_secs(9),
        "the second probe came {gap:?} after the first; Retry-After asked for 7 s"
    );
    let (_, text) = d.metrics.render(None);
    assert_eq!(
        common::sample(&text, "llm_probe_retry_after_seconds", &[("target", "sim")]),
        Some(7.0)
    );
    assert_eq!(
        common::sample(
            &text,
            "llm_probe_probe_failures_total",
            &[("reason", "http_status")]
        ),
        Some(2.0)
    );
    d.stop().await;
}

#[tokio::test]
async fn a_fault_every_fifth_request_hits_exactly_those() {
    let sim = common::simulator(Script {
        fault: Fault::Http500,
        fault_every: 5,
        ..common::stream(1, 1, 2)
    })
    .await;
    let client = reqwest::Client::new();
    let mut statuses = Vec::new();
    for _ in 0..10 {
        let r = client
            .post(format!("{}/chat/completions", sim.base_url()))
            .json(&serde_json::json!({
                "model": "m",
                "messages": [{"role": "user", "content": "hi"}],
                "stream": true,
                "max_tokens": 2
            }))
            .send()
            .await
            .unwrap();
        statuses.push(r.status().as_u16());
        let _ = r.bytes().await;
    }
    assert_eq!(statuses, [200, 200, 200, 200, 500, 200, 200, 200, 200, 500]);
}
