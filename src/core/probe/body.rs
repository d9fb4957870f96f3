//! What came back when a 2xx body is not the protocol's stream: a proxy's HTML error page, a whole
//! non-streamed completion (the server ignored `stream: true`), an error object, plain text.
//! The failure's detail names the content type and what the body is, with a short excerpt made
//! safe to print (control characters replaced, whitespace collapsed, at most
//! [`EXCERPT_CHARS`] characters).

use crate::measure::{Failure, FailureReason, Observations};

/// Longest excerpt of a body in a failure detail, in characters.
pub const EXCERPT_CHARS: usize = 160;

/// The failure for a 2xx body that carries no event of the protocol's stream. A JSON body with an
/// `error` is the server's error (`stream_error`, also recorded in `obs`); anything else is
/// `decode`, with a detail like `HTTP 200 text/html is not an event stream: an HTML page
/// "502 Bad Gateway": <!DOCTYPE html>…`.
pub(super) fn not_a_stream(
    status: u16,
    content_type: &str,
    body: &[u8],
    obs: &mut Observations,
) -> Failure {
    let text = String::from_utf8_lossy(body);
    let json = serde_json::from_str::<serde_json::Value>(text.trim()).ok();
    if let Some(err) = json
        .as_ref()
        .and_then(|v| v.get("error"))
        .filter(|e| !e.is_null())
    {
        let msg = crate::protocol::error_message(err);
        let kind = err.get("type").and_then(serde_json::Value::as_str);
        obs.stream_error_of_type(&msg, kind);
        if obs.overloaded {
            // As the event stream's error reads: the type, then the message if any.
            let detail = match msg.trim() {
                "" => "overloaded_error".to_string(),
                m => format!("overloaded_error: {m}"),
            };
            return Failure::new(FailureReason::Overloaded, detail);
        }
        return Failure::new(FailureReason::StreamError, msg);
    }
    let what = match &json {
        Some(v) if is_completion(v) => {
            "a non-streamed completion (the server or a gateway ignored `stream: true`)".to_string()
        }
        Some(_) => "a JSON document".to_string(),
        None if text.trim_start().starts_with('<') => match html_title(&text) {
            Some(title) => format!("an HTML page \"{title}\""),
            None => "an HTML or XML page".to_string(),
        },
        None if body.is_empty() => "an empty body".to_string(),
        None if text.trim().is_empty() => "only blank lines".to_string(),
        None if looks_like_a_stream(&text) => format!(
            "a stream sent under the wrong content type (the server or a gateway labels its stream {}; it should be text/event-stream or application/x-ndjson)",
            excerpt(content_type.as_bytes(), 64)
        ),
        None if is_binary(body) => {
            "binary data that is no event (for Bedrock: no frame whose prelude checksum matches)"
                .to_string()
        }
        None => "text without any event".to_string(),
    };
    let ct = match content_type.trim() {
        "" => "without a content type".to_string(),
        ct => excerpt(ct.as_bytes(), 64),
    };
    let shown = excerpt(body, EXCERPT_CHARS);
    let sep = if shown.is_empty() { "" } else { ": " };
    Failure::new(
        FailureReason::Decode,
        format!("HTTP {status} {ct} is not an event stream: {what}{sep}{shown}"),
    )
}

/// Whether `body` is binary rather than text: not UTF-8 in its first 64 bytes (a character cut
/// at the end aside), or a control character other than tab, CR and LF among them.
fn is_binary(body: &[u8]) -> bool {
    let head = &body[..body.len().min(64)];
    let text = match std::str::from_utf8(head) {
        Ok(t) => t,
        Err(e) if e.error_len().is_none() => {
            std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or("")
        }
        Err(_) => return true,
    };
    text.chars()
        .any(|c| c.is_control() && !matches!(c, '\t' | '\r' | '\n'))
}

