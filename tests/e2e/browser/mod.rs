//! The status pages and bench charts in a real headless Chromium.

mod bench_chart;
mod status_browser;
mod status_pages;
