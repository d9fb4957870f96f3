//! NDJSON decoder tests (Ollama native streams): framing rules, the "Framing and bytes" fault
//! classes of docs/protocols.md, "Stream faults the probe gets right", a golden Ollama stream split every way, and property tests.

use crate::common;

use llm_probe::decode::ndjson::NdjsonDecoder;
use llm_probe::decode::{DecodeError, DEFAULT_MAX_EVENT_BYTES};
use proptest::prelude::*;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Outcome {
    lines: Vec<String>,
    error: Option<DecodeError>,
    last: Option<String>,
}

fn decode_chunks<'a>(chunks: impl IntoIterator<Item = &'a [u8]>, limit: usize) -> Outcome {
    let mut dec = NdjsonDecoder::with_max_line_bytes(limit);
    let mut lines = Vec::new();
    let mut error = None;
    for chunk in chunks {
        if let Err(err) = dec.feed(chunk, &mut lines) {
            error = Some(err);
            break;
        }
    }
    Outcome {
        lines,
        error,
        last: dec.finish(),
    }
}

fn decode(input: &[u8]) -> Outcome {
    decode_chunks([input], DEFAULT_MAX_EVENT_BYTES)
}

fn decode_every_way(input: &[u8], limit: usize) -> Outcome {
    let whole = decode_chunks([input], limit);
    for cut in 0..=input.len() {
        let (a, b) = input.split_at(cut);
        assert_eq!(decode_chunks([a, b], limit), whole, "split at byte {cut}");
    }
    assert_eq!(
        decode_chunks(input.chunks(1), limit),
        whole,
        "one byte at a time"
    );
    whole
}

/// An Ollama `/api/chat` stream as Ollama writes it: LF after every line, durations in ns.
const OLLAMA_CHAT: &str = concat!(
    "{\"model\":\"llama3.2\",\"created_at\":\"2025-01-01T00:00:00.1Z\",\"message\":{\"role\":\"assistant\",\"content\":\"\",\"thinking\":\"Hmm\"},\"done\":false}\n",
    "{\"model\":\"llama3.2\",\"created_at\":\"2025-01-01T00:00:00.2Z\",\"message\":{\"role\":\"assistant\",\"content\":\"天空\"},\"done\":false}\n",
    "{\"model\":\"llama3.2\",\"created_at\":\"2025-01-01T00:00:00.3Z\",\"message\":{\"role\":\"assistant\",\"content\":\" is blue 🌤\"},\"done\":false}\n",
    "{\"model\":\"llama3.2\",\"created_at\":\"2025-01-01T00:00:00.4Z\",\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done\":true,\"done_reason\":\"stop\",\"total_duration\":812000000,\"load_duration\":1000000,\"prompt_eval_count\":26,\"prompt_eval_duration\":130000000,\"eval_count\":3,\"eval_duration\":59000000}\n",
);

#[test]
fn golden_ollama_chat_split_every_way() {
    let out = decode_every_way(OLLAMA_CHAT.as_bytes(), DEFAULT_MAX_EVENT_BYTES);
    assert_eq!(out.error, None);
    assert_eq!(out.lines.len(), 4);
    assert_eq!(out.last, None);
    for line in &out.lines {
        serde_json::from_str::<serde_json::Value>(line).unwrap();
    }
    assert!(out.lines[1].contains("天空"));
    assert!(out.lines[3].contains("\"eval_count\":3"));
}

#[test]
fn golden_ollama_generate_crlf_and_unterminated_last_line() {
    let input = "{\"response\":\"Hi\",\"done\":false}\r\n\r\n{\"response\":\"!\",\"done\":false}\r\n{\"done\":true,\"eval_count\":2}";
    let out = decode_every_way(input.as_bytes(), DEFAULT_MAX_EVENT_BYTES);
    assert_eq!(
        out.lines,
        vec![
            "{\"response\":\"Hi\",\"done\":false}",
            "{\"response\":\"!\",\"done\":false}"
        ]
    );
    assert_eq!(
        out.last.as_deref(),
        Some("{\"done\":true,\"eval_count\":2}")
    );
}

