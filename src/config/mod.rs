//! Configuration: YAML loading, validation, defaults.
