//! A hosted API's quota as the daemon reads it from the response heads: the simulator's
//! `rate_limit` quota is the ground truth (N requests a minute, the request past it refused).

use std::time::Duration;

use crate::common;
use common::fleet::until;

/// Probes `protocol` on a simulator whose key may send 3 requests a minute until the quota
/// refuses one; returns the exposition then.
async fn exhaust(protocol: &str) -> String {
    let sim = common::simulator(llm_probe::simulate::Script {
        rate_limit: 3,
        ..common::stream(5, 1, 2)
    })
    .await;
    let cfg = common::parse(&format!(
        "defaults:\n  interval: 200ms\n  timeout: 200ms\nscenarios:\n{}targets:\n  - name: hosted\n    protocol: {protocol}\n    base_url: {}\n    model: m\n",
        common::scenario("chat", 2),
        sim.base_url()
    ));
    let d = common::daemon(cfg).await;
    let failed = |t: &str| {
        common::sample(
            t,
            "llm_probe_probe_failures_total",
            &[("target", "hosted"), ("reason", "http_status")],
        )
    };
    let text = until(
        &d,
        "a request past the quota",
        Duration::from_secs(30),
        |t| failed(t) >= Some(1.0),
    )
    .await;
    // The fourth request was refused: three were served, and nothing more was sent (the
    // 429's Retry-After holds the pair until the minute ends).
    assert_eq!(sim.received().len(), 4, "{text}");
    text
}

fn gauge(text: &str, name: &str, kind: &str) -> Option<f64> {
    common::sample(
        text,
        name,
        &[("target", "hosted"), ("model", "m"), ("kind", kind)],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_headers_count_the_quota_down_to_the_429() {
    let text = exhaust("openai-chat").await;
    assert_eq!(
        gauge(&text, "llm_probe_rate_limit_limit", "requests"),
        Some(3.0)
    );
    // The 429's own head said nothing is left.
    assert_eq!(
        gauge(&text, "llm_probe_rate_limit_remaining", "requests"),
        Some(0.0)
    );
    let reset = gauge(&text, "llm_probe_rate_limit_reset_seconds", "requests").unwrap();
    assert!(reset > 0.0 && reset <= 60.0, "{reset}");
    let wait = common::sample(
        &text,
        "llm_probe_retry_after_seconds",
        &[("target", "hosted")],
    );
    assert!(wait.is_some_and(|w| w > 0.0 && w <= 60.0), "{wait:?}");
    // No kind the headers did not name.
    assert_eq!(
        gauge(&text, "llm_probe_rate_limit_remaining", "tokens"),
        None
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_headers_count_the_same_quota() {
    let text = exhaust("anthropic").await;
    assert_eq!(
        gauge(&text, "llm_probe_rate_limit_limit", "requests"),
        Some(3.0)
    );
    assert_eq!(
        gauge(&text, "llm_probe_rate_limit_remaining", "requests"),
        Some(0.0)
    );
    let reset = gauge(&text, "llm_probe_rate_limit_reset_seconds", "requests").unwrap();
    assert!(reset > 0.0 && reset <= 60.0, "{reset}");
}
