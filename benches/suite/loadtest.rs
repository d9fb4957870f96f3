//! `suite loadtest`: the side-by-side table of `llm-probe bench`, AIPerf and GuideLLM on one
//! concurrency sweep (BENCHMARKS.md, "Load test (`bench`) side by side with peers"), read from
//! the files `benches/run.sh sweep|sweep-real` leaves in `--dir`:
//!
//! - `llm-probe-cC.json`: `llm-probe bench --output json` of level C;
//! - `aiperf-cC/profile_export_aiperf.json`: AIPerf's aggregate export;
//! - `guidellm-cC.json`: GuideLLM's JSON report;
//! - `truth-TOOL-cC.jsonl` (optional): `suite sim`'s ground truth of exactly the requests that
//!   tool sent at that level (one fresh simulator per tool and level, same seed).
//!
//! Each tool is shown with its **own** reported P50/P95/P99 (what its user reads) and, where a
//! truth file exists, next to the same percentiles of the truth (numpy's linear interpolation,
//! as `llm-probe bench`, AIPerf and GuideLLM compute theirs). TTFT truth = arrival to the
//! simulator's actual send of the first token. ITL: `llm-probe bench` pools every gap, so its
//! truth is every actual send gap; AIPerf's `inter_token_latency` and GuideLLM's
//! `inter_token_latency_ms` are per-request means ((last − first) / (tokens − 1)), so theirs is
//! the per-request mean of the actual gaps. Output throughput truth = tokens sent / (last send −
//! first arrival).

use std::path::Path;

use llm_probe::bench::stats::Summary;
use serde_json::Value;

use crate::sim::TruthRecord;
use crate::Opts;

/// P50, P95, P99 in milliseconds (TTFT, ITL) and output tokens/s, as one tool reported them.
#[derive(Debug, Clone, Default)]
struct Reported {
    n: u64,
    ttft: [f64; 3],
    itl: [f64; 3],
    /// `pooled` (every gap) or `per-request mean`.
    itl_kind: &'static str,
    throughput: f64,
}

const TOOLS: [&str; 3] = ["llm-probe", "aiperf", "guidellm"];

/// Per tool at one level: the largest |error| of TTFT and ITL (ms) and the throughput's (%).
type LevelErrors = Vec<(&'static str, [f64; 3])>;

fn label(tool: &str) -> &'static str {
    match tool {
        "llm-probe" => "**llm-probe bench**",
        "aiperf" => "AIPerf",
        _ => "GuideLLM",
    }
}

fn read_json(path: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}

fn num(v: &Value, pointer: &str) -> f64 {
    v.pointer(pointer)
        .and_then(Value::as_f64)
        .unwrap_or(f64::NAN)
}

fn three(v: &Value, base: &str, keys: [&str; 3], scale: f64) -> [f64; 3] {
    keys.map(|k| num(v, &format!("{base}/{k}")) * scale)
}

/// The tool's own report of level `c`, if it ran.
fn reported(dir: &Path, tool: &str, c: usize) -> Option<Reported> {
    match tool {
        "llm-probe" => {
            let v = read_json(&dir.join(format!("llm-probe-c{c}.json")))?;
            let l = v.pointer("/levels/0")?;
            let p = ["p50", "p95", "p99"];
            Some(Reported {
                n: l.pointer("/requests/succeeded")?.as_u64()?,
                ttft: three(l, "/ttft_seconds", p, 1e3),
                itl: three(l, "/inter_token_latency_seconds", p, 1e3),
                itl_kind: "pooled",
                throughput: num(l, "/output_throughput_tokens_per_second"),
            })
        }
        "aiperf" => {
            let v = read_json(&dir.join(format!("aiperf-c{c}/profile_export_aiperf.json")))?;
            let unit = |m: &str| match v.pointer(&format!("/{m}/unit")).and_then(Value::as_str) {
                Some("s") | Some("sec") => 1e3,
                Some("us") => 1e-3,
                Some("ns") => 1e-6,
                _ => 1.0,
            };
            let p = ["p50", "p95", "p99"];
            Some(Reported {
                n: num(&v, "/request_count/avg") as u64,
                ttft: three(&v, "/time_to_first_token", p, unit("time_to_first_token")),
                itl: three(&v, "/inter_token_latency", p, unit("inter_token_latency")),
                itl_kind: "per-request mean",
                throughput: num(&v, "/output_token_throughput/avg"),
            })
        }
        _ => {
            let v = read_json(&dir.join(format!("guidellm-c{c}.json")))?;
            let m = v.pointer("/benchmarks/0/metrics")?;
            let p = ["p50", "p95", "p99"];
            let s = "successful/percentiles";
            Some(Reported {
                n: v.pointer("/benchmarks/0/requests/successful")
                    .and_then(Value::as_array)
                    .map_or(0, |a| a.len() as u64),
                ttft: three(m, &format!("/time_to_first_token_ms/{s}"), p, 1.0),
                itl: three(m, &format!("/inter_token_latency_ms/{s}"), p, 1.0),
                itl_kind: "per-request mean",
                throughput: num(m, "/output_tokens_per_second/successful/mean"),
            })
        }
    }
}

