//! The offline tools: bench, baseline, compare, and the files they write.

mod baseline;
mod bench;
mod bench_input;
mod compare_cli;
mod safe_writes;
