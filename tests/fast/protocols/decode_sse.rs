//! SSE decoder tests: one test per rule of docs/protocols.md, "Server-sent events, exactly", the "Framing and bytes" fault
//! classes of §3, golden streams (captured and hand-written) fed whole / split at every byte /
//! one byte at a time, and property tests.

use crate::common;

use llm_probe::decode::sse::{SseDecoder, SseEvent, Trailing};
use llm_probe::decode::{DecodeError, DEFAULT_MAX_EVENT_BYTES};
use proptest::prelude::*;

/// Everything observable about one decoded stream.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Outcome {
    events: Vec<SseEvent>,
    /// The first error returned by `feed`, if any (feeding stops there).
    error: Option<DecodeError>,
    trailing: Trailing,
    comments: u64,
}

/// Feed `chunks` in order to a fresh decoder with the given cap, then finish.
fn decode_chunks<'a>(chunks: impl IntoIterator<Item = &'a [u8]>, limit: usize) -> Outcome {
    let mut dec = SseDecoder::with_max_event_bytes(limit);
    let mut events = Vec::new();
    let mut error = None;
    for chunk in chunks {
        if let Err(err) = dec.feed(chunk, &mut events) {
            error = Some(err);
            break;
        }
    }
    let trailing = dec.finish();
    Outcome {
        events,
        error,
        trailing,
        comments: dec.comments(),
    }
}

/// As [`decode_chunks`], handing every event's data back to the decoder as a reader does
/// ([`SseDecoder::recycle`], a copy of it, so that the events kept for comparison stay whole).
fn decode_chunks_recycling<'a>(
    chunks: impl IntoIterator<Item = &'a [u8]>,
    limit: usize,
) -> Outcome {
    let mut dec = SseDecoder::with_max_event_bytes(limit);
    let mut events: Vec<SseEvent> = Vec::new();
    let mut error = None;
    for chunk in chunks {
        let before = events.len();
        let fed = dec.feed(chunk, &mut events);
        for event in &events[before..] {
            let mut buffer = String::with_capacity(event.data.len() + 16);
            buffer.push_str(&event.data);
            dec.recycle(buffer);
        }
        if let Err(err) = fed {
            error = Some(err);
            break;
        }
    }
    let trailing = dec.finish();
    Outcome {
        events,
        error,
        trailing,
        comments: dec.comments(),
    }
}

fn decode(input: &[u8]) -> Outcome {
    decode_chunks([input], DEFAULT_MAX_EVENT_BYTES)
}

/// Decode `input` whole, in two parts split at every byte offset, and one byte at a time;
/// assert all agree and return the outcome.
fn decode_every_way(input: &[u8], limit: usize) -> Outcome {
    let whole = decode_chunks([input], limit);
    for cut in 0..=input.len() {
        let (a, b) = input.split_at(cut);
        assert_eq!(
            decode_chunks([a, b], limit),
            whole,
            "split at byte {cut} differs from whole"
        );
    }
    assert_eq!(
        decode_chunks(input.chunks(1), limit),
        whole,
        "one byte at a time differs from whole"
    );
    for size in [1, 7, input.len().max(1)] {
        assert_eq!(
            decode_chunks_recycling(input.chunks(size), limit),
            whole,
            "{size}-byte reads with the events' buffers recycled differ from whole"
        );
    }
    whole
}

#[test]
fn recycled_buffers_hold_nothing_of_earlier_events() {
    let input = b"data: a long first event\n\ndata: b\n\ndata: c\ndata: d\n\nid: 1\ndata: e\n\n";
    let outcome = decode_every_way(input, DEFAULT_MAX_EVENT_BYTES);
    assert_eq!(datas(&outcome), ["a long first event", "b", "c\nd", "e"]);
}

fn data(d: &str) -> SseEvent {
    SseEvent {
        event: None,
        data: d.to_owned(),
        id: None,
    }
}

fn datas(outcome: &Outcome) -> Vec<&str> {
    outcome.events.iter().map(|e| e.data.as_str()).collect()
}

// ---------------------------------------------------------------------------------------------
// Rules of docs/protocols.md, "Server-sent events, exactly"
// ---------------------------------------------------------------------------------------------

#[test]
fn rule1_bom_stripped_once_at_start_even_when_split() {
    let input = "\u{FEFF}data: a\n\n".as_bytes();
    let out = decode_every_way(input, DEFAULT_MAX_EVENT_BYTES);
    assert_eq!(out.events, vec![data("a")]);
    assert_eq!(out.trailing, Trailing::default());

    // Each BOM byte in its own read.
    let mut dec = SseDecoder::new();
    let mut events = Vec::new();
    for b in [0xEF, 0xBB, 0xBF] {
        dec.feed(&[b], &mut events).unwrap();
    }
    dec.feed(b"data: a\n\n", &mut events).unwrap();
    assert_eq!(events, vec![data("a")]);

    // A stripped BOM is not content: a BOM-only stream ends clean.
    assert_eq!(decode("\u{FEFF}".as_bytes()).trailing, Trailing::default());
}

