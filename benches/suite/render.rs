//! `/metrics` encoding alone, without probing: one real probe of the in-process simulator,
//! observed under `--targets` different target names (one scenario each), then
//! `Metrics::render` timed `--renders` times in both formats. A quick, repeatable stand-in for
//! the render row of `scale` (which needs 70 s of probing), and the thing to run under
//! `perf record` when the render is slow. `--histograms classic|native|both` (default both, as
//! `llm-probe run`) sets the histograms' buckets; the protobuf format (native histograms) is
//! timed too. `--changed F` (0 to 1, default 0) observes a probe again on that share of the
//! pairs before each round of renders (untimed), so that the per-pair exposition cache has
//! that share to encode again: 1 is the steady state of pairs probed more often than scraped.

use std::time::Instant;

use clap::ValueEnum;
use llm_probe::config;
use llm_probe::history::{History, HistoryLimits};
use llm_probe::metrics::{Exposition, HistogramKinds, HistogramOptions, Metrics, ProbeLabels};
use llm_probe::probe::Prober;
use llm_probe::simulate::{Script, Simulator};

use crate::scale::status_kib;
use crate::stats::{ms, row, Dist, HEADER};
use crate::{loadavg, Opts};

pub fn main(opts: &Opts) {
    // As `llm-probe` itself does at start (see the function's docs); `--glibc-default` to see why.
    if !opts.0.contains_key("glibc-default") {
        llm_probe::app::return_large_buffers_to_os();
    }
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

    let kinds = HistogramKinds::from_str(&opts.str("histograms", "both"), true)
        .expect("--histograms classic|native|both");
    let histograms = HistogramOptions {
        kinds,
        ..HistogramOptions::default()
    };
    let metrics = Metrics::with_histograms(std::slice::from_ref(&slo), histograms);
    let rss_empty = status_kib("VmRSS:");
    let changed: f64 = opts.num("changed", 0.0);
    let outcomes: Vec<_> = (0..targets)
        .map(|i| {
            let mut o = outcome.clone();
            o.target = format!("target-{i:04}").into();
            o
        })
        .collect();
    for o in &outcomes {
        let labels = ProbeLabels::new(
            o.target.clone(),
            o.model.clone(),
            o.scenario.clone(),
            o.replica.clone(),
        );
        metrics.register_probe(&labels, &slo);
        metrics.observe(o);
    }
    let per_round = ((changed.clamp(0.0, 1.0) * targets as f64).round() as usize).min(targets);
    let mut next = 0;

    let rss_before = status_kib("VmRSS:");
    let load = loadavg();
    let mut text = Dist::new("`Metrics::render`, text 0.0.4");
    let mut om = Dist::new("`Metrics::render`, OpenMetrics");
    let mut pb = Dist::new("`Metrics::render_as`, protobuf");
    let (mut size, mut lines, mut om_size, mut pb_size) = (0, 0, 0, 0);
    for _ in 0..renders {
        for _ in 0..per_round {
            metrics.observe(&outcomes[next % targets]);
            next += 1;
        }
        let t = Instant::now();
        let (_, body) = metrics.render(None);
        text.push(ms(t.elapsed().as_secs_f64()));
        size = body.len();
        lines = body.lines().filter(|l| !l.starts_with('#')).count();
        drop(body);
        for _ in 0..per_round {
            metrics.observe(&outcomes[next % targets]);
            next += 1;
        }
        let t = Instant::now();
        om_size = metrics.render(Some("application/openmetrics-text")).1.len();
        om.push(ms(t.elapsed().as_secs_f64()));
        for _ in 0..per_round {
            metrics.observe(&outcomes[next % targets]);
            next += 1;
        }
        let t = Instant::now();
        pb_size = metrics.render_as(Exposition::Protobuf).unwrap().len();
        pb.push(ms(t.elapsed().as_secs_f64()));
    }
    println!(
        "\n#### `/metrics` render: {targets} targets × 1 scenario, each observed once, histograms {kinds:?}, {per_round} pairs observed again before each render (loadavg {load} → {})\n",
        loadavg()
    );
    let per = |n: usize| n / targets.max(1);
    println!(
        "bytes per target: text {}, OpenMetrics {}, protobuf {}\n",
        per(size),
        per(om_size),
        per(pb_size)
    );
    println!(
        "text 0.0.4 body: {size} bytes ({:.2} MiB), {lines} samples ({} per target)\n",
        size as f64 / (1 << 20) as f64,
        lines / targets.max(1)
    );
    println!(
        "RSS: {:.1} MiB before the series, {:.1} MiB with the series created and observed ({:.1} KiB per target), {:.1} MiB after the renders, peak {:.1} MiB\n",
        rss_empty as f64 / 1024.0,
        rss_before as f64 / 1024.0,
        (rss_before - rss_empty) as f64 / targets.max(1) as f64,
        status_kib("VmRSS:") as f64 / 1024.0,
        status_kib("VmHWM:") as f64 / 1024.0
    );
    // The status pages' history full (`--history` probes per pair, the default limit 120): what
    // a daemon holds once every pair has been probed that often, beyond the scale run's window.
    let history_probes: usize = opts.num("history", 120);
    if history_probes > 0 {
        let history = History::new(HistoryLimits {
            max_probes: history_probes,
            ..HistoryLimits::default()
        });
        let before = status_kib("VmRSS:");
        for _ in 0..history_probes {
            for o in &outcomes {
                let mut o = o.clone();
                o.started_at = std::time::SystemTime::now();
                history.push(&o);
            }
        }
        let full = status_kib("VmRSS:");
        println!(
            "history full ({history_probes} probes per pair): {:.1} MiB more RSS ({:.1} KiB per target)\n",
            full.saturating_sub(before) as f64 / 1024.0,
            full.saturating_sub(before) as f64 / targets.max(1) as f64
        );
        drop(history);
    }
    println!("{HEADER}");
    println!("{}", row(&mut text));
    println!("{}", row(&mut om));
    println!("{}", row(&mut pb));
}