/// Whether `text` (a body that is not one JSON document) reads as a stream: its first line is
/// an SSE field (`data:`, `event:`, `id:`, `retry:`, a `:` comment) or a JSON object (NDJSON).
fn looks_like_a_stream(text: &str) -> bool {
    let first = text.trim_start().lines().next().unwrap_or("").trim_end();
    ["data:", "event:", "id:", "retry:", ":"]
        .iter()
        .any(|f| first.starts_with(f))
        || (first.starts_with('{')
            && serde_json::from_str::<serde_json::Value>(first).is_ok_and(|v| v.is_object()))
}

/// Whether a JSON body is a whole completion of one of the protocols: OpenAI chat, completions
/// and Responses, Anthropic, Ollama, TGI, llama.cpp native, Gemini (`candidates`, alone or as
/// the JSON array `streamGenerateContent` sends without `alt=sse`), Bedrock Converse.
fn is_completion(v: &serde_json::Value) -> bool {
    let s = |k| v.get(k).and_then(serde_json::Value::as_str);
    let has = |k| v.get(k).is_some();
    matches!(
        s("object"),
        Some("chat.completion" | "text_completion" | "response")
    ) || s("type") == Some("message")
        || has("choices")
        || (has("done") && (has("message") || has("response")))
        || has("generated_text")
        || (has("content") && has("stop"))
        || has("candidates")
        || (has("output") && has("stopReason"))
        || v.as_array().and_then(|a| a.first()).is_some_and(|first| {
            first.get("generated_text").is_some() || first.get("candidates").is_some()
        })
}

/// Whether the first event of a stream is a whole answer rather than a piece of one: a
/// non-streamed completion wrapped as the stream's only event (`data: {"object":
/// "chat.completion", …}`, an Ollama or llama.cpp document that is done and carries the text,
/// a TGI `generated_text` without a `token`, an Anthropic `message`, a Responses `response`).
/// Stream events never look like these: their first event carries a piece, or nothing.
pub(super) fn is_whole_answer(v: &serde_json::Value) -> bool {
    use crate::protocol::has_text;
    let s = |k| v.get(k).and_then(serde_json::Value::as_str);
    let has = |k| v.get(k).is_some_and(|x| !x.is_null());
    // A chat chunk has `delta`s (some servers add a `message` beside them, or label chunks
    // `chat.completion`); a whole answer has only `message`s.
    let choices = v.get("choices").and_then(serde_json::Value::as_array);
    let whole_choices = choices.is_some_and(|cs| {
        cs.iter().any(|c| c.get("message").is_some()) && cs.iter().all(|c| c.get("delta").is_none())
    });
    whole_choices
        || (s("object") == Some("response") && !has("type"))
        || s("type") == Some("message")
        || (v.get("done") == Some(&serde_json::Value::Bool(true))
            && v.get("message").is_some_and(|m| has_text(m, "content")))
        || (v.get("stop") == Some(&serde_json::Value::Bool(true)) && has_text(v, "content"))
        || (has("generated_text") && !has("token"))
        || v.as_array()
            .and_then(|a| a.first())
            .is_some_and(|first| first.get("generated_text").is_some())
}

/// The `<title>` of an HTML page, made safe to print.
fn html_title(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    let start = lower.find("<title")?;
    let open_end = start + lower[start..].find('>')? + 1;
    let close = open_end + lower[open_end..].find("</title")?;
    let title = excerpt(&text.as_bytes()[open_end..close], 80);
    (!title.is_empty()).then_some(title)
}

