//! The fidelity tier, `cargo test --test fidelity -- --test-threads=1` (run by scripts/test.sh):
//! timing and memory claims measured against ground truth recorded in the same run (the
//! simulator's send instants, the process's RSS), one test at a time so that no other test's
//! load or memory is in the reading. The numbers behind each bound are in BENCHMARKS.md. See
//! CONTRIBUTING.md, "Tests in tiers".

#[path = "../support/mod.rs"]
mod common;

mod accuracy;
mod auth_flood;
mod bench_sweep;
mod coalesce;
mod compare_measured;
mod compare_tail;
mod kernel_timestamps;
mod memory_trim;
mod replica_churn;
mod scrape_flood;
mod stream_limits;
