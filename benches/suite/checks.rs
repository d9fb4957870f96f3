//! Answer-check CPU: `Checks::evaluate` on realistic answers, per probe, and what it
//! adds at 1,000 targets probed every 10 s (100 probes/s) against the probe's own CPU there
//! (BENCHMARKS.md §4/§8b: 14–18.5 % of a core, 1.4–1.85 ms per probe). Best of `--rounds`
//! timed passes of `--iterations` evaluations each, after one warm-up pass.

use std::time::{Duration, Instant};

use llm_probe::check::{Checks, Pattern, Schema, Tool};
use llm_probe::measure::Answer;
use serde_json::json;

use crate::{loadavg, Opts};

fn prose(bytes: usize) -> String {
    let words = [
        "The",
        "capital",
        "of",
        "France",
        "is",
        "Paris,",
        "which",
        "lies",
        "on",
        "the",
        "Seine",
        "and",
        "has",
        "about",
        "two",
        "million",
        "inhabitants;",
        "its",
        "metro",
        "opened",
        "in",
        "1900.",
        "Tourists",
        "visit",
        "museums",
        "daily.",
    ];
    let mut s = String::new();
    let mut i = 0;
    while s.len() < bytes {
        s.push_str(words[(i * 7 + i / 26) % words.len()]);
        s.push(' ');
        i += 1;
    }
    s
}

fn answer(text: &str) -> Answer {
    let mut a = Answer::default();
    a.push_text(text);
    a
}

fn best(iterations: u32, rounds: u32, checks: &Checks, a: &Answer) -> Duration {
    let run = || {
        let t = Instant::now();
        for _ in 0..iterations {
            std::hint::black_box(checks.evaluate(std::hint::black_box(a), 64)).ok();
        }
        t.elapsed() / iterations
    };
    run();
    (0..rounds).map(|_| run()).min().unwrap()
}

pub fn main(opts: &Opts) {
    let iterations: u32 = opts.num("iterations", 2000);
    let rounds: u32 = opts.num("rounds", 5);
    let schema = Schema::compile(json!({
        "type": "object",
        "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
        "required": ["city", "country"],
    }))
    .unwrap();
    let expect = Checks {
        contains: vec!["Paris".into()],
        regex: vec![Pattern(regex::Regex::new(r"(?i)\bparis\b").unwrap())],
        ..Checks::default()
    };
    let structured = Checks {
        json_schema: Some(schema.clone()),
        ..Checks::default()
    };
    let tools = Checks {
        tools: vec![Tool {
            name: "get_weather".into(),
            parameters: Some(schema),
        }],
        tool_call_required: true,
        ..Checks::default()
    };
    let mut call = Answer::default();
    call.push_tool_call(
        0,
        Some("get_weather"),
        Some(r#"{"city": "Paris", "country": "France"}"#),
        Instant::now(),
    );
    let builtin = Checks::default();
    let cases: Vec<(&str, &Checks, Answer)> = vec![
        (
            "built-in checks, 64-token answer (350 B)",
            &builtin,
            answer(&prose(350)),
        ),
        (
            "built-in checks, 512-token answer (2.8 KB)",
            &builtin,
            answer(&prose(2800)),
        ),
        (
            "built-in + contains + regex, 64-token answer",
            &expect,
            answer(&prose(350)),
        ),
        (
            "built-in + json_schema, JSON answer",
            &structured,
            answer(r#"{"city": "Paris", "country": "France"}"#),
        ),
        ("tool call against its schema", &tools, call),
        (
            "built-in checks, 64 KiB answer (the cap)",
            &builtin,
            answer(&prose(64 << 10)),
        ),
    ];
    println!(
        "answer checks: best of {rounds} × {iterations} evaluations; loadavg {}",
        loadavg()
    );
    println!();
    println!("| case | per probe | at 1,000 targets / 10 s (100 probes/s) | share of the probe's CPU (1.4–1.85 ms per probe) |");
    println!("|---|---:|---:|---:|");
    for (name, checks, a) in &cases {
        let per = best(iterations, rounds, checks, a);
        let core = per.as_secs_f64() * 100.0;
        let (lo, hi) = (per.as_secs_f64() / 1.85e-3, per.as_secs_f64() / 1.4e-3);
        println!(
            "| {name} | {:.1} µs | {:.3} % of a core | {:.2}–{:.2} % |",
            per.as_secs_f64() * 1e6,
            core * 100.0,
            lo * 100.0,
            hi * 100.0
        );
    }
}
