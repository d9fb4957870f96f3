//! The repository itself: its docs, its layering and its one definition per quantile.

mod docs;
mod layering;
mod quantiles;
