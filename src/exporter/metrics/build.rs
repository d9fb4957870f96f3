//! The exporter's build: `llm_probe_build_info{version} 1`, last in the exposition.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use super::fast::Catalog;

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
}

/// Registers the build information in `r`; it never changes.
pub(super) fn register(r: &mut Catalog) {
    let build = Family::<BuildLabels, Gauge>::default();
    build
        .get_or_create(&BuildLabels {
            version: env!("CARGO_PKG_VERSION"),
        })
        .set(1);
    r.register("build_info", "Build information (value 1)", build);
}
