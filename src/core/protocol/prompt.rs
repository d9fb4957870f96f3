//! Rendering a scenario's prompt, with the cold-cache nonce.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::config::Message;

/// A fresh 16-hex-digit nonce, unique per call within a process and very likely across
/// processes (wall-clock nanoseconds mixed with a counter). Not a secret and not cryptographic:
/// it only has to defeat a prefix cache.
pub fn new_nonce() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    // SplitMix64 finaliser over time and counter.
    let mut z = t ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    format!("{:016x}", z ^ (z >> 31))
}

/// The text of each message as sent: `[probe NONCE] ` put at the very start of the first
/// message's content when a nonce is given.
pub fn texts<'a>(messages: &'a [Message], nonce: Option<&str>) -> Vec<Cow<'a, str>> {
    messages
        .iter()
        .enumerate()
        .map(|(i, m)| match nonce {
            Some(n) if i == 0 => Cow::Owned(format!("[probe {n}] {}", m.content)),
            _ => Cow::Borrowed(m.content.as_str()),
        })
        .collect()
}

/// The name of the tool that the call `id` of an earlier assistant message called (a tool
/// result carries it where the protocol wants a name, not an id: Gemini, Ollama).
pub fn tool_name<'a>(messages: &'a [Message], id: &str) -> &'a str {
    (messages.iter().flat_map(|m| &m.tool_calls))
        .find(|c| c.id == id)
        .map_or("", |c| c.name.as_str())
}

/// A tool result's text as a JSON object, for the protocols that want one (Gemini's
/// `functionResponse.response`, Bedrock's `toolResult` `json`): the text itself when it is a
/// JSON object, else `{"content": text}`.
pub fn result_object(text: &str) -> serde_json::Value {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(v @ serde_json::Value::Object(_)) => v,
        _ => serde_json::json!({ "content": text }),
    }
}

/// The scenario's messages in OpenAI's chat shape, nonce first ([`texts`]): `{role, content}`;
/// an assistant message's tool calls as `tool_calls` (`{id, type: function, function: {name,
/// arguments}}`, the arguments a JSON string; `content` null when it only calls), a tool
/// result as `{role: tool, tool_call_id, content}`.
pub fn render_messages(messages: &[Message], nonce: Option<&str>) -> Vec<serde_json::Value> {
    let texts = texts(messages, nonce);
    messages
        .iter()
        .zip(texts)
        .map(|(m, text)| {
            let mut v = serde_json::json!({ "role": m.role, "content": text });
            if !m.tool_calls.is_empty() {
                if text.is_empty() {
                    v["content"] = serde_json::Value::Null;
                }
                v["tool_calls"] = (m.tool_calls.iter())
                    .map(|c| {
                        serde_json::json!({"id": c.id, "type": "function", "function": {
                            "name": c.name,
                            "arguments": serde_json::Value::Object(c.arguments.clone()).to_string(),
                        }})
                    })
                    .collect();
            }
            if let Some(id) = &m.tool_call_id {
                v["tool_call_id"] = serde_json::json!(id);
            }
            v
        })
        .collect()
}

/// The scenario as one plain prompt for the completion-style protocols (`openai-completions`,
/// `tgi`, `llama-cpp`): the messages' contents, nonce first as in [`render_messages`], joined
/// with a blank line ("\n\n"). Roles are dropped and no chat template is applied: these
/// endpoints continue raw text.
pub fn render_prompt(messages: &[Message], nonce: Option<&str>) -> String {
    texts(messages, nonce)
        .iter()
        .filter(|t| !t.is_empty())
        .map(|t| t.as_ref())
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonces_differ() {
        let a: std::collections::HashSet<_> = (0..1000).map(|_| new_nonce()).collect();
        assert_eq!(a.len(), 1000);
    }

    #[test]
    fn nonce_goes_first_in_the_first_message_only() {
        let msgs = vec![
            Message::text("system", "Be brief."),
            Message::text("user", "Hi"),
        ];
        let r = render_messages(&msgs, Some("abc"));
        assert_eq!(r[0]["content"], "[probe abc] Be brief.");
        assert_eq!(r[1]["content"], "Hi");
        let r = render_messages(&msgs, None);
        assert_eq!(r[0]["content"], "Be brief.");
        assert_eq!(
            render_prompt(&msgs, Some("abc")),
            "[probe abc] Be brief.\n\nHi"
        );
        assert_eq!(render_prompt(&msgs[1..], None), "Hi");
    }
}