#[test]
fn rule1_second_bom_is_data() {
    // A second BOM at the start is part of the first line's field name: unknown field, ignored.
    let out = decode_every_way(
        "\u{FEFF}\u{FEFF}data: a\n\ndata: b\n\n".as_bytes(),
        DEFAULT_MAX_EVENT_BYTES,
    );
    assert_eq!(datas(&out), vec!["b"]);
    // A BOM later in the stream is kept as data.
    let out = decode_every_way(
        "data: \u{FEFF}x\n\n\u{FEFF}data: y\n\n".as_bytes(),
        DEFAULT_MAX_EVENT_BYTES,
    );
    assert_eq!(datas(&out), vec!["\u{FEFF}x"]);
}

#[test]
fn rule1_bom_prefix_that_is_not_a_bom_is_kept() {
    // EF BB 80 is U+FEC0, which starts like a BOM: the held-back bytes must not be lost.
    let out = decode_every_way("\u{FEC0}\n:c\ndata: a\n\n".as_bytes(), 16);
    assert_eq!(datas(&out), vec!["a"]);
    assert_eq!(out.comments, 1);
    // Stream that ends inside a would-be BOM: those bytes are trailing bytes.
    let out = decode_every_way(&[0xEF, 0xBB], 16);
    assert_eq!(out.trailing.bytes, 2);
    assert_eq!(out.trailing.pending, None);
    // EF BB followed by a non-continuation byte is invalid UTF-8, not silently dropped.
    let out = decode_every_way(&[0xEF, 0xBB, b'x', b'\n'], 16);
    assert_eq!(out.error, Some(DecodeError::InvalidUtf8));
}

#[test]
fn rule2_lf_crlf_and_lone_cr_mixed_in_one_stream() {
    let input = b"data: a\r\rdata: b\r\n\r\ndata: c\n\nevent: e\rdata: d\n\r\n";
    let out = decode_every_way(input, DEFAULT_MAX_EVENT_BYTES);
    assert_eq!(datas(&out), vec!["a", "b", "c", "d"]);
    assert_eq!(out.events[3].event.as_deref(), Some("e"));
    assert_eq!(out.trailing, Trailing::default());
}

#[test]
fn rule2_cr_ending_a_read_is_held_no_phantom_empty_line() {
    let mut dec = SseDecoder::new();
    let mut events = Vec::new();
    dec.feed(b"data: a\r", &mut events).unwrap();
    dec.feed(b"\ndata: b\r\n\r", &mut events).unwrap();
    // Had the LF been read as an empty line, "a" would have been dispatched alone.
    assert_eq!(events, vec![data("a\nb")]);
    dec.feed(b"\n", &mut events).unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(dec.finish(), Trailing::default());
}

#[test]
fn rule2_cr_at_end_of_stream_ends_the_line() {
    let out = decode_every_way(b"data: x\r", DEFAULT_MAX_EVENT_BYTES);
    assert!(out.events.is_empty());
    assert_eq!(out.trailing.bytes, 8);
    assert_eq!(out.trailing.pending, Some(data("x")));

    // A final CR that forms the blank line dispatches at once, before finish.
    let mut dec = SseDecoder::new();
    let mut events = Vec::new();
    dec.feed(b"data: x\n\r", &mut events).unwrap();
    assert_eq!(events, vec![data("x")]);
    assert_eq!(dec.finish(), Trailing::default());
}

#[test]
fn rule3_blank_line_dispatches() {
    let mut dec = SseDecoder::new();
    let mut events = Vec::new();
    dec.feed(b"data: a\n", &mut events).unwrap();
    assert!(events.is_empty(), "no dispatch before the blank line");
    dec.feed(b"\n", &mut events).unwrap();
    assert_eq!(events, vec![data("a")]);
    // Several blank lines in a row dispatch nothing more.
    dec.feed(b"\n\n\r\n", &mut events).unwrap();
    assert_eq!(events.len(), 1);
}

#[test]
fn rule4_comment_lines_are_counted_not_dispatched() {
    let input = b":\n: ping\n: keep-alive\ndata: a\n\n:\r\n\r\n";
    let out = decode_every_way(input, DEFAULT_MAX_EVENT_BYTES);
    assert_eq!(out.events, vec![data("a")]);
    assert_eq!(out.comments, 4);
    assert_eq!(out.trailing, Trailing::default());
}

#[test]
fn rule5_one_optional_space_after_colon_removed() {
    let out = decode_every_way(
        b"data:{\"tgi\":1}\n\ndata: one\n\ndata:  two\n\ndata:a:b\n\n",
        DEFAULT_MAX_EVENT_BYTES,
    );
    assert_eq!(datas(&out), vec!["{\"tgi\":1}", "one", " two", "a:b"]);
}

#[test]
fn rule5_line_without_colon_is_field_with_empty_value() {
    // `data` twice: two empty data lines joined with '\n' = "\n".
    let out = decode(b"data\ndata\n\n");
    assert_eq!(datas(&out), vec!["\n"]);
    // `event` with no colon gives an empty type, i.e. the default (None).
    let out = decode(b"event: x\nevent\ndata: d\n\n");
    assert_eq!(out.events, vec![data("d")]);
}

