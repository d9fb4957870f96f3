//! The status pages and what a reload does to them.

mod pages;
mod reload_races;
