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

use std::fmt;

use tokio_util::sync::CancellationToken;

use crate::config::{PrefixCache, Scenario};
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
/// system prompt) and bench's nonce: a floor more than an estimate.
pub fn estimate(scenario: &Scenario) -> u64 {
    scenario
        .messages
        .iter()
        .map(|m| (m.content.chars().count() as u64).div_ceil(4) + 4)
        .sum()
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