#[test]
fn rule5_field_names_case_sensitive_unknown_ignored() {
    let out = decode(b"Data: upper\nDATA: x\nfoo: bar\nevent : spaced\ndata: a\n\n");
    assert_eq!(out.events, vec![data("a")]);
    let out = decode(b"Data: only\n\n");
    assert!(out.events.is_empty());
}

#[test]
fn rule6_data_lines_join_with_newline() {
    let out = decode_every_way(
        b"data: first\ndata:second\ndata: \ndata: fourth\n\n",
        DEFAULT_MAX_EVENT_BYTES,
    );
    assert_eq!(datas(&out), vec!["first\nsecond\n\nfourth"]);
}

#[test]
fn rule7_event_type_set_and_reset_after_dispatch() {
    let out =
        decode(b"event: message_start\ndata: 1\n\ndata: 2\n\nevent: a\nevent: b\ndata: 3\n\n");
    assert_eq!(out.events[0].event.as_deref(), Some("message_start"));
    assert_eq!(out.events[1].event, None);
    assert_eq!(out.events[2].event.as_deref(), Some("b"));
    // Reset even when the block is not dispatched.
    let out = decode(b"event: lost\n\ndata: x\n\n");
    assert_eq!(out.events, vec![data("x")]);
}

#[test]
fn rule7_id_persists_nul_ids_ignored_empty_id_resets() {
    let out = decode(
        b"id: 1\ndata: a\n\ndata: b\n\nid: 2\x00x\ndata: c\n\nid\ndata: d\n\nid: 3\n\ndata: e\n\n",
    );
    let ids: Vec<Option<&str>> = out.events.iter().map(|e| e.id.as_deref()).collect();
    assert_eq!(
        ids,
        vec![Some("1"), Some("1"), Some("1"), None, Some("3")],
        "{out:?}"
    );
}

#[test]
fn rule7_retry_accepted_and_ignored() {
    let out = decode(b"retry: 3000\ndata: a\n\nretry: soon\ndata: b\n\nretry\n\n");
    assert_eq!(out.events, vec![data("a"), data("b")]);
}

#[test]
fn rule8_blocks_without_data_are_not_dispatched() {
    let out = decode_every_way(
        b"id: 7\n\nretry: 1000\n\nevent: ping\n\n: c\n\nid: 8\nretry: 5\nevent: x\n\ndata: real\n\n",
        DEFAULT_MAX_EVENT_BYTES,
    );
    assert_eq!(out.events.len(), 1);
    assert_eq!(out.events[0].data, "real");
    assert_eq!(
        out.events[0].event, None,
        "event type of an undispatched block is reset"
    );
    assert_eq!(
        out.events[0].id.as_deref(),
        Some("8"),
        "the id of an id-only block persists"
    );
}

#[test]
fn rule8_single_empty_data_line_is_not_dispatched() {
    // Our data is the joined lines, never empty for a dispatched event.
    let out = decode(b"data:\n\ndata: \n\ndata: x\n\n");
    assert_eq!(out.events, vec![data("x")]);
}

#[test]
fn rule9_bytes_after_last_blank_line_are_trailing_not_dispatched() {
    // Unterminated [DONE] (common, harmless): reported with its pending event.
    let out = decode_every_way(b"data: a\n\ndata: [DONE]", DEFAULT_MAX_EVENT_BYTES);
    assert_eq!(out.events, vec![data("a")]);
    assert_eq!(out.trailing.bytes, 12);
    assert_eq!(out.trailing.pending, Some(data("[DONE]")));

    // Terminated line but no blank line; the pending event keeps type and id.
    let out = decode(b"id: 9\nevent: done\ndata: x\ndata: y\n");
    assert!(out.events.is_empty());
    assert_eq!(out.trailing.bytes, 34);
    assert_eq!(
        out.trailing.pending,
        Some(SseEvent {
            event: Some("done".into()),
            data: "x\ny".into(),
            id: Some("9".into())
        })
    );

    // Trailing bytes without data: counted, no pending event.
    let out = decode(b"data: a\n\n: ping\nid: 3\n");
    assert_eq!(out.trailing.bytes, 13);
    assert_eq!(out.trailing.pending, None);
    assert_eq!(out.comments, 1);

    // Clean ends.
    assert_eq!(decode(b"data: a\n\n").trailing, Trailing::default());
    assert_eq!(decode(b"").trailing, Trailing::default());
    assert_eq!(decode(b"data: a\r\n\r\n").trailing, Trailing::default());
}

#[test]
fn rule9_finish_does_not_dispatch_and_resets() {
    let mut dec = SseDecoder::new();
    let mut events = Vec::new();
    dec.feed(b"id: 1\ndata: a", &mut events).unwrap();
    let t = dec.finish();
    assert!(events.is_empty());
    assert_eq!(t.pending.map(|e| e.data), Some("a".to_owned()));
    // A second finish has nothing left.
    assert_eq!(dec.finish(), Trailing::default());
}

