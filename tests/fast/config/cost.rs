//! The cost counter equals the prices × the tokens the probes caused
//! (against the simulator, which reports its usage), and a monthly budget stretches the
//! interval so that the projected month stays under it.

use crate::common;

use std::process::Command;
use std::time::Duration;

use llm_probe::config::cost;
use llm_probe::simulate::Script;

async fn simulator() -> llm_probe::simulate::Simulator {
    common::simulator(Script {
        ttft: Duration::from_millis(5),
        itl: Duration::from_millis(1),
        tokens: 5,
        ..Script::default()
    })
    .await
}

fn probes_file(base_url: &str, interval: &str, cost: &str) -> String {
    format!(
        "defaults:\n  interval: {interval}\n  timeout: 200ms\nscenarios:\n{}targets:\n  - name: paid\n    protocol: openai-chat\n    base_url: {base_url}\n    model: m\n    cost: {cost}\n",
        common::scenario("chat", 16)
    )
}

#[tokio::test]
async fn the_cost_counter_is_prices_times_the_tokens_probes_caused() {
    let sim = simulator().await;
    let cfg = common::parse(&probes_file(
        &sim.base_url(),
        "200ms",
        "{input_per_million: 3.0, output_per_million: 7.0}",
    ));
    let d = common::daemon(cfg).await;
    let mut rx = d.subscribe();
    common::outcomes(&mut rx, 4, Duration::from_secs(20)).await;
    let (_, _, m) = common::get(d.addr, "/metrics", None).await;
    d.stop().await;
    let labels = [("target", "paid"), ("scenario", "chat")];
    let get =
        |name: &str| common::sample(&m, name, &labels).unwrap_or_else(|| panic!("{name}:\n{m}"));
    let (probes, prompt, output) = (
        get("llm_probe_probes_total"),
        get("llm_probe_prompt_tokens_total"),
        get("llm_probe_output_tokens_total"),
    );
    assert!(
        probes >= 4.0 && prompt > 0.0 && output >= 5.0 * probes,
        "{m}"
    );
    let spent = get("llm_probe_probe_cost_total");
    let expected = (prompt * 3.0 + output * 7.0) / 1e6;
    assert!(
        (spent - expected).abs() < 1e-12,
        "spent {spent}, prices × tokens {expected}"
    );
    // Every probe: the simulator's prompt count and its 5 output tokens.
    let per_probe = (prompt / probes * 3.0 + 5.0 * 7.0) / 1e6;
    assert!(
        (spent - per_probe * probes).abs() < 1e-12,
        "{spent} vs {per_probe} × {probes}"
    );
    assert_eq!(get("llm_probe_probe_interval_seconds"), 0.2);
}

#[tokio::test]
async fn a_tiny_budget_stretches_the_interval_under_it() {
    let sim = simulator().await;
    // At 200 ms, a month is 12,960,000 probes of at most 24 tokens (8 estimated prompt tokens,
    // max_tokens 16) at 0.1 per million: ~31.1; a budget of 4 allows one every ~1.56 s.
    let text = probes_file(
        &sim.base_url(),
        "200ms",
        "{input_per_million: 0.1, output_per_million: 0.1, monthly_budget: 4}",
    );
    let cfg = common::parse(&text);
    let spend = cost::spend(&cfg.targets[0]).unwrap();
    assert!(spend.stretched() && !spend.over_budget, "{spend:?}");
    assert!(spend.per_month <= 4.0, "{spend:?}");
    let stretched = spend.effective_interval;
    assert!(stretched > Duration::from_secs(1), "{spend:?}");

    // check-config says so, with the month's spend.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("probes.yaml");
    std::fs::write(&path, &text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_llm-probe"))
        .args(["check-config", "--config.file"])
        .arg(&path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("expected spend ~") && stdout.contains("/month"),
        "{stdout}"
    );
    assert!(
        stdout.contains("interval stretched from 200ms to "),
        "{stdout}"
    );

    // The daemon probes at the stretched interval and exports it.
    let d = common::daemon(cfg).await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let (_, _, m) = common::get(d.addr, "/metrics", None).await;
    d.stop().await;
    let labels = [("target", "paid")];
    let gauge = common::sample(&m, "llm_probe_probe_interval_seconds", &labels).unwrap();
    assert!(
        (gauge - stretched.as_secs_f64()).abs() < 1e-9,
        "{gauge} vs {stretched:?}"
    );
    let probes = common::sample(&m, "llm_probe_probes_total", &labels).unwrap();
    // 4 s at 200 ms would be ~20 probes; at the stretched interval at most 4.
    assert!(probes <= 4.0, "{probes} probes in 4 s at {stretched:?}");
    // What the probes spent, projected over a month at this interval, is within the budget.
    let per_probe =
        common::sample(&m, "llm_probe_probe_cost_total", &labels).unwrap() / probes.max(1.0);
    let month = per_probe * cost::MONTH.as_secs_f64() / gauge;
    assert!(month <= 4.0, "projected month {month}");
}

#[tokio::test]
async fn a_cache_canary_pays_for_both_of_its_requests() {
    let sim = simulator().await;
    let yaml = probes_file(
        &sim.base_url(),
        "200ms",
        "{input_per_million: 3.0, output_per_million: 7.0}",
    )
    .replace(
        "    max_tokens: 16\n",
        "    max_tokens: 16\n    cache_canary: true\n",
    );
    assert!(yaml.contains("cache_canary: true"), "{yaml}");
    let cfg = common::parse(&yaml);
    // The estimate counts two requests.
    let (target, scenario) = (&cfg.targets[0], &cfg.targets[0].scenarios[0]);
    let one = target.cost.as_ref().unwrap().of(
        cost::estimated_prompt_tokens(scenario),
        u64::from(scenario.max_tokens),
    );
    assert_eq!(
        cost::probe_estimate(target.cost.as_ref().unwrap(), scenario),
        2.0 * one
    );
    let d = common::daemon(cfg).await;
    let mut rx = d.subscribe();
    common::outcomes(&mut rx, 3, Duration::from_secs(20)).await;
    let (_, _, m) = common::get(d.addr, "/metrics", None).await;
    d.stop().await;
    let labels = [("target", "paid"), ("scenario", "chat")];
    let get =
        |name: &str| common::sample(&m, name, &labels).unwrap_or_else(|| panic!("{name}:\n{m}"));
    // The token counters count the measured request; the simulator answers both alike, so the
    // cost is twice prices × those tokens.
    let (prompt, output) = (
        get("llm_probe_prompt_tokens_total"),
        get("llm_probe_output_tokens_total"),
    );
    let spent = get("llm_probe_probe_cost_total");
    let twice = 2.0 * (prompt * 3.0 + output * 7.0) / 1e6;
    assert!(
        spent > 0.0 && (spent - twice).abs() < 1e-12,
        "spent {spent}, twice prices × tokens {twice}"
    );
}
