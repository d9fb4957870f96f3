//! The repository itself: its docs, its layering (and `Metrics` in groups) and its one
//! definition per quantile.

mod docs;
mod layering;
mod quantiles;
