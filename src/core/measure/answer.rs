//! What the model said: the assembled answer text, apart from its reasoning, and the tool calls
//! it made, as the protocol adapters decode them. Read by the answer checks
//! ([`crate::check`]) after the stream ended; never a metric label.

use std::time::Instant;

/// Cap on the answer text kept per probe, in bytes (64 KiB): the checks read at most this much.
/// Text beyond it is counted in [`Answer::dropped_bytes`], not kept.
pub const MAX_ANSWER_BYTES: usize = 64 << 10;

/// Cap on the tool calls kept per probe.
pub const MAX_TOOL_CALLS: usize = 16;

/// One tool call as streamed: its function name and its arguments, assembled from the deltas.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolCall {
    /// The function's name (the first non-empty one the stream gave).
    pub name: String,
    /// The arguments as the model wrote them (JSON text, when the model is right), at most
    /// [`MAX_ANSWER_BYTES`] bytes.
    pub arguments: String,
}

/// The answer of one probe, assembled from the stream.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer {
    /// The answer (non-reasoning) text, concatenated, at most [`MAX_ANSWER_BYTES`] bytes.
    pub text: String,
    /// Bytes of reasoning text received (kept apart: never checked as the answer).
    pub reasoning_bytes: u64,
    /// Answer bytes received beyond [`MAX_ANSWER_BYTES`] (not kept).
    pub dropped_bytes: u64,
    /// Tool calls by stream index, at most [`MAX_TOOL_CALLS`].
    pub tool_calls: Vec<ToolCall>,
    /// Instant of the first event that carried a tool call (its name or arguments).
    pub first_tool_call: Option<Instant>,
    /// Instant of the last event that carried tool-call arguments (the arguments are complete
    /// then).
    pub last_tool_arguments: Option<Instant>,
    /// The answer check that failed (the `check` label), set when the checks ran and one
    /// failed.
    pub failed_check: Option<&'static str>,
}

impl Answer {
    /// Appends answer text.
    pub fn push_text(&mut self, text: &str) {
        push_capped(&mut self.text, text, &mut self.dropped_bytes);
    }

    /// Counts reasoning text.
    pub fn push_reasoning(&mut self, text: &str) {
        self.reasoning_bytes += text.len() as u64;
    }

    /// Appends a tool-call delta of the call at stream `index` (a name and/or an argument
    /// fragment) received at `at`. Calls beyond [`MAX_TOOL_CALLS`] are dropped.
    pub fn push_tool_call(
        &mut self,
        index: usize,
        name: Option<&str>,
        arguments: Option<&str>,
        at: Instant,
    ) {
        let name = name.filter(|n| !n.is_empty());
        let arguments = arguments.filter(|a| !a.is_empty());
        if name.is_none() && arguments.is_none() {
            return;
        }
        if index >= MAX_TOOL_CALLS {
            return;
        }
        if self.tool_calls.len() <= index {
            self.tool_calls.resize_with(index + 1, ToolCall::default);
        }
        self.first_tool_call.get_or_insert(at);
        let call = &mut self.tool_calls[index];
        if let Some(n) = name {
            if call.name.is_empty() {
                call.name = n.chars().take(128).collect();
            }
        }
        if let Some(a) = arguments {
            push_capped(&mut call.arguments, a, &mut self.dropped_bytes);
            self.last_tool_arguments = Some(at);
        }
    }
}

fn push_capped(into: &mut String, text: &str, dropped: &mut u64) {
    let room = MAX_ANSWER_BYTES.saturating_sub(into.len());
    let kept = super::failure::prefix_within(text, room);
    into.push_str(kept);
    *dropped += (text.len() - kept.len()) as u64;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_capped_and_the_rest_counted() {
        let mut a = Answer::default();
        a.push_text(&"x".repeat(MAX_ANSWER_BYTES - 1));
        a.push_text("éé");
        assert_eq!(a.text.len(), MAX_ANSWER_BYTES - 1);
        assert_eq!(a.dropped_bytes, 4);
    }

    #[test]
    fn tool_calls_assemble_by_index() {
        let t = Instant::now();
        let mut a = Answer::default();
        a.push_tool_call(0, Some("get_weather"), Some("{\"city\":"), t);
        a.push_tool_call(1, Some("other"), None, t);
        a.push_tool_call(0, None, Some("\"Paris\"}"), t);
        a.push_tool_call(0, Some(""), Some(""), t);
        a.push_tool_call(99, Some("x"), Some("{}"), t);
        assert_eq!(a.tool_calls.len(), 2);
        assert_eq!(a.tool_calls[0].name, "get_weather");
        assert_eq!(a.tool_calls[0].arguments, "{\"city\":\"Paris\"}");
        assert_eq!(a.tool_calls[1].arguments, "");
    }
}
