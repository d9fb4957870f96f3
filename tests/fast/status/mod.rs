//! The status pages, their percentiles and what a reload does to them.

mod pages;
mod pool;
mod quantiles;
mod reload_races;