/// At most `max` characters of `bytes` (lossily decoded), safe for a log line or a terminal:
/// every run of whitespace, control or bidirectional control characters
/// ([`crate::sanitize::is_unsafe_char`]) becomes one space, and the result is trimmed;
/// `…` marks a cut.
pub fn excerpt(bytes: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::new();
    let mut chars = 0;
    let mut space = false;
    for c in text.trim().chars() {
        if c.is_whitespace() || crate::sanitize::is_unsafe_char(c) {
            space = true;
            continue;
        }
        if chars == max {
            out.push('…');
            return out;
        }
        if space && !out.is_empty() {
            out.push(' ');
            chars += 1;
        }
        space = false;
        out.push(c);
        chars += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    fn detail(ct: &str, body: &str) -> Failure {
        not_a_stream(
            200,
            ct,
            body.as_bytes(),
            &mut Observations::new(Instant::now()),
        )
    }

    #[test]
    fn each_kind_of_body_is_named() {
        let f = detail(
            "text/html; charset=utf-8",
            "<!DOCTYPE html>\n<html><head><title>502 Bad\n Gateway</title></head><body>nginx</body></html>",
        );
        assert_eq!(f.reason, FailureReason::Decode);
        assert!(
            f.detail.starts_with("HTTP 200 text/html; charset=utf-8 is not an event stream: an HTML page \"502 Bad Gateway\": <!DOCTYPE html> <html>"),
            "{}",
            f.detail
        );
        for body in [
            r#"{"id":"c1","object":"chat.completion","choices":[{"message":{"content":"Hi"}}]}"#,
            r#"{"type":"message","content":[{"type":"text","text":"Hi"}]}"#,
            r#"{"model":"m","message":{"content":"Hi"},"done":true}"#,
            r#"{"content":"Hi","stop":true}"#,
            r#"[{"generated_text":"Hi"}]"#,
            r#"{"object":"response","output":[]}"#,
        ] {
            let f = detail("text/event-stream", body);
            assert!(
                f.detail.contains("a non-streamed completion"),
                "{body}: {}",
                f.detail
            );
        }
        assert!(detail("", "Bad Gateway").detail.starts_with(
            "HTTP 200 without a content type is not an event stream: text without any event: Bad Gateway"
        ));
        assert!(detail("application/json", "[1,2]")
            .detail
            .contains("a JSON document: [1,2]"));
        // A binary frame whose prelude checksum is wrong is binary, not text; text with a
        // character cut by the 64-byte head is still text.
        let frame = b"\x00\x00\x00\x2d\x00\x00\x00\x10\xde\xad\xbe\xef:event-type";
        let f = not_a_stream(
            200,
            "application/vnd.amazon.eventstream",
            frame,
            &mut Observations::new(Instant::now()),
        );
        assert!(
            f.detail.contains("binary data that is no event"),
            "{}",
            f.detail
        );
        let text = format!("{}é and more", "a".repeat(63));
        assert!(detail("", &text).detail.contains("text without any event"));
    }

    #[test]
    fn an_error_object_is_the_servers_error() {
        let mut obs = Observations::new(Instant::now());
        let f = not_a_stream(
            200,
            "application/json",
            br#"{"error":{"message":"no such model"}}"#,
            &mut obs,
        );
        assert_eq!(f.reason, FailureReason::StreamError);
        assert_eq!(f.detail, "no such model");
        assert_eq!(obs.stream_error.as_deref(), Some("no such model"));
        // Anthropic's overloaded error as the whole body is the server's capacity, not a fault.
        let mut obs = Observations::new(Instant::now());
        let f = not_a_stream(
            200,
            "application/json",
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            &mut obs,
        );
        assert_eq!(
            (f.reason, f.detail.as_str()),
            (FailureReason::Overloaded, "overloaded_error: Overloaded")
        );
        assert!(obs.overloaded);
    }

    #[test]
    fn excerpts_are_bounded_and_printable() {
        assert_eq!(excerpt(b"  a\x1b[31m\r\n\tb  ", 10), "a [31m b");
        let long = "é".repeat(500);
        let e = excerpt(long.as_bytes(), EXCERPT_CHARS);
        assert_eq!(e.chars().count(), EXCERPT_CHARS + 1);
        assert!(e.ends_with('…'));
        assert_eq!(excerpt(&[0xff, b'x'], 5), "\u{fffd}x");
        // Bidirectional controls reorder what a page or terminal shows.
        assert_eq!(
            excerpt("evil\u{202e}gpj.exe\u{2066}x".as_bytes(), 40),
            "evil gpj.exe x"
        );
    }
}
