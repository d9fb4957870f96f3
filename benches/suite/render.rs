//! `/metrics` encoding alone, without probing: one real probe of the in-process simulator,
//! observed under `--targets` different target names (one scenario each), then
//! `Metrics::render` timed `--renders` times in both formats. A quick, repeatable stand-in for
//! the render row of `scale` (which needs 70 s of probing), and the thing to run under
//! `perf record` when the render is slow.

use std::time::Instant;

use llm_probe::config;
use llm_probe::metrics::{Metrics, ProbeLabels};
use llm_probe::probe::Prober;
use llm_probe::simulate::{Script, Simulator};

use crate::stats::{ms, row, Dist, HEADER};
use crate::{loadavg, Opts};

pub fn main(opts: &Opts) {
    let targets: usize = opts.num("targets", 1000);
    let renders: usize = opts.num("renders", 30);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let outcome = rt.block_on(async {
        let script = Script {
            ttft: opts.dur("ttft", "5ms"),
            itl: opts.dur("itl", "1ms"),
            tokens: opts.num("tokens", 64),
            ..Script::default()
        };
        let sim = Simulator::start("127.0.0.1:0".parse().unwrap(), script)
            .await
            .expect("simulator");
        let yaml = format!(
            "scenarios:\n  - name: bench\n    messages: [{{role: user, content: \"Say something.\"}}]\n    max_tokens: 64\ntargets:\n  - name: t\n    protocol: openai-chat\n    base_url: {}\n    model: sim-model\n",
            sim.base_url()
        );
        let cfg = config::parse(&yaml, "<bench>", &|_| None).expect("bench config");
        let target = cfg.targets[0].clone();
        let prober = Prober::new(target.clone()).expect("prober");
        let o = prober.probe(&target.scenarios[0]).await;
        assert!(o.is_success(), "the probe failed: {:?}", o.result);
        (o, target.slo)
    });
    let (outcome, slo) = outcome;

    let metrics = Metrics::new(std::slice::from_ref(&slo));
    for i in 0..targets {
        let mut o = outcome.clone();
        o.target = format!("target-{i:04}").into();
        let labels = ProbeLabels {
            target: o.target.to_string(),
            model: o.model.to_string(),
            scenario: o.scenario.to_string(),
        };
        metrics.register_probe(&labels, &slo);
        metrics.observe(&o);
    }

    let load = loadavg();
    let mut text = Dist::new("`Metrics::render`, text 0.0.4");
    let mut om = Dist::new("`Metrics::render`, OpenMetrics");
    let (mut size, mut lines) = (0, 0);
    for _ in 0..renders {
        let t = Instant::now();
        let (_, body) = metrics.render(None);
        text.push(ms(t.elapsed().as_secs_f64()));
        size = body.len();
        lines = body.lines().filter(|l| !l.starts_with('#')).count();
        let t = Instant::now();
        let _ = metrics.render(Some("application/openmetrics-text"));
        om.push(ms(t.elapsed().as_secs_f64()));
    }
    println!(
        "\n#### `/metrics` render: {targets} targets × 1 scenario, each observed once (loadavg {load} → {})\n",
        loadavg()
    );
    println!(
        "text 0.0.4 body: {size} bytes ({:.2} MiB), {lines} samples ({} per target)\n",
        size as f64 / (1 << 20) as f64,
        lines / targets.max(1)
    );
    println!("{HEADER}");
    println!("{}", row(&mut text));
    println!("{}", row(&mut om));
}
