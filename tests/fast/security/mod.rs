//! Untrusted input that is not a stream: echoed secrets, schemas, trace headers, odd config files.

mod schemas_and_traces;
mod untrusted_input;