#[test]
fn rule10_line_longer_than_cap_is_too_large() {
    let limit = 64;
    // Exactly at the cap is fine.
    let line = format!("data: {}\n\n", "x".repeat(limit - 6));
    assert_eq!(decode_every_way(line.as_bytes(), limit).events.len(), 1);
    // One byte over fails, whether or not the line is ever terminated.
    let line = format!("data: {}\n\n", "x".repeat(limit - 5));
    let out = decode_every_way(line.as_bytes(), limit);
    assert_eq!(out.error, Some(DecodeError::TooLarge { limit }));
    assert!(out.events.is_empty());
}

#[test]
fn rule10_endless_line_fails_without_buffering_it_all() {
    let limit = 1024;
    let mut dec = SseDecoder::with_max_event_bytes(limit);
    let mut events = Vec::new();
    let chunk = [b'x'; 100];
    let mut fed = 0usize;
    let err = loop {
        match dec.feed(&chunk, &mut events) {
            Ok(()) => fed += chunk.len(),
            Err(err) => break err,
        }
        assert!(
            fed <= limit,
            "the cap must trip before the line grows past it"
        );
    };
    assert_eq!(err, DecodeError::TooLarge { limit });
}

#[test]
fn rule10_event_of_many_small_data_lines_is_too_large() {
    let limit = 1000;
    let mut dec = SseDecoder::with_max_event_bytes(limit);
    let mut events = Vec::new();
    let mut result = Ok(());
    for _ in 0..1000 {
        result = dec.feed(b"data: 0123456789\n", &mut events);
        if result.is_err() {
            break;
        }
    }
    assert_eq!(result, Err(DecodeError::TooLarge { limit }));
    assert!(events.is_empty());
}

#[test]
fn rule10_sixteen_mib_of_one_byte_reads_completes() {
    // Linear time is by construction (each byte scanned once); this only shows a large stream of
    // tiny reads goes through. No duration is asserted.
    let event = b"data: {\"choices\":[{\"delta\":{\"content\":\"tok\"}}]}\n\n";
    let total = 16 << 20;
    let mut dec = SseDecoder::with_max_event_bytes(4096);
    let mut events = Vec::new();
    let mut count = 0usize;
    let mut fed = 0usize;
    while fed < total {
        for b in event.chunks(1) {
            dec.feed(b, &mut events).unwrap();
        }
        fed += event.len();
        count += events.len();
        events.clear();
    }
    assert_eq!(count, fed / event.len());
    assert_eq!(dec.finish(), Trailing::default());
}

#[test]
fn invalid_utf8_in_a_complete_line_is_an_error() {
    let out = decode_every_way(b"data: ok\n\ndata: \xFF\xFE\n\n", DEFAULT_MAX_EVENT_BYTES);
    assert_eq!(out.events, vec![data("ok")]);
    assert_eq!(out.error, Some(DecodeError::InvalidUtf8));
    // Truncated multi-byte character at end of a line.
    let out = decode(b"data: \xE4\xB8\n\n");
    assert_eq!(out.error, Some(DecodeError::InvalidUtf8));
}

// ---------------------------------------------------------------------------------------------
// Fault classes of docs/protocols.md, "Stream faults the probe gets right", "Framing and bytes"
// ---------------------------------------------------------------------------------------------

#[test]
fn fault_multibyte_utf8_split_at_every_byte() {
    let text = "中文测试 🦀🎉 日本語 한국어 é";
    let input = format!("data: {text}\n\ndata: {{\"content\":\"{text}\"}}\n\n");
    let out = decode_every_way(input.as_bytes(), DEFAULT_MAX_EVENT_BYTES);
    assert_eq!(out.error, None);
    assert_eq!(
        datas(&out),
        vec![text.to_owned(), format!("{{\"content\":\"{text}\"}}")]
    );
    assert!(!out.events.iter().any(|e| e.data.contains('\u{FFFD}')));
}

#[test]
fn fault_event_split_at_every_byte() {
    let input = b"event: content_block_delta\nid: 42\ndata: {\"type\":\"content_block_delta\",\ndata: \"delta\":{\"text\":\"Hi\"}}\n\n";
    let out = decode_every_way(input, DEFAULT_MAX_EVENT_BYTES);
    assert_eq!(
        out.events,
        vec![SseEvent {
            event: Some("content_block_delta".into()),
            data: "{\"type\":\"content_block_delta\",\n\"delta\":{\"text\":\"Hi\"}}".into(),
            id: Some("42".into()),
        }]
    );
}

#[test]
fn fault_crlf_split_across_reads_no_phantom_line() {
    // Every event is split between its CR and LF, and between the blank line's CR and LF.
    let reads: [&[u8]; 6] = [
        b"data: a\r",
        b"\ndata: b\r",
        b"\n\r",
        b"\ndata: c\r",
        b"\n\r",
        b"\n",
    ];
    let out = decode_chunks(reads, DEFAULT_MAX_EVENT_BYTES);
    assert_eq!(datas(&out), vec!["a\nb", "c"]);
    assert_eq!(out.trailing, Trailing::default());
}

#[test]
fn fault_crlf_only_framing_dispatches_each_event_on_its_blank_line() {
    let mut dec = SseDecoder::new();
    let mut events = Vec::new();
    for i in 0..5 {
        let read = format!("data: {{\"n\":{i}}}\r\n\r\n");
        dec.feed(read.as_bytes(), &mut events).unwrap();
        assert_eq!(
            events.len(),
            i + 1,
            "event {i} must be out before end of stream"
        );
    }
    assert_eq!(dec.finish(), Trailing::default());
}

