//! llm-probe: synthetic streaming probes for LLM inference endpoints.
//!
//! The source tree is in layers, one folder each (CONTRIBUTING.md, "Layout"); a layer imports
//! only from itself and the layers listed before it, and no two modules import each other, even
//! through others (`tests/fast/project/layering.rs` checks both). A module's path stays
//! `crate::config`, `crate::metrics`, …: the layer is where its file lives, not a path segment.
//!
//! - **`src/core/`, the measurement core.** `config` (YAML in, a validated `Config` out, the
//!   baseline file format it loads), `probe` (the only network IO: one streaming request,
//!   kernel-stamped reads) → `decode` (sans-IO SSE and NDJSON framing) → `protocol` (per-API
//!   adapters, and beside each its server side: endpoint path and wire shapes) → `measure` (the timeline and the derived numbers), `check` (the answer checks a
//!   scenario declares), `engine` (an inference engine's own metrics beside the probe),
//!   `report` (one probe's record), `stats` (every quantile definition, named; intervals),
//!   and the utilities `clock` (deadline arithmetic that cannot overflow), `sanitize` (text safe
//!   to print, URLs safe to quote), `logging`, `safe_write`.
//! - **`src/exporter/`, the daemon.** `daemon` wires the rest: `schedule` (one task per pair),
//!   `metrics` (every family and the exposition formats), `server` (`/metrics`, the status
//!   pages, reloads), `history`, `reload`, `replicas` (replica discovery), `shard`, `watch`, `trim`,
//!   `failure_log`, `listen`.
//! - **`src/simulate/`, the simulator**: the scripted endpoint that speaks every protocol, in
//!   the wire shapes of `protocol`'s server side; it owns the timing, the load model and the
//!   faults.
//! - **`src/tools/`, the offline tools**: `bench`, `compare`, `baseline` and the JSON
//!   `schemas` of their reports.
//! - **`src/command/`, the command line**: `cli` (the flags, mapped onto each layer's own
//!   options; nothing but `app` and `main` imports it), `app` (runs a subcommand, one file
//!   each: `run`, `check_config`, `probe_once`, `simulate`, and the process `signals`), `demo`,
//!   `healthcheck`; `src/main.rs` on top.

// The measurement core.
#[path = "core/check/mod.rs"]
pub mod check;
#[path = "core/clock.rs"]
pub mod clock;
#[path = "core/config/mod.rs"]
pub mod config;
#[path = "core/decode/mod.rs"]
pub mod decode;
#[path = "core/engine/mod.rs"]
pub mod engine;
#[path = "core/logging.rs"]
pub mod logging;
#[path = "core/measure/mod.rs"]
pub mod measure;
#[path = "core/probe/mod.rs"]
pub mod probe;
#[path = "core/protocol/mod.rs"]
pub mod protocol;
#[path = "core/report.rs"]
pub mod report;
#[path = "core/safe_write.rs"]
pub mod safe_write;
#[path = "core/sanitize.rs"]
pub mod sanitize;
#[path = "core/stats/mod.rs"]
pub mod stats;

// The daemon.
#[path = "exporter/daemon.rs"]
pub mod daemon;
#[path = "exporter/failure_log.rs"]
pub mod failure_log;
#[path = "exporter/history.rs"]
pub mod history;
#[path = "exporter/listen.rs"]
pub mod listen;
#[path = "exporter/metrics/mod.rs"]
pub mod metrics;
#[path = "exporter/reload.rs"]
pub mod reload;
#[path = "exporter/replicas/mod.rs"]
pub mod replicas;
#[path = "exporter/schedule.rs"]
pub mod schedule;
#[path = "exporter/server/mod.rs"]
pub mod server;
#[path = "exporter/shard.rs"]
pub mod shard;
#[path = "exporter/trim.rs"]
pub mod trim;
#[path = "exporter/watch.rs"]
pub mod watch;

// The simulator.
pub mod simulate;

// The offline tools.
#[path = "tools/baseline/mod.rs"]
pub mod baseline;
#[path = "tools/bench/mod.rs"]
pub mod bench;
#[path = "tools/compare/mod.rs"]
pub mod compare;
#[path = "tools/schemas.rs"]
pub mod schemas;

// The command line.
#[path = "command/app/mod.rs"]
pub mod app;
#[path = "command/cli.rs"]
pub mod cli;
#[path = "command/demo.rs"]
pub mod demo;
#[path = "command/healthcheck.rs"]
pub mod healthcheck;
