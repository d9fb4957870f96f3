//! The running daemon and the command line: schedules, failure log, debug output, signals, secrets,
//! a hosted API's quota.

mod cli;
mod commands;
mod debug_probe;
mod failure_log;
mod lifecycle;
mod process;
mod rate_limits;
mod replicas;
mod secrets;
mod terminal;
