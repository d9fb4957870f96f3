//! What a probe measures: client phases, connections, TLS, trace context, answer checks, engine metrics, the TTFT split.

mod answer_checks;
mod client_phases;
mod connection;
mod engine_metrics;
mod tls;
mod trace_context;
mod ttft_split;
