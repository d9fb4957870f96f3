//! The shipped alert rules in promtool, a real Prometheus and a real Alertmanager.

mod alertmanager;
mod baseline;
mod cache_canary;
mod incidents;
mod locations;
mod promtool;
mod replicas;
mod sharding;
mod ttft;
