//! The probes file: loading, validation, reload, credentials, cost.

mod config_watch;
mod cost;
mod credentials;
mod loading;
mod reload;
