//! The offline tools: bench, baseline, compare, the files they write, and the JSON Schemas of
//! the reports.

mod baseline;
mod bench;
mod bench_input;
mod compare_cli;
mod report_schemas;
mod safe_writes;
