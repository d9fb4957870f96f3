//! The exporter: /metrics in every format, exemplars, web config, on-demand probes and their limits.

mod exemplars;
mod exposition_equivalence;
mod golden_exposition;
mod golden_protobuf;
mod on_demand_limits;
mod request_ids;
mod server;
mod web_config;
