//! The status pages in headless Chromium: no console error under their CSP, one chart point per
//! kept probe, the SLO line, failure marks, markers at a backend change and a reload.

use crate::common;
use llm_probe::daemon::Daemon;
use llm_probe::simulate::Script;
use std::time::Duration;

fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

/// Waits until `n` outcomes satisfy `pred`.
async fn until(
    rx: &mut tokio::sync::broadcast::Receiver<std::sync::Arc<llm_probe::measure::ProbeOutcome>>,
    n: usize,
    pred: impl Fn(&llm_probe::measure::ProbeOutcome) -> bool,
) {
    let mut seen = 0;
    while seen < n {
        let o = common::outcomes(rx, 1, Duration::from_secs(20)).await;
        if pred(&o[0]) {
            seen += 1;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_render_in_headless_chromium_with_failures_and_a_backend_change() {
    let browser = common::require_tool("chromium", "apt-get install -y chromium");
    let dir = tempfile::tempdir().unwrap();
    let sim = common::simulator(Script {
        model: "alpha-8b".into(),
        ..common::stream(40, 5, 8)
    })
    .await;
    let addr = sim.addr;
    let file = dir.path().join("probes.yaml");
    std::fs::write(&file, common::sim_target_yaml(&sim.base_url(), "m", "1s")).unwrap();
    let d = Daemon::start(
        common::parse(&std::fs::read_to_string(&file).unwrap()),
        "127.0.0.1:0".parse().unwrap(),
        Some(file.clone()),
    )
    .await
    .unwrap();
    let mut rx = d.subscribe();
    until(&mut rx, 4, |o| o.result.is_ok()).await;
    // The backend goes away (failures), then comes back under another model name.
    drop(sim);
    until(&mut rx, 2, |o| o.result.is_err()).await;
    let mut sim = None;
    for _ in 0..50 {
        if let Ok(s) = llm_probe::simulate::Simulator::start(
            addr,
            Script {
                model: "beta-70b".into(),
                ..common::stream(40, 5, 8)
            },
        )
        .await
        {
            sim = Some(s);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _sim = sim.expect("the simulator restarts on its port");
    until(&mut rx, 2, |o| {
        o.observations.identity.response_model.as_deref() == Some("beta-70b")
    })
    .await;
    d.reload().await.expect("the same file reloads");
    until(&mut rx, 2, |o| o.result.is_ok()).await;

    // The page and the history at one moment: probes keep coming, so retry until a page was
    // fetched between two equal reads of the history.
    let (page, ok, failed) = loop {
        let before = d.history.probes("sim", "chat");
        let failures = d.history.pair_failures("sim", "chat").len();
        let (_, _, page) = common::get(d.addr, "/targets/sim", None).await;
        if d.history.probes("sim", "chat") == before {
            let ok = before.iter().filter(|p| p.ttft.is_some()).count();
            break (page, ok, failures);
        }
    };
    assert!(failed >= 2);
    assert_eq!(
        count(&page, "class=\"pt ttft\""),
        ok,
        "one TTFT point per successful probe kept"
    );
    assert_eq!(
        count(&page, "<path class=\"fail "),
        3 * failed,
        "one failure mark per failure kept, in each of the 3 charts"
    );
    assert!(
        count(&page, "<path class=\"fail connect\"") >= 3 * 2,
        "the two refused connections, coloured by their reason"
    );
    assert!(
        page.contains("class=\"slo\" data-value=\"300\""),
        "the SLO line at 300 ms"
    );
    assert!(
        page.contains("backend changed: model=alpha-8b") && page.contains("→ model=beta-70b"),
        "the identity-change marker: {page}"
    );
    assert!(count(&page, "<line class=\"ident\"") >= 3, "in each chart");
    assert!(
        count(&page, "<line class=\"reload\"") >= 3,
        "the reload, in each chart"
    );
    let (_, _, overview) = common::get(d.addr, "/", None).await;
    assert!(
        overview.contains("changed ") && overview.contains(" ago"),
        "{overview}"
    );

    // In the browser: no console error or CSP violation; the DOM has the chart's points.
    // (The documentation's screenshots come from tests/e2e/browser/status_browser.rs.)
    let shots = dir.path().to_path_buf();
    let base = format!("http://{}", d.addr);
    let url = format!("{base}/targets/sim");
    let (b, profile) = (browser.clone(), dir.path().join("profile-dom"));
    let (dom, log) = tokio::task::spawn_blocking(move || {
        common::chromium::run(&b, &profile, &["--dump-dom".into()], &url)
    })
    .await
    .unwrap();
    assert!(
        common::chromium::console_errors(&log).is_empty(),
        "{:?}",
        common::chromium::console_errors(&log)
    );
    assert!(count(&dom, "class=\"pt ttft\"") >= ok, "{dom}");
    for (name, path, height) in [
        ("status-overview.png", "/", 900),
        ("status-target.png", "/targets/sim", 1500),
    ] {
        let out = shots.join(name);
        let args = vec![
            format!("--screenshot={}", out.display()),
            format!("--window-size=1280,{height}"),
        ];
        let (b, profile, url) = (
            browser.clone(),
            dir.path().join(format!("profile-{name}")),
            format!("{base}{path}"),
        );
        let (_, log) =
            tokio::task::spawn_blocking(move || common::chromium::run(&b, &profile, &args, &url))
                .await
                .unwrap();
        assert!(
            common::chromium::console_errors(&log).is_empty(),
            "{path}: {:?}",
            common::chromium::console_errors(&log)
        );
        let png = std::fs::read(&out).unwrap_or_else(|e| panic!("{}: {e}\n{log}", out.display()));
        assert!(
            png.starts_with(b"\x89PNG") && png.len() > 20_000,
            "{name}: {} bytes",
            png.len()
        );
    }
    d.stop().await;
}
