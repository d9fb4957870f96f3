//! Pinned baselines: the accepted latency of one (target, scenario), written once by
//! `llm-probe baseline save` and exported by the daemon as `llm_probe_baseline_*` gauges, so the
//! shipped alerts compare the live P95 TTFT and median tokens/s with it.
//!
//! - the file format is the configuration's ([`crate::config::baseline_file`], re-exported here):
//!   the probes file loads baseline files, so the format sits below both;
//! - [`save`] makes one from a measurement and writes it (`baseline save --from`);
//! - [`prometheus`] makes one from a window of the daemon's histogram buckets in Prometheus
//!   (`baseline save --prometheus.url`).

pub mod prometheus;
pub mod save;

pub use crate::config::baseline_file::*;

#[cfg(test)]
mod tests;
