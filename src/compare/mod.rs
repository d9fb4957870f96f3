//! `llm-probe compare`: is the AFTER run slower than the BEFORE run, by how much, how sure?

pub mod stats;
pub mod verdict;
