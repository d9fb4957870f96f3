//! The shipped dashboards: lint, queries against a real Prometheus, schema, Kubernetes manifests.

mod kubernetes;
mod lint;
mod queries;
mod schema;
