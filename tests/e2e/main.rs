//! The end-to-end tier, `cargo test --test e2e` (run by scripts/test.sh after installing
//! what it needs): the real components users run beside llm-probe (Prometheus, promtool,
//! Alertmanager, Chromium, Node, kubectl, hadolint, cargo-audit, the PyPI mocks, llama.cpp,
//! vLLM). A missing component fails its test with how to install it; nothing is skipped. See
//! CONTRIBUTING.md, "Tests in tiers".

#[path = "../support/mod.rs"]
mod common;

mod alerts;
mod browser;
mod dashboards;
mod engines;
mod fleet;
mod project;
mod prometheus;
mod tools;
