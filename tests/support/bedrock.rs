//! The Bedrock simulator's script and model id, shared by the fast tier's Bedrock tests and the
//! end-to-end test with AWS's own SDK.

use std::time::Duration;

use llm_probe::simulate::{Fault, Script};

/// The model id: its `:` must be percent-encoded in the path, as AWS's clients do.
pub const MODEL: &str = "anthropic.claude-3-haiku-20240307-v1:0";
/// Token events of [`script`].
pub const TOKENS: u32 = 20;

/// TTFT 30 ms, a token every 3 ms, [`TOKENS`] tokens, with `fault`.
pub fn script(fault: Fault) -> Script {
    Script {
        ttft: Duration::from_millis(30),
        itl: Duration::from_millis(3),
        tokens: TOKENS,
        fault,
        ..Script::default()
    }
}
