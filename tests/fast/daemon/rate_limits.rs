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

/// The requests window as the quota's 429 left it: limit 3, nothing remaining (the 429's own
/// head said so), a reset within the minute; no kind the headers did not name.
fn assert_exhausted(text: &str) {
    let requests = |name| gauge(text, name, "requests");
    assert_eq!(requests("llm_probe_rate_limit_limit"), Some(3.0), "{text}");
    assert_eq!(requests("llm_probe_rate_limit_remaining"), Some(0.0));
    let reset = requests("llm_probe_rate_limit_reset_seconds").unwrap();
    assert!(reset > 0.0 && reset <= 60.0, "{reset}");
    assert_eq!(
        gauge(text, "llm_probe_rate_limit_remaining", "tokens"),
        None
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_headers_count_the_quota_down_to_the_429() {
    let text = exhaust("openai-chat").await;
    assert_exhausted(&text);
    let wait = common::sample(
        &text,
        "llm_probe_retry_after_seconds",
        &[("target", "hosted")],
    );
    assert!(wait.is_some_and(|w| w > 0.0 && w <= 60.0), "{wait:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_headers_count_the_same_quota() {
    assert_exhausted(&exhaust("anthropic").await);
}