#[test]
fn fault_comment_keepalives_during_prefill() {
    let mut dec = SseDecoder::new();
    let mut events = Vec::new();
    for _ in 0..10 {
        dec.feed(b": keep-alive\n\n", &mut events).unwrap();
        dec.feed(b":\n", &mut events).unwrap();
    }
    assert!(
        events.is_empty(),
        "keep-alives must not reach the JSON parser"
    );
    dec.feed(b"data: {\"x\":1}\n\n", &mut events).unwrap();
    assert_eq!(events, vec![data("{\"x\":1}")]);
    assert_eq!(dec.comments(), 20);
}

#[test]
fn fault_gateway_rewrapped_keepalive_comes_through_as_data() {
    let out = decode(b"data: : keepalive\n\ndata: {}\n\n");
    assert_eq!(datas(&out), vec![": keepalive", "{}"]);
    assert_eq!(out.comments, 0);
}

#[test]
fn fault_id_and_retry_only_blocks_not_dispatched() {
    let out = decode_every_way(
        b"id: 1\n\nretry: 100\n\nid: 2\r\nretry: 5\r\n\r\n",
        DEFAULT_MAX_EVENT_BYTES,
    );
    assert!(out.events.is_empty());
    assert_eq!(out.trailing, Trailing::default());
}

#[test]
fn poisoned_after_error() {
    let mut dec = SseDecoder::with_max_event_bytes(8);
    let mut events = Vec::new();
    let err = dec.feed(b"data: 0123456789", &mut events).unwrap_err();
    assert_eq!(err, DecodeError::TooLarge { limit: 8 });
    assert_eq!(dec.feed(b"\n\ndata: a\n\n", &mut events), Err(err.clone()));
    assert!(events.is_empty());
    // Poisoned: no trailing report (the error is the report).
    assert_eq!(dec.finish(), Trailing::default());
    assert_eq!(dec.feed(b"data: a\n\n", &mut events), Err(err));

    let mut dec = SseDecoder::new();
    assert_eq!(
        dec.feed(b"data: \xC0\n", &mut events),
        Err(DecodeError::InvalidUtf8)
    );
    assert_eq!(
        dec.feed(b"data: fine\n\n", &mut events),
        Err(DecodeError::InvalidUtf8)
    );
    assert!(events.is_empty());
}

#[test]
fn events_before_an_error_in_the_same_read_are_kept() {
    let mut dec = SseDecoder::new();
    let mut events = Vec::new();
    let result = dec.feed(b"data: a\n\ndata: \xFF\n\n", &mut events);
    assert_eq!(result, Err(DecodeError::InvalidUtf8));
    assert_eq!(events, vec![data("a")]);
}

// ---------------------------------------------------------------------------------------------
// Golden streams
// ---------------------------------------------------------------------------------------------

fn fixture(rel: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{rel}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

/// Decode a golden file every way, check it decodes cleanly, and return the outcome.
fn golden(rel: &str) -> Outcome {
    let input = fixture(rel);
    let out = decode_every_way(&input, DEFAULT_MAX_EVENT_BYTES);
    assert_eq!(out.error, None, "{rel}");
    out
}

fn types(out: &Outcome) -> Vec<Option<&str>> {
    out.events.iter().map(|e| e.event.as_deref()).collect()
}

/// The usual OpenAI-style capture: `n` data-only events, the last `[DONE]`, each other one JSON.
fn assert_openai_like(out: &Outcome, n: usize) {
    assert_eq!(out.events.len(), n);
    assert_eq!(out.events.last().unwrap().data, "[DONE]");
    assert!(out
        .events
        .iter()
        .all(|e| e.event.is_none() && e.id.is_none()));
    for e in &out.events[..n - 1] {
        serde_json::from_str::<serde_json::Value>(&e.data)
            .unwrap_or_else(|err| panic!("not JSON: {err}: {}", e.data));
    }
    assert_eq!(out.trailing, Trailing::default());
    assert_eq!(out.comments, 0);
}

#[test]
fn golden_captured_every_file_is_covered() {
    let dir = format!("{}/tests/fixtures/captured", env!("CARGO_MANIFEST_DIR"));
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".txt"))
        .collect();
    names.sort();
    assert_eq!(
        names,
        vec![
            "guidellm-mock.txt",
            "litellm.txt",
            "llama-cpp-anthropic.txt",
            "llama-cpp-chat.txt",
            "llama-cpp-completions.txt",
            "llama-cpp-native.txt",
            "llama-cpp-responses.txt",
            "llm-mock-api.txt",
            "llm-mock-api_anthropic.txt",
            "mockllm.txt",
            "mockllm_anthropic.txt",
            "vllm-chat.txt",
            "vllm-completions.txt",
            "vllm-responses.txt",
        ],
        "a new captured file needs its own golden test below"
    );
}

