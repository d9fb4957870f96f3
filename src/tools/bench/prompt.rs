//! The prompt size `bench` prints in its plan, before it spends tokens: measured with one
//! request, or estimated from the text when that request gets no count.
//!
//! The scenario's text alone undercounts what a chat server feeds the model: its chat template
//! wraps every message in role markers and may add a default system prompt (SmolLM2's adds one
//! of 30-odd tokens), and a cold prefix cache adds bench's nonce. On llama.cpp with SmolLM2 the
//! text estimate of a one-sentence prompt was 16 tokens where the server counted 58. So bench
//! first sends the scenario once with `max_tokens: 1` (the same prompt, nonce included) and
//! takes the server's own `usage` count; only when the server reports none is the prompt
//! estimated, and the plan says which.
//!
//! A prompt-length sweep (`--prompt-tokens`) sends, at each level, the scenario with its
//! messages replaced by a generated prompt of that size ([`sized`]); the plan measures the
//! smallest one and extrapolates the others from it ([`extrapolate`]).

use std::fmt;

use tokio_util::sync::CancellationToken;

use crate::config::long_prompt::LongPrompt;
use crate::config::{Message, PrefixCache, Scenario};
use crate::probe::Prober;

/// The prompt size of one request of the plan, and how it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptSize {
    /// The server's own count (`usage.prompt_tokens` or its protocol's equivalent) for one
    /// request of the scenario with `max_tokens: 1`, sent before the sweep.
    Measured(u64),
    /// A rough count from the text ([`estimate`]), with why it was not measured.
    Estimated {
        /// The estimate, tokens.
        tokens: u64,
        /// Why no measurement: "the server reported no prompt token count", a failure, ….
        why: String,
    },
}

impl PromptSize {
    /// The prompt tokens per request the token spend is computed with.
    pub fn tokens(&self) -> u64 {
        match self {
            PromptSize::Measured(n) | PromptSize::Estimated { tokens: n, .. } => *n,
        }
    }
}

impl PromptSize {
    /// The plan's line for the smallest prompt of a prompt-length sweep, of `words` generated
    /// words: `prompt: 258 tokens for the generated 256, measured (…)` or `… ≈ 286 …, estimated
    /// (…)`.
    pub fn for_generated(&self, words: u32) -> String {
        match self {
            PromptSize::Measured(n) => format!(
                "prompt: {n} tokens for the generated {words}, measured (the server's count, \
                 system messages and chat template included, for one request with max_tokens 1, \
                 sent before the sweep and not part of it)"
            ),
            PromptSize::Estimated { tokens, why } => format!(
                "prompt: ≈ {tokens} tokens for the generated {words}, estimated ({} tokens per \
                 word, 4 per message) because {why}; the server's chat template may add tens of \
                 tokens more",
                GENERATED_TOKENS_PER_WORD
            ),
        }
    }
}

impl fmt::Display for PromptSize {
    /// One line for the plan: `prompt: 58 tokens per request, measured (…)` or
    /// `prompt: ≈ 16 tokens per request, estimated (…)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PromptSize::Measured(n) => write!(
                f,
                "prompt: {n} tokens per request, measured (the server's count for one request \
                 of the scenario with max_tokens 1, sent before the sweep and not part of it)"
            ),
            PromptSize::Estimated { tokens, why } => write!(
                f,
                "prompt: ≈ {tokens} tokens per request, estimated from the text (4 characters \
                 per token, 4 per message) because {why}; the server's chat template may add \
                 tens of tokens more (a default system prompt), so the spend may be higher"
            ),
        }
    }
}

/// A rough prompt size from the scenario's text: about 4 characters per token, plus 4 tokens of
/// chat template per message. It leaves out what a template adds beyond role markers (a default
/// system prompt) and bench's nonce: a floor more than an estimate. A generated prompt (the last
/// message of a scenario with [`Scenario::long_prompt`]) counts [`GENERATED_TOKENS_PER_WORD`]
/// tokens per word instead: its words are short and common, one token each.
pub fn estimate(scenario: &Scenario) -> u64 {
    let generated = scenario.long_prompt.as_ref().map(|lp| lp.tokens);
    let last = scenario.messages.len().saturating_sub(1);
    (scenario.messages.iter().enumerate())
        .map(|(i, m)| match generated {
            Some(words) if i == last => {
                (f64::from(words) * GENERATED_TOKENS_PER_WORD).ceil() as u64 + 4
            }
            _ => (m.content.chars().count() as u64).div_ceil(4) + 4,
        })
        .sum()
}

/// Tokens per word of a generated prompt in a real tokenizer: one per word and one more per
/// sentence's full stop ([`crate::config::long_prompt`]), about 1.1.
pub const GENERATED_TOKENS_PER_WORD: f64 = 1.1;

/// The most tokens per generated word [`extrapolate`] assumes: a measured ratio above it comes
/// from what the scenario adds to the prompt (system messages, the chat template), not from
/// the words.
pub const MAX_TOKENS_PER_WORD: f64 = 1.25;

