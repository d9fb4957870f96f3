//! Token counts a server reports (`usage`): the last report of each count wins; an absent,
//! `null` or mistyped count changes nothing (docs/protocols.md, "Stream faults the probe gets right").

use serde_json::Value;

use super::json::u64_at;
use crate::measure::Observations;

/// What one OpenAI-style API calls the usage fields. Both put the cached prompt tokens under
/// `cached_tokens` inside the details object.
pub(super) struct UsageNames {
    /// Generated tokens.
    output: &'static str,
    /// Prompt tokens.
    input: &'static str,
    /// The object that holds `cached_tokens`.
    input_details: &'static str,
}

/// Chat Completions and legacy completions: `completion_tokens`, `prompt_tokens`,
/// `prompt_tokens_details.cached_tokens`.
pub(super) const CHAT: UsageNames = UsageNames {
    output: "completion_tokens",
    input: "prompt_tokens",
    input_details: "prompt_tokens_details",
};

/// The Responses API: `output_tokens`, `input_tokens`, `input_tokens_details.cached_tokens`.
pub(super) const RESPONSES: UsageNames = UsageNames {
    output: "output_tokens",
    input: "input_tokens",
    input_details: "input_tokens_details",
};

/// Reads a `usage` object whose fields are called `names` into `obs.usage`.
pub(super) fn read(usage: &Value, names: &UsageNames, obs: &mut Observations) {
    let cached = (usage.get(names.input_details)).and_then(|d| u64_at(d, "cached_tokens"));
    record(
        obs,
        u64_at(usage, names.output),
        u64_at(usage, names.input),
        cached,
    );
}

/// Records one usage report: each count given replaces the earlier one; `None` keeps it.
pub(super) fn record(
    obs: &mut Observations,
    completion: Option<u64>,
    prompt: Option<u64>,
    cached_prompt: Option<u64>,
) {
    let u = &mut obs.usage;
    u.completion_tokens = completion.or(u.completion_tokens);
    u.prompt_tokens = prompt.or(u.prompt_tokens);
    u.cached_prompt_tokens = cached_prompt.or(u.cached_prompt_tokens);
}
