//! Each probe sends a W3C `traceparent` and an `x-request-id`, records both, and
//! prints them in `probe-once` JSON; a target whose `headers:` set them sends its own values.
//! Checked against what the simulator received.

use crate::common;

use llm_probe::probe::Prober;
use llm_probe::simulate::Script;

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

#[tokio::test]
async fn every_probe_sends_and_records_a_fresh_trace_context() {
    let sim = common::simulator(Script {
        tokens: 3,
        ..Script::default()
    })
    .await;
    let cfg = common::parse(&common::yaml(
        &sim.base_url(),
        "10s",
        &common::scenario("chat", 8),
        "",
    ));
    let t = cfg.targets[0].clone();
    let prober = Prober::new(t.clone()).unwrap();
    let (a, b) = (
        prober.probe(&t.scenarios[0]).await,
        prober.probe(&t.scenarios[0]).await,
    );
    let received = sim.received();
    assert_eq!(received.len(), 2);
    for (o, r) in [(&a, &received[0]), (&b, &received[1])] {
        assert!(o.is_success(), "{:?}", o.result);
        let tp = o.observations.traceparent.as_deref().expect("recorded");
        let parts: Vec<&str> = tp.split('-').collect();
        assert_eq!(
            (
                parts.len(),
                parts[0],
                parts[1].len(),
                parts[2].len(),
                parts[3]
            ),
            (4, "00", 32, 16, "01"),
            "{tp}"
        );
        assert_eq!(
            header(&r.headers, "traceparent"),
            Some(tp),
            "sent as recorded"
        );
        let id = o.observations.request_id.as_deref().expect("recorded");
        assert_eq!(header(&r.headers, "x-request-id"), Some(id));
        let json = llm_probe::report::to_json(o);
        assert_eq!(json["traceparent"], tp);
        assert_eq!(json["trace_id"], parts[1]);
        assert_eq!(json["request_id"], id);
    }
    assert_ne!(a.observations.traceparent, b.observations.traceparent);
    assert_ne!(a.observations.request_id, b.observations.request_id);
}

#[tokio::test]
async fn a_target_header_wins_over_the_generated_one() {
    let sim = common::simulator(Script {
        tokens: 2,
        ..Script::default()
    })
    .await;
    let cfg = common::parse(&common::yaml(
        &sim.base_url(),
        "10s",
        &common::scenario("chat", 8),
        "    headers:\n      X-Request-Id: mine-42\n",
    ));
    let o = common::probe_first(&cfg, None).await;
    assert!(o.is_success(), "{:?}", o.result);
    let r = &sim.received()[0];
    let ids: Vec<_> = r
        .headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("x-request-id"))
        .collect();
    assert_eq!(ids.len(), 1, "one x-request-id: {ids:?}");
    assert_eq!(ids[0].1, "mine-42");
    assert_eq!(o.observations.request_id.as_deref(), Some("mine-42"));
    assert!(header(&r.headers, "traceparent").is_some());
}
