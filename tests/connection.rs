//! Connection setup time is given to the probe whose request opened the connection, and only to
//! it: with `connection: fresh` (the default) every probe opens one and reports its setup; with
//! `connection: reuse` the first probe opens one and the next, sent while it is idle in the
//! pool, reports none.

mod common;

use std::time::Duration;

use llm_probe::probe::Prober;
use llm_probe::simulate::Script;

fn script() -> Script {
    Script {
        ttft: Duration::from_millis(20),
        itl: Duration::from_millis(2),
        tokens: 5,
        ..Script::default()
    }
}

/// Three probes of one target with `target_extra` config keys; each one's connection setup.
async fn setups(target_extra: &str) -> Vec<Option<Duration>> {
    let sim = common::simulator(script()).await;
    let cfg = common::parse(&common::yaml(
        &sim.base_url(),
        "5s",
        &common::scenario("chat", 8),
        target_extra,
    ));
    let target = cfg.targets[0].clone();
    let prober = Prober::new(target.clone()).unwrap();
    let mut out = Vec::new();
    for _ in 0..3 {
        let o = prober.probe(&target.scenarios[0]).await;
        let m = o.result.as_ref().unwrap_or_else(|f| panic!("{f}"));
        let setup = o.observations.timeline.connection_setup();
        if let Some(s) = setup {
            assert!(m.ttft > s, "TTFT {:?} includes setup {s:?}", m.ttft);
            // Loopback TCP: no DNS (an IP literal), no TLS.
            assert!(s < Duration::from_millis(50), "setup {s:?} on loopback");
        }
        out.push(setup);
    }
    out
}

#[tokio::test]
async fn fresh_connections_each_report_their_setup() {
    let s = setups("").await;
    assert!(s.iter().all(Option::is_some), "{s:?}");
}

#[tokio::test]
async fn a_reused_connection_reports_no_setup() {
    let s = setups("    connection: reuse\n").await;
    assert!(
        s[0].is_some(),
        "the first probe opens the connection: {s:?}"
    );
    assert_eq!(&s[1..], &[None, None], "the next probes reuse it: {s:?}");
}