#[test]
fn lf_and_crlf_terminate_cr_is_stripped() {
    let out = decode(b"a\nb\r\nc\n");
    assert_eq!(out.lines, vec!["a", "b", "c"]);
    assert_eq!(out.last, None);
}

#[test]
fn lone_cr_is_not_a_line_terminator() {
    let out = decode(b"{\"a\":\"x\ry\"}\n");
    assert_eq!(out.lines, vec!["{\"a\":\"x\ry\"}"]);
}

#[test]
fn crlf_split_across_reads() {
    let out = decode_chunks(
        [b"{\"a\":1}\r".as_slice(), b"\n{\"b\":2}\r", b"\n"],
        DEFAULT_MAX_EVENT_BYTES,
    );
    assert_eq!(out.lines, vec!["{\"a\":1}", "{\"b\":2}"]);
    assert_eq!(out.last, None);
}

#[test]
fn blank_lines_skipped() {
    let out = decode(b"\n\r\n  \n\t\r\n{}\n\n");
    assert_eq!(out.lines, vec!["{}"]);
    assert_eq!(decode(b"{}\n  \r").last, None, "blank unterminated line");
}

#[test]
fn each_line_out_as_soon_as_its_lf_arrives() {
    let mut dec = NdjsonDecoder::new();
    let mut lines = Vec::new();
    dec.feed(b"{\"done\":", &mut lines).unwrap();
    assert!(lines.is_empty());
    dec.feed(b"false}\n{", &mut lines).unwrap();
    assert_eq!(lines, vec!["{\"done\":false}"]);
}

#[test]
fn finish_returns_unterminated_last_line_once() {
    let mut dec = NdjsonDecoder::new();
    let mut lines = Vec::new();
    dec.feed(b"{\"a\":1}\n{\"done\":true}\r", &mut lines)
        .unwrap();
    assert_eq!(lines, vec!["{\"a\":1}"]);
    assert_eq!(dec.finish().as_deref(), Some("{\"done\":true}"));
    assert_eq!(dec.finish(), None);
}

#[test]
fn finish_with_invalid_utf8_last_line_is_lossy() {
    let out = decode(b"{\"a\":\"\xE4\xB8");
    assert_eq!(out.last.as_deref(), Some("{\"a\":\"\u{FFFD}"));
}

#[test]
fn multibyte_utf8_split_at_every_byte() {
    let text = "{\"response\":\"中文 🦀🎉 한국어 é\"}\n";
    let out = decode_every_way(text.as_bytes(), DEFAULT_MAX_EVENT_BYTES);
    assert_eq!(out.lines, vec![text.trim_end()]);
}

#[test]
fn invalid_utf8_in_a_complete_line_is_an_error() {
    let out = decode_every_way(b"{}\n{\"a\":\"\xFF\"}\n{}\n", DEFAULT_MAX_EVENT_BYTES);
    assert_eq!(out.lines, vec!["{}"]);
    assert_eq!(out.error, Some(DecodeError::InvalidUtf8));
}

#[test]
fn line_longer_than_cap_is_too_large() {
    let limit = 32;
    let ok = format!("{}\n", "x".repeat(limit));
    assert_eq!(decode_every_way(ok.as_bytes(), limit).lines.len(), 1);
    let long = format!("{}\n", "x".repeat(limit + 1));
    let out = decode_every_way(long.as_bytes(), limit);
    assert_eq!(out.error, Some(DecodeError::TooLarge { limit }));
}

#[test]
fn endless_line_fails_without_buffering_it_all() {
    let limit = 1000;
    let mut dec = NdjsonDecoder::with_max_line_bytes(limit);
    let mut lines = Vec::new();
    let mut fed = 0usize;
    let err = loop {
        match dec.feed(&[b'7'; 64], &mut lines) {
            Ok(()) => fed += 64,
            Err(err) => break err,
        }
        assert!(fed <= limit);
    };
    assert_eq!(err, DecodeError::TooLarge { limit });
}

