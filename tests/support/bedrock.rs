//! The Bedrock model id and token count, shared by the fast tier's Bedrock tests and the
//! end-to-end test with AWS's own SDK.

/// The model id: its `:` must be percent-encoded in the path, as AWS's clients do.
pub const MODEL: &str = "anthropic.claude-3-haiku-20240307-v1:0";
/// Token events of the Bedrock tests' stream, `common::faulty` (20).
pub const TOKENS: u32 = 20;
