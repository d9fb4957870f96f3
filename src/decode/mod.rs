//! TEMPORARY STUB — replaced by the decode branch.
pub mod sse;
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("stream event larger than {limit} bytes")]
    TooLarge { limit: usize },
    #[error("stream is not valid UTF-8")]
    InvalidUtf8,
}
pub const DEFAULT_MAX_EVENT_BYTES: usize = 1 << 20;
