//! What a probe measures: client phases, connections, TLS, trace context, answer checks, engine metrics, the TTFT split, generated long prompts, multi-turn conversations.

mod answer_checks;
mod client_phases;
mod connection;
mod conversations;
mod engine_metrics;
mod long_prompts;
mod tls;
mod trace_context;
mod ttft_split;