#[test]
fn golden_captured_guidellm_mock() {
    let out = golden("captured/guidellm-mock.txt");
    assert_openai_like(&out, 13);
    assert!(out.events[0].data.contains("\"content\": \"Score\""));
    assert!(out.events[11]
        .data
        .contains("\"usage\": {\"prompt_tokens\": 3, \"completion_tokens\": 10"));
}

#[test]
fn golden_captured_litellm() {
    let out = golden("captured/litellm.txt");
    assert_openai_like(&out, 19);
    assert!(out.events[0]
        .data
        .contains("\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"}"));
    assert!(out.events[17].data.contains("\"completion_tokens\":11"));
}

#[test]
fn golden_captured_llama_cpp_anthropic() {
    let out = golden("captured/llama-cpp-anthropic.txt");
    assert_eq!(out.events.len(), 28);
    let t = types(&out);
    assert_eq!(t[0], Some("message_start"));
    assert_eq!(t[1], Some("content_block_start"));
    assert_eq!(t[2], Some("content_block_delta"));
    assert_eq!(t[26], Some("message_delta"));
    assert_eq!(t[27], Some("message_stop"));
    assert!(out.events[26].data.contains("\"output_tokens\":24"));
    assert_eq!(out.events[27].data, "{\"type\":\"message_stop\"}");
    assert_eq!(out.trailing, Trailing::default());
}

#[test]
fn golden_captured_llama_cpp_chat() {
    let out = golden("captured/llama-cpp-chat.txt");
    assert_openai_like(&out, 39);
    assert!(out.events[0]
        .data
        .contains("\"delta\":{\"role\":\"assistant\",\"content\":null}"));
    assert!(out.events[1].data.contains("\"content\":\"Time\""));
    assert!(out.events[37].data.contains("\"timings\""));
}

#[test]
fn golden_captured_llama_cpp_completions() {
    let out = golden("captured/llama-cpp-completions.txt");
    assert_openai_like(&out, 26);
    assert!(out.events[0].data.contains("\"text\":\"\\n   \""));
    assert!(out.events[24].data.contains("\"predicted_n\":24"));
}

#[test]
fn golden_captured_llama_cpp_native() {
    let out = golden("captured/llama-cpp-native.txt");
    // The native /completion stream has no [DONE]: the last event has "stop":true.
    assert_eq!(out.events.len(), 17);
    assert!(out.events[0].data.contains("\"content\":\" Paris\""));
    assert!(out.events[16].data.contains("\"stop\":true"));
    assert!(out.events[..16]
        .iter()
        .all(|e| e.data.contains("\"stop\":false")));
    assert_eq!(out.trailing, Trailing::default());
}

#[test]
fn golden_captured_llama_cpp_responses() {
    let out = golden("captured/llama-cpp-responses.txt");
    assert_eq!(out.events.len(), 11);
    let t = types(&out);
    assert_eq!(t[0], Some("response.created"));
    assert_eq!(t[10], Some("response.completed"));
    // `event:` equals the JSON `type` on every event.
    for e in &out.events {
        let v: serde_json::Value = serde_json::from_str(&e.data).unwrap();
        assert_eq!(v["type"].as_str(), e.event.as_deref());
    }
    assert_eq!(out.trailing, Trailing::default());
}

#[test]
fn golden_captured_llm_mock_api() {
    let out = golden("captured/llm-mock-api.txt");
    assert_openai_like(&out, 14);
    assert!(out.events[0]
        .data
        .contains("\"delta\": {\"role\": \"assistant\"}"));
    assert!(out.events[1].data.contains("\"content\": \"Hell\""));
}

#[test]
fn golden_captured_llm_mock_api_anthropic() {
    let out = golden("captured/llm-mock-api_anthropic.txt");
    assert_eq!(out.events.len(), 15);
    let t = types(&out);
    assert_eq!(t[0], Some("message_start"));
    assert_eq!(t[14], Some("message_stop"));
    assert!(out.events[2].data.contains("\"text\": \"Hell\""));
    assert!(out.events[13].data.contains("\"output_tokens\": 5"));
}

#[test]
fn golden_captured_mockllm() {
    let out = golden("captured/mockllm.txt");
    assert_openai_like(&out, 27);
    assert!(out.events[1]
        .data
        .contains("\"delta\":{\"role\":null,\"content\":\"T\"}"));
    assert!(out.events[25].data.contains("\"finish_reason\":\"stop\""));
}

#[test]
fn golden_captured_mockllm_anthropic() {
    // Not the real Anthropic format: no `event:` lines, and a [DONE] at the end.
    let out = golden("captured/mockllm_anthropic.txt");
    assert_openai_like(&out, 25);
    assert!(out.events[0].data.contains("\"delta\":{\"text\":\"T\"}"));
}

#[test]
fn golden_sse_gemini_crlf() {
    let out = golden("sse/gemini-crlf.sse");
    assert_eq!(out.events.len(), 4);
    assert!(out.events[0].data.contains("\"text\":\"Hello\""));
    assert!(out.events[1].data.contains("，世界"));
    assert!(out.events[3].data.contains("\"candidatesTokenCount\":3"));
    assert!(out.events.iter().all(|e| !e.data.contains('\r')));
    assert_eq!(out.trailing, Trailing::default());
}

#[test]
fn golden_sse_tgi_no_space_after_colon() {
    let out = golden("sse/tgi-nospace.sse");
    assert_eq!(out.events.len(), 4);
    assert!(out.events.iter().all(|e| e.data.starts_with("{\"index\":")));
    assert!(out.events[3].data.contains("\"generated_tokens\":4"));
}

#[test]
fn golden_sse_anthropic_with_pings() {
    let out = golden("sse/anthropic-pings.sse");
    assert_eq!(
        types(&out),
        vec![
            Some("message_start"),
            Some("content_block_start"),
            Some("ping"),
            Some("content_block_delta"),
            Some("content_block_delta"),
            Some("ping"),
            Some("content_block_stop"),
            Some("message_delta"),
            Some("message_stop"),
        ]
    );
    assert!(out.events[4].data.contains("\"text\":\" 👋\""));
    assert_eq!(out.comments, 1);
    assert_eq!(out.trailing, Trailing::default());
}

#[test]
fn golden_sse_keepalives() {
    let out = golden("sse/keepalive.sse");
    assert_eq!(datas(&out)[0], ": keepalive");
    assert_eq!(out.events.len(), 4);
    let ids: Vec<Option<&str>> = out.events.iter().map(|e| e.id.as_deref()).collect();
    assert_eq!(ids, vec![Some("1"), Some("1"), Some("2"), Some("2")]);
    assert_eq!(out.events[3].data, "[DONE]");
    assert_eq!(out.comments, 5);
    assert_eq!(out.trailing, Trailing::default());
}

#[test]
fn golden_sse_mixed_line_endings() {
    let out = golden("sse/mixed-endings.sse");
    assert_eq!(
        out.events,
        vec![
            data("第一\n行"),
            SseEvent {
                event: Some("multi".into()),
                data: "🦀 one\ntwo\n three".into(),
                id: None
            },
            data("last"),
        ]
    );
    assert_eq!(out.trailing, Trailing::default());
}

#[test]
fn golden_sse_unterminated_done() {
    let out = golden("sse/unterminated-done.sse");
    assert_eq!(out.events.len(), 1);
    assert_eq!(out.trailing.bytes, "data: [DONE]\n".len());
    assert_eq!(out.trailing.pending, Some(data("[DONE]")));
}

// ---------------------------------------------------------------------------------------------
// Property tests
// ---------------------------------------------------------------------------------------------

/// Bytes biased towards SSE structure so random inputs hit fields, terminators, BOM and UTF-8.
fn sse_ish_byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        4 => prop::sample::select(b"data: \r\n:eventidry\xEF\xBB\xBF\xE4\xB8\xAD\x00".to_vec()),
        1 => any::<u8>(),
    ]
}

