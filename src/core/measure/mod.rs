//! The measurement contract (docs/measurement.md): a probe's timeline of monotonic instants, what the
//! server said about itself, and the pure math that turns both into TTFT, TPOT, ITL, output
//! tokens per second and E2E. No async and no IO: everything here is tested on hand-built
//! timelines.

mod answer;
mod derive;
mod failure;
mod observations;
mod outcome;
mod rate_limits;
mod split;
mod timeline;
mod trace_id;

pub use answer::{Answer, ToolCall, MAX_ANSWER_BYTES, MAX_TOOL_CALLS};
pub use derive::{
    discard_incredible_counts, measure, prompt_truncated, Measurement, TokenCountSource,
};
pub use failure::{Failure, FailureReason};
pub use observations::{
    Anomaly, Asked, CacheCanary, Identity, Observations, ServerTimings, Turn, Usage,
};
pub use outcome::ProbeOutcome;
pub use rate_limits::{RateLimitKind, RateLimitWindow, RateLimits, MAX_RESET};
pub use split::{ServerTimingSource, TtftComponent, TtftSplit};
pub use timeline::{Timeline, TimestampSource, TokenEvent, TokenKind};
pub use trace_id::TraceId;
