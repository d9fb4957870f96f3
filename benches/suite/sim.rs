//! `suite sim`: the simulator with its load model as a server for out-of-process clients
//! (`llm-probe bench`, AIPerf, GuideLLM), pinned to CPU 1, that writes every request's ground
//! truth as JSON lines when it gets SIGTERM or SIGINT. One line per request that streamed:
//!
//! - `nonce`: the `[probe NONCE]` tag at the start of the first message (or prompt), if any;
//! - `arrived_s`: when the whole request had arrived, seconds from the first request's arrival;
//! - `queue_wait_s`, `ttft_s`: the load model's decisions ([`Truth`]: the wait for a slot, and
//!   the jittered TTFT scripted from getting it);
//! - `sent_s`: when each token event was actually handed to the connection, seconds from the
//!   arrival (`sent_s[0]` is the true TTFT; the gaps are the true ITLs).
//!
//! `suite sim --port 18556 --ttft 100ms --itl 20ms --tokens 16 --slots 4 --prefill-per-token 1ms
//! --itl-slowdown-per-stream 0.05 --jitter 0.2 --seed 1 --out truth.jsonl`

use std::io::Write;

use llm_probe::simulate::{Load, ReceivedRequest, Script, Truth};
use serde_json::json;

use crate::fidelity::{sd, start_simulator};
use crate::Opts;

/// One request's ground truth as read back by the sweep tables.
#[derive(Debug, Clone)]
pub struct TruthRecord {
    pub nonce: Option<String>,
    pub arrived: f64,
    pub queue_wait: f64,
    pub ttft: f64,
    pub sent: Vec<f64>,
}

impl TruthRecord {
    /// The true TTFT from arrival to the actual send of the first token, seconds.
    pub fn first_sent(&self) -> Option<f64> {
        self.sent.first().copied()
    }

    /// The actual gaps between token sends, seconds.
    pub fn gaps(&self) -> Vec<f64> {
        self.sent.windows(2).map(|w| w[1] - w[0]).collect()
    }

    /// How late the simulator sent the first token against its own decision
    /// (`queue wait + ttft`), seconds.
    pub fn sim_late(&self) -> Option<f64> {
        self.first_sent().map(|s| s - (self.queue_wait + self.ttft))
    }

    fn of(r: &ReceivedRequest, t: &Truth, origin: std::time::Instant) -> TruthRecord {
        let sent = r.events_sent.lock().unwrap_or_else(|e| e.into_inner());
        TruthRecord {
            nonce: nonce(&r.body),
            arrived: sd(r.arrived, origin),
            queue_wait: t.queue_wait.as_secs_f64(),
            ttft: t.ttft.as_secs_f64(),
            sent: sent.iter().map(|&s| sd(s, r.arrived)).collect(),
        }
    }

    fn to_json(&self) -> serde_json::Value {
        json!({
            "nonce": self.nonce, "arrived_s": self.arrived, "queue_wait_s": self.queue_wait,
            "ttft_s": self.ttft, "sent_s": self.sent,
        })
    }

    /// Reads a file written by `suite sim`.
    pub fn read_all(path: &str) -> Vec<TruthRecord> {
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        text.lines()
            .map(|l| {
                let v: serde_json::Value =
                    serde_json::from_str(l).unwrap_or_else(|e| panic!("{path}: {e}"));
                let f = |k: &str| v[k].as_f64().unwrap_or_else(|| panic!("{path}: no {k}"));
                TruthRecord {
                    nonce: v["nonce"].as_str().map(String::from),
                    arrived: f("arrived_s"),
                    queue_wait: f("queue_wait_s"),
                    ttft: f("ttft_s"),
                    sent: serde_json::from_value(v["sent_s"].clone()).expect("sent_s"),
                }
            })
            .collect()
    }
}

/// The `[probe NONCE]` tag that starts the first message's content (or the prompt).
fn nonce(body: &serde_json::Value) -> Option<String> {
    let text = body["messages"][0]["content"]
        .as_str()
        .or_else(|| body["prompt"].as_str())?;
    let rest = text.strip_prefix("[probe ")?;
    Some(rest.split(']').next()?.to_string())
}

/// The script and load model of the command line.
pub fn script(opts: &Opts) -> Script {
    Script {
        ttft: opts.dur("ttft", "100ms"),
        itl: opts.dur("itl", "20ms"),
        tokens: opts.num("tokens", 16),
        load: Load {
            slots: opts.num("slots", 0),
            prefill_per_token: opts.dur("prefill-per-token", "0ms"),
            itl_slowdown_per_stream: opts.num("itl-slowdown-per-stream", 0.0),
            jitter: opts.num("jitter", 0.0),
            seed: opts.num("seed", 0),
            ..Load::default()
        },
        ..Script::default()
    }
}

pub fn main(opts: &Opts) {
    let addr = format!("127.0.0.1:{}", opts.num("port", 0u16))
        .parse()
        .expect("an address");
    let out = opts.str("out", "truth.jsonl");
    let (url, stop, received) = start_simulator(addr, script(opts), !opts.0.contains_key("no-pin"));
    eprintln!("suite sim: serving {url}; SIGTERM writes {out}");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
        tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
    });
    stop.send(()).unwrap();
    let received = received.recv().unwrap();
    let origin = received.iter().map(|r| r.arrived).min();
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(&out).unwrap_or_else(|e| panic!("{out}: {e}")),
    );
    let mut n = 0;
    for r in &received {
        if let (Some(t), Some(origin)) = (r.truth.get(), origin) {
            writeln!(f, "{}", TruthRecord::of(r, t, origin).to_json()).expect("write");
            n += 1;
        }
    }
    f.flush().expect("write");
    eprintln!(
        "suite sim: {n} requests with ground truth ({} received) written to {out}",
        received.len()
    );
}
