//! llm-probe: synthetic streaming probes for LLM inference endpoints.
//!
//! The modules follow the data flow (see `DESIGN.md` §4):
//! `config` → `schedule` → `probe` → `decode` → `protocol` → `measure` → `metrics` → `server`.

pub mod config;
pub mod decode;
