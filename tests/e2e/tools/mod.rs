//! The offline tools against a real Prometheus.

mod baseline_prometheus;
mod compare_prometheus;
