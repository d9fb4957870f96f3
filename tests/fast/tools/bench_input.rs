//! `bench` against hostile input: a model name with Markdown in it,
//! a flag that does nothing in closed loop, an interrupted level.

use crate::common;

use std::time::Duration;

use llm_probe::bench::level::Load;
use llm_probe::bench::progress::Progress;
use llm_probe::bench::{select, sweep, table};
use llm_probe::config::PrefixCache;
use llm_probe::simulate::Script;
use tokio_util::sync::CancellationToken;

/// The configured model name is text in the Markdown report: no HTML, link or table cell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_name_cannot_inject_markdown() {
    let sim = common::simulator(Script {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        tokens: 3,
        ..Script::default()
    })
    .await;
    let text = common::bench::yaml(&sim.base_url()).replace(
        "    model: m\n",
        "    model: '<img src=x onerror=alert(1)>|[click](http://evil.example)'\n",
    );
    let cfg = common::parse(&text);
    let (t, s) = select(&cfg, Some("sim"), Some("chat")).unwrap();
    let plan = common::bench::plan(vec![Load::Concurrency(1)], 2, 0);
    let r = sweep(
        &text,
        t,
        s,
        PrefixCache::Cold,
        plan,
        CancellationToken::new(),
        Progress::new(true),
    )
    .await
    .unwrap();
    let md = table::to_markdown(&r);
    assert!(!md.contains("<img"), "{md}");
    assert!(!md.contains("[click](http"), "{md}");
    assert!(md.contains("&lt;img"), "{md}");
}

/// `--max-concurrency` bounds open loop only; in closed loop it is refused, not ignored.
#[test]
fn max_concurrency_in_closed_loop_is_refused() {
    let mut p = common::bench::plan(vec![Load::Concurrency(1), Load::Concurrency(4)], 8, 0);
    p.max_concurrency = Some(2);
    let e = p.validate().unwrap_err();
    assert!(
        e.contains("--max-concurrency") && e.contains("--rate"),
        "{e}"
    );
    let mut p = common::bench::plan(vec![Load::Rate(1.0)], 8, 0);
    p.max_concurrency = Some(2);
    assert!(p.validate().is_ok());
}

/// A level cut short by Ctrl-C is reported but not counted as the SLA capacity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_level_is_not_the_capacity() {
    let sim = common::simulator(Script {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        tokens: 3,
        ..Script::default()
    })
    .await;
    let text = common::bench::yaml(&sim.base_url());
    let cfg = common::parse(&text);
    let (t, s) = select(&cfg, Some("sim"), Some("chat")).unwrap();
    let mut plan = common::bench::plan(vec![Load::Concurrency(1), Load::Concurrency(2)], 1_000, 0);
    plan.max_requests = 100_000;
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        c.cancel();
    });
    let r = sweep(
        &text,
        t,
        s,
        PrefixCache::Cold,
        plan,
        cancel,
        Progress::new(true),
    )
    .await
    .unwrap();
    assert!(r.interrupted);
    assert_eq!(r.levels.len(), 1, "the first level was cut short");
    assert!(r.levels[0].0.requests.succeeded > 0);
    assert_eq!(r.capacity.capacity, None, "{:?}", r.capacity);
}
