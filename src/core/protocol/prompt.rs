//! Rendering a scenario's prompt, with the cold-cache nonce.

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

/// The scenario's messages as JSON, with `[probe NONCE] ` put at the very start of the first
/// message's content when a nonce is given.
pub fn render_messages(messages: &[Message], nonce: Option<&str>) -> Vec<serde_json::Value> {
    messages
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let content = match nonce {
                Some(n) if i == 0 => format!("[probe {n}] {}", m.content),
                _ => m.content.clone(),
            };
            serde_json::json!({ "role": m.role, "content": content })
        })
        .collect()
}

/// The scenario as one plain prompt for the completion-style protocols (`openai-completions`,
/// `tgi`, `llama-cpp`): the messages' contents, nonce first as in [`render_messages`], joined
/// with a blank line ("\n\n"). Roles are dropped and no chat template is applied: these
/// endpoints continue raw text.
pub fn render_prompt(messages: &[Message], nonce: Option<&str>) -> String {
    render_messages(messages, nonce)
        .iter()
        .filter_map(|m| m["content"].as_str())
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
            Message {
                role: "system".into(),
                content: "Be brief.".into(),
            },
            Message {
                role: "user".into(),
                content: "Hi".into(),
            },
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
