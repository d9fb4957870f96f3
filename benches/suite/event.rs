//! The per-event hot path of a probe, without the network: one OpenAI chat stream of `--tokens`
//! token events (vLLM's chunks: a role chunk first, a usage chunk and `[DONE]` last) fed to a
//! fresh `SseDecoder` and the protocol's adapter (`stream_for`) as the probe's read loop feeds
//! them — each event in a read of its own (events 1 ms or more apart arrive so), stamped with
//! `Instant::now()` as the read returns — into fresh `Observations`. Per round, `--streams`
//! such streams; the table gives the best and the median round as nanoseconds per event.

use std::time::{Duration, Instant};

use llm_probe::config::Protocol;
use llm_probe::decode::sse::{SseDecoder, SseEvent};
use llm_probe::measure::Observations;
use llm_probe::protocol::{stream_for, Flow};

use crate::{loadavg, Opts};

/// One chat stream of `tokens` token events, split into its events' bytes (one read each).
fn reads(tokens: usize) -> Vec<Vec<u8>> {
    let words = [
        " the", " model", " streams", " tokens", ",", " one", " event", ".",
    ];
    let head = r#"{"id":"chatcmpl-8f2b7c1e9a","object":"chat.completion.chunk","created":1733000000,"model":"meta-llama/Llama-3.1-8B-Instruct","system_fingerprint":"fp_9d3c1a","choices":[{"index":0,"delta":"#;
    let chunk = |delta: &str, finish: &str, usage: &str| {
        format!("data: {head}{delta},\"logprobs\":null,\"finish_reason\":{finish}}}]{usage}}}\n\n")
            .into_bytes()
    };
    let mut out = vec![chunk(r#"{"role":"assistant","content":""}"#, "null", "")];
    for i in 0..tokens {
        let delta = format!(r#"{{"content":"{}"}}"#, words[i % words.len()]);
        out.push(chunk(&delta, "null", ""));
    }
    let usage = format!(
        r#","usage":{{"prompt_tokens":12,"completion_tokens":{tokens},"total_tokens":{}}}"#,
        tokens + 12
    );
    out.push(chunk("{}", "\"stop\"", &usage));
    out.push(b"data: [DONE]\n\n".to_vec());
    out
}

/// Feeds one stream; returns the events seen and the output tokens counted.
fn one(reads: &[Vec<u8>]) -> (usize, u64) {
    let mut decoder = SseDecoder::new();
    let mut adapter = stream_for(Protocol::OpenAiChat);
    let mut obs = Observations::new(Instant::now());
    let mut events: Vec<SseEvent> = Vec::with_capacity(4);
    let mut seen = 0;
    for read in reads {
        let at = Instant::now();
        decoder
            .feed(read, &mut events)
            .expect("a well-formed stream");
        for e in events.drain(..) {
            seen += 1;
            match adapter.on_event(&e, at, &mut obs) {
                Flow::Continue | Flow::Done => {}
                Flow::Fail(f) => panic!("the stream failed: {f}"),
            }
        }
    }
    (seen, obs.usage.completion_tokens.unwrap_or(0))
}

pub fn main(opts: &Opts) {
    let tokens = opts.num("tokens", 64usize);
    let streams = opts.num("streams", 2_000usize);
    let rounds = opts.num("rounds", 30usize);
    let reads = reads(tokens);
    let (events, counted) = one(&reads);
    assert_eq!(counted, tokens as u64, "the usage chunk's count");
    println!(
        "\n#### Per-event hot path (decoder + OpenAI chat adapter + observations) — {streams} streams of {events} events a round, {rounds} rounds; loadavg {}\n",
        loadavg()
    );
    let mut per_round: Vec<Duration> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..streams {
                std::hint::black_box(one(std::hint::black_box(&reads)));
            }
            t.elapsed()
        })
        .collect();
    per_round.sort();
    let per_event = |d: Duration| d.as_secs_f64() * 1e9 / (streams * events) as f64;
    println!("| events a stream | best ns/event | median ns/event | median µs/stream |\n|---:|---:|---:|---:|");
    println!(
        "| {events} | {:.0} | {:.0} | {:.1} |",
        per_event(per_round[0]),
        per_event(per_round[rounds / 2]),
        per_round[rounds / 2].as_secs_f64() * 1e6 / streams as f64
    );
}
