//! llm-probe: synthetic streaming probes for LLM inference endpoints.
//!
//! The modules follow the data flow (see `DESIGN.md` §4):
//! `config` → `schedule` → `probe` → `decode` → `protocol` → `measure` → `metrics` → `server`,
//! with `daemon` wiring them together (and `trim` giving the allocator's free memory back every
//! 15 s), `simulate` the scripted test endpoint, `app`, `cli`,
//! `demo` and `report` the command line, `sanitize` making server-sent text safe to print
//! and URLs safe to quote, `clock` the deadline arithmetic that cannot overflow, and `check` the
//! answer checks a scenario declares (`expect:`), run on the assembled answer after a probe.
//!
//! Imports go one way along that flow where it matters: `schedule` uses `probe` (never the
//! reverse); `server` uses `metrics`, which owns the exposition formats and their `Accept`
//! negotiation (never the reverse). The command line sits on top: each command's module
//! (`bench`, `compare`, `baseline`, `healthcheck`, `logging`, …) owns its options and output
//! formats, `cli` maps the flags onto them, and nothing but `app` and `main` imports `cli`
//! (`tests/fast/project/layering.rs` checks these rules).

pub mod check;
pub mod clock;
pub mod config;
pub mod decode;
pub mod engine;
pub mod measure;
pub mod metrics;
pub mod probe;
pub mod protocol;
pub mod reload;
pub mod replicas;
pub mod schedule;
pub mod server;
pub mod shard;
pub mod watch;

pub mod daemon;
pub mod failure_log;
pub mod history;
pub mod simulate;
pub mod trim;

pub mod baseline;
pub mod bench;

pub mod app;
pub mod cli;
pub mod compare;
pub mod demo;
pub mod healthcheck;
pub mod listen;
pub mod logging;
pub mod report;
pub mod safe_write;
pub mod sanitize;