fn offsets() -> impl Strategy<Value = Vec<prop::sample::Index>> {
    prop::collection::vec(any::<prop::sample::Index>(), 0..10)
}

fn to_offsets(len: usize, idx: &[prop::sample::Index]) -> Vec<usize> {
    idx.iter().map(|i| i.index(len + 1)).collect()
}

/// One generated event: optional type, 1..4 data lines (joined non-empty), optional new id.
#[derive(Debug, Clone)]
struct GenEvent {
    event: Option<String>,
    data_lines: Vec<String>,
    id: Option<String>,
    /// Comment lines inserted before each field line (by position).
    comments: Vec<Option<String>>,
    /// Put a retry-only or blank block before the event.
    noise: u8,
}

/// Text for a field value: no CR, LF or NUL (`\PC` excludes control and format characters).
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{0,12}",
        " \\PC{0,6}",
        prop::sample::select(vec![
            String::from("{\"a\":1}"),
            String::from("[DONE]"),
            String::from(": keepalive"),
            String::from("中文🦀"),
            String::from("a:b"),
        ]),
    ]
}

fn gen_event() -> impl Strategy<Value = GenEvent> {
    (
        prop::option::of("[a-z_.]{1,12}"),
        prop::collection::vec(value(), 1..4),
        prop::option::of("[0-9a-z]{1,6}"),
        prop::collection::vec(prop::option::weighted(0.2, "\\PC{0,8}"), 6),
        0u8..4,
    )
        .prop_filter("joined data must be non-empty", |(_, d, _, _, _)| {
            d.len() > 1 || !d[0].is_empty()
        })
        .prop_map(|(event, data_lines, id, comments, noise)| GenEvent {
            event,
            data_lines,
            id,
            comments,
            noise,
        })
}

/// Serialize lines with the given endings (0 = LF, 1 = CR, 2 = CRLF). A blank line must not be
/// LF-terminated right after a CR-terminated line (that would read as one CRLF).
fn serialize(lines: &[String], endings: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut prev_cr = false;
    for (i, line) in lines.iter().enumerate() {
        out.extend_from_slice(line.as_bytes());
        let mut ending = endings[i % endings.len()];
        if ending == 0 && prev_cr && line.is_empty() {
            ending = 2;
        }
        out.extend_from_slice(match ending {
            0 => b"\n".as_slice(),
            1 => b"\r",
            _ => b"\r\n",
        });
        prev_cr = ending == 1;
    }
    out
}

