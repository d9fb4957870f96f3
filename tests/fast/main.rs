//! The fast tier, `cargo test`: unit-like tests over loopback (the simulator, the daemon, the
//! exporter, the command line) that start no program but llm-probe's own binary, grouped by
//! subject. Time-driven logic runs on tokio's paused clock; what must use the wall clock asserts
//! against ground truth recorded in the same run. See CONTRIBUTING.md, "Tests in tiers".

#[path = "../support/mod.rs"]
mod common;

mod config;
mod daemon;
mod exporter;
mod measure;
mod project;
mod protocols;
mod security;
mod status;
mod tools;
