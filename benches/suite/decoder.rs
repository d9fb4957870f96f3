//! SSE decoder throughput: our `SseDecoder` and the `eventsource-stream` crate on the same
//! realistic 1 MiB stream of OpenAI chat chunks, fed in reads of several sizes. Best of
//! `--rounds` timed passes (after one warm-up pass), bytes/s = stream bytes / time.

use std::convert::Infallible;
use std::time::{Duration, Instant};

use bytes::Bytes;
use eventsource_stream::Eventsource;
use futures::StreamExt;
use llm_probe::decode::sse::{SseDecoder, SseEvent};

use crate::{loadavg, Opts};

/// ≥ `size` bytes of chat-completion chunks like vLLM/OpenAI send (varying words, a role chunk
/// first, a usage chunk and `[DONE]` last).
pub fn stream(size: usize) -> Vec<u8> {
    let words = [
        " the", " model", " streams", " tokens", ",", " one", " event", " at", " a", " time", ".",
        " Latency", " matters", "\\n", " ok", " 42",
    ];
    let head = r#"{"id":"chatcmpl-8f2b7c1e9a","object":"chat.completion.chunk","created":1733000000,"model":"meta-llama/Llama-3.1-8B-Instruct","system_fingerprint":"fp_9d3c1a","choices":[{"index":0,"delta":"#;
    let mut s = Vec::with_capacity(size + 1024);
    s.extend_from_slice(b"data: ");
    s.extend_from_slice(head.as_bytes());
    s.extend_from_slice(
        br#"{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#,
    );
    s.extend_from_slice(b"\n\n");
    let mut i = 0;
    while s.len() < size - 300 {
        s.extend_from_slice(b"data: ");
        s.extend_from_slice(head.as_bytes());
        s.extend_from_slice(
            format!(
                r#"{{"content":"{}"}},"logprobs":null,"finish_reason":null}}]}}"#,
                words[i % words.len()]
            )
            .as_bytes(),
        );
        s.extend_from_slice(b"\n\n");
        i += 1;
    }
    s.extend_from_slice(b"data: ");
    s.extend_from_slice(head.as_bytes());
    s.extend_from_slice(br#"{},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":4000,"total_tokens":4012}}"#);
    s.extend_from_slice(b"\n\ndata: [DONE]\n\n");
    s
}

fn ours(data: &[u8], read: usize) -> (usize, usize) {
    let mut d = SseDecoder::new();
    let mut out: Vec<SseEvent> = Vec::with_capacity(64);
    let (mut events, mut data_bytes) = (0, 0);
    for piece in data.chunks(read) {
        d.feed(piece, &mut out).unwrap();
        events += out.len();
        data_bytes += out.iter().map(|e| e.data.len()).sum::<usize>();
        out.clear();
    }
    (events, data_bytes)
}

fn theirs(pieces: &[Bytes]) -> (usize, usize) {
    let s = futures::stream::iter(pieces.iter().cloned().map(Ok::<Bytes, Infallible>));
    let mut es = s.eventsource();
    futures::executor::block_on(async {
        let (mut events, mut data_bytes) = (0, 0);
        while let Some(e) = es.next().await {
            let e = e.unwrap();
            events += 1;
            data_bytes += e.data.len();
        }
        (events, data_bytes)
    })
}

fn best<F: FnMut() -> (usize, usize)>(rounds: usize, mut f: F) -> (Duration, (usize, usize)) {
    let check = f();
    let mut best = Duration::MAX;
    for _ in 0..rounds {
        let t = Instant::now();
        let r = std::hint::black_box(f());
        best = best.min(t.elapsed());
        assert_eq!(r, check);
    }
    (best, check)
}

pub fn main(opts: &Opts) {
    let size = opts.num("size", 1usize << 20);
    let rounds = opts.num("rounds", 30usize);
    let data = stream(size);
    println!(
        "\n#### SSE decoder throughput — {} bytes of chat chunks, best of {rounds}; loadavg {}\n",
        data.len(),
        loadavg()
    );
    println!("| read size | events | ours GB/s | eventsource-stream GB/s | ours / crate |\n|---:|---:|---:|---:|---:|");
    for read in opts.list("reads", "1048576,16384,1500,256") {
        let pieces: Vec<Bytes> = data.chunks(read).map(Bytes::copy_from_slice).collect();
        let (t_ours, r_ours) = best(rounds, || ours(&data, read));
        let (t_theirs, r_theirs) = best(rounds, || theirs(&pieces));
        assert_eq!(
            r_ours, r_theirs,
            "both decoders must see the same events and data"
        );
        let gbps = |t: Duration| data.len() as f64 / t.as_secs_f64() / 1e9;
        println!(
            "| {read} | {} | {:.2} | {:.2} | {:.2}× |",
            r_ours.0,
            gbps(t_ours),
            gbps(t_theirs),
            t_theirs.as_secs_f64() / t_ours.as_secs_f64()
        );
    }
    println!("\n(loadavg after: {})", loadavg());
}