/// Build the lines of a stream from generated events and the events a correct decoder yields.
fn build_stream(events: &[GenEvent], spaces: &[bool]) -> (Vec<String>, Vec<SseEvent>, u64) {
    let mut lines = Vec::new();
    let mut expected = Vec::new();
    let mut comments = 0u64;
    let mut last_id: Option<String> = None;
    let mut s = spaces.iter().cycle();
    let mut field = |name: &str, value: &str, lines: &mut Vec<String>| {
        let sep = if *s.next().unwrap() || value.starts_with(' ') {
            ": "
        } else {
            ":"
        };
        lines.push(format!("{name}{sep}{value}"));
    };
    for ev in events {
        match ev.noise {
            1 => {
                lines.push("retry: 1500".into());
                lines.push(String::new());
            }
            2 => lines.push(String::new()),
            _ => {}
        }
        let mut fields: Vec<(&str, &str)> = Vec::new();
        if let Some(t) = &ev.event {
            fields.push(("event", t));
        }
        if let Some(id) = &ev.id {
            fields.push(("id", id));
        }
        for d in &ev.data_lines {
            fields.push(("data", d));
        }
        for (i, (name, value)) in fields.into_iter().enumerate() {
            if let Some(Some(c)) = ev.comments.get(i) {
                lines.push(format!(":{c}"));
                comments += 1;
            }
            field(name, value, &mut lines);
        }
        lines.push(String::new());
        if ev.id.is_some() {
            last_id = ev.id.clone();
        }
        expected.push(SseEvent {
            event: ev.event.clone(),
            data: ev.data_lines.join("\n"),
            id: last_id.clone(),
        });
    }
    (lines, expected, comments)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn prop_random_bytes_random_splits_same_as_whole(
        input in prop::collection::vec(sse_ish_byte(), 0..300),
        cuts in offsets(),
        limit in prop::sample::select(vec![4usize, 16, 64, DEFAULT_MAX_EVENT_BYTES]),
    ) {
        let whole = decode_chunks([input.as_slice()], limit);
        let parts = common::split_at_offsets(&input, &to_offsets(input.len(), &cuts));
        let split = decode_chunks(parts.iter().map(Vec::as_slice), limit);
        prop_assert_eq!(&split, &whole);
        let bytewise = decode_chunks(input.chunks(1), limit);
        prop_assert_eq!(&bytewise, &whole);
        // Invariants that hold for any input.
        prop_assert!(whole.events.iter().all(|e| !e.data.is_empty()));
        prop_assert!(whole.trailing.bytes <= input.len());
    }

    #[test]
    fn prop_well_formed_events_round_trip(
        events in prop::collection::vec(gen_event(), 0..12),
        endings in prop::collection::vec(0u8..3, 1..8),
        spaces in prop::collection::vec(any::<bool>(), 1..8),
        bom in any::<bool>(),
        cuts in offsets(),
    ) {
        let (lines, expected, comments) = build_stream(&events, &spaces);
        let mut input = if bom { "\u{FEFF}".as_bytes().to_vec() } else { Vec::new() };
        input.extend(serialize(&lines, &endings));
        let parts = common::split_at_offsets(&input, &to_offsets(input.len(), &cuts));
        let out = decode_chunks(parts.iter().map(Vec::as_slice), DEFAULT_MAX_EVENT_BYTES);
        prop_assert_eq!(out.error, None);
        prop_assert_eq!(out.events, expected);
        prop_assert_eq!(out.comments, comments);
        prop_assert_eq!(out.trailing, Trailing::default());
    }
}

/// A real vLLM (CPU build 0.32.0, `--enable-per-request-metrics`): extra keys on the first chunk,
/// usage and the per-request `metrics` object on the last chunk before `[DONE]`.
#[test]
fn golden_captured_vllm_chat() {
    let out = golden("captured/vllm-chat.txt");
    assert_openai_like(&out, 9);
    assert!(out.events[0].data.contains("\"prompt_token_ids\":null"));
    assert!(out.events[1].data.contains("\"content\":\"Hello\""));
    assert!(out.events[7].data.contains("\"queue_time_ms\":"));
    assert!(out.events[7]
        .data
        .contains("\"system_fingerprint\":\"vllm-0.32.0-"));
}

#[test]
fn golden_captured_vllm_completions() {
    let out = golden("captured/vllm-completions.txt");
    assert_openai_like(&out, 6);
    assert!(out.events[0].data.contains("\"text\":\"am\""));
    assert!(out.events[4].data.contains("\"time_to_first_token_ms\":"));
}

#[test]
fn golden_captured_vllm_responses() {
    let out = golden("captured/vllm-responses.txt");
    assert_eq!(out.events.len(), 12);
    let t = types(&out);
    assert_eq!(t[0], Some("response.created"));
    assert_eq!(t[11], Some("response.completed"));
    for e in &out.events {
        let v: serde_json::Value = serde_json::from_str(&e.data).unwrap();
        assert_eq!(v["type"].as_str(), e.event.as_deref());
    }
    assert!(out.events[11].data.contains("\"queue_time_ms\":"));
    assert_eq!(out.trailing, Trailing::default());
}
