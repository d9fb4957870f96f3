//! `suite genceiling`: the load generator's ceiling (BENCHMARKS.md, "Load test (`bench`) side by
//! side with peers", generator ceiling). Reads `llm-probe-cC.json` (`llm-probe bench --output
//! json`, one level) and `truth-llm-probe-cC.jsonl` (`suite sim`) from `--dir` and compares every
//! request's TTFT with the truth of the same request.
//!
//! The bench's JSON does not carry the prompt nonce, so a request is matched with the
//! simulator's record by its **fingerprint of token gaps**: with jitter on, each stream's
//! sequence of gaps is unique (σ = 0.2 on a 20 ms gap differs by milliseconds per gap between
//! streams), and the bench's gaps match the simulator's actual send gaps to a few tens of
//! microseconds. A match must be the unique best with a clear margin; the rest are counted as
//! unmatched. The TTFT plays no part in the matching, so the errors are not biased by it.
//!
//! Errors, per request, milliseconds:
//! - `TTFT − truth`: bench TTFT (from its `sent`, incl. connect) − (arrival → actual first send):
//!   the generator's and the client's part (connect, request write, loopback, our read);
//! - `sim late`: the simulator's actual first send − its own decision (queue wait + TTFT);
//! - `TTFT − decided`: both together, what a comparison with the simulator's script would give.

use std::path::Path;

use serde_json::Value;

use crate::sim::TruthRecord;
use crate::stats::{row, Dist, HEADER};
use crate::Opts;

/// A match needs a mean gap difference under this (seconds) …
const MAX_COST: f64 = 0.5e-3;
/// … and the second-best candidate at least this many times worse.
const MARGIN: f64 = 3.0;

struct Measured {
    /// Order of sending within the level: the first C start at the same instant.
    index: u64,
    ttft: f64,
    gaps: Vec<f64>,
}

fn measured(path: &Path) -> Vec<Measured> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let v: Value = serde_json::from_str(&text).expect("bench JSON");
    v["requests"]
        .as_array()
        .expect("requests[]")
        .iter()
        .filter(|r| r["ok"].as_bool() == Some(true) && r["warmup"].as_bool() != Some(true))
        .map(|r| Measured {
            index: r["index"].as_u64().expect("index"),
            ttft: r["ttft_seconds"].as_f64().expect("ttft_seconds"),
            gaps: serde_json::from_value(r["inter_token_latency_seconds"].clone())
                .expect("inter_token_latency_seconds"),
        })
        .collect()
}

fn cost(a: &[f64], b: &[f64]) -> f64 {
    if a.len() != b.len() || a.is_empty() {
        return f64::INFINITY;
    }
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum::<f64>() / a.len() as f64
}

/// For each measured request, the index of its truth record (unique best with a margin).
fn match_requests(m: &[Measured], truth: &[TruthRecord]) -> Vec<Option<usize>> {
    let gaps: Vec<Vec<f64>> = truth.iter().map(TruthRecord::gaps).collect();
    let mut best: Vec<Option<usize>> = m
        .iter()
        .map(|q| {
            let (mut b, mut b2) = ((f64::INFINITY, usize::MAX), f64::INFINITY);
            for (i, g) in gaps.iter().enumerate() {
                let c = cost(&q.gaps, g);
                if c < b.0 {
                    b2 = b.0;
                    b = (c, i);
                } else if c < b2 {
                    b2 = c;
                }
            }
            (b.0 < MAX_COST && b2 >= MARGIN * b.0).then_some(b.1)
        })
        .collect();
    // A truth record claimed twice matches neither.
    let mut claims = vec![0usize; truth.len()];
    for i in best.iter().flatten() {
        claims[*i] += 1;
    }
    for b in &mut best {
        if b.is_some_and(|i| claims[i] > 1) {
            *b = None;
        }
    }
    best
}

pub fn main(opts: &Opts) {
    let dir = opts.str("dir", ".");
    let dir = Path::new(&dir);
    println!("\n| concurrency | requests | matched | TTFT − truth P50 | P99 | max | P99 after the first C | sim late P50 | P99 | max | TTFT − decided P99 |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut details = Vec::new();
    for c in opts.list("levels", "1,16,64,128,256") {
        let bench = dir.join(format!("llm-probe-c{c}.json"));
        let truth_path = dir.join(format!("truth-llm-probe-c{c}.jsonl"));
        if !bench.exists() || !truth_path.exists() {
            println!("| {c} | did not run | | | | | | | | | |");
            continue;
        }
        let m = measured(&bench);
        let truth = TruthRecord::read_all(truth_path.to_str().expect("a UTF-8 path"));
        let matches = match_requests(&m, &truth);
        let mut err = Dist::new(format!("C={c}: TTFT − truth (arrival → actual first send)"));
        let mut late = Dist::new(format!("C={c}: sim late (first send − queue wait − TTFT)"));
        let mut decided = Dist::new(format!("C={c}: TTFT − decided (queue wait + TTFT)"));
        let mut later = Dist::new(format!(
            "C={c}: TTFT − truth, after the first {c} requests (all users start at once)"
        ));
        for (q, t) in m.iter().zip(&matches) {
            let Some(t) = t.map(|i| &truth[i]) else {
                continue;
            };
            let (Some(first), Some(l)) = (t.first_sent(), t.sim_late()) else {
                continue;
            };
            err.push((q.ttft - first) * 1e3);
            if q.index >= c as u64 {
                later.push((q.ttft - first) * 1e3);
            }
            late.push(l * 1e3);
            decided.push((q.ttft - t.queue_wait - t.ttft) * 1e3);
        }
        let (n, _, p50, p99, max) = err.summary();
        let (_, _, l50, l99, lmax) = late.summary();
        let (_, _, _, d99, _) = decided.summary();
        let (_, _, _, a99, _) = later.summary();
        println!(
            "| {c} | {} | {n} | {p50:.3} | **{p99:.3}** | {max:.3} | {a99:.3} | {l50:.3} | {l99:.3} | {lmax:.3} | {d99:.3} |",
            m.len()
        );
        println!("<!-- SUMMARY concurrency={c} p99_ttft_err_ms={p99:.3} p99_sim_late_ms={l99:.3} matched={n}/{} -->", m.len());
        details.push(row(&mut err));
        details.push(row(&mut late));
        details.push(row(&mut decided));
        details.push(row(&mut later));
    }
    println!("\n{HEADER}");
    for d in details {
        println!("{d}");
    }
}
