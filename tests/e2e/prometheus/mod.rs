//! A real Prometheus and promtool scraping the exporter.

mod exemplars;
mod exposition;
mod histogram_accuracy;
mod native_histograms;
mod request_ids;
mod web_config;
