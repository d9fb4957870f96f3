//! The benchmark suite of BENCHMARKS.md, run by hand (`benches/run.sh [table]`), never by `cargo test`.
//! Each subcommand prints Markdown tables for `BENCHMARKS.md`:
//!
//! - `fidelity`: measured − scripted TTFT/TPOT/ITL against the in-process simulator at 1, 100,
//!   1,000 … concurrent streams, split into the simulator's own lateness and the client's part;
//!   with `--url` it probes an external simulator instead (the side-by-side with peer tools).
//! - `real`: client TTFT minus llama.cpp's `timings.prompt_ms` over sequential probes.
//! - `scale`: the daemon with many targets against a simulator process: CPU, RSS, start lag,
//!   `/metrics` render time and size.
//! - `render`: `/metrics` encoding time and size at many targets, without probing.
//! - `decoder`: SSE decoder throughput, ours and the `eventsource-stream` crate's.
//! - `event`: the per-event hot path (decoder, adapter, observations), nanoseconds per event.
//! - `sim`: the simulator with its load model as a server on a port, writing every request's
//!   ground truth as JSON lines when it stops (for out-of-process load generators).
//! - `loadtest`: `llm-probe bench`, AIPerf and GuideLLM on one concurrency sweep, next to the
//!   ground truth of the requests each sent.
//! - `genceiling`: `llm-probe bench`'s per-request TTFT error at up to 256 streams.

mod checks;
mod decoder;
mod event;
mod fidelity;
mod genceiling;
mod loadtest;
mod real;
mod render;
mod scale;
mod sim;
mod stats;

use std::collections::HashMap;
use std::time::Duration;

/// `--key value` options (and `--flag` alone = "true"); cargo's own `--bench` is ignored.
pub struct Opts(HashMap<String, String>);

impl Opts {
    fn parse(args: &[String]) -> Opts {
        let mut m = HashMap::new();
        let mut it = args.iter().peekable();
        while let Some(a) = it.next() {
            let Some(key) = a.strip_prefix("--") else {
                panic!("unexpected argument {a:?}")
            };
            let value = match it.peek() {
                Some(v) if !v.starts_with("--") => it.next().unwrap().clone(),
                _ => "true".into(),
            };
            m.insert(key.to_string(), value);
        }
        Opts(m)
    }

    pub fn str(&self, key: &str, default: &str) -> String {
        self.0.get(key).cloned().unwrap_or_else(|| default.into())
    }

    pub fn opt(&self, key: &str) -> Option<String> {
        self.0.get(key).cloned()
    }

    pub fn num<T: std::str::FromStr>(&self, key: &str, default: T) -> T {
        match self.0.get(key) {
            Some(v) => v
                .parse()
                .unwrap_or_else(|_| panic!("--{key} {v:?} is not a number")),
            None => default,
        }
    }

    pub fn dur(&self, key: &str, default: &str) -> Duration {
        humantime::parse_duration(&self.str(key, default))
            .unwrap_or_else(|e| panic!("--{key}: {e}"))
    }

    pub fn list(&self, key: &str, default: &str) -> Vec<usize> {
        self.str(key, default)
            .split(',')
            .map(|s| s.trim().parse().expect("a list of numbers"))
            .collect()
    }
}

/// Restricts the calling thread (and the threads it creates afterwards) to `cpu`. Returns
/// false where that is not possible (one core, or not Linux).
pub fn pin_to_cpu(cpu: usize) -> bool {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) <= cpu {
        return false;
    }
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it; 0 = this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// `/proc/loadavg`, for the header of every table.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let Some((cmd, rest)) = args.split_first() else {
        eprintln!("usage: suite fidelity|real|scale|render|decoder|event|sim|loadtest|genceiling|checks [--option value …]");
        std::process::exit(2);
    };
    let opts = Opts::parse(rest);
    println!(
        "<!-- suite {} | loadavg before: {} -->",
        args.join(" "),
        loadavg()
    );
    match cmd.as_str() {
        "fidelity" => fidelity::main(&opts),
        "real" => real::main(&opts),
        "scale" => scale::main(&opts),
        "decoder" => decoder::main(&opts),
        "event" => event::main(&opts),
        "checks" => checks::main(&opts),
        "render" => render::main(&opts),
        "sim" => sim::main(&opts),
        "loadtest" => loadtest::main(&opts),
        "genceiling" => genceiling::main(&opts),
        other => {
            eprintln!("unknown table {other:?}: fidelity, real, scale, render, decoder, event, sim, loadtest or genceiling");
            std::process::exit(2);
        }
    }
    println!("<!-- loadavg after: {} -->", loadavg());
}
