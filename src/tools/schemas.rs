//! The JSON Schemas (draft 2020-12) of the JSON reports, generated from the types that write
//! them and checked into docs/schemas/ (a test keeps the files equal to [`all`] and validates
//! real outputs against them).

use schemars::JsonSchema;

/// Each report's schema under its file name in docs/schemas/: `bench --output json`,
/// `compare --output json`, `compare --prometheus.url … --output json` and `probe-once --output
/// json`.
pub fn all() -> [(&'static str, schemars::Schema); 4] {
    [
        (
            "bench.schema.json",
            schema_for::<crate::bench::json::BenchFile>(),
        ),
        (
            "compare.schema.json",
            schema_for::<crate::compare::report::CompareReport<'static>>(),
        ),
        (
            "compare-prometheus.schema.json",
            schema_for::<crate::compare::buckets_report::WindowReport<'static>>(),
        ),
        (
            "probe-once.schema.json",
            schema_for::<crate::report::ProbeRecord>(),
        ),
    ]
}

/// The schema of what `T` serializes to. Readers' defaults are left out (`default`): a schema
/// describes what the writer writes, and it writes every field it has.
pub fn schema_for<T: JsonSchema>() -> schemars::Schema {
    fn no_default(s: &mut schemars::Schema) {
        s.remove("default");
    }
    schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .with_transform(schemars::transform::RecursiveTransform(
            no_default as fn(&mut schemars::Schema),
        ))
        .into_generator()
        .into_root_schema_for::<T>()
}
