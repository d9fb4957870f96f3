//! The status pages, their percentiles and what a reload does to them.

mod pages;
mod quantiles;
mod reload_races;