#[test]
fn poisoned_after_error() {
    let mut dec = NdjsonDecoder::with_max_line_bytes(4);
    let mut lines = Vec::new();
    let err = dec.feed(b"{\"a\":1}\n", &mut lines).unwrap_err();
    assert_eq!(err, DecodeError::TooLarge { limit: 4 });
    assert_eq!(dec.feed(b"{}\n", &mut lines), Err(err));
    assert_eq!(dec.finish(), None);
    assert!(lines.is_empty());
}

#[test]
fn sixteen_mib_of_one_byte_reads_completes() {
    // No duration asserted: this only shows a large stream of tiny reads goes through.
    let line = b"{\"message\":{\"content\":\"tok\"},\"done\":false}\n";
    let total = 16 << 20;
    let mut dec = NdjsonDecoder::with_max_line_bytes(4096);
    let mut lines = Vec::new();
    let (mut fed, mut count) = (0usize, 0usize);
    while fed < total {
        for b in line.chunks(1) {
            dec.feed(b, &mut lines).unwrap();
        }
        fed += line.len();
        count += lines.len();
        lines.clear();
    }
    assert_eq!(count, fed / line.len());
    assert_eq!(dec.finish(), None);
}

fn ndjson_ish_byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        4 => prop::sample::select(b"{}\":a \r\n\t\xE4\xB8\xAD\xF0\x9F".to_vec()),
        1 => any::<u8>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn prop_random_bytes_random_splits_same_as_whole(
        input in prop::collection::vec(ndjson_ish_byte(), 0..300),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..10),
        limit in prop::sample::select(vec![4usize, 16, 64, DEFAULT_MAX_EVENT_BYTES]),
    ) {
        let whole = decode_chunks([input.as_slice()], limit);
        let offsets: Vec<usize> = cuts.iter().map(|i| i.index(input.len() + 1)).collect();
        let parts = common::split_at_offsets(&input, &offsets);
        prop_assert_eq!(&decode_chunks(parts.iter().map(Vec::as_slice), limit), &whole);
        prop_assert_eq!(&decode_chunks(input.chunks(1), limit), &whole);
        let well_formed = |l: &String| {
            !l.contains('\n') && !l.bytes().all(|b| matches!(b, b' ' | b'\t' | b'\r'))
        };
        prop_assert!(whole.lines.iter().all(well_formed), "{:?}", whole.lines);
    }

    #[test]
    fn prop_lines_round_trip(
        // JSON-ish documents: no LF, not blank, not ending in CR.
        docs in prop::collection::vec("\\{\"k\":\"[^\\n\\r]{0,12}\"\\}", 0..12),
        crlf in prop::collection::vec(any::<bool>(), 1..6),
        blanks in prop::collection::vec(0usize..3, 1..6),
        terminate_last in any::<bool>(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..10),
    ) {
        let mut input = Vec::new();
        for (i, doc) in docs.iter().enumerate() {
            for _ in 0..blanks[i % blanks.len()] {
                input.extend_from_slice(b"\n");
            }
            input.extend_from_slice(doc.as_bytes());
            let last = i + 1 == docs.len();
            if !last || terminate_last {
                input.extend_from_slice(if crlf[i % crlf.len()] { b"\r\n" } else { b"\n" });
            }
        }
        let offsets: Vec<usize> = cuts.iter().map(|i| i.index(input.len() + 1)).collect();
        let parts = common::split_at_offsets(&input, &offsets);
        let out = decode_chunks(parts.iter().map(Vec::as_slice), DEFAULT_MAX_EVENT_BYTES);
        prop_assert_eq!(out.error, None);
        let mut expected = docs.clone();
        let expected_last = if terminate_last { None } else { expected.pop() };
        prop_assert_eq!(out.lines, expected);
        prop_assert_eq!(out.last, expected_last);
    }
}
