//! The wire protocols: decoders, captured streams, faults, tool calls, untrusted streams.

mod bedrock;
mod decode_ndjson;
mod decode_sse;
mod faults;
mod fuzz;
mod protocol_faults;
mod stream_trust;
mod streams;
mod tools;
