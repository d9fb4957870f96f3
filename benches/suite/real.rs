//! The real server: sequential probes of llama.cpp (`scripts/real-llm.sh`), client TTFT minus the
//! server's own `timings.prompt_ms` — the part of TTFT that is not the model's.

use std::time::Instant;

use llm_probe::config;
use llm_probe::probe::Prober;

use crate::stats::{ms, row, Dist, HEADER};
use crate::{loadavg, Opts};

pub fn main(opts: &Opts) {
    let url = opts.str("url", "http://127.0.0.1:18080/v1");
    let probes = opts.num("probes", 200usize);
    let max_tokens = opts.num("max-tokens", 16u32);
    let cache = opts.str("prefix-cache", "cold");
    let yaml = format!(
        "defaults:\n  interval: 1h\n  timeout: 30s\nscenarios:\n  - name: bench\n    messages: [{{role: user, content: \"Explain time to first token in one sentence.\"}}]\n    max_tokens: {max_tokens}\n    prefix_cache: {cache}\n    temperature: 0\ntargets:\n  - name: llamacpp\n    protocol: openai-chat\n    base_url: {url}\n    model: smollm2-135m-instruct\n"
    );
    let cfg = config::parse(&yaml, "<bench>", &|_| None).expect("bench config");
    let target = cfg.targets[0].clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let load_before = loadavg();
    let started = Instant::now();
    let outcomes = rt.block_on(async {
        let prober = Prober::new(target.clone()).expect("client");
        let mut v = Vec::new();
        for _ in 0..probes {
            v.push(prober.probe(&target.scenarios[0]).await);
        }
        v
    });
    let wall = started.elapsed();
    let mut d_ttft = Dist::new("client TTFT");
    let mut d_prompt = Dist::new("server `timings.prompt_ms`");
    let mut d_over = Dist::new("TTFT − prompt_ms (not the model's)");
    let mut d_head = Dist::new("  sent → response headers");
    let mut d_first = Dist::new("  headers → first token");
    let mut d_tpot = Dist::new("TPOT (client)");
    let mut d_server_tpot = Dist::new("server predicted_ms / predicted_n");
    let mut failed = 0;
    for o in &outcomes {
        let Ok(m) = &o.result else {
            failed += 1;
            continue;
        };
        let Some(prefill) = m.server_prefill else {
            failed += 1;
            continue;
        };
        let tl = &o.observations.timeline;
        d_ttft.push(ms(m.ttft.as_secs_f64()));
        d_prompt.push(ms(prefill.as_secs_f64()));
        d_over.push(ms(m.ttft.as_secs_f64() - prefill.as_secs_f64()));
        if let (Some(h), Some(f)) = (tl.headers, tl.first_token()) {
            d_head.push(ms((h - tl.sent).as_secs_f64()));
            d_first.push(ms((f - h).as_secs_f64()));
        }
        if let Some(t) = m.tpot {
            d_tpot.push(ms(t.as_secs_f64()));
        }
        let st = &o.observations.server_timings;
        if let (Some(s), Some(n)) = (st.predicted_seconds, st.predicted_tokens) {
            if n > 0 {
                d_server_tpot.push(ms(s / n as f64));
            }
        }
    }
    println!(
        "\n#### llama.cpp at {url}: {probes} sequential probes, max_tokens {max_tokens}, prefix_cache {cache}\n"
    );
    println!(
        "{} probes in {:.1} s; without a measurement or server timings: {failed}; loadavg {load_before} → {}\n",
        outcomes.len(),
        wall.as_secs_f64(),
        loadavg()
    );
    println!("{HEADER}");
    for d in [
        &mut d_ttft,
        &mut d_prompt,
        &mut d_over,
        &mut d_head,
        &mut d_first,
        &mut d_tpot,
        &mut d_server_tpot,
    ] {
        println!("{}", row(d));
    }
}