/// Why `scenario` cannot be sent with a generated prompt (`--prompt-tokens`), if it cannot:
/// its tools or `response_format` ask for an answer the generated prompt does not (a call, a
/// JSON document), so every request would fail its checks.
pub fn refuse_sized(scenario: &Scenario) -> Result<(), String> {
    let what = if !scenario.tools.is_empty() {
        "declares tools"
    } else if scenario.response_format.is_some() {
        "sets a response_format"
    } else {
        return Ok(());
    };
    Err(format!(
        "--prompt-tokens replaces the scenario's messages with a generated prompt, but scenario {:?} {what}, which asks for an answer that prompt does not; sweep prompt lengths with a plain chat scenario (its system messages are kept)",
        scenario.name
    ))
}

/// Whether the generated prompts carry the needle (a code word the answer must repeat): as the
/// scenario's own `needle:` says when it has `prompt_tokens:`, else on.
pub fn needle(scenario: &Scenario) -> bool {
    (scenario.long_prompt.as_ref()).is_none_or(|lp| lp.code_word.is_some())
}

/// `scenario` with a generated prompt of `tokens` words ([`LongPrompt`], named after the
/// scenario, with the needle as [`needle`] says) in place of its messages: its system and
/// developer messages are kept, in front. Its answer checks are only the needle's
/// (`context_truncated`) and the built-in degeneration checks: `expect:` was written for the
/// scenario's own prompt. A prefix-cache canary (`cache_canary:`) is not sent.
pub fn sized(scenario: &Scenario, tokens: u32) -> Scenario {
    let lp = LongPrompt::new(&scenario.name, tokens, needle(scenario));
    let mut messages: Vec<Message> = (scenario.messages.iter())
        .filter(|m| m.role == "system" || m.role == "developer")
        .cloned()
        .collect();
    messages.push(Message::text("user", lp.text()));
    Scenario {
        messages,
        checks: crate::check::Checks {
            degeneration: scenario.checks.degeneration,
            code_word: lp.code_word.clone(),
            ..crate::check::Checks::default()
        },
        long_prompt: Some(lp),
        // The canary's second, warm request would double every level's spend.
        cache_canary: false,
        turns: Vec::new(),
        ..scenario.clone()
    }
}

/// The prompt tokens of a level of `tokens` generated words, from the server's count
/// `smallest` for the sweep's smallest level of `smallest_words`: that count plus the
/// further words at the measured tokens per word (at least 1, at most [`MAX_TOKENS_PER_WORD`]).
pub fn extrapolate(smallest: u64, smallest_words: u32, tokens: u32) -> u64 {
    let per_word =
        (smallest as f64 / f64::from(smallest_words.max(1))).clamp(1.0, MAX_TOKENS_PER_WORD);
    let more = f64::from(tokens.saturating_sub(smallest_words));
    smallest.saturating_add((more * per_word).ceil() as u64)
}

/// Sends `scenario` once with `max_tokens: 1` (and the sweep's `prefix_cache`, so a cold
/// prompt carries its nonce) and returns the server's prompt count; [`PromptSize::Estimated`]
/// when the server reports none, the request fails before one arrives, or `cancel` fires.
pub async fn measure(
    prober: &Prober,
    scenario: &Scenario,
    prefix_cache: PrefixCache,
    cancel: &CancellationToken,
) -> PromptSize {
    let mut one = scenario.clone();
    one.max_tokens = 1;
    one.prefix_cache = prefix_cache;
    let outcome = tokio::select! {
        o = prober.probe(&one) => o,
        _ = cancel.cancelled() => {
            return PromptSize::Estimated {
                tokens: estimate(scenario),
                why: "the measuring request was interrupted".into(),
            }
        }
    };
    match (outcome.observations.usage.prompt_tokens, &outcome.result) {
        (Some(n), _) => PromptSize::Measured(n),
        (None, Ok(_)) => PromptSize::Estimated {
            tokens: estimate(scenario),
            why: "the server reported no prompt token count".into(),
        },
        (None, Err(f)) => PromptSize::Estimated {
            tokens: estimate(scenario),
            why: format!("the measuring request failed ({})", f.reason),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn larger_prompts_are_extrapolated_from_the_smallest_count() {
        // The simulator counts words: 256 + the nonce's 2.
        assert_eq!(extrapolate(258, 256, 256), 258);
        assert_eq!(extrapolate(258, 256, 4000), 258 + 3774);
        // A tokenizer's 1.1 tokens per word and a template's 30: 1.22 per further word.
        assert_eq!(extrapolate(312, 256, 4000), 312 + 4563);
        // A long system prompt does not multiply the further words.
        assert_eq!(extrapolate(756, 256, 4000), 756 + 4680);
        // A count below the words (a server that counts otherwise) assumes one per word.
        assert_eq!(extrapolate(100, 256, 1256), 1100);
    }

    #[test]
    fn the_plan_line_says_how_the_size_was_found() {
        let m = PromptSize::Measured(58).to_string();
        assert!(
            m.starts_with("prompt: 58 tokens per request, measured"),
            "{m}"
        );
        let e = PromptSize::Estimated {
            tokens: 16,
            why: "the server reported no prompt token count".into(),
        };
        assert_eq!(e.tokens(), 16);
        let e = e.to_string();
        assert!(
            e.starts_with("prompt: ≈ 16 tokens per request, estimated"),
            "{e}"
        );
        assert!(
            e.contains("because the server reported no prompt token count"),
            "{e}"
        );
    }
}