/// The ground truth of the requests one tool sent at one level, in the tool's ITL definition.
fn truth(dir: &Path, tool: &str, c: usize, itl_kind: &str) -> Option<Reported> {
    let path = dir.join(format!("truth-{tool}-c{c}.jsonl"));
    if !path.exists() {
        return None;
    }
    let recs: Vec<TruthRecord> = TruthRecord::read_all(path.to_str()?)
        .into_iter()
        .filter(|r| !r.sent.is_empty())
        .collect();
    let ttft: Vec<f64> = recs.iter().filter_map(TruthRecord::first_sent).collect();
    let itl: Vec<f64> = if itl_kind == "pooled" {
        recs.iter().flat_map(TruthRecord::gaps).collect()
    } else {
        recs.iter()
            .filter(|r| r.sent.len() > 1)
            .map(|r| (r.sent[r.sent.len() - 1] - r.sent[0]) / (r.sent.len() - 1) as f64)
            .collect()
    };
    let tokens: usize = recs.iter().map(|r| r.sent.len()).sum();
    let first = recs.iter().map(|r| r.arrived).fold(f64::INFINITY, f64::min);
    let last = recs
        .iter()
        .map(|r| r.arrived + r.sent.last().copied().unwrap_or(0.0))
        .fold(f64::NEG_INFINITY, f64::max);
    let pick = |s: Summary| [s.p50, s.p95, s.p99].map(|x| x.unwrap_or(f64::NAN) * 1e3);
    Some(Reported {
        n: recs.len() as u64,
        ttft: pick(Summary::of(&ttft)),
        itl: pick(Summary::of(&itl)),
        itl_kind: if itl_kind == "pooled" {
            "pooled"
        } else {
            "per-request mean"
        },
        throughput: tokens as f64 / (last - first),
    })
}

fn cell(x: f64, truth: Option<f64>) -> String {
    match truth {
        Some(t) if x.is_finite() => format!("{x:.2} ({:+.2})", x - t),
        _ if x.is_finite() => format!("{x:.2}"),
        _ => "–".into(),
    }
}

fn row(name: &str, r: &Reported, t: Option<&Reported>) -> String {
    let mut cells = vec![name.to_string(), r.n.to_string()];
    for i in 0..3 {
        cells.push(cell(r.ttft[i], t.map(|t| t.ttft[i])));
    }
    for i in 0..3 {
        cells.push(cell(r.itl[i], t.map(|t| t.itl[i])));
    }
    cells.push(cell(r.throughput, t.map(|t| t.throughput)));
    cells.push(r.itl_kind.into());
    format!("| {} |", cells.join(" | "))
}

/// The largest |error| over P50/P95/P99 of `a` against `t`.
fn worst(a: &[f64; 3], t: &[f64; 3]) -> f64 {
    (0..3).map(|i| (a[i] - t[i]).abs()).fold(0.0, f64::max)
}

pub fn main(opts: &Opts) {
    let dir = opts.str("dir", ".");
    let dir = Path::new(&dir);
    let levels = opts.list("levels", "1,2,4,8,16");
    println!("\n| tool | n | TTFT P50 ms | TTFT P95 ms | TTFT P99 ms | ITL P50 ms | ITL P95 ms | ITL P99 ms | output tok/s | ITL as |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    let mut errors: Vec<(usize, LevelErrors)> = Vec::new();
    for &c in &levels {
        println!("| ***concurrency {c}*** | | | | | | | | | |");
        let mut errs = Vec::new();
        for tool in TOOLS {
            let Some(r) = reported(dir, tool, c) else {
                println!("| {} | did not run | | | | | | | | |", label(tool));
                continue;
            };
            let t = truth(dir, tool, c, r.itl_kind);
            println!("{}", row(label(tool), &r, t.as_ref()));
            if let Some(t) = &t {
                println!("{}", row("  truth of its requests", t, None));
                errs.push((
                    tool,
                    [
                        worst(&r.ttft, &t.ttft),
                        worst(&r.itl, &t.itl),
                        100.0 * (r.throughput - t.throughput).abs() / t.throughput,
                    ],
                ));
            }
        }
        errors.push((c, errs));
    }
    if errors.iter().all(|(_, e)| e.is_empty()) {
        return;
    }
    println!("\nLargest |error| against the truth over P50/P95/P99 (ms), and the output throughput's |error| (%); **bold** = smallest of the tools at that level:\n");
    println!("| concurrency | llm-probe TTFT | AIPerf TTFT | GuideLLM TTFT | llm-probe ITL | AIPerf ITL | GuideLLM ITL | llm-probe tok/s | AIPerf tok/s | GuideLLM tok/s |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (c, errs) in &errors {
        let mut cells = vec![c.to_string()];
        for k in 0..3 {
            let best = errs.iter().map(|(_, e)| e[k]).fold(f64::INFINITY, f64::min);
            for tool in TOOLS {
                cells.push(match errs.iter().find(|(t, _)| *t == tool) {
                    Some((_, e)) if e[k] == best => format!("**{:.2}**", e[k]),
                    Some((_, e)) => format!("{:.2}", e[k]),
                    None => "–".into(),
                });
            }
        }
        println!("| {} |", cells.join(" | "));
        let ours = errs.iter().find(|(t, _)| *t == "llm-probe");
        let smallest =
            ours.is_some_and(|(_, o)| (0..3).all(|k| errs.iter().all(|(_, e)| o[k] <= e[k])));
        println!("<!-- SUMMARY concurrency={c} llm_probe_smallest_everywhere={smallest} -->");
    }
}
