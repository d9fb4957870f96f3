//! The repository itself: its docs and its layering.

mod docs;
mod layering;
